"""The grid runner: execute the notebooks with papermill over a profile's grid of runs.

``reproduce(profile, out_dir)`` resolves the grid (``Profile.grid``: one RunConfig per cell), executes
``notebooks/10_run.ipynb`` once per cell that has no complete run record, passing the resolved config
as JSON (so a rerun after a crash finishes only what is missing), rebuilds ``results.csv`` from the
records, executes the walkthrough and analysis notebooks and renders ``report.html``
(:mod:`typhoon.report.html`). A failing cell is recorded as failed and the grid goes on; the summary says which.
The output folder defaults to the profile's own (``<repo>/outputs/<profile>``, :mod:`typhoon.paths`); it
gets a ``MANIFEST.json`` (machine, commit, lock, wall time: :mod:`typhoon.records.provenance`) and a
``reproduce.log``. A grid is never resumed with other numerics than its finished records used unless
``allow_mixed_precision``.

One ``reproduce`` at a time may use an output folder (a lock refuses a second one); each run record
also has its own lock, so a record never has two writers.

While cells run, the batch shows each running cell's phase and step from its progress file and logs
every event to ``reproduce.log`` (:mod:`typhoon.runner.progress`). Ctrl-C or SIGTERM stops the kernels within
seconds, leaves no partial record, temp notebook or lock, and says how to resume (:mod:`typhoon.runner.stop`);
an output folder that cannot be written, or a disk that fills up, stops the grid with a message naming
the path (:class:`typhoon.paths.OutputPathError`).
"""


from __future__ import annotations

import contextlib
import re
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from typhoon import atomic, paths
from typhoon.analysis import reference
from typhoon.config import RunConfig, get_profile
from typhoon.machine import cell_threads, choose_workers, gpu_devices
from typhoon.records import locks, provenance, result_rows, run_record, schema
from typhoon.records import reuse as record_reuse
from typhoon.report.html import render_report
from typhoon.runner import progress, stop
from typhoon.runner.notebooks import (
    ANALYSIS_NOTEBOOKS,
    REFERENCE_NOTEBOOK,
    RUN_NOTEBOOK,
    AnalysisNotebook,
    cell_notebook,
    cell_parameters,
    execute_notebook,
    notebooks_dir,
    scrub_notebook,
)
from typhoon.runner.stop import clean_dead_writers
from typhoon.training import device_settings, progress_file


@dataclass
class Summary:
    """What a reproduction did: one row per cell (status ok / failed / skipped) and where things are."""

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


def run_cell(config: RunConfig, out_dir: Path, nb_dir: Path, device: str | None = None,
             threads: int | None = None) -> dict:
    """Execute ``10_run`` for one cell; returns its status row (never raises for a cell failure).

    Two outcomes are not a cell's failure and are not recorded as one: the grid being stopped (the row
    says ``stopped``), and a file-system error such as a full disk, which every other cell would meet
    too: it raises :class:`typhoon.paths.OutputPathError`, which ends the grid.
    """
    target = cell_notebook(config, out_dir)
    started = time.perf_counter()
    try:
        execute_notebook(nb_dir / RUN_NOTEBOOK, target, cell_parameters(config, out_dir, device, threads))
        status, error = "ok", None
    except Exception as err:  # a cell's failure is recorded; the grid goes on
        if stop.stopping():
            return result_rows.status_row(config, "stopped", seconds=time.perf_counter() - started)
        file_system_error = as_file_system_error(err)
        if file_system_error is not None:
            raise paths.OutputPathError(paths.describe_os_error(file_system_error, out_dir)) from None
        status, error = "failed", f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
        _ensure_failed_record(config, out_dir, error, target)
    return result_rows.status_row(config, status, error=error, seconds=time.perf_counter() - started,
                              notebook=target.relative_to(out_dir).as_posix())


_ERRNO_IN_MESSAGE = re.compile(r"\[Errno (\d+)\] ([^:']+)(?::\s*'(.*)')?")


