"""How long a grid will take on this machine, measured before it runs (``reproduce --estimate``).

The estimate is a short calibration (80 s for the ``cpu`` grid on a shared 2-core AVX512-BF16 EPYC)
and arithmetic:

1. **The work of each cell is counted, not guessed.** The cell's training data is tokenized as the run
   tokenizes it, and its batches are drawn exactly as the run draws them (``length_grouped_batches`` with
   the run's seed, in the same order: MLM epochs, then fine-tuning epochs). Batches are padded per batch
   (``collate``, to a multiple of 8), so every step's executed FLOPs (:func:`typhoon.hardware.step_flops`)
   follow from the real token lengths, not from ``max_length``; an MLM step's selected positions follow
   from per-row rates drawn from the cell's schedule, as the run draws them. The number of distinct padded
   widths is counted too: each new shape costs a kernel warm-up. A ``typhoon_task`` cell's task model
   warm-up is counted as well: ``task_head_warmup`` fine-tuning steps in its own data order and a dev pass.
2. **The rate is measured on the same step.** A calibration process sets up one cell of each kind
   (backbone, task, precision, attention, dropout, thread count: :func:`typhoon.pipeline.set_up`) and times
   a few of the run's own steps (:mod:`typhoon.training.step`: collate, masking, forward, backward, clip,
   fused AdamW and the saliency update) and evaluation passes on batches chosen across the range of widths,
   each twice: the first pass at a new width includes its warm-up, the second does not. The MLM step is
   timed once per kind of saliency among the cells (:data:`MLM_KINDS`: none, the MLM loss's, a frozen task
   model's, whose extra forward and input backward the rate then holds); the task model's warm-up takes
   fine-tuning steps, priced at their rate. Seconds per executed GFLOP (warm) and seconds per new width
   (warm-up) come out of it.
3. **Concurrency is measured, not assumed.** With ``workers`` cells at once on a CPU, each cell gets
   ``cores // workers`` threads and competes with the others for memory bandwidth and caches. So the
   calibration runs as ``workers`` processes *at the same time*, each with the cells' thread count, and the
   rates are their mean: what a step costs while the other workers run theirs.
4. **Fixed costs are measured** where they can be: the calibration kernels start as the cells' do and
   first import what ``10_run`` imports (kernel start + imports, ``workers`` at once), each cell's set-up (backbone, tokenized data), the
   matmul-peak measurement every run makes, building the two models, the record and its figure. The
   analysis notebooks' time is a reference figure (:data:`ANALYSIS_REFERENCE_S`, measured on the 2-core
   machine the bundle was developed on with ``benchmarks/bench_smoke.py``), said as such in the output.

The grid's wall time is the cells' times list-scheduled over the workers in grid order (what
``run_grid``'s thread pool does), plus the analysis. Only cells without a complete record count.
``benchmarks/bench_estimate.py`` compares an estimate with the real grid.

This module imports no torch at the top: the CLI imports it for ``--help``. The calibration runs in
papermill kernels, started as the cells' kernels are (:func:`run_calibration`): the time before the
calibration starts is each cell's kernel start and imports, measured on the way.
"""

from __future__ import annotations

import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from typhoon.config import RunConfig
from typhoon.strategy_params import uses_task_saliency
from typhoon.training.padding import padded_width

REPO_ROOT = Path(__file__).resolve().parents[1]

