"""The estimate's calibration: a few real training steps of each kind of cell timed in this process (with
the cells' thread count), giving seconds per executed GFLOP and per new padded width, and each cell's
price from its counted work (:mod:`typhoon.runner.cell_work`)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from typhoon.config import RunConfig
from typhoon.data import padded_width
from typhoon.runner.cell_work import PhaseWork, cell_work, mlm_kind, selected_positions

# Training batches timed per phase and kind of cell, each twice (cold, then warm): at least
# MIN_SAMPLE_BATCHES, more (up to SAMPLE_BATCHES, of distinct widths) while the phase has spent less than
# PHASE_BUDGET_S -- a shared machine's noise averages out over more steps where steps are short.
MIN_SAMPLE_BATCHES, SAMPLE_BATCHES, PHASE_BUDGET_S = 2, 8, 3.0


# The kinds of MLM step a calibration times (the saliency each computes), costliest first. Past
# CALIBRATION_BUDGET_S a kind of cell times no further MLM kind: an untimed one is priced as the costliest
# kind timed (an over- rather than an under-estimate).
MLM_KINDS = ("task_saliency", "mlm_saliency", "no_saliency")


CALIBRATION_BUDGET_S = 45.0


def calibration_key(config: RunConfig) -> tuple:
    """Cells that share this key share a calibration: same model, data, kernels and step shape."""
    return (config.backbone, config.task, config.precision, config.attention, config.dropout, config.device,
            config.max_length, config.batch_size, config.eval_batch_size, config.max_train_examples,
            config.max_eval_examples)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _sample_by_width(batches: list, widths: list[int], count: int) -> list:
    """``count`` batches of distinct widths spread over the range (quantiles of the widths)."""
    by_width = {}
    for idx, width in zip(batches, widths, strict=True):
        by_width.setdefault(width, idx)
    distinct = sorted(by_width)
    picks = sorted({distinct[min(len(distinct) - 1, int((i + 0.5) * len(distinct) / count))] for i in range(count)})
    # the middle width first, then from both ends inwards: a prefix of the list spans the range too
    order = [picks[len(picks) // 2]] + [w for pair in zip(picks, reversed(picks), strict=True) for w in pair]
    return [by_width[w] for w in dict.fromkeys(order)]


def calibrate_kind(config: RunConfig, mlm_kinds: dict[str, RunConfig]) -> tuple:
    """Time a few real steps of one kind of cell (:func:`calibration_key`), in this process.

    ``mlm_kinds``: the kinds of MLM step to time (:data:`MLM_KINDS`, costliest first), each with a cell of
    that kind whose strategy, budget and schedule its steps take. Returns (costs, the encoder's shape,
    tokenized train and dev examples, number of labels). The costs: set-up, matmul peak, model builds, and
    per phase the seconds per executed GFLOP (warm), per new padded width (warm-up) and once (first step);
    the MLM phase once per kind (``mlm_<kind>``). The steps timed are the run's own
    (:mod:`typhoon.training.step`): ``mlm_step`` (per-row rates from the schedule; for ``task_saliency``
    with a frozen task model, whose extra forward and input backward the rate per MLM GFLOP then holds),
    ``fine_tune_step`` (phase 2 and the task model's warm-up) and ``training.run.evaluate``.
    """
    import dataclasses

    import numpy as np
    import torch

    from typhoon.data import length_grouped_batches
    from typhoon.masking import SaliencySource, get_strategy, saliency_kind
    from typhoon.training import (
        EncoderShape,
        eval_batches,
        fine_tune_step,
        linear_schedule,
        make_optimizer,
        matmul_peak,
        mlm_step,
        speed,
        step_flops,
    )
    from typhoon.training import run as training_run

    costs = {}
    started = time.perf_counter()
    ctx = training_run.set_up(config, progress=False)
    costs["setup_s"] = time.perf_counter() - started
    speed.configure(ctx.device.type)
    matmul_peak.cache_clear()
    costs["peak_s"] = _timed(lambda: matmul_peak(ctx.precision.name, device=str(ctx.device)))
    costs.update(precision=ctx.precision.name, precision_reason=ctx.precision.reason, attention=ctx.attention,
                 dropout=ctx.dropout, device=str(ctx.device), threads=torch.get_num_threads())
    shape = EncoderShape.from_config(ctx.backbone.config)
    pad, num_labels = ctx.backbone.tokenizer.pad_token_id, ctx.task.num_labels
    train, dev = ctx.data["train"], ctx.data["validation"]
    lengths = [len(x["input_ids"]) for x in train]
    batches = length_grouped_batches(lengths, config.batch_size, np.random.default_rng(config.seed))
    sample = _sample_by_width(batches, [padded_width(max(lengths[i] for i in idx)) for idx in batches],
                              SAMPLE_BATCHES)
    sync = (lambda: torch.cuda.synchronize()) if ctx.device.type == "cuda" else (lambda: None)

    def measure(step, flops_of, batches_to_time) -> dict:
        """Each batch twice, cold then warm (the first batch's warm step at the end). The first batch's cold
        step also pays what happens once per phase (first backward, optimizer state, allocations):
        ``first_step_s``; a later batch's (cold - warm) is what a new width costs (``warmup_s``); warm
        seconds per executed GFLOP is the rate."""
        cold, warm, gflop = [], [], 0.0
        phase_started, phase_cpu = time.perf_counter(), time.process_time()
        def timed_step(batch) -> float:
            start = time.perf_counter()
            step(batch)
            sync()
            return time.perf_counter() - start

        timed = []
        for n, batch in enumerate(batches_to_time):
            if n >= MIN_SAMPLE_BATCHES and time.perf_counter() - phase_started > PHASE_BUDGET_S:
                break  # small models: many batches fit the budget and average the noise; big ones: the minimum
            cold.append(timed_step(batch))
            if n:  # the first batch's warm step comes last: the steps right after the first are still warming up
                warm.append(timed_step(batch))
            timed.append(batch)
            gflop += flops_of(batch)
        warm.insert(0, timed_step(timed[0]))
        # the share of its cores this process got while timing (below 1: other processes held them)
        costs["cpu_s"] = costs.get("cpu_s", 0.0) + time.process_time() - phase_cpu
        costs["core_s"] = costs.get("core_s", 0.0) + (time.perf_counter() - phase_started) * torch.get_num_threads()
        extra = [max(0.0, c - w) for c, w in zip(cold, warm, strict=True)]
        warmup = sum(extra[1:]) / len(extra[1:]) if len(extra) > 1 else 0.0
        return {"s_per_gflop": sum(warm) / gflop, "warmup_s": warmup, "first_step_s": max(0.0, extra[0] - warmup),
                "steps_timed": 2 * len(warm)}

    # Phase 1: MLM steps of each kind, as mlm_phase.adapt_mlm takes them
    costs["classifier_build_s"] = _timed(lambda: ctx.backbone.classifier(num_labels, seed=config.seed, **ctx.kernels))
    costs["build_s"] = _timed(lambda: ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels)) \
        + costs["classifier_build_s"]
    rates = torch.Generator().manual_seed(config.seed)  # the flops' expected selections (selected_positions)
    for kind, kind_config in mlm_kinds.items():
        kind_ctx = dataclasses.replace(ctx, config=kind_config)  # its budget and schedule; the same data
        torch.manual_seed(config.seed)
        mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device)
        optimizer = make_optimizer(mlm, config.mlm_lr, config.weight_decay)
        scheduler = linear_schedule(optimizer, 1000, config.warmup_ratio)
        strategy = get_strategy(kind_config.strategy, **kind_config.strategy_params())
        strategy.prepare_on(train, len(ctx.backbone.tokenizer))
        strategy.learn_on(ctx.device if ctx.masks_on_device else None)  # as the run's (prepared_strategy)
        task_model = None
        source_kind = saliency_kind(kind_config)
        if source_kind == "task":  # frozen, as training_run.warm_up_task_model leaves it (its weights do not matter here)
            task_model = ctx.backbone.classifier(num_labels, seed=config.seed, **ctx.kernels).to(ctx.device).eval()
        saliency = SaliencySource(source_kind, task_model)

        def mlm_batch(idx, kind_ctx=kind_ctx, mlm=mlm, strategy=strategy, optimizer=optimizer, scheduler=scheduler,
                      saliency=saliency):
            mlm_step(kind_ctx, mlm, strategy, optimizer, scheduler, [train[i] for i in idx], saliency)

        def mlm_flops(idx, kind_config=kind_config):
            width = padded_width(max(lengths[i] for i in idx))
            maskable = [len(train[i]["input_ids"]) - sum(train[i]["special_tokens_mask"]) for i in idx]
            selected = selected_positions(kind_config, maskable, rates)
            return step_flops(shape, [width] * len(idx), selected=selected) / 1e9

        costs[f"mlm_{kind}"] = measure(mlm_batch, mlm_flops, sample)
        del mlm, optimizer, task_model, saliency
        if time.perf_counter() - started > CALIBRATION_BUDGET_S:
            break

    # Phase 2: fine-tuning steps as training_run.fine_tune (and the task model's warm-up) take them, and evaluation passes
    classifier = ctx.backbone.classifier(num_labels, seed=config.seed, **ctx.kernels).to(ctx.device)
    optimizer = make_optimizer(classifier, config.ft_lr, config.weight_decay)
    scheduler = linear_schedule(optimizer, 1000, config.warmup_ratio)

    def ft_step(idx):
        fine_tune_step(ctx, classifier, [train[i] for i in idx], optimizer, scheduler)

    def ft_flops(idx):
        width = padded_width(max(lengths[i] for i in idx))
        return step_flops(shape, [width] * len(idx), num_labels=num_labels) / 1e9

    costs["ft"] = measure(ft_step, ft_flops, sample)
    dev_batches = eval_batches(dev, config, pad)
    eval_sample = _sample_by_width(dev_batches, [b["input_ids"].shape[1] for b in dev_batches], SAMPLE_BATCHES)
    costs["eval"] = measure(lambda batch: training_run.evaluate(ctx, classifier, [batch]),
                            lambda b: step_flops(shape, [b["input_ids"].shape[1]] * len(b["input_ids"]),
                                                 num_labels=num_labels, backward=False) / 1e9,
                            eval_sample)
    costs["calibration_s"] = time.perf_counter() - started
    return costs, shape, train, dev, num_labels


def record_cost_s() -> float:
    """Writing a record's figure (the notebook's curves plot), timed once with made-up curves."""
    import pandas as pd

    from typhoon.report import plot_run_curves


    loss = pd.DataFrame({"step": range(1, 200), "split": "train", "loss": 1.0, "epoch": 1})
    epochs = pd.DataFrame({"epoch": [1, 2, 3], "dev_accuracy": [0.6, 0.7, 0.7]})
    with tempfile.TemporaryDirectory() as tmp:
        return _timed(lambda: plot_run_curves(loss, epochs, "accuracy", 0.5, Path(tmp) / "curves"))


def phase_seconds(work: PhaseWork, rate: dict) -> float:
    """A phase's time at a measured rate: warm seconds per executed GFLOP, a warm-up per new padded width,
    and the once-per-phase cost of its first step (none for a phase without steps)."""
    if not work.steps:
        return 0.0
    return work.gflop * rate["s_per_gflop"] + len(work.widths) * rate["warmup_s"] + rate["first_step_s"]


def calibrate(configs: list[RunConfig], threads: int | None) -> dict:
    """Calibrate every kind of cell among ``configs`` and price each cell (in a worker process:
    :func:`calibrate_in_worker`).

    Returns ``{"kinds": [...measured costs...], "cells": {record_path: {...seconds per part...}}}``.
    """
    import torch

    from typhoon.progress_bars import disable_library_bars

    disable_library_bars()
    if threads:  # the cells' thread count, as their worker's slot sets it (typhoon.runner.workers.Slot)
        torch.set_num_threads(threads)
        configs = [config.replace(num_threads=threads) for config in configs]
    groups: dict[tuple, list[RunConfig]] = {}
    for config in configs:
        groups.setdefault(calibration_key(config), []).append(config)
    kinds, cells = [], {}
    record_s = record_cost_s()
    for group in groups.values():
        by_kind = {}
        for config in group:
            by_kind.setdefault(mlm_kind(config), config)
        costs, shape, train, dev, num_labels = calibrate_kind(group[0], {k: by_kind[k] for k in MLM_KINDS if k in by_kind})
        kinds.append({"cell": group[0].relative_dir().as_posix(), "cells": len(group), **costs})
        for config in group:
            kind = mlm_kind(config)
            timed = [k for k in (kind, *MLM_KINDS) if f"mlm_{k}" in costs]  # over budget: the costliest kind timed
            work = cell_work(config, shape, train, dev, num_labels)
            # the task model's warm-up takes fine-tuning steps (training.step.fine_tune_step) on a classifier
            rates = {"warmup": costs["ft"], "mlm": costs[f"mlm_{timed[0]}"], "ft": costs["ft"], "eval": costs["eval"]}
            seconds = {phase: phase_seconds(work[phase], rate) for phase, rate in rates.items()}
            cells[config.relative_dir().as_posix()] = {
                "warmup_steps": work["warmup"].steps, "mlm_steps": work["mlm"].steps, "ft_steps": work["ft"].steps,
                "eval_passes": work["eval"].steps, "mlm_kind": kind, "mlm_kind_timed": timed[0],
                "warmup_s": seconds["warmup"], "mlm_s": seconds["mlm"], "ft_s": seconds["ft"], "eval_s": seconds["eval"],
                # the matmul peak is measured once per worker process, priced with its start (estimate)
                "setup_s": costs["setup_s"] + costs["build_s"] + record_s
                + (costs["classifier_build_s"] if work["warmup"].steps else 0.0),  # the task model's build
            }
    core_share = min(1.0, sum(k["cpu_s"] for k in kinds) / max(sum(k["core_s"] for k in kinds), 1e-9))
    return {"kinds": kinds, "cells": cells, "record_s": record_s, "core_share": core_share}


def calibrate_in_worker(configs: list[dict], threads: int | None) -> dict:
    """A worker process's calibration call: the measured costs of :func:`calibrate`,
    with the moments calibrating started and finished (``time.perf_counter``: the system's monotonic clock, the
    same in the process that started the worker)."""
    started = time.perf_counter()
    measured = calibrate([RunConfig.from_dict(c) for c in configs], threads)
    return {**measured, "calibration_started": started, "calibration_finished": time.perf_counter()}
