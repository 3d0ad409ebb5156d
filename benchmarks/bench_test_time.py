"""Where a test run's time goes: a pytest log made with ``--durations=0``, summed per test file and per tier.

Issue 36 asks CI to take at most 20 min on a 2-core AVX2 CPU and to say where the time went. Run the
suite as CI does, with every duration printed, then read its log here::

    CI=true HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 .venv/bin/python -m pytest -q -p no:cacheprovider \\
        --durations=0 > full.log 2>&1
    .venv/bin/python benchmarks/bench_test_time.py full.log [--top 15]

It prints the wall time pytest reported, the sum of the setup/call/teardown phases it listed, that sum per
test file (largest first, with its share) and the slowest single phases. The phases pytest lists under
0.005 s are not printed by it and not counted here.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

PHASE = re.compile(r"^(?P<seconds>[\d.]+)s (?P<phase>setup|call|teardown)\s+(?P<test>(?P<file>[^:\s]+)::\S+)")
TOTAL = re.compile(r" in (?P<seconds>[\d.]+)s(?: \(|$)")


def read_log(path: Path) -> tuple[list[tuple[float, str, str, str]], float | None]:
    """The (seconds, phase, test, file) rows of a ``--durations`` log, and pytest's wall time (None if absent)."""
    rows, total = [], None
    for line in path.read_text(errors="replace").splitlines():
        if match := PHASE.match(line):
            rows.append((float(match["seconds"]), match["phase"], match["test"], match["file"]))
        elif ("passed" in line or "failed" in line) and (found := TOTAL.search(line)):
            total = float(found["seconds"])
    if not rows:
        raise ValueError(f"{path}: no durations in it (run pytest with --durations=0)")
    return rows, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="a pytest log made with --durations=0")
    parser.add_argument("--top", type=int, default=15, help="how many files and phases to list")
    args = parser.parse_args(argv)
    try:
        rows, total = read_log(args.log)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    listed = sum(seconds for seconds, *_ in rows)
    per_file = Counter()
    for seconds, _, _, file in rows:
        per_file[file] += seconds
    print(f"pytest wall time: {total:.0f} s" if total is not None else "pytest wall time: not in the log")
    print(f"listed phases: {listed:.0f} s over {len(per_file)} files")
    print("\nper file (s, share of the listed time)")
    for file, seconds in per_file.most_common(args.top):
        print(f"{seconds:8.1f}  {100 * seconds / listed:5.1f} %  {file}")
    print("\nslowest phases (s)")
    for seconds, phase, test, _ in sorted(rows, reverse=True)[:args.top]:
        print(f"{seconds:8.1f}  {phase:8s}  {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
