"""How long ``reproduce`` and ``run`` take to exit after Ctrl-C / SIGTERM, with a cell training.

    python benchmarks/bench_stop_latency.py [--repeats 3] [--out /tmp/stop-latency] [--commands reproduce run]

Each repeat starts the real command on the smoke profile (shrunk with ``--set``; ``reproduce`` without its
estimate, which would only delay the first cell), waits until a cell's progress file says it is in its MLM or
fine-tuning phase, sends the signal to the command's process alone (as a terminal's Ctrl-C reaches the batch
but not the worker processes in their own sessions), and times the exit.
Prints each time, the exit status and whether any process the command started is still alive.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from typhoon.records import run_record

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--set", "max_train_examples=64", "--set", "max_eval_examples=32"]


def stop_once(argv: list[str], out: Path, signum: int) -> tuple[float, int, int]:
    """(seconds from the signal to the exit, exit status, processes left alive)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "typhoon", *argv, "--out", str(out), *SMALL], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{argv[0]} ended before a cell trained (exit {proc.returncode})")
        states = [run_record.read_json(p) for p in out.glob("runs/*/*/*/.seed*.progress.json")]
        if any(s and s.get("phase") in ("mlm", "finetune") for s in states):
            break
        time.sleep(0.1)
    children = psutil.Process(proc.pid).children(recursive=True)
    started = time.monotonic()
    os.kill(proc.pid, signum)
    code = proc.wait(timeout=60)
    seconds = time.monotonic() - started
    left = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    return seconds, code, len(left)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--commands", nargs="+", choices=["reproduce", "run"], default=["reproduce", "run"],
                        help="which commands to stop (default both)")
    args = parser.parse_args(argv)
    scratch = Path(args.out or tempfile.mkdtemp(prefix="stop-latency-"))
    cases = [("reproduce", ["reproduce", "--profile", "smoke", "--no-analysis", "--no-estimate"], signal.SIGINT),
             ("run", ["run", "--task", "mrpc", "--backbone", "tiny-random", "--profile", "smoke"], signal.SIGTERM)]
    for name, argv, signum in [case for case in cases if case[0] in args.commands]:
        times = []
        for i in range(args.repeats):
            seconds, code, left = stop_once(argv, scratch / f"{name}-{i}", signum)
            times.append(seconds)
            print(f"{name} {signal.Signals(signum).name}: exit {code} after {seconds:.2f} s, {left} processes left",
                  flush=True)
        print(f"{name}: median {statistics.median(times):.2f} s, max {max(times):.2f} s over {args.repeats}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
