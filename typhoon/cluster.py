"""Running a grid beyond one machine: its cells as jobs of a SLURM cluster (``reproduce --cluster slurm``).

A grid's cells are independent notebook executions (:func:`typhoon.grid.run_cell`), so any
``concurrent.futures`` executor can run them; :func:`typhoon.grid.run_grid` takes one. This module makes
that executor from a Dask cluster:

- ``slurm``: dask-jobqueue's ``SLURMCluster``. Each SLURM job is one Dask worker that runs one cell at a
  time (a ``cell`` resource of 1, and every cell asks for it), with the job's GPUs, CPUs, memory, time
  limit and partition from the profile's ``[<profile>.cluster]`` table, overridden by the command line.
  ``jobs`` workers are requested (``cluster.scale(jobs=...)``); the output folder and the repository must
  be on a file system the nodes share (the records are written there, each under its own lock).
- ``local``: a Dask ``LocalCluster`` on this machine with the same resources and the same code path, for
  trying a cluster set-up (and for the tests, which have no SLURM).

``--scheduler tcp://HOST:8786`` (:func:`typhoon.grid.dask_executor`) is the other way: workers started by
hand. On a cluster the cells choose their own threads (all the cores the job was given; the prologue sets
``OMP_NUM_THREADS``) and device (``auto``: the job's GPU).

Dask and dask-jobqueue are imported only when a cluster is made (the ``cluster`` extra).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field, fields
from pathlib import Path

KINDS = ("slurm", "local")
REPO = Path(__file__).resolve().parents[1]


@dataclass
class ClusterSpec:
    """The resources of each job (one job = one Dask worker = one cell at a time) and how many jobs."""

    kind: str = "slurm"
    partition: str | None = None  # SLURM partition (#SBATCH -p); None: the cluster's default
    account: str | None = None  # SLURM account (#SBATCH -A)
    gpus: int = 0  # GPUs per job (#SBATCH --gres=gpu:N)
    cpus: int = 4  # CPU cores per job (#SBATCH --cpus-per-task)
    memory: str = "16GB"  # memory per job (#SBATCH --mem)
    walltime: str = "02:00:00"  # time limit per job (#SBATCH -t); a job runs cells until it ends
    jobs: int = 4  # jobs (workers) requested at once
    job_extra: list[str] = field(default_factory=list)  # more #SBATCH directives, e.g. "--constraint=a100"
    prologue: list[str] = field(default_factory=list)  # shell lines run before the worker starts

    def __post_init__(self):
        problems = []
        if self.kind not in KINDS:
            problems.append(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("gpus", "cpus", "jobs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "gpus" else 1):
                problems.append(f"{name} must be an integer >= {0 if name == 'gpus' else 1}, got {value!r}")
        for name in ("job_extra", "prologue"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
                problems.append(f"{name} must be a list of strings, got {value!r}")
        if problems:
            raise ValueError("bad cluster settings: " + "; ".join(problems))

    @classmethod
    def from_settings(cls, table: Mapping | None, overrides: Mapping | None = None) -> ClusterSpec:
        """From a profile's ``cluster`` table, then the command line's values (None = not given)."""
        known = {f.name for f in fields(cls)}
        values = {**dict(table or {}), **{k: v for k, v in dict(overrides or {}).items() if v is not None}}
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


# Each cell asks for one unit of this worker resource, and each worker has one: one cell per job at a time.
CELL_RESOURCE = {"cell": 1}


def slurm_cluster(spec: ClusterSpec):
    """dask-jobqueue's ``SLURMCluster`` for ``spec`` (starts a scheduler here; submits nothing until scaled)."""
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as err:
        raise ValueError("--cluster slurm needs dask-jobqueue: pip install dask-jobqueue (the `cluster` extra)") from err
    return SLURMCluster(cores=spec.cpus, processes=1, memory=spec.memory, walltime=spec.walltime,
                        queue=spec.partition, account=spec.account, job_name="typhoon-cell",
                        job_extra_directives=spec.directives(), job_script_prologue=spec.job_prologue(),
                        worker_extra_args=["--resources", "cell=1"], python=sys.executable)


def local_cluster(spec: ClusterSpec):
    """A Dask ``LocalCluster`` with ``spec.jobs`` workers of one cell each, in this process's threads."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=spec.jobs, threads_per_worker=1, processes=False, resources=CELL_RESOURCE,
                        dashboard_address=None)


def job_script(spec: ClusterSpec) -> str:
    """The batch script each SLURM job would run (for checking a set-up; submits nothing)."""
    cluster = slurm_cluster(spec)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


@contextlib.contextmanager
def cluster_executor(spec: ClusterSpec) -> Iterator[Executor]:
    """A ``concurrent.futures`` executor whose tasks run on the cluster's workers, one cell per worker at a
    time; the cluster is shut down (its jobs cancelled) when the block ends."""
    from distributed import Client

    cluster = slurm_cluster(spec) if spec.kind == "slurm" else local_cluster(spec)
    try:
        if spec.kind == "slurm":
            cluster.scale(jobs=spec.jobs)
        with Client(cluster) as client:
            yield client.get_executor(resources=CELL_RESOURCE, pure=False)
    finally:
        cluster.close()


def describe(spec: ClusterSpec) -> str:
    where = f"partition {spec.partition}" if spec.partition else "the default partition"
    return (f"{spec.kind} cluster: {spec.jobs} job(s) on {where}, each {spec.cpus} CPU(s), {spec.gpus} GPU(s), "
            f"{spec.memory}, {spec.walltime}; one cell per job at a time (cwd {os.path.relpath(REPO)})")
