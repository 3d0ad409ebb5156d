"""The kl-original study as policies of the one study loop (:func:`typhoon.runner.study.run_study`), so that its
cells run as a grid's do: on the local pool of worker processes, a Dask or SLURM cluster, or several slots of one
GPU, the longest first, with the grid's progress line, Ctrl-C and resume. Its parts (design:
:mod:`typhoon.studies.kl_original.design`): :class:`KlOriginalRows`, each row's phase-1 state at 1 MLM epoch
(``states/<row>/<task>/seed<k>/``, the KL-state cells of :mod:`typhoon.studies.kl_gap.cells`);
:class:`KlOriginalCurve`, a curve's runs over the 2023 code's 100 / 80 MLM epochs, a cell per run and stretch of
epochs (:data:`typhoon.studies.kl_original.cells.CURVE_EPOCH`), every run further at each look;
:class:`KlOriginalFinetune`, whole cells of the fine-tuned comparison, records under ``finetune/``. Each part
ends by writing the study's tables, README and the curve's figure (:func:`write_tables`) from all that has
landed. The cells' outputs are the state: a stopped study resumes where it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from typhoon.runner import Cell, Finished, Look, OneLook, RunLog, StudyPolicy, failed, preflight
from typhoon.studies.kl_gap.cells import KL_STATE
from typhoon.studies.kl_gap.design import state_folder
from typhoon.studies.kl_original.cells import CURVE_EPOCH
from typhoon.studies.kl_original.design import (
    CURVE_EPOCHS,
    FINETUNE_SEEDS,
    FINETUNE_STRATEGIES,
    ROWS,
    SEEDS,
    TASKS,
)
from typhoon.studies.kl_original.runs import (
    curve_config,
    curve_folder,
    epochs_reached,
    finetune_config,
    row_config,
    state_path,
)

if TYPE_CHECKING:
    import pandas as pd


class _StudyPart(OneLook):
    """A part of the study made in one look: every cell not done yet, then the study's tables."""

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: RunLog, run: dict) -> Finished:
        finish_tables(out_dir, log)
        return Finished()

    def commit_message(self, out_dir: Path) -> str:
        return f"{Path(out_dir).name}: states and tables"


class KlOriginalRows(_StudyPart):
    """kl-original's rows: every missing (row, task, seed) state at 1 MLM epoch; the tables: write_tables."""

    title, log_name = "kl-original rows", "kl-original.log"

    def __init__(self, rows=None, tasks=TASKS, seeds=SEEDS, execution: dict | None = None):
        super().__init__([Cell(row_config(row, task, seed), kind=KL_STATE, folder=state_folder(row, task, seed),
                               args=(("compressed", True),))
                          for row in rows or [r.name for r in ROWS] for task in tasks for seed in seeds], execution)


class KlOriginalFinetune(_StudyPart):
    """kl-original's fine-tuned comparison: every missing whole cell (:data:`FINETUNE_STRATEGIES`) of each task's
    registered seeds (:data:`FINETUNE_SEEDS`; ``seeds`` narrows them), records under ``finetune/``."""

    title, log_name = "kl-original finetune", "kl-original.log"

    def __init__(self, tasks=TASKS, seeds=None, execution: dict | None = None):
        super().__init__([Cell(finetune_config(strategy, task, seed), under="finetune")
                          for task in tasks for seed in FINETUNE_SEEDS[task] if seeds is None or seed in seeds
                          for strategy in FINETUNE_STRATEGIES], execution)


class KlOriginalCurve(StudyPolicy):
    """kl-original's ``curve`` (:data:`~typhoon.studies.kl_original.design.CURVES`): each run (task, seed)
    ``epochs_per_cell`` MLM epochs further at every look, until each has ``epochs`` (or all of its own); a cell per
    run and stretch of epochs, going on from the run's resume state in ``checkpoints`` and writing every epoch's
    files and state as it ends. ``rehearse``: the runs on that many examples (:func:`~typhoon.studies.kl_original.runs.
    curve_config`), to try the machinery on a new machine."""

    title, log_name = "kl-original curve", "kl-original.log"

    def __init__(self, checkpoints: Path, epochs: int, tasks=TASKS, seeds=SEEDS, execution: dict | None = None,
                 curve: str = "all", epochs_per_cell: int = 1, rehearse: int | None = None):
        self.checkpoints, self.runs = Path(checkpoints).resolve(), [(task, seed) for task in tasks for seed in seeds]
        self.execution, self.curve, self.epochs_per_cell = execution or {}, curve, epochs_per_cell
        self.target = {run: min(epochs, CURVE_EPOCHS[run[0]]) for run in self.runs}
        self.configs = {run: curve_config(*run, curve, rehearse) for run in self.runs}

    def epoch_cell(self, task: str, seed: int, epoch: int, reached: int) -> Cell:
        return Cell(self.configs[task, seed], kind=CURVE_EPOCH, folder=curve_folder(task, seed, self.curve),
                    args=(("epoch", epoch), ("epochs", epoch - reached),
                          ("state", str(state_path(self.checkpoints, task, seed, self.curve))))).placed(**self.execution)

    def cells(self, out_dir: Path) -> list[Cell]:
        return [self.epoch_cell(*run, self.target[run], 0) for run in self.runs]

    def next_look(self, out_dir: Path, log: RunLog, last: pd.DataFrame | None) -> Look:
        """Each run's next stretch of epochs, until each is at its target; a failed epoch stops the curve."""
        if failed(last):
            log.write("a curve epoch failed: the curve stops here (rerun to retry it)")
            return Look()
        behind = [(run, epochs_reached(Path(out_dir) / curve_folder(*run, self.curve))) for run in self.runs]
        return Look([self.epoch_cell(*run, min(reached + self.epochs_per_cell, self.target[run]), reached)
                     for run, reached in behind if reached < self.target[run]])

    def describe(self, out_dir: Path) -> str:
        reached = [epochs_reached(Path(out_dir) / curve_folder(*run, self.curve)) for run in self.runs]
        return (f"{len(self.runs)} runs of the curve '{self.curve}' at epochs {'/'.join(map(str, reached))}, to "
                f"{'/'.join(str(self.target[run]) for run in self.runs)}")

    def preflight(self) -> None:
        preflight(list(self.configs.values())[:1])

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: RunLog, run: dict) -> Finished:
        finish_tables(out_dir, log)
        return Finished()


def finish_tables(out: Path, log: RunLog) -> None:
    """The study's tables after a part of it, where ``out`` is the study's folder (its row states there): a curve
    rehearsed, or run into a folder of its own to be landed later, has none, and nothing is written."""
    if not any(Path(out).glob("states/*/*/seed*")):
        log.write(f"no row state in {out}: the study's tables are written where its states are (kl-original table)")
        return
    write_tables(out)
    log.write(f"tables and README written: {Path(out) / 'README.md'}")


def write_tables(out: Path) -> dict:
    """The study's tables and README (:func:`typhoon.studies.kl_original.report.write_report`; the command line
    has refused a curve run that is not registered, :func:`~typhoon.studies.kl_original.runs.check_curve_runs`)
    and, once a curve run has landed, its figure of KL against MLM epochs
    (:data:`typhoon.studies.kl_original.curve.CURVE_FIGURE`). Returns the tables."""
    from typhoon.studies.kl_original.curve import CURVE_FIGURE
    from typhoon.studies.kl_original.figure import plot_kl_curve
    from typhoon.studies.kl_original.report import write_report

    tables = write_report(out)
    if "curve_epochs" in tables:
        plot_kl_curve(tables["curve_epochs"], Path(out) / CURVE_FIGURE)
    return tables
