"""The work of one cell of a grid, counted from its real token lengths for the time estimate: its
training steps, the matrix-product GFLOPs they execute and the distinct padded widths, per phase
(``mlm``, ``ft``, ``eval``), batched exactly as the run batches them; and, without tokenizing, how the cells of
a study compare in size (:func:`relative_work`: the loop hands out the longest first)."""

from __future__ import annotations

from dataclasses import dataclass, field

from typhoon.config import RunConfig
from typhoon.data import padded_width


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


def relative_work(cells) -> dict[int, float]:
    """Each cell's size (by ``id``) relative to the others': its encoder's matrix-product parameters x the
    examples it trains on x its epochs (its kind's). On one kind of device a cell's time grows about in
    proportion; this orders cells, it prices none (the estimate does: :mod:`typhoon.runner.estimate`)."""
    import math

    from typhoon.data import load_glue
    from typhoon.models import load_backbone
    from typhoon.training import EncoderShape

    params = {name: EncoderShape.from_config(load_backbone(name).config).matmul_parameters
              for name in {cell.config.backbone for cell in cells}}
    examples = {task: len(load_glue(task)["train"]) for task in {cell.config.task for cell in cells}}
    return {id(cell): float(params[cell.config.backbone] * cell.kind.epochs(cell)
                            * min(examples[cell.config.task], cell.config.max_train_examples or math.inf))
            for cell in cells}


def mlm_kind(config: RunConfig) -> str:
    """The kind of MLM step a cell takes (:data:`MLM_KINDS`): by where its strategy's saliency comes from."""
    from typhoon.masking import saliency_kind

    return {"none": "no_saliency", "mlm": "mlm_saliency", "task": "task_saliency"}[saliency_kind(config)]


def selected_positions(config: RunConfig, maskable, generator) -> int:
    """Expected positions an MLM step selects on rows with ``maskable`` maskable tokens each: per-row rates
    drawn from the cell's schedule as the run draws them (``sample_rates``; ``fixed``: the budget p)."""
    from typhoon.masking import sample_rates

    rates = sample_rates(config.schedule, len(maskable), config.p, config.pi0, generator)
    return round(config.p * sum(maskable)) if rates is None else round(float(sum(r * m for r, m in zip(rates.tolist(), maskable, strict=True))))


def cell_work(config: RunConfig, shape, train: list[dict], dev: list[dict], num_labels: int) -> dict[str, PhaseWork]:
    """The executed work of a cell's phases (``warmup``: the task model's steps, task-loss saliency only;
    ``mlm``, ``ft``: training steps; ``eval``: MLM dev loss and the classifiers' evaluations), from its
    tokenized examples, batched exactly as :func:`typhoon.training.run.run` does."""
    import numpy as np
    import torch

    from typhoon.data import epoch_batches, length_grouped_batches
    from typhoon.training import step_flops
    from typhoon.training.run import task_model_batches

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
        for idx in epoch_batches(lengths, config.batch_size, rng, config.batch_order):
            train_step("mlm", idx)
        evaluation(mlm=True)
    for _ in range(config.ft_epochs):
        for idx in epoch_batches(lengths, config.batch_size, rng, config.batch_order):
            train_step("ft", idx)
        evaluation(mlm=False)
    return work


# What one cell holds on a GPU beyond what it counts: a process's CUDA context and kernel images (0.5-0.7 GiB
# with CUDA 12-13 on Hopper), and a factor for the allocator's fragmentation, cuBLAS workspaces and a step's
# transient peak. The memory is an upper estimate on purpose: it only bounds how many cells share a device.
CUDA_CONTEXT_GIB = 0.75
MEMORY_HEADROOM = 1.5
HEAD_DIM = 64  # BERT-family attention heads are 64 wide: heads = hidden / 64


def cell_memory_gib(config: RunConfig, shape) -> float:
    """The GPU memory one cell of ``config`` needs at most, in GiB, from its encoder's sizes (``shape``: an
    :class:`typhoon.training.flops.EncoderShape`): fp32 weights, gradients and AdamW's two moments of the MLM
    model (16 bytes a parameter), the activations a training step keeps for its backward pass at the longest
    batch (Korthikanti et al. 2022: 34 bytes per token and hidden unit per layer in 16-bit, plus 5 bytes per
    head and attention score), the MLM head's logits at the selected positions (fp32, three copies), then
    :data:`MEMORY_HEADROOM` and the CUDA context."""
    hidden, layers = shape.hidden, shape.layers
    params = shape.vocab * hidden + 512 * hidden + shape.matmul_parameters + hidden * hidden  # embeddings, layers, head
    tokens = config.batch_size * config.max_length
    heads = max(1, hidden // HEAD_DIM)
    activations = layers * (34 * tokens * hidden + 5 * heads * config.batch_size * config.max_length ** 2)
    logits = 3 * 4 * config.p * tokens * shape.vocab
    return (16 * params + activations + logits) * MEMORY_HEADROOM / 2**30 + CUDA_CONTEXT_GIB
