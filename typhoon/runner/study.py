"""The one study loop: plan -> run cells -> analyse -> next look, for every study of the bundle.

:func:`run_study` runs a *policy* (:class:`typhoon.runner.policy.StudyPolicy`) that says which cells the next
look needs and what to make of them: a profile's plain grid (:class:`typhoon.runner.grid.FixedGrid`: one look,
every cell without a complete record, then the analysis notebooks and the report), its sequential design
(:class:`typhoon.runner.sequential_grid.SequentialDesign`: seeds look by look until every comparison is decided or
at its cap, then notebook 50), or a KL study's part (:mod:`typhoon.runner.kl_studies`: kl-original's rows, its
curve epoch by epoch, its fine-tuned pairs; kl-gap's causes). :func:`reproduce` is a profile's study. The
cells (:class:`typhoon.runner.cells.Cell`) run on one executor (:mod:`typhoon.runner.executor`): the local pool
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from typhoon import machine, paths
from typhoon.config import RunConfig
from typhoon.profiles import get_profile
from typhoon.records import (
    STATUS_COLUMNS,
    check_git_repo,
    commit_cell,
    commit_paths,
    git_state,
    invocation,
    now,
    output_folder_lock,
    record_stopped_invocation,
)
from typhoon.runner import progress, stop
from typhoon.runner.cells import Cell, kind_of, saved_boundary
from typhoon.runner.executor import CellExecutor
from typhoon.runner.policy import StudyPolicy
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


def reproduce(profile: str, out_dir: str | Path | None = None, *, workers: int | None = None,
              configs: Sequence[RunConfig] | None = None, analysis: bool = True, executor: CellExecutor | None = None,
              allow_mixed_precision: bool = False, commit_records: bool = False, reuse: bool = True,
              reuse_from=(), estimate: bool = False) -> Summary:
    """Run a profile's study -- its grid, or its sequential design look by look -- then its analysis; resumable.

    ``out_dir`` None: the profile's own folder, ``<repo>/outputs/<profile>``. ``configs``: every cell of the
    profile's grid as the caller resolved it once (``Profile.grid`` with the command line's ``--set``); None: the
    profile's own grid. The rest is :func:`run_study`'s and the grid's (:class:`typhoon.runner.grid.FixedGrid`:
    reuse of equal records, mixed numerics, the estimate).
    """
    from typhoon.runner.grid import FixedGrid
    from typhoon.runner.sequential_grid import SequentialDesign

    spec = get_profile(profile)
    configs = spec.grid() if configs is None else list(configs)
    if {config.profile for config in configs} - {spec.name}:
        raise ValueError(f"reproduce {spec.name!r} was given cells of profile(s) "
                         f"{sorted({c.profile for c in configs} - {spec.name})}: give it the profile's own (Profile.grid)")
    policy = (SequentialDesign(spec, configs, analysis=analysis, reuse=reuse) if spec.design else
              FixedGrid(spec, configs, analysis=analysis, reuse=reuse, reuse_from=reuse_from,
                        allow_mixed_precision=allow_mixed_precision, estimate=estimate))
    return run_study(policy, paths.resolve_out_dir(out_dir, spec.name), workers=workers, executor=executor,
                     commit_records=commit_records, profile_workers=spec.workers)


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
    started, clock, code, command = now(), time.perf_counter(), git_state(), invocation()
    cells = pd.DataFrame(columns=STATUS_COLUMNS)
    own_executor = executor is None
    with output_folder_lock(out_dir):
        stop.clean_dead_writers(out_dir)
        policy.prepare(out_dir, log, commit_records)
        log.write(f"{policy.title} started: {policy.describe(out_dir)}, {workers} at once, output "
                  f"{out_dir}\ncommand: {'python -m typhoon ' + ' '.join(command) if command else 'typhoon.runner.study (Python)'}")

        def on_done(row: dict) -> None:  # as each cell finishes: logged, committed
            log.cell(row)
            if commit_records and row["status"] == "ok":
                commit_cell(out_dir, row)

        try:  # a stop (Ctrl-C) or a full disk from here on is cleaned up by stopped()
            policy.before_cells(out_dir, workers, log)
            while todo := policy.next_look(out_dir, log):
                for line in filter(None, (resume_line(cell, out_dir) for cell in todo)):
                    print(line, flush=True)
                    log.write(line)
                if executor is None:
                    executor = local_pool(workers)
                ran = run_cells(todo, out_dir, executor, on_done, skipped=policy.done_before(out_dir, todo))
                cells = pd.concat([cells, ran], ignore_index=True) if len(cells) else ran
                if not policy.go_on(ran, log):
                    break
            report = policy.finish(out_dir, cells, log, dict(started=started, wall_s=time.perf_counter() - clock,
                                                             command=command, code=code, clock=clock))
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
        cells = policy.status_table(cells, out_dir)
        summary = Summary(cells, out_dir / "results.csv", report)
        log.write(f"{policy.title} finished in {time.perf_counter() - clock:.0f} s\n{summary.table()}"
                  + (f"\nreport: {report}" if report else ""))
        for line in policy.answer(out_dir):
            print(line)
            log.write(line)
        if commit_records:
            commit_paths(check_git_repo(out_dir), [out_dir], policy.commit_message(out_dir))
    print(summary.table() if len(cells) else "no cell to train")
    for line in policy.after(out_dir, report):
        print(line)
        log.write(line)
    if report:
        print(f"report: {report}")
    print(f"log: {log.path}")
    return summary


def resume_line(cell: Cell, out_dir: Path) -> str | None:
    """What a whole run about to start goes on from, when it has a resume state (the run checks the state is its
    own, and says so again as it loads it); None for other kinds of cells, which say it as they run."""
    if cell.kind != "train":
        return None
    boundary = saved_boundary(cell.config, out_dir / cell.under)
    return f"{cell.path}: resumes after {boundary.describe()} (its resume state)" if boundary else None


def stopped(error: BaseException, out_dir: Path, policy: StudyPolicy, log: progress.RunLog) -> BaseException:
    """After the cells or the analysis were cut short: stop what still runs, remove what it left
    (:func:`typhoon.runner.stop.clean_after_stop`), log it, and return the exception to raise.

    Ctrl-C / SIGTERM come back as :class:`typhoon.runner.stop.Interrupted` with ``details``: what finished,
    the resume states kept and how to go on, and where a sequential study stands; a file-system
    error as :class:`typhoon.paths.OutputPathError`; anything else as it was. The policy's ``standing``: where
    a sequential study stands, in words (None for a grid).
    """
    from typhoon.runner.notebooks import as_file_system_error

    stop.request_stop()
    stop.stop_child_processes()  # an analysis kernel, a worker still there
    stop.clean_after_stop(out_dir)
    every = policy.cells(out_dir)
    complete = sum(kind_of(cell).is_done(cell, out_dir) for cell in every)
    if isinstance(error, KeyboardInterrupt):
        result = stop.as_interrupted(error)
        kept = [cell for cell in every if kind_of(cell).has_resume_state(cell, out_dir)]
        result.details = (f"all {complete} cells complete; the analysis was stopped before the report"
                          if complete == len(every) else
                          f"{complete} of {len(every)} cells complete (their records are kept)")
        if kept:
            result.details += (f"; {len(kept)} cell(s) that were running kept their resume states "
                               f"({', '.join(cell.path for cell in kept[:4])}"
                               f"{', ...' if len(kept) > 4 else ''}): they go on from there")
        elif complete < len(every):
            result.details += "; the cells that were running had reached no boundary: they start over"
        try:
            where = policy.standing(out_dir)
            result.details += f"; {where}" if where else ""
        except Exception as err:  # never let the summary hide the stop itself
            result.details += f"; where the study stands could not be read ({type(err).__name__}: {err})"
        message = f"stopped by {result.signal_name}: {result.details}"
    else:
        os_error = as_file_system_error(error)
        result = paths.OutputPathError(paths.describe_os_error(os_error, out_dir)) if os_error is not None else error
        message = f"stopped by an error: {type(result).__name__}: {result}\n{complete} of {len(every)} cells complete"
    with contextlib.suppress(OSError):  # a full disk may refuse the log line too
        log.write(message)
    return result
