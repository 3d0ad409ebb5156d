"""The profiles: named grids of runs (:class:`Profile`), read from one readable file, ``typhoon/profiles.toml``
(and any named in ``$TYPHOON_PROFILES``), and :func:`resolve`, the one place where a run's configuration is put
together. Each profile names a grid (tasks x backbones x strategies x schedules x seeds, plus single extra cells),
the settings its runs share, and the settings of its analysis notebooks.

A run's configuration is resolved once, from four layers (a later layer wins):

    profile settings < the profile's settings for the task < the grid cell < overrides (``--set``)

every value converted to the field's declared type by :func:`typhoon.config.coerce`. The resolved RunConfig
(:mod:`typhoon.config`: what one run is) then travels whole, never re-read from ``profiles.toml``.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from typhoon.allowed import IntAtLeast
from typhoon.config import FIELD_TYPES, RunConfig, allows, coerce, plugin_params
from typhoon.declared import DECLARATION_TABLES, profiles_files
from typhoon.masking import PLUGIN_STRATEGIES, plugins
from typhoon.names import declarations_in, user_declarations

PROFILES_FILE = Path(__file__).with_name("profiles.toml")
# More profiles files, beside the package's, in $TYPHOON_PROFILES (typhoon.declared.profiles_files; os.pathsep
# between them): a study of your own, e.g. a grid with a strategy of your own, and the tasks and backbone names
# you declare (docs/extending.md). The notebook kernels inherit it, so they see the same profiles.

# The RunConfig fields no layer of a profile, nor --set, may set, and why
NOT_SETTINGS = {"profile": "a run's profile is the one it is resolved from",
                "task_declaration": "a declared task's declaration is read from its profiles file",
                "backbone_source": "what a declared backbone name stands for is read from its profiles file"}


@dataclass
class Profile:
    """A named grid of runs plus the settings its runs (and its analysis notebooks) share."""

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
    workers: int = field(default=1, metadata=allows(IntAtLeast(1)))  # cells run at once by `reproduce` unless --workers says otherwise
    analysis: dict = field(default_factory=dict)  # parameters of the analysis notebooks, e.g. quick = true
    pipeline_check: bool = False  # its numbers check that the pipeline runs; they are not findings (smoke)
    speed_check: bool = False  # its numbers are timings only: random weights of real shapes (paper-shapes)
    cluster: dict = field(default_factory=dict)  # job resources for `reproduce --cluster` (typhoon.runner.cluster)
    study: str = "grid"  # the study that runs it (typhoon.studies.registry): grid, schedules, sequential or MODULE:CLASS
    design: dict = field(default_factory=dict)  # a sequential design (typhoon.studies.sequential.decisive): seeds added look by look
    hypothesis: dict = field(default_factory=dict)  # a fixed grid's registered hypothesis (typhoon.studies.schedules.analysis)
    required_metrics: list[str] = field(default_factory=list)  # record fields its analysis needs: a reused record must hold them

    def require_design(self) -> dict:
        """The profile's sequential design table; ValueError when it has none (not a sequential profile)."""
        if not self.design:
            raise ValueError(f"profile {self.name!r} has no [{self.name}.design]: it is not a sequential profile; "
                             f"choose one of {sorted(n for n, p in load_profiles().items() if p.design)}")
        return self.design

    def named_strategies(self) -> list[str]:
        """Every strategy the profile names (its grid's, its cells', its settings'), in order, once."""
        named = [*self.strategies, *(cell.get("strategy") for cell in self.extra_cells),
                 self.settings.get("strategy"), *(s.get("strategy") for s in self.task_settings.values())]
        return list(dict.fromkeys(s for s in named if isinstance(s, str)))

    def cells(self) -> list[dict]:
        """Every cell of the grid, in a stable order (task, backbone, strategy, schedule, seed), then the extras."""
        cells = [
            dict(task=t, backbone=b, strategy=s, schedule=sc, seed=seed)
            for t, b, s, sc, seed in itertools.product(
                self.tasks, self.backbones, self.strategies, self.schedules, self.seeds)
        ]
        return cells + [dict(c) for c in self.extra_cells]

    def grid(self, overrides: Mapping | None = None) -> list[RunConfig]:
        """The resolved config of every cell (:func:`resolve`), ``overrides`` applied to each. A plugin
        strategy's parameter that no strategy of the grid takes is refused (a typo, not a setting)."""
        configs = [resolve(self, cell, overrides) for cell in self.cells()]
        layers = [self.settings, *self.task_settings.values(), *self.cells(), dict(overrides or {})]
        given = {key for layer in layers for key in (layer.get("strategy_args") or {})}
        unused = sorted(given - {key for config in configs for key in config.strategy_args})
        if unused:
            raise ValueError(f"profile {self.name!r}: strategy_args {unused} are parameters of none of its "
                             f"strategies {sorted({c.strategy for c in configs})}")
        return configs