def as_file_system_error(error: BaseException) -> OSError | None:
    """The file-system error (:data:`typhoon.paths.FILE_SYSTEM_ERRNOS`) behind a cell's failure, if that is
    what it was: raised here (writing the notebook) or in the kernel (papermill reports it as text, e.g.
    ``[Errno 28] No space left on device: '/out/runs/...'``); else None."""
    if paths.is_file_system_error(error):
        return error
    if getattr(error, "ename", None) in ("OSError", "PermissionError", "NotADirectoryError", "FileExistsError",
                                         "IsADirectoryError"):
        found = _ERRNO_IN_MESSAGE.search(str(getattr(error, "evalue", "")))
        if found:
            os_error = OSError(int(found[1]), found[2].strip(), found[3])
            return os_error if paths.is_file_system_error(os_error) else None
    return None


def _ensure_failed_record(config: RunConfig, out_dir: Path, error: str, notebook: Path,
                          traceback_text: str | None = None) -> None:
    """If the cell died before the pipeline could record its failure, record it here."""
    run_dir = out_dir / config.relative_dir()
    if run_record.record_status(run_dir, config) == "failed":
        return
    notebook = notebook.relative_to(out_dir).as_posix()
    try:
        with locks.record_lock(run_dir):
            run_record.write_record(run_dir, config, {"status": "failed", "error": error, "notebook": notebook},
                                 traceback_text=traceback_text or f"see the executed notebook {notebook}\n{error}\n")
    except locks.LockedError:
        pass  # another process is writing this record right now; it will record its own outcome


def dask_executor(address: str) -> Executor:
    """A ``concurrent.futures`` executor backed by a Dask cluster, for grids spread over machines.

    Start a scheduler and workers on the machines (``dask scheduler``; ``dask worker tcp://HOST:8786
    --nthreads 1`` on each, with the repository and the output folder on a shared file system), then
    ``python -m typhoon reproduce --scheduler tcp://HOST:8786``. Needs ``pip install distributed``.
    """
    try:
        from distributed import Client
    except ImportError as err:
        raise ValueError("--scheduler needs the Dask scheduler client: pip install distributed (the `cluster` extra)") from err
    from typhoon.runner.cluster import CellExecutor

    return CellExecutor(Client(address), on_lost=remove_cell_leftovers)


def remove_cell_leftovers(config: RunConfig, out_dir: Path) -> None:
    """Remove what a run of one cell that died with its worker (its job ended) left: the temp notebook,
    the record's staging folders, the temp file of a resume state it was saving, its progress file and an
    unheld record lock. Its resume state stays: the cell's next run goes on from it. Called by whoever
    notices the loss, once no other run of the cell has started (a cell runs on one worker at a time)."""
    notebook, run_dir = cell_notebook(config, out_dir), out_dir / config.relative_dir()
    resume_state = run_record.resume_state_path(run_dir)
    for path in [*notebook.parent.glob(f".{notebook.stem}.tmp-*"), *run_dir.parent.glob(f".{run_dir.name}.tmp-*"),
                 *run_dir.parent.glob(f".{resume_state.name}.tmp-*"),
                 *run_dir.parent.glob(f".{run_dir.name}.old-*"), progress_file.progress_path(run_dir)]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    locks.remove_stale_lock(run_dir.with_name(f".{run_dir.name}.lock"))


def cell_outcome(future, config: RunConfig, out_dir: Path) -> dict:
    """A finished cell's status row. A cell whose worker was lost more often than the cluster retries
    (:class:`typhoon.runner.cluster.LostCellError`, naming the lost workers) is recorded failed here."""
    try:
        return future.result()
    except Exception as err:
        if type(err).__name__ != "LostCellError":
            raise
        error = f"LostWorker: {err}"
        remove_cell_leftovers(config, out_dir)
        _ensure_failed_record(config, out_dir, error, cell_notebook(config, out_dir), traceback_text=f"{error}\n")
        return result_rows.status_row(config, "failed", error=error)


