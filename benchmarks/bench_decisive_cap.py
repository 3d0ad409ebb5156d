"""Which cap can a sequential study afford, and what power does it give? (issue 38: the design of ``decisive-mlm``)

For candidate looks/caps, each comparison of the ``decisive`` design is simulated at its planning sd (by default
the sd of its paired differences measured at the fresh-head study's cap, ``results/decisive/stats/verdicts.csv``
``power_sd``), with the design's alpha, Bonferroni split and O'Brien-Fleming spending
(:func:`typhoon.analysis.sequential.simulate_design`): the chance of a decision by the cap when the true
difference is 0 (``p_decided_at_0``), of "different" when it is the margin, and of each false verdict. The
whole study is then simulated jointly (comparisons independent) to count the cells it trains: at each look
the arms of the comparisons still open, per task, and their expected cost in cell-hours at the measured
cell times of one 2-core CPU kind (``--cell-minutes``: a plain cell, then a typhoon_task cell, which also
warms up a task model).

    python benchmarks/bench_decisive_cap.py                       # the candidates below
    python benchmarks/bench_decisive_cap.py --looks 3 6 10 13 16  # one design
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]


from typhoon.analysis import sequential  # noqa: E402
from typhoon.studies.sequential.design import study_design  # noqa: E402

CANDIDATES = ([3, 6, 10, 13, 16], [3, 6, 10, 15, 20], [3, 6, 10, 15, 20, 24], [3, 6, 10, 15, 20, 25, 30],
              [3, 6, 10, 15, 20, 30, 40])


def measured_sds(verdicts: Path) -> dict[tuple[str, str], float]:
    table = pd.read_csv(verdicts)
    return {(row.task, row.comparison): float(row.power_sd) for row in table.itertuples()}


def stop_seeds(design: sequential.Design, sd: float, margin: float, studies: int, seed: int) -> np.ndarray:
    """The seed count at which each simulated study of one comparison stops (true difference 0)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, sd, size=(studies, design.cap))
    csum, csq = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    stop = np.full(studies, design.cap)
    open_ = np.ones(studies, bool)
    table = sequential.design_boundaries(design)
    for k, bound in enumerate(table.itertuples()):
        n = bound.n_seeds
        mean = csum[:, n - 1] / n
        se = np.sqrt(np.maximum(csq[:, n - 1] - n * mean**2, 0.0) / (n - 1) / n)
        verdict = sequential._verdict(mean - bound.t_different * se, mean + bound.t_different * se,
                                      mean - bound.t_equivalent * se, mean + bound.t_equivalent * se, margin,
                                      k == len(table) - 1)
        done = open_ & (verdict != "continue")
        stop[done], open_ = n, open_ & ~done
    return stop


def evaluate(looks: list[int], sds: dict, studies: int, cell_minutes: tuple[float, float]) -> tuple[pd.DataFrame, dict]:
    base = study_design("decisive")
    design = sequential.Design(tuple(looks), base.design.alpha_different, base.design.alpha_equivalent,
                               base.design.spending)
    rows, stops = [], {}
    for task in base.tasks:
        margin = base.margins[task]
        for i, pair in enumerate(base.comparisons):
            name = base.name(pair)
            sd = sds[task, name]
            at_0 = sequential.simulate_design(design, 0.0, sd, margin, studies, seed=1)
            at_margin = sequential.simulate_design(design, margin, sd, margin, studies, seed=2)
            rows.append({"cap": design.cap, "task": task, "comparison": name, "planning_sd": sd,
                         "p_decided_at_0": at_0["p_decided"], "p_equivalent_at_0": at_0["p_equivalent"],
                         "p_different_at_margin": at_margin["p_different"],
                         "p_false_different_at_0": at_0["p_different"],
                         "p_false_equivalent_at_margin": at_margin["p_equivalent"],
                         "expected_seeds_at_0": at_0["expected_seeds"]})
            stops[task, pair] = stop_seeds(design, sd, margin, studies, seed=100 + i)
    # cells: for each study and task, seed s of an arm is trained when some open comparison needs it
    plain, task_model = cell_minutes
    cells = {"plain": 0.0, "typhoon_task": 0.0}
    boundaries = [0, *looks]
    for task in base.tasks:
        for arm in base.arms:
            pairs = [p for p in base.comparisons if arm in p]
            last = np.max([stops[task, p] for p in pairs], axis=0)  # seeds this arm trains, per study
            # the first 3 seeds of every arm are trained (the first look)
            count = np.maximum(last, boundaries[1])
            cells["typhoon_task" if arm == "typhoon_task" else "plain"] += float(count.mean())
    hours = (cells["plain"] * plain + cells["typhoon_task"] * task_model) / 60 / 2  # 2 cells at once
    return pd.DataFrame(rows), {"cap": design.cap, "looks": " ".join(map(str, looks)), "expected_cells": round(
        cells["plain"] + cells["typhoon_task"], 1), "expected_hours_2_workers": round(hours, 1), **{
        "max_cells": len(base.arms) * len(base.tasks) * design.cap}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--looks", type=int, nargs="+", help="one design's looks (default: the candidates)")
    parser.add_argument("--verdicts", type=Path, default=REPO / "results/decisive/stats/verdicts.csv")
    parser.add_argument("--studies", type=int, default=20_000)
    parser.add_argument("--cell-minutes", type=float, nargs=2, default=(7.0, 12.5),
                        help="minutes of a plain cell and of a typhoon_task cell at 2 workers' share (default: the "
                        "AMD EPYC with AVX512-BF16 of results/decisive: 6-8 and 12-13 min)")
    args = parser.parse_args(argv)
    sds = measured_sds(args.verdicts)
    summaries = []
    for looks in ([args.looks] if args.looks else CANDIDATES):
        table, summary = evaluate(looks, sds, args.studies, tuple(args.cell_minutes))
        under = table[table["p_decided_at_0"] < 0.8]
        summary["comparisons_below_0.8"] = len(under)
        summary["min_p_decided_at_0"] = round(float(table["p_decided_at_0"].min()), 3)
        summaries.append(summary)
        print(f"\nlooks {summary['looks']}:")
        print(table.drop(columns="cap").to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\n" + pd.DataFrame(summaries).to_string(index=False))


if __name__ == "__main__":
    main()
