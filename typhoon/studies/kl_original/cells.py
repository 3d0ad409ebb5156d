"""The kl-original curve's kind of cell (:class:`typhoon.runner.cells.CellKind`), what a worker runs for it: the
next MLM epochs of a curve run, one by default (:func:`run_curve_epoch`, through
:func:`typhoon.training.run.phase_one` like every MLM phase). It goes on from the run's resume state after the last
epoch, bit for bit as an uninterrupted run, and writes the state after each epoch it trains. After each epoch, in
the run's folder (:class:`CurveFiles`, the curve's callback): ``epochs.csv`` (losses and every KL definition per
epoch), ``trace.csv`` (the KL every ``TRACE_EVERY`` steps), ``mlm_loss.csv`` (each with its columns in name
order), ``run.json`` (written last: the epoch is done) and, at the design's snapshot epochs,
``epoch<e>/masking_state.npz``; the resume state (model, optimizer, schedule, generators, strategy, about 0.3 GB:
:mod:`typhoon.training.resume`; the curve's own rows are not in it: a resumed run reads them back from its files)
in the checkpoint folder, beside a small ``.json`` naming its run and epoch, which the command line reads to
refuse a folder of another run at once. The phase-1 states of the study's rows are the KL-state cells of
:mod:`typhoon.studies.kl_gap.cells`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from typhoon.atomic import atomic_write_csv, atomic_write_text
from typhoon.config import RunConfig
from typhoon.runner import Cell, CellKind, cell_row
from typhoon.studies.kl_gap.cells import failed_row, remove_temp
from typhoon.studies.kl_gap.design import RUN_FILE, STATE_FILE
from typhoon.studies.kl_original.design import SNAPSHOT_EPOCHS, TRACE_EVERY
from typhoon.studies.kl_original.runs import epochs_reached, state_note_path
from typhoon.training import Boundary, PhaseCallback, PhaseState


def _diagnostics(strategy, n_sequences: int) -> dict:
    from typhoon.analysis.kl import kl_definitions, rate_spread

    return {**kl_definitions(strategy.probs, strategy.counts, strategy.p, n_sequences),
            **rate_spread(strategy.probs, strategy.counts)}


def _sorted_columns(rows: list[dict]):
    """A curve file's rows as a frame, its columns in name order (the same whether its rows were trained in this
    process or read back from the file)."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    return frame[sorted(frame.columns)]


def _rows_until(path: Path, epoch: int) -> list[dict]:
    """The rows of a curve file up to ``epoch`` (a later epoch's rows were written before its resume state was:
    they are trained again), each number read back as the double or int it was written from."""
    import csv

    if epoch == 0:
        return []
    with open(path, newline="") as fh:
        rows = [{name: _number(text) for name, text in row.items()} for row in csv.DictReader(fh)]
    return [row for row in rows if row["epoch"] <= epoch]


def _number(text: str) -> int | float:
    """A CSV cell pandas wrote: an int, a double (its shortest repr, which float() reads back exactly) or empty
    (NaN)."""
    if not text:
        return float("nan")
    try:
        return int(text)
    except ValueError:
        return float(text)


