"""Paired-by-seed comparisons of strategies over the results table (``<out>/results.csv``, see
docs/CONTRACTS.md): tidy DataFrames in, tidy DataFrames out.

- :func:`paired_comparisons` -- every pair of strategies within each (task, backbone): mean difference
  with t and bootstrap CIs, paired t (pingouin), Cohen's d_z, BF10, Holm-corrected p over the family of
  comparisons involving the reference strategy, TOST equivalence, Wilcoxon, almost stochastic order both
  ways, and a verdict ("cannot be tested" when the differences do not vary or there are < 2 pairs --
  never equivalent, never significant).
- :func:`paired_differences` -- the paired-by-seed difference of any per-run column (a loss, say): mean,
  t CI, p and how many seeds it is positive in; light (no bootstrap, no ASO), for the claims.

The other questions have their own modules: :mod:`.run_summary` (loading, summaries, degenerate runs),
:mod:`.significance` (the tests), :mod:`.seed_budget` (seeds needed, expected max), :mod:`.verdict_text`
(the conclusion in words), :mod:`.stats_tables` (display tables, CSV/Markdown/LaTeX).
Only rows with ``status == "ok"`` enter any statistic.
"""


from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from itertools import combinations

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats as st

from typhoon.analysis.run_summary import (
    GROUP_KEYS,
    _metric_of,
    _require_columns,
    _strategy_order,
    ok_runs,
    task_margin,
)
from typhoon.analysis.significance import (
    _ZERO_SD,
    _check_bootstrap_method,
    _t_ci,
    _wilcoxon,
    aso_epsilon_min,
    bootstrap_mean_ci,
    holm,
    tost_paired,
)
from typhoon.config import task_margins

_FAMILY_REF = "vs_reference"


_FAMILY_OTHER = "other"


UNTESTABLE = "cannot be tested"


_COMPARISON_COLUMNS = [
    "task", "backbone", "primary_metric", "strategy_a", "strategy_b", "family", "n", "seeds", "mean_a",
    "mean_b", "mean_diff", "sd_diff", "se_diff", "ci_low", "ci_high", "t", "dof", "p", "p_holm",
    "significant", "cohen_dz", "bf10", "margin", "tost_p", "equivalent", "wilcoxon_stat", "wilcoxon_p",
    "testable", "boot_ci_low", "boot_ci_high", "aso_eps_ab", "aso_eps_ba", "verdict", "holm_family", "note",
]


