"""Long-lived worker processes that run a grid's cells as calls: one process per worker, many cells each.

A worker (:class:`WorkerProcess`) is a spawned Python process that imports the training stack once and then
runs the calls it is sent, one at a time (:func:`worker_calls`: a cell of any kind,
:func:`typhoon.runner.cells.run_cell`; the estimate's calibration). A cell costs its own set-up and training: no Jupyter kernel, no imports, no CUDA
start per cell. One process per worker keeps the cells apart: a crash or an out-of-memory kill ends one worker,
whose cell is recorded failed, and a new worker takes its place; the grid goes on.

:class:`WorkerPool` is the local executor (:class:`typhoon.runner.executor.CellExecutor`): ``workers`` worker
processes, each with its device and torch threads (:func:`slots_for`: on the CPU the cores shared out, on GPUs
several workers per device), taking queued cells as they become free.

Stopping: a worker runs in a session of its own, so a terminal's Ctrl-C reaches the batch only, which stops
the workers in order (SIGTERM: the running run raises ``Interrupted``, leaves its resume state and no record;
SIGKILL after a grace period). A worker whose batch died (killed, say) stops itself the same way within a
second. :func:`run_cell_in_worker_process` gives a Dask worker (:mod:`typhoon.runner.dask_executor`) a worker
process of its own, so cells on a cluster run and stop the same way.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for_any
from pathlib import Path

from typhoon import machine
from typhoon.config import RunConfig
from typhoon.runner import stop
from typhoon.runner.cells import Cell, cell_row, error_line
from typhoon.runner.executor import CellExecutor

SPAWN = multiprocessing.get_context("spawn")  # a fresh interpreter: CUDA and torch's threads survive no fork

PARENT_CHECK_S = 0.5  # how often a worker looks whether its batch is still there


@dataclass(frozen=True)
class Slot:
    """Where a worker runs its cells: its device (None: the cell's own, ``auto``) and torch threads (None:
    the cell's own setting)."""

    device: str | None = None
    threads: int | None = None

    def apply(self, cell: Cell) -> Cell:
        """``cell`` with the worker's execution fields (where it runs, never what it computes)."""
        changes = {}
        if self.device is not None:
            changes["device"] = self.device
        if self.threads is not None and cell.config.num_threads is None:
            changes["num_threads"] = self.threads
        return cell.placed(**changes)


def slots_for(workers: int, gpus: list[str]) -> list[Slot]:
    """The slots of ``workers`` workers on this machine: on GPUs the devices taken in turn, on the CPU none; the
    usable cores shared out as torch threads when several workers share them (two 1-thread cells on 2 cores
    finish about 1.25x sooner than one 2-thread cell after the other: a small model's operations do not split
    well across threads), else each cell's own setting."""
    threads = max(1, machine.usable_cores() // workers) if workers > 1 else None
    if gpus:
        return [Slot(gpus[i % len(gpus)], threads) for i in range(workers)]
    return [Slot(None, threads) for _ in range(workers)]


def choose_workers(requested: int | None, profile_workers: int, configs: list[RunConfig]) -> tuple[int, str | None]:
    """How many cells run at once, and a note saying why when it is not what was asked. On the CPU:
    :func:`typhoon.machine.choose_workers` (the profile's ``workers``, capped at the usable cores). On GPUs: as
    many per device as its free memory holds cells of the grid's largest (:func:`typhoon.runner.cell_work.
    cell_memory_gib`) and the host's cores can feed (one core each, one kept for the batch); ``--workers``
    overrides, lowered with a message where the devices cannot hold that many: never an out-of-memory mid-grid."""
    gpus = machine.gpu_devices()
    if not gpus:
        return machine.choose_workers(requested, profile_workers)
    from typhoon.models import load_backbone
    from typhoon.runner.cell_work import cell_memory_gib
    from typhoon.training import EncoderShape

    shapes = {name: EncoderShape.from_config(load_backbone(name).config) for name in {c.backbone for c in configs}}
    cell_gib = max(cell_memory_gib(c, shapes[c.backbone]) for c in configs)
    free_gib = min(machine.gpu_free_memory_gib())
    by_memory = int(free_gib // cell_gib)
    if by_memory < 1:
        raise ValueError(f"a cell of this grid needs about {cell_gib:.1f} GiB of GPU memory and the emptiest device has "
                         f"{free_gib:.1f} GiB free: free the devices, or lower batch_size / max_length (--set)")
    by_cores = max(1, (machine.usable_cores() - 1) // len(gpus))
    most = by_memory * len(gpus)
    if requested is None:
        per_device = min(by_memory, by_cores)
        return per_device * len(gpus), (f"{len(gpus)} GPU(s): {per_device} cell(s) at once on each (memory: "
                                        f"{by_memory} of about {cell_gib:.1f} GiB in {free_gib:.0f} GiB free; host "
                                        f"cores: {by_cores} per device); --workers sets another number")
    if requested > most:
        return most, (f"--workers {requested}: the {len(gpus)} GPU(s) hold at most {most} cell(s) of about "
                      f"{cell_gib:.1f} GiB at once ({free_gib:.0f} GiB free on the emptiest): running {most}")
    return requested, None


# --------------------------------------------------------------------------------------------------
# The worker's side


def worker_calls() -> dict:
    """What a worker may be asked to run, by name. Imported in the worker process, as it starts (the training
    stack, while the batch does its own set-up): the batch, which only sends the names, imports no torch."""
    from typhoon.runner.cells import run_cell
    from typhoon.runner.step_timing import calibrate_in_worker
    from typhoon.training import run  # noqa: F401 -- the training stack, imported before the first call asks for it

    return {"run_cell": run_cell, "calibrate": calibrate_in_worker}


def _stop_with(signum: int, frame) -> None:
    raise stop.Interrupted(signum)


def _watch_parent(parent_pid: int) -> None:
    """Stop this worker (as a SIGTERM does) once its batch is gone: a killed batch leaves no orphan training."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_S)
    os.kill(os.getpid(), signal.SIGTERM)


def worker_main(conn, parent_pid: int) -> None:
    """A worker process: import the training stack, then run each call it receives until told to end (None)
    or stopped. Replies ``("ok", result)`` or ``("error", message, traceback)``; a stop sends nothing."""
    os.setsid()  # a terminal's Ctrl-C reaches the batch only; the batch stops its workers itself
    for signum in stop.STOP_SIGNALS:
        signal.signal(signum, _stop_with)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    try:
        calls = worker_calls()
        from typhoon.progress_bars import disable_library_bars

        disable_library_bars()  # tokenizing's bars from every worker would garble the batch's terminal
        while (message := conn.recv()) is not None:
            name, args = message
            try:
                result = calls[name](*args)
            except Exception as err:  # the call's own failure (a cell's is a row, not this): reported, worker lives
                conn.send(("error", f"{type(err).__name__}: {error_line(err)}", traceback.format_exc()))
            else:
                conn.send(("ok", result))
    except (KeyboardInterrupt, EOFError, OSError) as err:  # stopped, or the batch is gone
        # the run cleaned up after itself: skip the interpreter's teardown (seconds with torch loaded)
        stop.exit_stopped(err.exit_code if isinstance(err, stop.Interrupted) else 1, join_s=0.0)


# --------------------------------------------------------------------------------------------------
# The batch's side


class WorkerDied(RuntimeError):
    """The worker process ended while it ran a call."""


def exit_description(exitcode: int | None) -> str:
    """How a worker process ended, in words (a negative exit code is the signal that killed it)."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name
        return f"killed by {name}" + (" (out of memory? the kernel's OOM killer sends it)" if name == "SIGKILL" else "")
    return f"exited with status {exitcode}"


class WorkerProcess:
    """One spawned worker (see the module docstring); the batch sends it calls and reads their results."""

    def __init__(self, label: str = "typhoon-worker"):
        self.conn, child = SPAWN.Pipe()
        self.process = SPAWN.Process(target=worker_main, args=(child, os.getpid()), name=label, daemon=True)
        self.process.start()
        child.close()
        self.busy = False

    @property
    def ready_handles(self) -> list:
        """What becomes ready when the call in flight ends: its reply, or the process's end."""
        return [self.conn, self.process.sentinel]

    def send(self, name: str, *args) -> None:
        self.conn.send((name, args))
        self.busy = True

    def reply(self):
        """The result of the call in flight once it has ended; raises :class:`WorkerDied` if the process
        ended instead, RuntimeError carrying the call's traceback if it raised."""
        try:
            if self.conn.poll():
                message = self.conn.recv()
                self.busy = False
                if message[0] == "error":
                    raise RuntimeError(f"{message[1]}\n{message[2]}")
                return message[1]
        except (EOFError, OSError):
            pass
        self.process.join(timeout=5)
        raise WorkerDied(exit_description(self.process.exitcode))

    def call(self, name: str, *args):
        """Run one call and wait for it (a stop ends it: the process is killed by the stop)."""
        self.send(name, *args)
        wait_for_any(self.ready_handles)
        return self.reply()

    def alive(self) -> bool:
        return self.process.is_alive()

    def close(self, timeout_s: float = 5.0) -> None:
        """Ask it to end; terminate it if it has not within ``timeout_s``."""
        with contextlib.suppress(OSError, ValueError):
            if self.alive() and not self.busy:
                self.conn.send(None)
        self.process.join(timeout=timeout_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=stop.KILL_GRACE_S)
        self.conn.close()


def died_row(cell: Cell, out_dir: Path, why: str, seconds: float) -> dict:
    """The row of a cell whose worker process ended while it ran: stopped (a stop ended it), else failed, what
    it left removed and, for a kind with records, its failed record written (its kind's ``lost``)."""
    if stop.stopping():
        return cell_row(cell, "stopped", seconds=seconds)
    error = f"WorkerDied: the worker process running it {why}"
    cell.kind.lost(cell, out_dir, error)
    return cell_row(cell, "failed", error=error, seconds=seconds)


class WorkerPool(CellExecutor):
    """The local executor: one :class:`WorkerProcess` per slot (:func:`slots_for`), cells
    queued and handed to the first free worker in order."""

    def __init__(self, slots: list[Slot]):
        if not slots:
            raise ValueError("a worker pool needs at least one slot")
        self.slots = list(slots)
        self.workers = [WorkerProcess(f"typhoon-worker-{i}") for i in range(len(slots))]
        self.queue: deque[tuple[Cell, Path]] = deque()
        self.running: dict[int, tuple[Cell, Path, float]] = {}  # worker index -> its cell, since when

    def submit(self, cell: Cell, out_dir: Path) -> None:
        self.queue.append((cell, Path(out_dir)))

    def pending(self) -> int:
        return len(self.queue) + len(self.running)

    def _dispatch(self) -> None:
        for i, worker in enumerate(self.workers):
            if not self.queue or stop.stopping():
                return
            if i in self.running:
                continue
            if not worker.alive():  # it died between cells: a new one takes its slot
                self.workers[i] = worker = WorkerProcess(f"typhoon-worker-{i}")
            cell, out_dir = self.queue.popleft()
            worker.send("run_cell", self.slots[i].apply(cell), str(out_dir))
            self.running[i] = (cell, out_dir, time.perf_counter())

    def poll(self, timeout_s: float) -> list[dict]:
        self._dispatch()
        handles = [h for i in self.running for h in self.workers[i].ready_handles]
        if handles:
            wait_for_any(handles, timeout=timeout_s)
        elif timeout_s:
            time.sleep(min(timeout_s, 0.05))
        rows = []
        for i in list(self.running):
            worker = self.workers[i]
            if not (worker.conn.poll() or not worker.alive()):
                continue
            cell, out_dir, started = self.running.pop(i)
            try:
                rows.append(worker.reply())
            except WorkerDied as err:
                rows.append(died_row(cell, out_dir, str(err), time.perf_counter() - started))
                self.workers[i] = WorkerProcess(f"typhoon-worker-{i}")
            except RuntimeError as err:  # run_cell itself failed (not the cell: that is a row)
                message = str(err).split("\n", 1)[0]
                cell.kind.lost(cell, out_dir, message, str(err))
                rows.append(cell_row(cell, "failed", error=message, seconds=time.perf_counter() - started))
            if rows[-1]["status"] == "failed" and "OutOfMemoryError" in str(rows[-1]["error"]):
                worker.close()  # a clean CUDA context for the next cell
                self.workers[i] = WorkerProcess(f"typhoon-worker-{i}")
        self._dispatch()
        return rows

    def stop(self) -> None:
        stop.request_stop()
        self.queue.clear()
        processes = [w.process for w in self.workers if w.alive()]
        for process in processes:
            with contextlib.suppress(OSError):
                process.terminate()
        deadline = time.monotonic() + stop.KILL_GRACE_S
        for process in processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(timeout=stop.KILL_GRACE_S)
        self.running.clear()

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


# --------------------------------------------------------------------------------------------------
# A worker process of one's own (a Dask worker)

_OWN: dict[str, WorkerProcess] = {}
_OWN_LOCK = threading.Lock()


def run_cell_in_worker_process(cell: Cell, out_dir: str | Path, key: str | None = None) -> dict:
    """Run one cell in a worker process belonging to the caller (a Dask worker, ``key`` its name; started on
    first use, kept for its next cells): the cell's status row. A stop kills that process (the Dask worker's
    children: :func:`typhoon.runner.stop.stop_worker_cells`); the row then says ``stopped``."""
    key = key or f"{os.getpid()}-{threading.get_ident()}"
    if multiprocessing.current_process().daemon:
        raise RuntimeError("this Dask worker runs as a daemonic process, which may start no worker process for its "
                           "cells: start the Dask workers with DASK_DISTRIBUTED__WORKER__DAEMON=False in their "
                           "environment (docs/cluster.md; reproduce --cluster sets it in its jobs)")
    with _OWN_LOCK:
        worker = _OWN.get(key)
        if worker is None or not worker.alive():
            worker = _OWN[key] = WorkerProcess(f"typhoon-worker-{key}")
    started = time.perf_counter()
    try:
        return worker.call("run_cell", cell, str(out_dir))
    except WorkerDied as err:
        return died_row(cell, Path(out_dir), str(err), time.perf_counter() - started)
