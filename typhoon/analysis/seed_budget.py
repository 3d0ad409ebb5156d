"""How many seeds a study needs: the paired t-test's power analysis per comparison, and the expected
maximum performance over k seeds."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd
import pingouin as pg

from typhoon.analysis.run_summary import metric_of, ok_runs, require_columns
from typhoon.analysis.significance import ZERO_SD

# --------------------------------------------------------------------------------------------------
# power
# --------------------------------------------------------------------------------------------------
_MAX_PAIRS = 1e7  # the top of pingouin's search for n


def _n_for_power(d: float, power: float, alpha: float) -> float:
    """Smallest integer n (pairs) giving ``power`` for a two-sided paired t-test at effect d_z = d.

    inf when d = 0 or when even 10^7 pairs would not do; NaN when d is NaN.
    """
    if not np.isfinite(d):
        return math.nan
    d = abs(d)
    if d == 0:
        return math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = pg.power_ttest(d=d, power=power, alpha=alpha, contrast="paired")
        if not np.isfinite(n):
            # pingouin's root search starts at n = 2; a non-finite answer for a large d means
            # 2 pairs already suffice.
            if pg.power_ttest(d=d, n=2, alpha=alpha, contrast="paired") >= power:
                return 2.0
            # ... and for a tiny d, that more pairs than it searches are needed.
            if pg.power_ttest(d=d, n=_MAX_PAIRS, alpha=alpha, contrast="paired") < power:
                return math.inf
            return math.nan
    return float(max(2, math.ceil(n - 1e-9)))


def seeds_needed(comparisons: pd.DataFrame, power: float = 0.8, alpha: float = 0.05,
                 margin: float | None = None) -> pd.DataFrame:
    """Seeds (pairs) needed for ``power`` in a two-sided paired t-test at level ``alpha``, both from the
    measured sd of the paired differences (``sd_diff``):

    - ``n_observed``: to detect the observed difference ``mean_diff``, i.e. at ``d_z = cohen_dz =
      mean_diff / sd_diff`` (inf when d_z = 0);
    - ``n_margin``: to detect a true difference equal to ``margin``, the smallest difference that
      matters (e.g. 0.01; defaults to the comparison's ``margin`` column, the TOST margin), at
      ``d_margin = margin / sd_diff``.

    Both are NaN for comparisons that cannot be tested (< 2 pairs, or differences without spread:
    no measured sd to plan from). Uses ``pingouin.power_ttest(contrast="paired")``, rounded up to an
    integer, at least 2; inf when more than 10^7 pairs would be needed.
    """
    require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "n", "mean_diff",
                                  "cohen_dz", "sd_diff"], what="comparisons")
    if not (0 < power < 1) or not (0 < alpha < 1):
        raise ValueError(f"power and alpha must be in (0, 1), got power={power}, alpha={alpha}")
    out = comparisons[["task", "backbone", "strategy_a", "strategy_b", "n", "mean_diff"]].copy()
    if margin is None:
        if "margin" not in comparisons.columns:
            raise ValueError("comparisons has no 'margin' column; pass margin=")
        marg = comparisons["margin"].astype(float)
    else:
        if not margin > 0:
            raise ValueError(f"margin (the smallest difference that matters) must be > 0, got {margin}")
        marg = pd.Series(float(margin), index=comparisons.index)
    dz = comparisons["cohen_dz"].astype(float)
    sd = comparisons["sd_diff"].astype(float)
    measured = sd > ZERO_SD
    d_margin = np.where(measured, marg / sd.where(measured), np.nan)
    out["cohen_dz"] = dz
    out["n_observed"] = [_n_for_power(d, power, alpha) for d in dz]
    out["margin"] = marg
    out["sd_diff"] = sd
    out["d_margin"] = d_margin
    out["n_margin"] = [_n_for_power(d, power, alpha) for d in d_margin]
    out["power"] = power
    out["alpha"] = alpha
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------------------------------
# expected validation performance, degenerate runs
# --------------------------------------------------------------------------------------------------
def expected_max(values: Iterable[float], k: int) -> float:
    """E[max of k draws with replacement] from the empirical distribution of ``values``.

    Dodge et al. (2019): with v_(1) <= ... <= v_(n), sum_i v_(i) [(i/n)^k - ((i-1)/n)^k].
    """
    v = np.sort(np.asarray(list(values), dtype=float))
    n = v.size
    if n == 0:
        raise ValueError("expected_max needs at least one value")
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k}")
    i = np.arange(1, n + 1, dtype=float)
    w = (i / n) ** k - ((i - 1) / n) ** k
    return float(np.dot(v, w))


def expected_max_performance(results: pd.DataFrame, ks: Iterable[int] | None = None) -> pd.DataFrame:
    """Expected best-of-k ``primary_value`` vs k, per (task, backbone, strategy).

    ``ks`` defaults to 1..max number of seeds. Columns: task, backbone, strategy, k, n (seeds observed),
    expected_max, extrapolated (k > n: draws then repeat observed seeds more than they would in reality).
    """
    df = ok_runs(results)
    if df.empty:
        raise ValueError("no runs with status 'ok'")
    groups = df.groupby(["task", "backbone", "strategy"], sort=False)
    if ks is None:
        ks = range(1, int(groups.size().max()) + 1)
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive integers, got {ks}")
    rows = []
    for (task, backbone, strategy), g in groups:
        v = g["primary_value"].to_numpy(float)
        for k in ks:
            rows.append(dict(task=task, backbone=backbone, strategy=strategy, primary_metric=metric_of(g),
                             k=k, n=len(v), expected_max=expected_max(v, k), extrapolated=k > len(v)))
    return pd.DataFrame(rows)
