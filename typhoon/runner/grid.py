"""A plain grid as a policy of the study loop (:mod:`typhoon.runner.study`), and the analysis stage after it.

:class:`FixedGrid` makes one look: every cell of the profile's grid (``Profile.grid``: one resolved RunConfig per
cell) without a complete record, after copying the records of equal runs made elsewhere with this machine's
numerics (:mod:`typhoon.records.reuse`) and refusing a grid that would mix numerics unless allowed. A failing
cell is recorded failed and the grid goes on; the summary says which. Then ``results.csv`` from the records,
``MANIFEST.json`` (machine, commit, lock, wall time: :mod:`typhoon.records.provenance`), the notebooks
(:func:`run_analysis`: one walkthrough per backbone × task, the setup, statistics, budget-spread and schedules
notebooks) and ``report.html`` (:mod:`typhoon.report.html`), and at the end the comparison with the committed
reference run of the profile.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from typhoon import atomic, machine, paths
from typhoon.analysis import compare_with_reference, no_reference_note, reference_for
from typhoon.config import RunConfig
from typhoon.profiles import Profile
from typhoon.records import collect_results, reuse_equal_records, why_incomplete, write_manifest
from typhoon.report import StudyPages, pages_of, render_report
from typhoon.runner import progress
from typhoon.runner.cells import Cell, cell_is_done
from typhoon.runner.notebooks import (
    ANALYSIS_NOTEBOOKS,
    REFERENCE_NOTEBOOK,
    AnalysisNotebook,
    NotebookFailed,
    as_file_system_error,
    execute_for,
    notebooks_dir,
    pair_notebooks,
)
from typhoon.runner.policy import StudyPolicy
from typhoon.training import bit_source_here, check_numerics


def check_analysis_settings(settings: dict, profile: str) -> None:
    """Refuse analysis settings that no analysis notebook takes (a typo would be silently ignored)."""
    known = {name for nb in ANALYSIS_NOTEBOOKS for name in nb.settings}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"profile {profile!r}: unknown analysis setting(s) {unknown}; the analysis notebooks "
                         f"take {sorted(known)}")


def preflight(configs: list) -> None:
    """Check that every task's data and every backbone load, before anything is written."""
    from typhoon.data import load_glue, require_labelled_splits
    from typhoon.models import load_backbone

    for task in dict.fromkeys(c.task for c in configs):
        require_labelled_splits(load_glue(task), task)
    for name in dict.fromkeys(c.backbone for c in configs):
        load_backbone(name)


