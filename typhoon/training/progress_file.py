"""The live progress file of one run, which the run writes and the grid's monitor reads.

Each run writes its state to a small progress file beside its record,
``runs/<task>/<backbone>/<strategy>/.seed<k>.progress.json`` (:class:`ProgressFile`): phase (setup, mlm,
finetune, eval, write), epoch, step i/n within the phase, tokens per second in the phase, seconds since the
run started, and the writer's pid. It is written atomically, at most once a second, and removed when the
run ends; its name is not a record folder's, so it never counts as a record (``collect_results`` reads
``seed<k>/metrics.json`` only), and one a killed process left is removed by the next clean-up
(:func:`typhoon.runner.progress.remove_stale_progress`). Writing it is best effort: a progress file that
cannot be written never stops a run. The grid's side (reading, the monitor, reproduce.log) is
:mod:`typhoon.runner.progress`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from typhoon import atomic

WRITE_INTERVAL_S = 1.0  # progress file writes: at most one a second


def progress_path(run_dir: Path) -> Path:
    """The progress file of the run whose record goes to ``run_dir``."""
    run_dir = Path(run_dir)
    return run_dir.with_name(f".{run_dir.name}.progress.json")


class ProgressFile:
    """The live state of one run, written to :func:`progress_path` (see the module doc).

    ``note`` is cheap to call every step: it writes only when ``interval_s`` has passed since the last
    write, or when the phase changes. ``close`` removes the file. As a context manager it is written at once
    (phase ``setup``, until the run's first step) and removed when the block ends, however it ends.
    """

    def __init__(self, run_dir: Path, record_path: str, interval_s: float = WRITE_INTERVAL_S, clock=time.monotonic):
        self.path = progress_path(run_dir)
        self.record_path = record_path
        self.interval_s = interval_s
        self.clock = clock
        self.started = clock()
        self.phase: str | None = None
        self.phase_started = self.started
        self.rate_start: tuple[float, int] | None = None  # (time, tokens) of the phase's first update
        self.last_write: float | None = None

    def note(self, phase: str, *, step: int | None = None, steps: int | None = None, epoch: int | None = None,
               epochs: int | None = None, tokens: int | None = None) -> None:
        """Record the run's state; ``tokens``: tokens processed so far in this phase (for tokens/s)."""
        now = self.clock()
        changed = phase != self.phase
        if changed:
            self.phase, self.phase_started, self.rate_start = phase, now, None
        if tokens is not None and self.rate_start is None:
            # the rate counts from the phase's first update: a phase resumed after an evaluation carries
            # the tokens of its earlier epochs, which its new start time must not divide
            self.rate_start = (now, tokens)
        if not changed and self.last_write is not None and now - self.last_write < self.interval_s:
            return
        rate = None
        if tokens is not None and self.rate_start is not None and now > self.rate_start[0]:
            rate = (tokens - self.rate_start[1]) / (now - self.rate_start[0])
        state = {"pid": os.getpid(), "record_path": self.record_path, "phase": phase, "step": step, "steps": steps,
                 "epoch": epoch, "epochs": epochs, "tokens_per_s": rate or None,
                 "elapsed_s": now - self.started, "updated": time.time()}
        try:
            atomic.atomic_write_json(self.path, state)
        except OSError:
            return  # best effort: progress never stops a run (a full disk shows up when the record is written)
        self.last_write = now

    def __enter__(self) -> ProgressFile:
        self.note("setup")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass  # never written (its folder could not be made): nothing to remove
