"""Command line: ``python -m typhoon run ...`` (one cell) and ``python -m typhoon reproduce ...`` (a grid).

Every bad value is refused with a message naming it, before anything is written, and a non-zero exit.
An output path that cannot be written (a file in the way, no permission, a full disk) exits 2 with a
message naming the path. Ctrl-C (SIGINT) or SIGTERM stops ``run`` and ``reproduce`` cleanly: no partial
record, lock or temp file is left, the command that resumes is printed, and the exit status is 130 / 143
(:mod:`typhoon.runner.stop`).
``--help`` and ``profiles`` answer without importing torch, transformers, pandas or papermill (seconds
of imports): those are imported inside the commands that use them (tests/test_cli_imports.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from typhoon.cli_checks import check_input, missing_bundle
from typhoon.masking import plugins, strategy_help, strategy_names
from typhoon.paths import (
    OutputPathError,
    absolute_path_variables,
    describe_os_error,
    is_file_system_error,
    resolve_out_dir,
    shown,
)
from typhoon.profiles import load_profiles
from typhoon.records import LockedError
from typhoon.runner import (  # light: stop and options; the options import the runners when they run
    as_interrupted,
    execution_overrides,
    remove_empty_folders,
    resume_command,
    run_on_cluster,
    run_policy,
    stop_on_signals,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="typhoon", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one cell: MLM adaptation, fine-tuning, dev metrics, run record",
                         epilog=strategy_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--task", required=True, help="GLUE task, e.g. mrpc, cola")
    run.add_argument("--backbone", help="registry name, local folder or hub id (default: the profile's first backbone)")
    run.add_argument("--strategy", default="random",
                     help=" | ".join(strategy_names()) + " | MODULE:CLASS, a strategy in a file of your own "
                     "(docs/extending.md; with --help its parameters are listed below); default: random")
    run.add_argument("--seed", type=int, default=0, help="the cell's seed: data order, masks, new weights (default 0)")
    run.add_argument("--profile", default="cpu", help="profile whose settings the run starts from (default cpu: the main job's settings)")
    run.add_argument("--out", help="output folder (records land in <out>/runs/...); default: <repo>/outputs/<profile>")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="override any RunConfig field")
    run.add_argument("--force", action="store_true", help="rerun even if a complete record exists")
    run.set_defaults(func=_run)

    rep = sub.add_parser("reproduce", help="run a profile's grid (cells in worker processes), then its walkthrough and analysis notebooks")
    rep.add_argument("--profile", default="cpu", help=f"one of {sorted(load_profiles())} (default: cpu, the main job)")
    rep.add_argument("--out", help="output folder; default: <repo>/outputs/<profile> (a reference run: results/<profile>)")
    add_executor_arguments(rep)
    rep.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a RunConfig field in every cell")
    rep.add_argument("--job-script", action="store_true",
                     help="--cluster slurm: print the batch script each job would run, and exit")
    rep.add_argument("--estimate", action="store_true",
                     help="calibrate on this machine (about a minute), print the expected time per cell and for the "
                     "grid, and exit without running (every reproduce prints it first)")
    rep.add_argument("--no-estimate", action="store_true", help="skip the estimate that reproduce prints first")
    rep.add_argument("--no-analysis", action="store_true", help="run the grid only (no statistics notebooks/report)")
    rep.add_argument("--allow-mixed-precision", action="store_true",
                     help="resume a grid whose finished records used other numerics (precision, device kind) than "
                     "this machine would; the tables and the report then say the mix")
    rep.add_argument("--no-reuse", action="store_true",
                     help="train every missing cell here, even one whose resolved config equals a finished run of "
                     "another profile (by default that record is copied, marked reused_from)")
    rep.add_argument("--reuse-from", action="append", default=[], metavar="DIR",
                     help="also reuse equal records (same run, same numerics as this machine) from this output folder, "
                     "e.g. a committed reference run such as results/cpu, which is never searched unless named "
                     "(repeatable; may be the same profile)")
    rep.add_argument("--commit-records", action="store_true",
                     help="git-commit each finished cell's record as it completes, then the tables and report "
                     "(for a reference run under results/<profile>)")
    rep.set_defaults(func=_reproduce)

    readme = sub.add_parser("results-readme", help="rewrite a study folder's block of docs/results.md from its tables "
                            "(a reference run's Results block, a sequential study's decisive block, a schedules grid's "
                            "schedules block), or with --answer the README's answer table")
    readme.add_argument("reference", nargs="?",
                        help="the study's folder, e.g. results/cpu, results/decisive or results/schedules")
    readme.add_argument("--answer", action="store_true",
                        help="rewrite README.md's answer table from the decisive studies (results/decisive-mlm, results/decisive)")
    readme.add_argument("--readme", help="the Markdown page to update (default: docs/results.md; with --answer README.md)")
    readme.add_argument("--check", action="store_true", help="change nothing; exit 1 if the block is out of date")
    readme.set_defaults(func=_results_readme)

    check = sub.add_parser("check-report", help="render a report in headless Chromium and list what a reader would see wrong")
    check.add_argument("report", help="a report.html, or the output folder that holds one")
    check.set_defaults(func=_check_report)

    sub.add_parser("profiles", help="list the profiles and their grid sizes").set_defaults(func=_profiles)

    design = sub.add_parser("decisive-design", help="print the pre-registered sequential design of a profile "
                            "(comparisons, margins, looks, boundaries, cap, simulated power)")
    design.add_argument("--profile", default="decisive", help="a profile with a [<profile>.design] table (default: decisive)")
    design.set_defaults(func=_decisive_design)

    tables = sub.add_parser("decisive-tables", help="re-analyse a sequential study's records without training: "
                            "rewrite its stats/, results.csv, looks figure, notebook 50 and report.html; print the verdicts")
    tables.add_argument("out", help="the study's output folder, e.g. results/decisive")
    tables.add_argument("--profile", default="decisive", help="a profile with a [<profile>.design] table (default: decisive)")
    tables.add_argument("--no-report", action="store_true", help="the tables only: no notebook 50, no report.html")
    tables.set_defaults(func=_decisive_tables)

    again = sub.add_parser("reanalyse", help="a finished study's walkthrough and analysis notebooks and its report "
                           "again from its records, training nothing (typhoon/runner/reanalyse.py)")
    again.add_argument("out", help="its output folder, e.g. results/cpu")
    again.set_defaults(func=_reanalyse)

    kl_gap = sub.add_parser("kl-gap", help="the KL-gap study: Typhoon's phase 1 under each candidate cause of the gap "
                            "to the paper's 7e-4 nats/token (resumes), then its table (typhoon/runner/kl_studies.py)")
    kl_gap.add_argument("--out", default="results/kl_gap", help="the study's folder (default results/kl_gap)")
    kl_gap.add_argument("--cause", action="append", help="run only this cause (repeatable; default: all)")
    kl_gap.add_argument("--seeds", type=int, nargs="+", help="seeds (default 0 1 2)")
    kl_gap.add_argument("--table-only", action="store_true", help="train nothing: write the table from the states there")
    kl_gap.add_argument("--set", action="append", metavar="KEY=VALUE", help="where the cells run: device=... or "
                        "num_threads=... (the design fixes the rest)")
    add_executor_arguments(kl_gap)
    kl_gap.set_defaults(profile="cpu", func=_kl_gap)

    kl_original = sub.add_parser("kl-original", help="the kl-original study: the paper's 2023 calibration rules one at a "
                                 "time (rows), over its long MLM phase (curve), fine-tuned against random (finetune); "
                                 "each part resumes, its cells on any executor (typhoon/runner/kl_studies.py)")
    kl_original.add_argument("part", choices=("rows", "curve", "finetune", "table"),
                             help="which part to run; table: train nothing, write the tables and README.md "
                             "from the states in --out")
    kl_original.add_argument("--out", default="results/kl_original", help="the study's folder (default results/kl_original)")
    kl_original.add_argument("--row", action="append", help="rows: run only this row (repeatable; default: all)")
    kl_original.add_argument("--tasks", nargs="+", help="tasks: mrpc, cola (default both)")
    kl_original.add_argument("--seeds", type=int, nargs="+", help="seeds (default 0 1 2)")
    kl_original.add_argument("--epochs", type=int, default=1,
                             help="curve: advance every run, an epoch per look, until each has this many MLM epochs "
                             "(default 1; never fewer than a run has)")
    kl_original.add_argument("--checkpoints", default=".kl_original_checkpoints",
                             help="curve: the folder of the runs' resume states, ~0.3 GB each, not committed "
                             "(default .kl_original_checkpoints)")
    kl_original.add_argument("--set", action="append", metavar="KEY=VALUE", help="where the cells run: device=... "
                             "or num_threads=... (the design fixes the rest)")
    add_executor_arguments(kl_original)
    kl_original.set_defaults(profile="cpu", func=_kl_original)

    data = sub.add_parser("data", help="GLUE data: fetch a task that the bundle does not carry")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch = data_sub.add_parser("fetch", help="download a task's official GLUE files (needs a network)")
    fetch.add_argument("task", nargs="?", help="GLUE task, e.g. rte, sst2, qnli (or --task, as `run` takes it)")
    fetch.add_argument("--task", dest="task_flag", metavar="TASK", help="the same as the TASK argument")
    fetch.add_argument("--dir", help="GLUE folder to put <TASK>/ in (default: $TYPHOON_GLUE_DIR, else the "
                       "package's glue_data/, where load_glue finds it)")
    fetch.add_argument("--url", help="download from this zip instead of the official address (a mirror)")
    fetch.add_argument("--force", action="store_true", help="download again even if the task is there")
    fetch.set_defaults(func=_data_fetch)
    return parser


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a study's cells run: a local pool of ``--workers``, a Dask scheduler, or the jobs of a SLURM or local
    Dask cluster and their resources; the same flags for ``reproduce``, ``kl-gap`` and ``kl-original``."""
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


