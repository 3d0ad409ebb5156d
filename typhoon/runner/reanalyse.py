"""``reanalyse``: a finished study's notebooks and report again from its records, training nothing.

For a committed reference run after the notebooks changed (e.g. the per-cell ``10_run`` notebooks of the engine
before worker processes, replaced by one walkthrough per backbone × task), or for a user's own run. The profile
is the one the folder's ``MANIFEST.json`` names; a grid's cells are its records' own configs in ``results.csv``
order, so a run made under an older version of its profile still gets a walkthrough per backbone × task of what
it trained. A sequential study goes through ``decisive-tables`` (its tables are part of its analysis). The
records and ``results.csv`` are not touched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from typhoon import machine, paths
from typhoon.config import RunConfig
from typhoon.profiles import get_profile
from typhoon.records import output_folder_lock, read_manifest
from typhoon.runner import progress
from typhoon.runner.grid import grid_pages, run_analysis
from typhoon.runner.notebooks import notebooks_dir

# What the engine before worker processes wrote per cell; the walkthroughs replace them.
PER_CELL_OUTPUTS = ("notebooks/runs", "figures/runs")


def study_profile(out_dir: Path) -> str:
    """The profile a study folder was made with (its MANIFEST.json); ValueError naming what is missing."""
    manifest = read_manifest(out_dir)
    if manifest is None:
        raise ValueError(f"{paths.shown(out_dir)}: no {paths.MANIFEST}, so not the folder of a reproduce")
    if not manifest.get("profile"):
        raise ValueError(f"{paths.shown(out_dir / paths.MANIFEST)} names no profile")
    return manifest["profile"]


def study_pages_of(out_dir: str | Path):
    """What the study in ``out_dir`` puts on the results page, as the policy of its profile says (a sequential
    design's verdicts, a schedules grid's comparisons, a reference run's claims): ``results-readme`` asks it."""
    from typhoon.report import pages_of

    spec = get_profile(study_profile(Path(out_dir)))
    return pages_of("sequential") if spec.design else grid_pages(spec.grid())


def recorded_configs(out_dir: Path) -> list[RunConfig]:
    """The configs of the records listed in ``results.csv``, in its order (the grid's)."""
    table = out_dir / "results.csv"
    if not table.is_file():
        raise ValueError(f"{paths.shown(out_dir)}: no results.csv, so no records to analyse")
    configs = []
    for record in pd.read_csv(table)["record_path"].drop_duplicates():
        config = out_dir / record / "config.json"
        if config.is_file():
            configs.append(RunConfig.from_dict(json.loads(config.read_text()), f"{record}/config.json"))
    if not configs:
        raise ValueError(f"{paths.shown(table)}: none of its records has a config.json")
    return configs


def reanalyse(out_dir: str | Path) -> Path:
    """The walkthroughs, analysis notebooks and report of ``out_dir`` from its records; returns the report."""
    out_dir = Path(out_dir).resolve()  # the notebooks run in notebooks/
    spec = get_profile(study_profile(out_dir))
    if spec.design:
        from typhoon.analysis import decisive
        from typhoon.runner.sequential_grid import rewrite_tables_and_report

        decisive.check_has_records(spec, out_dir)  # before anything is removed
    else:
        configs = recorded_configs(out_dir)
    with output_folder_lock(out_dir):  # not while a reproduce writes here
        for stale in PER_CELL_OUTPUTS:
            shutil.rmtree(out_dir / stale, ignore_errors=True)
        if not spec.design:
            return run_analysis(out_dir, notebooks_dir(), spec.analysis, spec.name, pages=grid_pages(configs),
                                on_notebook=lambda name: progress.say(f"analysis: {name}"), configs=configs,
                                workers=min(2, machine.usable_cores()))
    rewrite_tables_and_report(spec.name, out_dir)  # its tables are part of its analysis; it takes the lock itself
    return out_dir / "report.html"
