"""The three experiments of ``notebooks/40_mask_schedules``, from their settings to tidy tables.

``StudySettings`` holds every size and weight (``quick()`` shrinks them for tests and the smoke
profile); ``discrepancy_study``, ``recovery_study`` and ``text_study`` run experiments (a), (b) and (c)
and return everything the notebook shows: tables (``tables()``, written by ``write_tables``), the
figures (``typhoon.analysis.identifiability.figures``) and the conclusions
(``typhoon.analysis.identifiability.conclusions``) are built from these results only.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.analysis.identifiability.discrepancy import (
    check_alternative_weights,
    check_factorisation,
    chernoff_information,
    conditional_risks_by_visible_count,
    discrepancy_from_mode_information,
    joint_kl,
    mode_information_by_visible_count,
    odds_ratio,
    residual_mode_covariance,
    total_variation,
)
from typhoon.analysis.identifiability.fits import compare_decay_fits, fit_exponential_decay, fit_power_law
from typhoon.analysis.identifiability.laws import MixtureLaw, separated_product_law
from typhoon.analysis.identifiability.text import load_code_texts, load_prose_sentences, text_mode_uncertainty
from typhoon.analysis.identifiability.training import recovery_error_summary, train_mode_weight_recovery
from typhoon.atomic import atomic_write_csv
from typhoon.masking import (
    FixedMaskingRatio,
    FixedVisibleCount,
    Schedule,
    UniformMaskingRatio,
    min_visible_count,
    with_full_mask,
)

# --------------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class StudySettings:
    """Sizes and weights of the three experiments (the defaults are the reference run's)."""

    seed: int = 0
    # (a) exact enumeration: well-separated product modes over [K]^N
    length: int = 12  # N, the sequence length
    num_symbols: int = 2  # K, the alphabet size
    num_modes: int = 2
    first_mode_weight: float = 0.7  # alpha_0; the other modes share the rest equally
    alternative_first_weight: float = 0.4  # lambda_0 of the reweighted model q_lambda
    leak_range: tuple[float, float] = (0.05, 0.1)  # mass each mode leaks onto the others' symbols (spread over modes)
    # (b) gradient training of a masked predictor (two modes on disjoint alphabets)
    train_length: int = 6
    train_num_symbols: int = 4
    train_first_mode_weight: float = 0.75
    blind_max_masking_ratio: float = 0.5  # blind schedule: ratio t ~ U[0, 0.5], so at least N/2 visible
    pi0_values: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5)
    n_train: int = 600
    n_seeds: int = 24
    steps: int = 150
    lr: float = 0.1
    # (c) real text: code vs prose
    snippet_length: int = 64
    n_snippets: int = 1000
    orders: int = 4  # random reveal orders per snippet
    tail_from: int = 8  # the tail fit starts at this visible count
    glue_dir: str | None = None  # CoLA's folder; None: wherever typhoon.data.glue_files.load_glue finds it

    def __post_init__(self):
        counts = ("length", "num_symbols", "num_modes", "train_length", "train_num_symbols", "n_train", "n_seeds",
                  "steps", "snippet_length", "n_snippets", "orders", "tail_from")
        bad = [f"{name}={getattr(self, name)!r}" for name in counts
               if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), (int, np.integer))
               or getattr(self, name) < 1]
        bad += [f"{name}={getattr(self, name)!r}" for name in
                ("first_mode_weight", "alternative_first_weight", "train_first_mode_weight", "blind_max_masking_ratio")
                if not 0.0 < getattr(self, name) < 1.0]
        if self.num_modes < 2:
            bad.append(f"num_modes={self.num_modes!r} (a mixture needs at least two modes)")
        if self.tail_from >= self.snippet_length:
            bad.append(f"tail_from={self.tail_from!r} (must be below snippet_length={self.snippet_length})")
        if bad:
            raise ValueError(f"bad study settings: {', '.join(bad)}")

    def quick(self) -> StudySettings:
        """Every experiment shrunk so that the notebook runs in well under a minute."""
        return dataclasses.replace(self, length=min(self.length, 8), n_train=300, n_seeds=8, steps=100,
                                   train_length=min(self.train_length, 4), snippet_length=32, n_snippets=300,
                                   orders=2, tail_from=4)

    def table(self) -> pd.DataFrame:
        """The settings as a two-column table (setting, value)."""
        return pd.DataFrame({"setting": [f.name for f in dataclasses.fields(self)],
                             "value": [str(getattr(self, f.name)) for f in dataclasses.fields(self)]})


