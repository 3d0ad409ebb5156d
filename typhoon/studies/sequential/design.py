"""The decisive study's pre-registered design: ``[<profile>.design]`` in ``profiles.toml`` read and checked
(:func:`study_design`: its comparisons, margins, looks, error spending, planning sds, the folders whose records
it reuses, and why each choice), and printed with what it promises (:func:`design_table`,
:func:`describe_design`: the boundaries, and the simulated chance of each verdict by the cap at the planning
sd). ``python -m typhoon decisive-design`` prints it; :mod:`typhoon.studies.sequential.decisive` runs the study it describes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from typhoon.analysis import sequential
from typhoon.profiles import Profile, get_profile
from typhoon.studies.sequential import checks as decisive_checks

DESIGN_KEYS = {"comparisons", "looks", "alpha", "familywise", "spending", "reuse_from", "never_reuse", "power",
               "margin", "planning_sd", "why"}
PRIMARY_METRIC = {"mrpc": "f1", "cola": "mcc"}  # the metric each task's comparisons are judged on


@dataclass(frozen=True)
class StudyDesign:
    """The pre-registered design of a sequential profile, as read from ``[<profile>.design]``."""

    profile: str
    tasks: tuple[str, ...]
    comparisons: tuple[tuple[str, str], ...]
    margins: Mapping[str, float]
    design: sequential.Design
    alpha: float
    familywise: str
    reuse_from: tuple[str, ...] = ()
    never_reuse: tuple[str, ...] = ()
    power: float = 0.8
    # per task, one sd for all its comparisons or one per comparison ("first - second" -> sd)
    planning_sd: Mapping[str, float | Mapping[str, float]] = field(default_factory=dict)
    why: Mapping[str, str] = field(default_factory=dict)

    def planning_sd_of(self, task: str, pair: tuple[str, str]) -> float | None:
        """The planning sd of one comparison (None where the design states none)."""
        sd = self.planning_sd.get(task)
        return sd.get(self.name(pair)) if isinstance(sd, Mapping) else sd

    @property
    def n_comparisons(self) -> int:
        return len(self.tasks) * len(self.comparisons)

    @property
    def arms(self) -> list[str]:
        return list(dict.fromkeys(s for pair in self.comparisons for s in pair))

    def name(self, pair: tuple[str, str]) -> str:
        return f"{pair[0]} - {pair[1]}"


def study_design(profile: str | Profile) -> StudyDesign:
    """The design of ``profile`` (a name or a Profile), validated; ValueError naming the bad key."""
    spec = get_profile(profile) if isinstance(profile, str) else profile
    raw = dict(spec.require_design())
    where = f"profiles.toml [{spec.name}.design]"
    unknown = sorted(set(raw) - DESIGN_KEYS)
    missing = sorted({"comparisons", "looks", "alpha", "margin"} - set(raw))
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {unknown}, missing keys {missing}")
    comparisons = tuple(tuple(pair) for pair in raw["comparisons"])
    for pair in comparisons:
        if len(pair) != 2 or any(s not in spec.strategies for s in pair):
            raise ValueError(f"{where}: comparison {list(pair)} must name two of the profile's strategies {spec.strategies}")
    margins = {str(k).lower(): float(v) for k, v in raw["margin"].items()}
    if set(margins) != set(spec.tasks) or min(margins.values()) <= 0:
        raise ValueError(f"{where}: margin needs a value > 0 for each task {spec.tasks}, got {raw['margin']}")
    familywise = raw.get("familywise", "bonferroni")
    if familywise != "bonferroni":
        raise ValueError(f"{where}: familywise must be 'bonferroni', got {familywise!r}")
    looks = [int(n) for n in raw["looks"]]
    if looks[-1] > len(spec.seeds) or list(spec.seeds[:looks[-1]]) != list(range(looks[-1])):
        raise ValueError(f"{where}: the cap ({looks[-1]} seeds) needs the profile's seeds to be 0..{looks[-1] - 1}")
    alpha = float(raw["alpha"])
    per_comparison = alpha / (len(spec.tasks) * len(comparisons))
    design = sequential.Design(tuple(looks), per_comparison, per_comparison, raw.get("spending", "obrien_fleming"))
    return StudyDesign(spec.name, tuple(spec.tasks), comparisons, margins, design, alpha, familywise,
                       tuple(raw.get("reuse_from", ())), tuple(raw.get("never_reuse", ())),
                       float(raw.get("power", 0.8)), _planning_sds(raw.get("planning_sd", {}), comparisons, where),
                       dict(raw.get("why", {})))


def _planning_sds(raw: Mapping, comparisons: tuple[tuple[str, str], ...], where: str) -> dict:
    """``planning_sd`` per task: a number, or a table naming every comparison ("first - second") once."""
    out = {}
    names = {f"{a} - {b}" for a, b in comparisons}
    for task, value in raw.items():
        if isinstance(value, Mapping):
            if set(value) != names:
                raise ValueError(f"{where}: planning_sd.{task} must name each comparison once: {sorted(names)}, "
                                 f"got {sorted(value)}")
            out[str(task).lower()] = {name: float(sd) for name, sd in value.items()}
        else:
            out[str(task).lower()] = float(value)
    return out


# --------------------------------------------------------------------------------------------------
# The design, printable


def design_table(study: StudyDesign, studies: int = 20_000) -> pd.DataFrame:
    """One row per comparison: its task, metric, margin, errors, looks, cap and the simulated chance of a
    decision by the cap at the *planning* sd (``p_equivalent_at_0``: equivalent when the true difference is
    0; ``p_different_at_margin``: different when it is the margin); with the expected seeds at each of the
    two; the registered ``power`` and ``p_decided_at_0`` (equivalent or different when the difference is 0:
    the power that ``verdicts.csv``'s ``power_at_cap`` gives at the sd measured since). The errors, simulated
    too: ``p_false_different_at_0`` (different when the difference is 0) and ``p_false_equivalent_at_margin``
    (equivalent when it is the margin); their sums over the comparisons bound the familywise error."""
    rows, sims = [], {}
    for task in study.tasks:
        margin = study.margins[task]
        for pair in study.comparisons:
            sd = study.planning_sd_of(task, pair)
            if sd is not None and (sd, margin) not in sims:
                sims[sd, margin] = {
                    "at_0": sequential.simulate_design(study.design, 0.0, sd, margin, studies,
                                                       seed=decisive_checks.POWER_SEED),
                    "at_margin": sequential.simulate_design(study.design, margin, sd, margin, studies, seed=2)}
            sim = sims.get((sd, margin), {})
            rows.append({
                "task": task, "metric": PRIMARY_METRIC.get(task, "primary"), "comparison": study.name(pair),
                "margin": margin, "alpha_different": study.design.alpha_different,
                "alpha_equivalent": study.design.alpha_equivalent, "spending": study.design.spending,
                "looks": " ".join(map(str, study.design.looks)), "cap": study.design.cap, "planning_sd": sd,
                "p_equivalent_at_0": sim["at_0"]["p_equivalent"] if sim else np.nan,
                "p_different_at_margin": sim["at_margin"]["p_different"] if sim else np.nan,
                "expected_seeds_at_0": sim["at_0"]["expected_seeds"] if sim else np.nan,
                "expected_seeds_at_margin": sim["at_margin"]["expected_seeds"] if sim else np.nan,
                "power": study.power, "p_decided_at_0": sim["at_0"]["p_decided"] if sim else np.nan,
                "p_false_different_at_0": sim["at_0"]["p_different"] if sim else np.nan,
                "p_false_equivalent_at_margin": sim["at_margin"]["p_equivalent"] if sim else np.nan,
            })
    return pd.DataFrame(rows)


def describe_design(study: StudyDesign, studies: int = 20_000) -> str:
    """The pre-registered design as text: comparisons, margins, errors, looks, boundaries, cap and power."""
    d = study.design
    lines = [f"Pre-registered design of the `{study.profile}` profile (typhoon/profiles.toml [{study.profile}.design])",
             "",
             f"Comparisons ({study.n_comparisons}; difference = first - second, paired by seed), per task "
             f"{', '.join(study.tasks)}: " + "; ".join(study.name(p) for p in study.comparisons),
             f"Familywise error: alpha = {study.alpha:g} over all {study.n_comparisons} comparisons, {study.familywise} "
             f"-> {d.alpha_different:g} per comparison for 'different' (two-sided) and {d.alpha_equivalent:g} per "
             f"side of the TOST for 'equivalent'",
             f"Spending: Lan-DeMets {d.spending.replace('_', '-')} type, information fraction = seeds / cap",
             f"Looks (seeds): {', '.join(map(str, d.looks))}; cap {d.cap}",
             "Margins: " + ", ".join(f"{t} {study.margins[t]:g} {PRIMARY_METRIC.get(t, '')}" for t in study.tasks), ""]
    lines += [f"  why {key.replace('_', ' ')}: {text}" for key, text in study.why.items()]
    bounds = sequential.design_boundaries(d)
    lines += ["", "Boundaries (z: normal theory; t: on the look's t statistic, n - 1 degrees of freedom):",
              bounds.to_string(index=False, float_format=lambda v: f"{v:.4g}"), "",
              f"Power at the cap at the planning sd (simulation, {studies} studies; the sd each comparison's "
              "seeds measure, and the power at it, are in stats/verdicts.csv, power_sd and power_at_cap):"]
    table = design_table(study, studies)
    per_task = all(not isinstance(sd, Mapping) for sd in study.planning_sd.values())
    shown = table.drop_duplicates("task") if per_task else table
    columns = ["task", "metric"] + ([] if per_task else ["comparison"])
    lines.append(shown[columns + ["margin", "planning_sd", "p_equivalent_at_0", "p_decided_at_0",
                                  "p_different_at_margin", "expected_seeds_at_0", "expected_seeds_at_margin"]]
                 .to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if table["p_false_different_at_0"].notna().all():
        lines += ["", f"Errors, simulated at the same sds: a false 'different' (true difference 0) in "
                  f"{table['p_false_different_at_0'].max():.4f} of studies at most per comparison, "
                  f"{table['p_false_different_at_0'].sum():.4f} summed over the {len(table)}; a false "
                  f"'equivalent' (true difference = the margin) {table['p_false_equivalent_at_margin'].max():.4f} "
                  f"at most, {table['p_false_equivalent_at_margin'].sum():.4f} summed. A comparison can make only "
                  f"the error its true difference allows; the design bounds each by {d.alpha_different:g} and any "
                  f"false verdict of the study by {study.alpha:g}."]
    return "\n".join(lines)
