"""The KL studies as policies of the one study loop (:func:`typhoon.runner.study.run_study`), so that their cells
run as a grid's do: on the local pool of worker processes, a Dask or SLURM cluster, or several slots of one GPU,
the longest first, with the grid's progress line, Ctrl-C and resume.

- kl-gap (:class:`KlGapCauses`): why Typhoon's masking is so much closer to uniform than the paper's 7e-4
  nats/token. Each registered cause (:data:`typhoon.analysis.kl.gap_causes.CAUSES`) changes one thing of the
  ``cpu`` profile's Typhoon cell; its phase-1 state per (task, seed), ``states/<cause>/<task>/seed<k>/``, every
  run of the study on one machine so the causes are compared at one numerics. The table:
  :func:`typhoon.analysis.kl.kl_gap_table`.
- kl-original (:mod:`typhoon.analysis.kl.original_design`): :class:`KlOriginalRows`, each row's phase-1 state at
  1 MLM epoch (``states/<row>/<task>/seed<k>/``); :class:`KlOriginalCurve`, the 'all' row over the 2023 code's
  100 / 80 MLM epochs, a cell per run and epoch (:data:`typhoon.runner.kl_cells.CURVE_EPOCH`), every run one epoch
  further at each look; :class:`KlOriginalFinetune`, whole cells of the fine-tuned comparison, records under
  ``finetune/``. :func:`write_tables` writes the study's tables, README and the curve's figure.

The cells' outputs are the state: a stopped study resumes where it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from typhoon.analysis.kl.gap_causes import CAUSES, cause_named
from typhoon.analysis.kl.original_design import (
    CURVE_EPOCHS,
    FINETUNE_SEEDS,
    FINETUNE_STRATEGIES,
    ROWS,
    SEEDS,
    TASKS,
)
from typhoon.runner import progress
from typhoon.runner.cells import Cell, kind_of
from typhoon.runner.kl_runs import (
    KL_GAP_SEEDS,
    cause_config,
    curve_config,
    curve_folder,
    epochs_reached,
    finetune_config,
    row_config,
    state_folder,
    state_path,
)
from typhoon.runner.policy import StudyPolicy

if TYPE_CHECKING:
    import pandas as pd

class _OneLook(StudyPolicy):
    """A study part of one look: every cell not done yet. Its tables are written apart, from whatever states
    have landed (``kl-original table``; ``kl-gap`` writes its table after its cells)."""

    def __init__(self, cells: list[Cell], execution: dict | None = None):
        self.every = [cell.placed(**(execution or {})) for cell in cells]  # --set device=...: where they run
        self.looked = False
        self.configs = [cell.config for cell in cells]

    def cells(self, out_dir: Path) -> list[Cell]:
        return self.every

    def next_look(self, out_dir: Path, log: progress.RunLog) -> list[Cell]:
        if self.looked:
            return []
        self.looked = True
        return [cell for cell in self.every if not kind_of(cell).is_done(cell, out_dir)]

    def done_before(self, out_dir: Path, todo: list[Cell]) -> int:
        return len(self.every) - len(todo)

    def preflight(self) -> None:
        from typhoon.runner.grid import preflight

        preflight(self.configs)

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: progress.RunLog, run: dict) -> Path | None:
        return None  # no report: the tables are the study's (write_tables), from all that has landed

    def commit_message(self, out_dir: Path) -> str:
        return f"{Path(out_dir).name}: states"


class KlGapCauses(_OneLook):
    """kl-gap: every missing (cause, task, seed) state (see the module docstring); its table: write_kl_gap_table."""

    title, log_name = "kl-gap", "kl-gap.log"

    def __init__(self, causes=None, tasks=TASKS, seeds=KL_GAP_SEEDS, execution: dict | None = None):
        chosen = [cause_named(name) for name in causes] if causes else list(CAUSES)
        super().__init__([Cell(cause_config(cause, task, seed), kind="kl_state",
                               folder=state_folder(cause.name, task, seed))
                          for cause in chosen for task in tasks for seed in seeds], execution)


class KlOriginalRows(_OneLook):
    """kl-original's rows: every missing (row, task, seed) state at 1 MLM epoch; the tables: write_tables."""

    title, log_name = "kl-original rows", "kl-original.log"

    def __init__(self, rows=None, tasks=TASKS, seeds=SEEDS, execution: dict | None = None):
        super().__init__([Cell(row_config(row, task, seed), kind="kl_state", folder=state_folder(row, task, seed),
                               args=(("compressed", True),))
                          for row in rows or [r.name for r in ROWS] for task in tasks for seed in seeds], execution)


