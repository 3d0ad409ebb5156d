"""The kl-original study to the registry and the command line: ``python -m typhoon kl-original rows | curve |
finetune | table``, each with only its own flags, and their checks before any work (light: argparse and the
design; what trains is imported when the command runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from typhoon.config import RunConfig, allowed_of
from typhoon.names import canonical_task, check_task, said
from typhoon.paths import check_can_write
from typhoon.runner import add_executor_arguments, checked_execution
from typhoon.studies.kl_original.design import (
    CURVES,
    ROWS,
    SEEDS,
    TASKS,
    check_finetune_seeds,
    curve_named,
    row_named,
)
from typhoon.studies.study import Study

# what --set offers in place of a change of what the runs compute
INSTEAD = ("another rule, batch order or length is another registered row or curve: --row (rows), --curve "
           + " / ".join(CURVES) + " (curve)")


class KlOriginal(Study):
    name = "kl-original"
    summary = ("the paper's 2023 calibration rules one at a time (rows), over its long MLM phase (curve), fine-tuned "
               "against random (finetune); each part resumes, its cells on any executor (typhoon/studies/kl_original/)")

    def add_commands(self, sub: argparse._SubParsersAction) -> None:
        study = sub.add_parser("kl-original", help=f"the kl-original study: {self.summary}", description=self.summary)
        parts = study.add_subparsers(dest="part", required=True, metavar="{rows,curve,finetune,table}")
        rows = _trains(parts.add_parser("rows", help="each registered row's phase-1 state at 1 MLM epoch"))
        rows.add_argument("--row", action="append", help="run only this row (repeatable; default: all)")
        curve = _trains(parts.add_parser("curve", help="a curve's runs over the long MLM phase, epoch by epoch"))
        curve.add_argument("--curve", default="all", help="which curve: " + ", ".join(
            f"{c.name} ({c.registered}{'; --set device=' + c.device if c.device else ''})" for c in CURVES.values())
            + " (default all)")
        curve.add_argument("--epochs", type=int, default=1, help="advance every run until each has this many MLM "
                           "epochs, at most its plan (MRPC 100, CoLA 80) (default 1; never fewer than a run has)")
        curve.add_argument("--epochs-per-cell", type=int, default=1, help="MLM epochs a cell trains before the next "
                           "look (default 1; on a GPU, where a cell's set-up costs as much as an epoch, the whole "
                           "plan); every epoch's files and resume state are written as it ends")
        curve.add_argument("--checkpoints", default=".kl_original_checkpoints", help="the folder of the runs' resume "
                           "states, ~0.3 GB each, not committed (default .kl_original_checkpoints)")
        curve.add_argument("--rehearse", type=int, metavar="N", help="try the machinery on N training and dev "
                           "examples per run, into a folder of its own (never the study's: its tables refuse such runs)")
        _trains(parts.add_parser("finetune", help="the fine-tuned comparison's whole cells, records under finetune/"))
        table = parts.add_parser("table", help="train nothing: write the tables and README.md from the states in --out")
        table.add_argument("--out", default="results/kl_original", help="the study's folder (default results/kl_original)")
        table.set_defaults(func=write, checks=check_table)


def _trains(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The flags every part that trains takes: its folder, tasks, seeds, where its cells run."""
    parser.add_argument("--out", default="results/kl_original", help="the study's folder (default results/kl_original)")
    parser.add_argument("--tasks", nargs="+", help="tasks: mrpc, cola (default both)")
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default 0 1 2)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="where the cells run: device=... or "
                        "num_threads=... (the design fixes the rest)")
    add_executor_arguments(parser)
    parser.set_defaults(profile="cpu", func=run, checks=check, trains=True)
    return parser


def check(args: argparse.Namespace) -> dict:
    """Before any work: every name and value of the part, what the registered design allows, the output folder;
    the placement of its cells (``--set``)."""
    execution = checked_execution(args, INSTEAD)
    for i, task in enumerate(args.tasks or []):  # the study's tasks, in any case
        said(check_task(task, among=TASKS))
        args.tasks[i] = canonical_task(task)
    for seed in args.seeds or []:
        allowed_of(RunConfig, "seed").check("--seeds", seed)
    tasks, seeds = tuple(args.tasks or TASKS), tuple(args.seeds or SEEDS)
    if args.part == "rows":
        from typhoon.studies.kl_original.runs import check_row_states  # light: the states' run.json

        for name in args.row or []:
            row_named(name)
        check_row_states(Path(args.out), args.row or [row.name for row in ROWS], tasks, seeds)
    elif args.part == "finetune":
        check_finetune_seeds(args.seeds or [], tasks)
    else:
        from typhoon.studies.kl_original.runs import (
            check_curve,  # light: the curve's run.json and resume notes
        )

        curve_named(args.curve)
        allowed_of(RunConfig, "mlm_epochs").check("--epochs", args.epochs)
        if args.epochs < 1:  # a curve advances its runs by MLM epochs: 0 would train nothing
            raise ValueError(f"--epochs {args.epochs}: a curve runs to at least 1 MLM epoch")
        if args.epochs_per_cell < 1:
            raise ValueError(f"--epochs-per-cell {args.epochs_per_cell}: a cell trains at least 1 MLM epoch")
        if args.rehearse is not None and args.rehearse < 1:
            raise ValueError(f"--rehearse {args.rehearse}: a rehearsal needs at least 1 example per run")
        check_curve(Path(args.out), Path(args.checkpoints), args.epochs, tasks, seeds, args.curve,
                    RunConfig(**execution).device, args.rehearse)
    check_can_write(args.out)
    return execution


def check_table(args: argparse.Namespace) -> None:
    """Before the tables: every curve run in the folder is a registered one."""
    from typhoon.studies.kl_original.runs import check_curve_runs  # light: the curve runs' run.json

    check_curve_runs(Path(args.out))


def run(args: argparse.Namespace) -> int:
    """A part's missing cells, through the study loop on the executor the flags name, in ``--out``; the part's
    finish writes the study's tables."""
    from typhoon.runner import run_policy
    from typhoon.studies.kl_original import policy

    out, tasks, seeds = Path(args.out), tuple(args.tasks or TASKS), tuple(args.seeds or SEEDS)
    if args.part == "rows":
        part = policy.KlOriginalRows(args.row, tasks, seeds, args.checked)
    elif args.part == "curve":
        part = policy.KlOriginalCurve(Path(args.checkpoints), args.epochs, tasks, seeds, args.checked, args.curve,
                                      args.epochs_per_cell, args.rehearse)
    else:
        part = policy.KlOriginalFinetune(tasks, args.seeds, args.checked)
    return 0 if run_policy(part, out, args).ok else 1


def write(args: argparse.Namespace) -> int:
    """``kl-original table``: the study's tables and README from the states in ``--out``; the verdicts."""
    from typhoon.studies.kl_original.policy import write_tables

    tables = write_tables(Path(args.out))
    print(tables["predictions"][["prediction", "verdict", "claim"]].to_string(index=False))
    return 0


STUDY = KlOriginal()