# Training batches timed per phase and kind of cell, each twice (cold, then warm): at least
# MIN_SAMPLE_BATCHES, more (up to SAMPLE_BATCHES, of distinct widths) while the phase has spent less than
# PHASE_BUDGET_S -- a shared machine's noise averages out over more steps where steps are short.
MIN_SAMPLE_BATCHES, SAMPLE_BATCHES, PHASE_BUDGET_S = 2, 8, 3.0
# The kinds of MLM step a calibration times (the saliency each computes), costliest first. Past
# CALIBRATION_BUDGET_S a kind of cell times no further MLM kind: an untimed one is priced as the costliest
# kind timed (an over- rather than an under-estimate).
MLM_KINDS = ("task_saliency", "mlm_saliency", "no_saliency")
CALIBRATION_BUDGET_S = 45.0
# The analysis notebooks after the grid, in seconds each (papermill's duration, kernel start included), with
# ``quick = true``: measured with benchmarks/bench_smoke.py on the 2-core Xeon (AVX512-BF16, AMX) the bundle
# was developed on, shared with other jobs (load average 6-8). Not calibrated on this machine: the estimate
# shows them as a reference, run ``workers`` at once as reproduce runs them; without ``quick`` the
# walkthroughs 01 and 40 do more, so the figure is a lower bound there.
ANALYSIS_REFERENCE_S = {"00_setup.ipynb": 22.1, "01_masking_walkthrough.ipynb": 39.1, "20_statistics.ipynb": 11.7,
                        "30_budget_spread.ipynb": 21.1, "40_mask_schedules.ipynb": 30.1}
# The comparison with the reference run, after the others (papermill, kernel start included: 8.7 s on the
# 2-core AVX512-BF16 EPYC, at load about 3).
REFERENCE_NOTEBOOK_S = 8.7
HEARTBEAT_S = 20.0  # a line while the calibration runs, so a minute of it is not silence
# What a run's notebook imports (notebooks/10_run.ipynb): timed in a kernel to price a cell's start.
RUN_NOTEBOOK_IMPORTS = ("import pandas as pd\nfrom IPython.display import Image, display\n"
                        "from typhoon import pipeline, plots\nfrom typhoon.config import RunConfig, resolve\n"
                        "from typhoon.progressbar import disable_library_bars\ndisable_library_bars()\n")


# --------------------------------------------------------------------------------------------------
# The work of a cell, from its real token lengths


@dataclass
class PhaseWork:
    """The executed work of one phase of a cell: steps, matrix-product GFLOPs, distinct padded widths."""

    steps: int = 0
    gflop: float = 0.0
    widths: set = field(default_factory=set)

    def add(self, gflop: float, width: int) -> None:
        self.steps += 1
        self.gflop += gflop
        self.widths.add(width)


def mlm_kind(config: RunConfig) -> str:
    """The kind of MLM step a cell takes (:data:`MLM_KINDS`): by where its strategy's saliency comes from."""
    from typhoon.masking import get_strategy

    if uses_task_saliency(config.strategy, config.strategy_params()):
        return "task_saliency"
    return "mlm_saliency" if get_strategy(config.strategy, **config.strategy_params()).needs_saliency else "no_saliency"


def selected_positions(config: RunConfig, maskable, generator) -> int:
    """Expected positions an MLM step selects on rows with ``maskable`` maskable tokens each: per-row rates
    drawn from the cell's schedule as the run draws them (``sample_rates``; ``fixed``: the budget p)."""
    from typhoon.schedules import sample_rates

    rates = sample_rates(config.schedule, len(maskable), config.p, config.pi0, generator)
    return round(config.p * sum(maskable)) if rates is None else round(float(sum(r * m for r, m in zip(rates.tolist(), maskable, strict=True))))


