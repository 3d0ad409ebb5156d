"""Paired-by-seed comparisons of strategies over the results table (``<out>/results.csv``, see
docs/CONTRACTS.md): tidy DataFrames in, tidy DataFrames out.

- :func:`paired_values` -- the pairs: every pair of strategies within each (task, backbone), one row per
  seed with both strategies' ``primary_value``; the tidy frame that each question of
  :mod:`typhoon.analysis.paired` (the difference, the t-test, TOST, Wilcoxon, bootstrap, ASO, power) reads.
- :func:`holm_adjusted` -- Holm's adjustment of the paired t's p within each family of comparisons.
- :func:`verdicts` -- what Holm and TOST together say of each comparison.
- :func:`paired_comparisons` -- all of these in one 35-column table (notebook 20's ``stats/comparisons.csv``,
  the report, the claims), with a note per comparison ("cannot be tested" when the differences do not vary
  or there are < 2 pairs -- never equivalent, never significant).
- :func:`paired_differences` -- the paired-by-seed difference of any per-run column (a loss, say): mean,
  t CI, p and how many seeds it is positive in; light (no bootstrap, no ASO), for the claims.

The other questions have their own modules: :mod:`.run_summary` (loading, summaries, degenerate runs),
:mod:`.significance` (the tests on arrays), :mod:`.seed_budget` (seeds needed, expected max),
:mod:`.verdict_text` (the conclusion in words), :mod:`.stats_tables` (display tables, CSV/Markdown/LaTeX).
Only rows with ``status == "ok"`` enter any statistic.
"""


from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import combinations

import numpy as np
import pandas as pd

from typhoon.analysis import paired
from typhoon.analysis.run_summary import (
    GROUP_KEYS,
    metric_of,
    ok_runs,
    require_columns,
    strategy_order,
)
from typhoon.analysis.significance import (
    check_bootstrap_method,
    holm,
)
from typhoon.profiles import task_margins

FAMILY_REF = "vs_reference"


_FAMILY_OTHER = "other"


UNTESTABLE = "cannot be tested"