class FixedGrid(StudyPolicy):
    """The policy of a plain grid (see the module docstring); its options are ``reproduce``'s."""

    title, log_name = "reproduce", "reproduce.log"

    def __init__(self, spec: Profile, configs: Sequence[RunConfig], *, analysis: bool = True, reuse: bool = True,
                 reuse_from: Sequence[str | Path] = (), allow_mixed_precision: bool = False, estimate: bool = False):
        self.spec, self.analysis, self.reuse, self.estimate = spec, analysis, reuse, estimate
        self.profile = spec.name
        self.allow_mixed_precision = allow_mixed_precision
        self.configs = list(configs)  # every cell of spec's grid, resolved and validated once (Profile.grid)
        self.pages = grid_pages(self.configs)
        self.reuse_from = [paths.check_reuse_source(folder) for folder in reuse_from]
        check_analysis_settings(spec.analysis, spec.name)
        notebooks_dir()  # the notebooks are there
        self.looked = False
        self.numerics: dict[str, int] = {}
        self.plan = None  # the estimate made before the cells (--estimate), kept in the manifest, stopped or not
        self.workers = 1

    def preflight(self) -> None:
        preflight(self.configs)

    def prepare(self, out_dir: Path, log: progress.RunLog, commit_records: bool) -> None:
        """Copy equal records made elsewhere, refuse mixed numerics, and say why a stale record is replaced."""
        reused = (reuse_equal_records(self.configs, out_dir, self.reuse_from, self.spec.required_metrics,
                                      bit_source_here=bit_source_here)
                  if self.reuse else None)
        for line in reused.lines() if reused is not None else []:
            print(line)
            log.write(line)
        self.numerics = check_numerics(self.configs, out_dir, self.allow_mixed_precision)
        for config in self.configs:  # a damaged or stale record is replaced: say so, naming the file and the error
            why = why_incomplete(out_dir / config.relative_dir(), config)
            if why not in (None, "no record yet"):
                print(f"{config.relative_dir().as_posix()}: {why}", flush=True)
                log.write(f"{config.relative_dir().as_posix()}: {why}")

    def before_cells(self, out_dir: Path, workers: int, log: progress.RunLog) -> None:
        self.workers = workers
        if self.estimate:
            from typhoon.runner.estimate import estimate_grid

            plan = estimate_grid(self.spec.name, self.configs, out_dir, workers, analysis=self.analysis,
                                 quick_analysis=bool(self.spec.analysis.get("quick")))
            print(plan.text(), flush=True)
            log.write(f"estimate\n{plan.text(max_cells=10**6)}")
            self.plan = plan.to_dict()

    def cells(self, out_dir: Path) -> list[Cell]:
        """Every cell of the grid, a whole run each, with its estimated time where an estimate was made."""
        seconds = {path: parts["total_s"] for path, parts in (self.plan or {}).get("per_cell", {}).items()}
        return [Cell(c, seconds=seconds.get(c.relative_dir().as_posix())) for c in self.configs]

    def next_look(self, out_dir: Path, log: progress.RunLog) -> list[Cell]:
        """One look: every cell without a complete record; then none."""
        if self.looked:
            return []
        self.looked = True
        return [cell for cell in self.cells(out_dir) if not cell_is_done(cell.config, out_dir)]

    def done_before(self, out_dir: Path, todo: list) -> int:
        return len(self.configs) - len(todo)

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: progress.RunLog, run: dict) -> Path | None:
        """results.csv, the manifest, then the notebooks and the report (a failed notebook is logged and
        said, the rest kept)."""
        atomic.atomic_write_csv(out_dir / "results.csv", collect_results(out_dir, self.configs))
        status = self.status_table(cells, out_dir)

        def manifest(table: pd.DataFrame) -> None:  # wall_s: the whole reproduce so far; the cells' part apart
            whole = time.perf_counter() - run["clock"] if "clock" in run else run["wall_s"]
            write_manifest(out_dir, self.spec.name, run["started"], whole, run["command"],
                           self.numerics, table, run["code"], estimate=self.plan, grid_wall_s=run["wall_s"])

        manifest(status)
        if not self.analysis:
            return None

        def on_notebook(name: str) -> None:  # a sign of life between the grid and the report
            progress.say(f"analysis: {name}")  # from the notebooks' threads: whole lines, never two merged
            log.write(f"analysis: {name}")

        try:
            report = run_analysis(out_dir, notebooks_dir(), self.spec.analysis, self.spec.name, on_notebook,
                                  self.configs, pages=self.pages, workers=min(self.workers, machine.usable_cores()))
            log.write(f"analysis ok: report {report}")
        except Exception as err:
            if as_file_system_error(err) is not None:
                raise
            if isinstance(err, AnalysisFailed):  # notebooks that raised; the report was written all the same
                failures, report = err.failures, err.report
            else:  # no notebook's error: where in the package it came from
                traceback.print_exc()
                failures, report = [err], None
            rows = []
            for failure in failures:
                said = str(failure) if isinstance(failure, NotebookFailed) else f"{type(failure).__name__}: {failure}"
                line = f"analysis failed: {said}"  # a notebook's traceback is in its executed copy
                print(line, file=sys.stderr, flush=True)
                log.write(line)
                name = f"analysis {failure.executed.name}" if isinstance(failure, NotebookFailed) else "analysis"
                rows.append({"record_path": name, "status": "failed", "error": said})
            status = pd.concat([status, pd.DataFrame(rows)])
        manifest(status)
        return report

    def after(self, out_dir: Path, report: Path | None) -> list[str]:
        """The end of a reproduce: how its numbers compare with the committed reference run of the profile."""
        return [line for line in [against_reference(self.spec.name, out_dir)] if line] if report else []


