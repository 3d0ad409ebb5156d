"""Start, wait for and kill a ``reproduce --profile smoke`` batch as a user or a lost machine would: the
helpers of tests/test_reproduce.py and tests/test_reproduce_concurrent.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO


def start(out: Path, *extra: str, faults=None, estimate: bool = False, stderr_apart: bool = False) -> subprocess.Popen:
    """``reproduce --profile smoke`` into ``out``, its output in a log file (``proc.log_path``); ``stderr_apart``:
    stderr in a file of its own (``proc.stderr_path``), not in the log. ``proc.started``: ``time.time()`` just before
    the process was started."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TYPHOON_FAULT_INJECT", None)
    if faults:
        env["TYPHOON_FAULT_INJECT"] = json.dumps(faults)
    # --no-estimate unless asked: the estimate's calibration (typhoon.runner.estimate; tested in test_estimate) would
    # add a minute to every invocation here that has cells to train
    cmd = [sys.executable, "-m", "typhoon", "reproduce", "--profile", "smoke", "--out", str(out),
           *([] if estimate else ["--no-estimate"]), *extra]
    log_path = out.parent / f"{out.name}-{time.monotonic_ns()}.log"
    stderr_path = log_path.with_suffix(".stderr") if stderr_apart else None
    with open(log_path, "w") as log, open(stderr_path or os.devnull, "w") as err:
        started = time.time()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=err if stderr_apart else subprocess.STDOUT,
                                start_new_session=True)
    proc.log_path, proc.stderr_path, proc.started = log_path, stderr_path, started
    return proc


def finish(proc: subprocess.Popen, timeout: float = 1200) -> tuple[int, str]:
    """Wait for the batch; its exit status and log. ``proc.ended``: ``time.time()`` once it had ended."""
    code = proc.wait(timeout=timeout)
    proc.ended = time.time()
    return code, proc.log_path.read_text()


def descendants(pid: int) -> list[int]:
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the batch and every process under it (its notebook kernels), as a lost machine would."""
    for pid in [proc.pid, *descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=60)


def wait_for(condition, proc: subprocess.Popen, timeout: float = 900, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the batch ended before {what}: {proc.log_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
