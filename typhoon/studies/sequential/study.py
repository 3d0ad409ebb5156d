"""The sequential study to the registry and the command line: a profile's pre-registered sequential design (the
decisive studies), run look by look; its commands ``decisive-design`` (print the design) and ``decisive-tables``
(its tables, notebook 50 and report again from the records); and the README's answer table. Light: what runs is
imported when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from typhoon.studies.study import Study


class Sequential(Study):
    name = "sequential"
    summary = "a pre-registered sequential design: seeds added look by look until every comparison is decided"

    def add_commands(self, sub: argparse._SubParsersAction) -> None:
        design = sub.add_parser("decisive-design", help="print the pre-registered sequential design of a profile "
                                "(comparisons, margins, looks, boundaries, cap, simulated power)")
        design.add_argument("--profile", default="decisive", help="a profile with a [<profile>.design] table "
                            "(default: decisive)")
        design.set_defaults(func=_design, checks=_check)
        tables = sub.add_parser("decisive-tables", help="re-analyse a sequential study's records without training: "
                                "rewrite its stats/, results.csv, looks figure, notebook 50 and report.html; print the "
                                "verdicts")
        tables.add_argument("out", help="the study's output folder, e.g. results/decisive")
        tables.add_argument("--profile", default="decisive", help="a profile with a [<profile>.design] table "
                            "(default: decisive)")
        tables.add_argument("--no-report", action="store_true", help="the tables only: no notebook 50, no report.html")
        tables.set_defaults(func=_tables, checks=_check)

    def policy(self, spec, configs: list, *, analysis: bool = True, reuse: bool = True, reuse_from=(),
               allow_mixed_precision: bool = False, estimate: bool = False):
        from typhoon.studies.sequential.policy import SequentialDesign

        refuse_flags(spec.name, reuse_from=bool(reuse_from), allow_mixed_precision=allow_mixed_precision)
        return SequentialDesign(spec, configs, analysis=analysis, reuse=reuse)

    def check_options(self, options) -> None:
        refuse_flags(options.profile, reuse_from=bool(options.reuse_from),
                     allow_mixed_precision=options.allow_mixed_precision, estimate_only=options.estimate_only)

    def pages(self, out_dir: Path | None = None):
        from typhoon.studies.sequential.pages import PAGES

        return PAGES

    def reanalyse(self, out_dir: Path) -> Path:
        from typhoon.profiles import get_profile
        from typhoon.records import study_profile
        from typhoon.studies.sequential import decisive
        from typhoon.studies.sequential.policy import rewrite_tables_and_report

        spec = get_profile(study_profile(Path(out_dir)))
        decisive.check_has_records(spec, Path(out_dir))  # before anything is written
        rewrite_tables_and_report(spec.name, out_dir)  # its tables are part of its analysis; it takes the lock itself
        return Path(out_dir) / "report.html"

    def update_answer(self, readme: str | Path | None = None, check: bool = False) -> bool:
        """The README's answer table from the sequential studies' committed tables (``results-readme --answer``)."""
        from typhoon.studies.sequential.answer import update_answer

        return update_answer(readme, check=check)


def refuse_flags(profile: str, *, reuse_from: bool = False, allow_mixed_precision: bool = False,
                 estimate_only: bool = False) -> None:
    """ValueError naming each reproduce flag a sequential design cannot honour: it trains look by look and reuses
    only the records its design registers, so ``--reuse-from`` and ``--allow-mixed-precision`` (a seed's arms must
    share one kernel family) are refused; ``--estimate`` prices a whole grid, which its looks decide."""
    refused = [flag for flag, given in (("--reuse-from", reuse_from), ("--allow-mixed-precision", allow_mixed_precision))
               if given]
    if refused:
        raise ValueError(f"{' and '.join(refused)} cannot apply to the sequential design of profile {profile!r}: it "
                         f"reuses only the records its design registers ([{profile}.design] reuse_from), and every arm "
                         "of a seed must train on one kernel family; drop the flag(s)")
    if estimate_only:
        raise ValueError(f"--estimate prices a whole grid; profile {profile!r} is a sequential design whose looks "
                         f"decide how many cells run: `python -m typhoon decisive-design --profile {profile}` shows "
                         "its plan")


def _check(args: argparse.Namespace) -> None:
    from typhoon.profiles import get_profile

    get_profile(args.profile).require_design()
    if args.command == "decisive-tables" and not Path(args.out).is_dir():
        raise FileNotFoundError(f"no study folder {args.out}: name a sequential study's output folder, "
                                "e.g. results/decisive")


def _design(args: argparse.Namespace) -> int:
    """``typhoon decisive-design``: a profile's pre-registered sequential design."""
    from typhoon.studies.sequential.design import describe_design, study_design

    print(describe_design(study_design(args.profile)))
    return 0


def _tables(args: argparse.Namespace) -> int:
    """``typhoon decisive-tables``: a sequential study re-analysed from its records, without training."""
    from typhoon.paths import shown
    from typhoon.studies.sequential.policy import rewrite_tables_and_report

    for line in rewrite_tables_and_report(args.profile, args.out, report=not args.no_report):
        print(line)
    if not args.no_report:
        print(f"report: {shown(Path(args.out) / 'report.html')}")
    return 0


STUDY = Sequential()
