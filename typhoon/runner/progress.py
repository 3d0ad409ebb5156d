"""Live progress of running cells, and the log of what a ``reproduce`` did.

Each run writes its state to a small progress file beside its record
(:class:`typhoon.training.progress_file.ProgressFile`, written by the run); one a killed process left is
removed by the next clean-up (:func:`remove_stale_progress`).

The batch polls the progress files of the cells it has not finished (:class:`GridMonitor`): a file there
means the cell is running, wherever (a local kernel, a Dask worker with the output folder on a shared file
system). In a terminal the grid bar's text shows the running cells, redrawn once a second; elsewhere (CI,
output piped to a log) it prints a line when a cell ends and, at most every 30 s, a line with the running
cells' state when it changed -- never a redraw storm.

:class:`RunLog` appends timestamped lines to ``<out>/reproduce.log``: the start (profile, cells, the
command), each cell's outcome and time (a failure with its error, a resumed cell with where it went on from),
a stop, the analysis, the end.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from typhoon.records import pid_alive, read_json
from typhoon.training import progress_path

if TYPE_CHECKING:
    from typhoon.runner.cells import Cell

LOG_LINE_INTERVAL_S = 30.0  # without a terminal: a line about the running cells at most this often
POLL_INTERVAL_S = 1.0  # how often the batch reads the progress files


def read_progress(path: Path) -> dict | None:
    """A progress file's state, or None when there is none (or it cannot be read)."""
    return read_json(path)


def describe(state: dict) -> str:
    """One progress state in a few words, e.g. ``mlm 1/2 step 12/40 · 1,234 tok/s · 35 s``."""
    parts = [state.get("phase") or "?"]
    if state.get("epochs"):
        parts[0] += f" {state.get('epoch')}/{state['epochs']}"
    if state.get("steps"):
        parts[0] += f" step {state.get('step')}/{state['steps']}"
    if state.get("tokens_per_s"):
        parts.append(f"{state['tokens_per_s']:,.0f} tok/s")
    if state.get("elapsed_s") is not None:
        parts.append(f"{state['elapsed_s']:.0f} s")
    return " · ".join(parts)


def remove_stale_progress(out_dir: Path) -> None:
    """Remove progress files whose writer is gone (killed, or stopped before it could remove its own)."""
    for path in Path(out_dir, "runs").glob("*/*/*/.seed*.progress.json"):
        state = read_progress(path)
        if state is None or not pid_alive(state.get("pid")):
            path.unlink(missing_ok=True)


class GridMonitor:
    """What the batch shows while cells run (see the module doc).

    ``todo``: the cells to run; ``skipped``: how many more the grid has, complete already. ``poll()``
    reads the progress files of the cells not yet finished; ``finished(row)`` notes a cell's outcome.
    ``tty`` None: decide from ``stream.isatty()``.
    """

    def __init__(self, out_dir: Path, todo: list[Cell], skipped: int, stream: TextIO | None = None,
                 tty: bool | None = None, line_interval_s: float = LOG_LINE_INTERVAL_S, clock=time.monotonic):
        self.out_dir = Path(out_dir)
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.total, self.done, self.failed = len(todo) + skipped, skipped, 0
        self.pending = {cell.path: self.out_dir / cell.path for cell in todo}
        self.line_interval_s, self.clock = line_interval_s, clock
        self.last_line: float | None = None
        self.last_text = ""
        self.lock = threading.Lock()
        self.bar = None
        if self.tty:
            from tqdm.std import tqdm

            self.bar = tqdm(total=self.total, initial=skipped, desc="grid", unit="cell", file=self.stream,
                            dynamic_ncols=True)
        else:
            self._print(f"grid: {self.total} cells, {skipped} already complete, {self.total - skipped} to run")

    def running(self) -> dict[str, dict]:
        """The state of each cell that has a progress file now, by record path."""
        states = {}
        for record_path, run_dir in list(self.pending.items()):
            state = read_progress(progress_path(run_dir))
            if state is not None:
                states[record_path] = state
        return states

    def status_text(self) -> str:
        return "; ".join(f"{path.removeprefix('runs/')}: {describe(state)}" for path, state in self.running().items())

    def poll(self) -> None:
        text = self.status_text()
        with self.lock:
            if self.bar is not None:
                self.bar.set_postfix_str(text, refresh=True)
                return
            now = self.clock()
            if text and text != self.last_text and (self.last_line is None or now - self.last_line >= self.line_interval_s):
                self._print(f"grid: {self.done}/{self.total} done; running {text}")
                self.last_line, self.last_text = now, text

    def finished(self, row: dict) -> None:
        with self.lock:
            self.pending.pop(row["record_path"], None)
            self.done += 1
            self.failed += row["status"] == "failed"
            if self.bar is not None:
                self.bar.update(1)
                self.bar.set_postfix_str(self.status_text(), refresh=True)
            else:
                self._print(f"grid: {self.done}/{self.total} done ({self.failed} failed): {row['status']} "
                            f"{row['record_path']} in {row['seconds']:.0f} s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def _print(self, line: str) -> None:
        say(line, self.stream)


_SAY = threading.Lock()


def say(line: str, stream: TextIO | None = None) -> None:
    """Print one whole line, from any thread. ``print`` writes the text and its newline as two writes, so two
    notebooks' threads announcing themselves at once merge their lines in a log that is not a terminal
    (``analysis: 00_setup.ipynbanalysis: 01_...``): here the line and its newline are one write, under a lock."""
    stream = stream if stream is not None else sys.stdout
    with _SAY:
        stream.write(line + "\n")
        stream.flush()


class RunLog:
    """``<out>/reproduce.log``: one timestamped line per event, appended and flushed as it happens, so the
    log says what happened even when the process is killed. Earlier invocations' lines stay above."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def write(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        lines = message.rstrip("\n").split("\n")
        text = "".join(f"{stamp} {lines[0]}\n" if i == 0 else f"    {line}\n" for i, line in enumerate(lines))
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(text)

    def cell(self, row: dict) -> None:
        line = f"cell {row['status']}: {row['record_path']} ({row['seconds']:.1f} s)"
        if row.get("resumed"):
            line += f", resumed after {row['resumed']}"
        if row["status"] == "failed":
            line += f"\n{row['error']}"  # the traceback is the record's traceback.txt
        self.write(line)