class KlOriginalFinetune(_OneLook):
    """kl-original's fine-tuned comparison: every missing whole cell (:data:`FINETUNE_STRATEGIES`) of each task's
    registered seeds (:data:`FINETUNE_SEEDS`; ``seeds`` narrows them), records under ``finetune/``."""

    title, log_name = "kl-original finetune", "kl-original.log"

    def __init__(self, tasks=TASKS, seeds=None, execution: dict | None = None):
        super().__init__([Cell(finetune_config(strategy, task, seed), under="finetune")
                          for task in tasks for seed in FINETUNE_SEEDS[task] if seeds is None or seed in seeds
                          for strategy in FINETUNE_STRATEGIES], execution)


class KlOriginalCurve(StudyPolicy):
    """kl-original's ``curve`` (:data:`~typhoon.analysis.kl.original_design.CURVES`): each run (task, seed)
    ``epochs_per_cell`` MLM epochs further at every look, until each has ``epochs`` (or all of its own); a cell per
    run and stretch of epochs, going on from the run's resume state in ``checkpoints`` and writing every epoch's
    files and state as it ends. ``rehearse``: the runs on that many examples (:func:`~typhoon.runner.kl_runs.
    curve_config`), to try the machinery on a new machine."""

    title, log_name = "kl-original curve", "kl-original.log"

    def __init__(self, checkpoints: Path, epochs: int, tasks=TASKS, seeds=SEEDS, execution: dict | None = None,
                 curve: str = "all", epochs_per_cell: int = 1, rehearse: int | None = None):
        self.checkpoints, self.runs = Path(checkpoints).resolve(), [(task, seed) for task in tasks for seed in seeds]
        self.execution, self.curve, self.epochs_per_cell = execution or {}, curve, epochs_per_cell
        self.target = {run: min(epochs, CURVE_EPOCHS[run[0]]) for run in self.runs}
        self.configs = {run: curve_config(*run, curve, rehearse) for run in self.runs}

    def epoch_cell(self, task: str, seed: int, epoch: int, reached: int) -> Cell:
        return Cell(self.configs[task, seed], kind="curve_epoch", folder=curve_folder(task, seed, self.curve),
                    args=(("epoch", epoch), ("epochs", epoch - reached),
                          ("state", str(state_path(self.checkpoints, task, seed, self.curve))))).placed(**self.execution)

    def cells(self, out_dir: Path) -> list[Cell]:
        return [self.epoch_cell(*run, self.target[run], 0) for run in self.runs]

    def next_look(self, out_dir: Path, log: progress.RunLog) -> list[Cell]:
        behind = [(run, epochs_reached(Path(out_dir) / curve_folder(*run, self.curve))) for run in self.runs]
        return [self.epoch_cell(*run, min(reached + self.epochs_per_cell, self.target[run]), reached)
                for run, reached in behind if reached < self.target[run]]

    def describe(self, out_dir: Path) -> str:
        reached = [epochs_reached(Path(out_dir) / curve_folder(*run, self.curve)) for run in self.runs]
        return (f"{len(self.runs)} runs of the curve '{self.curve}' at epochs {'/'.join(map(str, reached))}, to "
                f"{'/'.join(str(self.target[run]) for run in self.runs)}")

    def preflight(self) -> None:
        from typhoon.runner.grid import preflight

        preflight(list(self.configs.values())[:1])

    def go_on(self, ran: pd.DataFrame, log: progress.RunLog) -> bool:
        if ran["status"].isin(["ok", "skipped"]).all():
            return True
        log.write("a curve epoch failed: the curve stops here (rerun to retry it)")
        return False

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: progress.RunLog, run: dict) -> Path | None:
        return None  # no report: the tables are the study's (write_tables), from all that has landed


def write_tables(out: Path) -> dict:
    """The study's tables and README (:func:`typhoon.analysis.kl.write_report`; the command line has refused a
    curve run that is not registered, :func:`~typhoon.runner.kl_runs.check_curve_runs`) and, once a curve run
    has landed, its figure of KL against MLM epochs (``typhoon.analysis.kl.CURVE_FIGURE``). Returns the tables."""
    from typhoon.analysis import kl as kl_original
    from typhoon.report import plot_kl_curve

    tables = kl_original.write_report(out)
    if "curve_epochs" in tables:
        plot_kl_curve(tables["curve_epochs"], Path(out) / kl_original.CURVE_FIGURE)
    return tables


def write_kl_gap_table(out: Path) -> pd.DataFrame:
    """``kl_gap.csv`` and ``kl_gap.md``: the KL-gap table (:func:`typhoon.analysis.kl.kl_gap_table`)."""
    from typhoon.analysis.kl import kl_gap_table
    from typhoon.atomic import atomic_write_csv, atomic_write_text

    table = kl_gap_table(out)
    atomic_write_csv(Path(out) / "kl_gap.csv", table)
    atomic_write_text(Path(out) / "kl_gap.md", table.to_markdown(index=False, floatfmt=".3g") + "\n")
    return table

