"""The machine's matrix-product peak in fp32 and bf16, on 1 and 2 threads (typhoon.training.flops.matmul_peak).

    python benchmarks/bench_matmul_peak.py [--rounds 5] [--threads 1 2] [--dtypes fp32 bf16]

The shapes are MiniLM-L6's FFN product at 2048 tokens (2048x384 @ 384x1536) and a square 2048 product.
Every (dtype, threads) pair is measured once per round, the rounds interleaved, so load from other
processes on a shared machine spreads over all pairs alike. Prints per pair the median and the range over
rounds of the best-shape GFLOP/s, by wall clock and by this process's CPU time (user + system) times
the thread count, as typhoon.training.flops.matmul_peak measures it: CPU time leaves out the time other
processes held the cores, so it shows what the cores do when they are ours.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch

from typhoon.machine import cpu_features
from typhoon.training.flops import DTYPES, PEAK_SHAPES, time_matmul


def best_shape(dtype: str, threads: int, clock) -> float:
    """GFLOP/s of the best of the peak shapes for one (dtype, threads) pair, by ``clock`` (CPU time: x threads)."""
    torch.set_num_threads(threads)
    scale = threads if clock is time.process_time else 1
    return scale * max(time_matmul(*shape, DTYPES[dtype], torch.device("cpu"), clock=clock) for shape in PEAK_SHAPES.values())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    args = parser.parse_args(argv)
    features = cpu_features()
    print(f"CPU: {features.model}; avx2={features.avx2} avx512f={features.avx512f} "
          f"avx512_bf16={features.avx512_bf16} amx_bf16={features.amx_bf16}; torch {torch.__version__}")
    pairs = list(itertools.product(args.dtypes, args.threads))
    wall, cpu = {p: [] for p in pairs}, {p: [] for p in pairs}
    for _ in range(args.rounds):
        for pair in pairs:
            wall[pair].append(best_shape(*pair, time.perf_counter))
            cpu[pair].append(best_shape(*pair, time.process_time))
    print(f"{'dtype':>5} {'threads':>7} {'wall GFLOP/s median [min, max]':>32} {'CPU-time x threads GFLOP/s median [min, max]':>46}")
    for pair in pairs:
        w, c = wall[pair], cpu[pair]
        print(f"{pair[0]:>5} {pair[1]:>7} {statistics.median(w):14.1f} [{min(w):6.1f}, {max(w):6.1f}] "
              f"{statistics.median(c):28.1f} [{min(c):6.1f}, {max(c):6.1f}]")


if __name__ == "__main__":
    main()