def cell_is_done(config: RunConfig, out_dir: Path) -> bool:
    """The cell has a complete record and its executed notebook (a record copied from elsewhere needs none: its
    source may have had none). A batch killed between the two -- the kernel had written the record, the notebook
    was not yet published -- leaves a record that must not be retrained but a notebook and figures still to
    make: such a cell runs again, and its notebook's kernel reuses the record (``training.run``)."""
    run_dir = out_dir / config.relative_dir()
    if not run_record.is_complete(run_dir, config):
        return False
    return cell_notebook(config, out_dir).is_file() or "reused_from" in run_record.read_json(run_dir / "metrics.json")


def run_grid(configs: list[RunConfig], out_dir: Path, nb_dir: Path, workers: int = 1,
             executor: Executor | None = None, on_done: Callable[[dict], None] | None = None,
             monitor: progress.GridMonitor | None = None) -> pd.DataFrame:
    """Run every cell not done (:func:`cell_is_done`; in parallel with ``workers`` > 1); returns one status row
    per cell.

    ``on_done`` is called with each cell's status row as the cell finishes (in this thread). ``monitor``
    shows the running cells' progress (default: a :class:`typhoon.runner.progress.GridMonitor` on stdout).
    Anything that ends the grid early -- Ctrl-C / SIGTERM (``KeyboardInterrupt``), a full disk -- stops
    the cells still running (:func:`stop_cells`) and is re-raised.
    """
    todo = [c for c in configs if not cell_is_done(c, out_dir)]
    rows = [result_rows.status_row(c, "skipped") for c in configs if c not in todo]
    gpus = gpu_devices()
    monitor = monitor or progress.GridMonitor(out_dir, todo, len(rows))
    own_executor = executor is None
    executor = executor or ThreadPoolExecutor(max_workers=workers)  # each cell is its own kernel process
    futures = []
    try:
        futures = [executor.submit(run_cell, c, out_dir, nb_dir,
                                   gpus[i % len(gpus)] if gpus and workers > 1 else None,
                                   cell_threads(c, workers, gpus))
                   for i, c in enumerate(todo)]
        pending, cell_of = set(futures), dict(zip(futures, todo, strict=True))
        look_after = getattr(executor, "poll", None)  # a cluster's: keeps its jobs alive, notes lost workers
        while pending:
            done, pending = wait(pending, timeout=progress.POLL_INTERVAL_S, return_when=FIRST_COMPLETED)
            for future in done:
                rows.append(cell_outcome(future, cell_of[future], out_dir))
                monitor.finished(rows[-1])
                if on_done is not None:
                    on_done(rows[-1])
            monitor.poll()
            if look_after is not None and pending:
                look_after()
    except BaseException:
        stop_cells(futures, executor, own=own_executor)
        raise
    finally:
        monitor.close()
    if own_executor:
        executor.shutdown(wait=True)
    order = {c.relative_dir().as_posix(): i for i, c in enumerate(configs)}
    table = pd.DataFrame(rows, columns=schema.STATUS_COLUMNS)
    return table.sort_values("record_path", key=lambda s: s.map(order)).reset_index(drop=True)


def stop_cells(futures: list, executor: Executor | None, own: bool = True) -> None:
    """Stop a grid now: no new cell starts, the running kernels (this process's children) get SIGTERM,
    then SIGKILL after a grace period, and their threads are given a moment to see it
    (:mod:`typhoon.runner.stop`). On a Dask cluster every worker kills its kernels and the cells are
    cancelled (:meth:`typhoon.runner.cluster.CellExecutor.stop_cells`); an executor not ``own`` is not shut down."""
    stop.request_stop()
    remote_stop = getattr(executor, "stop_cells", None)
    if remote_stop is not None:
        remote_stop(stop.stop_worker_cells)
    for future in futures:
        future.cancel()
    if executor is not None and own:
        executor.shutdown(wait=False, cancel_futures=True)
    stop.stop_child_processes()
    wait(futures, timeout=stop.KILL_GRACE_S)


