"""Where a study's cells run, from the command line's flags: a local pool of ``--workers``, a Dask scheduler
(``--scheduler``) or the jobs of a SLURM or local Dask cluster (``--cluster`` and its resources), the same flags for
``reproduce`` and every study's command that trains (:func:`add_executor_arguments`), checked once before any work
(:func:`check_executor_arguments`); ``--set`` of a study whose design fixes what its runs compute takes only where
they run (:func:`checked_execution`); and a study's policy run on the executor the flags name (:func:`run_policy`).
On a cluster the executor changes, nothing else: each cell chooses its threads on its own node.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from typhoon.config import EXECUTION_FIELDS, RunConfig, allowed_of, parse_overrides
from typhoon.profiles import Profile, get_profile


def cluster_spec(args: argparse.Namespace, out_dir):
    """The Dask cluster the command line's flags ask for (``--cluster`` and its resources), over the profile's
    ``[<profile>.cluster]`` table; its jobs' logs in ``<out_dir>/logs/slurm``."""
    from typhoon.runner import cluster

    flags = {name: getattr(args, name) for name in ("partition", "account", "gpus", "cpus", "memory", "walltime", "jobs",
                                                    "interface", "retries", "no_worker_timeout_s")}
    flags["scheduler_options"] = parse_scheduler_options(args.scheduler_option)
    flags["log_dir"] = str(Path(out_dir) / "logs" / "slurm")  # not the working folder
    return cluster.ClusterSpec.from_settings({**get_profile(args.profile).cluster, "kind": args.cluster}, flags)


def run_policy(policy, out_dir, args: argparse.Namespace):
    """A study's policy (:mod:`typhoon.studies.kl_original.policy`) on the executor the command line's flags name: the
    jobs of ``--cluster``, the workers of ``--scheduler``, else a local pool of ``--workers``; its Summary."""
    from typhoon.runner.study import run_study

    if args.cluster:
        from typhoon.runner import cluster

        spec = cluster_spec(args, out_dir)
        print(cluster.describe(spec), flush=True)
        with cluster.cluster_executor(spec) as executor:  # the cells choose threads and device on their node
            return run_study(policy, Path(out_dir), workers=1, executor=executor)
    if args.scheduler:
        from typhoon.runner.dask_executor import dask_executor

        return run_study(policy, Path(out_dir), workers=1, executor=dask_executor(args.scheduler))
    return run_study(policy, Path(out_dir), workers=args.workers, profile_workers=get_profile(args.profile).workers)


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a study's cells run: a local pool of ``--workers``, a Dask scheduler, or the jobs of a SLURM or local
    Dask cluster and their resources; the same flags for ``reproduce`` and every study's command that trains."""
    add = parser.add_argument
    add("--workers", type=int, help="cells run at once, each in its own process (default: the profile's `workers`; "
        "on CPU they share the cores)")
    add("--scheduler", help="address of a Dask scheduler (tcp://host:8786) to spread cells over machines")
    add("--cluster", choices=("slurm", "local"), help="run the cells as jobs of a SLURM cluster (dask-jobqueue; one "
        "cell per job, the jobs' resources from the profile's [<profile>.cluster] table and the flags below), or of a "
        "local Dask cluster (to try the set-up)")
    add("--partition", help="--cluster: SLURM partition")
    add("--account", help="--cluster: SLURM account")
    add("--gpus", type=int, help="--cluster: GPUs per job")
    add("--cpus", type=int, help="--cluster: CPU cores per job")
    add("--memory", help="--cluster: memory per job, e.g. 32GB")
    add("--walltime", help="--cluster: time limit per job, e.g. 04:00:00")
    add("--jobs", type=int, help="--cluster: jobs (cells at once), kept alive while cells remain")
    add("--interface", help="--cluster: network interface the scheduler and workers listen on, e.g. ib0 (lo: this "
        "machine only)")
    add("--scheduler-option", action="append", metavar="KEY=VALUE", help="--cluster: an option of the Dask "
        "scheduler, e.g. port=8786, host=10.0.0.1, dashboard_address=127.0.0.1:0 (adds to the profile's "
        "scheduler_options)")
    add("--retries", type=int, help="--cluster: times a cell whose job was lost runs again before it is recorded "
        "failed (default 2)")
    add("--no-worker-timeout", type=float, metavar="SECONDS", dest="no_worker_timeout_s",
        help="--cluster: stop (exit 2) when no worker has been alive this long (default 3600)")


def check_executor_arguments(args: argparse.Namespace) -> None:
    """The executor flags of a command that trains (:func:`add_executor_arguments`), checked once, before any
    work: ValueError naming what is wrong."""
    if args.cluster and args.scheduler:
        raise ValueError("give --cluster or --scheduler, not both")
    if args.workers is not None:
        allowed_of(Profile, "workers").check("--workers", args.workers)


def checked_execution(args: argparse.Namespace, instead: str = "") -> dict:
    """Where a study's cells run (``--set device=... / num_threads=...``, :func:`execution_overrides`), each value
    checked as its field allows, the device seen on this machine unless the cells run on others (``--cluster``,
    ``--scheduler``), with the executor flags (:func:`check_executor_arguments`): the overrides the study's cells
    are placed with, parsed once."""
    from typhoon import machine

    check_executor_arguments(args)
    overrides = execution_overrides(args.set, instead)
    for name, value in overrides.items():
        allowed_of(RunConfig, name).check(f"--set {name}", value)
    if not (args.cluster or args.scheduler):
        machine.check_device_visible(overrides.get("device", RunConfig.device))
    return overrides


def execution_overrides(items: list[str] | None, instead: str = "") -> dict:
    """``--set`` of a study whose design fixes what its runs compute: only where they run (``device``,
    ``num_threads``); ValueError naming any other key, and ``instead``: what the study offers in its place."""
    overrides = parse_overrides(items)
    other = sorted(set(overrides) - set(EXECUTION_FIELDS))
    if other:
        raise ValueError(f"--set {', '.join(other)}: the study's design fixes what its runs compute; here --set "
                         f"takes only where they run: {', '.join(EXECUTION_FIELDS)}" + (f"; {instead}" if instead else ""))
    return overrides


def parse_scheduler_options(pairs: list[str] | None) -> dict | None:
    """``--scheduler-option KEY=VALUE`` pairs as a dict (integers as ints, none/true/false as such)."""
    if not pairs:
        return None
    literals = {"none": None, "true": True, "false": False}
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--scheduler-option must be KEY=VALUE, got {pair!r}")
        value = value.strip()
        options[key.strip()] = (int(value) if value.lstrip("-").isdigit()
                                else literals.get(value.lower(), value))
    return options
