"""Where a training step's time goes: matrix products against everything else (torch.profiler).

    python benchmarks/bench_step_profile.py [--threads 1] [--width 56] [--steps 3] [--backbone minilm-l6]

For the MLM step (gathered head, 15 % random masking) and the fine-tuning step of minilm-l6 with the
pipeline's kernels (eager attention, fast dropout, fused AdamW, clipping, LR schedule), fp32 and bf16,
on one real MRPC batch (B=32) padded to ``--width``: the share of profiled self time in matrix products
(mm, addmm, bmm) and in the other ops that take the most, plus the step's counted FLOPs over its CPU
seconds. The matrix-product share bounds what a step can reach: a step whose products run at x % of the
peak and take y % of its time reaches at most about x * y % of the peak.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
import torch
from common import backbone_and_mrpc
from torch.profiler import ProfilerActivity, profile

from typhoon.data.batching import collate
from typhoon.masking import get_strategy
from typhoon.training import flops
from typhoon.training import step as training_step

MATMULS = ("aten::mm", "aten::addmm", "aten::bmm")


def profile_step(phase: str, precision: str, backbone, batch: dict, masked, labels, steps: int) -> str:
    """One line: a step's GFLOP per CPU-second and the profiled shares of its time."""
    torch.manual_seed(0)
    lengths = batch["attention_mask"].sum(1).tolist()
    if phase == "mlm":
        model = backbone.mlm_model(attention="eager", fast_dropout=True)
        inputs = backbone.model_inputs({**batch, "input_ids": masked})
        step_flop_count = flops.step_flops(backbone.config, lengths, selected=int((labels != -100).sum()))
    else:
        model = backbone.classifier(2, attention="eager", fast_dropout=True)
        inputs = backbone.model_inputs(batch)
        step_flop_count = flops.step_flops(backbone.config, lengths, num_labels=2)
    optimizer = training_step.make_optimizer(model, 5e-5, 0.01)
    scheduler = training_step.linear_schedule(optimizer, 1000, 0.1)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            if phase == "mlm":
                loss = model(labels=labels, **inputs)
            else:
                loss = torch.nn.functional.cross_entropy(model(**inputs).logits.float(), batch["labels"])
        loss.backward()
        training_step.optimizer_step(model, optimizer, scheduler)

    step()  # warm-up
    cpu = time.process_time()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    cpu = (time.process_time() - cpu) / steps
    self_time = Counter({e.key: e.self_cpu_time_total for e in prof.key_averages()})
    total = sum(self_time.values())
    matmul = sum(self_time[k] for k in MATMULS) / total
    others = ", ".join(f"{k.removeprefix('aten::')} {100 * v / total:.1f}%"
                       for k, v in self_time.most_common(16) if k not in MATMULS)
    return (f"{phase:<3} {precision}: {step_flop_count / cpu / 1e9:5.1f} GFLOP per CPU-s ({cpu:.2f} CPU s/step, profiled); "
            f"matrix products {100 * matmul:.1f}% of self time; then {others}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--width", type=int, default=56)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    args = parser.parse_args(argv)
    backbone, train = backbone_and_mrpc(args.threads, backbone=args.backbone)
    tokenizer = backbone.tokenizer
    rows = [x for x in train if len(x["input_ids"]) <= args.width][:32]
    batch = collate(rows, tokenizer.pad_token_id, args.width)
    masked, labels = get_strategy("random", p=0.15)(batch, torch.Generator().manual_seed(0),
                                                     mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    lengths = batch["attention_mask"].sum(1).tolist()
    print(f"threads={args.threads}, B=32, width {batch['input_ids'].shape[1]}, mean length {np.mean(lengths):.1f}")
    for phase in ("mlm", "ft"):
        for precision in ("fp32", "bf16"):
            print(profile_step(phase, precision, backbone, batch, masked, labels, args.steps), flush=True)


if __name__ == "__main__":
    main()