def study_settings(quick: bool = False, **overrides) -> StudySettings:
    """``StudySettings`` with ``overrides`` (field names), shrunk by ``quick``; unknown names are an error."""
    fields = [f.name for f in dataclasses.fields(StudySettings)]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ValueError(f"unknown study setting(s) {unknown}; choose from {fields}")
    for name in ("leak_range", "pi0_values"):  # papermill passes lists
        if name in overrides:
            overrides[name] = tuple(overrides[name])
    settings = StudySettings(**overrides)
    return settings.quick() if quick else settings


def split_weights(first: float, count: int) -> np.ndarray:
    """``count`` mode weights: ``first``, then the rest shared equally."""
    return np.array([first] + [(1 - first) / (count - 1)] * (count - 1))


def write_tables(tables: Mapping[str, pd.DataFrame], stats_dir: str | os.PathLike) -> list[Path]:
    """Write each table as ``<stats_dir>/<name>.csv`` (atomically); returns the paths."""
    paths = []
    for name, frame in tables.items():
        path = Path(stats_dir) / f"{name}.csv"
        atomic_write_csv(path, frame)
        paths.append(path)
    return paths


# --------------------------------------------------------------------------------------------------
# (a) Discrepancy against the smallest visible set


def blind_schedules(length: int) -> dict[str, list[tuple[int, Schedule]]]:
    """Two families of schedules indexed by their smallest visible count ``v_min = 0..N-1``.

    ``fixed_visible``: exactly ``v_min`` visible. ``uniform_ratio_capped``: masked-diffusion ratio
    ``t ~ U[0, (N - v_min)/N]``, i.e. masked count uniform on ``1..N-v_min`` (``v_min = 0`` is the full
    masked-diffusion schedule).
    """
    return {
        "fixed_visible": [(v, FixedVisibleCount(v)) for v in range(length)],
        "uniform_ratio_capped": [(v, UniformMaskingRatio(0.0, (length - v) / length)) for v in range(length)],
    }


def discrepancy_vs_min_visible(law: MixtureLaw, alternative: Sequence[float]) -> pd.DataFrame:
    """Experiment (a): ``D_π(q_λ)`` for blind schedules of growing ``v_min``, with ``TV(p, q_λ)``.

    Columns: ``family, v_min, discrepancy`` (exact, direct), ``mode_form`` (exact, from posteriors),
    ``second_order``, ``upper_bound`` (two modes: ``(r+1/r-2) Σ π_v mmse(v)``), ``mmse_at_v_min``,
    ``total_variation`` and ``joint_kl`` (of the joint laws; the same on every row).
    """
    alternative = check_alternative_weights(law, alternative)
    q = law.reweighted(alternative)
    _, kl_by_v = conditional_risks_by_visible_count(law, q)
    information = mode_information_by_visible_count(law, alternative)
    covariance = residual_mode_covariance(law)
    mmse = 0.5 * np.trace(covariance, axis1=1, axis2=2)
    theta = np.log(alternative / law.weights)
    r = odds_ratio(law, alternative) if law.num_modes == 2 else math.nan
    tv, kl_joint = total_variation(law, q), joint_kl(law, q)
    rows = []
    for family, schedules in blind_schedules(law.length).items():
        for v_min, schedule in schedules:
            pmf = schedule.visible_count_pmf(law.length)
            sensitivity = np.tensordot(pmf[:-1], covariance[:-1] - covariance[1:], axes=1)
            rows.append({
                "family": family,
                "v_min": v_min,
                "discrepancy": float(pmf[:-1] @ kl_by_v),
                "mode_form": discrepancy_from_mode_information(information, schedule),
                "second_order": float(0.5 * theta @ sensitivity @ theta),
                "upper_bound": float((r + 1 / r - 2) * pmf @ mmse),
                "mmse_at_v_min": float(mmse[v_min]),
                "total_variation": tv,
                "joint_kl": kl_joint,
            })
    return pd.DataFrame(rows)