_COMPARISON_COLUMNS = [
    "task", "backbone", "primary_metric", "strategy_a", "strategy_b", "family", "n", "seeds", "mean_a",
    "mean_b", "mean_diff", "sd_diff", "se_diff", "ci_low", "ci_high", "t", "dof", "p", "p_holm",
    "significant", "cohen_dz", "bf10", "margin", "tost_p", "equivalent", "wilcoxon_stat", "wilcoxon_p",
    "testable", "boot_ci_low", "boot_ci_high", "aso_eps_ab", "aso_eps_ba", "verdict", "holm_family", "note",
]
PAIR_COLUMNS = ["task", "backbone", "primary_metric", "strategy_a", "strategy_b", *paired.VALUES]


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
    """Paired-by-seed comparisons of every pair of strategies within each (task, backbone): every question of
    :mod:`typhoon.analysis.paired` asked of :func:`paired_values`, one row per comparison.

    The difference is ``strategy_a - strategy_b`` (``primary_value``); when the reference strategy is in
    a pair it is ``strategy_a``, so a positive ``mean_diff`` means the reference did better (for
    metrics where higher is better). After the labels (:data:`PAIR_COLUMNS`), the columns of each question:

    - ``n``, ``seeds``, ``mean_a``, ``mean_b``, ``mean_diff``, ``sd_diff``, ``se_diff``, ``ci_low``,
      ``ci_high`` (t interval at ``confidence``), ``testable``: :func:`paired.difference`
    - ``t``, ``dof``, ``p``, ``cohen_dz``, ``bf10``: :func:`paired.t_test`
    - ``margin``, ``tost_p``, ``equivalent`` (at ``alpha``): :func:`paired.tost` (``margin``: one number, or one
      per task, a mapping; None, each task's registered margin, :func:`typhoon.profiles.task_margins`)
    - ``wilcoxon_stat``, ``wilcoxon_p``: :func:`paired.wilcoxon`
    - ``boot_ci_low``, ``boot_ci_high``: :func:`paired.bootstrap_ci` (``bootstrap_method``,
      ``bootstrap_resamples``, ``seed``); with 3-5 seeds too narrow -- the t CI is the one to read
    - ``aso_eps_ab``, ``aso_eps_ba``: :func:`paired.stochastic_order` (``aso_iterations``, ``seed``;
      uncorrected for multiple comparisons; < 0.2, :data:`ASO_TAU`, the usual threshold for "better")
    - ``family``, ``p_holm``, ``holm_family``: :func:`holm_adjusted` (the comparisons with ``reference``
      are one family, the rest another, each across every (task, backbone))
    - ``significant``, ``verdict``: :func:`verdicts` (``p_holm < alpha``; Holm and TOST together)
    - ``note``: why anything is NaN or to be read with care (unpaired seeds, too few pairs, no spread,
      the bootstrap's warnings, Wilcoxon's smallest attainable p)

    Untestable comparisons (< 2 pairs, or differences without spread) have NaN t, p, intervals, TOST and
    ASO, and are neither significant nor equivalent. A row does not depend on the others (the bootstrap and
    ASO draw from ``seed`` afresh); 30 comparisons take 4-5 s, mostly ASO (benchmarks/bench_seed_stats.py).
    ValueError for missing columns, unpaired seeds and < 2 pairs, unless ``on_invalid="skip"``
    (:func:`paired_values`): then the row is kept with NaN statistics and ``note`` says why.
    """
    margin = task_margins() if margin is None else margin
    _check_comparison_options(on_invalid, margin, bootstrap_method)
    pairs = paired_values(results, reference, on_invalid)
    keys = paired.labels(pairs)
    wilcoxon = paired.wilcoxon(pairs, alpha)
    boot = paired.bootstrap_ci(pairs, confidence, bootstrap_method, bootstrap_resamples, seed)
    answers = [paired.difference(pairs, confidence), paired.t_test(pairs), paired.tost(pairs, margin, alpha),
               wilcoxon.drop(columns="note"), boot.drop(columns="note"),
               paired.stochastic_order(pairs, confidence, aso_iterations, seed)]
    out = pd.concat([answers[0], *(a.drop(columns=keys) for a in answers[1:])], axis=1)
    out["note"] = comparison_notes(pairs, out, wilcoxon["note"], boot["note"])
    out = out.reindex(columns=_COMPARISON_COLUMNS)
    out[["family", "p_holm", "holm_family"]] = holm_adjusted(out[["strategy_a", "strategy_b", "p"]], reference)[
        ["family", "p_holm", "holm_family"]]
    out[["significant", "equivalent", "verdict"]] = verdicts(out[["testable", "p_holm", "tost_p"]], alpha)[
        ["significant", "equivalent", "verdict"]]
    out["n"], out["dof"] = out["n"].astype("Int64"), out["dof"].astype(float)
    resampling = dict(bootstrap_method=bootstrap_method, bootstrap_resamples=bootstrap_resamples,
                      aso_iterations=aso_iterations, seed=seed)
    out.attrs.update(margin=margin, reference=reference, alpha=alpha, confidence=confidence, **resampling)
    return out


def _check_comparison_options(on_invalid: str, margin: float | Mapping[str, float], bootstrap_method: str) -> None:
    if on_invalid not in ("raise", "skip"):
        raise ValueError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    if not all(m > 0 for m in (margin.values() if isinstance(margin, Mapping) else [margin])):
        raise ValueError(f"margin must be > 0, got {margin}")
    check_bootstrap_method(bootstrap_method, "bootstrap_method")


def strategy_pairs(runs: pd.DataFrame, reference: str | None) -> Iterable[tuple[pd.DataFrame, str, str]]:
    """Each (task, backbone)'s runs with every pair of its strategies, the reference first in its pairs."""
    for _, g in runs.groupby(GROUP_KEYS, sort=False):
        for a, b in combinations(strategy_order(g["strategy"], reference), 2):
            yield g, a, b


