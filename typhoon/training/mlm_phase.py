"""Phase 1 of a run: the encoder adapted with masked language modelling on the task's own training text, its
masks drawn by the run's strategy (:func:`adapt_mlm`). Each step is :func:`typhoon.training.step.mlm_step`; the
dev loss uses one fixed random mask for every run (``DEV_MASK_SEED``), so the runs' curves are comparable.
:func:`typhoon.training.run.train_and_evaluate` calls it for a whole run; a KL study's curve calls it an epoch at a
time (``until_epoch``), going on from a saved state.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from typhoon.data import epoch_batches
from typhoon.masking import MaskingStrategy, SaliencySource, get_strategy
from typhoon.models import MaskedLM
from typhoon.progress_bars import progress_bar
from typhoon.training import examples, flops, resume
from typhoon.training import step as training_step
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
              saved: dict | None = None, at_epoch_end=None, at_step_end=None,
              until_epoch: int | None = None) -> tuple[list, dict]:
    """Masked-LM training on the task's training text (``ctx``: the run's :class:`typhoon.training.run.RunContext`);
    returns loss rows and timing.

    Each step is :func:`typhoon.training.step.mlm_step`, the strategy learning from the run's ``saliency``
    source (a task source: the gradient of the warmed-up task model's loss, which reaches no parameter).

    For a phase of many epochs (a KL study's curve, :mod:`typhoon.studies.kl_original.cells`), as :func:`fine_tune` has them:
    ``saved``, a state saved after an MLM epoch (the model, optimizer, schedule and the phase's progress; the
    caller restores the strategy and the generators), from which the next epoch follows;
    ``at_epoch_end(epoch, models, progress)``, called after each epoch's dev loss with the state dicts and the
    phase's progress; ``at_step_end(step, epoch)``, called after each update; ``until_epoch``, the last epoch
    this call trains (a curve cell trains one and returns). A run passes none of them.
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
    rows, tokens, step, task_losses, epochs_done = [], 0, 0, {}, 0
    meter = flops.PhaseMeter(ctx.backbone.config)  # FLOPs, wall and CPU time of the phase
    if saved is not None:
        resume.restore_models(saved, mlm=mlm, optimizer=optimizer, scheduler=scheduler)
        so_far = saved["progress"]["mlm"]
        rows, tokens, step, epochs_done = so_far["rows"], so_far["tokens"], so_far["step"], so_far["epoch"]
        task_losses = {int(epoch): losses for epoch, losses in so_far["task_losses"].items()}  # JSON's keys are text
        meter.load_state(so_far["meter"])
    meter.start()
    for epoch in range(epochs_done + 1, min(config.mlm_epochs, until_epoch or config.mlm_epochs) + 1):
        mlm.train()
        bar = progress_bar(epoch_batches(lengths, config.batch_size, ctx.rng, config.batch_order), f"MLM epoch {epoch}",
                           ctx.progress, leave=False)
        for idx in bar:
            done = training_step.mlm_step(ctx, mlm, strategy, optimizer, scheduler, [train[i] for i in idx],
                                          saliency)
            if done is None:  # nothing selected: no update
                continue
            # the losses stay tensors until the epoch ends: reading one now would wait for the device
            if done.task_loss is not None:
                task_losses.setdefault(epoch, []).append(done.task_loss.detach())
            step += 1
            tokens += int(done.batch["attention_mask"].sum())
            meter.add(done.batch["attention_mask"], selected=done.selected)
            rows.append({"step": step, "epoch": epoch, "split": "train", "loss": done.loss.detach()})
            if step % LOSS_SHOWN_EVERY == 1 or ctx.device.type == "cpu":
                bar.set_postfix(loss=f"{float(rows[-1]['loss']):.3f}")
            ctx.report("mlm", step=step, steps=steps_per_epoch * config.mlm_epochs, epoch=epoch,
                       epochs=config.mlm_epochs, tokens=tokens)
            if at_step_end is not None:
                at_step_end(step, epoch)
        read_losses(rows, task_losses.get(epoch, []))
        ctx.report("eval", epoch=epoch, epochs=config.mlm_epochs)
        rows.append({"step": step, "epoch": epoch, "split": "dev", "loss": mlm_dev_loss(ctx, mlm, dev_batches)})
        for batch in dev_batches:
            meter.add(batch["attention_mask"], selected=int((batch["mlm_labels"] != -100).sum()), backward=False)
        if at_epoch_end is not None:
            meter.stop()
            at_epoch_end(epoch, {"mlm": mlm.state_dict(), "optimizer": optimizer.state_dict(),
                                 "scheduler": scheduler.state_dict()},
                         {"epoch": epoch, "rows": rows, "tokens": tokens, "step": step, "task_losses": task_losses,
                          "meter": meter.state()})
            meter.start()
    meter.stop()
    wall = meter.wall_s
    timing = {"mlm_wall_s": wall, "mlm_tokens_per_s": tokens / wall if wall > 0 else None, "mlm_steps": step,
              **meter.summary("mlm")}
    if saliency.kind == "task":  # the task model's mean loss per epoch on the masked phase-1 batches
        timing["mlm_task_loss_by_epoch"] = [float(np.mean(task_losses[e])) if e in task_losses else None
                                            for e in range(1, config.mlm_epochs + 1)]
    return rows, timing