def check_analysis_settings(settings: dict, profile: str) -> None:
    """Refuse analysis settings that no analysis notebook takes (a typo would be silently ignored)."""
    known = {name for nb in ANALYSIS_NOTEBOOKS for name in nb.settings}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"profile {profile!r}: unknown analysis setting(s) {unknown}; the analysis notebooks "
                         f"take {sorted(known)}")


def run_analysis(out_dir: Path, nb_dir: Path, settings: dict | None = None, profile: str | None = None,
                 on_notebook: Callable[[str], None] | None = None, workers: int = 1) -> Path:
    """Execute the walkthrough and analysis notebooks on the collected results and render the HTML report.

    ``settings``: the profile's analysis settings; each notebook gets those it declares, and ``profile``
    (which says, e.g., whether its numbers are a pipeline check); ``on_notebook`` is told each notebook's
    name as it starts (the batch shows and logs it). The executed
    copies land in ``<out_dir>/notebooks/`` with this machine's paths made relative (:func:`scrub_notebook`).
    ``workers`` notebooks run at once (the grid's workers): they are independent -- each reads the
    results and writes its own tables and figures -- and each pays seconds of kernel start and imports.
    The first failure (in notebook order) is raised once all have finished. Then the comparison with the
    committed reference run (:data:`REFERENCE_NOTEBOOK`, :mod:`typhoon.analysis.reference`) runs on their tables.
    """
    settings = settings or {}

    def execute(nb: AnalysisNotebook) -> Path:
        params = {"out_dir": str(out_dir), **({"profile": profile} if profile else {}),
                  **{k: settings[k] for k in nb.settings if k in settings}}
        target = out_dir / "notebooks" / nb.name
        if on_notebook is not None:
            on_notebook(nb.name)
        try:
            execute_notebook(nb_dir / nb.name, target, params)
        finally:
            if target.is_file():
                scrub_notebook(target, out_dir)
        return target

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:  # each notebook is its own kernel process
        futures = [pool.submit(execute, nb) for nb in ANALYSIS_NOTEBOOKS]
    executed = [future.result() for future in futures]
    after = [i + 1 for i, nb in enumerate(ANALYSIS_NOTEBOOKS) if nb.name == "20_statistics.ipynb"]
    executed.insert(after[0] if after else len(executed), execute(REFERENCE_NOTEBOOK))
    return render_report(out_dir, executed, profile)


def preflight(configs: list[RunConfig]) -> None:
    """Check that every task's data and every backbone load, before anything is written."""
    from typhoon.data.glue_files import load_glue, require_labelled_splits
    from typhoon.models.backbones import load_backbone

    for task in dict.fromkeys(c.task for c in configs):
        require_labelled_splits(load_glue(task), task)
    for name in dict.fromkeys(c.backbone for c in configs):
        load_backbone(name)


