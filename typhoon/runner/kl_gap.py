"""The KL-gap study: why is Typhoon's masking 30x closer to uniform here than the paper's 7e-4 nats/token?

Registered before any of its runs (:data:`~typhoon.analysis.kl_gap_causes.CAUSES` and
:data:`~typhoon.analysis.kl_gap_causes.HYPOTHESIS`, committed first in this module, now in
:mod:`typhoon.analysis.kl_gap_causes`, which the table reads too). The
``cpu`` reference run's Typhoon states sit at a geometric mean of 2.4e-5 nats/token (95 % CI 1.1e-5 to
5.3e-5), a 30th of the paper's figure. Each candidate cause changes *one* thing of the ``cpu`` profile's
Typhoon cell at the paper's calibration (min-max, δ 0.4, p 0.15), and its KL is measured on the masking
state at the end of phase 1, for MRPC and CoLA × seeds 0-2. Phase 1 alone is run (no fine-tuning): the KL
depends on nothing after it. Every run of one study is made on one machine, so the causes are compared
at one numerics.

Layout of ``<out>``: ``states/<cause>/<task>/seed<k>/`` holds ``masking_state.npz``, ``mlm_loss.csv`` and
``run.json`` (the config, machine, numerics, MLM losses), each folder written whole or not at all; a rerun
skips the folders that are complete, so the study resumes. The table is
:func:`typhoon.analysis.kl_gap.kl_gap_table`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

from typhoon.analysis.kl.gap_causes import CAUSES, RUN_FILE, STATE_FILE, Cause, cause_named
from typhoon.atomic import staged_dir
from typhoon.config import RunConfig, resolve

TASKS = ("mrpc", "cola")
SEEDS = (0, 1, 2)
PROFILE = "cpu"  # the reference run whose Typhoon cells the baseline is


def cause_config(cause: Cause, task: str, seed: int) -> RunConfig:
    """The Typhoon cell of the cpu profile for ``task`` and ``seed``, with the cause's change."""
    cell = {"task": task, "backbone": "minilm-l6", "strategy": "typhoon", "seed": seed}
    return resolve(PROFILE, cell, cause.overrides)


def state_dir(out: Path, cause: str, task: str, seed: int) -> Path:
    return Path(out) / "states" / cause / task / f"seed{seed}"


def is_complete(folder: Path, config: RunConfig) -> bool:
    """The folder holds ``config``'s finished state: a field added to RunConfig since takes its default in
    the stored config, as a record's does (``RunConfig.from_dict``)."""
    run_file = folder / RUN_FILE
    if not (run_file.is_file() and (folder / STATE_FILE).is_file()):
        return False
    return RunConfig.from_dict(json.loads(run_file.read_text())["config"]) == config


def run_phase_one(config: RunConfig, folder: Path, progress: bool = True, compressed: bool = False) -> dict:
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
        "numerics": numerics_of_run(ctx.precision.name, ctx.device, ctx.attention,
                                    ctx.dropout).to_dict(),
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


def run_study(out: Path, causes: Iterable[str] | None = None, tasks: Iterable[str] = TASKS,
              seeds: Iterable[int] = SEEDS, progress: bool = True) -> list[Path]:
    """Every missing (cause, task, seed) state of the study, one after the other; returns the folders made."""
    chosen = [cause_named(name) for name in causes] if causes else list(CAUSES)
    made = []
    for cause in chosen:
        for task in tasks:
            for seed in seeds:
                config = cause_config(cause, task, seed)
                folder = state_dir(out, cause.name, task, seed)
                if is_complete(folder, config):
                    continue
                summary = run_phase_one(config, folder, progress)
                print(f"{cause.name} {task} seed{seed}: KL {summary['masking']['kl_to_uniform']:.3g} nats/token, "
                      f"MLM loss {summary['mlm_first_loss']:.2f} -> {summary['mlm_last_loss']:.2f}, "
                      f"{summary['wall_s']:.0f} s", flush=True)
                made.append(folder)
    return made