def grid_pages(configs: list) -> StudyPages:
    """What a plain grid puts in its report and on the results page: a grid of mask schedules its schedules'
    comparisons with the fixed rate, any other the paper's claims (:mod:`typhoon.report.study_pages`)."""
    return pages_of("schedules" if any(config.schedule != "fixed" for config in configs) else "claims")


def run_analysis(out_dir: Path, nb_dir: Path, settings: dict | None = None, profile: str | None = None,
                 on_notebook: Callable[[str], None] | None = None, configs: list | None = None,
                 workers: int = 2, pages: StudyPages | None = None) -> Path:
    """Execute the notebooks on the collected results and render the HTML report.

    First one walkthrough per backbone × task of ``configs`` (:func:`typhoon.runner.notebooks.pair_notebooks`),
    then the analysis notebooks (:data:`ANALYSIS_NOTEBOOKS`); ``settings``: the profile's analysis settings,
    each notebook gets those it declares, and ``profile``; ``on_notebook`` is told each notebook's name as it
    starts. The executed copies land in ``<out_dir>/notebooks/`` with this machine's paths made relative
    (:func:`scrub_notebook`). ``workers`` notebooks run at once: each reads the records and writes its own tables
    and figures, and each pays seconds of kernel start. Then the comparison with the committed reference run
    (:data:`REFERENCE_NOTEBOOK`). A notebook that raised in a cell (:class:`NotebookFailed`) leaves the others
    and the report, which names it; then :class:`AnalysisFailed` is raised. Any other error is raised (the
    first, in notebook order) once all have finished.
    """
    settings = settings or {}

    def execute(nb: AnalysisNotebook, extra: dict | None = None, target_name: str | None = None) -> Path:
        params = {"out_dir": str(out_dir), **({"profile": profile} if profile else {}),
                  **{k: settings[k] for k in nb.settings if k in settings}, **(extra or {})}
        if on_notebook is not None:
            on_notebook(target_name or nb.name)
        return execute_for(out_dir, nb_dir, nb.name, params, target_name)

    pairs = pair_notebooks(configs or [])
    failures: list[NotebookFailed] = []

    def executed_copy(run: Callable[[], Path]) -> Path | None:  # a cell that raised: its copy shows where
        try:
            return run()
        except NotebookFailed as err:
            if as_file_system_error(err) is not None:  # a full disk is no notebook's fault: the grid stops
                raise
            failures.append(err)
            return err.executed if err.executed.is_file() else None

    pool = ThreadPoolExecutor(max_workers=max(1, workers))  # each notebook is its own kernel process
    try:
        futures = [pool.submit(execute, nb, extra, name) for nb, extra, name in pairs]
        futures += [pool.submit(execute, nb) for nb in ANALYSIS_NOTEBOOKS]
        pool.shutdown(wait=True)
    except BaseException:  # a stop: the notebooks not started yet never start
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    executed = [executed_copy(future.result) for future in futures]
    after = [i + 1 for i, path in enumerate(executed) if path is not None and path.name == "20_statistics.ipynb"]
    executed.insert(after[0] if after else len(executed), executed_copy(lambda: execute(REFERENCE_NOTEBOOK)))
    report = render_report(out_dir, [path for path in executed if path is not None], profile, pages=pages,
                           failed=[str(err) for err in failures])
    if failures:
        raise AnalysisFailed(failures, report)
    return report


class AnalysisFailed(RuntimeError):
    """Analysis notebooks that raised in a cell (:class:`NotebookFailed`, in notebook order); the report was
    written all the same, with the others and a line naming each failure."""

    def __init__(self, failures: list[NotebookFailed], report: Path):
        self.failures, self.report = failures, report
        super().__init__("; ".join(map(str, failures)))


def against_reference(profile: str, out_dir: Path) -> str | None:
    """How a run's numbers compare with the committed reference run of the profile
    (:func:`typhoon.analysis.reference.compare_with_reference`), or a note where there is none."""
    ref_dir = reference_for(profile, out_dir)
    if ref_dir is None:
        return no_reference_note(profile, out_dir)
    try:
        return compare_with_reference(out_dir, ref_dir).summary()
    except (FileNotFoundError, ValueError) as err:  # a damaged reference must not hide the run's own result
        return f"your run against the reference ({paths.shown(ref_dir)}): not compared: {err}"
