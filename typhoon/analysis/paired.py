"""Paired-by-seed values, one question per function (pingouin's way): each takes a tidy frame of pairs and
answers with a tidy frame, one row per comparison.

The pairs frame has one row per comparison and seed: ``seed``, ``a`` and ``b`` (the two arms' values on
that seed) and label columns naming the comparison -- every other column is a label (task, backbone,
strategy_a, strategy_b, ...). :func:`typhoon.analysis.pairwise.paired_values` makes it from results.csv.
Each answer starts with the labels, one row per comparison in order of first appearance. A seed that only
one arm ran has NaN on the other side and enters no statistic. The difference is ``a - b``.

A comparison is *testable* with at least 2 pairs whose differences vary (sd above float rounding,
:data:`typhoon.analysis.significance.ZERO_SD`); otherwise the t statistics, intervals and resampling are
undefined (NaN): a constant difference over a few seeds says nothing about the spread between seeds.

- :func:`difference`: how large is the mean difference, and its t interval? (n, means, sd, se, CI, testable)
- :func:`t_test`: is it different from 0? the paired t (t, dof, p), Cohen's d_z and the JZS Bayes factor
- :func:`tost`: is it within ``±margin``? TOST p and the decision at ``alpha``
- :func:`wilcoxon`: the Wilcoxon signed-rank test, with a note when its smallest attainable p exceeds alpha
- :func:`bootstrap_ci`: the bootstrap interval of the mean difference
- :func:`stochastic_order`: almost stochastic order both ways (epsilon_min)
- :func:`power`: the paired t's power at each comparison's n pairs for a true effect ``dz``
- :func:`tost_power`: the exact probability that a paired TOST with n pairs declares equivalence
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import integrate
from scipy import stats as st

from typhoon.analysis import run_summary, significance

VALUES = ["seed", "a", "b"]  # the columns of a pairs frame that are not labels


def labels(pairs: pd.DataFrame) -> list[str]:
    """The label columns of ``pairs`` (every column but :data:`VALUES`); ValueError when one of those is missing."""
    if not isinstance(pairs, pd.DataFrame):
        raise TypeError(f"pairs must be a pandas DataFrame, got {type(pairs).__name__}")
    missing = [c for c in VALUES if c not in pairs.columns]
    if missing:
        raise ValueError(f"pairs is missing column(s) {missing}; has {list(pairs.columns)}")
    return [c for c in pairs.columns if c not in VALUES]


def _each(pairs: pd.DataFrame, columns: list[str], answer: Callable[[np.ndarray, np.ndarray, pd.Series], dict]
          ) -> pd.DataFrame:
    """``answer(a, b, seeds)`` per comparison, on its seeds with both values, under the comparison's labels."""
    keys = labels(pairs)
    groups = pairs.groupby(keys, sort=False, dropna=False) if keys else [((), pairs)]
    rows = []
    for key, g in groups:
        both = g.dropna(subset=["a", "b"])
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)),
                     **answer(both["a"].to_numpy(float), both["b"].to_numpy(float), both["seed"])})
    return pd.DataFrame(rows, columns=[*keys, *columns])


def _testable(d: np.ndarray) -> bool:
    return d.size >= 2 and float(d.std(ddof=1)) > significance.ZERO_SD


