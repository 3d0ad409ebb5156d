"""The masking strategies' names and parameter declarations, without torch.

Every built-in strategy's constructor parameters are declared once, here (:data:`STRATEGY_PARAMS`), each a
:class:`Param` with its type, default, doc and allowed values. Everything else is derived from these
declarations: the registry (:mod:`typhoon.masking.registry`) imports the class of each name declared here, the
classes take their ``PARAMS`` and their constructors' defaults from them, the
run configuration (:class:`typhoon.config.RunConfig`) holds every parameter as a field of the declared type
and default, and the command line's help lists them. This module imports nothing heavy on purpose:
``python -m typhoon --help``, ``profiles`` and building a RunConfig's field list must not pay for importing
torch (seconds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from typhoon.allowed import Allowed, IntAtLeast, Interval, OneOf, Positive

CORRUPTIONS = ("bert", "mask_only")
SPECIALS_RULES = ("never", "maskable")  # random: may [CLS]/[SEP] be selected (typhoon.masking.random)
CALIBRATIONS = ("minmax", "rank", "softmax")  # typhoon's calibrations (typhoon.masking.calibration)
SALIENCY_SOURCES = ("mlm", "task")  # which loss typhoon's saliency is the gradient of (typhoon.masking.task_saliency)
# Typhoon's calibration rules, each this package's choice first and the paper's 2023 code's second
# (man2machine/cs324-final-project-2023, cs324_project/masking.py; typhoon.masking.calibration says what each does)
EMA_STARTS = ("first_sighting", "zeros")  # a type's first weight: its first batch estimate | an EMA from zero
UNSEEN_RULES = ("neutral", "top")  # preference of a type never seen: the band's midpoint | its top
BUDGETS = ("non_special", "all_ids")  # exact budget over non-special tokens | closed form over every input id
#: The schedules a run config can name (typhoon.masking.schedules): every sequence at the budget p; a rate
#: uniform on (0, 1]; the budget p with a whole sequence masked with probability pi0.
SCHEDULES = ("fixed", "uniform", "mixture")
# A run's schedule (RunConfig.schedule) unless its profile names another: every sequence masked at the budget.
DEFAULT_SCHEDULE = "fixed"


def arm_label(strategy: str, schedule: str) -> str:
    """The name of a strategy under a schedule in the statistics and in a record's folder: the strategy
    alone under :data:`DEFAULT_SCHEDULE`, else ``strategy+schedule`` (e.g. ``random+uniform``)."""
    return strategy if schedule == DEFAULT_SCHEDULE else f"{strategy}+{schedule}"


@dataclass(frozen=True)
class Param:
    """One constructor parameter of a masking strategy."""

    name: str
    type: type  # float, int or str: what a configuration value is converted to
    default: Any
    doc: str
    allowed: Allowed  # the values it may take: checked by the strategy and, before torch, by the run config

    def check(self, value: Any) -> Any:
        """``value`` if allowed (as a float for a real parameter), else ValueError naming it."""
        return self.allowed.check(self.name, value)


# p = 1 selects every non-special token, which every built-in strategy honours (as transformers'
# DataCollatorForLanguageModeling allows mlm_probability=1); p = 0 would select nothing to predict.
P = Param("p", float, 0.15, "masking budget: expected share of non-special tokens selected",
          Interval(0.0, 1.0, low_open=True))
CORRUPTION = Param("corruption", str, "bert", "bert = 80 % [MASK] / 10 % random / 10 % kept; mask_only",
                   OneOf(CORRUPTIONS))
BASE_PARAMS = (P, CORRUPTION)


def check_rates(rates):
    """Per-row masking rates (a schedule's draws, which a strategy call and the budget solvers take; numpy or
    torch): each in [0, 1], 0 included (a row may select nothing), unlike the budget p itself (:data:`P`, (0, 1]).
    The one check of a rate, where it enters a strategy or a solver; ``rates`` back."""
    if not bool(((rates >= 0) & (rates <= 1)).all()):
        raise ValueError(f"a masking rate must lie in [0, 1], got {rates.tolist()}")
    return rates


SPECIALS = Param("specials", str, "never",
                 "random: never = [CLS] and [SEP] are never selected (BERT, DataCollatorForLanguageModeling); "
                 "maskable = every real position is drawn at the rate p, [CLS] and [SEP] included (the 2023 code's "
                 "random collator); padding never", OneOf(SPECIALS_RULES))
GEOMETRIC = Param("geometric_p", float, 0.2, "span: parameter of the geometric span-length law, in (0, 1] "
                  "(SpanBERT's)", Interval(0.0, 1.0, low_open=True))
MAX_SPAN = Param("max_span", int, 10, "span: longest span, in words (SpanBERT's)", IntAtLeast(1))
DELTA = Param("delta", float, 0.4, "typhoon: width of the calibration band [1 - delta, 1], in [0, 1]",
              Interval(0.0, 1.0))
LAM = Param("lam", float, 0.8, "typhoon: EMA rate of the saliency weights, in (0, 1]", Interval(0.0, 1.0, low_open=True))
CALIBRATION = Param("calibration", str, "minmax", f"typhoon: {' | '.join(CALIBRATIONS)} (minmax is the paper's)",
                    OneOf(CALIBRATIONS))
TAU = Param("tau", float, 1.0, "typhoon: softmax calibration temperature, > 0", Positive())
SALIENCY = Param("saliency", str, "mlm", f"typhoon: saliency from the {' | '.join(SALIENCY_SOURCES)} loss "
                                         "(mlm is the paper's; task: typhoon.masking.task_saliency)",
                 OneOf(SALIENCY_SOURCES))
EMA_START = Param("ema_start", str, "first_sighting",
                  "typhoon: a type's first weight: first_sighting = its first batch estimate; zeros = an EMA from 0 "
                  "(the 2023 code: lam x the estimate, but at the very first step)", OneOf(EMA_STARTS))
UNSEEN = Param("unseen", str, "neutral",
               "typhoon: preference of a type never seen: neutral = the band's midpoint (softmax: an average "
               "type's); top = the highest preference (the 2023 code)", OneOf(UNSEEN_RULES))
BUDGET = Param("budget", str, "non_special",
               "typhoon: non_special = the expected rate over non-special tokens is exactly p (water-filled); "
               "all_ids = beta = p N / sum b f over every input id, specials included, in closed form (the 2023 "
               "code: specials are never masked, so the realised rate falls below p)", OneOf(BUDGETS))
TYPHOON_2023 = {"ema_start": "zeros", "unseen": "top", "budget": "all_ids"}  # the 2023 code's three rules


# The built-in strategies and the parameters each declares (its class: typhoon.masking.registry, which imports
# torch). RunConfig holds each parameter once as a field, in this order (the base's, Typhoon's, span's: the field
# order of the records' run.json), and the command line lists the strategies in this order.
STRATEGY_PARAMS: dict[str, tuple[Param, ...]] = {
    "random": (*BASE_PARAMS, SPECIALS),
    "whole_word": BASE_PARAMS,
    "typhoon": (*BASE_PARAMS, DELTA, LAM, CALIBRATION, TAU, SALIENCY, EMA_START, UNSEEN, BUDGET),
    "span": (*BASE_PARAMS, GEOMETRIC, MAX_SPAN),
}


def each_once(declared: Iterable[tuple[Param, ...]]) -> tuple[Param, ...]:
    """Every parameter of ``declared`` (strategies' parameter lists) once, in order of first appearance.
    ValueError if two declare one name differently: a RunConfig field has one type, default and doc."""
    once: dict[str, Param] = {}
    for param in (param for params in declared for param in params):
        if once.setdefault(param.name, param) != param:
            raise ValueError(f"two strategies declare parameter {param.name!r} differently: {once[param.name]} "
                             f"and {param}")
    return tuple(once.values())


# Every parameter of the built-in strategies, once, in the order of STRATEGY_PARAMS: RunConfig's masking fields.
CONFIG_PARAMS: tuple[Param, ...] = each_once(STRATEGY_PARAMS.values())


def with_strategy_params(after: str):
    """A class decorator, under ``@dataclass`` (:class:`typhoon.config.RunConfig`'s): a field for each parameter
    of :data:`CONFIG_PARAMS`, inserted after field ``after``, in that order, of the declared type, with the
    declared default and the declaration as its metadata (``param``: its doc and the values it allows, which
    a RunConfig checks, when it is made, for the chosen strategy's parameters)."""

    def insert(cls: type) -> type:
        clash = sorted({param.name for param in CONFIG_PARAMS} & set(cls.__annotations__))
        if clash or after not in cls.__annotations__:
            raise TypeError(f"{cls.__name__}: strategy parameters {clash} named like its fields, or no field {after!r}")
        annotations = {}
        for name, kind in cls.__annotations__.items():
            annotations[name] = kind
            if name == after:
                for param in CONFIG_PARAMS:
                    annotations[param.name] = param.type.__name__  # a string, as `from __future__ import annotations` writes
                    setattr(cls, param.name, field(default=param.default, metadata={"param": param}))
        cls.__annotations__ = annotations
        return cls

    return insert


# Registry aliases: a name fixing some parameters of a strategy.
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    **{f"typhoon_{method}": ("typhoon", {"calibration": method}) for method in CALIBRATIONS},
    "typhoon_task": ("typhoon", {"saliency": "task"}),
    "typhoon_2023": ("typhoon", dict(TYPHOON_2023)),  # the paper's code's calibration rules (min-max, MLM saliency)
    "random_2023": ("random", {"specials": "maskable"}),  # the paper's code's random arm: [CLS]/[SEP] maskable
    # every calibration with task saliency has its name too, so that a strategy's ``name`` is always one
    # get_strategy accepts (typhoon.masking.saliency.TyphoonMasking.name)
    **{f"typhoon_{method}_task": ("typhoon", {"calibration": method, "saliency": "task"})
       for method in CALIBRATIONS if method != "minmax"},
}


def _typhoon_inactive(values: dict[str, Any]) -> set[str]:
    """softmax does not use ``delta``; minmax and rank do not use ``tau``."""
    return {"delta"} if values.get("calibration", "minmax") == "softmax" else {"tau"}


# Strategies from outside the package (``--strategy my_module:MyStrategy`` or the ``typhoon.strategies`` entry
# points): each loaded one's name and class, registered by :mod:`typhoon.masking.plugins` when it is first named.
# Their names, parameters and checks then work as the built-ins' do (no alias, no inactive parameters).
PLUGIN_STRATEGIES: dict[str, type] = {}


def declared_params(base: str) -> tuple[Param, ...]:
    """The parameters strategy ``base`` (a built-in or a loaded plugin, no alias) declares."""
    return STRATEGY_PARAMS[base] if base in STRATEGY_PARAMS else tuple(PLUGIN_STRATEGIES[base].PARAMS)


# Parameters that given values of the others make irrelevant (a run's identity leaves them out, so two
# configs differing only there are the same run). Strategies not listed use every parameter they declare.
INACTIVE_RULES = {"typhoon": _typhoon_inactive}


def uses_task_saliency(name: str, params: dict[str, Any]) -> bool:
    """Whether strategy ``name`` with its declared ``params`` takes its saliency from a task loss (the
    phase-1 task model of :mod:`typhoon.masking.task_saliency`, whose warm-up only such runs have)."""
    base, fixed = resolve_alias(name)
    return {**params, **fixed}.get("saliency", "mlm") == "task"


def strategy_names() -> list[str]:
    """Every name ``typhoon.masking.get_strategy`` accepts: the built-ins, their aliases and the plugin
    strategies loaded in this process (any ``module:Class`` is accepted too: :mod:`typhoon.masking.plugins`)."""
    return [*STRATEGY_PARAMS, *ALIASES, *PLUGIN_STRATEGIES]


def builtin_names() -> list[str]:
    """The built-in strategies and their aliases: names no plugin strategy may take."""
    return [*STRATEGY_PARAMS, *ALIASES]


def resolve_alias(name: str) -> tuple[str, dict[str, Any]]:
    """(registered strategy, parameters the name fixes); ValueError naming an unknown strategy."""
    base, fixed = ALIASES.get(name, (name, {}))
    if base not in STRATEGY_PARAMS and base not in PLUGIN_STRATEGIES:
        raise ValueError(f"unknown masking strategy {name!r}; choose one of {strategy_names()} or name your own "
                         "as MODULE:CLASS (docs/extending.md)")
    return base, fixed


def parameters_of(name: str) -> tuple[Param, ...]:
    """The parameters ``get_strategy(name, ...)`` takes: the strategy's declarations, less those an alias fixes."""
    base, fixed = resolve_alias(name)
    return tuple(param for param in declared_params(base) if param.name not in fixed)


def check_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters of strategy ``name`` with what its alias fixes added, each checked against its
    declaration: what ``get_strategy`` builds the strategy from. ValueError naming an unknown strategy or
    parameter, a value the alias fixes otherwise, or a value not allowed -- without importing torch."""
    base, fixed = resolve_alias(name)
    for key, value in fixed.items():
        if key in params and params[key] != value:
            raise ValueError(f"strategy {name!r} fixes {key}={value!r}, got {key}={params[key]!r}")
    declared = {param.name: param for param in declared_params(base)}
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise ValueError(f"strategy {base!r} got unknown parameter(s) {unknown}; valid: {list(declared)}")
    values = {**params, **fixed}
    return {key: declared[key].check(value) for key, value in values.items()}


def ignored_parameters(names: Iterable[str], keys: Iterable[str]) -> list[str]:
    """Of ``keys`` (a command's ``--set`` keys), the strategy parameters that no strategy of ``names`` (the run's
    or the grid's, loaded) takes: say ``--strategy random --set delta=0.3``, which the run would silently ignore."""
    declared = {param.name for params in (*STRATEGY_PARAMS.values(), *(c.PARAMS for c in PLUGIN_STRATEGIES.values()))
                for param in params}
    taken = {param.name for name in names for param in parameters_of(name)}
    return [key for key in keys if key in declared and key not in taken]


def inactive_parameters(name: str, params: dict[str, Any]) -> set[str]:
    """The parameters of :func:`parameters_of` that do not change what strategy ``name`` does with these
    ``params`` (its declared values; an alias's fixed values are added here)."""
    base, fixed = resolve_alias(name)
    rule = INACTIVE_RULES.get(base)
    return (rule({**params, **fixed}) if rule else set()) - set(fixed)


def strategy_help() -> str:
    """The strategies and the parameters each takes (``--set name=value``), from their declarations: the
    built-ins, then any plugin strategy loaded in this process (``--strategy MODULE:CLASS --help`` loads it)."""
    lines = ["masking strategies and their parameters (--set NAME=VALUE):"]
    for name, params in STRATEGY_PARAMS.items():
        lines.append(f"  {name}")
        lines += _param_lines(params)
    lines.append("  aliases: " + ", ".join(f"{alias} = {base} with {fixed}" for alias, (base, fixed) in ALIASES.items()))
    for name, cls in PLUGIN_STRATEGIES.items():
        lines.append(f"  {name} (--strategy {cls.__module__}:{cls.__qualname__})")
        lines += _param_lines(cls.PARAMS)
    lines.append("  your own: --strategy MODULE:CLASS (a MaskingStrategy in a file importable from here; "
                 "docs/extending.md); add --help to see its parameters")
    return "\n".join(lines)


def _param_lines(params) -> list[str]:
    """One help line per parameter: its name, type, default and what it does."""
    return [f"    {p.name} ({p.type.__name__}, default {p.default!r}): {p.doc}" for p in params]
