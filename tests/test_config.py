"""typhoon.config: one resolution of a run's configuration (profile < task < cell < overrides), typed
values, the JSON round trip, and the strategy parameters the config derives from the declarations."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from typhoon.config import EXECUTION_FIELDS, RunConfig, allowed_of, parse_overrides
from typhoon.masking import ALIASES, STRATEGIES, get_strategy, parameters_of
from typhoon.profiles import Profile, get_profile, resolve

DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunConfig)}


def toy_profile(**changes) -> Profile:
    fields = dict(name="toy", description="", tasks=["mrpc", "cola"], backbones=["tiny-random"],
                  strategies=["random", "typhoon"], seeds=[0, 1],
                  settings={"ft_epochs": 4, "ft_lr": 1e-4, "p": 0.2},
                  task_settings={"cola": {"ft_epochs": 5}})
    return Profile(**{**fields, **changes})


# --------------------------------------------------------------------------------------------------
# resolve: the four layers


def test_layers_apply_in_order():
    profile = toy_profile()
    mrpc = resolve(profile, dict(task="mrpc", strategy="random", seed=0))
    assert (mrpc.ft_epochs, mrpc.ft_lr, mrpc.p, mrpc.profile) == (4, 1e-4, 0.2, "toy")  # profile settings
    cola = resolve(profile, dict(task="cola", strategy="random", seed=0))
    assert (cola.ft_epochs, cola.ft_lr) == (5, 1e-4)  # the task's settings over the profile's
    cell = resolve(profile, dict(task="cola", strategy="random", seed=0, ft_epochs=6))
    assert cell.ft_epochs == 6  # the cell over both
    over = resolve(profile, dict(task="cola", strategy="random", seed=0, ft_epochs=6), {"ft_epochs": 7, "p": 0.3})
    assert (over.ft_epochs, over.p) == (7, 0.3)  # overrides last
    assert resolve(profile, dict(task="mrpc", strategy="random", seed=0), {"task": "cola"}).ft_epochs == 5
    untouched = resolve(profile, dict(task="mrpc", strategy="random", seed=0))
    assert untouched.warmup_ratio == DEFAULTS["warmup_ratio"]  # no layer sets it: the field's default


def test_grid_is_resolve_of_every_cell():
    profile = toy_profile(extra_cells=[{"task": "mrpc", "backbone": "minilm-l6", "strategy": "span", "seed": 3}])
    grid = profile.grid({"p": 0.25})
    assert grid == [resolve(profile, cell, {"p": 0.25}) for cell in profile.cells()]
    assert len(grid) == 2 * 1 * 2 * 1 * 2 + 1 and grid[-1].strategy == "span" and grid[-1].p == 0.25
    assert [(c.task, c.strategy, c.seed) for c in grid[:4]] == [
        ("mrpc", "random", 0), ("mrpc", "random", 1), ("mrpc", "typhoon", 0), ("mrpc", "typhoon", 1)]


def test_the_shipped_profiles_resolve():
    smoke = get_profile("smoke").grid()
    assert len(smoke) == 7 and {c.profile for c in smoke} == {"smoke"}
    assert all(c.max_train_examples == 192 and c.precision == "fp32" for c in smoke)
    cpu = get_profile("cpu").grid()
    assert {(c.task, c.ft_epochs, c.ft_lr) for c in cpu} == {("mrpc", 2, 1e-4), ("cola", 3, 5e-5)}
    assert {c.backbone for c in cpu} == {"minilm-l6-mlm"}  # the masked LM that models language
    assert get_profile("smoke").analysis == {"quick": True} and get_profile("cpu").analysis == {}


@pytest.mark.parametrize("where, profile, cell, overrides, message", [
    ("settings", toy_profile(settings={"ft_epoch": 4}), {}, None, "profile 'toy' settings: unknown RunConfig field 'ft_epoch'"),
    ("task", toy_profile(task_settings={"mrpc": {"lr": 1}}), {}, None, "settings for mrpc: unknown RunConfig field 'lr'"),
    ("cell", toy_profile(), {"sed": 1}, None, "the grid cell: unknown RunConfig field 'sed'"),
    ("overrides", toy_profile(), {}, {"nope": 1}, "the overrides: unknown RunConfig field 'nope'"),
    ("profile key", toy_profile(), {"profile": "cpu"}, None, "set 'profile'"),
    ("bad value", toy_profile(settings={"ft_epochs": "many"}), {}, None, "bad value for ft_epochs: 'many' is not a valid int"),
])
def test_resolve_names_the_bad_setting_and_where_it_is(where, profile, cell, overrides, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(profile, {"task": "mrpc", **cell}, overrides)


# --------------------------------------------------------------------------------------------------
# --set parsing and typed coercion


def test_overrides_are_parsed_once_into_typed_values():
    parsed = parse_overrides(["p=0.3", "ft_epochs=2", "max_train_examples=none", "calibration=rank", " seed = 4 ",
                              "p=0.25"])
    assert parsed == {"p": 0.25, "ft_epochs": 2, "max_train_examples": None, "calibration": "rank", "seed": 4}
    assert type(parsed["p"]) is float and type(parsed["ft_epochs"]) is int
    assert parse_overrides(None) == {}
    assert resolve(toy_profile(settings={"ft_epochs": 3.0}), {"task": "mrpc"}).ft_epochs == 3  # a TOML float


@pytest.mark.parametrize("item, message", [
    ("seed", "bad --set 'seed': expected key=value"),
    ("nonsense=1", "unknown key 'nonsense'"),
    ("p=abc", "bad value for p: 'abc' is not a valid float"),
    ("ft_epochs=1.5", "bad value for ft_epochs: '1.5' is not a valid int"),
    ("seed=none", "bad value for seed: None is not allowed"),
])
def test_bad_overrides(item, message):
    with pytest.raises(ValueError, match=message):
        parse_overrides([item])


# --------------------------------------------------------------------------------------------------
# JSON round trip (the notebook parameter and the record's config.json)


def test_json_round_trip_is_exact():
    config = resolve("cpu", dict(task="cola", backbone="tiny-random", strategy="span", seed=3),
                     {"geometric_p": 0.35, "max_span": 6, "max_train_examples": 50, "schedule": "mixture", "pi0": 0.1})
    again = RunConfig.from_json(config.to_json())
    assert again == config and again.to_dict() == config.to_dict()
    assert json.loads(config.to_json()) == config.to_dict()


@pytest.mark.parametrize("text, message", [
    ('{"seed": "zero"}', "bad value for seed: 'zero' is not a valid int"),
    ('{"seed": true}', "bad value for seed: True is not a valid int"),
    ('{"task": 5}', "bad value for task: 5 is not a valid str"),
    ('{"colour": "red"}', r"unknown key\(s\) \['colour'\]"),
    ('[1, 2]', "must be a JSON object of RunConfig fields, got list"),
    ('{"seed": 0', "is not valid JSON"),
    ('{"p": 1.5}', r"p must lie in \(0, 1\], got 1.5"),
])
def test_from_json_refuses_bad_configs_naming_them(text, message):
    with pytest.raises(ValueError, match=message):
        RunConfig.from_json(text, "notebook parameter config")


def test_from_json_refuses_a_non_string():
    with pytest.raises(ValueError, match="notebook parameter config must be a JSON string, got int"):
        RunConfig.from_json(5, "notebook parameter config")


def test_a_field_missing_from_an_old_record_takes_its_default():
    stored = RunConfig(strategy="span").to_dict()
    del stored["geometric_p"], stored["max_span"]  # a config.json written before span's parameters were fields
    config = RunConfig.from_dict(stored)
    assert (config.geometric_p, config.max_span) == (DEFAULTS["geometric_p"], DEFAULTS["max_span"])


# --------------------------------------------------------------------------------------------------
# Strategy parameters: declared once, by the strategy


# The published defaults, written here as a reference independent of the declarations: BERT's budget and
# 80/10/10 corruption, Typhoon's band width delta 0.4 and EMA rate lambda 0.8 with min-max calibration of the
# MLM-loss saliency (the paper), and SpanBERT's Geometric(0.2) span lengths capped at 10 words.
PAPER_DEFAULTS = {
    "random": {"p": 0.15, "corruption": "bert", "specials": "never"},
    "whole_word": {"p": 0.15, "corruption": "bert"},
    "span": {"p": 0.15, "corruption": "bert", "geometric_p": 0.2, "max_span": 10},
    "typhoon": {"p": 0.15, "corruption": "bert", "delta": 0.4, "lam": 0.8, "calibration": "minmax", "tau": 1.0,
                "saliency": "mlm", "ema_start": "first_sighting", "unseen": "neutral", "budget": "non_special"},
}


def test_a_config_of_no_arguments_builds_the_paper_defaults():
    config = RunConfig()
    assert get_strategy(config.strategy, **config.strategy_params()).params == PAPER_DEFAULTS["random"]
    assert {key: getattr(config, key) for key in PAPER_DEFAULTS["typhoon"]} == PAPER_DEFAULTS["typhoon"]
    assert (config.geometric_p, config.max_span) == (0.2, 10)


@pytest.mark.parametrize("name", sorted(PAPER_DEFAULTS))
def test_the_config_the_constructor_and_get_strategy_build_the_paper_defaults(name):
    config = RunConfig(strategy=name)
    assert get_strategy(name, **config.strategy_params()).params == PAPER_DEFAULTS[name]
    assert STRATEGIES[name]().params == PAPER_DEFAULTS[name]  # the class's own defaults, no config
    assert get_strategy(name).params == PAPER_DEFAULTS[name]


def test_a_masking_field_takes_the_declared_type_from_a_string():
    assert parse_overrides(["delta=0.3", "max_span=3", "calibration=rank"]) == {
        "delta": 0.3, "max_span": 3, "calibration": "rank"}
    with pytest.raises(ValueError, match="bad value for max_span: '2.5' is not a valid int"):
        parse_overrides(["max_span=2.5"])
    with pytest.raises(ValueError, match="lam must lie in"):
        RunConfig(strategy="typhoon", lam=0.0)
    assert RunConfig(strategy="random", lam=0.0).lam == 0.0  # a parameter the strategy does not take is not checked
    with pytest.raises(ValueError, match="--p must lie in"):
        allowed_of(RunConfig, "p").check("--p", 1.5)  # a flag checked as its field is


def test_a_parameter_has_one_declaration_and_one_field():
    from typhoon.allowed import Positive
    from typhoon.masking.params import DELTA, Param, each_once, with_strategy_params

    other = Param("delta", float, 0.5, "another strategy's delta", Positive())
    with pytest.raises(ValueError, match="two strategies declare parameter 'delta' differently"):
        each_once([(DELTA,), (other,)])
    assert each_once([(DELTA,), (DELTA,)]) == (DELTA,)

    class Clash:
        __annotations__ = {"profile": "str", "delta": "float"}

    with pytest.raises(TypeError, match=r"strategy parameters \['delta'\] named like its fields"):
        with_strategy_params(after="profile")(Clash)


@pytest.mark.parametrize("name", [*STRATEGIES, *ALIASES])
def test_strategy_params_are_exactly_the_declared_ones(name):
    config = RunConfig(strategy=name)
    assert list(config.strategy_params()) == [param.name for param in parameters_of(name)]
    strategy = get_strategy(name, **config.strategy_params())
    assert {k: v for k, v in strategy.params.items() if k in config.strategy_params()} == config.strategy_params()


def test_span_parameters_reach_the_strategy_from_a_profile_and_the_cli():
    config = resolve("smoke", dict(task="mrpc", backbone="tiny-random", strategy="span", seed=0),
                     parse_overrides(["geometric_p=0.5", "max_span=3"]))
    strategy = get_strategy(config.strategy, **config.strategy_params())
    assert (strategy.geometric_p, strategy.max_span) == (0.5, 3)
    with pytest.raises(ValueError, match="geometric_p must lie in"):
        resolve("smoke", dict(task="mrpc", strategy="span", seed=0), {"geometric_p": 0.0})


def test_an_alias_does_not_receive_the_parameter_it_fixes():
    assert "calibration" not in RunConfig(strategy="typhoon_rank").strategy_params()
    assert get_strategy("typhoon_rank", **RunConfig(strategy="typhoon_rank").strategy_params()).calibration == "rank"


# --------------------------------------------------------------------------------------------------
# A config is made valid and never changes


def test_a_config_is_normalised_when_made_and_never_changes():
    config = RunConfig(task="MRPC", strategy="typhoon_rank")
    assert (config.task, config.calibration) == ("mrpc", "rank")  # the canonical name, the value the alias fixes
    for field, value in (("p", 0.3), ("task", "cola"), ("device", "gpu")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(config, field, value)
    assert (config.task, config.p, config.device) == ("mrpc", 0.15, "auto")
    other = config.replace(p=0.3, task="CoLA")
    assert (other.task, other.p, other.calibration) == ("cola", 0.3, "rank") and config.p == 0.15
    with pytest.raises(ValueError, match="p must lie in"):
        config.replace(p=1.5)  # another config, checked as every new one is


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12", "mps"])
def test_a_device_is_auto_cpu_cuda_cuda_n_or_mps(device):
    assert RunConfig(device=device).device == device


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cpu0", "tpu", "cuda:0:1", ""])
def test_any_other_device_is_refused_when_the_config_is_made_naming_the_allowed_ones(device):
    allowed = r"device must be one of \['auto', 'cpu', 'cuda', 'cuda:N', 'mps'\], got "
    with pytest.raises(ValueError, match=allowed + re.escape(repr(device))):
        RunConfig(device=device)
    with pytest.raises(ValueError, match=allowed):  # the same message on the way in from the command line
        resolve("smoke", {"task": "mrpc"}, parse_overrides([f"device={device}"]))


# --------------------------------------------------------------------------------------------------
# A run's identity


def test_identity_is_what_the_run_computes():
    config = resolve("smoke", dict(task="mrpc", backbone="tiny-random", strategy="random", seed=0))
    identity = config.identity()
    assert "profile" not in identity and not set(EXECUTION_FIELDS) & set(identity)
    assert {"p", "corruption", "seed", "ft_lr"} <= set(identity) and not {"delta", "geometric_p"} & set(identity)
    same = [config.replace(profile="other"), config.replace(num_threads=1, device="cpu"), config.replace(delta=0.9)]
    assert all(c.identity() == identity and c.run_id() == config.run_id() for c in same)
    different = [config.replace(p=0.2), config.replace(seed=1), config.replace(strategy="typhoon"),
                 config.replace(ft_epochs=2)]
    assert len({c.run_id() for c in different} | {config.run_id()}) == len(different) + 1
    typhoon = config.replace(strategy="typhoon")
    assert typhoon.replace(delta=0.9).run_id() != typhoon.run_id()  # typhoon does take delta
    assert len(config.run_id()) == 16 and config.run_id() == RunConfig.from_json(config.to_json()).run_id()


def test_identity_leaves_out_parameters_the_calibration_does_not_use():
    typhoon = resolve("cpu", dict(task="mrpc", strategy="typhoon", seed=0))
    # min-max (and rank) Typhoon never reads tau; softmax never reads delta
    assert "tau" not in typhoon.identity() and typhoon.replace(tau=0.5).run_id() == typhoon.run_id()
    rank = typhoon.replace(strategy="typhoon_rank")
    assert rank.replace(tau=0.5).run_id() == rank.run_id() and rank.replace(delta=0.9).run_id() != rank.run_id()
    softmax = typhoon.replace(strategy="typhoon_softmax")
    assert "delta" not in softmax.identity() and softmax.replace(delta=0.9).run_id() == softmax.run_id()
    assert softmax.replace(tau=0.5).run_id() != softmax.run_id()
    explicit = typhoon.replace(calibration="softmax")  # the same rule without the alias
    assert explicit.replace(delta=0.9).run_id() == explicit.run_id() and "tau" in explicit.identity()
    # the saliency source is a Typhoon parameter: random runs ignore it, Typhoon runs differ by it
    random = typhoon.replace(strategy="random")
    assert random.replace(saliency="task").run_id() == random.run_id()
    assert typhoon.replace(saliency="task").run_id() != typhoon.run_id()
    task = typhoon.replace(strategy="typhoon_task")
    assert "saliency" not in task.identity() and task.run_id() != typhoon.run_id()


def test_a_record_written_before_the_saliency_field_is_the_same_run():
    """A config.json without ``saliency`` (written before the field existed) ran with the default (mlm)."""
    config = resolve("smoke", dict(task="mrpc", backbone="tiny-random", strategy="typhoon", seed=0))
    old = {k: v for k, v in config.to_dict().items() if k != "saliency"}
    assert RunConfig.from_dict(old).identity() == config.identity()


def test_the_bottleneck_profile_shares_the_cpu_profiles_random_and_typhoon_runs():
    cpu = {(c.task, c.strategy, c.seed): c for c in get_profile("cpu").grid({"backbone": "minilm-l6"})}
    bottleneck = get_profile("bottleneck").grid()
    shared = [c for c in bottleneck if c.strategy in ("random", "typhoon")]
    assert len(shared) == 12 and all(c.identity() == cpu[(c.task, c.strategy, c.seed)].identity() for c in shared)
    softmax = [c for c in bottleneck if c.strategy == "typhoon_softmax"]
    assert softmax and all(c.tau == 0.5 and "tau" in c.identity() for c in softmax)
    assert {c.strategy for c in bottleneck} == {"random", "typhoon", "typhoon_rank", "typhoon_softmax", "typhoon_task"}


def test_the_decisive_mlm_profile_holds_the_cpu_profiles_cells_at_its_first_seeds():
    """The cpu reference run on minilm-l6-mlm (results/cpu-mlm) is made of decisive-mlm records, reused: the
    same identity, cell for cell, for random, whole_word and typhoon at seeds 0-2."""
    decisive_mlm = {(c.task, c.strategy, c.seed): c for c in get_profile("decisive-mlm").grid()}
    cpu = get_profile("cpu").grid()
    assert len(cpu) == 18
    assert all(c.identity() == decisive_mlm[(c.task, c.strategy, c.seed)].identity() for c in cpu)


def test_paper_shapes_is_the_paper_grid_on_the_shape_backbones_and_a_speed_check():
    """Issue 50, item 5: every cell of paper-shapes is the paper profile's cell with its backbone replaced by the
    random-init one of the same shape, and nothing else changed; its numbers are marked as timings only."""
    from typhoon.profiles import get_profile

    shape_of = {"tinybert": "tinybert-shape", "distilbert": "distilbert-shape", "bert-base": "bert-base-shape"}
    paper, shapes = get_profile("paper").grid(), get_profile("paper-shapes").grid()
    assert len(shapes) == len(paper) == 90
    expected = [dataclasses.replace(c, backbone=shape_of[c.backbone], profile="paper-shapes") for c in paper]
    assert shapes == expected
    assert get_profile("paper-shapes").speed_check and get_profile("paper-shapes").pipeline_check
    assert not get_profile("paper").speed_check and not get_profile("smoke").speed_check
