"""Expected seeds of the decisive study's sequential design against the fixed design with the same error
rates (alpha 0.005 per comparison for each decision) and the same power at the planning sd (the smallest
fixed n that decides with >= 80 % at difference 0 and at the margin), per task, at several true
differences; then the cells of the whole study when every comparison's truth is the measured one.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_sequential.py [--studies 20000]

``--studies``: simulated studies per design and true difference (fewer: faster, noisier).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from typhoon.analysis import sequential
from typhoon.studies.sequential import design as decisive_design

STUDIES = 20_000


def fixed_seeds(study: decisive_design.StudyDesign, sd: float, margin: float, power: float,
                studies: int = STUDIES) -> int:
    """The smallest one-look design (plain t test + TOST at the same alphas) with the registered power."""
    for n in range(3, 200):
        fixed = sequential.fixed_design(n, study.design)
        if (sequential.simulate_design(fixed, 0.0, sd, margin, studies, 1)["p_equivalent"] >= power and
                sequential.simulate_design(fixed, margin, sd, margin, studies, 2)["p_different"] >= power):
            return n
    raise RuntimeError("no fixed design below 200 seeds")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=STUDIES, help=f"simulated studies each (default {STUDIES})")
    studies = parser.parse_args(argv).studies
    started = time.perf_counter()
    study = decisive_design.study_design("decisive")
    rows = []
    for task in study.tasks:
        sd, margin = study.planning_sd[task], study.margins[task]
        n_fixed = fixed_seeds(study, sd, margin, study.power, studies)
        for label, delta, scale in [("0", 0.0, 1), ("margin/2", margin / 2, 1), ("margin", margin, 1),
                                    ("2 x margin", 2 * margin, 1), ("0, sd / 2", 0.0, 0.5)]:
            seq = sequential.simulate_design(study.design, delta, sd * scale, margin, studies, 3)
            fix = sequential.simulate_design(sequential.fixed_design(n_fixed, study.design), delta, sd * scale,
                                             margin, studies, 3)
            rows.append({"task": task, "true difference": label, "fixed seeds": n_fixed,
                         "sequential E[seeds]": seq["expected_seeds"], "sequential p90": seq["seeds_p90"],
                         "P(decided) sequential": seq["p_decided"], "P(decided) fixed": fix["p_decided"]})
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
