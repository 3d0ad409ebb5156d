"""What one run is (:class:`RunConfig`): every field, the values each allows, and how a value from the command
line (``--set KEY=VALUE``) is read as one (:func:`coerce`, :func:`parse_overrides`).

A run's configuration is resolved once (:func:`typhoon.profiles.resolve`, from its profile's layers) and then
travels whole, never re-read from ``profiles.toml``: pickled to the worker process that runs its cell
(:mod:`typhoon.runner.workers`), into the run record's ``config.json`` and back (:meth:`RunConfig.from_dict`;
:meth:`RunConfig.to_json` / :meth:`RunConfig.from_json` for the JSON text).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from typhoon.allowed import Allowed, IntAtLeast, Interval, Matching, OneOf, Positive
from typhoon.masking import (
    BASE_PARAMS,
    CONFIG_PARAMS,
    DEFAULT_SCHEDULE,
    PLUGIN_STRATEGIES,
    SCHEDULES,
    Param,
    arm_label,
    check_params,
    declared_params,
    inactive_parameters,
    parameters_of,
    plugins,
    resolve_alias,
    uses_task_saliency,
    with_strategy_params,
)

PRECISIONS = ("auto", "fp32", "bf16")
ATTENTIONS = ("auto", "eager", "sdpa")
DROPOUTS = ("auto", "native", "fast")
BATCH_ORDERS = ("length_grouped", "random")  # an epoch's training batches: typhoon.data.epoch_batches
# auto = the GPU where one is visible (else Apple's MPS, else the CPU); cuda:N names one GPU
DEVICES = Matching(r"auto|cpu|mps|cuda(:\d+)?", ("auto", "cpu", "cuda", "cuda:N", "mps"))
# Where and how fast a run executes does not change what it computes (on one kind of device).
EXECUTION_FIELDS = ("device", "num_threads")


def allows(allowed: Allowed) -> dict:
    """A RunConfig field's metadata: the values it may take, checked when a RunConfig is made."""
    return {"allowed": allowed}