def reproduce(profile: str, out_dir: str | Path | None = None, *, workers: int | None = None,
              overrides: dict | None = None, analysis: bool = True, executor: Executor | None = None,
              allow_mixed_precision: bool = False, commit_records: bool = False, reuse: bool = True,
              reuse_from: Sequence[str | Path] = (), estimate: bool = False) -> Summary:
    """Run a profile's whole grid through the notebooks, then the analysis; resumable.

    ``out_dir`` None: the profile's own folder, ``<repo>/outputs/<profile>``. ``overrides`` (typed
    RunConfig values, ``config.parse_overrides``) apply to every cell. ``workers`` cells run at once
    (None = the profile's ``workers``). Every input is validated (profile, grid configs, analysis
    settings, notebooks, data, backbones, the folder's profile and numerics) before anything is written.
    ``commit_records``: git-commit each finished cell's record and notebook as it completes, then the
    tables, figures and report (a reference run that resumes from its commits on any machine).
    ``reuse``: a cell with no complete record here first copies the record of an equal run made with this
    machine's numerics, from another profile's folder beside this one or under ``outputs/``, or from the
    folders named in ``reuse_from`` (the committed ``results/`` only so: :mod:`typhoon.records.reuse`; the copy's
    ``metrics.json`` says ``reused_from``).
    ``estimate``: first calibrate and print the expected time (:mod:`typhoon.runner.estimate`, about a minute);
    it goes into ``reproduce.log`` and ``MANIFEST.json``.
    """
    spec = get_profile(profile)
    configs = spec.grid(overrides)
    reuse_from = [paths.check_reuse_source(folder) for folder in reuse_from]
    check_analysis_settings(spec.analysis, spec.name)
    workers, workers_note = choose_workers(workers, spec.workers)
    if workers_note:
        print(workers_note, flush=True)
    nb_dir = notebooks_dir()
    preflight(configs)
    out_dir = paths.resolve_out_dir(out_dir, spec.name)
    if commit_records:
        provenance.check_git_repo(out_dir)
    provenance.check_profile(out_dir, spec.name)
    paths.check_writable(out_dir)  # a file in the way, no permission, a full disk: said now, not mid-grid
    stop.clear_stop()
    log = progress.RunLog(out_dir / "reproduce.log")
    with locks.output_folder_lock(out_dir):
        reused = record_reuse.reuse_equal_records(configs, out_dir, reuse_from, spec.required_metrics,
                                                  numerics_here=device_settings.numerics_here) if reuse else None
        for line in reused.lines() if reused is not None else []:
            print(line)
            log.write(line)
        numerics = device_settings.check_numerics(configs, out_dir, allow_mixed_precision)
        started, clock, code = provenance.now(), time.perf_counter(), provenance.git_state()
        clean_dead_writers(out_dir)
        command = provenance.invocation()
        todo = [c for c in configs if not cell_is_done(c, out_dir)]
        for config in todo:  # a damaged or stale record is replaced: say so, naming the file and the error
            why = (run_record.why_incomplete(out_dir / config.relative_dir(), config)
                   or "complete, but its notebook is missing (a batch was killed before publishing it): the "
                      "notebook is executed again and reuses the record")
            if why != "no record yet":
                print(f"{config.relative_dir().as_posix()}: {why}", flush=True)
                log.write(f"{config.relative_dir().as_posix()}: {why}")
        log.write(f"reproduce started: profile {spec.name}, {len(configs)} cells ({len(todo)} to run, "
                  f"{len(configs) - len(todo)} complete already), {workers} at once, output {out_dir}\n"
                  f"command: {'python -m typhoon ' + ' '.join(command) if command else 'typhoon.runner.grid.reproduce (Python)'}")

        def on_done(row: dict) -> None:  # as each cell finishes: logged, its notebook made fit to share, committed
            log.cell(row)
            if row.get("notebook") and (out_dir / row["notebook"]).is_file():
                scrub_notebook(out_dir / row["notebook"], out_dir)
            if commit_records and row["status"] == "ok":
                provenance.commit_cell(out_dir, row)

        plan = None
        try:  # a stop (Ctrl-C) or a full disk from here on is cleaned up by stopped()
            if estimate:
                plan = estimate_first(spec, configs, out_dir, workers, analysis, log)
            cells = run_grid(configs, out_dir, nb_dir, workers, executor, on_done)
            results = result_rows.collect_results(out_dir, configs)
            results_csv = out_dir / "results.csv"
            atomic.atomic_write_csv(results_csv, results)
            provenance.write_manifest(out_dir, spec.name, started, time.perf_counter() - clock, command, numerics,
                                      cells, code, estimate=plan)
            report = None
            if analysis:
                def on_notebook(name: str) -> None:  # a sign of life between the grid and the report
                    print(f"analysis: {name}", flush=True)
                    log.write(f"analysis: {name}")

                try:
                    report = run_analysis(out_dir, nb_dir, spec.analysis, spec.name, on_notebook, workers)
                    log.write(f"analysis ok: report {report}")
                except Exception as err:
                    if as_file_system_error(err) is not None:
                        raise
                    traceback.print_exc()
                    log.write(f"analysis failed: {type(err).__name__}: {err}")
                    cells = pd.concat([cells, pd.DataFrame([{"record_path": "analysis", "status": "failed",
                                                             "error": f"{type(err).__name__}: {err}"}])])
                provenance.write_manifest(out_dir, spec.name, started, time.perf_counter() - clock, command,
                                          numerics, cells, code, estimate=plan)
        except BaseException as err:
            raise stopped(err, out_dir, configs, log) from None
        summary = Summary(cells, results_csv, report)
        log.write(f"reproduce finished in {time.perf_counter() - clock:.0f} s\n{summary.table()}"
                  + (f"\nreport: {report}" if report else ""))
        if commit_records:
            provenance.commit_paths(provenance.check_git_repo(out_dir), [out_dir],
                                    f"{paths.shown(out_dir)}: tables, figures, notebooks and report")
    print(summary.table())
    against = against_reference(spec.name, out_dir) if report else None
    if against:
        print(against)
        log.write(against)
    if report:
        print(f"report: {report}")
    print(f"log: {log.path}")
    return summary


