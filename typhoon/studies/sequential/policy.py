"""A sequential design as a policy of the study loop (:mod:`typhoon.runner.study`; the decisive studies): look by
look, the cells the next look needs, re-analysed by :mod:`typhoon.studies.sequential.decisive` after each look, until every
comparison is decided or at its cap. The records on disk are the state, so a stopped study resumes. Also
``decisive-tables``: the tables, notebook 50 and the report again from the records, without training."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from typhoon import paths
from typhoon.config import RunConfig
from typhoon.profiles import Profile, get_profile
from typhoon.records import (
    STATUS_COLUMNS,
    commit_cell,
    git_state,
    invocation,
    now,
    output_folder_lock,
    record_numerics_detail,
    write_manifest,
)
from typhoon.report import render_report
from typhoon.runner import (
    Cell,
    Finished,
    Look,
    RunLog,
    StudyPolicy,
    execute_for,
    failed,
    notebooks_dir,
    pair_notebooks,
    preflight,
)
from typhoon.studies.sequential import decisive
from typhoon.studies.sequential.design import study_design
from typhoon.studies.sequential.pages import PAGES


def write_report(out_dir: Path, profile: str, configs: list | None = None, nb_dir: Path | None = None) -> Path:
    """Notebook 50 executed on the study's tables, the walkthrough of each backbone × task of ``configs`` (those
    with records), and ``report.html`` from them; returns the report's path."""
    nb_dir = nb_dir or notebooks_dir()
    done = [c for c in configs or [] if (out_dir / c.relative_dir()).is_dir()]
    executed = [execute_for(out_dir, nb_dir, decisive.NOTEBOOK, {"out_dir": str(out_dir), "profile": profile})]
    executed += [execute_for(out_dir, nb_dir, nb.name, {"out_dir": str(out_dir), "profile": profile, **params},
                                       name) for nb, params, name in pair_notebooks(done)]
    return render_report(out_dir, executed, profile, pages=PAGES)


def rewrite_tables_and_report(profile: str, out_dir: str | Path, report: bool = True) -> list[str]:
    """``decisive-tables``: the tables from the records (no training), then the notebook and the report;
    returns the answer sentences."""
    started, clock, code = now(), time.perf_counter(), git_state()
    spec, out_dir = get_profile(profile), Path(out_dir).resolve()  # the notebook runs in notebooks/
    decisive.check_has_records(spec, out_dir)  # before the lock: a wrong folder gets nothing written
    paths.check_profile(out_dir, spec.name)
    with output_folder_lock(out_dir):  # not while a reproduce writes records and tables here
        configs = decisive.grid_configs(spec)
        tables = decisive.write_outputs(study_design(spec), configs, out_dir)
        # the manifest says where and from which commit these tables were made (the records keep their own)
        write_study_manifest(out_dir, spec.name, started, time.perf_counter() - clock, invocation(),
                             pd.DataFrame(columns=STATUS_COLUMNS), code)
        if report:
            write_report(out_dir, spec.name, list(configs.values()))
    return decisive.answer(tables["verdicts"])


def write_study_manifest(out_dir: Path, profile: str, started: str, wall_s: float, command: list[str],
                         cells: pd.DataFrame, code: dict, grid_wall_s: float | None = None) -> None:
    """MANIFEST.json with the runs counted by their full numerics (kernel family included: the study's
    first seeds come from machines with other kernels than its later ones); ``wall_s`` the whole reproduce so
    far, ``grid_wall_s`` its looks' part."""
    results = pd.read_csv(out_dir / "results.csv")
    labels = [record_numerics_detail(out_dir / path) for path in results["record_path"]]
    numerics = Counter(label.key for label in labels if label is not None)
    write_manifest(out_dir, profile, started, wall_s, command, dict(numerics), cells, code, grid_wall_s=grid_wall_s)


class SequentialDesign(StudyPolicy):
    """The policy of a sequential design (see the module docstring): the looks of
    :func:`typhoon.studies.sequential.decisive.plan_next_look`, the study stopping at a failed cell, and its tables,
    figure, notebook 50 and report at the end. ``reuse`` False trains even the records the design registers
    for reuse (``[design] reuse_from``)."""

    title, log_name = "reproduce", "reproduce.log"

    def __init__(self, spec: Profile, configs: Sequence[RunConfig], *, analysis: bool = True, reuse: bool = True):
        self.spec, self.analysis, self.reuse, self.profile = spec, analysis, reuse, spec.name
        self.pages = PAGES
        self.study = study_design(spec)
        self.grid = decisive.by_cell(configs)  # every cell up to the cap, resolved and validated once (Profile.grid)
        self.configs = list(self.grid.values())
        self.plan = None  # no estimate before the cells: the looks to come are not known in advance
        notebooks_dir()

    def preflight(self) -> None:
        preflight(self.configs[:1] + [c for c in self.configs if c.seed == 0])

    def prepare(self, out_dir: Path, log: RunLog, commit_records: bool, workers: int) -> None:
        first = [c for c in self.configs if c.seed < self.study.design.looks[0]]
        for copied in decisive.reuse_sources(self.study, first, out_dir) if self.reuse else []:
            print(f"reused {copied['record_path']} from {copied['reused_from']}")
            if commit_records:
                commit_cell(out_dir, {**copied, "status": "ok"})

    def describe(self, out_dir: Path) -> str:
        """The design's cap and where the study stands: the looks done, what the next needs, the verdicts so far."""
        where = decisive.where_it_stands(decisive.results_table(self.grid, out_dir), self.study)
        return f"a sequential design of up to {len(self.configs)} cells: {where}"

    def cells(self, out_dir: Path) -> list[Cell]:
        return [Cell(config) for config in self.configs]

    def next_look(self, out_dir: Path, log: RunLog, last: pd.DataFrame | None) -> Look:
        """The cells the next look needs (none once every comparison is decided or at its cap, or a cell of the
        look before failed: the study stops there); the tables are written at every look."""
        if failed(last):
            log.write("a cell failed: the study stops here (rerun to retry it)")
            return Look()
        plan = decisive.plan_next_look(decisive.results_table(self.grid, out_dir), self.study)
        decisive.write_outputs(self.study, self.grid, out_dir)
        if plan.empty:
            return Look()
        todo = [self.grid[(r.task, r.strategy, int(r.seed))] for r in plan.itertuples()]
        decisive.check_seed_numerics(todo, self.grid, out_dir)
        log.write(f"next look: {len(todo)} cells ({', '.join(sorted({f'{c.task} seed{c.seed}' for c in todo}))})")
        print(f"next look: {len(todo)} cells", flush=True)
        return Look([Cell(config) for config in todo])

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: RunLog, run: dict) -> Finished:
        """Its tables, the manifest, notebook 50 and the report; it says its answer, a sentence per task."""
        decisive.write_outputs(self.study, self.grid, out_dir)
        write_study_manifest(out_dir, self.spec.name, run["started"], run["wall_s"], run["command"], cells, run["code"],
                             grid_wall_s=run["wall_s"])
        report = write_report(out_dir, self.spec.name, self.configs) if self.analysis else None
        if report is not None and "clock" in run:  # wall_s: the whole reproduce, the report included
            write_study_manifest(out_dir, self.spec.name, run["started"], time.perf_counter() - run["clock"],
                                 run["command"], cells, run["code"], grid_wall_s=run["wall_s"])
        return Finished(report, tuple(decisive.answer(decisive.read_outputs(out_dir)["verdicts"])))

    def commit_message(self, out_dir: Path) -> str:
        return f"{paths.shown(out_dir)}: verdicts, history, figure and notebook"