@dataclass(frozen=True)
@with_strategy_params(after="profile")
class RunConfig:
    """Everything that determines one run. Defaults are the ``cpu`` profile's unless it says otherwise.

    It is checked and normalised when made (:func:`resolve`, :meth:`from_dict`: the boundary, with one message for
    a bad value everywhere) and never changes after (:meth:`replace` makes another): one that exists is valid.

    The masking fields (``p``, ``corruption``, ``delta``, ...) are the parameters the built-in strategies
    declare in :mod:`typhoon.masking.params`, with the same names, types, defaults and docs: the decorator
    :func:`~typhoon.masking.params.with_strategy_params` makes them fields, after ``profile``; ``python -m
    typhoon run --help`` lists them. A strategy receives only those it declares. A strategy of your own
    (``strategy = "my_module:MyStrategy"``, :mod:`typhoon.masking.plugins`) is held as its class's ``name``
    in ``strategy`` (the record folder's name), the spec it came from in ``strategy_source`` and the values
    of its own parameters (those beyond ``p`` and ``corruption``) in ``strategy_args``; both are left out of
    :meth:`to_dict` while empty, so a built-in strategy's record is what it always was.
    """

    task: str = "mrpc"
    backbone: str = "minilm-l6"
    strategy: str = "random"  # a built-in name or alias, a plugin's MODULE:CLASS (replaced by its name) or name
    strategy_source: str = ""  # a plugin strategy: the MODULE:CLASS it is loaded from; "" for the built-ins
    strategy_args: dict = field(default_factory=dict)  # a plugin strategy: its own parameters' values, by name
    # a task declared in a profiles file ([tasks.<name>], typhoon/declared.py): what decides its data (how its files
    # are read, its labels, its metric, each file's sha256); {} for a GLUE task
    task_declaration: dict = field(default_factory=dict)
    backbone_source: str = ""  # a backbone name declared in a profiles file: what it stands for; "" for any other
    seed: int = field(default=0, metadata=allows(IntAtLeast(0)))
    profile: str = "custom"  # a config made by hand (RunConfig(...)), from no profile; resolve() sets the profile it came from
    # masking (phase 1): here come p, corruption, delta, lam, ..., max_span: one field per parameter of the
    # built-in strategies, declared once in typhoon/masking/params.py (STRATEGY_PARAMS: type, default, doc, allowed values)
    schedule: str = field(default=DEFAULT_SCHEDULE, metadata=allows(OneOf(SCHEDULES)))  # per-sequence masking rate: fixed | uniform | mixture
    pi0: float = field(default=0.0, metadata=allows(Interval(0.0, 1.0, high_open=True)))  # mixture schedule: probability that a whole sequence is masked
    # phase 1: MLM adaptation on the task's own training text
    mlm_epochs: int = field(default=1, metadata=allows(IntAtLeast(0)))  # 0: no adaptation, straight to fine-tuning
    mlm_lr: float = field(default=5e-5, metadata=allows(Positive()))
    # task-loss saliency only (typhoon_task): steps fine-tuning the task model whose gradient drives the
    # masks, before phase 1 (typhoon.masking.task_saliency); 0 = none, which such a run refuses (a head at chance)
    task_head_warmup: int = field(default=0, metadata=allows(IntAtLeast(0)))
    # phase 2: fine-tuning
    ft_epochs: int = field(default=3, metadata=allows(IntAtLeast(1)))
    ft_lr: float = field(default=5e-5, metadata=allows(Positive()))
    batch_size: int = field(default=32, metadata=allows(IntAtLeast(1)))
    eval_batch_size: int = field(default=128, metadata=allows(IntAtLeast(1)))
    max_length: int = field(default=128, metadata=allows(IntAtLeast(8)))  # [CLS], [SEP] and a few words
    # the training batches of an epoch: length_grouped = shuffled, then grouped by length (little padding);
    # random = a plain shuffle (transformers' RandomSampler, the 2023 code's): typhoon.data.epoch_batches
    batch_order: str = field(default="length_grouped", metadata=allows(OneOf(BATCH_ORDERS)))
    weight_decay: float = field(default=0.01, metadata=allows(Interval(0.0, math.inf, high_open=True)))
    warmup_ratio: float = field(default=0.1, metadata=allows(Interval(0.0, 1.0, high_open=True)))
    max_train_examples: int | None = field(default=None, metadata=allows(IntAtLeast(1, none_ok=True)))  # None = the whole split (first N rows otherwise)
    max_eval_examples: int | None = field(default=None, metadata=allows(IntAtLeast(1, none_ok=True)))
    precision: str = field(default="auto", metadata=allows(OneOf(PRECISIONS)))  # auto = bf16 autocast where the hardware has it, else fp32
    attention: str = field(default="auto", metadata=allows(OneOf(ATTENTIONS)))  # attention kernel: auto = eager on CPU, sdpa on GPU (training.device_settings.resolve_attention)
    dropout: str = field(default="auto", metadata=allows(OneOf(DROPOUTS)))  # dropout kernel: auto = fast on CPU (typhoon/models/dropout.py), native on GPU
    device: str = field(default="auto", metadata=allows(DEVICES))
    num_threads: int | None = field(default=None, metadata=allows(IntAtLeast(1, none_ok=True)))  # None = all cores torch sees

    def __post_init__(self):
        """Normalise (the only place fields are set after ``__init__``), then check: ValueError naming the first bad
        name or value: the task, the strategy and its parameters, and every field against what it allows (its
        ``allows`` metadata). Imports nothing heavy: the command line checks a config before torch is imported."""
        from typhoon.names import backbone_source, canonical_task, task_declaration

        task = canonical_task(self.task)
        for name, value in {"task": task, "task_declaration": task_declaration(task, self.task_declaration),
                            "backbone_source": backbone_source(self.backbone, self.backbone_source),
                            **self._plugin_fields()}.items():
            object.__setattr__(self, name, value)
        for name, value in self._alias_values().items():  # of the strategy just named
            object.__setattr__(self, name, value)
        try:
            check_params(self.strategy, self.strategy_params())
            for spec in dataclasses.fields(self):
                if "allowed" in spec.metadata:
                    spec.metadata["allowed"].check(spec.name, getattr(self, spec.name))
        except ValueError as err:
            # the bad value first, on its own line; the run's whole config (hundreds of characters) on the next
            raise ValueError(f"{err}\n  in the run {self.describe()}") from None

    def _plugin_fields(self) -> dict:
        """``strategy``, ``strategy_source`` and ``strategy_args`` as the config holds them. A strategy of your
        own: its class loaded (:func:`typhoon.masking.plugins.load`), its name in ``strategy``, its spec in
        ``strategy_source``, and every parameter it declares beyond the RunConfig fields in ``strategy_args``
        (its declared default where none is given, each value converted and checked). A built-in strategy
        has neither."""
        strategy, source, args = self.strategy, self.strategy_source, self.strategy_args
        if plugins.is_spec(strategy):
            source = strategy.strip()
            strategy = plugins.load(source).name
        elif source:
            name = plugins.load(source).name
            if name != strategy:
                raise ValueError(f"bad run config: strategy_source {source!r} is the strategy {name!r}, not {strategy!r}")
        else:
            strategy = plugins.known(strategy)  # an entry point's name: loaded and registered
            if strategy in PLUGIN_STRATEGIES:
                source = plugins.source_of(PLUGIN_STRATEGIES[strategy])
        if not isinstance(args, Mapping):
            raise ValueError(f"bad run config: strategy_args must be a mapping of parameter values, got {args!r}")
        if not source:
            if args:
                raise ValueError(f"bad run config: strategy {strategy!r} takes no strategy_args, got "
                                 f"{sorted(args)} (its parameters are RunConfig fields)")
            return {"strategy": strategy, "strategy_source": source, "strategy_args": {}}
        own = plugin_params(strategy)
        unknown = sorted(set(args) - {param.name for param in own})
        if unknown:
            raise ValueError(f"bad run config: strategy {strategy!r} ({source}) has no "
                             f"parameter(s) {unknown}; it declares {[param.name for param in declared_params(strategy)]}")
        args = {param.name: param.check(convert(param.name, param.type.__name__, args.get(param.name, param.default)))
                for param in own}
        return {"strategy": strategy, "strategy_source": source, "strategy_args": args}

    def _alias_values(self) -> dict:
        """The values an alias (``typhoon_rank``, ``typhoon_task``) fixes: the config holds them, so a record
        says what ran, never the field's default in their place. A field set to another value than the alias
        fixes is refused."""
        _, fixed = resolve_alias(self.strategy)
        for name, value in fixed.items():
            current = getattr(self, name)
            if current != value and current != RunConfig.__dataclass_fields__[name].default:
                raise ValueError(f"bad run config: strategy {self.strategy!r} fixes {name}={value!r}, "
                                 f"got {name}={current!r}")
        return dict(fixed)

    def strategy_params(self) -> dict:
        """The values of exactly the parameters the chosen strategy declares (``get_strategy``'s keywords):
        RunConfig fields, and a plugin strategy's own parameters from ``strategy_args``."""
        return {param.name: self.strategy_args[param.name] if param.name in self.strategy_args
                else getattr(self, param.name) for param in parameters_of(self.strategy)}

    @property
    def label(self) -> str:
        """The strategy folder name: the strategy, plus the schedule when it is not the fixed one."""
        return arm_label(self.strategy, self.schedule)

    def relative_dir(self) -> Path:
        return Path("runs") / self.task / self.backbone.replace("/", "__") / self.label / f"seed{self.seed}"

    def identity(self) -> dict:
        """The fields that decide what the run computes: all of them but the profile's name, the
        execution fields (device, threads), the masking parameters the chosen strategy does not take and
        those its other values make irrelevant (``tau`` of min-max Typhoon, ``delta`` of softmax Typhoon:
        ``masking.inactive_parameters``), ``task_head_warmup`` unless the saliency is a task loss's, and
        ``pi0`` unless the schedule is the mixture.

        Two configs with the same identity give the same record (on one kind of device), whatever
        profile they came from: a profile that sets ``tau`` for its softmax cells shares its random and
        min-max cells with one that does not. Identities are always computed by this code, from the
        stored config on both sides (records hold no identity hash), so a record written before a field
        existed (it ran with the field's default) or before a parameter became inactive still matches.
        """
        params = self.strategy_params()
        unused = (STRATEGY_FIELDS - set(params)) | inactive_parameters(self.strategy, params)
        no_task_model = set() if uses_task_saliency(self.strategy, params) else {"task_head_warmup"}
        no_full_mask = set() if self.schedule == "mixture" else {"pi0"}  # only the mixture masks whole sequences
        skip = {"profile", *EXECUTION_FIELDS, *unused, *no_task_model, *no_full_mask}
        return {k: v for k, v in self.to_dict().items() if k not in skip}

    def run_id(self) -> str:
        """A short, stable name of :meth:`identity` (a hash of its canonical JSON)."""
        canonical = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        """Every field's value; ``strategy_source`` and ``strategy_args`` only where a plugin strategy sets
        them, ``task_declaration`` and ``backbone_source`` only for a task or a backbone name declared in a
        profiles file (a built-in strategy's, task's and backbone's config, record and identity are what they were
        before these existed)."""
        data = dataclasses.asdict(self)
        for key in PLUGIN_FIELDS:
            if not data[key]:
                del data[key]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping, what: str = "run config") -> RunConfig:
        """A validated RunConfig from a mapping of field values (e.g. a record's ``config.json``).

        Unknown keys and values of the wrong type are refused, naming them. A missing field takes its
        default: a record written before a field existed ran with that default.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"{what} must be a JSON object of RunConfig fields, got {type(data).__name__}")
        unknown = sorted(set(data) - set(FIELD_TYPES))
        if unknown:
            raise ValueError(f"{what} has unknown key(s) {unknown}; choose from {sorted(FIELD_TYPES)}")
        return cls(**{key: coerce(key, value) for key, value in data.items()})

    @classmethod
    def from_json(cls, text: str, what: str = "run config") -> RunConfig:
        """:meth:`from_dict` of a JSON object (a config as JSON text)."""
        if not isinstance(text, str):
            raise ValueError(f"{what} must be a JSON string, got {type(text).__name__} {text!r}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{what} is not valid JSON: {text[:200]!r} ({err})") from None
        return cls.from_dict(data, what)

    def describe(self) -> str:
        return json.dumps({k: v for k, v in self.to_dict().items() if k in
                           ("task", "backbone", "strategy", "seed", "schedule", "pi0", "p", "precision", "attention", "dropout")})

    def replace(self, **changes) -> RunConfig:
        """A copy with ``changes``; another strategy leaves this one's plugin source and arguments behind, another
        task this one's declaration, another backbone what this one's name stood for."""
        if "strategy" in changes:
            changes = {"strategy_source": "", "strategy_args": {}, **changes}
        if "task" in changes:
            changes = {"task_declaration": {}, **changes}
        if "backbone" in changes:
            changes = {"backbone_source": "", **changes}
        return dataclasses.replace(self, **changes)


FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(RunConfig)}
# set only for what a user brings: a strategy of their own, a task or a backbone name declared in a profiles file
# (RunConfig.to_dict leaves them out while empty)
PLUGIN_FIELDS = ("strategy_source", "strategy_args", "task_declaration", "backbone_source")
# Fields that are some strategy's parameter (only the chosen strategy's count for a run's identity).
STRATEGY_FIELDS = frozenset(param.name for param in CONFIG_PARAMS)


def plugin_params(name: str) -> tuple[Param, ...]:
    """A loaded plugin strategy's own parameters (those held in ``strategy_args``): all it declares but the
    base's. ValueError if one is named like a RunConfig field (its value would have two homes)."""
    own = declared_params(name)[len(BASE_PARAMS):]
    clash = [param.name for param in own if param.name in FIELD_TYPES]
    if clash:
        raise ValueError(f"strategy {name!r} ({plugins.source_of(PLUGIN_STRATEGIES[name])}) declares parameter(s) "
                         f"{clash} named like RunConfig fields; rename them")
    return own


