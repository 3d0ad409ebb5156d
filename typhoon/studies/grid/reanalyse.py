"""A grid's notebooks and report again from its records, training nothing (``reanalyse`` of a grid's folder, through
its study: :meth:`typhoon.studies.grid.study.Grid.reanalyse`).

For a committed reference run after the notebooks changed (e.g. the per-cell ``10_run`` notebooks of the engine
before worker processes, replaced by one walkthrough per backbone × task), or for a user's own run. The cells are
its records' own configs in ``results.csv`` order, so a run made under an older version of its profile still gets
a walkthrough per backbone × task of what it trained. The records and ``results.csv`` are not touched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from typhoon import machine, paths
from typhoon.config import RunConfig
from typhoon.profiles import Profile
from typhoon.records import output_folder_lock
from typhoon.report import StudyPages
from typhoon.runner import notebooks_dir, say
from typhoon.studies.grid.analysis import run_analysis

# What the engine before worker processes wrote per cell; the walkthroughs replace them.
PER_CELL_OUTPUTS = ("notebooks/runs", "figures/runs")


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


def reanalyse_grid(out_dir: Path, spec: Profile, pages: StudyPages) -> Path:
    """The walkthroughs, analysis notebooks and report of the grid in ``out_dir`` from its records; the report."""
    configs = recorded_configs(out_dir)
    with output_folder_lock(out_dir):  # not while a reproduce writes here
        for stale in PER_CELL_OUTPUTS:
            shutil.rmtree(out_dir / stale, ignore_errors=True)
        return run_analysis(out_dir, notebooks_dir(), spec.analysis, spec.name, pages=pages,
                            on_notebook=lambda name: say(f"analysis: {name}"), configs=configs,
                            workers=min(2, machine.usable_cores()))