def paired_values(results: pd.DataFrame, reference: str | None = "typhoon", on_invalid: str = "raise") -> pd.DataFrame:
    """The pairs of every comparison: each pair of strategies within each (task, backbone) (the reference
    first in its pairs, so it is ``strategy_a``), one row per seed either of them ran, ``a`` and ``b`` their
    ``primary_value`` (ok runs only). Columns :data:`PAIR_COLUMNS`: the labels task, backbone,
    primary_metric, strategy_a, strategy_b, then seed, a, b -- what :mod:`typhoon.analysis.paired` reads.

    A seed only one of the two ran is an error naming it, as is a pair with fewer than 2 paired seeds;
    with ``on_invalid="skip"`` both are kept (the missing side NaN), for :func:`paired_comparisons` to
    say why its row has no test."""
    if on_invalid not in ("raise", "skip"):
        raise ValueError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    frames = []
    for group, a, b in strategy_pairs(ok_runs(results), reference):
        task, backbone = group["task"].iloc[0], group["backbone"].iloc[0]
        pair = group.pivot(index="seed", columns="strategy", values="primary_value")[[a, b]]
        unpaired = pair.index[pair.isna().any(axis=1)].tolist()
        if on_invalid == "raise" and unpaired:
            raise ValueError(f"{task}/{backbone}: seed(s) {unpaired} present for only one of {a!r} and {b!r} "
                             "(missing pairs)")
        if on_invalid == "raise" and len(pair) - len(unpaired) < 2:
            raise ValueError(f"{task}/{backbone}: {a!r} vs {b!r} has {len(pair) - len(unpaired)} paired seed(s); "
                             "need >= 2")
        frames.append(pd.DataFrame({"task": task, "backbone": backbone, "primary_metric": metric_of(group),
                                    "strategy_a": a, "strategy_b": b, "seed": pair.index.to_numpy(),
                                    "a": pair[a].to_numpy(), "b": pair[b].to_numpy()}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PAIR_COLUMNS)


def comparison_notes(pairs: pd.DataFrame, answers: pd.DataFrame, wilcoxon_notes: Iterable[str],
                     bootstrap_notes: Iterable[str]) -> list[str]:
    """The ``note`` of each comparison of :func:`paired_comparisons`: the seeds dropped as unpaired, then why
    it was skipped (< 2 pairs) or could not be tested (no spread), the bootstrap's warnings and Wilcoxon's."""
    keys = paired.labels(pairs)
    unpaired = pairs[pairs["a"].isna() | pairs["b"].isna()].groupby(keys, sort=False, dropna=False)["seed"]
    dropped = {key: seeds.tolist() for key, seeds in unpaired}
    notes = []
    for row, w_note, b_note in zip(answers.itertuples(index=False), wilcoxon_notes, bootstrap_notes, strict=True):
        key = tuple(getattr(row, k) for k in keys)
        parts = [f"unpaired seed(s) {dropped[key]} dropped"] if key in dropped else []
        if row.n < 2:
            parts.append(f"skipped: {row.n} paired seed(s), a paired test needs >= 2")
        else:
            parts.append(b_note if row.testable else
                         f"{UNTESTABLE}: the differences have zero variance (all {row.mean_diff:+.6g}): t, p, CIs, "
                         "d_z, BF10, TOST and ASO are undefined")
            parts.append(w_note)
        notes.append("; ".join(p for p in parts if p))
    return notes


def holm_adjusted(tests: pd.DataFrame, reference: str | None) -> pd.DataFrame:
    """Holm's adjustment of the paired t's ``p`` within each family: the comparisons with ``reference``
    (``strategy_a`` or ``strategy_b``; family ``"vs_reference"``) and the others (``"other"``), each across
    every row of ``tests`` (every task and backbone). Columns: those of ``tests`` but ``p``, then ``family``,
    ``p_holm`` (NaN where ``p`` is: such rows are not in the family) and ``holm_family``, the family in words
    beside each p ("Holm over the 4 comparisons of ...")."""
    require_columns(tests, ["strategy_a", "strategy_b", "p"], what="tests")
    out = tests.drop(columns="p").reset_index(drop=True)
    with_reference = (tests["strategy_a"] == reference) | (tests["strategy_b"] == reference)
    family = np.where(with_reference.to_numpy(bool), FAMILY_REF, _FAMILY_OTHER)
    p = tests["p"].to_numpy(float)
    p_holm, words = np.full(len(tests), np.nan), np.full(len(tests), "", dtype=object)
    for fam in (FAMILY_REF, _FAMILY_OTHER):
        m = family == fam
        if m.any():
            p_holm[m] = holm(p[m])
            words[m] = holm_family(p[m], _family_members(fam, reference))
    out["family"], out["p_holm"], out["holm_family"] = family.tolist(), p_holm, words.tolist()
    return out


def verdicts(tests: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """What Holm and TOST say together. Columns: those of ``tests`` but ``testable``, ``p_holm`` and ``tost_p``,
    then ``significant`` (``p_holm < alpha``), ``equivalent`` (``tost_p < alpha``) and ``verdict``:
    ``"cannot be tested"`` (not ``testable``: never significant nor equivalent); else ``"different"``
    (significant, not equivalent), ``"equivalent"`` (equivalent, not significant), ``"different, within
    margin"`` (both: a real difference smaller than the margin) or ``"inconclusive"`` (neither)."""
    require_columns(tests, ["testable", "p_holm", "tost_p"], what="tests")
    out = tests.drop(columns=["testable", "p_holm", "tost_p"]).reset_index(drop=True)
    testable = tests["testable"].eq(True).to_numpy()  # NaN (fewer than 2 pairs) -> False
    # NaN compares False, so untestable rows (p and tost_p NaN) are neither significant nor equivalent.
    out["significant"] = (tests["p_holm"].to_numpy(float) < alpha) & testable
    out["equivalent"] = (tests["tost_p"].to_numpy(float) < alpha) & testable
    out["verdict"] = [_verdict(*flags) for flags in zip(testable, out["significant"], out["equivalent"], strict=True)]
    return out


def _family_members(family: str, reference: str | None) -> str:
    if family == FAMILY_REF:
        return f"{reference} vs each other strategy, every task × backbone"
    return f"the pairs without {reference}, every task × backbone" if reference else "every pair, task × backbone"


def holm_family(pvalues: Iterable[float], members: str) -> str:
    """What a Holm-adjusted p is adjusted over, said beside it: "Holm over the 4 comparisons of
    <members>" (NaN p-values are not in the family, as in :func:`holm`)."""
    k = int(np.isfinite(np.asarray(list(pvalues), dtype=float)).sum())
    return f"Holm over the {k} comparison{'s' if k != 1 else ''} of {members}"


def values_by_seed(frame: pd.DataFrame, value: str, a: str, b: str, by: Iterable[str] = GROUP_KEYS) -> pd.DataFrame:
    """The pairs of strategy ``a`` against ``b`` of the per-run column ``value``, per group of ``by``: columns
    ``by``, strategy_a, strategy_b, seed, a, b (a seed one of them lacks: NaN on that side). Groups without
    one of the two strategies are left out."""
    by = list(by)
    require_columns(frame, [*by, "strategy", "seed", value], what="runs")
    frames = []
    for key, g in frame.groupby(by, sort=False):
        wide = g.pivot_table(index="seed", columns="strategy", values=value, aggfunc="first")
        if a in wide and b in wide:
            frames.append(pd.DataFrame({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                                        "strategy_a": a, "strategy_b": b, "seed": wide.index.to_numpy(),
                                        "a": wide[a].to_numpy(), "b": wide[b].to_numpy()}))
    columns = [*by, "strategy_a", "strategy_b", *paired.VALUES]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def paired_differences(frame: pd.DataFrame, value: str, a: str, b: str, by: Iterable[str] = GROUP_KEYS,
                       confidence: float = 0.95) -> pd.DataFrame:
    """Per group of ``by``: the paired-by-seed difference ``a - b`` of the per-run column ``value``.

    ``frame`` has one row per run (columns ``strategy``, ``seed``, ``by`` and ``value``). Columns of the
    answer: ``by``, strategy_a, strategy_b, n (paired seeds), seeds, mean_a, mean_b, mean_diff, sd_diff,
    ci_low / ci_high (the t interval at ``confidence``), p (two-sided paired t, ``scipy.stats.ttest_rel``)
    and n_positive (seeds where a > b): :func:`paired.difference` and :func:`paired.t_test` of
    :func:`values_by_seed`. Groups where one strategy is missing are left out; with < 2 pairs, or
    differences without spread, the CI and p are NaN (a constant difference over a few seeds says
    nothing about the spread between seeds).
    """
    pairs = values_by_seed(frame, value, a, b, by)
    out = paired.difference(pairs, confidence).drop(columns=["se_diff", "testable"])
    out["p"] = paired.t_test(pairs)["p"]
    positive = (pairs["a"] > pairs["b"]).groupby([pairs[k] for k in paired.labels(pairs)], sort=False, dropna=False).sum()
    out["n_positive"] = positive.to_numpy(int)
    return out


def _verdict(testable: bool, significant: bool, equivalent: bool) -> str:
    if not testable:
        return UNTESTABLE
    if significant:
        return "different, within margin" if equivalent else "different"
    return "equivalent" if equivalent else "inconclusive"