def allowed_of(cls: type, name: str) -> Allowed:
    """What field ``name`` of dataclass ``cls`` (RunConfig, Profile) allows: its ``allows`` metadata (a strategy
    parameter's: its declaration's), so that a command line flag setting the same thing (``--seeds``,
    ``--workers``) is checked against the same range."""
    metadata = cls.__dataclass_fields__[name].metadata
    return metadata["allowed"] if "allowed" in metadata else metadata["param"].allowed


def coerce(key: str, raw) -> object:
    """``raw`` (a string from the command line, a TOML or JSON value) as the declared type of field ``key``.

    The one place where configuration values are converted: "0.2" -> 0.2, "none" -> None where the
    field allows None, 3.0 -> 3 for an integer field; anything else of the wrong type is refused.
    """
    if key not in FIELD_TYPES:
        raise ValueError(f"unknown RunConfig field {key!r}; choose one of {sorted(FIELD_TYPES)}")
    kind = FIELD_TYPES[key]
    if kind == "dict":  # strategy_args: a table in TOML, an object in JSON (or on the command line)
        value = json.loads(raw) if isinstance(raw, str) and raw.strip().startswith("{") else raw
        if not isinstance(value, Mapping):
            raise ValueError(f"bad value for {key}: {raw!r} is not a table of parameter values")
        return dict(value)
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("none", "null")):
        if "None" in kind:
            return None
        raise ValueError(f"bad value for {key}: None is not allowed")
    return convert(key, kind.replace(" | None", ""), raw)


