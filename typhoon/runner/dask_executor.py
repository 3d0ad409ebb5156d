"""The study's cells on a Dask cluster (:class:`DaskExecutor`, one implementation of
:class:`typhoon.runner.executor.CellExecutor`): a SLURM cluster or a local one made by :mod:`typhoon.runner.cluster`,
or a scheduler with workers started by hand (:func:`dask_executor`).

Each Dask worker runs one cell at a time, in a worker process of its own (:func:`run_cell_on_dask_worker`:
:func:`typhoon.runner.workers.run_cell_in_worker_process`, kept from cell to cell, killed by a stop). Jobs end
(their walltime, a preemption, a node lost, ``scancel``), so the executor looks after them while cells remain
(:meth:`DaskExecutor.poll`, called by the study loop): it hands each idle worker one cell, keeps ``jobs`` jobs
alive (a job that ended is replaced), and when a worker is lost it removes what its cell left behind (its kind's
``clean``: :class:`typhoon.runner.cells.CellKind`) and runs the cell again on another worker, up to ``retries``
times; then the cell is recorded failed, naming the lost worker. When no worker has been alive for
``no_worker_timeout_s`` it stops the study (:class:`NoWorkersError`, exit 2). Dask is imported only by the
functions that need it.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from typhoon.runner import stop
from typhoon.runner.cells import Cell, cell_row
from typhoon.runner.executor import CellExecutor

# A worker lost after this share of its job's walltime was ended by the walltime (the worker connects some
# seconds after its job starts, so it is seen for a little less than the whole limit).
WALLTIME_SHARE = 0.9


# Each cell asks for one unit of this worker resource, and each worker has one: one cell per job at a time.
CELL_RESOURCE = {"cell": 1}


class NoWorkersError(ConnectionError):
    """No Dask worker has been alive for ``no_worker_timeout_s`` while cells remain: the grid stops."""


def slurm_job_states(job_ids: list[str]) -> dict[str, str]:
    """The SLURM state of each job still known to ``squeue`` (job id -> e.g. PENDING, RUNNING)."""
    if not job_ids:
        return {}
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", ",".join(job_ids)], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(line.split(None, 1) for line in out.splitlines() if len(line.split(None, 1)) == 2)


@dataclass
class _Submitted:
    """One submitted cell: what to run, its status row once finished, and its attempts so far."""

    cell: Cell
    out_dir: object
    row: dict | None = None  # the outcome, once known; handed to the loop by poll()
    returned: bool = False  # poll() has handed its row to the loop
    losses: list[str] = field(default_factory=list)  # labels of the workers lost while it ran
    worker: str | None = None  # the worker of the attempt in flight
    started: float | None = None  # the executor's clock when the attempt in flight was handed to its worker
    task: object = None  # that attempt's Dask future


def run_cell_on_dask_worker(cell: Cell, out_dir) -> dict:
    """What a Dask worker runs for a cell: the cell in that worker's own worker process
    (:func:`typhoon.runner.workers.run_cell_in_worker_process`), kept for its next cells."""
    from distributed import get_worker

    from typhoon.runner.workers import run_cell_in_worker_process

    return run_cell_in_worker_process(cell, out_dir, key=get_worker().address)


class DaskExecutor(CellExecutor):
    """The cells of a grid on a Dask cluster (a SLURM one, a local one, or a scheduler started by hand), one
    cell per worker at a time (:class:`typhoon.runner.executor.CellExecutor`).

    Cells wait here and are handed to Dask one per idle worker, pinned to it, so a lost worker takes exactly the
    cell it ran (not cells queued behind it). :meth:`poll` does the looking after: hands waiting cells to idle
    workers, notes lost workers -- their cell is cleaned up after (its kind's ``clean``) and run again, up to ``retries`` times, then recorded failed naming the workers --, keeps ``cluster`` (None
    for a scheduler started by hand) at ``jobs`` workers while cells remain, and raises :class:`NoWorkersError`
    once no worker has been alive for ``no_worker_timeout_s``. ``cell_fn(cell, out_dir)`` is what a worker
    runs for a cell (:func:`run_cell_on_dask_worker`).
    """

    def __init__(self, client, cluster=None, *, jobs: int | None = None, retries: int = 2,
                 no_worker_timeout_s: float = 3600.0, check_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, say: Callable[[str], None] = print,
                 walltime_s: float | None = None, cell_fn: Callable = run_cell_on_dask_worker):
        self.client, self.cluster, self.jobs, self.retries = client, cluster, jobs, retries
        self.walltime_s = walltime_s  # each job's time limit: a worker lost at it was ended by it
        self.no_worker_timeout_s, self.check_s, self.cell_fn = no_worker_timeout_s, check_s, cell_fn
        self.clock, self.say = clock, say
        self.cells: list[_Submitted] = []
        self.waiting: list[_Submitted] = []  # not handed to a worker yet (or back after a lost worker)
        self.labels: dict[str, str] = {}  # worker address -> "worker ADDRESS (SLURM job ID)"
        self.alive: set[str] = set()  # the workers at the last check
        self.seen_jobs: set[str] = set()  # SLURM job ids whose worker connected
        self.worker_since: dict[str, float] = {}  # worker address -> the clock when it was first seen
        self.last_check: float | None = None
        self.no_worker_since: float | None = self.clock()
        self.settled = threading.Event()  # a task ended: poll() need not wait out its timeout

    # -- the executor ------------------------------------------------------------------------------
    def submit(self, cell: Cell, out_dir) -> None:
        cell = _Submitted(cell, out_dir)
        self.cells.append(cell)
        self.waiting.append(cell)

    def pending(self) -> int:
        return sum(not cell.returned for cell in self.cells)

    def poll(self, timeout_s: float = 0.0) -> list[dict]:
        self.look_after()
        if not any(cell.row is not None and not cell.returned for cell in self.cells):
            self.settled.wait(timeout_s)
        self.settled.clear()
        self.look_after()
        rows = []
        for cell in self.cells:
            if cell.row is not None and not cell.returned:
                cell.returned = True
                rows.append(cell.row)
        return rows

    def close(self) -> None:
        """Nothing to let go here: the cluster is closed by whoever made it (:func:`cluster_executor`)."""

    def stop(self) -> None:
        """A stop: every worker kills its worker process (:func:`typhoon.runner.stop.stop_worker_cells`), then the
        cells are cancelled."""
        stop.request_stop()
        with contextlib.suppress(Exception):
            self.client.run(stop.stop_worker_cells, on_error="return")
        self.waiting.clear()
        tasks = [cell.task for cell in self.cells if cell.task is not None]
        for cell in self.cells:
            cell.returned = True
        with contextlib.suppress(Exception):
            self.client.cancel(tasks, force=True)

    # -- looking after the cells and the jobs -----------------------------------------------------
    def remaining(self) -> int:
        return sum(cell.row is None for cell in self.cells)

    def worker_label(self, address: str) -> str:
        return self.labels.get(address, f"worker {address}")

    def look_after(self) -> None:
        now = self.clock()
        if self.last_check is not None and now - self.last_check < self.check_s:
            return
        self.last_check = now
        alive = set(self.client.processing())
        self._note_workers(alive - set(self.labels))
        for address in sorted(self.alive - alive):
            self._lost(address)
        self.alive = alive
        self._dispatch()
        remaining = self.remaining()
        if remaining and self.cluster is not None:
            self._keep_jobs()
        if alive or not remaining:
            self.no_worker_since = None
        elif self.no_worker_since is None:
            self.no_worker_since = now
        elif now - self.no_worker_since >= self.no_worker_timeout_s:
            raise NoWorkersError(
                f"no Dask worker has been alive for {now - self.no_worker_since:.0f} s while {remaining} cell(s) "
                f"remain{self._jobs_state()}; stopping the grid (its finished cells are kept: rerun the same "
                "command to resume). Check the jobs' output files (slurm-*.out) or the queue; to wait longer "
                "set no_worker_timeout_s in [<profile>.cluster] or --no-worker-timeout")

    def _dispatch(self) -> None:
        """Hand waiting cells to the idle workers, one each, pinned to it."""
        busy = {cell.worker for cell in self.cells if cell.task is not None and cell.row is None}
        for address in sorted(self.alive - busy):
            if not self.waiting:
                return
            cell = self.waiting.pop(0)
            name = cell.cell.path.replace("/", ".")
            task = self.client.submit(self.cell_fn, cell.cell, cell.out_dir, key=f"cell-{name}-{uuid.uuid4().hex[:8]}",
                                      pure=False, workers=[address], allow_other_workers=False,
                                      resources=CELL_RESOURCE)
            cell.worker, cell.task, cell.started = address, task, self.clock()
            task.add_done_callback(lambda done, cell=cell: self._settle(cell, done))  # in a thread of its own
    def _note_workers(self, new: set[str]) -> None:
        if not new:
            return
        now = self.clock()
        for address in new:
            self.worker_since.setdefault(address, now)
        info = self.client.scheduler_info(n_workers=-1).get("workers", {})
        jobs = getattr(self.cluster, "workers", {}) if self.cluster is not None else {}
        for address in new:
            name = info.get(address, {}).get("name", "?")
            job_id = getattr(jobs.get(name), "job_id", None)
            if job_id:
                self.seen_jobs.add(str(job_id))
            self.labels[address] = f"worker {address} ({f'SLURM job {job_id}' if job_id else f'name {name}'})"

    def _lost(self, address: str) -> None:
        """A worker is gone (its job ended): its cell's attempt is dropped, what it left removed, and the
        cell waits for another worker -- or, lost too often, fails."""
        label = self.worker_label(address)
        cells = [cell for cell in self.cells if cell.worker == address and cell.task is not None and cell.row is None]
        if not cells:
            self.say(f"cluster: lost {label}")
        for cell in cells:
            task, cell.task, cell.worker = cell.task, None, None
            with contextlib.suppress(Exception):
                self.client.cancel([task], force=True)
            cell.cell.kind.clean(cell.cell, cell.out_dir)  # no other run of the cell has started: it was pinned
            cell.losses.append(label)
            what = cell.cell.path
            cause = self._walltime_cause(address, cell)
            if cause and cause[1]:  # the cell alone outlasted a job: another job ends the same way
                self.say(f"cluster: lost {label} while it ran {what}: {cause[0]}; it fails")
                self._fail(cell, f"{cause[0]}, the last {label}")
            elif len(cell.losses) > self.retries:
                self.say(f"cluster: lost {label} while it ran {what}: lost {len(cell.losses)} times, it fails")
                self._fail(cell, f"the cell's worker was lost {len(cell.losses)} time(s) while it ran (its job ended: "
                                 f"{cause[0] if cause else 'walltime, preemption, scancel or a crash'}), the last "
                                 f"{label}; retries = {self.retries}")
            else:
                self.say(f"cluster: lost {label} while it ran {what}: "
                         f"{cause[0] + '; ' if cause else ''}it runs again on another worker "
                         f"(retry {len(cell.losses)} of {self.retries})")
                self.waiting.insert(0, cell)

    def _fail(self, cell: _Submitted, why: str) -> None:
        """The cell is recorded failed (its worker was lost too often): its row, its failed record."""
        error = f"LostWorker: {why}"
        cell.cell.kind.lost(cell.cell, cell.out_dir, error)
        cell.row = cell_row(cell.cell, "failed", error=error)
        self.settled.set()

    def _settle(self, cell: _Submitted, task) -> None:
        """An attempt ended: its row becomes the cell's, unless the attempt was dropped (its worker was lost)
        or the cell is done."""
        if cell.task is not task or cell.row is not None or task.cancelled():
            return  # a stop (the cells are cancelled), or a lost worker (the cell runs again)
        try:
            outcome = task.exception() if task.status == "error" else None
            row = None if outcome is not None else task.result()
        except Exception as err:  # noqa: BLE001 - whatever fetching the outcome raised is the outcome
            outcome, row = err, None
        if cell.task is not task or cell.row is not None:
            return
        if outcome is not None:  # the cell function itself failed on the worker (not the cell: that is a row)
            error = f"{type(outcome).__name__}: {outcome}"
            cell.cell.kind.lost(cell.cell, cell.out_dir, error)
            row = cell_row(cell.cell, "failed", error=error)
        cell.row = row
        self.settled.set()

    def _walltime_cause(self, address: str, cell: _Submitted) -> tuple[str, bool] | None:
        """Whether the walltime ended the worker's job, in words, and whether the cell itself had run for
        (almost) a whole walltime -- then no job can hold it and a retry is in vain; None otherwise."""
        if self.walltime_s is None:
            return None
        now = self.clock()
        job_ran, cell_ran = now - self.worker_since.get(address, now), now - (cell.started or now)
        if job_ran < WALLTIME_SHARE * self.walltime_s:
            return None
        limit = _minutes(self.walltime_s)
        if cell_ran >= WALLTIME_SHARE * self.walltime_s:
            return (f"its job reached its walltime ({limit}) with the cell running for {_minutes(cell_ran)}: the "
                    f"cell needs longer than one job may run; raise the walltime (--walltime, or walltime in "
                    f"[<profile>.cluster]) to at least twice {limit}, or give each job more cores (--cpus)", True)
        return (f"its job reached its walltime ({limit}) {_minutes(cell_ran)} into the cell", False)

    def _keep_jobs(self) -> None:
        """Ask the cluster for ``jobs`` workers again: a job whose worker left is submitted anew. A SLURM job
        that ended before its worker ever connected (cancelled while queued) is dropped first."""
        jobs = getattr(self.cluster, "workers", {})
        if self.cluster.__class__.__name__ == "SLURMCluster":
            ids = {name: str(job.job_id) for name, job in list(jobs.items()) if getattr(job, "job_id", None)}
            states = slurm_job_states(list(ids.values()))
            for name, job_id in ids.items():
                if job_id not in states and job_id not in self.seen_jobs:
                    jobs.pop(name, None)
        if len(jobs) < self.jobs or len(getattr(self.cluster, "worker_spec", {})) < self.jobs:
            self.cluster.scale(self.jobs)

    def _jobs_state(self) -> str:
        jobs = getattr(self.cluster, "workers", {}) if self.cluster is not None else {}
        ids = [str(job.job_id) for job in list(jobs.values()) if getattr(job, "job_id", None)]
        states = slurm_job_states(ids)
        return f" (SLURM jobs: {', '.join(f'{i} {s}' for i, s in states.items())})" if states else ""

def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"



def dask_executor(address: str) -> DaskExecutor:
    """A :class:`DaskExecutor` on a Dask cluster started by hand, for grids spread over machines.

    Start a scheduler and workers on the machines (``dask scheduler``; ``dask worker tcp://HOST:8786
    --nthreads 1`` on each, with the repository and the output folder on a shared file system), then
    ``python -m typhoon reproduce --scheduler tcp://HOST:8786``. Needs ``pip install distributed``.
    """
    try:
        from distributed import Client
    except ImportError as err:
        raise ValueError("--scheduler needs the Dask scheduler client: pip install distributed (the `cluster` extra)") from err
    return DaskExecutor(Client(address))