def against_reference(profile: str, out_dir: Path) -> str | None:
    """The end of a reproduce: how its numbers compare with the committed reference run of the profile
    (:func:`typhoon.analysis.reference.compare_with_reference`), or None where there is none."""
    ref_dir = reference.reference_for(profile, out_dir)
    if ref_dir is None:
        return reference.no_reference_note(profile, out_dir)
    try:
        return reference.compare_with_reference(out_dir, ref_dir).summary()
    except (FileNotFoundError, ValueError) as err:  # a damaged reference must not hide the run's own result
        return f"your run against the reference ({paths.shown(ref_dir)}): not compared: {err}"


def stopped(error: BaseException, out_dir: Path, configs: list[RunConfig], log: progress.RunLog,
            standing: Callable[[], str] | None = None) -> BaseException:
    """After the grid or the analysis was cut short: stop what still runs, remove what it left
    (:func:`typhoon.runner.stop.clean_after_stop`), log it, and return the exception to raise.

    Ctrl-C / SIGTERM come back as :class:`typhoon.runner.stop.Interrupted` with ``details`` (what finished,
    and ``standing()``'s words: where a sequential study stands); a file-system error as
    :class:`typhoon.paths.OutputPathError`; anything else as it was.
    """
    stop.request_stop()
    stop.stop_child_processes()  # an analysis kernel; the grid's kernels were stopped by run_grid
    stop.clean_after_stop(out_dir)
    complete = sum(run_record.is_complete(out_dir / c.relative_dir(), c) for c in configs)
    if isinstance(error, KeyboardInterrupt):
        result = stop.as_interrupted(error)
        result.details = (f"all {complete} cells complete; the analysis was stopped before the report"
                          if complete == len(configs) else
                          f"{complete} of {len(configs)} cells complete (their records are kept); the cells that "
                          "were running were stopped and left no record")
        try:
            result.details += f"; {standing()}" if standing is not None else ""
        except Exception as err:  # never let the summary hide the stop itself
            result.details += f"; where the study stands could not be read ({type(err).__name__}: {err})"
        message = f"stopped by {result.signal_name}: {result.details}"
    else:
        os_error = as_file_system_error(error)
        result = paths.OutputPathError(paths.describe_os_error(os_error, out_dir)) if os_error is not None else error
        message = f"stopped by an error: {type(result).__name__}: {result}\n{complete} of {len(configs)} cells complete"
    with contextlib.suppress(OSError):  # a full disk may refuse the log line too
        log.write(message)
    return result


def estimate_first(spec, configs: list[RunConfig], out_dir: Path, workers: int, analysis: bool,
                   log: progress.RunLog) -> dict:
    """Print the grid's estimated time (:func:`typhoon.runner.estimate.estimate_grid`) and log it; returns it for
    the manifest (``estimate``: the figures, and ``estimate.total_s`` beside the real ``wall_s``)."""
    from typhoon.runner.estimate import estimate_grid

    plan = estimate_grid(spec.name, configs, out_dir, workers, analysis=analysis,
                         quick_analysis=bool(spec.analysis.get("quick")))
    print(plan.text(), flush=True)
    log.write(f"estimate\n{plan.text(max_cells=10**6)}")
    return plan.to_dict()