# The errors that mean bad input: a message and exit 2, no traceback (:func:`refused`)
USER_ERRORS = (ValueError, FileNotFoundError, LockedError, ConnectionError, OutputPathError)


def refused(problem: Exception | str) -> int:
    """Bad input (or an output folder that cannot be written) said in one line on stderr; the exit status 2."""
    print(f"typhoon: error: {problem}", file=sys.stderr)
    return 2


def strategies_on_command_line(argv: list[str]) -> list[str]:
    """The ``--strategy`` values of a command line, as written."""
    found = []
    for i, word in enumerate(argv):
        if word == "--strategy" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif word.startswith("--strategy="):
            found.append(word.partition("=")[2])
    return found


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except ModuleNotFoundError as err:  # the core install runs a command of the bundle
        if missing_bundle(err) is None:
            raise
        return refused(missing_bundle(err))


def _main(argv: list[str] | None) -> int:
    absolute_path_variables()  # before anything reads them: kernels and workers inherit the absolute paths
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        if {"-h", "--help"} & set(words):  # `run --strategy my_module:Mine --help` lists its parameters too
            for spec in filter(plugins.is_spec, strategies_on_command_line(words)):
                plugins.load(spec)
        parser = build_parser()  # reads profiles.toml (the profile names in --help)
    except ValueError as err:
        return refused(err)
    args = parser.parse_args(argv)
    try:
        args.checked = check_input(args)  # what the command runs, made once: it parses and resolves nothing again
    except USER_ERRORS as err:
        return refused(err)
    if args.command in ("run", "reproduce", "kl-gap", "kl-original"):
        with stop_on_signals():
            return _stoppable(args, argv)
    return _dispatch(args)