def decay_rates(table: pd.DataFrame, floor: float = 1e-13) -> pd.DataFrame:
    """Fitted exponential rate of ``discrepancy`` vs ``v_min`` per family (values above ``floor``)."""
    rows = []
    for family, part in table.groupby("family", sort=False):
        part = part[part["discrepancy"] > floor]
        fit = fit_exponential_decay(part["v_min"], part["discrepancy"])
        rows.append({"family": family, "rate": fit["rate"], "r2_log": fit["r2_log"], "n_points": fit["n_points"],
                     "v_min_range": f"{part['v_min'].min()}-{part['v_min'].max()}"})
    return pd.DataFrame(rows)


def identity_checks(law: MixtureLaw, alternative: Sequence[float], blind_max_masking_ratio: float) -> pd.DataFrame:
    """The exact mode-form identity and the second-order factorisation (``check_factorisation``) for four
    schedules, with ``θ = log(λ/α)`` scaled by 1, 0.1 and 0.01 towards the truth: one row per pair."""
    alpha, lam = law.weights, check_alternative_weights(law, alternative)
    blind = UniformMaskingRatio(0.0, blind_max_masking_ratio)
    schedules = {
        "masked diffusion": UniformMaskingRatio(),
        "BERT 15%": FixedMaskingRatio(0.15),
        f"blind (ratio <= {blind_max_masking_ratio})": blind,
        "blind + pi0=0.05": with_full_mask(blind, 0.05),
    }
    rows = []
    for label, schedule in schedules.items():
        for step in (1.0, 0.1, 0.01):  # move lambda towards alpha in log-odds
            theta = step * np.log(lam / alpha)
            scaled = alpha * np.exp(theta) / np.sum(alpha * np.exp(theta))
            check = check_factorisation(law, scaled, schedule)
            rows.append({"schedule": label, "v_min": min_visible_count(schedule, law.length),
                         "step_to_alternative": step, "direct": check.direct, "mode_form": check.mode_form,
                         "abs_error": check.abs_error, "second_order": check.second_order,
                         "direct_over_second_order": check.second_order_ratio})
    return pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class DiscrepancyStudy:
    """Experiment (a): the law, the mis-weighted alternative and the tables computed from them."""

    law: MixtureLaw
    alternative: np.ndarray
    table: pd.DataFrame  # discrepancy_vs_min_visible
    rates: pd.DataFrame  # decay_rates, with the Chernoff information of modes 0 and 1
    identity: pd.DataFrame  # identity_checks
    chernoff: float

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"mask_schedules_a_discrepancy": self.table, "mask_schedules_a_rates": self.rates,
                "mask_schedules_a_identity": self.identity}


def discrepancy_study(settings: StudySettings) -> DiscrepancyStudy:
    """Experiment (a) by exact enumeration (no randomness)."""
    s = settings
    alpha = split_weights(s.first_mode_weight, s.num_modes)
    alternative = split_weights(s.alternative_first_weight, s.num_modes)
    law = separated_product_law(s.length, s.num_symbols, alpha, leak=np.linspace(*s.leak_range, s.num_modes))
    table = discrepancy_vs_min_visible(law, alternative)
    rates = decay_rates(table)
    chernoff = chernoff_information(law.modes[0].probs[0], law.modes[1].probs[0])
    rates["chernoff_information_modes_0_1"] = chernoff
    return DiscrepancyStudy(law, alternative, table, rates, identity_checks(law, alternative, s.blind_max_masking_ratio),
                            chernoff)


