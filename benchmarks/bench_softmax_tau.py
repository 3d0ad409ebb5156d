"""Pilot for the ``bottleneck`` profile's softmax temperature: how much of the masking budget does
``typhoon_softmax`` move away from uniform masking, per tau?

For each task, the MLM phase of the ``cpu`` profile's minilm-l6 run (seed 0, its settings) is trained
with ``typhoon_softmax`` at ``--train-tau`` (the real trajectory: the weights learnt while masking with
that calibration), and its final state's budget moved (TV between the masked-token distribution and
uniform masking's) and KL to uniform are reported. The same final weights are then recalibrated at
every ``--taus`` (no retraining: an approximation for the other taus, whose own trajectories would
differ slightly) to show the curve. Shortened: only the first ``--examples`` training examples (the
corpus counts come from those too); nothing is fine-tuned.

    PYTHONPATH=$PWD python benchmarks/bench_softmax_tau.py --examples 1024 --threads 1
"""

from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from typhoon.analysis.kl.budget_spread import calibration_sweep
from typhoon.profiles import resolve
from typhoon.training import run as training_run


def pilot(task: str, tau: float, examples: int | None, threads: int, seed: int = 0,
          backbone: str = "minilm-l6") -> tuple[dict, pd.DataFrame]:
    config = resolve("cpu", dict(task=task, backbone=backbone, strategy="typhoon_softmax", seed=seed),
                     {"tau": tau, "max_train_examples": examples, "max_eval_examples": 64, "num_threads": threads})
    ctx = training_run.set_up(config, progress=False)
    started = time.perf_counter()
    one = training_run.phase_one(ctx)
    strategy, timing = one.strategy, one.timing
    diag = strategy.diagnostics()
    row = {"task": task, "train_tau": tau, "examples": len(ctx.data["train"]), "steps": timing["mlm_steps"],
           "wall_s": round(time.perf_counter() - started, 1), "precision": ctx.precision.name,
           "budget_moved": diag["budget_moved"], "kl_to_uniform": diag["kl_to_uniform"], "n_seen": diag["n_seen"]}
    return row, strategy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["mrpc", "cola"])
    parser.add_argument("--train-tau", type=float, default=0.5)
    parser.add_argument("--taus", nargs="+", type=float, default=[0.25, 0.5, 0.75, 1.0, 2.0])
    parser.add_argument("--examples", type=int, default=1024, help="first N training examples (0 = all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    args = parser.parse_args(argv)
    trained, swept = [], []
    for task in args.tasks:
        row, strategy = pilot(task, args.train_tau, args.examples or None, args.threads, backbone=args.backbone)
        trained.append(row)
        print(json.dumps(row), flush=True)
        sweep = calibration_sweep(strategy.weights, strategy.counts, strategy.p, seen=strategy.seen,
                                  methods=["softmax", "minmax", "rank"], deltas=[0.4], taus=args.taus)
        sweep.insert(0, "task", task)
        swept.append(sweep[["task", "method", "delta", "tau", "budget_moved", "kl_to_uniform"]])
    print("\ntrained at tau =", args.train_tau)
    print(pd.DataFrame(trained).to_string(index=False))
    print("\nthe final weights recalibrated (no retraining)")
    print(pd.concat(swept).to_string(index=False))


if __name__ == "__main__":
    main()
