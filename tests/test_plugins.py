"""A masking strategy of your own (typhoon/masking/plugins.py, docs/extending.md): ``MODULE:CLASS`` is parsed,
loaded and checked, refused with a message naming what was wrong, and named, configured and recorded like a
built-in strategy. The slow test runs docs/extending.md's own example from a folder outside the package."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO

from typhoon import cli
from typhoon.config import RunConfig, parse_overrides
from typhoon.masking import get_strategy, plugins
from typhoon.masking.base import MaskingStrategy
from typhoon.masking.params import PLUGIN_STRATEGIES, strategy_help
from typhoon.masking.random import RandomMasking
from typhoon.masking.whole_word import WholeWordMasking
from typhoon.profiles import Profile, get_profile, resolve

EXTENDING = REPO / "docs" / "extending.md"


def documented_strategy() -> str:
    """The strategy file docs/extending.md tells a reader to write: its first Python block."""
    return re.search(r"^```python\n(.*?)^```", EXTENDING.read_text(encoding="utf-8"), re.S | re.M).group(1)


def documented_profiles() -> str:
    """docs/extending.md's profiles file (its TOML block)."""
    return re.search(r"^```toml\n(.*?)^```", EXTENDING.read_text(encoding="utf-8"), re.S | re.M).group(1)


OTHERS = textwrap.dedent('''
    from typhoon.masking.params import BASE_PARAMS, Param
    from typhoon.allowed import IntAtLeast
    from typhoon.masking.random import RandomMasking

    class NotAStrategy:
        name = "not_a_strategy"

    class TakesBuiltinName(RandomMasking):
        name = "whole_word"

    class UnsafeName(RandomMasking):
        name = "../long words"

    class NoOwnName(RandomMasking):
        pass

    class NoBaseParams(RandomMasking):
        name = "no_base"
        PARAMS = (Param("k", int, 1, "k", IntAtLeast(1)),)

    class FieldClash(RandomMasking):
        name = "field_clash"
        PARAMS = (*BASE_PARAMS, Param("seed", int, 1, "a seed of its own", IntAtLeast(0)))

    class Shadow(RandomMasking):
        name = "long_words"  # the documented strategy's name, from another class
''')