class CurveFiles(PhaseCallback):
    """A curve run's own files, written as each of its MLM epochs ends (:mod:`typhoon.training.callbacks`): the KL
    every ``TRACE_EVERY`` steps (``trace.csv``), each epoch's losses and KL (``epochs.csv``), the loss rows, the
    snapshots; then the phase's resume state at ``state_path``, the note beside it and ``run.json`` (last: the epoch
    is done). A run that goes on from its state after epoch ``saved_epoch`` reads its trace, epochs and wall time
    back from these files."""

    def __init__(self, ctx, folder: Path, state_path: Path, record_path: str, saved_epoch: int, started: float):
        self.ctx, self.folder, self.state_path, self.record_path = ctx, folder, state_path, record_path
        self.n_sequences = len(ctx.data["train"])
        self.trace = _rows_until(folder / "trace.csv", saved_epoch)
        self.epochs = _rows_until(folder / "epochs.csv", saved_epoch)
        self.wall_s = json.loads((folder / RUN_FILE).read_text())["wall_s"] if saved_epoch else 0.0
        self.since = started  # this epoch's wall time runs from here (a cell may train several)

    def on_step_end(self, state: PhaseState) -> None:
        if state.step % TRACE_EVERY == 0:
            self.trace.append({"step": state.step, "epoch": state.epoch,
                               **_diagnostics(state.strategy, self.n_sequences)})

    def on_epoch_end(self, state: PhaseState) -> None:
        from typhoon.machine import machine
        from typhoon.records import numerics_of_run

        ctx, config, folder, epoch = self.ctx, self.ctx.config, self.folder, state.epoch
        train_losses = [r["loss"] for r in state.rows if r["epoch"] == epoch and r["split"] == "train"]
        self.epochs.append({"epoch": epoch, "step": state.step,
                            "train_loss": sum(train_losses) / max(len(train_losses), 1),
                            "dev_loss": next(r["loss"] for r in state.rows if r["epoch"] == epoch and r["split"] == "dev"),
                            **_diagnostics(state.strategy, self.n_sequences)})
        now = time.perf_counter()
        self.wall_s, self.since = self.wall_s + now - self.since, now
        if epoch in SNAPSHOT_EPOCHS or epoch == config.mlm_epochs:
            snapshot = folder / f"epoch{epoch}" / STATE_FILE
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            state.strategy.save(snapshot.with_name(f".{STATE_FILE}.tmp"), compressed=True).replace(snapshot)
        atomic_write_csv(folder / "epochs.csv", _sorted_columns(self.epochs))
        atomic_write_csv(folder / "trace.csv", _sorted_columns(self.trace))
        atomic_write_csv(folder / "mlm_loss.csv", _sorted_columns(state.rows))
        summary = {"config": asdict(config), "machine": machine(), "epochs_reached": epoch,
                   "epochs_planned": config.mlm_epochs, "n_train": self.n_sequences, "wall_s": round(self.wall_s, 1),
                   "numerics": numerics_of_run(ctx.precision.name, ctx.device, ctx.attention, ctx.dropout).to_dict(),
                   "masking": state.strategy.meta()}
        state.save(self.state_path, ctx, record_path=self.record_path)  # the model, optimizer, generators, strategy
        atomic_write_text(state_note_path(self.state_path), json.dumps({"record_path": self.record_path, "epoch": epoch,
                                                                        "config": asdict(config)}, indent=1) + "\n")
        atomic_write_text(folder / RUN_FILE, json.dumps(summary, indent=1, default=str) + "\n")  # last: the epoch is done


def run_curve_epoch(config: RunConfig, folder: Path, state_path: Path, epoch: int, progress: bool = False) -> int:
    """Bring the curve run of ``config`` to MLM ``epoch``, its files in ``folder`` and its resume state at
    ``state_path`` written at the end of every epoch (:class:`CurveFiles`: a stop loses only the epoch in flight);
    returns the epochs it has reached."""
    from typhoon.training import resume
    from typhoon.training import run as training_run

    folder, state_path = Path(folder), Path(state_path)
    reached = epochs_reached(folder)
    if reached >= epoch:
        return reached
    record_path = folder.as_posix()
    started = time.perf_counter()
    ctx = training_run.set_up(config, progress)
    saved = resume.load(state_path, ctx, record_path)
    if saved is None and reached > 0:
        raise RuntimeError(f"{record_path}: {reached} epochs are written but their resume state {state_path} is "
                           f"gone or of another run: remove {folder} to start it over")
    folder.mkdir(parents=True, exist_ok=True)
    files = CurveFiles(ctx, folder, state_path, record_path, 0 if saved is None else saved.boundary.epoch, started)
    training_run.phase_one(ctx, saved=saved, callbacks=[files], until_epoch=epoch)
    return epochs_reached(folder)


class CurveEpoch(CellKind):
    """A curve run's next MLM epoch; ``args``: ``epoch`` (the epoch it brings the run to) and ``state`` (the run's
    resume state, in the checkpoint folder)."""

    def run(self, cell: Cell, out_dir: Path) -> dict:
        started, epoch = time.perf_counter(), cell.arg("epoch")
        if self.is_done(cell, out_dir):
            return cell_row(cell, "skipped")
        try:
            run_curve_epoch(cell.config, Path(out_dir) / cell.folder, Path(cell.arg("state")), epoch)
        except Exception as err:  # the cell's own failure is its row; a stop propagates (the last epoch stays)
            return failed_row(cell, err, started)
        first = epoch - self.epochs(cell) + 1  # the first epoch this cell trains
        return cell_row(cell, "ok", seconds=time.perf_counter() - started,
                        resumed=Boundary("mlm", first - 1).describe() if first > 1 else None)

    def is_done(self, cell: Cell, out_dir: Path) -> bool:
        return epochs_reached(Path(out_dir) / cell.folder) >= cell.arg("epoch")

    def has_resume_state(self, cell: Cell, out_dir: Path) -> bool:
        return Path(cell.arg("state")).is_file()

    def epochs(self, cell: Cell) -> int:
        return dict(cell.args).get("epochs", 1)

    def clean(self, cell: Cell, out_dir: Path) -> None:
        remove_temp(Path(out_dir) / cell.folder)
        state = Path(cell.arg("state"))
        for path in state.parent.glob(f".{state.name}.tmp-*"):
            path.unlink(missing_ok=True)


CURVE_EPOCH = CurveEpoch()