def convert(key: str, base: str, raw) -> object:
    """``raw`` as ``base`` (int, float or str): the conversion of :func:`coerce`, for a RunConfig field or a
    plugin strategy's parameter."""
    try:
        if isinstance(raw, bool):  # True is an int to Python, never a number in a config
            raise ValueError
        if base == "int":
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            return int(raw)
        if base == "float":
            return float(raw)
        if not isinstance(raw, str):
            raise ValueError
        return raw
    except (TypeError, ValueError):
        raise ValueError(f"bad value for {key}: {raw!r} is not a valid {base}") from None


def parse_overrides(items: Iterable[str] | None, strategies: Iterable[str] = ()) -> dict:
    """``["key=value", ...]`` (the CLI's ``--set``) as typed RunConfig field values; a later key wins.

    A key that is no RunConfig field but a parameter of one of the plugin ``strategies`` named (the run's or
    the grid's: :mod:`typhoon.masking.plugins`, loaded here) goes into ``strategy_args``, as its declared type."""
    own = {}
    for strategy in strategies:
        name = plugins.known(strategy)
        if name in PLUGIN_STRATEGIES:
            own.update({param.name: param for param in plugin_params(name)})
    overrides = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"bad --set {item!r}: expected key=value")
        key, raw = (s.strip() for s in item.split("=", 1))
        if key in own:
            overrides.setdefault("strategy_args", {})[key] = convert(key, own[key].type.__name__, raw)
            continue
        if key not in FIELD_TYPES:
            raise ValueError(f"bad --set {item!r}: unknown key {key!r}; choose one of {sorted(FIELD_TYPES)}"
                             + (f" or a parameter of the strategies named: {sorted(own)}" if own else ""))
        overrides[key] = coerce(key, raw)
    return overrides
