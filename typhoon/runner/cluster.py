"""Running a study beyond one machine: its cells as jobs of a SLURM cluster (``reproduce --cluster slurm``), or
on a local Dask cluster with the same code path.

The cells run on :class:`typhoon.runner.dask_executor.DaskExecutor` (one implementation of the study loop's
executor: it looks after lost jobs, retries and the walltime); this module makes its cluster:

- ``slurm``: dask-jobqueue's ``SLURMCluster``. Each SLURM job is one Dask worker that runs one cell at a
  time (a ``cell`` resource of 1, and every cell asks for it) in a worker process of its own, with the job's
  GPUs, CPUs, memory, time limit and partition from the profile's ``[<profile>.cluster]`` table, overridden by
  the command line. The output folder and the repository must be on a file system the nodes share (the
  records are written there, each under its own lock).
- ``local``: a Dask ``LocalCluster`` on this machine (on 127.0.0.1) with the same resources and the same
  code path, for trying a cluster set-up (and for the tests, which have no SLURM).

On a cluster the cells choose their own threads (all the cores the job was given; the prologue sets
``OMP_NUM_THREADS``) and device (``auto``: the job's GPU). ``--scheduler tcp://HOST:8786``
(:func:`typhoon.runner.dask_executor.dask_executor`) is the other way: workers started by hand.

Dask and dask-jobqueue are imported only when a cluster is made (the ``cluster`` extra).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from typhoon import paths
from typhoon.runner.dask_executor import CELL_RESOURCE, DaskExecutor, run_cell_on_dask_worker

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
        # a Dask worker is a daemonic process unless told otherwise, and a daemonic process may start no worker
        # process for its cells (typhoon.runner.workers)
        return [f"cd {REPO}", "export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 DASK_DISTRIBUTED__WORKER__DAEMON=False",
                f"export OMP_NUM_THREADS={self.cpus}", f"export PYTHONPATH={REPO}${{PYTHONPATH:+:$PYTHONPATH}}",
                *self.prologue]

    def dask_settings(self) -> dict:
        """The Dask settings of the scheduler made here: a lost worker's job is let go (so that it can be
        replaced) after 2 s. Lost cells are retried by :class:`DaskExecutor`, not by Dask."""
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


def cluster_client(spec: ClusterSpec):
    """The cluster for ``spec`` and a client of it (a SLURM cluster is scaled to ``spec.jobs``)."""
    from distributed import Client

    cluster = slurm_cluster(spec) if spec.kind == "slurm" else local_cluster(spec)
    if spec.kind == "slurm":
        cluster.scale(jobs=spec.jobs)
    return cluster, Client(cluster)


@contextlib.contextmanager
def cluster_executor(spec: ClusterSpec, cell_fn: Callable = run_cell_on_dask_worker) -> Iterator[DaskExecutor]:
    """A :class:`DaskExecutor` whose cells run on the cluster's workers, one cell per worker at a time; the
    cluster is shut down (its jobs cancelled) when the block ends. ``cell_fn``: what a worker runs for a cell."""
    import dask

    with dask.config.set(spec.dask_settings()):
        cluster = client = None
        try:
            cluster, client = cluster_client(spec)
            yield DaskExecutor(client, cluster, jobs=spec.jobs, retries=spec.retries,
                               no_worker_timeout_s=spec.no_worker_timeout_s, cell_fn=cell_fn,
                               walltime_s=walltime_seconds(spec.walltime) if spec.kind == "slurm" else None)
        finally:
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()


def describe(spec: ClusterSpec) -> str:
    where = f"partition {spec.partition}" if spec.partition else "the default partition"
    listen = f"interface {spec.interface}" if spec.interface else "the default interface"
    return (f"{spec.kind} cluster: {spec.jobs} job(s) on {where}, each {spec.cpus} CPU(s), {spec.gpus} GPU(s), "
            f"{spec.memory}, {spec.walltime}; one cell per job at a time (cwd {os.path.relpath(REPO)}"
            f"{'; job logs in ' + paths.shown(spec.log_dir) if spec.log_dir else ''}); "
            f"scheduler on {listen}; a lost cell is retried {spec.retries} time(s); no worker for "
            f"{spec.no_worker_timeout_s:g} s stops the grid")
