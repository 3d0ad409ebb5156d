"""The KL-gap study as a policy of the one study loop (:func:`typhoon.runner.study.run_study`): why Typhoon's masking
is so much closer to uniform than the paper's 7e-4 nats/token. Each registered cause (:data:`typhoon.studies.
kl_gap.design.CAUSES`) changes one thing of the ``cpu`` profile's Typhoon cell; its phase-1 state per (task,
seed), ``states/<cause>/<task>/seed<k>/`` (:mod:`typhoon.studies.kl_gap.cells`), every run of the study on one
machine so the causes are compared at one numerics. Its cells run as a grid's do (the local pool, a Dask or SLURM
cluster), and at the end it writes its table (:func:`write_table`). The cells' outputs are the state: a stopped
study resumes where it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from typhoon.config import RunConfig
from typhoon.profiles import resolve
from typhoon.runner import Cell, Finished, OneLook, RunLog
from typhoon.studies.kl_gap.cells import KL_STATE
from typhoon.studies.kl_gap.design import CAUSES, Cause, cause_named, state_folder

if TYPE_CHECKING:
    import pandas as pd

PROFILE = "cpu"  # the baseline is this profile's Typhoon cell
BACKBONE = "minilm-l6"  # the kl-gap baseline: the cpu profile's fresh-head cell
TASKS = ("mrpc", "cola")
SEEDS = (0, 1, 2)  # the study's registered seeds, per task


def cause_config(cause: Cause, task: str, seed: int) -> RunConfig:
    """The Typhoon cell of the cpu profile for ``task`` and ``seed``, with the cause's change."""
    return resolve(PROFILE, {"task": task, "backbone": BACKBONE, "strategy": "typhoon", "seed": seed},
                   cause.overrides)


class KlGapCauses(OneLook):
    """kl-gap: every missing (cause, task, seed) state (see the module docstring), then its table."""

    title, log_name = "kl-gap", "kl-gap.log"

    def __init__(self, causes=None, tasks=TASKS, seeds=SEEDS, execution: dict | None = None):
        chosen = [cause_named(name) for name in causes] if causes else list(CAUSES)
        super().__init__([Cell(cause_config(cause, task, seed), kind=KL_STATE,
                               folder=state_folder(cause.name, task, seed))
                          for cause in chosen for task in tasks for seed in seeds], execution)

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: RunLog, run: dict) -> Finished:
        write_table(out_dir)
        return Finished()

    def commit_message(self, out_dir: Path) -> str:
        return f"{Path(out_dir).name}: states and table"


def write_table(out: Path) -> pd.DataFrame:
    """``kl_gap.csv`` and ``kl_gap.md``: the KL-gap table (:func:`typhoon.studies.kl_gap.table.kl_gap_table`)."""
    from typhoon.atomic import atomic_write_csv, atomic_write_text
    from typhoon.studies.kl_gap.table import kl_gap_table

    table = kl_gap_table(out)
    atomic_write_csv(Path(out) / "kl_gap.csv", table)
    atomic_write_text(Path(out) / "kl_gap.md", table.to_markdown(index=False, floatfmt=".3g") + "\n")
    return table
