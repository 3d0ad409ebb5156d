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
from typhoon.runner import (  # light: stop and the executor's options; the loop is imported when it runs
    add_executor_arguments,
    as_interrupted,
    remove_empty_folders,
    resume_command,
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

    again = sub.add_parser("reanalyse", help="a finished study's notebooks and its report again from its records, "
                           "training nothing (the study its MANIFEST's profile names says how)")
    again.add_argument("out", help="its output folder, e.g. results/cpu")
    again.set_defaults(func=_reanalyse)

    from typhoon.studies import add_commands

    add_commands(sub)  # each study's own commands (typhoon/studies/registry.py), each with only its own flags

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
    own_parsers(parser)
    return parser


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


# Whether this process ran a command that trains (:func:`trains`): finished, it ends without the interpreter's
# teardown (typhoon.__main__)
TRAINED = False


def trains(args: argparse.Namespace) -> bool:
    """Whether the command trains: ``run``, ``reproduce`` and a study's commands that run cells. Ctrl-C / SIGTERM
    stop them cleanly (:mod:`typhoon.runner.stop`)."""
    return args.command in ("run", "reproduce") or getattr(args, "trains", False)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except ModuleNotFoundError as err:  # the core install runs a command of the bundle
        if missing_bundle(err) is None:
            raise
        return refused(missing_bundle(err))


def _main(argv: list[str] | None) -> int:
    global TRAINED  # read by typhoon.__main__ once the command returns
    absolute_path_variables()  # before anything reads them: kernels and workers inherit the absolute paths
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        if {"-h", "--help"} & set(words):  # `run --strategy my_module:Mine --help` lists its parameters too
            for spec in filter(plugins.is_spec, strategies_on_command_line(words)):
                plugins.load(spec)
        parser = build_parser()  # reads profiles.toml (the profile names in --help)
    except ValueError as err:
        return refused(err)
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser: its usage names the flags it takes
        own = getattr(args, "command_parser", parser)
        takes = sorted({flag for action in own._actions for flag in action.option_strings if flag.startswith("--")}
                       - {"--help"})
        own.error(f"unrecognized arguments: {' '.join(extra)}; {own.prog} takes {', '.join(takes) or 'no flag'}")
    try:
        args.checked = check_input(args)  # what the command runs, made once: it parses and resolves nothing again
    except USER_ERRORS as err:
        return refused(err)
    if trains(args):
        TRAINED = True
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


def _reanalyse(args: argparse.Namespace) -> int:
    from typhoon.studies import reanalyse

    print(f"report: {shown(reanalyse(args.out))}")
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    """``typhoon reproduce``: a profile's grid (or its estimate, or its cluster job script)."""
    from typhoon.runner import dask_executor

    options = args.checked  # made and checked once, by check_input
    if options.estimate_only:
        print(options.run().text(max_cells=10**6))
        return 0
    if args.cluster:
        from typhoon.studies import run_on_cluster

        return run_on_cluster(options, args)
    summary = options.run(dask_executor.dask_executor(args.scheduler) if args.scheduler else None)
    return 0 if summary.ok else 1


def _results_readme(args: argparse.Namespace) -> int:
    """``typhoon results-readme``: a study's block of docs/results.md (or the README's answer table, from each
    study that has one) rewritten or, with --check, checked (exit 1 when out of date)."""
    from typhoon.report import update_readme
    from typhoon.studies import STUDIES, pages_of_folder

    if args.answer:
        changed = any([answer for study in STUDIES.values()
                       if (answer := study.update_answer(args.readme, check=args.check)) is not None])
    else:
        changed = update_readme(args.reference, args.readme, check=args.check, pages=pages_of_folder(args.reference))
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


def own_parsers(parser: argparse.ArgumentParser) -> None:
    """Each command's own parser as its ``command_parser`` default (kl-original's parts each theirs): a flag it
    does not take is refused by it, naming the flags it does."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.set_defaults(command_parser=command)
                own_parsers(command)
