"""A KL study's phase-1 state as a kind of cell (:class:`typhoon.runner.cells.CellKind`), what a worker runs for
it: phase 1 of a run alone (no fine-tuning: the KL depends on nothing after it), its masking state, MLM losses and
a summary written whole into the cell's folder, ``states/<name>/<task>/seed<k>/`` (:func:`run_phase_one`). The
KL-gap study's causes and the kl-original study's rows are such cells.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from typhoon.atomic import staged_dir
from typhoon.config import RunConfig
from typhoon.runner import Cell, CellKind, cell_row, error_line
from typhoon.studies.kl_gap.design import RUN_FILE, STATE_FILE


def state_is_complete(folder: Path, config: RunConfig) -> bool:
    """The folder holds ``config``'s finished state: the same run (``RunConfig.identity``: not where it ran), a
    field added to RunConfig since taking its default in the stored config, as a record's does."""
    run_file = Path(folder) / RUN_FILE
    if not (run_file.is_file() and (Path(folder) / STATE_FILE).is_file()):
        return False
    stored = RunConfig.from_dict(json.loads(run_file.read_text())["config"])
    return stored.profile == config.profile and stored.identity() == config.identity()  # not where it ran


def run_phase_one(config: RunConfig, folder: Path, progress: bool = False, compressed: bool = False) -> dict:
    """Phase 1 of ``config`` alone; its masking state (``compressed``: deflated), MLM loss rows and a run
    summary written into ``folder`` (whole or not at all)."""
    import pandas as pd
    import torch

    from typhoon.machine import machine
    from typhoon.records import numerics_of_run
    from typhoon.training.run import phase_one, set_up

    started = time.perf_counter()
    ctx = set_up(config, progress)
    torch.manual_seed(config.seed)  # dropout draws from the global generator, as in a full run
    one = phase_one(ctx)
    train_losses = [row["loss"] for row in one.loss_rows if row["split"] == "train"]
    dev_losses = [row["loss"] for row in one.loss_rows if row["split"] == "dev"]
    summary = {
        "config": asdict(config), "machine": machine(),
        "numerics": numerics_of_run(ctx.precision.name, ctx.device, ctx.attention, ctx.dropout).to_dict(),
        "mlm_steps": one.timing["mlm_steps"], "mlm_first_loss": train_losses[0], "mlm_last_loss": train_losses[-1],
        "mlm_dev_loss": dev_losses[-1], "mlm_full_mask_loss": one.full_mask_loss,
        "masking": one.strategy.meta(), "n_train": len(ctx.data["train"]),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    with staged_dir(folder) as staging:
        one.strategy.save(staging / STATE_FILE, compressed)
        pd.DataFrame(one.loss_rows).to_csv(staging / "mlm_loss.csv", index=False)
        (staging / RUN_FILE).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return summary


def failed_row(cell: Cell, err: Exception, started: float) -> dict:
    """The status row of a KL cell that raised: its error, and the OS error of a file-system failure (the loop stops
    the study on it)."""
    from typhoon import paths

    row = cell_row(cell, "failed", error=f"{type(err).__name__}: {error_line(err)}", seconds=time.perf_counter() - started)
    if paths.is_file_system_error(err):
        row["os_error"] = [err.errno, err.strerror, err.filename]
    return row


class KlState(CellKind):
    """A phase-1 state in ``<out>/<cell.folder>``; ``args``: ``compressed`` (kl-original deflates its states)."""

    def run(self, cell: Cell, out_dir: Path) -> dict:
        folder, started = Path(out_dir) / cell.folder, time.perf_counter()
        if self.is_done(cell, out_dir):
            return cell_row(cell, "skipped")
        try:
            summary = run_phase_one(cell.config, folder, compressed=dict(cell.args).get("compressed", False))
        except Exception as err:  # the cell's own failure is its row; a stop propagates
            return failed_row(cell, err, started)
        return cell_row(cell, "ok", seconds=summary["wall_s"])

    def is_done(self, cell: Cell, out_dir: Path) -> bool:
        return state_is_complete(Path(out_dir) / cell.folder, cell.config)

    def clean(self, cell: Cell, out_dir: Path) -> None:
        remove_temp(Path(out_dir) / cell.folder)


def remove_temp(folder: Path) -> None:
    """What a killed writer left beside ``folder`` or in it: staging folders and temp files."""
    import shutil

    for path in [*folder.parent.glob(f".{folder.name}.tmp-*"), *folder.glob(".*.tmp*")]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


KL_STATE = KlState()
