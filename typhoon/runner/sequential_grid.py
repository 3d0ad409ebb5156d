"""``reproduce --profile <sequential profile>`` (the decisive study): look by look, the cells the next look
needs through the grid, re-analysed by :mod:`typhoon.analysis.decisive` after each look, until every
comparison is decided or at its cap. The records on disk are the state, so a stopped run resumes."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pandas as pd

from typhoon import paths
from typhoon.analysis import decisive
from typhoon.config import get_profile
from typhoon.records import locks, provenance, run_numerics, schema
from typhoon.report.html import render_report
from typhoon.runner import grid, notebooks, progress, stop


def write_report(out_dir: Path, profile: str, nb_dir: Path | None = None) -> Path:
    """Notebook 50 executed on the study's tables, and ``report.html`` from it; returns the report's path."""
    nb_dir = nb_dir or notebooks.notebooks_dir()
    target = out_dir / "notebooks" / decisive.NOTEBOOK
    notebooks.execute_notebook(nb_dir / decisive.NOTEBOOK, target, {"out_dir": str(out_dir), "profile": profile})
    notebooks.scrub_notebook(target, out_dir)
    return render_report(out_dir, [target], profile)


def rewrite_tables_and_report(profile: str, out_dir: str | Path, report: bool = True) -> list[str]:
    """``decisive-tables``: the tables from the records (no training), then the notebook and the report;
    returns the answer sentences."""
    started, clock, code = provenance.now(), time.perf_counter(), provenance.git_state()
    spec, out_dir = get_profile(profile), Path(out_dir).resolve()  # the notebook runs in notebooks/
    decisive.check_has_records(spec, out_dir)  # before the lock: a wrong folder gets nothing written
    provenance.check_profile(out_dir, spec.name)
    with locks.output_folder_lock(out_dir):  # not while a reproduce writes records and tables here
        tables = decisive.write_outputs(decisive.study_design(spec), decisive.grid_configs(spec), out_dir)
        # the manifest says where and from which commit these tables were made (the records keep their own)
        write_study_manifest(out_dir, spec.name, started, time.perf_counter() - clock, provenance.invocation(),
                             pd.DataFrame(columns=schema.STATUS_COLUMNS), code)
        if report:
            print(f"report: {paths.shown(write_report(out_dir, spec.name))}")
    return decisive.answer(tables["verdicts"])


def write_study_manifest(out_dir: Path, profile: str, started: str, wall_s: float, command: list[str],
                         cells: pd.DataFrame, code: dict) -> None:
    """MANIFEST.json with the runs counted by their full numerics (kernel family included: the study's
    first seeds come from machines with other kernels than its later ones)."""
    results = pd.read_csv(out_dir / "results.csv")
    labels = [run_numerics.record_numerics_detail(out_dir / path) for path in results["record_path"]]
    numerics = Counter(label.key for label in labels if label is not None)
    provenance.write_manifest(out_dir, profile, started, wall_s, command, dict(numerics), cells, code)


def reproduce_decisive(profile: str, out_dir: str | Path | None = None, *, workers: int | None = None,
                       overrides: dict | None = None, analysis: bool = True, executor=None,
                       commit_records: bool = False, reuse: bool = True):
    """``reproduce --profile <sequential profile>``: look by look, train the cells the next look needs
    (:func:`decisive.plan_next_look`) with :func:`typhoon.runner.grid.run_grid`, re-analyse, and stop when every
    comparison is decided or at its cap; then write the tables, the figure and the notebook. Resumable
    (the records are the state); ``commit_records`` commits each record as it lands, then the tables;
    ``reuse`` False trains even the records the design registers for reuse (``[design] reuse_from``)."""
    spec = get_profile(profile)
    study = decisive.study_design(spec)
    configs = decisive.grid_configs(spec, overrides)
    workers = spec.workers if workers is None else workers
    nb_dir = notebooks.notebooks_dir()
    grid.preflight(list(configs.values())[:1] + [c for c in configs.values() if c.seed == 0])
    out_dir = paths.resolve_out_dir(out_dir, spec.name)
    if commit_records:
        provenance.check_git_repo(out_dir)
    provenance.check_profile(out_dir, spec.name)
    paths.check_writable(out_dir)
    stop.clear_stop()
    log = progress.RunLog(out_dir / "reproduce.log")
    started, clock, code, command = provenance.now(), time.perf_counter(), provenance.git_state(), provenance.invocation()
    cells = pd.DataFrame(columns=schema.STATUS_COLUMNS)
    with locks.output_folder_lock(out_dir):
        first = [c for c in configs.values() if c.seed < study.design.looks[0]]
        for copied in decisive.reuse_sources(study, first, out_dir) if reuse else []:
            print(f"reused {copied['record_path']} from {copied['reused_from']}")
            if commit_records:
                provenance.commit_cell(out_dir, {**copied, "status": "ok", "notebook": None})
        stop.clean_dead_writers(out_dir)
        log.write(f"reproduce (sequential design) started: profile {spec.name}, output {paths.shown(out_dir)}")

        def on_done(row: dict) -> None:
            log.cell(row)
            if row.get("notebook") and (out_dir / row["notebook"]).is_file():
                notebooks.scrub_notebook(out_dir / row["notebook"], out_dir)
            if commit_records and row["status"] == "ok":
                provenance.commit_cell(out_dir, row)

        try:
            while True:
                plan = decisive.plan_next_look(decisive.results_table(configs, out_dir), study)
                decisive.write_outputs(study, configs, out_dir)
                if plan.empty:
                    break
                todo = [configs[(r.task, r.strategy, int(r.seed))] for r in plan.itertuples()]
                decisive.check_seed_numerics(todo, configs, out_dir)
                log.write(f"next look: {len(todo)} cells ({', '.join(sorted({f'{c.task} seed{c.seed}' for c in todo}))})")
                print(f"next look: {len(todo)} cells", flush=True)
                ran = grid.run_grid(todo, out_dir, nb_dir, workers, executor, on_done)
                cells = pd.concat([cells, ran], ignore_index=True)
                if not ran["status"].isin(["ok", "skipped"]).all():
                    log.write("a cell failed: the study stops here (rerun to retry it)")
                    break
            tables = decisive.write_outputs(study, configs, out_dir)
            write_study_manifest(out_dir, spec.name, started, time.perf_counter() - clock, command, cells, code)
            report = write_report(out_dir, spec.name, nb_dir) if analysis else None
        except BaseException as err:
            raise grid.stopped(err, out_dir, list(configs.values()), log, standing=lambda: decisive.where_it_stands(
                decisive.results_table(configs, out_dir), study)) from None
        summary = grid.Summary(cells, out_dir / "results.csv", report)
        for sentence in decisive.answer(tables["verdicts"]):
            print(sentence)
            log.write(sentence)
        if commit_records:
            provenance.commit_paths(provenance.check_git_repo(out_dir), [out_dir],
                                    f"{paths.shown(out_dir)}: verdicts, history, figure and notebook")
    print(summary.table() if len(cells) else "no cell to train: every comparison is decided or at its cap")
    return summary
