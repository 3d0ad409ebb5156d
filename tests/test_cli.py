"""The bad-input catalogue: each is refused with a message naming the input, a non-zero exit, nothing written."""

import subprocess
import sys

import pytest
from conftest import REPO

from typhoon.cli import main

RUN = ["run", "--task", "mrpc", "--backbone", "tiny-random", "--profile", "smoke"]


def refused(capsys, tmp_path, argv, message):
    out = tmp_path / "out"
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err, err
    assert not out.exists(), "a refused command must not write anything"


@pytest.mark.parametrize("argv, message", [
    (["run", "--task", "stsx"], "unknown GLUE task 'stsx'"),
    (["run", "--task", "mrpc", "--backbone", "robertta"], "unknown backbone 'robertta'"),
    (["run", "--task", "mrpc", "--strategy", "salient"], "unknown masking strategy 'salient'"),
    (["run", "--task", "mrpc", "--profile", "huge"], "unknown profile 'huge'"),
    (["reproduce", "--profile", "huge"], "unknown profile 'huge'"),
    ([*RUN, "--strategy", "typhoon", "--set", "calibration=entropy"],
     "calibration must be one of ['minmax', 'rank', 'softmax'], got 'entropy'"),
    ([*RUN, "--set", "p=1.5"], "p must lie in (0, 1], got 1.5"),
    ([*RUN, "--set", "p=0"], "p must lie in (0, 1], got 0.0"),
    ([*RUN, "--strategy", "typhoon", "--set", "delta=1.5"], "delta must lie in [0, 1], got 1.5"),
    ([*RUN, "--strategy", "typhoon", "--set", "lam=0"], "lam must lie in (0, 1], got 0.0"),
    ([*RUN, "--strategy", "span", "--set", "geometric_p=0"], "geometric_p must lie in (0, 1], got 0.0"),
    ([*RUN, "--strategy", "span", "--set", "max_span=0"], "max_span must be an integer >= 1, got 0"),
    ([*RUN, "--set", "pi0=1"], "pi0 must lie in [0, 1), got 1.0"),
    ([*RUN, "--set", "pi0=-0.1"], "pi0 must lie in [0, 1), got -0.1"),
    ([*RUN, "--set", "nonsense=1"], "unknown key 'nonsense'"),
    ([*RUN, "--set", "p=abc"], "bad value for p: 'abc' is not a valid float"),
    ([*RUN, "--set", "seed"], "expected key=value"),
    ([*RUN, "--set", "ft_epochs=1.5"], "bad value for ft_epochs"),
    ([*RUN, "--set", "schedule=cosine"], "schedule must be one of"),
    ([*RUN, "--set", "attention=flash"], "attention must be one of"),
    ([*RUN, "--backbone", "bert-base"], "Offline choices"),
    (["reproduce", "--profile", "smoke", "--set", "p=2"], "p must lie in (0, 1], got 2.0"),
    (["reproduce", "--profile", "smoke", "--workers", "0"], "--workers must be an integer >= 1, got 0"),
])
def test_bad_arguments(capsys, tmp_path, argv, message):
    refused(capsys, tmp_path, argv, message)


def _replace_line(path, index, text):
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[index] = text
    path.write_text("\n".join(lines), encoding="utf-8")


def _glue_copy(tmp_path, glue_dir, mutate):
    root = tmp_path / "glue"
    (root / "MRPC").mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv"):
        (root / "MRPC" / name).write_bytes((glue_dir / "MRPC" / name).read_bytes())
    mutate(root / "MRPC")
    return root


@pytest.mark.parametrize("mutate, message", [
    (lambda d: (d / "train.tsv").write_bytes((d / "train.tsv").read_bytes()[:5000]),  # truncated mid-row
     "train.tsv, line"),
    (lambda d: _replace_line(d / "dev.tsv", 1, "1\t2\t3\tonly four columns"),
     "dev.tsv, line 2: expected 5 tab-separated columns, found 4"),
    (lambda d: (d / "dev.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"), "no data rows"),
    (lambda d: (d / "train.tsv").unlink(), "not found"),
], ids=["truncated", "malformed", "empty-split", "missing"])
@pytest.mark.parametrize("command", ["run", "reproduce"])
def test_bad_data(capsys, tmp_path, glue_dir, monkeypatch, mutate, message, command):
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(_glue_copy(tmp_path, glue_dir, mutate)))
    refused(capsys, tmp_path, RUN if command == "run" else ["reproduce", "--profile", "smoke"], message)


