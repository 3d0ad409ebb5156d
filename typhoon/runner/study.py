"""The one study loop: plan -> run cells -> analyse -> next look, for every study of the bundle.

:func:`run_study` runs a *policy* (:class:`typhoon.runner.policy.StudyPolicy`) that says which cells the next
look needs and what to make of them; every study of the bundle is one (``typhoon/studies/<name>/policy.py``: a
profile's grid in one look, a sequential design look by look, a curve epoch by epoch ...), and the loop names
none of them. The cells (:class:`typhoon.runner.cells.Cell`) run on one executor (:mod:`typhoon.runner.executor`): the local pool
of worker processes by default, a Dask or SLURM cluster when given; the longest first, so that no worker waits
at the end while one long cell runs. Each cell's config is resolved and validated once, by its policy, and
travels to its worker as it is.

Everything is checked before anything is written: the profile, its cells, the data and backbones, the output
folder (one batch at a time: a lock). The records on disk are the state, so a stopped study resumes: Ctrl-C or
SIGTERM stops the workers within seconds, leaves no partial record, temp file or lock, keeps the resume states of
the cells that were running, and says how to go on (:func:`stopped`); an output folder that cannot be written,
or a disk that fills up, stops the study with a message naming the path.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from typhoon import machine, paths
from typhoon.records import (
    STATUS_COLUMNS,
    check_git_repo,
    close_invocation,
    commit_cell,
    commit_paths,
    git_state,
    invocation,
    invocation_clock,
    output_folder_lock,
    record_stopped_invocation,
)
from typhoon.runner import progress, stop
from typhoon.runner.cells import Cell
from typhoon.runner.executor import CellExecutor
from typhoon.runner.policy import Finished, StudyPolicy, status_table
from typhoon.runner.workers import WorkerPool, choose_workers, slots_for


@dataclass
class Summary:
    """What a study did: one status row per cell it ran or found done, and where things are."""

    cells: pd.DataFrame
    results_csv: Path
    report: Path | None

    @property
    def ok(self) -> bool:
        return bool((self.cells["status"].isin(["ok", "skipped"])).all())

    def table(self) -> str:
        counts = self.cells.groupby("status").size().to_dict()
        lines = [f"cells: {len(self.cells)}  " + "  ".join(f"{k}: {v}" for k, v in sorted(counts.items()))]
        failed = self.cells[self.cells["status"] == "failed"]
        lines += [f"  FAILED {r.record_path}: {r.error}" for r in failed.itertuples()]
        return "\n".join(lines)


def longest_first(cells: list[Cell]) -> list[Cell]:
    """``cells`` in the order the loop hands them out: the longest first (the estimate's ``seconds`` where every
    cell has one, else the work a cell's steps do, :func:`typhoon.runner.cell_work.relative_work`), ties in their
    order. A long cell started last keeps one worker busy while the others wait: a grid's makespan is then at
    least that cell's time after the others are done."""
    if all(cell.seconds is not None for cell in cells):
        size = {id(cell): cell.seconds for cell in cells}
    else:
        from typhoon.runner.cell_work import relative_work

        size = relative_work(cells)
    return sorted(cells, key=lambda cell: -size[id(cell)])


def run_cells(cells: list[Cell], out_dir: Path, executor: CellExecutor, on_done=None,
              monitor: progress.GridMonitor | None = None, skipped: int = 0) -> pd.DataFrame:
    """Run ``cells`` on ``executor``, the longest first; one status row per cell, in their order. ``on_done(row)``
    is called as each finishes (in this thread); ``monitor`` shows the running cells' progress. Anything that
    ends it early -- a stop (``KeyboardInterrupt``), a file-system error of a cell -- stops the executor's cells
    and is raised."""
    monitor = monitor or progress.GridMonitor(out_dir, cells, skipped)
    rows = []
    try:
        for cell in longest_first(cells):
            executor.submit(cell, out_dir)
        while executor.pending():
            for row in executor.poll(progress.POLL_INTERVAL_S):
                if row.get("os_error"):  # a full disk or no permission: every other cell would meet it too
                    raise OSError(*row["os_error"])
                rows.append(row)
                monitor.finished(row)
                if on_done is not None:
                    on_done(row)
            monitor.poll()
    except BaseException:
        executor.stop()
        raise
    finally:
        monitor.close()
    order = {cell.path: i for i, cell in enumerate(cells)}
    table = pd.DataFrame(rows, columns=STATUS_COLUMNS)
    return table.sort_values("record_path", key=lambda s: s.map(order)).reset_index(drop=True)


def local_pool(workers: int) -> WorkerPool:
    """The default executor: ``workers`` worker processes on this machine's devices and cores."""
    return WorkerPool(slots_for(workers, machine.gpu_devices()))


def run_study(policy: StudyPolicy, out_dir: Path, *, workers: int | None = None, executor: CellExecutor | None = None,
              commit_records: bool = False, profile_workers: int = 1) -> Summary:
    """Run ``policy``'s study into ``out_dir``: look by look, the cells it asks for on ``executor`` (default: a
    local pool of ``workers`` worker processes: None, ``profile_workers`` on a CPU; on GPUs as many per device as
    its free memory and the host's cores allow, :func:`typhoon.runner.workers.choose_workers`), then what it
    makes of them. ``commit_records``: git-commit each finished cell's output as it lands, then the tables."""
    workers, workers_note = choose_workers(workers, profile_workers, policy.configs)
    if workers_note:
        print(workers_note, flush=True)
    policy.preflight()
    out_dir = Path(out_dir)
    if commit_records:
        check_git_repo(out_dir)
    if policy.profile is not None:
        paths.check_profile(out_dir, policy.profile)
    paths.check_writable(out_dir)  # a file in the way, no permission, a full disk: said now, not mid-study
    stop.clear_stop()
    log = progress.RunLog(out_dir / policy.log_name)
    # the invocation's clock: from the process's start when this is the typhoon command (its imports and checks)
    (started, clock), code, command = invocation_clock(), git_state(), invocation()
    cells = pd.DataFrame(columns=STATUS_COLUMNS)
    own_executor = executor is None
    with output_folder_lock(out_dir):
        stop.clean_dead_writers(out_dir)
        policy.prepare(out_dir, log, commit_records, workers)
        log.write(f"{policy.title} started: {policy.describe(out_dir)}, {workers} at once, output "
                  f"{out_dir}\ncommand: {'python -m typhoon ' + ' '.join(command) if command else 'typhoon.runner.study (Python)'}")

        def on_done(row: dict) -> None:  # as each cell finishes: logged, committed
            log.cell(row)
            if commit_records and row["status"] == "ok":
                commit_cell(out_dir, row)

        try:  # a stop (Ctrl-C) or a full disk from here on is cleaned up by stopped()
            ran = None
            while (look := policy.next_look(out_dir, log, ran)).cells:
                for line in filter(None, (cell.kind.resume_note(cell, out_dir) for cell in look.cells)):
                    print(line, flush=True)
                    log.write(line)
                if executor is None:
                    executor = local_pool(workers)
                ran = run_cells(look.cells, out_dir, executor, on_done, skipped=look.complete)
                cells = pd.concat([cells, ran], ignore_index=True) if len(cells) else ran
            finished = policy.finish(out_dir, cells, log, dict(started=started, wall_s=time.perf_counter() - clock,
                                                               command=command, code=code, clock=clock)) or Finished()
        except BaseException as err:
            ended = stopped(err, out_dir, policy, log)
            outcome = (f"stopped by {ended.signal_name}" if isinstance(ended, stop.Interrupted)
                       else f"stopped by an error: {type(ended).__name__}")
            if policy.profile is not None:
                with contextlib.suppress(OSError):  # a full disk may refuse it too
                    record_stopped_invocation(out_dir, policy.profile, started, time.perf_counter() - clock,
                                              command, outcome, code, policy.plan)
            raise ended from None
        finally:
            if own_executor and executor is not None:
                executor.close()
        report = finished.report
        cells = status_table(policy, cells, out_dir)
        summary = Summary(cells, out_dir / "results.csv", report)
        log.write(f"{policy.title} finished in {time.perf_counter() - clock:.0f} s\n{summary.table()}"
                  + (f"\nreport: {report}" if report else ""))
        print(summary.table() if len(cells) else "no cell to train")
        for line in finished.said:
            print(line)
            log.write(line)
        if report:
            print(f"report: {report}")
        print(f"log: {log.path}", flush=True)
        # the manifest's last write, after everything said: its wall_s is the whole invocation (the command then
        # ends without the interpreter's teardown, typhoon.__main__), the commit of the outputs after it
        close_invocation(out_dir, started, time.perf_counter() - clock)
        if commit_records:
            commit_paths(check_git_repo(out_dir), [out_dir], policy.commit_message(out_dir))
    return summary


def stopped(error: BaseException, out_dir: Path, policy: StudyPolicy, log: progress.RunLog) -> BaseException:
    """After the cells or the analysis were cut short: stop what still runs, remove what it left
    (:func:`typhoon.runner.stop.clean_after_stop`), log it, and return the exception to raise.

    Ctrl-C / SIGTERM come back as :class:`typhoon.runner.stop.Interrupted` with ``details``: what finished,
    the resume states kept and how to go on, and where the study stands (its policy's ``describe``); a
    file-system error as :class:`typhoon.paths.OutputPathError`; anything else as it was.
    """
    from typhoon.runner.notebooks import as_file_system_error

    stop.request_stop()
    stop.stop_child_processes()  # an analysis kernel, a worker still there
    stop.clean_after_stop(out_dir)
    every = policy.cells(out_dir)
    complete = sum(cell.kind.is_done(cell, out_dir) for cell in every)
    try:
        where = policy.describe(out_dir)
    except Exception as err:  # never let the summary hide the stop itself
        where = f"where the study stands could not be read ({type(err).__name__}: {err})"
    if isinstance(error, KeyboardInterrupt):
        result = stop.as_interrupted(error)
        kept = [cell for cell in every if cell.kind.has_resume_state(cell, out_dir)]
        result.details = where + ("; every cell complete, the analysis was stopped before the report"
                                  if complete == len(every) else "; the finished cells' outputs are kept")
        if kept:
            result.details += (f"; {len(kept)} cell(s) that were running kept their resume states "
                               f"({', '.join(cell.path for cell in kept[:4])}"
                               f"{', ...' if len(kept) > 4 else ''}): they go on from there")
        elif complete < len(every):
            result.details += "; the cells that were running had reached no boundary: they start over"
        message = f"stopped by {result.signal_name}: {result.details}"
    else:
        os_error = as_file_system_error(error)
        result = paths.OutputPathError(paths.describe_os_error(os_error, out_dir)) if os_error is not None else error
        message = f"stopped by an error: {type(result).__name__}: {result}\n{where}"
    with contextlib.suppress(OSError):  # a full disk may refuse the log line too
        log.write(message)
    return result
