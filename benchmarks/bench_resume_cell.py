"""Ctrl-C in the middle of a real cell's fine-tuning, then the rerun: does it go on from the saved state, how
soon does it train again, and is its record the uninterrupted one's?

    python benchmarks/bench_resume_cell.py [--out /tmp/resume-cell] [--backbone minilm-l6-mlm] [--examples 256]

Three runs of one cell (``typhoon run``, cpu profile, MRPC, Typhoon, seed 0, its data cut by ``--set``, one
thread), each a real process:

1. uninterrupted, into ``<out>/uninterrupted``;
2. into ``<out>/resumed``, sent SIGINT (a terminal's Ctrl-C) once its second fine-tuning epoch has begun;
   the state saved after the first epoch must be there afterwards, and no record;
3. the same command again: it must say it resumes, and its record must equal the uninterrupted one file by
   file (``metrics.json`` but its wall times and speeds: ``tests/test_resume.py``'s comparison).

Printed: the exit status and time of the stop, the time from the rerun's start to its first fine-tuning bar
(the state loaded, the MLM phase and the first epoch skipped) against the uninterrupted run's time to the
same point, and the files that differ (none is the pass). Exit status 0 when they are equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from test_resume import record_differences  # noqa: E402  (the test's comparison, one home)

from typhoon.profiles import resolve  # noqa: E402
from typhoon.records import run_record  # noqa: E402

SECOND_EPOCH = "fine-tune epoch 2"
FIRST_FT_BAR = re.compile(r"fine-tune epoch \d")
FIRST_FT_EPOCH = re.compile(r"fine-tune epoch (\d)")


class Watched:
    """A ``typhoon run`` process whose merged output is read as it comes, with the time each pattern first showed."""

    def __init__(self, args: list[str], patterns: dict[str, re.Pattern]):
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
        self.started = time.perf_counter()
        self.seen: dict[str, float] = {}
        self.text = ""
        self.proc = subprocess.Popen([sys.executable, "-m", "typhoon", "run", *args], cwd=REPO, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._patterns = patterns
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while chunk := self.proc.stdout.read1(4096):
            self.text += chunk.decode(errors="replace")
            for name, pattern in self._patterns.items():
                if name not in self.seen and pattern.search(self.text):
                    self.seen[name] = time.perf_counter() - self.started

    def wait(self) -> int:
        code = self.proc.wait()
        self._reader.join()
        return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the three runs (default: a temp folder)")
    parser.add_argument("--backbone", default="minilm-l6-mlm")
    parser.add_argument("--examples", type=int, default=256, help="training examples (dev: a quarter)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="typhoon-resume-cell-"))
    cell = dict(task="mrpc", backbone=args.backbone, strategy="typhoon", seed=0)
    settings = {"max_train_examples": args.examples, "max_eval_examples": max(16, args.examples // 4),
                "num_threads": 1, "ft_epochs": 2}
    config = resolve("cpu", cell, settings)
    command = ["--profile", "cpu", "--task", "mrpc", "--backbone", args.backbone, "--strategy", "typhoon", "--seed", "0"]
    command += [word for key, value in settings.items() for word in ("--set", f"{key}={value}")]
    patterns = {"first_ft": FIRST_FT_BAR, "second_epoch": re.compile(SECOND_EPOCH), "resuming": re.compile(r"resuming after")}

    uninterrupted = Watched([*command, "--out", str(out / "uninterrupted")], patterns)
    assert uninterrupted.wait() == 0, uninterrupted.text[-3000:]
    print(f"uninterrupted: {time.perf_counter() - uninterrupted.started:.1f} s; first fine-tuning bar after "
          f"{uninterrupted.seen['first_ft']:.1f} s, second epoch after {uninterrupted.seen['second_epoch']:.1f} s")

    stopped = Watched([*command, "--out", str(out / "resumed")], patterns)
    while "second_epoch" not in stopped.seen and stopped.proc.poll() is None:
        time.sleep(0.05)
    sent = time.perf_counter()
    stopped.proc.send_signal(signal.SIGINT)
    code = stopped.wait()
    run_dir = out / "resumed" / config.relative_dir()
    state = run_record.resume_state_path(run_dir)
    print(f"Ctrl-C in fine-tuning epoch 2: exit {code} after {time.perf_counter() - sent:.1f} s; "
          f"state kept: {state.exists()} ({state.stat().st_size / 1e6:.1f} MB)" if state.exists() else
          f"Ctrl-C in fine-tuning epoch 2: exit {code}; no state kept")
    print(f"  record written: {run_record.is_complete(run_dir, config)}")

    rerun = Watched([*command, "--out", str(out / "resumed")], patterns)
    assert rerun.wait() == 0, rerun.text[-3000:]
    print(f"rerun: {time.perf_counter() - rerun.started:.1f} s; says it resumes: {'resuming' in rerun.seen}; "
          f"first fine-tuning bar after {rerun.seen.get('first_ft', float('nan')):.1f} s "
          f"(epoch {FIRST_FT_EPOCH.search(rerun.text).group(1)})")
    print(f"  state removed with the record: {not state.exists()}")
    differ = record_differences(out / "uninterrupted" / config.relative_dir(), run_dir)
    print(f"record against the uninterrupted one: {'identical (file by file, metrics.json but its times)' if not differ else 'DIFFERS: ' + ', '.join(differ)}")
    print(f"outputs: {out}")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