@pytest.fixture()
def user_module(tmp_path, monkeypatch):
    """docs/extending.md's strategy as ``my_masking`` and some bad classes as ``bad_masking``, in a folder
    outside the package on sys.path; the registry, the modules and PYTHONPATH restored after."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "my_masking.py").write_text(documented_strategy(), encoding="utf-8")
    (folder / "bad_masking.py").write_text(OTHERS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", "")
    importlib.invalidate_caches()
    registered = dict(PLUGIN_STRATEGIES)
    yield folder
    PLUGIN_STRATEGIES.clear()
    PLUGIN_STRATEGIES.update(registered)
    for name in ("my_masking", "bad_masking"):
        sys.modules.pop(name, None)


SPEC = "my_masking:LongWordMasking"


@pytest.mark.parametrize("spec, message", [
    ("nomodule:X", "no module 'nomodule' importable"),
    ("my masking:X", "a strategy of your own is named MODULE:CLASS"),
    ("my_masking:", "a strategy of your own is named MODULE:CLASS"),
    ("a:b:c", "a strategy of your own is named MODULE:CLASS"),
    ("nopackage.sub:X", "module 'nopackage.sub' cannot be found"),
])
def test_a_malformed_or_missing_module_is_refused_before_anything_is_imported(user_module, spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        plugins.check_spec(spec)
    assert plugins.check_spec(SPEC) == ("my_masking", "LongWordMasking")
    assert "my_masking" not in sys.modules  # found, not executed


@pytest.mark.parametrize("spec, message", [
    ("my_masking:Missing", "module 'my_masking' (" ),
    ("my_masking:Missing", "has no 'Missing'"),
    ("bad_masking:NotAStrategy", "is not a masking strategy (a subclass of typhoon.masking.base.MaskingStrategy)"),
    ("bad_masking:IntAtLeast", "is not a masking strategy"),
    ("bad_masking:TakesBuiltinName", "its name 'whole_word' is a built-in strategy's"),
    ("bad_masking:UnsafeName", "must declare its own `name`, a folder name"),
    ("bad_masking:NoOwnName", "must declare its own `name`"),
    ("bad_masking:NoBaseParams", "PARAMS must start with the base's parameters"),
])
def test_a_class_that_is_no_usable_strategy_is_refused_naming_why(user_module, spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        plugins.load(spec)


def test_a_module_that_fails_to_import_is_named_with_its_error(user_module):
    (user_module / "broken_masking.py").write_text("raise RuntimeError('my bug')\n")
    importlib.invalidate_caches()
    with pytest.raises(ValueError, match=r"importing module 'broken_masking' failed: RuntimeError: my bug"):
        plugins.load("broken_masking:X")
    sys.modules.pop("broken_masking", None)


def test_two_classes_may_not_share_a_name_and_a_parameter_may_not_be_a_config_field(user_module):
    plugins.load(SPEC)
    with pytest.raises(ValueError, match=r"its name 'long_words' is taken by my_masking:LongWordMasking"):
        plugins.load("bad_masking:Shadow")
    with pytest.raises(ValueError, match=r"declares parameter\(s\) \['seed'\] named like RunConfig fields"):
        RunConfig(strategy="bad_masking:FieldClash")


def test_the_declaration_gives_the_constructor_the_help_and_the_checks(user_module):
    cls = plugins.load(SPEC)
    assert str(inspect.signature(cls.__init__)) == "(self, *, p=0.15, corruption='bert', min_pieces=2)"
    strategy = get_strategy(SPEC, min_pieces=3, p=0.3)
    assert (strategy.name, strategy.p, strategy.min_pieces) == ("long_words", 0.3, 3)
    assert strategy.params == {"p": 0.3, "corruption": "bert", "min_pieces": 3}
    assert get_strategy("long_words").min_pieces == 2  # by name, once loaded
    with pytest.raises(ValueError, match="min_pieces"):
        get_strategy(SPEC, min_pieces=0)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['delta'\]"):
        get_strategy(SPEC, delta=0.3)
    assert "min_pieces (int, default 2): long_words: fewest word-pieces" in strategy_help()
    assert "long_words (--strategy my_masking:LongWordMasking)" in strategy_help()


def test_the_built_in_strategies_keep_their_constructors():
    # a built-in's constructor is the one its module writes (or the base's), never one made from its PARAMS
    assert Path(RandomMasking.__init__.__code__.co_filename).name == "random.py"
    assert WholeWordMasking.__init__ is MaskingStrategy.__init__


def test_a_run_config_names_it_by_its_class_name_and_keeps_where_it_came_from(user_module):
    config = RunConfig(strategy=SPEC, task="mrpc", backbone="tiny-random")
    assert (config.strategy, config.strategy_source, config.strategy_args) == ("long_words", SPEC, {"min_pieces": 2})
    assert config.relative_dir().as_posix() == "runs/mrpc/tiny-random/long_words/seed0"
    assert config.strategy_params() == {"p": 0.15, "corruption": "bert", "min_pieces": 2}
    again = RunConfig.from_json(config.to_json())
    assert again == config and again.run_id() == config.run_id()
    assert config.replace(strategy_args={"min_pieces": 3}).run_id() != config.run_id()
    assert config.replace(delta=0.1).run_id() == config.run_id()  # not its parameter
    assert config.replace(strategy="random").to_dict() == RunConfig(task="mrpc", backbone="tiny-random").to_dict()
    with pytest.raises(ValueError, match=r"has no parameter\(s\) \['min_piece'\]"):
        RunConfig(strategy=SPEC, strategy_args={"min_piece": 3})
    with pytest.raises(ValueError, match=r"is the strategy 'long_words', not 'other'"):
        RunConfig(strategy="other", strategy_source=SPEC)


def test_a_built_in_strategy_config_is_what_it_was():
    data = RunConfig(strategy="typhoon_rank").to_dict()
    assert "strategy_source" not in data and "strategy_args" not in data
    with pytest.raises(ValueError, match=r"strategy 'random' takes no strategy_args"):
        RunConfig(strategy="random", strategy_args={"min_pieces": 2})


def test_set_reaches_its_parameters_and_refuses_a_typo(user_module):
    assert parse_overrides(["min_pieces=3", "p=0.2"], [SPEC, "random"]) == {"strategy_args": {"min_pieces": 3}, "p": 0.2}
    with pytest.raises(ValueError, match=r"unknown key 'min_piece'.*a parameter of the strategies named: \['min_pieces'\]"):
        parse_overrides(["min_piece=3"], [SPEC])
    with pytest.raises(ValueError, match="unknown key 'min_pieces'"):
        parse_overrides(["min_pieces=3"], ["random"])
    with pytest.raises(ValueError, match="not a valid int"):
        parse_overrides(["min_pieces=two"], [SPEC])


def test_a_grid_gives_each_strategy_the_parameters_it_declares(user_module):
    profile = Profile(name="mine", description="", tasks=["mrpc"], backbones=["tiny-random"],
                      strategies=[SPEC, "random"], seeds=[0], settings={"strategy_args": {"min_pieces": 3}})
    mine, random = profile.grid()
    assert (mine.strategy, mine.strategy_args, random.strategy, random.strategy_args) == ("long_words", {"min_pieces": 3},
                                                                                      "random", {})
    assert profile.grid({"strategy_args": {"min_pieces": 4}})[0].strategy_args == {"min_pieces": 4}
    assert resolve(profile, {"task": "mrpc", "strategy": "long_words", "seed": 1}).strategy_args == {"min_pieces": 3}
    typo = Profile(**{**profile.__dict__, "settings": {"strategy_args": {"min_piece": 3}}})
    with pytest.raises(ValueError, match=r"strategy_args \['min_piece'\] are parameters of none of its strategies"):
        typo.grid()


def test_an_installed_package_names_it_by_its_entry_point(user_module, monkeypatch):
    point = importlib.metadata.EntryPoint("long_words", SPEC, plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [point] if group == plugins.ENTRY_POINT_GROUP else [])
    config = RunConfig(strategy="long_words")
    assert (config.strategy, config.strategy_source) == ("long_words", SPEC)
    with pytest.raises(ValueError, match="unknown masking strategy 'short_words'"):
        RunConfig(strategy="short_words")


def test_the_folder_it_came_from_is_on_the_kernels_path(user_module):
    plugins.load(SPEC)
    assert str(user_module.resolve()) in os.environ["PYTHONPATH"].split(os.pathsep)


@pytest.mark.parametrize("strategy, message", [
    ("nomodule:X", "bad strategy 'nomodule:X': no module 'nomodule' importable"),
    ("my_masking:Missing", "bad strategy 'my_masking:Missing': module 'my_masking'"),
    ("bad_masking:NotAStrategy", "is not a masking strategy"),
])
def test_the_command_line_refuses_a_bad_strategy_with_exit_2(user_module, tmp_path, capsys, strategy, message):
    code = cli.main(["run", "--task", "mrpc", "--profile", "smoke", "--strategy", strategy, "--out", str(tmp_path / "o")])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_command_line_lists_its_parameters_with_help(user_module, capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--task", "mrpc", "--strategy", SPEC, "--help"])
    assert "min_pieces (int, default 2)" in capsys.readouterr().out


def documented_reproduce() -> tuple[dict, list[str]]:
    """docs/extending.md's grid command: its environment assignments and the words after `python -m typhoon`."""
    line = re.search(r"^(\w+=\S+ )+python -m typhoon reproduce .*$", EXTENDING.read_text(encoding="utf-8"), re.M)[0]
    words = line.split()
    env = dict(word.split("=", 1) for word in words[:words.index("python")])
    return env, words[words.index("typhoon") + 1:]