# --------------------------------------------------------------------------------------------------
# (b) Training under a blind schedule, with and without full-mask mass


@dataclass(frozen=True, eq=False)
class RecoveryStudy:
    """Experiment (b): the training law, the blind schedule, and the per-model and per-schedule tables."""

    law: MixtureLaw
    blind: Schedule
    table: pd.DataFrame  # train_mode_weight_recovery
    summary: pd.DataFrame  # recovery_error_summary

    @property
    def cured(self) -> pd.DataFrame:
        """The summary rows of the schedules with full-mask mass."""
        return self.summary[self.summary.pi0 > 0]

    @property
    def slope_fit(self) -> dict[str, float]:
        """Log-log fit of the recovered weight's RMSE against ``π_0`` (theory: slope -1/2)."""
        return fit_power_law(self.cured["pi0"], self.cured["rmse"])

    @property
    def floor_fit(self) -> dict[str, float]:
        """Log-log fit of the sampling floor against ``π_0``."""
        return fit_power_law(self.cured["pi0"], self.cured["sampling_floor"])

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"mask_schedules_b_recovery": self.table, "mask_schedules_b_summary": self.summary}


def recovery_study(settings: StudySettings) -> RecoveryStudy:
    """Experiment (b): a blind schedule and the same with every full-mask mass of ``pi0_values``."""
    s = settings
    law = separated_product_law(s.train_length, s.train_num_symbols, split_weights(s.train_first_mode_weight, 2),
                                rng=np.random.default_rng(s.seed + 1))
    blind = UniformMaskingRatio(0.0, s.blind_max_masking_ratio)
    schedules = {"blind": (0.0, blind)}
    schedules.update({f"pi0={p:g}": (p, with_full_mask(blind, p)) for p in s.pi0_values})
    table = train_mode_weight_recovery(law, schedules, n_train=s.n_train, n_seeds=s.n_seeds, steps=s.steps, lr=s.lr,
                                       seed=s.seed)
    return RecoveryStudy(law, blind, table, recovery_error_summary(table))


# --------------------------------------------------------------------------------------------------
# (c) Real text


@dataclass(frozen=True, eq=False)
class TextStudy:
    """Experiment (c): residual uncertainty per visible count and its exponential / power-law fits."""

    table: pd.DataFrame  # text_mode_uncertainty
    fits: pd.DataFrame  # text_decay_fits
    tail_from: int

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"mask_schedules_c_text": self.table, "mask_schedules_c_fits": self.fits}


def range_label(lowest: int) -> str:
    """The ``range`` column of ``text_decay_fits`` for fits from visible count ``lowest`` on."""
    return f"v >= {lowest}"


def text_decay_fits(table: pd.DataFrame, tail_from: int) -> pd.DataFrame:
    """``compare_decay_fits`` of ``posterior_variance`` and ``brier`` against ``visible``, over ``v >= 1``
    and over the tail ``v >= tail_from``; columns ``quantity, range`` then those of ``compare_decay_fits``."""
    fits = []
    for column in ("posterior_variance", "brier"):
        for lowest in (1, tail_from):
            part = table[table.visible >= lowest]
            one = compare_decay_fits(part["visible"], part[column])
            one.insert(0, "range", range_label(lowest))
            one.insert(0, "quantity", column)
            fits.append(one)
    return pd.concat(fits, ignore_index=True)


def text_study(settings: StudySettings) -> TextStudy:
    """Experiment (c): standard-library code vs CoLA prose."""
    s = settings
    table = text_mode_uncertainty(load_code_texts(), load_prose_sentences(s.glue_dir), snippet_length=s.snippet_length,
                                  n_snippets=s.n_snippets, orders=s.orders, seed=s.seed)
    return TextStudy(table, text_decay_fits(table, s.tail_from), s.tail_from)