def paired_comparisons(
    results: pd.DataFrame,
    margin: float | Mapping[str, float] | None = None,
    reference: str | None = "typhoon",
    confidence: float = 0.95,
    alpha: float = 0.05,
    on_invalid: str = "raise",
    bootstrap_method: str = "percentile",
    bootstrap_resamples: int = 9999,
    aso_iterations: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Paired-by-seed comparisons of every pair of strategies within each (task, backbone).

    The difference is ``strategy_a - strategy_b`` (``primary_value``); when the reference strategy is in
    a pair it is ``strategy_a``, so a positive ``mean_diff`` means the reference did better (for
    metrics where higher is better). Columns:

    - ``n``, ``seeds``: the paired seeds; ``mean_a``, ``mean_b``, ``mean_diff``, ``sd_diff``, ``se_diff``
    - ``ci_low``, ``ci_high``: t-based ``confidence`` interval of the mean difference
    - ``t``, ``dof``, ``p``: paired t-test (``pingouin.ttest(paired=True)``, two-sided)
    - ``family``: ``"vs_reference"`` for comparisons involving ``reference``, else ``"other"``;
      ``p_holm`` is Holm-adjusted within each family across all (task, backbone) groups -- for the
      paper's design the reference family is its twelve comparisons; ``significant`` = ``p_holm < alpha``;
      ``holm_family`` says it in words beside each p ("Holm over the 4 comparisons of ...")
    - ``cohen_dz`` = mean_diff / sd_diff; ``bf10``: JZS Bayes factor (pingouin, r = 0.707)
    - ``tost_p``, ``equivalent``: TOST with bounds ``±margin``; equivalent = ``tost_p < alpha``. ``margin``:
      one number, or one per task (a mapping); None, each task's registered margin (:func:`typhoon.config.task_margins`)
    - ``wilcoxon_stat``, ``wilcoxon_p``: Wilcoxon signed-rank (scipy); NaN with a note when undefined
    - ``testable``: at least 2 pairs whose differences vary (sd above float rounding). When False the
      comparison *cannot be tested*: t, p, the t CI, TOST, the bootstrap CI and ASO are NaN, and
      ``significant`` and ``equivalent`` are False -- a constant difference over a few seeds (two
      strategies giving identical runs, say) says nothing about the seed-to-seed spread
    - ``boot_ci_low``, ``boot_ci_high``: bootstrap ``confidence`` interval of the mean difference
      (:func:`bootstrap_mean_ci`, ``bootstrap_method``, ``bootstrap_resamples``, seeded with ``seed``);
      with 3-5 seeds it is too narrow (it cannot reach past the observed differences) -- the t CI is
      the one to read, the bootstrap CI shows how much rests on the t-test's normality
    - ``aso_eps_ab``, ``aso_eps_ba``: almost stochastic order epsilon_min for "a better than b" and
      for "b better than a" (:func:`aso_epsilon_min` at ``confidence`` with ``aso_iterations``
      bootstrap iterations, seeded with ``seed``; uncorrected for multiple comparisons); < 0.5: almost
      stochastic dominance, < 0.2 (:data:`ASO_TAU`) the usual threshold for calling one better
    - ``verdict``: ``"cannot be tested"``; else from Holm and TOST: ``"different"`` (significant, not
      equivalent), ``"equivalent"`` (equivalent, not significant), ``"different, within margin"``
      (both: a real difference smaller than the margin) or ``"inconclusive"`` (neither)
    - ``note``: why anything is NaN or to be read with care

    Every comparison's bootstrap and ASO draw from ``seed`` afresh, so a row does not depend on which
    other rows are in the table. With the defaults a 30-comparison table took 4-5 s on a loaded 2-core
    Xeon (benchmarks/bench_seed_stats.py), mostly ASO.

    Errors (``ValueError``): missing columns; a seed present for one strategy and not the other; fewer
    than 2 paired seeds. With ``on_invalid="skip"`` these do not raise: unpaired seeds are dropped (and
    named in ``note``) and comparisons with < 2 pairs get NaN statistics and a note -- for small
    profiles (one seed, a failed run) where a notebook should say why a test is skipped.
    """
    margin = task_margins() if margin is None else margin
    _check_comparison_options(on_invalid, margin, bootstrap_method)
    resampling = dict(bootstrap_method=bootstrap_method, bootstrap_resamples=bootstrap_resamples,
                      aso_iterations=aso_iterations, seed=seed)
    rows = [compare_pair(g, a, b, reference, task_margin(margin, g["task"].iloc[0]), confidence, alpha, on_invalid,
                         resampling) for g, a, b in strategy_pairs(ok_runs(results), reference)]
    out = pd.DataFrame(rows).reindex(columns=_COMPARISON_COLUMNS)
    out = adjust_within_families(out, reference)
    out = add_verdicts(out, alpha)
    out.attrs.update(margin=margin, reference=reference, alpha=alpha, confidence=confidence, **resampling)
    return out


def _check_comparison_options(on_invalid: str, margin: float | Mapping[str, float], bootstrap_method: str) -> None:
    if on_invalid not in ("raise", "skip"):
        raise ValueError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    if not all(m > 0 for m in (margin.values() if isinstance(margin, Mapping) else [margin])):
        raise ValueError(f"margin must be > 0, got {margin}")
    _check_bootstrap_method(bootstrap_method, "bootstrap_method")


def strategy_pairs(runs: pd.DataFrame, reference: str | None) -> Iterable[tuple[pd.DataFrame, str, str]]:
    """Each (task, backbone)'s runs with every pair of its strategies, the reference first in its pairs."""
    for _, g in runs.groupby(GROUP_KEYS, sort=False):
        for a, b in combinations(_strategy_order(g["strategy"], reference), 2):
            yield g, a, b


def seed_pairs(wide: pd.DataFrame, a: str, b: str, where: str, on_invalid: str) -> tuple[pd.DataFrame, list[str]]:
    """The two strategies' values (columns ``a``, ``b`` of the seed x strategy table ``wide``) on the seeds
    both ran, and the notes about the seeds only one of them ran (an error unless ``on_invalid="skip"``)."""
    pair = wide[[a, b]]
    notes: list[str] = []
    unpaired = pair.index[pair.isna().any(axis=1)].tolist()
    if unpaired:
        if on_invalid == "raise":
            raise ValueError(f"{where}: seed(s) {unpaired} present for only one of {a!r} and {b!r} (missing pairs)")
        notes.append(f"unpaired seed(s) {unpaired} dropped")
    return pair.dropna(), notes


def compare_pair(group: pd.DataFrame, a: str, b: str, reference: str | None, margin: float, confidence: float,
                 alpha: float, on_invalid: str, resampling: dict) -> dict:
    """One row of :func:`paired_comparisons`: strategy ``a`` against ``b`` in one (task, backbone)."""
    task, backbone = group["task"].iloc[0], group["backbone"].iloc[0]
    wide = group.pivot(index="seed", columns="strategy", values="primary_value")
    metric = _metric_of(group)
    pair, notes = seed_pairs(wide, a, b, f"{task}/{backbone}", on_invalid)
    n = len(pair)
    row = dict(task=task, backbone=backbone, primary_metric=metric, strategy_a=a, strategy_b=b,
               family=_FAMILY_REF if reference in (a, b) else _FAMILY_OTHER, n=n,
               seeds=" ".join(str(s) for s in pair.index.tolist()), margin=margin)
    if n < 2:
        if on_invalid == "raise":
            raise ValueError(f"{task}/{backbone}: {a!r} vs {b!r} has {n} paired seed(s); need >= 2")
        notes.append(f"skipped: {n} paired seed(s), a paired test needs >= 2")
        if n == 1:
            row.update(mean_a=float(pair[a].iloc[0]), mean_b=float(pair[b].iloc[0]),
                       mean_diff=float(pair[a].iloc[0] - pair[b].iloc[0]))
    else:
        row.update(_paired_stats(pair[a].to_numpy(float), pair[b].to_numpy(float), margin, confidence, alpha,
                                 notes, **resampling))
    row["note"] = "; ".join(notes)
    return row


def adjust_within_families(out: pd.DataFrame, reference: str | None) -> pd.DataFrame:
    """Holm-adjusted p within each family (the comparisons with the reference; the others) across every
    (task, backbone), and the family said in words beside each p."""
    out["holm_family"] = ""
    for fam in (_FAMILY_REF, _FAMILY_OTHER):
        m = out["family"] == fam
        if m.any():
            out.loc[m, "p_holm"] = holm(out.loc[m, "p"])
            out.loc[m, "holm_family"] = holm_family(out.loc[m, "p"], _family_members(fam, reference))
    return out


def add_verdicts(out: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """``testable``, ``significant`` (Holm), ``equivalent`` (TOST) and the verdict they make, with the
    columns' final dtypes."""
    out["testable"] = out["testable"].eq(True)  # NaN (fewer than 2 pairs) -> False
    # NaN compares False, so untestable rows (p and tost_p NaN) are neither significant nor equivalent.
    out["significant"] = (out["p_holm"] < alpha).astype(bool)
    out["equivalent"] = (out["tost_p"] < alpha).astype(bool)
    out["verdict"] = [_verdict(*flags) for flags in zip(out["testable"], out["significant"],
                                                        out["equivalent"], strict=True)]
    out["n"] = out["n"].astype("Int64")
    out["dof"] = out["dof"].astype(float)
    out["note"] = out["note"].fillna("").astype(str)
    return out


def _family_members(family: str, reference: str | None) -> str:
    if family == _FAMILY_REF:
        return f"{reference} vs each other strategy, every task × backbone"
    return f"the pairs without {reference}, every task × backbone" if reference else "every pair, task × backbone"


def holm_family(pvalues: Iterable[float], members: str) -> str:
    """What a Holm-adjusted p is adjusted over, said beside it: "Holm over the 4 comparisons of
    <members>" (NaN p-values are not in the family, as in :func:`holm`)."""
    k = int(np.isfinite(np.asarray(list(pvalues), dtype=float)).sum())
    return f"Holm over the {k} comparison{'s' if k != 1 else ''} of {members}"


def paired_differences(frame: pd.DataFrame, value: str, a: str, b: str, by: Iterable[str] = GROUP_KEYS,
                       confidence: float = 0.95) -> pd.DataFrame:
    """Per group of ``by``: the paired-by-seed difference ``a - b`` of the per-run column ``value``.

    ``frame`` has one row per run (columns ``strategy``, ``seed``, ``by`` and ``value``). Columns of the
    answer: ``by``, strategy_a, strategy_b, n (paired seeds), seeds, mean_a, mean_b, mean_diff, sd_diff,
    ci_low / ci_high (the t interval at ``confidence``), p (two-sided paired t, ``scipy.stats.ttest_rel``)
    and n_positive (seeds where a > b). Groups where one strategy is missing are left out; with < 2 pairs,
    or differences without spread, the CI and p are NaN (a constant difference over a few seeds says
    nothing about the spread between seeds).
    """
    by = list(by)
    _require_columns(frame, [*by, "strategy", "seed", value], what="runs")
    columns = [*by, "strategy_a", "strategy_b", "n", "seeds", "mean_a", "mean_b", "mean_diff", "sd_diff",
               "ci_low", "ci_high", "p", "n_positive"]
    rows = []
    for key, g in frame.groupby(by, sort=False):
        wide = g.pivot_table(index="seed", columns="strategy", values=value, aggfunc="first")
        if a not in wide or b not in wide:
            continue
        pair = wide[[a, b]].dropna()
        d = (pair[a] - pair[b]).to_numpy(float)
        n = d.size
        sd = float(d.std(ddof=1)) if n > 1 else math.nan
        mean = float(d.mean()) if n else math.nan
        spread = n > 1 and sd > _ZERO_SD
        lo, hi = _t_ci(mean, sd / math.sqrt(n), n - 1, confidence) if spread else (math.nan, math.nan)
        p = float(st.ttest_rel(pair[a], pair[b]).pvalue) if spread else math.nan
        rows.append(dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True), strategy_a=a,
                         strategy_b=b, n=n, seeds=" ".join(str(s) for s in pair.index), mean_a=float(pair[a].mean()),
                         mean_b=float(pair[b].mean()), mean_diff=mean, sd_diff=sd, ci_low=lo, ci_high=hi, p=p,
                         n_positive=int((d > 0).sum())))
    return pd.DataFrame(rows, columns=columns)


