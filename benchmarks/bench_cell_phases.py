"""A real cell's two phases in achieved GFLOP/s against the matmul peak, and candidate speed-ups A/B.

    python benchmarks/bench_cell_phases.py [--examples 320] [--rounds 3] [--task mrpc] [--backbone minilm-l6]
        [--variants bf16 fp32 fp32+malloc ...]

Each measurement runs ``training_run.train_and_evaluate`` (the pipeline's own loops: collate, masking,
optimizer, LR schedule, clipping, dev evaluation) of minilm-l6 with the ``cpu`` profile's settings on the
first ``--examples`` training examples (dev capped at a ninth of that, MRPC's ratio), in a fresh
subprocess, so process-level settings (allocator, threads, environment) start clean. The variants
are interleaved round by round, so load from other processes on a shared machine spreads over all.

A variant is ``+``-joined options: ``fp32`` / ``bf16`` (precision), ``t1`` / ``t2`` (threads, default 1),
``malloc`` (typhoon.training.speed.tune_malloc), ``pad16`` / ``pad32`` (padding multiple, default 8), ``jemalloc`` /
``tcmalloc`` (LD_PRELOAD of the Debian library, when installed).

Prints per variant and phase the median and range over rounds of: useful GFLOP/s by wall clock, useful
GFLOP/s per CPU-second (user + system of the process; with one thread this leaves out the time other
processes held the core), its share of the 1-thread CPU-time matmul peak of the same dtype (measured
in each round), system CPU seconds and minor page faults per training step.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

PRELOADS = {"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
            "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"}


def parse_variant(name: str) -> dict:
    options = dict(precision="fp32", threads=1, malloc="default", pad=8, preload=None)
    for part in name.split("+"):
        if part in ("fp32", "bf16"):
            options["precision"] = part
        elif part in ("t1", "t2"):
            options["threads"] = int(part[1])
        elif part == "malloc":
            options["malloc"] = "tuned"
        elif part.startswith("pad"):
            options["pad"] = int(part[3:])
        elif part in PRELOADS:
            options["preload"] = PRELOADS[part]
        else:
            raise ValueError(f"unknown variant option {part!r} in {name!r}")
    return options


def worker(args) -> None:
    """One measurement: a capped cell in this process; prints its figures as one JSON line."""
    from typhoon.profiles import resolve
    from typhoon.training import examples as training_examples
    from typhoon.training import run as training_run
    from typhoon.training import speed
    from typhoon.training import step as training_step

    options = parse_variant(args.worker)
    configure = speed.configure
    speed.configure = lambda device_type: configure(device_type, options["malloc"])  # the variant's, not auto
    training_step.PAD_MULTIPLE = training_examples.PAD_MULTIPLE = options["pad"]  # training and evaluation batches (read at each call)
    config = resolve("cpu", dict(
        task=args.task, backbone=args.backbone, strategy=args.strategy, seed=0, precision=options["precision"],
        num_threads=options["threads"], max_train_examples=args.examples, max_eval_examples=max(32, args.examples // 9)))
    ctx = training_run.set_up(config, progress=False)
    before = resource.getrusage(resource.RUSAGE_SELF)
    metrics, _, _ = training_run.train_and_evaluate(ctx)
    after = resource.getrusage(resource.RUSAGE_SELF)
    timing = metrics["timing"]
    steps = timing["mlm_steps"] + len(metrics["epochs"]) * -(-metrics["n_train"] // config.batch_size)
    print(json.dumps({**{k: v for k, v in timing.items()}, "malloc": metrics["speed"]["malloc"], "steps": steps,
                      "sys_s": after.ru_stime - before.ru_stime, "minflt": after.ru_minflt - before.ru_minflt,
                      "precision": metrics["precision"], "threads": metrics["threads"],
                      "peak_wall": metrics["hardware"]["matmul_peak"]["gflop_per_s"]}))


def cpu_time_peaks(dtypes: set[str]) -> dict:
    """1-thread matmul peak of each of ``dtypes`` by this process's CPU time (GFLOP/s)."""
    from typhoon.training.flops import DTYPES, PEAK_SHAPES, time_matmul

    torch.set_num_threads(1)
    return {d: max(time_matmul(*s, DTYPES[d], torch.device("cpu"), clock=time.process_time) for s in PEAK_SHAPES.values())
            for d in sorted(dtypes)}


def measure(variant: str, args) -> dict:
    options = parse_variant(variant)
    env = dict(os.environ)
    if options["preload"]:
        if not Path(options["preload"]).exists():
            raise FileNotFoundError(f"{variant}: {options['preload']} is not installed (apt-get install it)")
        env["LD_PRELOAD"] = options["preload"]
    cmd = [sys.executable, __file__, "--worker", variant, "--examples", str(args.examples), "--task", args.task,
           "--strategy", args.strategy, "--backbone", args.backbone]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{variant} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(values: list[float], digits: int = 1) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=["bf16", "fp32", "fp32+malloc"])
    parser.add_argument("--examples", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--task", default="mrpc")
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    results = {v: [] for v in args.variants}
    dtypes = {parse_variant(v)["precision"] for v in args.variants}  # the peaks the variants are measured against
    peaks = []
    for round_ in range(args.rounds):
        peaks.append(cpu_time_peaks(dtypes))
        for variant in args.variants:
            results[variant].append(measure(variant, args))
            r = results[variant][-1]
            print(f"round {round_ + 1} {variant}: mlm {r['mlm_gflop_per_s']:.1f} ft {r['ft_gflop_per_s']:.1f} GFLOP/s "
                  f"(wall), malloc {r['malloc']}", file=sys.stderr, flush=True)
    peak = {d: statistics.median(p[d] for p in peaks) for d in sorted(dtypes)}
    print(f"{args.task}, {args.backbone}, cpu profile, first {args.examples} training examples, {args.rounds} rounds; "
          "1-thread CPU-time matmul peak " + ", ".join(f"{d} {v:.0f}" for d, v in peak.items()) + " GFLOP/s")
    print(f"{'variant':<22} {'phase':<4} {'GFLOP/s wall':>20} {'GFLOP/s per CPU-s':>20} {'% of peak (CPU)':>18} "
          f"{'sys s/step':>18} {'faults/step':>12}")
    for variant, runs in results.items():
        dtype = runs[0]["precision"]
        for phase in ("mlm", "ft"):
            wall = [r[f"{phase}_gflop_per_s"] for r in runs]
            per_cpu = [r[f"{phase}_gflop"] / r[f"{phase}_cpu_s"] for r in runs]
            share = [100 * x / peak[dtype] for x in per_cpu]
            sys_per_step = [r["sys_s"] / r["steps"] for r in runs]
            faults = statistics.median(r["minflt"] / r["steps"] for r in runs)
            print(f"{variant:<22} {phase:<4} {fmt(wall):>20} {fmt(per_cpu):>20} {fmt(share):>18} "
                  f"{fmt(sys_per_step, 3) if phase == 'mlm' else '':>18} {faults if phase == 'mlm' else '':>12}")


if __name__ == "__main__":
    main()