def cell_work(config: RunConfig, shape, train: list[dict], dev: list[dict], num_labels: int) -> dict[str, PhaseWork]:
    """The executed work of a cell's phases (``warmup``: the task model's steps, task-loss saliency only;
    ``mlm``, ``ft``: training steps; ``eval``: MLM dev loss and the classifiers' evaluations), from its
    tokenized examples, batched exactly as :func:`typhoon.pipeline.run` does."""
    import numpy as np
    import torch

    from typhoon.data import length_grouped_batches
    from typhoon.hardware import step_flops
    from typhoon.pipeline import task_model_batches

    lengths = np.array([len(x["input_ids"]) for x in train])
    maskable = np.array([len(x["input_ids"]) - sum(x["special_tokens_mask"]) for x in train])
    dev_lengths = np.array([len(x["input_ids"]) for x in dev])
    dev_maskable = np.array([len(x["input_ids"]) - sum(x["special_tokens_mask"]) for x in dev])
    rng = np.random.default_rng(config.seed)  # the run's data-order generator, drawn in the same order
    rates = torch.Generator().manual_seed(config.seed)  # per-row masking rates, as the run's mask generator
    work = {"warmup": PhaseWork(), "mlm": PhaseWork(), "ft": PhaseWork(), "eval": PhaseWork()}

    def train_step(phase: str, idx) -> None:
        width = padded_width(int(lengths[idx].max()))
        selected = selected_positions(config, maskable[idx].tolist(), rates) if phase == "mlm" else 0
        gflop = step_flops(shape, [width] * len(idx), selected=selected,
                           num_labels=0 if phase == "mlm" else num_labels) / 1e9
        work[phase].add(gflop, width)

    eval_batches = length_grouped_batches(dev_lengths, config.eval_batch_size, None)

    def evaluation(mlm: bool) -> None:
        for idx in eval_batches:
            width = padded_width(int(dev_lengths[idx].max()))
            selected = round(config.p * int(dev_maskable[idx].sum())) if mlm else 0
            gflop = step_flops(shape, [width] * len(idx), selected=selected, num_labels=0 if mlm else num_labels,
                               backward=False) / 1e9
            work["eval"].add(gflop, width)

    if mlm_kind(config) == "task_saliency" and config.mlm_epochs > 0:  # the task model, before phase 1
        for idx in task_model_batches(config, lengths.tolist()):
            train_step("warmup", idx)
        evaluation(mlm=False)
    for _ in range(config.mlm_epochs):
        for idx in length_grouped_batches(lengths, config.batch_size, rng):
            train_step("mlm", idx)
        evaluation(mlm=True)
    for _ in range(config.ft_epochs):
        for idx in length_grouped_batches(lengths, config.batch_size, rng):
            train_step("ft", idx)
        evaluation(mlm=False)
    return work


