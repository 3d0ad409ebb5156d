"""The kl-original curve's kind of cell (:class:`typhoon.runner.cells.CellKind`), what a worker runs for it: the
next MLM epochs of a curve run, one by default (:func:`run_curve_epoch`). It goes on from the run's resume state
after the last epoch, bit for bit as an uninterrupted run, and writes the state after each epoch it trains. After
each epoch, in the run's folder: ``epochs.csv`` (losses and every KL definition per epoch), ``trace.csv`` (the KL
every ``TRACE_EVERY`` steps), ``mlm_loss.csv``, ``run.json`` (written last: the epoch is done) and, at the
design's snapshot epochs, ``epoch<e>/masking_state.npz``; the resume state (model, optimizer, schedule,
generators, strategy, about 0.3 GB: :mod:`typhoon.training.resume`) in the checkpoint folder, beside a small
``.json`` naming its run and epoch, which the command line reads to refuse a folder of another run at once.
The phase-1 states of the study's rows are the KL-state cells of :mod:`typhoon.studies.kl_gap.cells`.
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
from typhoon.studies.kl_gap.design import STATE_FILE
from typhoon.studies.kl_original.design import SNAPSHOT_EPOCHS, TRACE_EVERY
from typhoon.studies.kl_original.runs import epochs_reached, state_note_path


def _diagnostics(strategy, n_sequences: int) -> dict:
    from typhoon.analysis.kl import kl_definitions, rate_spread

    return {**kl_definitions(strategy.probs, strategy.counts, strategy.p, n_sequences),
            **rate_spread(strategy.probs, strategy.counts)}


def run_curve_epoch(config: RunConfig, folder: Path, state_path: Path, epoch: int, progress: bool = False) -> int:
    """Bring the curve run of ``config`` to MLM ``epoch``, its files in ``folder`` and its resume state at
    ``state_path`` written at the end of every epoch (a stop loses only the epoch in flight); returns the epochs it
    has reached."""
    import pandas as pd
    import torch

    from typhoon.machine import machine
    from typhoon.masking import SaliencySource
    from typhoon.records import numerics_of_run
    from typhoon.training import resume
    from typhoon.training.mlm_phase import adapt_mlm
    from typhoon.training.run import prepared_strategy, set_up

    folder, state_path = Path(folder), Path(state_path)
    reached = epochs_reached(folder)
    if reached >= epoch:
        return reached
    record_path = folder.as_posix()
    started = time.perf_counter()
    ctx = set_up(config, progress)
    torch.manual_seed(config.seed)  # dropout draws from the global generator, as in a full run
    strategy = prepared_strategy(ctx)
    mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device)
    saved = resume.load(state_path, ctx, record_path)
    if saved is None and reached > 0:
        raise RuntimeError(f"{record_path}: {reached} epochs are written but their resume state {state_path} is "
                           f"gone or of another run: remove {folder} to start it over")
    extra = {"trace": [], "epochs": [], "wall_s": 0.0} if saved is None else saved["progress"]["extra"]
    if saved is not None:
        resume.load_strategy_state(strategy, saved["strategy"])
        resume.restore_rng_states(ctx, saved["rng"])
    n_sequences = len(ctx.data["train"])
    clock = {"since": started}

    def at_step_end(step: int, epoch: int) -> None:
        if step % TRACE_EVERY == 0:
            extra["trace"].append({"step": step, "epoch": epoch, **_diagnostics(strategy, n_sequences)})

    def at_epoch_end(epoch: int, models: dict, phase: dict) -> None:
        rows = [r for r in phase["rows"] if r["epoch"] == epoch]
        train_losses = [r["loss"] for r in rows if r["split"] == "train"]
        extra["epochs"].append({"epoch": epoch, "step": phase["step"],
                                "train_loss": sum(train_losses) / max(len(train_losses), 1),
                                "dev_loss": next(r["loss"] for r in rows if r["split"] == "dev"),
                                **_diagnostics(strategy, n_sequences)})
        now = time.perf_counter()
        extra["wall_s"] += now - clock["since"]  # this epoch's share (a cell may train several)
        clock["since"] = now
        if epoch in SNAPSHOT_EPOCHS or epoch == config.mlm_epochs:
            snapshot = folder / f"epoch{epoch}" / STATE_FILE
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            strategy.save(snapshot.with_name(f".{STATE_FILE}.tmp"), compressed=True).replace(snapshot)
        atomic_write_csv(folder / "epochs.csv", pd.DataFrame(extra["epochs"]))
        atomic_write_csv(folder / "trace.csv", pd.DataFrame(extra["trace"]))
        atomic_write_csv(folder / "mlm_loss.csv", pd.DataFrame(phase["rows"]))
        summary = {"config": asdict(config), "machine": machine(), "epochs_reached": epoch,
                   "epochs_planned": config.mlm_epochs, "n_train": n_sequences, "wall_s": round(extra["wall_s"], 1),
                   "numerics": numerics_of_run(ctx.precision.name, ctx.device, ctx.attention,
                                               ctx.dropout).to_dict(),
                   "masking": strategy.meta()}
        resume.save(state_path, ctx, f"mlm{epoch}", strategy=strategy, models=models,
                    progress={"mlm": phase, "extra": extra}, record_path=record_path)
        atomic_write_text(state_note_path(state_path), json.dumps({"record_path": record_path, "epoch": epoch,
                                                                   "config": asdict(config)}, indent=1) + "\n")
        atomic_write_text(folder / "run.json", json.dumps(summary, indent=1, default=str) + "\n")  # last: the epoch is done

    folder.mkdir(parents=True, exist_ok=True)
    adapt_mlm(ctx, mlm, strategy, SaliencySource("mlm", None), saved=saved, at_epoch_end=at_epoch_end,
              at_step_end=at_step_end, until_epoch=epoch)
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
                        resumed=f"MLM epoch {first - 1}" if first > 1 else None)

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
