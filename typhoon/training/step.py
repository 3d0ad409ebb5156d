"""One training step of each kind: the steps a run takes (:mod:`typhoon.training.run`) and the grid estimate
times (:func:`typhoon.runner.step_timing.calibrate_kind`), so the estimate prices what the run executes.

- :func:`mlm_step`: phase 1. Pad the examples, draw each row's masking rate from the run's schedule, mask
  with the strategy, forward, backward, clip, step, and hand the strategy its saliency: the MLM loss's
  (Typhoon) or, with a task model, the task loss's (:func:`typhoon.masking.task_saliency.task_saliency`).
- :func:`fine_tune_step`: phase 2, and the task model's warm-up (the same step on the same kind of model).

The run's bookkeeping (loss rows, tokens, FLOP meters, progress) stays with the loops that call these.
``ctx`` is the run's :class:`typhoon.training.run.RunContext`: config, backbone, device, autocast and the
mask generator the masks are drawn from.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from typhoon.data import PAD_MULTIPLE, collate
from typhoon.masking import MaskingStrategy, SaliencyProbe, SaliencySource, sample_rates
from typhoon.masking.task_saliency import task_saliency
from typhoon.models import MaskedLM

GRAD_CLIP = 1.0


def to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def make_optimizer(model, lr: float, weight_decay: float):
    # No weight decay on biases and LayerNorm weights (BERT's recipe). The fused kernel updates all
    # parameters in one pass: ~5x faster than the default on CPU, where the 11.7M-parameter word
    # embedding makes the optimizer step a visible share of a small model's training step.
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, fused=True)


def linear_schedule(optimizer, total_steps: int, warmup_ratio: float):
    warmup = max(1, int(total_steps * warmup_ratio))
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (total_steps - step) / max(1, total_steps - warmup))))


def optimizer_step(model, optimizer, scheduler) -> None:
    """Clip, step, advance the learning-rate schedule, clear the gradients (every kind of step)."""
    torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


@dataclass
class MLMStep:
    """What one phase-1 step did, for the caller's bookkeeping."""

    loss: torch.Tensor  # the MLM loss, a scalar on the device
    batch: dict  # the padded batch before masking, on the CPU
    selected: int | torch.Tensor  # positions the strategy selected (the MLM head's targets); a tensor on the device
    # when the masks were drawn there (counting them on the host would wait for the device)
    task_loss: torch.Tensor | None  # the task model's loss on the masked batch (task-loss saliency), else None


def mlm_step(ctx, mlm: MaskedLM, strategy: MaskingStrategy, optimizer, scheduler, examples: list[dict],
             saliency: SaliencySource) -> MLMStep | None:
    """One masked-LM step on ``examples``; None (no update) when the strategy selected nothing.

    The strategy learns from the run's ``saliency`` source. A task source's saliency is the gradient of its
    frozen task model's loss, which reaches no parameter: the encoder is updated by the MLM loss alone, as for
    every strategy.

    Where the masks are drawn is the run's choice, made once (``ctx.masks_on_device``, :func:`set_up`):
    on the host, the labels stay there and the MLM head scores the selected positions only, counted on the
    host; on the device (a GPU run), the batch goes up first, the masks, labels and Typhoon's state stay on
    the device, and the head scores every position, so that no count has to come back: the step queues its
    work and returns without waiting for the device. There a batch with nothing selected contributes a loss
    of 0 (no gradient) instead of being skipped, since telling would mean waiting.
    """
    config, tokenizer = ctx.config, ctx.backbone.tokenizer
    batch = collate(examples, tokenizer.pad_token_id, PAD_MULTIPLE)
    on_device = ctx.masks_on_device
    to_mask = to_device(batch, ctx.device) if on_device else batch
    rates = sample_rates(config.schedule, len(examples), config.p, config.pi0, ctx.mask_generator)
    masked_ids, labels = strategy(to_mask, ctx.mask_generator, rate=rates, mask_token_id=tokenizer.mask_token_id,
                                  vocab_size=len(tokenizer))
    selected = labels != -100
    if not on_device and not selected.any():  # nothing selected (tiny batch): no loss to learn from
        return None
    inputs = to_device({**batch, "input_ids": masked_ids}, ctx.device)
    task_loss = None
    if saliency.kind == "task":  # the frozen task model's gradient, w.r.t. its inputs only
        task_loss, gradient = task_saliency(saliency.task_model, ctx.backbone.model_inputs(inputs), inputs["labels"],
                                            to_mask["input_ids"].to(ctx.device), ctx.autocast)
    with SaliencyProbe(mlm.input_embeddings()) if saliency.kind == "mlm" else contextlib.nullcontext() as probe:
        with ctx.autocast():
            # host labels: no sync (MaskedLM); device labels: every position scored, no count needed
            loss = mlm(labels=labels, every_position=on_device, **ctx.backbone.model_inputs(inputs))
        loss.backward()
    if saliency.kind == "mlm":
        # saliency w.r.t. the one-hot of the *original* token at every position
        gradient = probe.saliency(to_mask["input_ids"].to(ctx.device, non_blocking=True))
    if saliency.kind != "none":
        strategy.update(to_mask, selected, gradient.float())
    optimizer_step(mlm, optimizer, scheduler)
    return MLMStep(loss=loss, batch=batch, selected=selected.sum() if on_device else int(selected.sum()),
                   task_loss=task_loss)


def classifier_step(ctx, classifier: torch.nn.Module, batch: dict, optimizer, scheduler) -> torch.Tensor:
    """One supervised step of a classifier on a batch already on the device; returns its loss."""
    with ctx.autocast():
        logits = classifier(**ctx.backbone.model_inputs(batch)).logits
    loss = torch.nn.functional.cross_entropy(logits.float(), batch["labels"])
    loss.backward()
    optimizer_step(classifier, optimizer, scheduler)
    return loss


def fine_tune_step(ctx, classifier: torch.nn.Module, examples: list[dict], optimizer,
                   scheduler) -> tuple[torch.Tensor, dict]:
    """One fine-tuning step on ``examples`` (phase 2, and the task model's warm-up): (loss, the padded
    batch on the device)."""
    batch = to_device(collate(examples, ctx.backbone.tokenizer.pad_token_id, PAD_MULTIPLE), ctx.device)
    return classifier_step(ctx, classifier, batch, optimizer, scheduler), batch
