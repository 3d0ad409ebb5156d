"""Run configuration (a dataclass) and the profiles that expand into grids of runs.

A run is identified by (task, backbone, strategy + its params, schedule, seed, profile). Profiles live
in one readable file, ``typhoon/profiles.toml``: each names a grid (tasks × backbones × strategies ×
schedules × seeds) and the hyperparameters shared by its runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from typhoon.schedules import SCHEDULES

PROFILES_FILE = Path(__file__).with_name("profiles.toml")
PRECISIONS = ("auto", "fp32", "bf16")
ATTENTIONS = ("auto", "eager", "sdpa")
DROPOUTS = ("auto", "native", "fast")


@dataclass
class RunConfig:
    """Everything that determines one run. Defaults are the ``cpu`` profile's unless it says otherwise."""

    task: str = "mrpc"
    backbone: str = "minilm-l6"
    strategy: str = "random"
    seed: int = 0
    profile: str = "custom"
    # masking (phase 1)
    p: float = 0.15  # masking budget: expected share of non-special tokens selected
    corruption: str = "bert"  # "bert" = 80 % [MASK] / 10 % random / 10 % kept; "mask_only"
    delta: float = 0.4  # typhoon: width of the calibration band [1 - delta, 1]
    lam: float = 0.8  # typhoon: EMA rate of the saliency weights
    calibration: str = "minmax"  # typhoon: minmax (paper) | rank | softmax
    tau: float = 1.0  # typhoon softmax temperature
    schedule: str = "fixed"  # per-sequence masking rate: fixed | uniform | mixture
    pi0: float = 0.0  # mixture schedule: probability that a whole sequence is masked
    # phase 1: MLM adaptation on the task's own training text
    mlm_epochs: int = 1
    mlm_lr: float = 5e-5
    # phase 2: fine-tuning
    ft_epochs: int = 3
    ft_lr: float = 5e-5
    batch_size: int = 32
    eval_batch_size: int = 128
    max_length: int = 128
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_train_examples: int | None = None  # None = the whole split (first N rows otherwise)
    max_eval_examples: int | None = None
    precision: str = "auto"  # auto = bf16 autocast where the hardware has it, else fp32
    attention: str = "auto"  # attention kernel: auto = eager on CPU, sdpa on GPU (see pipeline.resolve_attention)
    dropout: str = "auto"  # dropout kernel: auto = fast on CPU (typhoon/dropout.py), native on GPU
    device: str = "auto"  # auto = cuda if visible, else cpu
    num_threads: int | None = None  # None = all cores torch sees

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        from typhoon.data import get_task
        from typhoon.masking import get_strategy

        self.task = get_task(self.task).name
        get_strategy(self.strategy, **self.strategy_params())  # raises on bad names / values
        checks = [
            (self.schedule in SCHEDULES, f"schedule must be one of {SCHEDULES}"),
            (0.0 <= self.pi0 < 1.0, "pi0 must be in [0, 1)"),
            (self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}"),
            (self.attention in ATTENTIONS, f"attention must be one of {ATTENTIONS}"),
            (self.dropout in DROPOUTS, f"dropout must be one of {DROPOUTS}"),
            (self.mlm_epochs >= 0 and self.ft_epochs >= 1, "need mlm_epochs >= 0 and ft_epochs >= 1"),
            (self.batch_size >= 1 and self.eval_batch_size >= 1, "batch sizes must be >= 1"),
            (self.max_length >= 8, "max_length must be >= 8"),
            (self.mlm_lr > 0 and self.ft_lr > 0, "learning rates must be > 0"),
            (0 <= self.warmup_ratio < 1, "warmup_ratio must be in [0, 1)"),
            (self.seed >= 0, "seed must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"bad run config: {message} (got {self.describe()})")
        for name in ("max_train_examples", "max_eval_examples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"bad run config: {name} must be >= 1 or None, got {value}")

    def strategy_params(self) -> dict:
        params = {"p": self.p, "corruption": self.corruption}
        if self.strategy.startswith("typhoon"):
            params.update(delta=self.delta, lam=self.lam, tau=self.tau)
            if self.strategy == "typhoon":
                params["calibration"] = self.calibration
        return params

    @property
    def label(self) -> str:
        """The strategy folder name: the strategy, plus the schedule when it is not the fixed one."""
        return self.strategy if self.schedule == "fixed" else f"{self.strategy}+{self.schedule}"

    def relative_dir(self) -> Path:
        return Path("runs") / self.task / self.backbone.replace("/", "__") / self.label / f"seed{self.seed}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        return json.dumps({k: v for k, v in self.to_dict().items() if k in
                           ("task", "backbone", "strategy", "seed", "schedule", "pi0", "p", "precision", "attention", "dropout")})

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)


FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(RunConfig)}


def parse_override(item: str) -> tuple[str, object]:
    """Parse one ``key=value`` (CLI ``--set``) into a typed RunConfig field value."""
    if "=" not in item:
        raise ValueError(f"bad --set {item!r}: expected key=value")
    key, raw = (s.strip() for s in item.split("=", 1))
    if key not in FIELD_TYPES:
        raise ValueError(f"bad --set {item!r}: unknown key {key!r}; choose one of {sorted(FIELD_TYPES)}")
    return key, coerce(key, raw)


def coerce(key: str, raw) -> object:
    """Convert a string (or loosely typed value) to the declared type of RunConfig field ``key``."""
    kind = FIELD_TYPES[key]
    if raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null")):
        if "None" in kind:
            return None
        raise ValueError(f"bad value for {key}: None is not allowed")
    base = kind.replace(" | None", "")
    try:
        if base == "int":
            if isinstance(raw, float) and not raw.is_integer() or isinstance(raw, bool):
                raise ValueError
            return int(raw)
        if base == "float":
            if isinstance(raw, bool):
                raise ValueError
            return float(raw)
        return str(raw)
    except (TypeError, ValueError):
        raise ValueError(f"bad value for {key}: {raw!r} is not a valid {base}") from None


@dataclass
class Profile:
    """A named grid of runs plus the hyperparameters its runs share."""

    name: str
    description: str
    tasks: list[str]
    backbones: list[str]
    strategies: list[str]
    seeds: list[int]
    schedules: list[str] = field(default_factory=lambda: ["fixed"])
    settings: dict = field(default_factory=dict)
    task_settings: dict = field(default_factory=dict)  # per-task overrides of `settings`
    extra_cells: list[dict] = field(default_factory=list)  # single cells added to the grid
    workers: int = 1  # cells run at once by `reproduce` unless --workers says otherwise

    def run_config(self, **cell) -> RunConfig:
        """The config of one cell: profile settings < task settings < the cell's own values."""
        task_key = cell.get("task", self.settings.get("task", "mrpc"))
        per_task = self.task_settings.get(str(task_key).lower(), {})
        values = {k: coerce(k, v) for k, v in {**self.settings, **per_task, **cell}.items()}
        return RunConfig(profile=self.name, **values)

    def grid(self, overrides: dict | None = None) -> list[RunConfig]:
        """Every run of the profile, in a stable order (task, backbone, strategy, schedule, seed)."""
        cells = [
            dict(task=t, backbone=b, strategy=s, schedule=sc, seed=seed)
            for t, b, s, sc, seed in itertools.product(
                self.tasks, self.backbones, self.strategies, self.schedules, self.seeds)
        ]
        cells += [dict(c) for c in self.extra_cells]
        return [self.run_config(**c, **(overrides or {})) for c in cells]


def load_profiles(path: Path = PROFILES_FILE) -> dict[str, Profile]:
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    profiles = {}
    for name, body in raw.items():
        body = dict(body)
        profiles[name] = Profile(
            name=name, description=body.pop("description", ""),
            tasks=body.pop("tasks"), backbones=body.pop("backbones"), strategies=body.pop("strategies"),
            seeds=body.pop("seeds"), schedules=body.pop("schedules", ["fixed"]),
            extra_cells=body.pop("extra_cells", []), workers=body.pop("workers", 1), settings=body.pop("settings", {}),
            task_settings=body.pop("task_settings", {}),
        )
        if body:
            raise ValueError(f"{path}: profile {name!r} has unknown keys {sorted(body)}")
    return profiles


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(profiles)}")
    return profiles[name]
