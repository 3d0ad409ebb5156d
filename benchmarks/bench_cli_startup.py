"""Wall time of the CLI's quick commands (``--help``, ``profiles``), each in a fresh interpreter.

    python benchmarks/bench_cli_startup.py [--repeats 5] [--repo PATH]

``--repo`` times another checkout's ``typhoon`` (e.g. the commit before the imports were made lazy).
Prints the median and the best of the repeats per command, and which heavy libraries the command imported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--help"], ["run", "--help"], ["reproduce", "--help"], ["profiles"])
HEAVY = ("torch", "transformers", "pandas", "papermill", "datasets")


def time_command(repo: Path, args: list[str], repeats: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "typhoon", *args], env=env, cwd=repo, check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def heavy_imports(repo: Path, args: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    code = ("import sys\nfrom typhoon.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(sorted({{n.split('.')[0] for n in sys.modules}} & {set(HEAVY)!r}))")
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=repo, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    print(f"typhoon from {args.repo}, python {sys.executable}, {os.cpu_count()} CPUs")
    for command in COMMANDS:
        times = time_command(args.repo, command, args.repeats)
        print(f"typhoon {' '.join(command):18s} median {statistics.median(times):5.2f} s  best {min(times):5.2f} s  "
              f"heavy imports: {heavy_imports(args.repo, command)}")


if __name__ == "__main__":
    main()
