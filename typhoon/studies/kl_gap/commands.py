"""The KL-gap study to the registry and the command line: ``python -m typhoon kl-gap``, its flags and their checks
(light: argparse and the design; what trains is imported when the command runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from typhoon.config import RunConfig, allowed_of
from typhoon.paths import check_can_write
from typhoon.runner import add_executor_arguments, checked_execution
from typhoon.studies.kl_gap.design import cause_named
from typhoon.studies.study import Study


class KlGap(Study):
    name = "kl-gap"
    summary = ("Typhoon's phase 1 under each candidate cause of the gap to the paper's 7e-4 nats/token (resumes), "
               "then its table (typhoon/studies/kl_gap/)")

    def add_commands(self, sub: argparse._SubParsersAction) -> None:
        parser = sub.add_parser("kl-gap", help=f"the KL-gap study: {self.summary}", description=self.summary)
        parser.add_argument("--out", default="results/kl_gap", help="the study's folder (default results/kl_gap)")
        parser.add_argument("--cause", action="append", help="run only this cause (repeatable; default: all)")
        parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default 0 1 2)")
        parser.add_argument("--table-only", action="store_true",
                            help="train nothing: write the table from the states there")
        parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                            help="where the cells run: device=... or num_threads=... (the design fixes the rest)")
        add_executor_arguments(parser)
        parser.set_defaults(profile="cpu", func=run, checks=check, trains=True)


def check(args: argparse.Namespace) -> dict:
    """Before any work: the causes and seeds named, where the cells run, the output folder; the placement."""
    execution = checked_execution(args)
    for name in args.cause or []:
        cause_named(name)
    for seed in args.seeds or []:
        allowed_of(RunConfig, "seed").check("--seeds", seed)
    check_can_write(args.out)
    return execution


def run(args: argparse.Namespace) -> int:
    """The missing states of the study through the study loop (its finish writes the table), then the table."""
    from typhoon.runner import run_policy
    from typhoon.studies.kl_gap.policy import SEEDS, KlGapCauses, write_table

    out = Path(args.out)
    if args.table_only:
        table = write_table(out)
    else:
        summary = run_policy(KlGapCauses(args.cause, seeds=args.seeds or SEEDS, execution=args.checked), out, args)
        if not summary.ok:
            return 1
        from typhoon.studies.kl_gap.table import kl_gap_table

        table = kl_gap_table(out)
    print(table[["cause", "n_states", "kl", "kl_ci_low", "kl_ci_high", "ratio_to_paper", "change_vs_baseline",
                 "raises_kl", "closes_gap"]].to_string(index=False))
    return 0


STUDY = KlGap()