# --------------------------------------------------------------------------------------------------
# Calibration (in a process of its own, with the cells' thread count)


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
    ``fine_tune_step`` (phase 2 and the task model's warm-up) and ``pipeline.evaluate``.
    """
    import dataclasses

    import numpy as np
    import torch

    from typhoon import hardware, pipeline, speed
    from typhoon.data import length_grouped_batches, token_counts
    from typhoon.masking import get_strategy
    from typhoon.training import step as training_step

    costs = {}
    started = time.perf_counter()
    ctx = pipeline.set_up(config, progress=False)
    costs["setup_s"] = time.perf_counter() - started
    speed.configure(ctx.device.type)
    hardware.matmul_peak.cache_clear()
    costs["peak_s"] = _timed(lambda: hardware.matmul_peak(ctx.precision.name, device=str(ctx.device)))
    costs.update(precision=ctx.precision.name, precision_reason=ctx.precision.reason, attention=ctx.attention,
                 dropout=ctx.dropout, device=str(ctx.device), threads=torch.get_num_threads())
    shape = hardware.EncoderShape.from_config(ctx.backbone.config)
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

    # Phase 1: MLM steps of each kind, as pipeline.adapt_mlm takes them
    costs["classifier_build_s"] = _timed(lambda: ctx.backbone.classifier(num_labels, seed=config.seed, **ctx.kernels))
    costs["build_s"] = _timed(lambda: ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels)) \
        + costs["classifier_build_s"]
    counts = token_counts([x["input_ids"] for x in train], [x["special_tokens_mask"] for x in train],
                          len(ctx.backbone.tokenizer))
    rates = torch.Generator().manual_seed(config.seed)  # the flops' expected selections (selected_positions)
    for kind, kind_config in mlm_kinds.items():
        kind_ctx = dataclasses.replace(ctx, config=kind_config)  # its budget and schedule; the same data
        torch.manual_seed(config.seed)
        mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device)
        optimizer = training_step.make_optimizer(mlm, config.mlm_lr, config.weight_decay)
        scheduler = training_step.linear_schedule(optimizer, 1000, config.warmup_ratio)
        strategy = get_strategy(kind_config.strategy, **kind_config.strategy_params())
        strategy.prepare(counts)
        task_model = None
        if kind == "task_saliency":  # frozen, as pipeline.warm_up_task_model leaves it (its weights do not matter here)
            task_model = ctx.backbone.classifier(num_labels, seed=config.seed, **ctx.kernels).to(ctx.device).eval()

        def mlm_step(idx, kind_ctx=kind_ctx, mlm=mlm, strategy=strategy, optimizer=optimizer, scheduler=scheduler,
                     task_model=task_model):
            training_step.mlm_step(kind_ctx, mlm, strategy, optimizer, scheduler, [train[i] for i in idx], task_model)

        def mlm_flops(idx, kind_config=kind_config):
            width = padded_width(max(lengths[i] for i in idx))
            maskable = [len(train[i]["input_ids"]) - sum(train[i]["special_tokens_mask"]) for i in idx]
            selected = selected_positions(kind_config, maskable, rates)
            return hardware.step_flops(shape, [width] * len(idx), selected=selected) / 1e9

        costs[f"mlm_{kind}"] = measure(mlm_step, mlm_flops, sample)
        del mlm, optimizer, task_model
        if time.perf_counter() - started > CALIBRATION_BUDGET_S:
            break

    # Phase 2: fine-tuning steps as pipeline.fine_tune (and the task model's warm-up) take them, and evaluation passes
    classifier = ctx.backbone.classifier(num_labels, seed=config.seed, **ctx.kernels).to(ctx.device)
    optimizer = training_step.make_optimizer(classifier, config.ft_lr, config.weight_decay)
    scheduler = training_step.linear_schedule(optimizer, 1000, config.warmup_ratio)

    def ft_step(idx):
        training_step.fine_tune_step(ctx, classifier, [train[i] for i in idx], optimizer, scheduler)

    def ft_flops(idx):
        width = padded_width(max(lengths[i] for i in idx))
        return hardware.step_flops(shape, [width] * len(idx), num_labels=num_labels) / 1e9

    costs["ft"] = measure(ft_step, ft_flops, sample)
    dev_batches = pipeline.eval_batches(dev, config, pad)
    eval_sample = _sample_by_width(dev_batches, [b["input_ids"].shape[1] for b in dev_batches], SAMPLE_BATCHES)
    costs["eval"] = measure(lambda batch: pipeline.evaluate(ctx, classifier, [batch]),
                            lambda b: hardware.step_flops(shape, [b["input_ids"].shape[1]] * len(b["input_ids"]),
                                                          num_labels=num_labels, backward=False) / 1e9,
                            eval_sample)
    costs["calibration_s"] = time.perf_counter() - started
    return costs, shape, train, dev, num_labels


def record_cost_s() -> float:
    """Writing a record's figure (the notebook's curves plot), timed once with made-up curves."""
    import pandas as pd

    from typhoon import plots

    loss = pd.DataFrame({"step": range(1, 200), "split": "train", "loss": 1.0, "epoch": 1})
    epochs = pd.DataFrame({"epoch": [1, 2, 3], "dev_accuracy": [0.6, 0.7, 0.7]})
    with tempfile.TemporaryDirectory() as tmp:
        return _timed(lambda: plots.plot_run_curves(loss, epochs, "accuracy", 0.5, Path(tmp) / "curves"))


def phase_seconds(work: PhaseWork, rate: dict) -> float:
    """A phase's time at a measured rate: warm seconds per executed GFLOP, a warm-up per new padded width,
    and the once-per-phase cost of its first step (none for a phase without steps)."""
    if not work.steps:
        return 0.0
    return work.gflop * rate["s_per_gflop"] + len(work.widths) * rate["warmup_s"] + rate["first_step_s"]


def calibrate(configs: list[RunConfig], threads: int | None) -> dict:
    """Calibrate every kind of cell among ``configs`` and price each cell (in a calibration kernel:
    :func:`calibrate_files`).

    Returns ``{"kinds": [...measured costs...], "cells": {record_path: {...seconds per part...}}}``.
    """
    import torch

    from typhoon.progressbar import disable_library_bars

    disable_library_bars()
    if threads:  # the cells' thread count, as grid.cell_parameters hands it to each cell
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
                "setup_s": costs["setup_s"] + costs["peak_s"] + costs["build_s"] + record_s
                + (costs["classifier_build_s"] if work["warmup"].steps else 0.0),  # the task model's build
            }
    core_share = min(1.0, sum(k["cpu_s"] for k in kinds) / max(sum(k["core_s"] for k in kinds), 1e-9))
    return {"kinds": kinds, "cells": cells, "record_s": record_s, "core_share": core_share}


# --------------------------------------------------------------------------------------------------
# The estimate (in the process that runs the grid)


@dataclass
class GridEstimate:
    """What a grid will cost here: per cell and in all, with how it was measured."""

    profile: str
    cells_total: int
    cells_todo: list[str]
    workers: int
    threads: int | None  # torch threads per cell (None: the cell's own setting / all cores)
    kernels: str  # the chosen precision with its reason, attention, dropout, device
    per_cell: dict  # record path -> seconds per part and "total_s"
    cell_start_s: float  # papermill kernel start + the run notebook's imports
    analysis_s: float
    grid_s: float  # cells' makespan over the workers
    total_s: float
    calibration_s: float
    how: str  # how the rates were measured (concurrency)
    kinds: list = field(default_factory=list)
    quick_analysis: bool = True
    # The share of their cores the calibration processes got while timing steps (CPU time / (wall x
    # threads)): below 1 when other jobs share the machine. The estimate is at that load; on idle cores
    # (the machine to the grid alone) it would be about ``core_share`` times as long (on a CPU).
    core_share: float = 1.0
    cores: int = 0  # usable cores of this machine (0: not known)

    @property
    def idle_total_s(self) -> float:
        return self.total_s * self.core_share

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self, max_cells: int = 12) -> str:
        lines = [f"estimate for profile {self.profile!r}: {len(self.cells_todo)} of {self.cells_total} cells to run "
                 f"({self.cells_total - len(self.cells_todo)} complete), {self.workers} at once"
                 + (f", {self.threads} thread(s) each" if self.threads else ""),
                 f"  kernels: {self.kernels}",
                 f"  calibrated in {self.calibration_s:.0f} s: {self.how}",
                 f"  per cell: kernel start, imports and shutdown {self.cell_start_s:.1f} s"]
        for path in self.cells_todo[:max_cells]:
            c = self.per_cell[path]
            warmup = (f"task model {c['warmup_steps']:.0f} steps {c['warmup_s']:.0f} s, " if c.get("warmup_steps")
                      else "")
            timed_as = (f" (timed as {c['mlm_kind_timed']})" if c.get("mlm_kind_timed", c.get("mlm_kind")) != c.get("mlm_kind")
                        else "")
            lines.append(f"  {path.removeprefix('runs/')}: {warmup}MLM {c['mlm_steps']:.0f} steps{timed_as} {c['mlm_s']:.0f} s, fine-tune "
                         f"{c['ft_steps']:.0f} steps {c['ft_s']:.0f} s, eval {c['eval_s']:.0f} s, fixed "
                         f"{c['setup_s'] + self.cell_start_s:.0f} s = {c['total_s']:.0f} s")
        if len(self.cells_todo) > max_cells:
            lines.append(f"  ... and {len(self.cells_todo) - max_cells} more cells")
        lines.append(f"  grid: {duration(self.grid_s)} for the cells on {self.workers} worker(s)"
                     + (f" + analysis notebooks ~{duration(self.analysis_s)} (reference figure, not calibrated here"
                        + ("" if self.quick_analysis else "; at least: quick = false does more") + ")"
                        if self.analysis_s else "")
                     + f" = about {duration(self.total_s)}")
        oversubscribed = self.cores and self.workers * (self.threads or 1) > self.cores
        if self.core_share < 0.9 and oversubscribed:
            lines.append(f"  {self.workers} cell(s) x {self.threads or 1} thread(s) on {self.cores} usable core(s): each "
                         f"process got {100 * self.core_share:.0f} % of a core while calibrating, as the cells will")
        elif self.core_share < 0.9:
            lines.append(f"  the machine is shared: while calibrating, the cells' processes got {100 * self.core_share:.0f} % "
                         f"of their cores; on idle cores about {duration(self.idle_total_s)}")
        return "\n".join(lines)


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def makespan(durations: list[float], workers: int) -> float:
    """Wall time of tasks taken in order by ``workers`` workers, each task to the first free one."""
    free = [0.0] * max(1, workers)
    for d in durations:
        i = free.index(min(free))
        free[i] += d
    return max(free) if durations else 0.0


def calibration_notebook(request: Path, result: Path):
    """A notebook that starts as a cell's does (the run notebook's imports), then calibrates."""
    import nbformat

    calibrate_cell = (f"from typhoon.estimate import calibrate_files\n"
                      f"calibrate_files({str(request)!r}, {str(result)!r})\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RUN_NOTEBOOK_IMPORTS),
                                               nbformat.v4.new_code_cell(calibrate_cell)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def run_calibration(configs: list[RunConfig], threads: int | None, processes: int) -> list[dict]:
    """``processes`` calibrations at once, each in a papermill kernel started as a cell's kernel is, with
    ``threads`` torch threads. Each result has ``start_s``: what papermill took besides the calibration
    (kernel start, the run notebook's imports, shutdown, writing the notebook: what every cell pays
    besides its run)."""
    import nbformat
    import papermill

    from typhoon import grid

    with tempfile.TemporaryDirectory(prefix="typhoon-estimate-") as tmp:
        folder = Path(tmp)
        request = folder / "request.json"
        request.write_text(json.dumps({"configs": [c.to_dict() for c in configs], "threads": threads}))

        def one(i: int) -> dict:
            source, target, result = folder / f"calibrate{i}.ipynb", folder / f"done{i}.ipynb", folder / f"result{i}.json"
            nbformat.write(calibration_notebook(request, result), source)
            started = time.perf_counter()
            try:
                papermill.execute_notebook(str(source), str(target), cwd=str(REPO_ROOT), **grid.PAPERMILL_OPTIONS)
            except Exception as err:
                raise RuntimeError(f"the estimate's calibration failed: {err}") from err
            total = time.perf_counter() - started
            measured = json.loads(result.read_text())
            # everything but the calibration itself: kernel start, imports, shutdown, writing the notebook
            measured["start_s"] = total - (measured["calibration_finished"] - measured["calibration_started"])
            return measured

        print(f"estimate: calibrating in {processes} kernel(s) at once, {threads or 'all'} thread(s) each: real MLM, "
              f"fine-tuning and evaluation steps of {len(configs)} cell(s) (about a minute; --no-estimate skips it)",
              flush=True)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=processes) as pool:  # the kernels calibrate at the same time
            futures = [pool.submit(one, i) for i in range(processes)]
            while not wait(futures, timeout=HEARTBEAT_S).done == set(futures):
                done = sum(f.done() for f in futures)
                print(f"estimate: still calibrating ({time.perf_counter() - started:.0f} s, "
                      f"{done} of {processes} kernel(s) done)", flush=True)
            return [f.result() for f in futures]


def calibrate_files(request: str, result: str) -> None:
    """The calibration notebook's call: the request (configs, threads) from a JSON file, the measured
    costs to another, with the moment calibrating started (``time.perf_counter``: the same clock as the
    process on this machine that started the kernel) and the moment it finished."""
    from typhoon.records import atomic_write_json

    started = time.perf_counter()
    spec = json.loads(Path(request).read_text())
    measured = calibrate([RunConfig.from_dict(c) for c in spec["configs"]], spec.get("threads"))
    atomic_write_json(Path(result), {**measured, "calibration_started": started,
                                     "calibration_finished": time.perf_counter()})


def estimate_grid(profile: str, configs: list[RunConfig], out_dir: Path, workers: int, *, analysis: bool = True,
                  quick_analysis: bool = True) -> GridEstimate:
    """Calibrate on this machine and estimate the grid's wall time (see the module docstring)."""
    from typhoon import grid, records

    started = time.perf_counter()
    todo = [c for c in configs if not records.is_complete(out_dir / c.relative_dir(), c)]
    gpus = grid.gpu_devices()
    threads = grid.cell_threads(todo[0], workers, gpus) if todo else None
    if todo and threads is None and not gpus:
        threads = todo[0].num_threads or grid.usable_cores()
    processes = 1 if gpus else max(1, min(workers, len(todo)))
    per_cell, kinds, kernels, start_s = {}, [], "nothing to run", 0.0
    if todo:
        results = run_calibration(todo, threads, processes)
        start_s = sum(r["start_s"] for r in results) / len(results)
        kinds = results[0]["kinds"]
        for path, first_cell in results[0]["cells"].items():  # numbers: the mean over the concurrent processes
            parts = {k: sum(r["cells"][path][k] for r in results) / len(results) if isinstance(v, (int, float)) else v
                     for k, v in first_cell.items()}
            parts["total_s"] = (parts.get("warmup_s", 0.0) + parts["mlm_s"] + parts["ft_s"] + parts["eval_s"]
                                + parts["setup_s"] + start_s)
            per_cell[path] = parts
        first = kinds[0]
        kernels = (f"{first['precision']} ({first['precision_reason']}), {first['attention']} attention, "
                   f"{first['dropout']} dropout on {first['device']}, {first['threads']} thread(s) per cell")
    paths_todo = [c.relative_dir().as_posix() for c in todo]
    grid_s = makespan([per_cell[p]["total_s"] for p in paths_todo], workers)
    analysis_s = makespan(list(ANALYSIS_REFERENCE_S.values()), workers) + REFERENCE_NOTEBOOK_S if analysis else 0.0
    how = (f"{processes} calibration process(es) at once, as the grid runs its cells, each timing "
           f"{MIN_SAMPLE_BATCHES}-{SAMPLE_BATCHES} batches per phase twice (cold, warm) per kind of cell")
    return GridEstimate(profile=profile, cells_total=len(configs), cells_todo=paths_todo, workers=workers,
                        threads=threads, kernels=kernels, per_cell=per_cell, cell_start_s=start_s,
                        analysis_s=analysis_s, grid_s=grid_s, total_s=grid_s + analysis_s,
                        calibration_s=time.perf_counter() - started, how=how, kinds=kinds,
                        quick_analysis=bool(quick_analysis),
                        core_share=(sum(r["core_share"] for r in results) / len(results)) if todo and not gpus else 1.0,
                        cores=grid.usable_cores())


def estimate_only(profile: str, out_dir: str | Path | None = None, *, workers: int | None = None,
                  overrides: dict | None = None, analysis: bool = True) -> GridEstimate:
    """``reproduce --estimate``: the estimate of a profile's grid into ``out_dir`` (default: the profile's
    folder), without running anything or writing into the folder."""
    from typhoon import grid, paths
    from typhoon.config import get_profile

    spec = get_profile(profile)
    workers, note = grid.choose_workers(workers, spec.workers)
    if note:
        print(note, flush=True)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    configs = spec.grid(overrides)
    return estimate_grid(spec.name, configs, paths.resolve_out_dir(out_dir, spec.name), workers, analysis=analysis,
                         quick_analysis=bool(spec.analysis.get("quick")))
