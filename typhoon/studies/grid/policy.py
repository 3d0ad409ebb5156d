"""A plain grid as a policy of the study loop (:mod:`typhoon.runner.study`).

:class:`FixedGrid` makes one look: every cell of the profile's grid (``Profile.grid``: one resolved RunConfig per
cell) without a complete record, after copying the records of equal runs made elsewhere with this machine's
numerics (:mod:`typhoon.records.reuse`) and refusing a grid that would mix numerics unless allowed. A failing
cell is recorded failed and the grid goes on; the summary says which. Then ``results.csv`` from the records,
``MANIFEST.json`` (machine, commit, lock, wall time: :mod:`typhoon.records.provenance`), the notebooks
(:func:`typhoon.studies.grid.analysis.run_analysis`: one walkthrough per backbone × task, the setup,
statistics, budget-spread and schedules notebooks) and ``report.html`` with the study's pages, and at the end the
comparison with the committed reference run of the profile.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from typhoon import atomic, machine, paths
from typhoon.analysis import compare_with_reference, no_reference_note, reference_for
from typhoon.config import RunConfig
from typhoon.profiles import Profile
from typhoon.records import collect_results, reuse_equal_records, why_incomplete, write_manifest
from typhoon.report import StudyPages
from typhoon.runner import (
    ANALYSIS_NOTEBOOKS,
    Cell,
    Finished,
    Look,
    NotebookFailed,
    RunLog,
    StudyPolicy,
    as_file_system_error,
    cell_is_done,
    notebooks_dir,
    preflight,
    say,
    status_table,
)
from typhoon.studies.grid.analysis import AnalysisFailed, run_analysis
from typhoon.training import bit_source_here, check_numerics


def check_analysis_settings(settings: dict, profile: str) -> None:
    """Refuse analysis settings that no analysis notebook takes (a typo would be silently ignored)."""
    known = {name for nb in ANALYSIS_NOTEBOOKS for name in nb.settings}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"profile {profile!r}: unknown analysis setting(s) {unknown}; the analysis notebooks "
                         f"take {sorted(known)}")


class FixedGrid(StudyPolicy):
    """The policy of a plain grid (see the module docstring); its options are ``reproduce``'s."""

    title, log_name = "reproduce", "reproduce.log"

    def __init__(self, spec: Profile, configs: Sequence[RunConfig], pages: StudyPages, *, analysis: bool = True,
                 reuse: bool = True, reuse_from: Sequence[str | Path] = (), allow_mixed_precision: bool = False,
                 estimate: bool = False):
        self.spec, self.analysis, self.reuse, self.estimate = spec, analysis, reuse, estimate
        self.profile = spec.name
        self.allow_mixed_precision = allow_mixed_precision
        self.configs = list(configs)  # every cell of spec's grid, resolved and validated once (Profile.grid)
        self.pages = pages  # its study's: the paper's claims, or the schedules' comparisons
        self.reuse_from = [paths.check_reuse_source(folder) for folder in reuse_from]
        check_analysis_settings(spec.analysis, spec.name)
        notebooks_dir()  # the notebooks are there
        self.numerics: dict[str, int] = {}
        self.plan = None  # the estimate made before the cells (--estimate), kept in the manifest, stopped or not
        self.workers = 1

    def preflight(self) -> None:
        preflight(self.configs)

    def prepare(self, out_dir: Path, log: RunLog, commit_records: bool, workers: int) -> None:
        """Copy equal records made elsewhere, refuse mixed numerics, say why a stale record is replaced; then the
        estimate of the whole grid on ``workers`` (where asked)."""
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
        self.workers = workers
        if self.estimate:
            from typhoon.runner import estimate

            plan = estimate.estimate_grid(self.spec.name, self.configs, out_dir, workers, analysis=self.analysis,
                                 quick_analysis=bool(self.spec.analysis.get("quick")))
            print(plan.text(), flush=True)
            log.write(f"estimate\n{plan.text(max_cells=10**6)}")
            self.plan = plan.to_dict()

    def cells(self, out_dir: Path) -> list[Cell]:
        """Every cell of the grid, a whole run each, with its estimated time where an estimate was made."""
        seconds = {path: parts["total_s"] for path, parts in (self.plan or {}).get("per_cell", {}).items()}
        return [Cell(c, seconds=seconds.get(c.relative_dir().as_posix())) for c in self.configs]

    def next_look(self, out_dir: Path, log: RunLog, last: pd.DataFrame | None) -> Look:
        """One look: every cell without a complete record; then none."""
        if last is not None:
            return Look()
        todo = [cell for cell in self.cells(out_dir) if not cell_is_done(cell.config, out_dir)]
        return Look(todo, len(self.configs) - len(todo))

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: RunLog, run: dict) -> Finished:
        """results.csv, the manifest, then the notebooks and the report (a failed notebook is logged and
        said, the rest kept); it says how the run's numbers compare with the committed reference run."""
        atomic.atomic_write_csv(out_dir / "results.csv", collect_results(out_dir, self.configs))
        status = status_table(self, cells, out_dir)

        def manifest(table: pd.DataFrame) -> None:  # wall_s: the whole reproduce so far; the cells' part apart
            whole = time.perf_counter() - run["clock"] if "clock" in run else run["wall_s"]
            write_manifest(out_dir, self.spec.name, run["started"], whole, run["command"],
                           self.numerics, table, run["code"], estimate=self.plan, grid_wall_s=run["wall_s"])

        manifest(status)
        if not self.analysis:
            return Finished()

        def on_notebook(name: str) -> None:  # a sign of life between the grid and the report
            say(f"analysis: {name}")  # from the notebooks' threads: whole lines, never two merged
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
        compared = against_reference(self.spec.name, out_dir) if report else None
        return Finished(report, (compared,) if compared else ())


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
