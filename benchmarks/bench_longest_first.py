"""Does handing out the longest cells first shorten a grid? The smoke grid's cells on two workers, in the grid's
order against the study loop's order (longest first: :func:`typhoon.runner.study.longest_first`), A/B in one
process, the arms interleaved.

    python benchmarks/bench_longest_first.py [--profile smoke] [--workers 2] [--repeats 2] [--cells N]
        [--set KEY=VALUE ...]

Each arm runs the profile's cells (the first ``--cells``, with ``--set``'s overrides, if given; no analysis, no estimate, no reuse of records) into a fresh temporary folder
through :func:`typhoon.studies.profile_study.reproduce` on the local pool; the grid-order arm replaces the loop's order by
the cells' own. Prints each run's wall time, the median per arm and their ratio. The smoke grid's one MiniLM cell
comes last in its grid: in grid order one worker runs it alone while the other waits. Name the CPU and its load
beside the figures; compare only arms of one run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from typhoon.config import parse_overrides
from typhoon.profiles import get_profile
from typhoon.runner import study
from typhoon.studies.profile_study import reproduce


def one_grid(profile: str, workers: int, order: str, configs: list) -> float:
    """The wall time of one run of the profile's cells ``configs``, in ``order`` ('grid' or 'longest first')."""
    loop_order = study.longest_first
    if order == "grid":
        study.longest_first = list  # the cells as the grid lists them
    try:
        with tempfile.TemporaryDirectory(prefix=f"bench-order-{order.replace(' ', '-')}-") as out:
            started = time.perf_counter()
            summary = reproduce(profile, Path(out) / profile, workers=workers, configs=configs, analysis=False,
                                      reuse=False, estimate=False)
            seconds = time.perf_counter() - started
            if not summary.ok:
                raise SystemExit(f"a cell failed in the {order} arm:\n{summary.table()}")
            return seconds
    finally:
        study.longest_first = loop_order


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cells", type=int, help="only the grid's first N cells")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    configs = get_profile(args.profile).grid(parse_overrides(args.set))[: args.cells]
    times: dict[str, list[float]] = {"grid": [], "longest first": []}
    for repeat in range(args.repeats):
        for order in (("grid", "longest first") if repeat % 2 == 0 else ("longest first", "grid")):
            times[order].append(one_grid(args.profile, args.workers, order, configs))
            print(f"repeat {repeat + 1}: {order}: {times[order][-1]:.1f} s", flush=True)
    grid, longest = statistics.median(times["grid"]), statistics.median(times["longest first"])
    print(f"\n{args.profile}, {args.workers} workers, medians of {args.repeats}: grid order {grid:.1f} s, "
          f"longest first {longest:.1f} s, ratio {longest / grid:.2f}")


if __name__ == "__main__":
    main()
