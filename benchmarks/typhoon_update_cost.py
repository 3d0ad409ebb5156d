"""Milliseconds of one Typhoon update (batch estimate, EMA, recalibration) and one mask draw.

``--learn-on host`` (the default): the state in float64 numpy on the host, the CPU's path; on a GPU every MLM
step would wait for this work before it could draw the next step's masks. ``--learn-on cpu`` or ``cuda``: the
state as torch tensors on that device (``TyphoonMasking.learn_on``, the GPU run's path), the batch and saliency
there too; on a GPU the time is the device's (synchronized), which the host does not wait for in a run. The
batch is synthetic but shaped like the grid's (32 x 128 ids drawn from a Zipf law over the uncased vocabulary
of 30,522 types, 15 % selected); run it from two checkouts, or with two ``--learn-on``, for an A/B on one
machine:

    PYTHONPATH=/path/to/old python benchmarks/typhoon_update_cost.py
    PYTHONPATH=$PWD         python benchmarks/typhoon_update_cost.py --learn-on cpu
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import statistics
import time

import numpy as np
import torch

import typhoon
from typhoon.masking import get_strategy

VOCAB = 30522  # bert-base-uncased


def synthetic_batch(rng: np.random.Generator, rows: int, length: int, probability: np.ndarray) -> dict:
    ids = torch.as_tensor(rng.choice(VOCAB, size=(rows, length), p=probability))
    special = torch.zeros(rows, length, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    return {"input_ids": ids, "attention_mask": torch.ones(rows, length, dtype=torch.long),
            "special_tokens_mask": special}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", default="typhoon", help="a Typhoon variant: typhoon, typhoon_2023, "
                        "typhoon_rank, typhoon_softmax")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--learn-on", default="host", help="host (numpy, the default) or a torch device: cpu, cuda")
    args = parser.parse_args()
    device = None if args.learn_on == "host" else torch.device(args.learn_on)
    place = (lambda t: t) if device is None else (lambda t: t.to(device))

    def wait() -> None:  # a GPU's work is timed when done, not when queued
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    probability = 1.0 / np.arange(1, VOCAB + 1) ** 1.1
    probability /= probability.sum()
    counts = rng.multinomial(2_000_000, probability)
    strategy = get_strategy(args.strategy, p=0.15)
    specials = np.zeros(VOCAB, dtype=np.int64)
    specials[101:103] = 2 * args.rows * 1000  # [CLS] and [SEP]: what the 2023 budget (all_ids) counts too
    strategy.prepare(counts, special_counts=specials if strategy.budget == "all_ids" else None)
    strategy.learn_on(device)
    generator = torch.Generator(device if device is not None else "cpu").manual_seed(0)
    rates = place(torch.full((args.rows,), 0.15))
    update_ms, mask_ms = [], []
    for _ in range(args.steps):
        batch = {k: place(v) for k, v in synthetic_batch(rng, args.rows, args.length, probability).items()}
        wait()
        start = time.perf_counter()
        masked_ids, labels = strategy(batch, generator, rate=rates, mask_token_id=103, vocab_size=VOCAB)
        wait()
        mask_ms.append((time.perf_counter() - start) * 1e3)
        saliency = torch.randn(batch["input_ids"].shape, generator=generator, device=batch["input_ids"].device)
        wait()
        start = time.perf_counter()
        strategy.update(batch, labels != -100, saliency)
        wait()
        update_ms.append((time.perf_counter() - start) * 1e3)
    warm = args.steps // 10
    print(f"{strategy.name} learning on {args.learn_on}, from {typhoon.__file__}; "
          f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"1 thread; {args.steps - warm} steps of {args.rows} x {args.length} over {VOCAB} types")
    for name, values in (("update", update_ms[warm:]), ("mask draw", mask_ms[warm:])):
        print(f"{name:>10}: median {statistics.median(values):.2f} ms, "
              f"p90 {np.percentile(values, 90):.2f} ms")
    # the same bytes from two checkouts: the learnt state is bit-identical
    digest = hashlib.sha256(strategy.probs.tobytes() + np.nan_to_num(strategy.weights, nan=-1.0).tobytes())
    print(f"state after: steps {strategy.steps}, seen {int(strategy.seen.sum())}, "
          f"sha256 of probs and weights {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
