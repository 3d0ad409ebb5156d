"""Breaking the budget-spread bottleneck, judged from the runs: does a calibration that moves more of the
masking budget (rank, softmax, task-loss saliency) change the dev metric against random masking? One row
per strategy with the difference, Holm, TOST at a margin stated before the run, the seeds needed, and a
verdict in words (:func:`bottleneck_verdict`). The bottleneck itself is measured in
:mod:`typhoon.analysis.kl.budget_spread`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from typhoon.analysis import paired, pairwise, run_summary, seed_budget
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
                       alpha: float = 0.05, power: float = 0.8) -> tuple[pd.DataFrame, str]:
    """Does moving more of the masking budget away from uniform help? Decided from the runs.

    For every typhoon-family strategy (name starting with ``typhoon``) and (task, backbone), paired by seed
    with ``reference`` (random masking): :func:`bottleneck_comparisons` (the dev-metric difference, Holm,
    TOST at ``±margin``, the seeds needed for ``power``, the verdict and the ``outcome``) beside
    :func:`masking_of_strategies` (how the strategy masks: its calibration and saliency, the budget it moved,
    its KL to uniform, and for task-loss saliency its task model's check). Columns ``task``, ``backbone``,
    ``strategy``, ``calibration``, ``saliency``, ``n``, ``budget_moved``, ``kl_to_uniform``,
    ``primary_metric``, ``diff``, ``ci_low``, ``ci_high``, ``p_holm``, ``holm_family``, ``tost_p``,
    ``seeds_for_power``, ``verdict``, ``outcome``, ``task_model_accuracy``, ``task_model_learned``.

    Returns (the table, one sentence). An empty table (no typhoon-family strategy beside the reference)
    comes with a sentence saying so.
    """
    if _bottleneck_runs(results, reference).empty:
        return pd.DataFrame(columns=_VERDICT_COLUMNS), (
            f"No bottleneck runs: the results hold no typhoon-family strategy run beside {reference!r} on the same "
            "task, so there is nothing to compare.")
    comparisons = bottleneck_comparisons(results, margin, reference, alpha, power)
    table = comparisons.merge(masking_of_strategies(results, reference), on=["task", "backbone", "strategy"],
                              how="left")[_VERDICT_COLUMNS]
    table.attrs.update(margin=margin, reference=reference, alpha=alpha, power=power)
    return table, _verdict_sentence(table, margin, reference, power)


def _bottleneck_runs(results: pd.DataFrame, reference: str) -> pd.DataFrame:
    """The ok runs of the typhoon-family strategies and of ``reference``, in the (task, backbone)s that have
    both (each schedule of a strategy its own arm, as in every comparison); empty when none has."""
    need = [*RUN_KEYS, "status", "primary_value"]
    missing = [c for c in need if c not in results.columns]
    if missing:
        raise ValueError(f"results is missing column(s) {missing}")
    results = run_summary.arms(results)
    ok = results[results["status"].astype(str) == "ok"].copy()
    family = ok["strategy"].astype(str).str.startswith("typhoon")
    groups = ok[family | (ok["strategy"] == reference)]
    paired_groups = [g for _, g in groups.groupby(["task", "backbone"], sort=False)
                     if (g["strategy"] == reference).any() and g["strategy"].astype(str).str.startswith("typhoon").any()]
    return pd.concat(paired_groups) if paired_groups else ok.iloc[:0]


def bottleneck_comparisons(results: pd.DataFrame, margin: float = BOTTLENECK_MARGIN, reference: str = "random",
                           alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """Each typhoon-family strategy against ``reference`` per (task, backbone), paired by seed: ``n``, ``diff``
    (its dev metric minus the reference's) with the 95 % t interval, the paired t's p Holm-adjusted over all
    these comparisons (``p_holm``; ``holm_family`` says the family in words: not that of
    ``stats/comparisons.csv``, whose reference is typhoon), TOST at ``±margin`` (``tost_p``), the seeds needed
    for ``power`` at a true difference of ``margin`` from the measured paired sd (``seeds_for_power``:
    :func:`typhoon.analysis.seed_budget.seeds_needed`), the ``verdict`` (:func:`typhoon.analysis.pairwise.verdicts`)
    and the ``outcome``: "helps" / "hurts" (Holm-significant and not within the margin), "no difference that
    matters" (TOST-equivalent), "inconclusive", "too few seeds" (fewer than 2 pairs) or "cannot be tested"
    (differences without spread across seeds, e.g. runs that all predict the majority class)."""
    pairs = pairwise.paired_values(_bottleneck_runs(results, reference), reference=reference, on_invalid="skip")
    pairs = pairs[pairs["strategy_a"] == reference]  # the reference comes first in each of its pairs
    diff, tests = paired.difference(pairs), paired.t_test(pairs)
    tost = paired.tost(pairs, margin, alpha)
    holm = pairwise.holm_adjusted(tests[["strategy_a", "strategy_b", "p"]], reference)
    verdicts = pairwise.verdicts(pd.DataFrame({"testable": diff["testable"], "p_holm": holm["p_holm"],
                                               "tost_p": tost["tost_p"]}), alpha)
    needed = seed_budget.seeds_needed(diff.assign(cohen_dz=tests["cohen_dz"]), power=power, alpha=alpha,
                                      margin=margin)
    # diff = strategy - reference: the pairs' a - b turned round
    table = pd.DataFrame({
        "task": diff["task"], "backbone": diff["backbone"], "strategy": diff["strategy_b"], "n": diff["n"],
        "primary_metric": diff["primary_metric"], "diff": -diff["mean_diff"],
        "ci_low": np.fmin(-diff["ci_low"], -diff["ci_high"]), "ci_high": np.fmax(-diff["ci_low"], -diff["ci_high"]),
        "p_holm": holm["p_holm"], "holm_family": holm["holm_family"], "tost_p": tost["tost_p"],
        "seeds_for_power": needed["n_margin"], "verdict": verdicts["verdict"],
        "significant": verdicts["significant"], "equivalent": verdicts["equivalent"]})
    table["outcome"] = [_outcome(r) for _, r in table.iterrows()]
    return table.drop(columns=["significant", "equivalent"])


def masking_of_strategies(results: pd.DataFrame, reference: str = "random") -> pd.DataFrame:
    """How each typhoon-family strategy run beside ``reference`` masks, per (task, backbone): ``calibration``
    and ``saliency`` (the results columns when present, else what the strategy's name implies:
    :func:`masking_source`), the means over its runs of ``budget_moved`` and ``kl_to_uniform`` (the final
    masking state of each run) and, for task-loss saliency, its task model's check (``task_model_accuracy``:
    mean dev accuracy; ``task_model_learned``: runs above the majority class, "k/n"; :func:`task_model_summary`)."""
    runs = _bottleneck_runs(results, reference)
    for column in ("budget_moved", "kl_to_uniform", "calibration", "saliency", "task_head_accuracy",
                   "task_head_learned"):
        if column not in runs.columns:
            runs[column] = np.nan
    rows = []
    for (task, backbone, strategy), own in runs[runs["strategy"] != reference].groupby(
            ["task", "backbone", "strategy"], sort=False):
        calibration, saliency = masking_source(strategy) if strategy in ALIASES or strategy == "typhoon" else (None, None)
        known = own["calibration"].dropna()
        calibration = str(known.iloc[0]) if len(known) else calibration
        known = own["saliency"].dropna()
        saliency = str(known.iloc[0]) if len(known) else saliency
        rows.append(dict(task=task, backbone=backbone, strategy=strategy, calibration=calibration, saliency=saliency,
                         budget_moved=pd.to_numeric(own["budget_moved"]).mean(),
                         kl_to_uniform=pd.to_numeric(own["kl_to_uniform"]).mean(),
                         **{"task_model_accuracy": np.nan, "task_model_learned": None,
                            **(task_model_summary(own) if saliency == "task" else {})}))
    return pd.DataFrame(rows, columns=["task", "backbone", "strategy", "calibration", "saliency", "budget_moved",
                                       "kl_to_uniform", "task_model_accuracy", "task_model_learned"])


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