def test_the_documented_grid_command_reads_its_profiles_file_from_the_users_folder(user_module, monkeypatch,
                                                                                  capsys):
    """The command as docs/extending.md writes it, in the folder of the user's files: its relative profiles file
    is read there, and made absolute for what starts later -- a notebook kernel starts in notebooks/ with this
    environment (issue 52: 30_budget_spread found no profiles file my_profiles.toml there)."""
    (user_module / "my_profiles.toml").write_text(documented_profiles(), encoding="utf-8")
    env, words = documented_reproduce()
    assert env == {"TYPHOON_PROFILES": "my_profiles.toml"}
    monkeypatch.chdir(user_module)
    monkeypatch.setenv("TYPHOON_PROFILES", env["TYPHOON_PROFILES"])
    seen = {}

    def grid_started(args):  # the command, checked and about to run its grid (tests/test_reproduce.py runs one)
        seen["profile"], seen["environment"] = args.profile, dict(os.environ)
        monkeypatch.chdir(REPO / "notebooks")  # where a kernel starts, with that environment
        seen["kernel's profile"] = get_profile(args.profile)
        return 0

    monkeypatch.setattr(cli, "_reproduce", grid_started)
    assert cli.main(words) == 0, capsys.readouterr().err
    assert seen["profile"] == "long-words"
    assert seen["environment"]["TYPHOON_PROFILES"] == str(user_module / "my_profiles.toml")
    kernel_profile = seen["kernel's profile"]
    assert (kernel_profile.strategies, kernel_profile.analysis) == ([SPEC, "random"], {"quick": True})


