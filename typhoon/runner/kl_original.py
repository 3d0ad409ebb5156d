"""The kl-original study's runs (its design: :mod:`typhoon.analysis.kl_original_design`; its tables:
:mod:`typhoon.analysis.kl_original`). Three parts, each resumable, each run on one machine:

- **rows**: phase 1 alone of every (row, task, seed), one MLM epoch, its masking state in
  ``states/<row>/<task>/seed<k>/`` as the KL-gap study writes them (:func:`typhoon.runner.kl_gap.run_phase_one`);
- **curve**: the 'all' row over the 2023 code's 100 / 80 MLM epochs, one epoch per call of
  :func:`run_curve_epoch`, so that the six runs advance together (:func:`run_curves`). After each epoch it
  writes, in ``curve/<task>/seed<k>/``: ``epochs.csv`` (one row per epoch: losses and every KL definition),
  ``trace.csv`` (the KL every :data:`TRACE_EVERY` steps), ``mlm_loss.csv``, ``run.json`` and, at the
  :data:`SNAPSHOT_EPOCHS`, ``epoch<e>/masking_state.npz``; and a resume state (model, optimizer, schedule,
  generators, strategy: :mod:`typhoon.training.resume`, about 0.3 GB) in the checkpoint folder, which is not
  part of the study's committed files. The next call goes on from it, bit for bit as an uninterrupted run.
- **finetune**: whole cells (phase 1 and fine-tuning) of typhoon_2023 and random under the 2023 phase 1,
  as ``typhoon run`` writes them, in ``finetune/runs/...``.

:func:`write_tables` writes the study's tables, README and the curve's figure from what has landed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from typhoon.analysis.kl.original_design import (
    ALL_2023,
    BACKBONE,
    CURVE_EPOCHS,
    FINETUNE_SEEDS,
    FINETUNE_SETTINGS,
    FINETUNE_STRATEGIES,
    PROFILE,
    ROWS,
    SEEDS,
    SNAPSHOT_EPOCHS,
    TASKS,
    TRACE_EVERY,
    row_named,
)
from typhoon.atomic import atomic_write_csv, atomic_write_text
from typhoon.config import RunConfig, resolve
from typhoon.runner.kl_gap import is_complete, run_phase_one, state_dir

STATE_FILE = "masking_state.npz"


def row_config(row: str, task: str, seed: int) -> RunConfig:
    """The cpu profile's Typhoon cell on minilm-l6-mlm for ``task`` and ``seed``, with ``row``'s change."""
    overrides = dict(row_named(row).overrides)
    cell = {"task": task, "backbone": BACKBONE, "strategy": overrides.pop("strategy", "typhoon"), "seed": seed}
    return resolve(PROFILE, cell, overrides)


def curve_config(task: str, seed: int) -> RunConfig:
    overrides = dict(ALL_2023)
    cell = {"task": task, "backbone": BACKBONE, "strategy": overrides.pop("strategy"), "seed": seed}
    return resolve(PROFILE, cell, {**overrides, "mlm_epochs": CURVE_EPOCHS[task]})


def finetune_config(strategy: str, task: str, seed: int) -> RunConfig:
    return resolve(PROFILE, {"task": task, "backbone": BACKBONE, "strategy": strategy, "seed": seed},
                   dict(FINETUNE_SETTINGS))


def run_rows(out: Path, rows=None, tasks=TASKS, seeds=SEEDS, progress: bool = False) -> list[Path]:
    """Every missing (row, task, seed) state, one after the other; returns the folders made."""
    made = []
    for row in rows or [r.name for r in ROWS]:
        for task in tasks:
            for seed in seeds:
                config, folder = row_config(row, task, seed), state_dir(out, row, task, seed)
                if is_complete(folder, config):
                    continue
                summary = run_phase_one(config, folder, progress, compressed=True)
                print(f"row {row} {task} seed{seed}: KL {summary['masking']['kl_to_uniform']:.3g} nats/token, "
                      f"{summary['wall_s']:.0f} s", flush=True)
                made.append(folder)
    return made


# --------------------------------------------------------------------------------------------------
# The curve


def curve_dir(out: Path, task: str, seed: int) -> Path:
    return Path(out) / "curve" / task / f"seed{seed}"


def epochs_reached(folder: Path) -> int:
    """How many MLM epochs the curve run in ``folder`` has written (its ``run.json`` is written last)."""
    run_file = Path(folder) / "run.json"
    return json.loads(run_file.read_text())["epochs_reached"] if run_file.is_file() else 0


class _EpochDone(Exception):
    """Raised after an epoch's files and resume state are written: the call has done its one epoch."""