def _verdict(testable: bool, significant: bool, equivalent: bool) -> str:
    if not testable:
        return UNTESTABLE
    if significant:
        return "different, within margin" if equivalent else "different"
    return "equivalent" if equivalent else "inconclusive"


def _paired_stats(x: np.ndarray, y: np.ndarray, margin: float, confidence: float, alpha: float,
                  notes: list[str], bootstrap_method: str, bootstrap_resamples: int, aso_iterations: int,
                  seed: int) -> dict:
    """The statistics of one comparison with at least 2 pairs (``x - y`` per seed); appends to ``notes``."""
    d = x - y
    row = difference_summary(x, y)
    if row["testable"]:
        row.update(t_test(x, y, row, confidence))
        row.update(resampled(x, y, confidence, notes, bootstrap_method, bootstrap_resamples, aso_iterations,
                             seed))
    else:
        notes.append(f"{UNTESTABLE}: the differences have zero variance (all {row['mean_diff']:+.6g}): t, p, "
                     "CIs, d_z, BF10, TOST and ASO are undefined")
        row.update(dict.fromkeys(("t", "p", "cohen_dz", "bf10", "ci_low", "ci_high", "boot_ci_low",
                                  "boot_ci_high", "aso_eps_ab", "aso_eps_ba"), math.nan))
    w_stat, w_p, w_note = _wilcoxon(d, alpha)
    if w_note:
        notes.append(w_note)
    row.update(tost_p=tost_paired(d, margin), wilcoxon_stat=w_stat, wilcoxon_p=w_p)
    return row


