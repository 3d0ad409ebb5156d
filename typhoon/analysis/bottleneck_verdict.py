"""Breaking the budget-spread bottleneck, judged from the runs: does a calibration that moves more of the
masking budget (rank, softmax, task-loss saliency) change the dev metric against random masking? One row
per strategy with the difference, Holm, TOST at a margin stated before the run, the seeds needed, and a
verdict in words (:func:`bottleneck_verdict`). The bottleneck itself is measured in
:mod:`typhoon.analysis.budget_spread`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from typhoon.analysis import pairwise, run_summary, seed_budget
from typhoon.masking import ALIASES
from typhoon.records import RUN_KEYS

# The smallest dev-metric difference (F1 for MRPC, MCC for CoLA) that would matter, stated before the run.
BOTTLENECK_MARGIN = 0.01
_VERDICT_COLUMNS = ["task", "backbone", "strategy", "calibration", "saliency", "n", "budget_moved",
                    "kl_to_uniform", "primary_metric", "diff", "ci_low", "ci_high", "p_holm", "holm_family", "tost_p",
                    "seeds_for_power", "verdict", "outcome", "task_model_accuracy", "task_model_learned"]


def masking_source(strategy: str) -> tuple[str, str]:
    """(calibration, saliency source) a typhoon-family strategy name implies, from the registry's
    aliases (``typhoon`` itself: min-max of the MLM saliency, the paper's)."""
    base, fixed = ALIASES.get(strategy, (strategy, {}))
    if base != "typhoon":
        raise ValueError(f"{strategy!r} is not a typhoon-family strategy")
    return fixed.get("calibration", "minmax"), fixed.get("saliency", "mlm")


def _outcome(row) -> str:
    if row["verdict"] == pairwise.UNTESTABLE:
        return "too few seeds" if not row["n"] >= 2 else "cannot be tested"
    if row["significant"] and not row["equivalent"]:
        return "helps" if row["diff"] > 0 else "hurts"
    if row["equivalent"]:
        return "no difference that matters"
    return "inconclusive"


def task_model_summary(runs: pd.DataFrame) -> dict:
    """The task models behind task-loss saliency runs: their mean dev accuracy and how many learned (beat
    the majority class, "k/n" of the runs whose record says), so a verdict on task saliency says whether
    the gradient that drove its masks came from a model that had learned anything. Empty when no run
    says (records from before the check hold none: unknown, not "0/n")."""
    known = runs["task_head_learned"].dropna() if "task_head_learned" in runs else pd.Series(dtype=object)
    if known.empty:
        return {}
    learned = known.map(lambda v: str(v).lower() == "true")
    return {"task_model_accuracy": pd.to_numeric(runs["task_head_accuracy"]).mean(),
            "task_model_learned": f"{int(learned.sum())}/{len(known)}"}


def bottleneck_verdict(results: pd.DataFrame, margin: float = BOTTLENECK_MARGIN, reference: str = "random",
                       alpha: float = 0.05, power: float = 0.8, **comparison_kwargs) -> tuple[pd.DataFrame, str]:
    """Does moving more of the masking budget away from uniform help? Decided from the runs.

    For every typhoon-family strategy (name starting with ``typhoon``) and (task, backbone), paired by
    seed with ``reference`` (random masking): the budget it moved and its KL to uniform (means over its
    runs, from the results columns ``budget_moved`` and ``kl_to_uniform``: the final masking state of
    each run), ``diff`` = its dev metric minus the reference's with the 95 % t CI, the paired t-test's
    Holm-adjusted p over all these comparisons (``p_holm``; ``holm_family`` says the family in words: it
    is not the family of ``stats/comparisons.csv``, whose reference is typhoon), TOST at ``±margin`` (``tost_p``), the seeds
    needed for ``power`` at a true difference of ``margin`` from the measured paired sd
    (``seeds_for_power``: ``seed_budget.seeds_needed``), ``verdict`` (``pairwise.paired_comparisons``') and
    ``outcome``: "helps" / "hurts" (Holm-significant and not within the margin), "no difference that
    matters" (TOST-equivalent), "inconclusive", "too few seeds" (fewer than 2 pairs) or "cannot be
    tested" (differences without spread across seeds, e.g. runs that all predict the majority class).
    ``calibration`` and ``saliency`` come from the results columns when present, else from the strategy
    name (:func:`masking_source`). Task-loss saliency rows carry their task model's check
    (``task_model_accuracy``: mean dev accuracy; ``task_model_learned``: runs above the majority class, "k/n").

    Returns (the table, one sentence). An empty table (no typhoon-family strategy beside the reference)
    comes with a sentence saying so.
    """
    need = [*RUN_KEYS, "status", "primary_value"]
    missing = [c for c in need if c not in results.columns]
    if missing:
        raise ValueError(f"results is missing column(s) {missing}")
    results = run_summary.arms(results)  # each schedule of a strategy is its own arm, as in every comparison
    ok = results[results["status"].astype(str) == "ok"].copy()
    family = ok["strategy"].astype(str).str.startswith("typhoon")
    groups = ok[family | (ok["strategy"] == reference)]
    paired = [g for _, g in groups.groupby(["task", "backbone"], sort=False)
              if (g["strategy"] == reference).any() and g["strategy"].astype(str).str.startswith("typhoon").any()]
    if not paired:
        return pd.DataFrame(columns=_VERDICT_COLUMNS), (
            f"No bottleneck runs: the results hold no typhoon-family strategy run beside {reference!r} on the same "
            "task, so there is nothing to compare.")
    subset = pd.concat(paired)
    comparisons = pairwise.paired_comparisons(subset, margin=margin, reference=reference, alpha=alpha,
                                           on_invalid="skip", **comparison_kwargs)
    comparisons = comparisons[comparisons["family"] == "vs_reference"].reset_index(drop=True)
    needed = seed_budget.seeds_needed(comparisons, power=power, alpha=alpha, margin=margin)
    for column in ("budget_moved", "kl_to_uniform", "calibration", "saliency", "task_head_accuracy",
                   "task_head_learned"):
        if column not in subset.columns:
            subset[column] = np.nan
    rows = []
    for i, c in comparisons.iterrows():
        other = c["strategy_b"] if c["strategy_a"] == reference else c["strategy_a"]
        sign = -1.0 if c["strategy_a"] == reference else 1.0  # diff = strategy - reference
        runs = subset[(subset["task"] == c["task"]) & (subset["backbone"] == c["backbone"])
                      & (subset["strategy"] == other)]
        calibration, saliency = masking_source(other) if other in ALIASES or other == "typhoon" else (None, None)
        known = runs["calibration"].dropna()
        calibration = str(known.iloc[0]) if len(known) else calibration
        known = runs["saliency"].dropna()
        saliency = str(known.iloc[0]) if len(known) else saliency
        lo, hi = sign * c["ci_low"], sign * c["ci_high"]
        rows.append(dict(task=c["task"], backbone=c["backbone"], strategy=other, calibration=calibration,
                         saliency=saliency, n=c["n"], budget_moved=pd.to_numeric(runs["budget_moved"]).mean(),
                         kl_to_uniform=pd.to_numeric(runs["kl_to_uniform"]).mean(),
                         primary_metric=c["primary_metric"], diff=sign * c["mean_diff"], ci_low=min(lo, hi),
                         ci_high=max(lo, hi), p_holm=c["p_holm"], holm_family=c["holm_family"], tost_p=c["tost_p"],
                         seeds_for_power=needed.loc[i, "n_margin"], verdict=c["verdict"],
                         significant=bool(c["significant"]), equivalent=bool(c["equivalent"]),
                         **{"task_model_accuracy": np.nan, "task_model_learned": None,
                            **(task_model_summary(runs) if saliency == "task" else {})}))
    table = pd.DataFrame(rows)
    table["outcome"] = [_outcome(r) for _, r in table.iterrows()]
    table = table[_VERDICT_COLUMNS]
    table.attrs.update(margin=margin, reference=reference, alpha=alpha, power=power)
    return table, _verdict_sentence(table, margin, reference, power)


def _verdict_sentence(table: pd.DataFrame, margin: float, reference: str, power: float) -> str:
    def named(rows: pd.DataFrame) -> str:
        return ", ".join(f"{r.strategy} on {r.task} ({r.diff:+.3f}, moving {r.budget_moved:.0%})"
                         if np.isfinite(r.budget_moved) else f"{r.strategy} on {r.task} ({r.diff:+.3f})"
                         for r in rows.itertuples())

    untestable = table["outcome"].isin(["too few seeds", "cannot be tested"])
    testable = table[~untestable]
    if testable.empty:
        if (table["outcome"] == "too few seeds").all():
            return (f"Too few seeds to tell: none of the {len(table)} comparison(s) with {reference} can be tested "
                    "(a paired test needs at least 2 paired seeds).")
        return (f"Cannot tell: none of the {len(table)} comparison(s) with {reference} can be tested: the differences "
                "do not vary across seeds (e.g. every run predicts the majority class) or there are fewer than 2 "
                "paired seeds.")
    helps, hurts = table[table["outcome"] == "helps"], table[table["outcome"] == "hurts"]
    moved = table["budget_moved"].max()
    spread_txt = f" (up to {moved:.0%} of the budget moved)" if np.isfinite(moved) else ""
    if not helps.empty:
        return (f"Moving the budget helps: {named(helps)} beat{'s' if len(helps) == 1 else ''} {reference} by more "
                f"than the noise (paired t, Holm)" + (f", while {named(hurts)} did worse" if len(hurts) else "") + ".")
    if not hurts.empty:
        return f"Moving the budget does not help: {named(hurts)} did worse than {reference} (paired t, Holm)."
    untested = len(table) - len(testable)
    if (testable["outcome"] == "no difference that matters").all():
        return (f"Moving the budget does not help{spread_txt}: every tested variant is within ±{margin:g} of "
                f"{reference} (TOST)" + (f"; {untested} comparison(s) could not be tested" if untested else "") + ".")
    needed = testable["seeds_for_power"].replace(np.inf, np.nan).max()
    more = (f"; about {int(needed)} seeds would give {power:.0%} power at a difference of {margin:g}"
            if np.isfinite(needed) else "")
    return (f"Inconclusive{spread_txt}: no variant differs from {reference} after Holm, and not all are shown "
            f"to be within ±{margin:g} (TOST){more}.")
