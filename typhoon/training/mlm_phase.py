"""Phase 1's loop: the encoder adapted with masked language modelling on the task's own training text, its
masks drawn by the run's strategy (:func:`adapt_mlm`), read top to bottom. Each step is
:func:`typhoon.training.step.mlm_step`; the dev loss uses one fixed random mask for every run (``DEV_MASK_SEED``),
so the runs' curves are comparable. What the loop takes (the strategy, the task model, the model, a saved
state) is built by :func:`typhoon.training.run.phase_one`, the one way into the phase: a whole run's, a KL
state's, a study's curve, epoch by epoch (``until_epoch``, going on from a saved state, its files written by callbacks) and
the walkthrough's few steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from typhoon.data import epoch_batches
from typhoon.masking import MaskingStrategy, SaliencySource, get_strategy
from typhoon.models import MaskedLM
from typhoon.training import examples, flops, resume
from typhoon.training import step as training_step
from typhoon.training.callbacks import PhaseCallback, PhaseCallbacks, PhaseState, ProgressBars
from typhoon.training.dev_losses import mlm_dev_loss
from typhoon.training.step import linear_schedule, make_optimizer

DEV_MASK_SEED = 20240601  # the dev MLM loss uses one fixed mask for every run, so curves are comparable
LOSS_SHOWN_EVERY = 50  # on a GPU, the progress bar reads a step's loss this seldom (each read waits for the device)


def read_losses(rows: list[dict], task_losses: list) -> None:
    """The loss tensors an epoch kept as floats, in place: one wait for the device per epoch, not per step."""
    for row in (r for r in rows if isinstance(r["loss"], torch.Tensor)):
        row["loss"] = row["loss"].item()
    task_losses[:] = [loss.item() if isinstance(loss, torch.Tensor) else loss for loss in task_losses]


def adapt_mlm(ctx, mlm: MaskedLM, strategy: MaskingStrategy, saliency: SaliencySource, *,
              saved: resume.SavedState | None = None, callbacks: Sequence[PhaseCallback] = (),
              until_epoch: int | None = None) -> tuple[list, dict]:
    """Masked-LM training on the task's training text (``ctx``: the run's :class:`typhoon.training.run.RunContext`);
    returns loss rows and timing. Called by :func:`typhoon.training.run.phase_one`, which builds what it takes.

    Each step is :func:`typhoon.training.step.mlm_step`, the strategy learning from the run's ``saliency``
    source (a task source: the gradient of the warmed-up task model's loss, which reaches no parameter).
    ``saved``: a state saved after an MLM epoch, from which the next epoch follows (the caller has restored the
    strategy and the generators); ``callbacks``: their ``on_epoch_begin`` once an epoch's batches are drawn,
    ``on_step_end`` after each update, ``on_epoch_end`` after each epoch's dev loss (:mod:`typhoon.training.callbacks`;
    the progress bars are one, where ``ctx.progress``); ``until_epoch``: the last epoch this call trains (a study's curve's
    cell trains one and returns).
    """
    config, tokenizer = ctx.config, ctx.backbone.tokenizer
    mask_args = dict(mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    train, dev = ctx.data["train"], ctx.data["validation"]
    # The dev loss uses one fixed random mask, independent of the run's seed and strategy.
    dev_masker = get_strategy("random", p=config.p, corruption=config.corruption)
    dev_gen = torch.Generator().manual_seed(DEV_MASK_SEED)
    dev_batches = examples.eval_batches(dev, config, tokenizer.pad_token_id)
    for batch in dev_batches:
        batch["input_ids"], batch["mlm_labels"] = dev_masker(batch, dev_gen, **mask_args)

    lengths = [len(x["input_ids"]) for x in train]
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    optimizer = make_optimizer(mlm, config.mlm_lr, config.weight_decay)
    scheduler = linear_schedule(optimizer, steps_per_epoch * config.mlm_epochs, config.warmup_ratio)
    meter = flops.PhaseMeter(ctx.backbone.config)  # FLOPs, wall and CPU time of the phase
    state = PhaseState("mlm", mlm, optimizer, scheduler, meter, strategy)
    if saved is not None:
        state.restore(saved)
    loss_every = 1 if ctx.device.type == "cpu" else LOSS_SHOWN_EVERY  # how often the bar reads the loss
    hooks = PhaseCallbacks([*([ProgressBars("MLM", steps_per_epoch, loss_every)] if ctx.progress else []), *callbacks])
    state.meter.start()
    for epoch in range(state.epoch + 1, min(config.mlm_epochs, until_epoch or config.mlm_epochs) + 1):
        state.epoch = epoch
        mlm.train()
        batches = epoch_batches(lengths, config.batch_size, ctx.rng, config.batch_order)
        hooks.on_epoch_begin(state)
        for idx in batches:
            done = training_step.mlm_step(ctx, mlm, strategy, optimizer, scheduler, [train[i] for i in idx],
                                          saliency)
            if done is None:  # nothing selected: no update
                continue
            # the losses stay tensors until the epoch ends: reading one now would wait for the device
            if done.task_loss is not None:
                state.task_losses.setdefault(epoch, []).append(done.task_loss.detach())
            state.step += 1
            state.tokens += int(done.batch["attention_mask"].sum())
            state.meter.add(done.batch["attention_mask"], selected=done.selected)
            state.loss = done.loss.detach()
            state.rows.append({"step": state.step, "epoch": epoch, "split": "train", "loss": state.loss})
            ctx.report("mlm", step=state.step, steps=steps_per_epoch * config.mlm_epochs, epoch=epoch,
                       epochs=config.mlm_epochs, tokens=state.tokens)
            hooks.on_step_end(state)
        read_losses(state.rows, state.task_losses.get(epoch, []))
        ctx.report("eval", epoch=epoch, epochs=config.mlm_epochs)
        state.rows.append({"step": state.step, "epoch": epoch, "split": "dev",
                           "loss": mlm_dev_loss(ctx, mlm, dev_batches)})
        for batch in dev_batches:
            state.meter.add(batch["attention_mask"], selected=int((batch["mlm_labels"] != -100).sum()), backward=False)
        state.meter.stop()
        hooks.on_epoch_end(state)
        state.meter.start()
    state.meter.stop()
    wall = state.meter.wall_s
    timing = {"mlm_wall_s": wall, "mlm_tokens_per_s": state.tokens / wall if wall > 0 else None,
              "mlm_steps": state.step, **state.meter.summary("mlm")}
    if saliency.kind == "task":  # the task model's mean loss per epoch on the masked phase-1 batches
        timing["mlm_task_loss_by_epoch"] = [float(np.mean(state.task_losses[e])) if e in state.task_losses else None
                                            for e in range(1, config.mlm_epochs + 1)]
    return state.rows, timing
