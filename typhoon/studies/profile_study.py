"""A profile's study run, and run again from its records, by asking the registry which study the profile is:
``reproduce`` (:func:`reproduce`, with its options built once from the command line, :class:`ReproduceOptions`),
``reanalyse`` (:func:`reanalyse`) and the results page's block (:func:`pages_of_folder`).

Every flag means the same on every path, or is refused by name before anything runs: a grid honours them all; a
sequential design refuses what it cannot honour (:meth:`typhoon.studies.study.Study.check_options`); on a cluster
(``--cluster``, ``--scheduler``) the executor changes, nothing else, and the estimate is skipped (it would
calibrate this machine, not the nodes).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from typhoon import paths
from typhoon.config import RunConfig
from typhoon.profiles import get_profile
from typhoon.runner import cluster_spec
from typhoon.studies.registry import study_named, study_of_folder, study_of_profile

if TYPE_CHECKING:  # the loop (and pandas with it) is imported when a study runs: the quick commands import this module
    from typhoon.runner import CellExecutor, Summary


@dataclass(frozen=True)
class ReproduceOptions:
    """What ``reproduce`` was asked to do, whatever runs the cells."""

    profile: str
    configs: tuple[RunConfig, ...]  # every cell of the profile's grid, ``--set`` applied: resolved once, by from_args' caller
    out_dir: str | None = None
    workers: int | None = None
    analysis: bool = True
    allow_mixed_precision: bool = False
    commit_records: bool = False
    reuse: bool = True
    reuse_from: tuple[str, ...] = ()
    estimate: bool = True  # calibrate and print the expected time before running
    estimate_only: bool = False  # --estimate: only that, then stop

    @classmethod
    def from_args(cls, args: argparse.Namespace, configs: list[RunConfig]) -> ReproduceOptions:
        """The options of the command line ``args``, for the grid's cells ``configs`` (``Profile.grid``)."""
        return cls(profile=args.profile, configs=tuple(configs), out_dir=args.out, workers=args.workers,
                   analysis=not args.no_analysis, allow_mixed_precision=args.allow_mixed_precision,
                   commit_records=args.commit_records, reuse=not args.no_reuse,
                   reuse_from=tuple(args.reuse_from or ()), estimate=not args.no_estimate,
                   estimate_only=args.estimate)

    def __post_init__(self):
        """Checked once, when made: the flags the profile's study cannot honour are refused by name (a sequential
        design: ``--reuse-from``, ``--allow-mixed-precision``, ``--estimate``), before anything runs."""
        study_of_profile(self.profile).check_options(self)

    def on_cluster(self) -> ReproduceOptions:
        """The options for cells that run on other machines: one cell per worker, no estimate of this one."""
        return dataclasses.replace(self, workers=1, estimate=False)

    def run(self, executor=None):
        """Run the profile's study (its design look by look, or its whole grid); the Summary (``estimate_only``:
        the GridEstimate, nothing run)."""
        if self.estimate_only:
            from typhoon.runner import estimate

            return estimate.estimate_only(self.profile, self.out_dir, workers=self.workers, configs=self.configs,
                                 analysis=self.analysis)
        return reproduce(self.profile, self.out_dir, workers=self.workers, configs=self.configs,
                         analysis=self.analysis, executor=executor, allow_mixed_precision=self.allow_mixed_precision,
                         commit_records=self.commit_records, reuse=self.reuse, reuse_from=self.reuse_from,
                         estimate=self.estimate)


def run_on_cluster(options: ReproduceOptions, args: argparse.Namespace) -> int:
    """``reproduce --cluster``: the cells as jobs of a Dask cluster (:mod:`typhoon.runner.cluster`), a plain grid
    or a sequential design alike; ``args``: the cluster flags of the command line."""
    from typhoon.runner import cluster

    spec = cluster_spec(args, paths.resolve_out_dir(args.out, args.profile))
    if args.job_script:
        print(cluster.job_script(spec))
        return 0
    print(cluster.describe(spec), flush=True)
    with cluster.cluster_executor(spec) as executor:  # the cells choose threads and device on their node
        summary = options.on_cluster().run(executor)
    return 0 if summary.ok else 1


def reproduce(profile: str, out_dir: str | Path | None = None, *, workers: int | None = None,
              configs: Sequence[RunConfig] | None = None, analysis: bool = True, executor: CellExecutor | None = None,
              allow_mixed_precision: bool = False, commit_records: bool = False, reuse: bool = True,
              reuse_from=(), estimate: bool = False) -> Summary:
    """Run a profile's study (the one its ``study`` names: its grid, or its sequential design look by look), then
    its analysis; resumable.

    ``out_dir`` None: the profile's own folder, ``<repo>/outputs/<profile>``. ``configs``: every cell of the
    profile's grid as the caller resolved it once (``Profile.grid`` with the command line's ``--set``); None: the
    profile's own grid. The rest is :func:`typhoon.runner.study.run_study`'s and the study's policy's (a grid's:
    :class:`typhoon.studies.grid.policy.FixedGrid`: reuse of equal records, mixed numerics, the estimate).
    """
    from typhoon.runner import run_study

    spec = get_profile(profile)
    configs = spec.grid() if configs is None else list(configs)
    if {config.profile for config in configs} - {spec.name}:
        raise ValueError(f"reproduce {spec.name!r} was given cells of profile(s) "
                         f"{sorted({c.profile for c in configs} - {spec.name})}: give it the profile's own (Profile.grid)")
    policy = study_named(spec.study).policy(spec, configs, analysis=analysis, reuse=reuse, reuse_from=reuse_from,
                                                allow_mixed_precision=allow_mixed_precision, estimate=estimate)
    return run_study(policy, paths.resolve_out_dir(out_dir, spec.name), workers=workers, executor=executor,
                     commit_records=commit_records, profile_workers=spec.workers)


def reanalyse(out_dir: str | Path) -> Path:
    """The notebooks and report of the study in ``out_dir`` again from its records, training nothing (its study
    says how: a grid's walkthroughs and analysis notebooks, a sequential design's tables and notebook 50); the
    report's path."""
    out_dir = Path(out_dir).resolve()  # the notebooks run in notebooks/
    return study_of_folder(out_dir).reanalyse(out_dir)


def pages_of_folder(out_dir: str | Path):
    """What the study in ``out_dir`` puts on the results page, as its study says (``results-readme`` asks it)."""
    return study_of_folder(Path(out_dir)).pages(Path(out_dir))