def test_missing_data_offline(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("TYPHOON_GLUE_DIR", raising=False)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # CoLA and MRPC are bundled; a task that is not, with no folder and the hub off, is refused
    refused(capsys, tmp_path, ["run", "--task", "rte", *RUN[3:]], "python -m typhoon data fetch rte")


@pytest.mark.slow  # runs `python -m typhoon run` (trains a tiny model)
def test_exit_status_of_the_real_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "typhoon", "run", "--task", "mrpc", "--set", "p=7",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and "typhoon: error: p must lie in (0, 1], got 7.0" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_run_help_lists_every_strategy_parameter(capsys):
    from typhoon.masking import STRATEGIES

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    for name, cls in STRATEGIES.items():
        assert f"  {name}\n" in text
        for param in cls.PARAMS:
            assert f"    {param.name} ({param.type.__name__}, default {param.default!r}): {param.doc}" in text


def _options(parser, command=()):
    """Every option of every subcommand, as (command, option strings, action), help flags left out."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*command, name))
        elif not isinstance(action, argparse._HelpAction):
            yield " ".join(command), "/".join(action.option_strings) or action.dest, action


def test_every_option_of_every_command_has_help_that_names_its_default():
    """An option without help (`run --seed`) or whose default goes unsaid (`reproduce --profile`, cpu) leaves a
    newcomer guessing; a flag (store_true) or an option that defaults to nothing has no default to say."""
    from typhoon.cli import build_parser

    options = list(_options(build_parser()))
    assert len(options) > 40 and {"run", "reproduce", "data fetch"} <= {command for command, _, _ in options}
    silent = [f"{command} {name}" for command, name, action in options if not (action.help or "").strip()]
    assert not silent, f"options without help: {silent}"
    unsaid = [f"{command} {name} (default {action.default!r})" for command, name, action in options
              if action.default not in (None, False, [], ()) and "default" not in action.help.lower()
              or action.default not in (None, False, [], ()) and str(action.default) not in action.help]
    assert not unsaid, f"options whose help does not say their default: {unsaid}"


def test_reproduce_help_says_the_profile_defaults_to_cpu_and_run_help_says_what_seed_is(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: cpu, the main job)" in text
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--seed SEED the cell's seed" in text and "(default 0)" in text


def test_profiles_listing(capsys):
    assert main(["profiles"]) == 0
    listing = capsys.readouterr().out
    assert "smoke" in listing and "cpu" in listing and "paper" in listing and " 90 runs" in listing


@pytest.mark.slow
@pytest.mark.parametrize("parameters, message", [
    ({"profile": "smok"}, "unknown profile 'smok'"),
    ({"task": "mrcp"}, "unknown GLUE task 'mrcp'"),
], ids=["profile", "task"])
def test_a_walkthrough_with_a_bad_parameter_says_which(tmp_path, parameters, message):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError, match=message):
        papermill.execute_notebook(str(REPO / "notebooks" / "10_walkthrough.ipynb"), str(tmp_path / "nb.ipynb"),
                                   parameters={"out_dir": str(tmp_path / "out"), **parameters},
                                   kernel_name="python3", progress_bar=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, line, read", [
    (["run", "--task", "MRPC", "--backbone", "tiny-random", "--profile", "smoke"], "task 'MRPC' read as 'mrpc'",
     ("task", "mrpc")),
    (["run", "--task", "SST-2", "--backbone", "tiny-random", "--profile", "smoke"], "task 'SST-2' read as 'sst2'",
     ("task", "sst2")),
    (["run", "--task", "mrpc", "--backbone", "Tiny-Random", "--profile", "smoke"],
     "backbone 'Tiny-Random' read as 'tiny-random'", None),
    (["reproduce", "--profile", "smoke", "--set", "task=CoLA", "--estimate"], "task 'CoLA' read as 'cola'", None),
    (["kl-original", "rows", "--tasks", "MRPC", "cola"], "task 'MRPC' read as 'mrpc'", ("tasks", ["mrpc", "cola"])),
    (["data", "fetch", "RTE"], "task 'RTE' read as 'rte'", None),
], ids=["run-task", "run-alias", "run-backbone", "reproduce-set", "kl-original", "data-fetch"])
def test_a_name_in_another_case_is_accepted_with_one_line_that_says_how_it_was_read(capsys, tmp_path, argv, line,
                                                                                     read):
    import time

    from typhoon.cli import build_parser, check_input

    args = build_parser().parse_args([*argv, *(["--out", str(tmp_path / "out")] if argv[0] != "data" else [])])
    started = time.perf_counter()
    check_input(args)
    assert time.perf_counter() - started < 2.0
    err = capsys.readouterr().err
    assert err.count("read as") == 1 and f"typhoon: {line}\n" in err, err
    if read is not None:
        assert getattr(args, read[0]) == read[1] or task_of_the_run(args) == read[1]
    assert not (tmp_path / "out").exists()


def task_of_the_run(args) -> str:
    from typhoon.profiles import resolve

    return resolve(args.profile, dict(task=args.task, backbone=args.backbone, strategy=args.strategy, seed=args.seed)).task


def test_a_name_as_the_registry_writes_it_says_nothing_and_the_study_tasks_are_checked(capsys, tmp_path):
    from typhoon.cli import build_parser, check_input

    check_input(build_parser().parse_args([*RUN, "--out", str(tmp_path / "out")]))
    assert "read as" not in capsys.readouterr().err
    assert main(["kl-original", "rows", "--tasks", "rte", "--out", str(tmp_path / "kl")]) == 2
    assert "task 'rte' is not one of this command's tasks; choose from ['mrpc', 'cola']" in capsys.readouterr().err
