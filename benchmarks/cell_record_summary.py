"""Achieved GFLOP/s per phase of whole runs, read from their records (metrics.json).

    python -m typhoon run --task mrpc --backbone minilm-l6 --strategy random --seed 0 --profile cpu \\
        --set num_threads=1 [--set precision=bf16] --out OUT
    python benchmarks/cell_record_summary.py OUT/runs/mrpc/minilm-l6/random/seed0 [more run folders]

Prints per run and phase: wall and CPU seconds, useful GFLOP/s by wall clock and per CPU-second, the
share of the matmul peak the run measured at its start (same dtype and threads; wall clock), the share
of the 1-thread CPU-time peak measured here now (for 1-thread runs), and the dev metric. On a shared
machine the CPU-time figures leave out the time other processes held the cores.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from typhoon.training.flops import DTYPES, PEAK_SHAPES, time_matmul


def cpu_time_peak(dtype: str) -> float:
    """1-thread matmul peak (GFLOP/s) by this process's CPU time."""
    torch.set_num_threads(1)
    return max(time_matmul(*shape, DTYPES[dtype], torch.device("cpu"), clock=time.process_time)
               for shape in PEAK_SHAPES.values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    cpu_peaks = {dtype: cpu_time_peak(dtype) for dtype in DTYPES}
    print(f"1-thread CPU-time matmul peak now: fp32 {cpu_peaks['fp32']:.0f}, bf16 {cpu_peaks['bf16']:.0f} GFLOP/s")
    print(f"{'run':<40} {'precision':<9} {'thr':>3} {'peak':>6} {'phase':<4} {'wall s':>7} {'CPU s':>7} "
          f"{'GFLOP':>7} {'GFLOP/s':>8} {'per CPU-s':>9} {'% peak':>7} {'% peak CPU':>10}  dev")
    for run in args.runs:
        metrics = json.loads((run / "metrics.json").read_text())
        timing, peak = metrics["timing"], metrics["hardware"]["matmul_peak"]["gflop_per_s"]
        dev = {k: round(v, 4) for k, v in metrics["final"].items()}
        for phase in ("mlm", "ft"):
            gflop, wall, cpu = timing[f"{phase}_gflop"], timing[f"{phase}_wall_s"], timing[f"{phase}_cpu_s"]
            per_cpu = gflop / cpu  # per CPU-second (all threads' CPU time added up)
            share_cpu = f"{100 * per_cpu / cpu_peaks[metrics['precision']]:>10.1f}" if metrics["threads"] == 1 else f"{'-':>10}"
            print(f"{str(run)[-40:]:<40} {metrics['precision']:<9} {metrics['threads']:>3} {peak:>6.1f} {phase:<4} "
                  f"{wall:>7.1f} {cpu:>7.1f} {gflop:>7.0f} {gflop / wall:>8.1f} {per_cpu:>9.1f} "
                  f"{100 * gflop / wall / peak:>7.1f} {share_cpu}  {dev if phase == 'ft' else ''}")
        print(f"{'':<40} reason: {metrics.get('precision_reason')}; speed: {metrics.get('speed')}")


if __name__ == "__main__":
    main()