def resolve(profile: str | Profile, cell: Mapping, overrides: Mapping | None = None) -> RunConfig:
    """The config of one run: profile settings < the profile's task settings < ``cell`` < ``overrides``.

    ``cell`` names the run (task, backbone, strategy, seed, and optionally any other field);
    ``overrides`` are typed values (:func:`parse_overrides`) applied last. Raises ValueError naming an
    unknown field or a bad value, and where it came from.
    """
    profile = get_profile(profile) if isinstance(profile, str) else profile
    cell, overrides = dict(cell), dict(overrides or {})
    task = overrides.get("task", cell.get("task", profile.settings.get("task", RunConfig.task)))
    layers = [(f"profile {profile.name!r} settings", profile.settings),
              (f"profile {profile.name!r} settings for {task}", profile.task_settings.get(str(task).lower(), {})),
              ("the grid cell", cell), ("the overrides", overrides)]
    values = {}
    for where, layer in layers:
        for key, value in layer.items():
            if key in NOT_SETTINGS:
                raise ValueError(f"{where} set {key!r}: {NOT_SETTINGS[key]}")
            if key not in FIELD_TYPES:
                raise ValueError(f"{where}: unknown RunConfig field {key!r}; choose one of {sorted(FIELD_TYPES)}")
            if key == "strategy_args":  # parameter by parameter: a later layer changes the ones it names
                values[key] = {**values.get(key, {}), **coerce(key, value)}
            else:
                values[key] = coerce(key, value)
    if values.get("strategy_args"):  # shared by the grid's strategies: each takes the ones it declares
        name = plugins.known(values.get("strategy", RunConfig.strategy))
        own = {param.name for param in plugin_params(name)} if name in PLUGIN_STRATEGIES else set()
        values["strategy_args"] = {k: v for k, v in values["strategy_args"].items() if k in own}
    return RunConfig(profile=profile.name, **values)


def load_profiles(path: Path | None = None) -> dict[str, Profile]:
    """The profiles of ``path`` (default :data:`PROFILES_FILE` and the files of ``$TYPHOON_PROFILES``); ValueError
    naming the file and the line of a syntax error, or the file, the table and the field of a bad declaration of a
    task or a backbone name (its ``[tasks.<name>]`` and ``[backbones.<name>]`` tables, :mod:`typhoon.declared`)."""
    if path is None:
        profiles = load_profiles(PROFILES_FILE)
        for extra in profiles_files():
            for name, profile in load_profiles(extra).items():
                if name in profiles:
                    raise ValueError(f"{extra}: profile {name!r} is one of the package's; name yours otherwise")
                profiles[name] = profile
        user_declarations()  # a name that two files declare
        return profiles
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:  # its message ends "(at line L, column C)"
        raise ValueError(f"{path}: not valid TOML: {err}") from None
    declarations_in(path)  # refused as it is read, whether or not a profile names it
    profiles = {}
    for name, body in raw.items():
        if name in DECLARATION_TABLES:
            continue
        body = dict(body)
        profiles[name] = Profile(
            name=name, description=body.pop("description", ""),
            tasks=body.pop("tasks"), backbones=body.pop("backbones"), strategies=body.pop("strategies"),
            seeds=body.pop("seeds"), schedules=body.pop("schedules", ["fixed"]),
            extra_cells=body.pop("extra_cells", []), workers=body.pop("workers", 1), settings=body.pop("settings", {}),
            task_settings=body.pop("task_settings", {}), analysis=body.pop("analysis", {}),
            pipeline_check=body.pop("pipeline_check", False), speed_check=body.pop("speed_check", False), cluster=body.pop("cluster", {}),
            study=body.pop("study", "grid"), design=body.pop("design", {}), hypothesis=body.pop("hypothesis", {}),
            required_metrics=body.pop("required_metrics", []),
        )
        if body:
            raise ValueError(f"{path}: profile {name!r} has unknown keys {sorted(body)}")
    return profiles


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(profiles)}")
    return profiles[name]


def task_margins(profile: str | None = None) -> dict[str, float]:
    """Each task's TOST margin, decided once: ``[decisive.design.margin]``; a profile's own registered one wins."""
    own = get_profile(profile) if profile else None
    own = (own.design.get("margin") or own.hypothesis.get("margin")) if own else None
    return {str(t).lower(): float(m) for t, m in {**get_profile("decisive").design["margin"], **(own or {})}.items()}