def _stoppable(args: argparse.Namespace, argv: list[str] | None) -> int:
    """``run`` / ``reproduce`` with Ctrl-C / SIGTERM and file-system errors turned into a message and an
    exit status (130 / 143, 2) instead of a traceback."""
    try:
        return _dispatch(args)
    except KeyboardInterrupt as err:
        stopped = as_interrupted(err)
        details = getattr(stopped, "details", None) or getattr(err, "details", None)
        print(f"\ntyphoon: stopped by {stopped.signal_name}" + (f": {details}" if details else ""), file=sys.stderr)
        print(f"typhoon: resume with: {resume_command(argv)}", file=sys.stderr)
        return stopped.exit_code
    except OSError as err:
        if not is_file_system_error(err):
            raise
        return refused(describe_os_error(err, args.out or resolve_out_dir(None, args.profile)))


def _run(args: argparse.Namespace) -> int:
    """``typhoon run``: one cell in this process. Stopped (Ctrl-C, SIGTERM) or failing on the file system,
    it leaves no record, and no folder it made for one but the one holding the cell's resume state, if it
    reached a boundary (training.run.run and the records clean the rest): the same command goes on from there."""
    from typhoon.progress_bars import disable_library_bars
    from typhoon.records import resume_state_path
    from typhoon.training.run import run

    disable_library_bars()  # the command line says what it does itself (importing the bundle quiets nothing)
    config = args.checked  # the cell's RunConfig, resolved by check_input
    out = resolve_out_dir(args.out, config.profile)
    existed = out.exists()
    try:
        record = run(config, out, force=args.force)
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            err.details = f"run {config.relative_dir().as_posix()} not finished; no record written"
            state = resume_state_path(out / config.relative_dir())
            if state.exists():
                err.details += f"; its resume state {state.name} is kept: the same command goes on from there"
        if isinstance(err, KeyboardInterrupt) or is_file_system_error(err):
            remove_empty_folders((out / config.relative_dir()).parent, out)
            if not existed:
                remove_empty_folders(out, out.parent)
        raise
    print(f"{'already complete' if record.skipped else 'done'}: {record.run_dir}")
    print("  ".join(f"{k}={v:.4f}" for k, v in record.final.items()))
    return 0


