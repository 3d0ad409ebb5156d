"""The MLM's losses on the dev split: with the run's fixed random mask after every phase-1 epoch (the curves
of ``mlm_loss.csv``), and with every token masked after phase 1 (the mask-schedule study's quantity).
``ctx`` is the run's :class:`typhoon.training.run.RunContext`."""

from __future__ import annotations

import torch

from typhoon.training import examples
from typhoon.training.step import to_device


@torch.no_grad()
def mlm_dev_loss(ctx, mlm, dev_batches: list[dict]) -> float:
    """The mean loss per masked token over ``dev_batches`` (masked already, their ``mlm_labels`` set)."""
    mlm.eval()
    total, count = 0.0, 0
    for batch in dev_batches:
        inputs = to_device(batch, ctx.device)
        n = int((inputs["mlm_labels"] != -100).sum())
        if n == 0:
            continue
        with ctx.autocast():
            loss = mlm(labels=inputs["mlm_labels"], **ctx.backbone.model_inputs(inputs))
        total, count = total + float(loss) * n, count + n
    mlm.train()
    return total / max(count, 1)


def full_mask_dev_loss(ctx, mlm) -> float:
    """The MLM's loss on the dev split with *every* maskable token masked: what it predicts when nothing
    of the sequence is visible, the quantity the mask-schedule theory says only schedules with mass on
    fully masked inputs can learn (``typhoon.analysis.identifiability``; ``typhoon.studies.schedules.analysis``). No random
    draw: the same inputs for every run, and the run's generators are left as they were."""
    tokenizer = ctx.backbone.tokenizer
    batches = examples.eval_batches(ctx.data["validation"], ctx.config, tokenizer.pad_token_id)
    for batch in batches:
        maskable = ~batch["special_tokens_mask"].bool() & batch["attention_mask"].bool()
        batch["mlm_labels"] = batch["input_ids"].masked_fill(~maskable, -100)
        batch["input_ids"] = batch["input_ids"].masked_fill(maskable, tokenizer.mask_token_id)
    return mlm_dev_loss(ctx, mlm, batches)