def difference(pairs: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The mean paired difference and its t interval. Columns after the labels: ``n`` (pairs), ``seeds``,
    ``mean_a``, ``mean_b``, ``mean_diff``, ``sd_diff`` (ddof 1), ``se_diff``, ``ci_low`` / ``ci_high`` (the t
    interval at ``confidence``) and ``testable``. With one pair only the means; with none, NaN."""
    def answer(x: np.ndarray, y: np.ndarray, seeds: pd.Series) -> dict:
        d = x - y
        n = d.size
        row = dict(n=n, seeds=" ".join(str(s) for s in seeds.tolist()), testable=_testable(d))
        if n == 0:
            return row
        row.update(mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=float(d.mean()))
        if n >= 2:
            sd = float(d.std(ddof=1))
            row.update(sd_diff=sd, se_diff=sd / math.sqrt(n))
            if row["testable"]:
                row["ci_low"], row["ci_high"] = significance.t_ci(row["mean_diff"], row["se_diff"], n - 1, confidence)
        return row

    return _each(pairs, ["n", "seeds", "mean_a", "mean_b", "mean_diff", "sd_diff", "se_diff", "ci_low", "ci_high",
                         "testable"], answer)


def t_test(pairs: pd.DataFrame) -> pd.DataFrame:
    """The two-sided paired t-test (``scipy.stats.ttest_rel``, which ``pingouin.ttest(paired=True)`` calls),
    Cohen's d_z (mean / sd of the differences) and the JZS Bayes factor BF10 (``pingouin.bayesfactor_ttest``,
    r = 0.707, unrounded). Columns after the labels: ``t``, ``dof`` (n - 1 from 2 pairs on), ``p``,
    ``cohen_dz``, ``bf10``; NaN where the comparison is not testable."""
    def answer(x: np.ndarray, y: np.ndarray, _seeds: pd.Series) -> dict:
        d = x - y
        row = dict(dof=d.size - 1 if d.size >= 2 else math.nan)
        if _testable(d):
            t, p = st.ttest_rel(x, y)
            row.update(t=float(t), p=float(p), cohen_dz=float(d.mean()) / float(d.std(ddof=1)),
                       bf10=float(pg.bayesfactor_ttest(float(t), d.size, paired=True)))
        return row

    return _each(pairs, ["t", "dof", "p", "cohen_dz", "bf10"], answer)


def tost(pairs: pd.DataFrame, margin: float | Mapping[str, float], alpha: float = 0.05) -> pd.DataFrame:
    """Equivalence within ``±margin`` by two one-sided paired t-tests
    (:func:`typhoon.analysis.significance.tost_paired`, as ``pingouin.tost(paired=True)``). ``margin``: one
    number, or one per task (a mapping; the pairs then need a ``task`` label, and a task without a margin is
    an error). Columns after the labels: ``margin``, ``tost_p`` (NaN where not testable) and ``equivalent``
    (``tost_p < alpha``)."""
    for m in (margin.values() if isinstance(margin, Mapping) else [margin]):
        if not m > 0:
            raise ValueError(f"margin must be > 0, got {margin}")
    keys = labels(pairs)
    if isinstance(margin, Mapping):
        if "task" not in keys:
            raise ValueError(f"a margin per task needs a 'task' label in the pairs (labels: {keys})")
        # One margin per comparison, in the order _each answers them (first appearance).
        margins = iter([run_summary.task_margin(margin, task) for task in pairs.drop_duplicates(keys)["task"]])
    else:
        margins = itertools.repeat(float(margin))

    def answer(x: np.ndarray, y: np.ndarray, _seeds: pd.Series) -> dict:
        m = next(margins)
        p = significance.tost_paired(x - y, m)
        return dict(margin=m, tost_p=p, equivalent=bool(p < alpha))

    return _each(pairs, ["margin", "tost_p", "equivalent"], answer)


def wilcoxon(pairs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """The Wilcoxon signed-rank test of the differences (``scipy.stats.wilcoxon``). Columns after the labels:
    ``wilcoxon_stat``, ``wilcoxon_p`` and ``note``: why they are NaN (all differences zero, fewer than 2
    non-zero ones or fewer than 2 pairs), or that with so few non-zero differences no p can reach ``alpha``."""
    def answer(x: np.ndarray, y: np.ndarray, _seeds: pd.Series) -> dict:
        if x.size < 2:
            return dict(note=f"wilcoxon: {x.size} pair(s), a paired test needs >= 2")
        stat, p, note = significance.wilcoxon(x - y, alpha)
        return dict(wilcoxon_stat=stat, wilcoxon_p=p, note=note)

    return _each(pairs, ["wilcoxon_stat", "wilcoxon_p", "note"], answer)


def bootstrap_ci(pairs: pd.DataFrame, confidence: float = 0.95, method: str = "percentile", resamples: int = 9999,
                 seed: int = 0) -> pd.DataFrame:
    """The bootstrap interval of the mean difference (:func:`typhoon.analysis.significance.bootstrap_mean_ci`:
    scipy's, ``method`` percentile, BCa or basic, ``resamples`` resamples drawn from ``seed`` afresh for each
    comparison). Columns after the labels: ``boot_ci_low``, ``boot_ci_high`` (NaN where not testable) and
    ``note`` (scipy's warnings). With 3-5 seeds it is too narrow; read the t interval (:func:`difference`)."""
    significance.check_bootstrap_method(method, "method")

    def answer(x: np.ndarray, y: np.ndarray, _seeds: pd.Series) -> dict:
        if not _testable(x - y):
            return dict(note="")
        low, high, note = significance.bootstrap_mean_ci(x - y, confidence, method, resamples, seed)
        return dict(boot_ci_low=low, boot_ci_high=high, note=note)

    return _each(pairs, ["boot_ci_low", "boot_ci_high", "note"], answer)


def stochastic_order(pairs: pd.DataFrame, confidence: float = 0.95, iterations: int = 1000,
                     seed: int = 0) -> pd.DataFrame:
    """Almost stochastic order (:func:`typhoon.analysis.significance.aso_epsilon_min`) both ways: columns after
    the labels ``aso_eps_ab`` (epsilon_min for "a better than b") and ``aso_eps_ba`` (the other way), each
    drawn from ``seed`` afresh; NaN where not testable. The two samples are compared as distributions."""
    def answer(x: np.ndarray, y: np.ndarray, _seeds: pd.Series) -> dict:
        if not _testable(x - y):
            return {}
        return dict(aso_eps_ab=significance.aso_epsilon_min(x, y, confidence, iterations, seed=seed),
                    aso_eps_ba=significance.aso_epsilon_min(y, x, confidence, iterations, seed=seed))

    return _each(pairs, ["aso_eps_ab", "aso_eps_ba"], answer)


def power(pairs: pd.DataFrame, dz: float = 0.5, alpha: float = 0.05) -> pd.DataFrame:
    """The power of the two-sided paired t-test at level ``alpha`` with each comparison's n pairs, when the
    true difference is ``dz`` standard deviations of the differences (``pingouin.power_ttest(contrast=
    "paired")``): how likely the comparison was to find an effect that large. Columns after the labels:
    ``n``, ``dz``, ``alpha``, ``power`` (NaN with fewer than 2 pairs)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")

    def answer(x: np.ndarray, _y: np.ndarray, _seeds: pd.Series) -> dict:
        row = dict(n=x.size, dz=dz, alpha=alpha)
        if x.size >= 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row["power"] = float(pg.power_ttest(d=dz, n=x.size, alpha=alpha, contrast="paired"))
        return row

    return _each(pairs, ["n", "dz", "alpha", "power"], answer)


def tost_power(n: int, sd: float, margin: float, alpha: float = 0.05, true_diff: float = 0.0) -> float:
    """Probability that a paired TOST at level ``alpha`` with ``n`` pairs declares equivalence within
    ``±margin`` when the differences are Normal(``true_diff``, ``sd``). Exact: x̄ ~ N(true_diff, sd²/n) and
    s² ~ sd² χ²(n-1)/(n-1) are independent, and equivalence is |x̄ ± t s/√n| inside the margin; the
    probability over x̄ given s is integrated over the distribution of s."""
    if n < 2 or sd <= 0 or margin <= 0:
        raise ValueError(f"need n >= 2, sd > 0 and margin > 0, got n={n}, sd={sd}, margin={margin}")
    dof, t_crit, se = n - 1, st.t.ppf(1 - alpha, n - 1), sd / math.sqrt(n)

    def given_chi2(q: float) -> float:
        half = margin - t_crit * sd * math.sqrt(q / dof) / math.sqrt(n)  # x̄ must lie within true ± half
        if half <= 0:
            return 0.0
        return (st.norm.cdf((half - true_diff) / se) - st.norm.cdf((-half - true_diff) / se)) * st.chi2.pdf(q, dof)

    upper = dof * (margin * math.sqrt(n) / (t_crit * sd)) ** 2  # beyond it the interval is wider than the margin
    return float(integrate.quad(given_chi2, 0, upper, limit=200)[0])
