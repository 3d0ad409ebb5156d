#!/usr/bin/env python3
"""The shipped ``minilm-l6-mlm``'s masked-token loss on MRPC's and CoLA's train text, as the backbone card
(docs/backbones.md) states it, and under [MASK]-only corruption.

The card's curve (``scripts/train_mlm_backbone.py``, ``evaluation_batches``) scores the first 256 train
examples of each task, 15 % of the tokens selected once (seed 1234, chunks of 64) and corrupted as BERT does:
80 % [MASK], 10 % a random token, 10 % unchanged. Here the same draw is scored twice: as the card does, and
with every selected token shown as [MASK] (the same positions, so only the corruption differs). ``--draws``
adds further draws (seeds 1235, ...), to show how much one draw's loss moves. About 10 s a draw on one core.

    python scripts/backbone_card_losses.py [--draws 6] [--examples 256]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_mlm_backbone as recipe  # noqa: E402 - the card's own evaluation code

from typhoon.masking.random import RandomMasking  # noqa: E402
from typhoon.models.backbones import load_backbone  # noqa: E402

CARD_SEED = 1234  # the fixed draw of the card's curve (train_mlm_backbone.evaluation_batches)


def losses(backbone, mlm, rows: list[dict], seed: int) -> tuple[float, float]:
    """One draw's loss with BERT's 80/10/10 corruption, and with the same positions all [MASK]."""
    tokenizer = backbone.tokenizer
    batches = recipe.fixed_masks(recipe.as_batch(rows, tokenizer.pad_token_id), RandomMasking(p=0.15), tokenizer, seed)
    mask_only = [(batch, torch.where(labels != -100, torch.full_like(masked, tokenizer.mask_token_id),
                                     batch["input_ids"]), labels) for batch, masked, labels in batches]
    return recipe.evaluate(mlm, backbone, batches), recipe.evaluate(mlm, backbone, mask_only)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1, help="mask draws to score (seeds 1234, 1235, ...; default 1)")
    parser.add_argument("--examples", type=int, default=256, help="train examples scored per task (the card's: 256)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    backbone = load_backbone("minilm-l6-mlm")
    mlm = backbone.mlm_model(seed=0, attention="sdpa")
    rows = {task: recipe.glue_train_rows(backbone.tokenizer, task, args.examples) for task in ("mrpc", "cola")}
    print("seed  task  80/10/10  [MASK] only")
    for seed in range(CARD_SEED, CARD_SEED + args.draws):
        for task, task_rows in rows.items():
            bert, mask_only = losses(backbone, mlm, task_rows, seed)
            print(f"{seed}  {task:4s}  {bert:8.4f}  {mask_only:11.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
