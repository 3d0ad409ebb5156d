"""Fast CPU dropout (typhoon/models/dropout.py) against torch's native dropout, alone and in a training step.

    python benchmarks/bench_dropout.py [--threads 2] [--repeats 5] [--examples 256] [--backbone minilm-l6]

1. Dropout alone, forward + backward, p = 0.1, on the two shapes a MiniLM-L6 step at B=32, L=64 drops:
   attention probabilities (32, 12, 64, 64) and hidden states (32, 64, 384), in fp32 and bf16.
2. A fine-tuning step of MiniLM-L6 (``--backbone``; eager attention, bf16 autocast, training mode, fused AdamW) on
   real MRPC batches (the first ``--examples``, B=32, length-grouped), with native dropout and with fast dropout.
Prints median milliseconds and the ratios.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

import numpy as np
import torch

from typhoon.data.batching import collate, length_grouped_batches
from typhoon.data.glue_files import load_glue
from typhoon.data.tokenizing import tokenize_glue
from typhoon.models.backbones import load_backbone
from typhoon.models.dropout import fast_dropout


def median_ms(fn, repeats: int, inner: int = 10) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times) * 1000


def native_dropout(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.dropout(x, 0.1, True)


def fast(x: torch.Tensor) -> torch.Tensor:
    return fast_dropout(x, 0.1)


def forward_backward(drop, x: torch.Tensor) -> None:
    drop(x).sum().backward()
    x.grad = None


def train_epoch(model, optimizer, batches: list[dict]) -> None:
    for b in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                           token_type_ids=b["token_type_ids"]).logits
        torch.nn.functional.cross_entropy(logits.float(), b["labels"]).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def dropout_alone(repeats: int) -> None:
    print("dropout alone, forward + backward, p = 0.1 (ms)")
    print(f"{'shape':>22} {'dtype':>9} {'native':>8} {'fast':>8} {'speed-up':>9}")
    for shape in ((32, 12, 64, 64), (32, 64, 384)):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(shape, dtype=dtype, requires_grad=True)
            t_native = median_ms(functools.partial(forward_backward, native_dropout, x), repeats)
            t_fast = median_ms(functools.partial(forward_backward, fast, x), repeats)
            print(f"{str(shape):>22} {str(dtype)[6:]:>9} {t_native:8.2f} {t_fast:8.2f} {t_native / t_fast:8.2f}x")


def training_step(repeats: int, name: str = "minilm-l6", examples: int = 256) -> None:
    backbone = load_backbone(name)
    raw = load_glue("mrpc")
    rows = tokenize_glue(raw.__class__(train=raw["train"].select(range(examples))), backbone.tokenizer, "mrpc",
                         128)["train"].to_list()
    lengths = [len(r["input_ids"]) for r in rows]
    batches = [collate([rows[i] for i in idx], backbone.tokenizer.pad_token_id, 8)
               for idx in length_grouped_batches(lengths, 32, np.random.default_rng(0))]
    print(f"\n{name} fine-tuning step, MRPC, B=32, {len(batches)} length-grouped batches, bf16 autocast, "
          "eager attention, training mode (ms/step)")
    results = {}
    for name, use_fast in (("native", False), ("fast", True)):
        model = backbone.classifier(2, seed=0, attention="eager", fast_dropout=use_fast).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
        results[name] = median_ms(functools.partial(train_epoch, model, optimizer, batches), repeats, inner=1) / len(batches)
        print(f"{name + ' dropout':>15}: {results[name]:8.1f}")
    print(f"{'speed-up':>15}: {results['native'] / results['fast']:8.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--examples", type=int, default=256, help="MRPC training examples of the step's batches")
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dropout_alone(args.repeats)
    training_step(args.repeats, args.backbone, args.examples)


if __name__ == "__main__":
    main()