def test_a_profiles_file_that_is_not_there_is_refused_with_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TYPHOON_PROFILES", "no_such_profiles.toml")
    started = time.monotonic()
    assert cli.main(["reproduce", "--profile", "long-words", "--no-estimate"]) == 2
    assert time.monotonic() - started < 2
    err = capsys.readouterr().err.strip()
    assert err == f"typhoon: error: $TYPHOON_PROFILES: no profiles file {tmp_path / 'no_such_profiles.toml'}"
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------------
# The documented example, end to end, from a folder outside the package


@pytest.mark.slow
def test_the_documented_strategy_runs_a_cell_and_a_grid_from_outside_the_package(tmp_path, monkeypatch):
    """The strategy file and the profiles file of docs/extending.md in a folder of the user's, the commands run
    there: one cell (`run`), then a grid of it and random (`reproduce`, each cell in a notebook kernel that
    starts in notebooks/), its statistics notebook and report (the other analysis notebooks take minutes and
    do not read the grid's strategies: tests/test_reproduce.py runs them)."""
    from typhoon.report.html import render_report
    from typhoon.runner.notebooks import execute_notebook, notebooks_dir
    from typhoon.studies.grid.pages import PAGES

    work = tmp_path / "work"  # the user's folder: their strategy and profiles, nothing of the package
    work.mkdir()
    (work / "my_masking.py").write_text(documented_strategy(), encoding="utf-8")
    profiles = documented_profiles().replace("seeds = [0, 1]", "seeds = [0]")
    for key, value in (("max_train_examples", 32), ("max_eval_examples", 16)):
        profiles = re.sub(rf"^{key} = \d+", f"{key} = {value}", profiles, flags=re.M)
    (work / "my_profiles.toml").write_text(profiles, encoding="utf-8")
    monkeypatch.setenv("TYPHOON_PROFILES", str(work / "my_profiles.toml"))  # for the commands and the kernel here
    env = {**os.environ, "PYTHONPATH": str(REPO), "TYPHOON_PROFILES": "my_profiles.toml"}  # as the docs write it
    small = ["--set", "max_train_examples=32", "--set", "max_eval_examples=16"]

    def typhoon(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "typhoon", *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=1200)

    cell = typhoon("run", "--task", "mrpc", "--profile", "smoke", "--strategy", SPEC, "--set", "min_pieces=3",
                   *small, "--out", str(tmp_path / "one"))
    assert cell.returncode == 0, cell.stderr[-3000:]
    record = tmp_path / "one" / "runs" / "mrpc" / "tiny-random" / "long_words" / "seed0"
    config = json.loads((record / "config.json").read_text())
    assert (config["strategy"], config["strategy_source"], config["strategy_args"]) == ("long_words", SPEC,
                                                                                         {"min_pieces": 3})
    assert json.loads((record / "metrics.json").read_text())["status"] == "ok"

    out = tmp_path / "grid"
    grid = typhoon("reproduce", "--profile", "long-words", "--out", str(out), "--no-estimate", "--no-reuse",
                   "--workers", "1", "--no-analysis")
    assert grid.returncode == 0, (grid.stdout + grid.stderr)[-3000:]
    for strategy in ("long_words", "random"):  # the plugin's cell trained in a kernel started in notebooks/
        metrics = json.loads((out / "runs" / "mrpc" / "tiny-random" / strategy / "seed0" / "metrics.json").read_text())
        assert metrics["status"] == "ok"
    assert "long_words" in (out / "results.csv").read_text()

    statistics = out / "notebooks" / "20_statistics.ipynb"
    execute_notebook(notebooks_dir() / statistics.name, statistics, {"out_dir": str(out), "profile": "long-words"})
    assert "long_words" in (out / "stats" / "summary.csv").read_text()
    page = render_report(out, [statistics], "long-words", pages=PAGES)
    assert "long_words" in page.read_text(encoding="utf-8")
