"""What a new batch shape costs: the first training step at each width against a repeat at that width.

    python benchmarks/bench_shape_warmup.py [--threads 1] [--widths 40 48 56 64 72 80] [--backbone minilm-l6]

For fp32 and bf16 autocast in turn, a fine-tuning step of minilm-l6 (the pipeline's kernels, fused AdamW,
clipping) runs on real MRPC batches (B=32) padded to each width, twice round: the first round meets each
shape for the first time (oneDNN creates and JIT-compiles its bf16 kernels per shape; MKL's fp32 GEMM
has none to create), the second repeats them. Prints CPU seconds (this process's user + system) per
step and the median extra cost of a first visit.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from common import backbone_and_mrpc

from typhoon.data.batching import collate
from typhoon.training import step as training_step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--widths", type=int, nargs="+", default=[40, 48, 56, 64, 72, 80])
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    args = parser.parse_args(argv)
    backbone, train = backbone_and_mrpc(args.threads, backbone=args.backbone)
    rows = [train[i] for i in np.random.default_rng(0).permutation(len(train))[:32]]
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = backbone.classifier(2, seed=0, attention="eager", fast_dropout=True)
        optimizer = training_step.make_optimizer(model, 5e-5, 0.01)
        scheduler = training_step.linear_schedule(optimizer, 1000, 0.1)
        seconds = {}
        for visit in ("first", "repeat"):
            for width in args.widths:
                batch = collate(rows, backbone.tokenizer.pad_token_id, width)  # every row padded to `width`
                batch = {k: v[:, :width] if v.ndim == 2 else v for k, v in batch.items()}
                start = time.process_time()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                    logits = model(**backbone.model_inputs(batch)).logits
                torch.nn.functional.cross_entropy(logits.float(), batch["labels"]).backward()
                training_step.optimizer_step(model, optimizer, scheduler)
                seconds[visit, width] = time.process_time() - start
        extra = [seconds["first", w] - seconds["repeat", w] for w in args.widths]
        print(f"{precision}: " + ", ".join(f"L={w} {seconds['first', w]:.2f}/{seconds['repeat', w]:.2f}"
                                          for w in args.widths)
              + f" CPU s (first/repeat); median extra on a first visit {statistics.median(extra):+.2f} s")


if __name__ == "__main__":
    main()