def difference_summary(x: np.ndarray, y: np.ndarray) -> dict:
    """Means, the paired differences' mean, sd and se, degrees of freedom, and whether they vary at all."""
    d = x - y
    sd = float(d.std(ddof=1))
    return dict(mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=float(d.mean()), sd_diff=sd,
                se_diff=sd / math.sqrt(d.size), dof=d.size - 1, testable=sd > _ZERO_SD)


def t_test(x: np.ndarray, y: np.ndarray, summary: dict, confidence: float) -> dict:
    """The paired t-test (pingouin), Cohen's d_z, the unrounded JZS Bayes factor and the t interval."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tt = pg.ttest(x, y, paired=True, confidence=confidence)
    t, dof = float(tt["T"].iloc[0]), int(tt["dof"].iloc[0])
    lo, hi = _t_ci(summary["mean_diff"], summary["se_diff"], dof, confidence)  # pingouin's CI95 is rounded
    # pingouin's table rounds BF10 to a string; recompute it unrounded from the same t and n.
    return dict(t=t, p=float(tt["p_val"].iloc[0]), dof=dof, cohen_dz=summary["mean_diff"] / summary["sd_diff"],
                bf10=float(pg.bayesfactor_ttest(t, x.size, paired=True)), ci_low=lo, ci_high=hi)


def resampled(x: np.ndarray, y: np.ndarray, confidence: float, notes: list[str], bootstrap_method: str,
              bootstrap_resamples: int, aso_iterations: int, seed: int) -> dict:
    """The bootstrap interval of the mean difference and almost stochastic order both ways, each drawn
    from ``seed`` afresh."""
    boot_lo, boot_hi, boot_note = bootstrap_mean_ci(x - y, confidence, bootstrap_method, bootstrap_resamples, seed)
    if boot_note:
        notes.append(boot_note)
    return dict(boot_ci_low=boot_lo, boot_ci_high=boot_hi,
                aso_eps_ab=aso_epsilon_min(x, y, confidence, aso_iterations, seed=seed),
                aso_eps_ba=aso_epsilon_min(y, x, confidence, aso_iterations, seed=seed))
