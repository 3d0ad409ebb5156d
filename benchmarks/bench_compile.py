"""torch.compile (inductor, dynamic shapes) of the fine-tuning step against eager, on CPU.

    python benchmarks/bench_compile.py [--threads 1] [--precision fp32] [--repeats 2]

Fine-tunes minilm-l6 (the pipeline's kernels: eager attention, fast dropout, fused AdamW, clipping) on
four real MRPC batches of widths 48-72 (B=32), once compiled and once eager, from the same seed. Prints
per batch the first step's CPU and wall seconds (compilation happens there) and then the CPU seconds
of each later step, and the largest loss difference between compiled and eager steps. CPU time is this
process's (user + system): on a shared machine it leaves out the time other processes held the core.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from common import minilm_mrpc

from typhoon.data.batching import PAD_MULTIPLE, collate
from typhoon.training import step as training_step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    backbone, train = minilm_mrpc(args.threads)
    order = np.argsort([len(x["input_ids"]) for x in train], kind="stable")
    batches = [collate([train[i] for i in order[s:s + 32]], backbone.tokenizer.pad_token_id, PAD_MULTIPLE)
               for s in (96, 200, 300, 400)]
    bf16 = args.precision == "bf16"

    def make_step(compiled: bool):
        torch.manual_seed(0)  # same head initialisation and dropout draws for both
        model = backbone.classifier(2, seed=0, attention="eager", fast_dropout=True)
        optimizer = training_step.make_optimizer(model, 5e-5, 0.01)
        scheduler = training_step.linear_schedule(optimizer, 1000, 0.1)
        forward = torch.compile(model, dynamic=True) if compiled else model

        def step(b) -> float:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = forward(**backbone.model_inputs(b)).logits
            loss = torch.nn.functional.cross_entropy(logits.float(), b["labels"])
            loss.backward()
            training_step.optimizer_step(model, optimizer, scheduler)
            return loss.item()
        return step

    losses = {}
    print(f"threads={args.threads} precision={args.precision}, fine-tuning steps, B=32")
    for compiled in (True, False):
        step, name = make_step(compiled), "compiled" if compiled else "eager"
        losses[name] = []
        for b in batches:
            cpu, wall = time.process_time(), time.perf_counter()
            losses[name].append(step(b))
            print(f"{name:<8} width {b['input_ids'].shape[1]:3d} first step: {time.process_time() - cpu:6.2f} CPU s "
                  f"{time.perf_counter() - wall:7.2f} wall s", flush=True)
        for _ in range(args.repeats):
            for b in batches:
                cpu = time.process_time()
                losses[name].append(step(b))
                print(f"{name:<8} width {b['input_ids'].shape[1]:3d} {time.process_time() - cpu:6.3f} CPU s", flush=True)
    diff = max(abs(a - b) for a, b in zip(losses["compiled"], losses["eager"], strict=True))
    print(f"largest loss difference compiled vs eager over {len(losses['eager'])} steps: {diff:.2e}")


if __name__ == "__main__":
    main()
