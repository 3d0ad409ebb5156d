"""Seed statistics (typhoon/analysis/pairwise.py): cost of ASO and of a comparisons table, and what the bootstrap CI
of the mean paired difference is worth with the study's few seeds.

    python benchmarks/bench_seed_stats.py [--repeats 5] [--coverage-reps 1000] [--aso-iterations 1000]

1. ASO epsilon_min, 5 scores a side, 1000 bootstrap iterations (``--aso-iterations``): ``stats.aso_epsilon_min``
   against ``deepsig.aso`` (same seed; the two numbers must agree), median seconds and the ratio.
2. ``stats.paired_comparisons`` with its defaults (ASO both ways at 1000 iterations, percentile
   bootstrap with 9999 resamples) on a 30-comparison table: 5 task/backbone cells x 4 strategies x 5 seeds.
3. Monte Carlo spread of epsilon_min over 20 bootstrap seeds, near the tau = 0.2 threshold, at 200
   and 1000 iterations (fewer with fewer ``--aso-iterations``).
4. Coverage of 95% intervals for the mean of n normal paired differences (n = 3, 5, 10): the t
   interval, BCa and percentile bootstrap (``--coverage-reps`` data sets each).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import pandas as pd
from scipy import stats as st

from typhoon.analysis import pairwise, significance

TY = np.array([0.842, 0.861, 0.855, 0.849, 0.870])
RA = np.array([0.851, 0.858, 0.860, 0.838, 0.866])


def median_s(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def aso_speed(repeats: int, iterations: int = 1000) -> None:
    import deepsig

    def ours():
        return significance.aso_epsilon_min(TY, RA, iterations=iterations, seed=0)

    def theirs():
        return deepsig.aso(TY, RA, num_bootstrap_iterations=iterations, seed=0, num_jobs=1, show_progress=False)

    assert abs(ours() - theirs()) < 1e-12, (ours(), theirs())
    t_ours, t_theirs = median_s(ours, repeats), median_s(theirs, max(1, repeats // 2))
    print(f"ASO, 5 v 5 scores, {iterations} iterations: stats.aso_epsilon_min {t_ours * 1e3:.1f} ms, "
          f"deepsig.aso {t_theirs * 1e3:.0f} ms ({t_theirs / t_ours:.0f}x); epsilon_min = {ours():.6f} both")


def table_speed(repeats: int, iterations: int = 1000) -> None:
    rng = np.random.default_rng(0)
    rows = []
    for cell in range(5):
        base = rng.normal(0.8, 0.02, 5)
        for strategy in ("typhoon", "random", "whole_word", "span"):
            for seed, v in enumerate(base + rng.normal(0, 0.01, 5)):
                rows.append(dict(task="mrpc", backbone=f"b{cell}", strategy=strategy, seed=seed, status="ok",
                                 primary_value=float(v)))
    results = pd.DataFrame(rows)
    n = len(pairwise.paired_comparisons(results, aso_iterations=1))
    t = median_s(lambda: pairwise.paired_comparisons(results, aso_iterations=iterations), repeats)
    print(f"paired_comparisons, {n} comparisons, ASO 2 x {iterations} iterations, percentile 9999: {t:.2f} s")


def aso_spread(most: int = 1000) -> None:
    for iterations in sorted({min(200, most), most}):
        eps = [significance.aso_epsilon_min(TY + 0.01, RA, iterations=iterations, seed=s * iterations) for s in range(20)]
        print(f"epsilon_min(TY + 0.01, RA) over 20 bootstrap seeds, {iterations} iterations: "
              f"mean {np.mean(eps):.3f}, sd {np.std(eps, ddof=1):.3f}")


def coverage(reps: int) -> None:
    rng = np.random.default_rng(1)
    for n in (3, 5, 10):
        hits = {"t": 0, "BCa": 0, "percentile": 0}
        for rep in range(reps):
            d = rng.normal(0.0, 1.0, n)  # true mean 0
            lo, hi = st.t.interval(0.95, n - 1, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(n))
            hits["t"] += lo <= 0 <= hi
            for method in ("BCa", "percentile"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    lo, hi, _ = significance.bootstrap_mean_ci(d, 0.95, method, seed=rep)
                hits[method] += lo <= 0 <= hi
        print(f"coverage of nominal 95% CIs, n = {n} normal differences, {reps} data sets: "
              + ", ".join(f"{k} {v / reps:.3f}" for k, v in hits.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--coverage-reps", type=int, default=1000)
    parser.add_argument("--aso-iterations", type=int, default=1000,
                        help="ASO's bootstrap iterations (default 1000, the table's default)")
    args = parser.parse_args(argv)
    aso_speed(args.repeats, args.aso_iterations)
    table_speed(args.repeats, args.aso_iterations)
    aso_spread(args.aso_iterations)
    coverage(args.coverage_reps)


if __name__ == "__main__":
    main()
