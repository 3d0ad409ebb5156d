"""Running a grid beyond one machine: its cells as jobs of a SLURM cluster (``reproduce --cluster slurm``).

A grid's cells are independent notebook executions (:func:`typhoon.runner.grid.run_cell`), so any
``concurrent.futures`` executor can run them; :func:`typhoon.runner.grid.run_grid` takes one. This module makes
that executor from a Dask cluster:

- ``slurm``: dask-jobqueue's ``SLURMCluster``. Each SLURM job is one Dask worker that runs one cell at a
  time (a ``cell`` resource of 1, and every cell asks for it), with the job's GPUs, CPUs, memory, time
  limit and partition from the profile's ``[<profile>.cluster]`` table, overridden by the command line.
  The output folder and the repository must be on a file system the nodes share (the records are
  written there, each under its own lock).
- ``local``: a Dask ``LocalCluster`` on this machine (on 127.0.0.1) with the same resources and the same
  code path, for trying a cluster set-up (and for the tests, which have no SLURM).

Jobs end (their walltime, a preemption, a node lost, ``scancel``), so :class:`CellExecutor` looks after
them while cells remain (:meth:`CellExecutor.poll`, called by the grid's loop): it hands each idle worker
one cell, keeps ``jobs`` jobs alive (a job that ended is replaced), and when a worker is lost it removes
what its cell left behind (temp notebook, staging folders, progress file) and runs the cell again on
another worker, up to ``retries`` times; then the grid records it failed, naming the lost worker
(:func:`typhoon.runner.grid.cell_outcome`). When no worker has been alive for ``no_worker_timeout_s`` it stops
the grid (:class:`NoWorkersError`, exit 2). A stop (Ctrl-C) cancels the cells and has every worker kill
its notebook kernels (:func:`typhoon.runner.stop.stop_worker_cells`).

``--scheduler tcp://HOST:8786`` (:func:`typhoon.runner.grid.dask_executor`) is the other way: workers started by
hand. On a cluster the cells choose their own threads (all the cores the job was given; the prologue sets
``OMP_NUM_THREADS``) and device (``auto``: the job's GPU).

Dask and dask-jobqueue are imported only when a cluster is made (the ``cluster`` extra).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, fields
from pathlib import Path

from typhoon import paths

KINDS = ("slurm", "local")
REPO = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"


@dataclass
class ClusterSpec:
    """The resources of each job (one job = one Dask worker = one cell at a time), how many jobs, where the
    scheduler listens, and what happens when jobs are lost."""

    kind: str = "slurm"
    partition: str | None = None  # SLURM partition (#SBATCH -p); None: the cluster's default
    account: str | None = None  # SLURM account (#SBATCH -A)
    gpus: int = 0  # GPUs per job (#SBATCH --gres=gpu:N)
    cpus: int = 4  # CPU cores per job (#SBATCH --cpus-per-task)
    memory: str = "16GB"  # memory per job (#SBATCH --mem)
    walltime: str = "02:00:00"  # time limit per job (#SBATCH -t); a job runs cells until it ends, then is replaced
    jobs: int = 4  # jobs (workers) kept alive at once while cells remain
    job_extra: list[str] = field(default_factory=list)  # more #SBATCH directives, e.g. "--constraint=a100"
    prologue: list[str] = field(default_factory=list)  # shell lines run before the worker starts
    # the network interface the scheduler and the workers listen on, e.g. "ib0"; "lo" on one machine;
    # None: dask-jobqueue's setting (jobqueue.slurm.interface, e.g. DASK_JOBQUEUE__SLURM__INTERFACE)
    interface: str | None = None
    scheduler_options: dict = field(default_factory=dict)  # the Dask scheduler's: host, port, dashboard_address
    retries: int = 2  # times a cell whose job was lost runs again before it is recorded failed
    no_worker_timeout_s: float = 3600.0  # stop the grid when no worker has been alive this long (jobs queued?)
    # where each job's output file (slurm-<id>.out) goes; the CLI sets <out>/logs/slurm, so that no job writes
    # into the folder the command was started from. None: dask-jobqueue's default (the working folder)
    log_dir: str | None = None

    def __post_init__(self):
        problems = []
        if self.kind not in KINDS:
            problems.append(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name, least in (("gpus", 0), ("cpus", 1), ("jobs", 1), ("retries", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                problems.append(f"{name} must be an integer >= {least}, got {value!r}")
        timeout = self.no_worker_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            problems.append(f"no_worker_timeout_s must be a number of seconds > 0, got {timeout!r}")
        for name in ("job_extra", "prologue"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
                problems.append(f"{name} must be a list of strings, got {value!r}")
        if self.interface is not None and (not isinstance(self.interface, str) or not self.interface):
            problems.append(f"interface must be a network interface's name, e.g. 'ib0', got {self.interface!r}")
        if not isinstance(self.scheduler_options, dict) or not all(isinstance(k, str) for k in self.scheduler_options):
            problems.append(f"scheduler_options must be a table of the Dask scheduler's options, got "
                            f"{self.scheduler_options!r}")
        try:
            walltime_seconds(self.walltime)
        except ValueError as err:
            problems.append(str(err))
        if problems:
            raise ValueError("bad cluster settings: " + "; ".join(problems))

    @classmethod
    def from_settings(cls, table: Mapping | None, overrides: Mapping | None = None) -> ClusterSpec:
        """From a profile's ``cluster`` table, then the command line's values (None = not given; a
        ``scheduler_options`` override adds to the table's options)."""
        known = {f.name for f in fields(cls)}
        table, overrides = dict(table or {}), {k: v for k, v in dict(overrides or {}).items() if v is not None}
        if isinstance(table.get("scheduler_options"), Mapping) and "scheduler_options" in overrides:
            overrides["scheduler_options"] = {**table["scheduler_options"], **overrides["scheduler_options"]}
        values = {**table, **overrides}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown cluster setting(s) {unknown}; choose from {sorted(known)}")
        return cls(**values)

    def directives(self) -> list[str]:
        """The #SBATCH directives beyond those dask-jobqueue writes (cores, memory, time, partition, account)."""
        return [*([f"--gres=gpu:{self.gpus}"] if self.gpus else []), *self.job_extra]

    def job_prologue(self) -> list[str]:
        """What each job does before its worker starts: the repository as working folder, offline hubs,
        torch on the job's cores; then the profile's own lines (e.g. activating an environment)."""
        return [f"cd {REPO}", "export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1",
                f"export OMP_NUM_THREADS={self.cpus}", f"export PYTHONPATH={REPO}${{PYTHONPATH:+:$PYTHONPATH}}",
                *self.prologue]

    def dask_settings(self) -> dict:
        """The Dask settings of the scheduler made here: a lost worker's job is let go (so that it can be
        replaced) after 2 s. Lost cells are retried by :class:`CellExecutor`, not by Dask."""
        return {"distributed.deploy.lost-worker-timeout": "2s"}


def walltime_seconds(walltime: str) -> int:
    """A SLURM time limit in seconds: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
    "days-hours:minutes" or "days-hours:minutes:seconds" (sbatch's --time formats)."""
    text = str(walltime).strip()
    days, _, rest = text.rpartition("-") if "-" in text else ("0", "", text)
    parts = rest.split(":")
    try:
        numbers = [int(days), *(int(x) for x in parts)]
    except ValueError:
        numbers = []
    if not numbers or len(parts) > 3 or min(numbers) < 0:
        raise ValueError(f"walltime must be a SLURM time limit such as 02:00:00, 90 or 1-12:00, got {walltime!r}")
    d, rest = numbers[0], numbers[1:]
    if "-" in text:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = (rest + [0, 0])[:3]
    else:  # minutes | minutes:seconds | hours:minutes:seconds
        hours, minutes, seconds = {1: (0, rest[0], 0), 2: (0, *rest), 3: tuple(rest)}[len(rest)]
    return ((d * 24 + hours) * 60 + minutes) * 60 + seconds


# A worker lost after this share of its job's walltime was ended by the walltime (the worker connects some
# seconds after its job starts, so it is seen for a little less than the whole limit).
WALLTIME_SHARE = 0.9


# Each cell asks for one unit of this worker resource, and each worker has one: one cell per job at a time.
CELL_RESOURCE = {"cell": 1}


class NoWorkersError(ConnectionError):
    """No Dask worker has been alive for ``no_worker_timeout_s`` while cells remain: the grid stops."""


def slurm_cluster(spec: ClusterSpec):
    """dask-jobqueue's ``SLURMCluster`` for ``spec`` (starts a scheduler here; submits nothing until scaled)."""
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as err:
        raise ValueError("--cluster slurm needs dask-jobqueue: pip install dask-jobqueue (the `cluster` extra)") from err
    return SLURMCluster(cores=spec.cpus, processes=1, memory=spec.memory, walltime=spec.walltime,
                        queue=spec.partition, account=spec.account, job_name="typhoon-cell",
                        job_extra_directives=spec.directives(), job_script_prologue=spec.job_prologue(),
                        worker_extra_args=["--resources", "cell=1"], python=sys.executable,
                        interface=spec.interface, scheduler_options=dict(spec.scheduler_options),
                        log_directory=spec.log_dir)


def local_cluster(spec: ClusterSpec):
    """A Dask ``LocalCluster`` on 127.0.0.1 with ``spec.jobs`` workers of one cell each, in this process's
    threads (``scheduler_options`` host and port apply to its scheduler)."""
    from distributed import LocalCluster

    options = {"host": LOOPBACK, **{k: v for k, v in spec.scheduler_options.items() if k in ("host", "port")}}
    return LocalCluster(n_workers=spec.jobs, threads_per_worker=1, processes=False, resources=CELL_RESOURCE,
                        dashboard_address=None, protocol="tcp://", host=options["host"],
                        scheduler_port=options.get("port", 0))


def job_script(spec: ClusterSpec) -> str:
    """The batch script each SLURM job would run (for checking a set-up; submits nothing)."""
    cluster = slurm_cluster(spec)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


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


class LostCellError(RuntimeError):
    """A cell's worker was lost (its job ended) more often than ``retries`` allows: the cell is failed."""


@dataclass
class _Cell:
    """One submitted cell: what to run, its grid-facing future, and its attempts so far."""

    fn: Callable
    args: tuple
    kwargs: dict
    future: Future
    config: object = None
    out_dir: object = None
    losses: list[str] = field(default_factory=list)  # labels of the workers lost while it ran
    worker: str | None = None  # the worker of the attempt in flight
    started: float | None = None  # the executor's clock when the attempt in flight was handed to its worker
    task: object = None  # that attempt's Dask future


class CellExecutor(Executor):
    """A ``concurrent.futures`` executor for a grid's cells on a Dask cluster, one cell per worker at a time.

    Cells wait here and are handed to Dask one per idle worker, pinned to it, so a lost worker takes
    exactly the cell it ran (not cells queued behind it). ``poll()``, which the grid calls from its loop,
    does the looking after: hands waiting cells to idle workers, notes lost workers -- their cell is
    cleaned up after (``on_lost(config, out_dir)``: :func:`typhoon.runner.grid.remove_cell_leftovers`) and run
    again, up to ``retries`` times, then failed with :class:`LostCellError` naming the workers --, keeps
    ``cluster`` (None for a scheduler started by hand) at ``jobs`` workers while cells remain, and raises
    :class:`NoWorkersError` once no worker has been alive for ``no_worker_timeout_s``.
    """

    def __init__(self, client, cluster=None, *, jobs: int | None = None, retries: int = 2,
                 no_worker_timeout_s: float = 3600.0, on_lost: Callable | None = None, check_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, say: Callable[[str], None] = print,
                 walltime_s: float | None = None):
        self.client, self.cluster, self.jobs, self.retries = client, cluster, jobs, retries
        self.walltime_s = walltime_s  # each job's time limit: a worker lost at it was ended by it
        self.no_worker_timeout_s, self.on_lost, self.check_s = no_worker_timeout_s, on_lost, check_s
        self.clock, self.say = clock, say
        self.cells: list[_Cell] = []
        self.waiting: list[_Cell] = []  # not handed to a worker yet (or back after a lost worker)
        self.labels: dict[str, str] = {}  # worker address -> "worker ADDRESS (SLURM job ID)"
        self.alive: set[str] = set()  # the workers at the last check
        self.seen_jobs: set[str] = set()  # SLURM job ids whose worker connected
        self.worker_since: dict[str, float] = {}  # worker address -> the clock when it was first seen
        self.last_check: float | None = None
        self.no_worker_since: float | None = self.clock()

    # -- concurrent.futures.Executor --------------------------------------------------------------
    def submit(self, fn, /, *args, **kwargs) -> Future:
        config = args[0] if args and hasattr(args[0], "relative_dir") else None
        cell = _Cell(fn, args, kwargs, Future(), config, args[1] if config is not None and len(args) > 1 else None)
        self.cells.append(cell)
        self.waiting.append(cell)
        return cell.future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            self.stop_cells()

    # -- looking after the cells and the jobs -----------------------------------------------------
    def remaining(self) -> int:
        return sum(not cell.future.done() for cell in self.cells)

    def worker_label(self, address: str) -> str:
        return self.labels.get(address, f"worker {address}")

    def poll(self) -> None:
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
        busy = {cell.worker for cell in self.cells if cell.task is not None and not cell.future.done()}
        for address in sorted(self.alive - busy):
            while self.waiting and self.waiting[0].future.done():  # cancelled by the grid
                self.waiting.pop(0)
            if not self.waiting:
                return
            cell = self.waiting.pop(0)
            name = cell.config.relative_dir().as_posix().replace("/", ".") if cell.config is not None else "task"
            task = self.client.submit(cell.fn, *cell.args, key=f"cell-{name}-{uuid.uuid4().hex[:8]}", pure=False,
                                      workers=[address], allow_other_workers=False, resources=CELL_RESOURCE,
                                      **cell.kwargs)
            cell.worker, cell.task, cell.started = address, task, self.clock()
            task.add_done_callback(lambda done, cell=cell: _settle(cell, done))  # called in a thread of its own

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
        cells = [cell for cell in self.cells if cell.worker == address and cell.task is not None
                 and not cell.future.done()]
        if not cells:
            self.say(f"cluster: lost {label}")
        for cell in cells:
            task, cell.task, cell.worker = cell.task, None, None
            with contextlib.suppress(Exception):
                self.client.cancel([task], force=True)
            if self.on_lost is not None and cell.config is not None:
                self.on_lost(cell.config, cell.out_dir)  # no other run of the cell has started: it was pinned
            cell.losses.append(label)
            what = cell.config.relative_dir().as_posix() if cell.config is not None else "a task"
            cause = self._walltime_cause(address, cell)
            if cause and cause[1]:  # the cell alone outlasted a job: another job ends the same way
                self.say(f"cluster: lost {label} while it ran {what}: {cause[0]}; it fails")
                cell.future.set_exception(LostCellError(f"{cause[0]}, the last {label}"))
            elif len(cell.losses) > self.retries:
                self.say(f"cluster: lost {label} while it ran {what}: lost {len(cell.losses)} times, it fails")
                cell.future.set_exception(LostCellError(
                    f"the cell's worker was lost {len(cell.losses)} time(s) while it ran (its job ended: "
                    f"{cause[0] if cause else 'walltime, preemption, scancel or a crash'}), the last {label}; "
                    f"retries = {self.retries}"))
            else:
                self.say(f"cluster: lost {label} while it ran {what}: "
                         f"{cause[0] + '; ' if cause else ''}it runs again on another worker "
                         f"(retry {len(cell.losses)} of {self.retries})")
                self.waiting.insert(0, cell)

    def _walltime_cause(self, address: str, cell: _Cell) -> tuple[str, bool] | None:
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

    def stop_cells(self, worker_stop: Callable | None = None) -> None:
        """A stop: every worker runs ``worker_stop`` (the grid's: :func:`typhoon.runner.stop.stop_worker_cells`,
        which kills its notebook kernels), then the cells are cancelled."""
        if worker_stop is not None:
            with contextlib.suppress(Exception):
                self.client.run(worker_stop, on_error="return")
        self.waiting.clear()
        tasks = [cell.task for cell in self.cells if cell.task is not None]
        for cell in self.cells:
            if cell.future.cancel():
                cell.future.set_running_or_notify_cancel()  # wakes wait()
        with contextlib.suppress(Exception):
            self.client.cancel(tasks, force=True)


def _settle(cell: _Cell, task) -> None:
    """Pass an attempt's outcome to its cell's ``concurrent.futures`` future (the grid waits on those),
    unless the attempt was dropped (its worker was lost) or the cell is done."""
    if cell.task is not task or cell.future.done():
        return
    try:
        if task.cancelled():
            return  # a stop (the grid cancels the cell itself) or a lost worker (the cell runs again)
        outcome = task.exception() if task.status == "error" else None
        result = None if outcome is not None else task.result()
    except Exception as err:  # noqa: BLE001 - whatever fetching the outcome raised is the outcome
        outcome, result = err, None
    if cell.task is not task or cell.future.done():
        return
    with contextlib.suppress(Exception):  # InvalidStateError: cancelled meanwhile
        if outcome is not None:
            cell.future.set_exception(outcome)
        else:
            cell.future.set_result(result)


def cluster_client(spec: ClusterSpec):
    """The cluster for ``spec`` and a client of it (a SLURM cluster is scaled to ``spec.jobs``)."""
    from distributed import Client

    cluster = slurm_cluster(spec) if spec.kind == "slurm" else local_cluster(spec)
    if spec.kind == "slurm":
        cluster.scale(jobs=spec.jobs)
    return cluster, Client(cluster)


@contextlib.contextmanager
def cluster_executor(spec: ClusterSpec, on_lost: Callable | None = None) -> Iterator[CellExecutor]:
    """A :class:`CellExecutor` whose tasks run on the cluster's workers, one cell per worker at a time;
    the cluster is shut down (its jobs cancelled) when the block ends. ``on_lost``: see CellExecutor (the
    CLI gives the grid's :func:`typhoon.runner.grid.remove_cell_leftovers`; this module does not import the grid)."""
    import dask

    with dask.config.set(spec.dask_settings()):
        cluster = client = None
        try:
            cluster, client = cluster_client(spec)
            yield CellExecutor(client, cluster, jobs=spec.jobs, retries=spec.retries,
                               no_worker_timeout_s=spec.no_worker_timeout_s, on_lost=on_lost,
                               walltime_s=walltime_seconds(spec.walltime) if spec.kind == "slurm" else None)
        finally:
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def describe(spec: ClusterSpec) -> str:
    where = f"partition {spec.partition}" if spec.partition else "the default partition"
    listen = f"interface {spec.interface}" if spec.interface else "the default interface"
    return (f"{spec.kind} cluster: {spec.jobs} job(s) on {where}, each {spec.cpus} CPU(s), {spec.gpus} GPU(s), "
            f"{spec.memory}, {spec.walltime}; one cell per job at a time (cwd {os.path.relpath(REPO)}"
            f"{'; job logs in ' + paths.shown(spec.log_dir) if spec.log_dir else ''}); "
            f"scheduler on {listen}; a lost cell is retried {spec.retries} time(s); no worker for "
            f"{spec.no_worker_timeout_s:g} s stops the grid")
