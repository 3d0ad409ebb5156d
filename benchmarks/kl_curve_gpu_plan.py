"""The GPU plan of the kl-original second addendum's curves (scripts/gpu_curve.sh): what each run needs, and how far
each gets in a time budget at a given GPU throughput.

    python benchmarks/kl_curve_gpu_plan.py [--budget-s 450] [--slots 12] [--steps-per-s 150 300 600 1200]
    python benchmarks/kl_curve_gpu_plan.py --from-summary DEST/curve_summary.txt   # the throughput a run measured

Each run's MLM steps come from the bundled GLUE training files (one step a batch of 16) and the design's planned
epochs. The GPU is modelled as sharing an aggregate rate of steps per second equally among the runs still going
(every run in a slot of its own, all at once; a run at its plan frees its share). That rate is the unknown: a
6-layer encoder at batch 16 is bound by kernel launches, not arithmetic, so it is given here as a range, and
``--from-summary`` reads the rate the curve command itself measured (the sum of its runs' steps per second).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from typhoon.data.glue_files import get_task, locate_glue, read_glue_split
from typhoon.studies.kl_original.design import CURVE_EPOCHS, CURVES, SEEDS, TASKS

BATCH = 16  # the 2023 recipe's batch (RECIPE_2023), every curve's
ADDED = ("all_plus", "all_gpu")


def steps_per_epoch(task: str) -> int:
    """MLM steps of one epoch over the task's bundled training file."""
    spec, source = get_task(task), locate_glue(task)
    rows = read_glue_split(spec, source.folder / "train.tsv")
    return math.ceil(len(next(iter(rows.values()))) / BATCH)


def plan(per_epoch: dict[str, int], steps_per_s: float, budget_s: float) -> list[dict]:
    """Each run's epochs reached in ``budget_s`` when ``steps_per_s`` is shared equally by the runs still going."""
    runs = [{"curve": c, "task": t, "seed": s, "need": per_epoch[t] * CURVE_EPOCHS[t], "done": 0.0}
            for c in ADDED for t in TASKS for s in SEEDS]
    clock = 0.0
    while clock < budget_s:
        going = [r for r in runs if r["done"] < r["need"]]
        if not going:
            break
        share = steps_per_s / len(going)
        until = min(min(r["need"] - r["done"] for r in going) / share, budget_s - clock)
        clock += until
        for r in going:
            r["done"] = min(r["need"], r["done"] + share * until)
            if r["done"] >= r["need"] - 1e-6:
                r["done"], r["finished_s"] = r["need"], clock
    for r in runs:
        r["epochs"] = int(r["done"] // per_epoch[r["task"]])
        r.setdefault("finished_s", None)
    return runs


def measured_rate(summary: Path) -> float:
    """The aggregate steps per second of a curve command's summary (its runs' rates summed)."""
    rates = [float(m.group(1)) for m in re.finditer(r"^curve_\S+\s+\S+\s+\S+\s+\S+\s+([\d.]+)", summary.read_text(), re.M)]
    if not rates:
        raise ValueError(f"{summary}: no run line with a steps/s figure")
    return sum(rates)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-s", type=float, default=450, help="seconds the curves may run (default 450)")
    parser.add_argument("--steps-per-s", type=float, nargs="+", default=[150, 300, 600, 1200],
                        help="aggregate MLM steps per second of the GPU, all runs together (default 150 300 600 1200)")
    parser.add_argument("--from-summary", type=Path, help="read the rate from a curve command's curve_summary.txt")
    args = parser.parse_args(argv)
    rates = [measured_rate(args.from_summary)] if args.from_summary else args.steps_per_s
    per_epoch = {task: steps_per_epoch(task) for task in TASKS}
    need = {c: sum(per_epoch[t] * CURVE_EPOCHS[t] for t in TASKS) * len(SEEDS) for c in ADDED}
    print(f"steps per epoch (batch {BATCH}): " + ", ".join(f"{t} {n}" for t, n in per_epoch.items())
          + "; to the plan: " + ", ".join(f"'{c}' {n:,} steps ({CURVES[c].folder}/)" for c, n in need.items())
          + f", {sum(need.values()):,} in all; {len(ADDED) * len(TASKS) * len(SEEDS)} runs, one slot each")
    print(f"{'steps/s':>8s} {'all in':>8s}  epochs reached in {args.budget_s:.0f} s (per run; plan mrpc "
          f"{CURVE_EPOCHS['mrpc']}, cola {CURVE_EPOCHS['cola']})")
    for rate in rates:
        runs = plan(per_epoch, rate, args.budget_s)
        reach = {(c, t): min(r["epochs"] for r in runs if (r["curve"], r["task"]) == (c, t)) for c in ADDED for t in TASKS}
        print(f"{rate:8.0f} {sum(need.values()) / rate / 60:6.1f} m  "
              + "; ".join(f"{c} {t} {reach[c, t]}" for c in ADDED for t in TASKS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
