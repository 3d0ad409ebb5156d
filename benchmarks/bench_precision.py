"""Fine-tuning in fp32 vs bf16 autocast on CPU: wall time and dev metric, same seed and data.

    python benchmarks/bench_precision.py [--task mrpc] [--epochs 1] [--threads 2] [--examples N] [--backbone minilm-l6]

Runs phase 2 only (no MLM phase) of minilm-l6 twice, fp32 then bf16, and prints seconds and the dev
metric per epoch, so the speed-up and any quality drop can be read side by side. ``--examples N`` fine-tunes
on the first N training examples (dev: a quarter of that) instead of the whole task.
"""

from __future__ import annotations

import argparse
import os

import torch

from typhoon.config import RunConfig
from typhoon.training import run as training_run


def fine_tune_once(task: str, precision: str, epochs: int, lr: float, examples: int | None,
                   backbone: str) -> tuple[list, dict]:
    cut = {} if examples is None else {"max_train_examples": examples, "max_eval_examples": max(1, examples // 4)}
    config = RunConfig(task=task, backbone=backbone, precision=precision, ft_epochs=epochs, ft_lr=lr, mlm_epochs=0,
                       device="cpu", seed=0, **cut)
    ctx = training_run.set_up(config, progress=False)
    torch.manual_seed(0)
    classifier = ctx.backbone.classifier(ctx.task.num_labels, seed=0)
    return training_run.fine_tune(ctx, classifier)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="mrpc")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--examples", type=int, help="only the first N training examples (default: all)")
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(args.threads)
    metric = "dev_f1" if args.task == "mrpc" else "dev_mcc" if args.task == "cola" else "dev_accuracy"
    for precision in ("fp32", "bf16"):
        epochs, timing = fine_tune_once(args.task, precision, args.epochs, args.lr, args.examples, args.backbone)
        print(f"{precision}: {timing['ft_wall_s']:7.1f} s, {timing['ft_tokens_per_s']:7.0f} tokens/s, "
              f"{metric} per epoch {[round(e[metric], 4) for e in epochs]}")


if __name__ == "__main__":
    main()