def _kl_original(args: argparse.Namespace) -> int:
    """``typhoon kl-original <part>``: the part's missing cells, through the study loop on the executor the flags
    name, in ``--out``; ``table``: the study's tables."""
    from typhoon.analysis.kl.original_design import SEEDS, TASKS
    from typhoon.runner import kl_studies

    out, tasks, seeds = Path(args.out), tuple(args.tasks or TASKS), tuple(args.seeds or SEEDS)
    if args.part == "table":
        tables = kl_studies.write_tables(out)
        print(tables["predictions"][["prediction", "verdict", "claim"]].to_string(index=False))
        return 0
    execution = execution_overrides(args.set)
    policy = (kl_studies.KlOriginalRows(args.row, tasks, seeds, execution) if args.part == "rows" else
              kl_studies.KlOriginalCurve(Path(args.checkpoints), args.epochs, tasks, seeds, execution)
              if args.part == "curve" else kl_studies.KlOriginalFinetune(tasks, args.seeds, execution))
    return 0 if run_policy(policy, out, args).ok else 1


def _kl_gap(args: argparse.Namespace) -> int:
    """``typhoon kl-gap``: the missing states of the study through the study loop, then its table (CSV and
    Markdown) in ``--out``."""
    from typhoon.runner import kl_studies

    out = Path(args.out)
    if not args.table_only:
        summary = run_policy(kl_studies.KlGapCauses(args.cause, seeds=args.seeds or kl_studies.KL_GAP_SEEDS,
                                                    execution=execution_overrides(args.set)), out, args)
        if not summary.ok:
            return 1
    table = kl_studies.write_kl_gap_table(out)
    print(table[["cause", "n_states", "kl", "kl_ci_low", "kl_ci_high", "ratio_to_paper", "change_vs_baseline",
                 "raises_kl", "closes_gap"]].to_string(index=False))
    return 0


def _profiles(args: argparse.Namespace) -> int:
    """``typhoon profiles``: each profile, its number of runs and its description."""
    for name, profile in load_profiles().items():
        print(f"{name:10s} {len(profile.cells()):3d} runs  {profile.description}")
    return 0


def _data_fetch(args: argparse.Namespace) -> int:
    """``typhoon data fetch``: a task's official GLUE files."""
    from typhoon.data import fetch_glue

    task = args.task or args.task_flag
    folder = fetch_glue(task, args.dir, url=args.url, force=args.force)
    print(f"GLUE {task}: {folder}")
    return 0


def _decisive_design(args: argparse.Namespace) -> int:
    """``typhoon decisive-design``: a profile's pre-registered sequential design."""
    from typhoon.analysis import describe_design, study_design

    print(describe_design(study_design(args.profile)))
    return 0


def _decisive_tables(args: argparse.Namespace) -> int:
    """``typhoon decisive-tables``: a sequential study re-analysed from its records, without training."""
    from typhoon.runner import rewrite_tables_and_report

    for line in rewrite_tables_and_report(args.profile, args.out, report=not args.no_report):
        print(line)
    if not args.no_report:
        print(f"report: {shown(Path(args.out) / 'report.html')}")
    return 0


def _reanalyse(args: argparse.Namespace) -> int:
    from typhoon.runner.reanalyse import reanalyse

    print(f"report: {shown(reanalyse(args.out))}")
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    """``typhoon reproduce``: a profile's grid (or its estimate, or its cluster job script)."""
    from typhoon.runner.dask_executor import dask_executor

    options = args.checked  # made and checked by check_input (and checked again by run)
    if options.estimate_only:
        print(options.run().text(max_cells=10**6))
        return 0
    if args.cluster:
        return run_on_cluster(options, args)
    summary = options.run(dask_executor(args.scheduler) if args.scheduler else None)
    return 0 if summary.ok else 1


def _results_readme(args: argparse.Namespace) -> int:
    """``typhoon results-readme``: a study's block of docs/results.md (or README's answer table) rewritten
    or, with --check, checked (exit 1 when out of date)."""
    from typhoon.report import update_answer, update_readme
    from typhoon.runner import study_pages_of

    changed = (update_answer(args.readme, check=args.check) if args.answer
               else update_readme(args.reference, args.readme, check=args.check, pages=study_pages_of(args.reference)))
    block = "README answer table" if args.answer else "results block"
    print(f"{block} {'out of date' if args.check and changed else 'updated' if changed else 'up to date'}")
    return 1 if args.check and changed else 0


def _check_report(args: argparse.Namespace) -> int:
    """``typhoon check-report``: a report rendered in headless Chromium; exit 1 when a reader would see a problem."""
    from typhoon.report import check_page

    problems = check_page(args.report)
    print("\n".join(problems) if problems else "report OK: no raw math, no horizontal overflow, every image shown")
    return 1 if problems else 0


def _dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand's function (each subparser sets ``func``); bad input is a message and exit 2."""
    try:
        return args.func(args)
    except USER_ERRORS as err:
        return refused(err)
