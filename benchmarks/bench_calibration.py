"""Cost of Typhoon's recalibration at BERT's vocabulary size (V = 30522), which runs after every MLM step.

Heavy-tailed weights (Student t, 3 degrees of freedom) with 30 % of the types unseen and Zipf counts, as
in tests/test_calibration.py. Times, median over ``--repeats``:

1. ``calibrate``: preference + one sort + the budget p (what ``TyphoonMasking.recalibrate`` does);
2. ``coefficients``: the (k, beta, floor) of a batch of 32 per-row budgets (a mask schedule), no sort;
3. ``solve``: the probabilities of every type for one more budget.

    .venv/bin/python benchmarks/bench_calibration.py [--repeats 50] [--delta 0.4]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from typhoon.masking.calibration import BudgetSolver, calibrate, preference

VOCAB = 30522


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--delta", type=float, default=0.4)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    counts = rng.zipf(1.3, size=VOCAB).clip(max=10_000)
    weights = rng.standard_t(3, size=VOCAB)
    weights[rng.random(VOCAB) < 0.3] = np.nan
    solver = BudgetSolver(preference(weights, "minmax", args.delta), counts)
    rates = rng.random(32)
    print(f"V = {VOCAB}, delta = {args.delta}, median of {args.repeats}")
    print(f"calibrate (preference, sort, budget): {median_ms(lambda: calibrate(weights, counts, 0.15, delta=args.delta), args.repeats):7.2f} ms")
    print(f"coefficients of 32 per-row budgets:   {median_ms(lambda: solver.coefficients(rates), args.repeats):7.3f} ms")
    print(f"solve one more budget:                {median_ms(lambda: solver.solve(0.3), args.repeats):7.2f} ms")


if __name__ == "__main__":
    main()