def _diagnostics(strategy, n_sequences: int) -> dict:
    from typhoon.analysis.kl import kl_definitions, rate_spread

    return {**kl_definitions(strategy.probs, strategy.counts, strategy.p, n_sequences),
            **rate_spread(strategy.probs, strategy.counts)}


def run_curve_epoch(config: RunConfig, folder: Path, state_path: Path, progress: bool = False) -> int:
    """One more MLM epoch of the curve run of ``config`` (none once it has all of them), its files in
    ``folder`` and its resume state at ``state_path``; returns the epochs it has reached."""
    import pandas as pd
    import torch

    from typhoon.machine import machine
    from typhoon.masking import SaliencySource
    from typhoon.records import numerics_of_run
    from typhoon.training import resume
    from typhoon.training.run import adapt_mlm, prepared_strategy, set_up

    folder, state_path = Path(folder), Path(state_path)
    if epochs_reached(folder) >= config.mlm_epochs:
        return config.mlm_epochs
    record_path = folder.as_posix()
    started = time.perf_counter()
    ctx = set_up(config, progress)
    torch.manual_seed(config.seed)  # dropout draws from the global generator, as in a full run
    strategy = prepared_strategy(ctx)
    mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device)
    saved = resume.load(state_path, ctx, record_path)
    if saved is None and epochs_reached(folder) > 0:
        raise RuntimeError(f"{record_path}: {epochs_reached(folder)} epochs are written but their resume "
                           f"state {state_path} is gone or of another run: remove {folder} to start it over")
    extra = {"trace": [], "epochs": [], "wall_s": 0.0} if saved is None else saved["progress"]["extra"]
    if saved is not None:
        resume.load_strategy_state(strategy, saved["strategy"])
        resume.restore_rng_states(ctx, saved["rng"])
    n_sequences = len(ctx.data["train"])

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
        extra["wall_s"] += time.perf_counter() - started
        if epoch in SNAPSHOT_EPOCHS or epoch == config.mlm_epochs:
            snapshot = folder / f"epoch{epoch}" / STATE_FILE
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
        atomic_write_text(folder / "run.json", json.dumps(summary, indent=1, default=str) + "\n")  # last: the epoch is done
        raise _EpochDone

    folder.mkdir(parents=True, exist_ok=True)
    try:
        adapt_mlm(ctx, mlm, strategy, SaliencySource("mlm", None), saved=saved, at_epoch_end=at_epoch_end,
                  at_step_end=at_step_end)
    except _EpochDone:
        pass
    return epochs_reached(folder)


def run_curves(out: Path, checkpoints: Path, epochs: int, tasks=TASKS, seeds=SEEDS, progress: bool = False) -> None:
    """Advance every curve run one epoch at a time, round robin, until each has ``epochs`` (or all of its own)."""
    while True:
        behind = [(task, seed) for task in tasks for seed in seeds
                  if epochs_reached(curve_dir(out, task, seed)) < min(epochs, CURVE_EPOCHS[task])]
        if not behind:
            return
        task, seed = min(behind, key=lambda run: epochs_reached(curve_dir(out, *run)))
        began = time.perf_counter()
        reached = run_curve_epoch(curve_config(task, seed), curve_dir(out, task, seed),
                                  Path(checkpoints) / f"{task}-seed{seed}.resume.pt", progress)
        print(f"curve {task} seed{seed}: epoch {reached}, {time.perf_counter() - began:.0f} s", flush=True)


def run_finetune(out: Path, tasks=TASKS, seeds=None, progress: bool = False) -> None:
    """Every missing whole cell of the fine-tuned comparison (:data:`FINETUNE_STRATEGIES`), records in
    ``out/finetune``; ``seeds`` None: each task's registered seeds (:data:`FINETUNE_SEEDS`)."""
    from typhoon.training.run import run

    for seed in sorted(set(seeds or [s for task in tasks for s in FINETUNE_SEEDS[task]])):
        for task in [t for t in tasks if seed in FINETUNE_SEEDS[t]]:
            for strategy in FINETUNE_STRATEGIES:
                record = run(finetune_config(strategy, task, seed), Path(out) / "finetune", progress=progress)
                print(f"finetune {task} {strategy} seed{seed}: {record.final}", flush=True)


def write_tables(out: Path) -> dict:
    """The study's tables and README (:func:`typhoon.analysis.kl_original.write_report`) and, once a curve run
    has landed, its figure of KL against MLM epochs (``kl_original.CURVE_FIGURE``). Returns the tables."""
    from typhoon.analysis import kl as kl_original
    from typhoon.report import plot_kl_curve

    tables = kl_original.write_report(out)
    if "curve_epochs" in tables:
        plot_kl_curve(tables["curve_epochs"], Path(out) / kl_original.CURVE_FIGURE)
    return tables
