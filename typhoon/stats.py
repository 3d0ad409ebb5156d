"""Statistics over the results table (``<out>/results.csv``, see docs/CONTRACTS.md).

Tidy DataFrames in, tidy DataFrames out; one function per statistical question:

- :func:`summarize` -- per (task, backbone, strategy): seeds, mean, sd, t-based CI of the mean.
- :func:`paired_comparisons` -- paired-by-seed comparisons of every pair of strategies within each
  (task, backbone): mean difference and CI, paired t (pingouin), Cohen's d_z, BF10, Holm-corrected p
  over the family of comparisons involving the reference strategy, TOST equivalence, Wilcoxon.
- :func:`seeds_needed` -- seeds for a given power at the observed effect and at the margin.
- :func:`expected_max_performance` -- expected best-of-k dev metric (Dodge et al., 2019).
- :func:`degenerate_rate` -- runs at or below the majority-class level (Mosbach et al., 2021).
- :func:`conclusion` -- the verdict the comparisons support, as a sentence built from the numbers.
- :func:`write_tables` -- CSV + Markdown + LaTeX, each written atomically.

Only rows with ``status == "ok"`` enter any statistic.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from typhoon.records import RUN_KEYS, atomic_write_text

__all__ = [
    "GROUP_KEYS",
    "load_results",
    "ok_runs",
    "summarize",
    "paired_comparisons",
    "holm",
    "tost_paired",
    "seeds_needed",
    "expected_max",
    "expected_max_performance",
    "degenerate_rate",
    "conclusion",
    "skipped",
    "write_tables",
]

GROUP_KEYS = ["task", "backbone"]
_RESULT_COLUMNS = [*RUN_KEYS, "status", "primary_value"]  # what the statistics read from results.csv
_FAMILY_REF = "vs_reference"
_FAMILY_OTHER = "other"


# --------------------------------------------------------------------------------------------------
# input handling
# --------------------------------------------------------------------------------------------------
def _require_columns(df: pd.DataFrame, columns: Iterable[str], what: str = "results") -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} is missing column(s) {missing}; has {list(df.columns)}")


def load_results(path: str | os.PathLike) -> pd.DataFrame:
    """Read ``results.csv`` and check it has the columns the statistics need."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"results table not found: {path}")
    df = pd.read_csv(path)
    _require_columns(df, _RESULT_COLUMNS, what=str(path))
    return df


def ok_runs(results: pd.DataFrame, extra_columns: Iterable[str] = ()) -> pd.DataFrame:
    """Rows with ``status == "ok"`` and a finite ``primary_value``; validated, one row per run."""
    _require_columns(results, [*_RESULT_COLUMNS, *extra_columns])
    df = results.loc[results["status"].astype(str) == "ok"].copy()
    df["primary_value"] = pd.to_numeric(df["primary_value"], errors="coerce")
    bad = df["primary_value"].isna()
    if bad.any():
        rows = df.loc[bad, RUN_KEYS].to_dict("records")
        raise ValueError(f"status 'ok' but primary_value missing/non-numeric for runs {rows}")
    dup = df.duplicated(RUN_KEYS, keep=False)
    if dup.any():
        rows = df.loc[dup, RUN_KEYS].drop_duplicates().to_dict("records")
        raise ValueError(f"duplicated runs (same task, backbone, strategy, seed): {rows}")
    for col in ("task", "backbone", "strategy"):
        df[col] = df[col].astype(str)
    return df.reset_index(drop=True)


def _strategy_order(strategies: Iterable[str], reference: str | None) -> list[str]:
    """Reference first, the rest in order of first appearance."""
    seen = list(dict.fromkeys(strategies))
    if reference is not None and reference in seen:
        seen.remove(reference)
        seen.insert(0, reference)
    return seen


def _metric_of(df: pd.DataFrame) -> str:
    if "primary_metric" not in df.columns:
        return ""
    vals = df["primary_metric"].dropna().astype(str).unique()
    return ",".join(sorted(vals))


# --------------------------------------------------------------------------------------------------
# descriptive
# --------------------------------------------------------------------------------------------------
def _t_ci(mean: float, se: float, dof: float, confidence: float) -> tuple[float, float]:
    if not (dof >= 1) or not np.isfinite(se):
        return (math.nan, math.nan)
    h = st.t.ppf(0.5 + confidence / 2.0, dof) * se
    return (mean - h, mean + h)


def summarize(results: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per (task, backbone, strategy): ``n`` seeds, ``mean``, ``sd`` (ddof=1), ``sem`` and the t-based
    ``ci_low``/``ci_high`` of the mean of ``primary_value`` (``status == "ok"`` runs only).

    With one seed ``sd``, ``sem`` and the CI are NaN. Also reports ``n_failed`` (runs not ok).
    """
    df = ok_runs(results)
    rows = []
    for (task, backbone, strategy), g in df.groupby(["task", "backbone", "strategy"], sort=False):
        v = g["primary_value"].to_numpy(float)
        n = len(v)
        mean = float(v.mean())
        sd = float(v.std(ddof=1)) if n > 1 else math.nan
        sem = sd / math.sqrt(n) if n > 1 else math.nan
        lo, hi = _t_ci(mean, sem, n - 1, confidence)
        rows.append(
            dict(task=task, backbone=backbone, strategy=strategy, primary_metric=_metric_of(g), n=n,
                 mean=mean, sd=sd, sem=sem, ci_low=lo, ci_high=hi)
        )
    out = pd.DataFrame(rows, columns=["task", "backbone", "strategy", "primary_metric", "n", "mean", "sd",
                                      "sem", "ci_low", "ci_high"])
    failed = results.loc[results["status"].astype(str) != "ok"]
    nf = failed.astype({c: str for c in ("task", "backbone", "strategy")}).groupby(
        ["task", "backbone", "strategy"]).size()
    out["n_failed"] = [int(nf.get((r.task, r.backbone, r.strategy), 0)) for r in out.itertuples()]
    out["confidence"] = confidence
    return out


# --------------------------------------------------------------------------------------------------
# paired comparisons
# --------------------------------------------------------------------------------------------------
def holm(pvalues: Iterable[float]) -> np.ndarray:
    """Holm step-down adjusted p-values; NaN entries stay NaN and are not counted in the family."""
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def tost_paired(diff: np.ndarray, margin: float) -> float:
    """Two one-sided paired t-tests (Schuirmann) for H0: |mean diff| >= margin; returns max of the two p.

    Same as ``pingouin.tost(x, y, bound=margin, paired=True)``. NaN if n < 2; with zero variance the
    answer is 0 if |mean| < margin else 1.
    """
    d = np.asarray(diff, dtype=float)
    n = d.size
    if n < 2:
        return math.nan
    mean = d.mean()
    se = d.std(ddof=1) / math.sqrt(n)
    if se == 0:
        return 0.0 if abs(mean) < margin else 1.0
    p_lower = st.t.sf((mean + margin) / se, n - 1)   # H0: mean <= -margin
    p_upper = st.t.cdf((mean - margin) / se, n - 1)  # H0: mean >= +margin
    return float(max(p_lower, p_upper))


def _wilcoxon(d: np.ndarray, alpha: float) -> tuple[float, float, str]:
    nz = int(np.count_nonzero(d))
    if nz == 0:
        return math.nan, math.nan, "wilcoxon: all differences are zero"
    if nz < 2:
        return math.nan, math.nan, f"wilcoxon: too few non-zero differences ({nz})"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = st.wilcoxon(d)
        except ValueError as e:  # pragma: no cover - scipy edge cases
            return math.nan, math.nan, f"wilcoxon: {e}"
    note = ""
    p_min = 2.0 / 2**nz  # smallest attainable two-sided exact p with nz non-zero differences
    if p_min > alpha:
        note = f"wilcoxon: with {nz} non-zero differences the smallest attainable p is {p_min:.3g}"
    return float(r.statistic), float(r.pvalue), note


_COMPARISON_COLUMNS = [
    "task", "backbone", "primary_metric", "strategy_a", "strategy_b", "family", "n", "seeds", "mean_a",
    "mean_b", "mean_diff", "sd_diff", "se_diff", "ci_low", "ci_high", "t", "dof", "p", "p_holm",
    "significant", "cohen_dz", "bf10", "margin", "tost_p", "equivalent", "wilcoxon_stat", "wilcoxon_p",
    "note",
]


def paired_comparisons(
    results: pd.DataFrame,
    margin: float = 0.01,
    reference: str | None = "typhoon",
    confidence: float = 0.95,
    alpha: float = 0.05,
    on_invalid: str = "raise",
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
      paper's design the reference family is its twelve comparisons; ``significant`` = ``p_holm < alpha``
    - ``cohen_dz`` = mean_diff / sd_diff; ``bf10``: JZS Bayes factor (pingouin, r = 0.707)
    - ``tost_p``, ``equivalent``: TOST with bounds ``±margin``; equivalent = ``tost_p < alpha``
    - ``wilcoxon_stat``, ``wilcoxon_p``: Wilcoxon signed-rank (scipy); NaN with a note when undefined
    - ``note``: why anything is NaN or to be read with care

    Errors (``ValueError``): missing columns; a seed present for one strategy and not the other; fewer
    than 2 paired seeds. With ``on_invalid="skip"`` these do not raise: unpaired seeds are dropped (and
    named in ``note``) and comparisons with < 2 pairs get NaN statistics and a note -- for small
    profiles (one seed, a failed run) where a notebook should say why a test is skipped.
    """
    if on_invalid not in ("raise", "skip"):
        raise ValueError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    if not (margin > 0):
        raise ValueError(f"margin must be > 0, got {margin}")
    df = ok_runs(results)
    rows: list[dict] = []
    for (task, backbone), g in df.groupby(GROUP_KEYS, sort=False):
        wide = g.pivot(index="seed", columns="strategy", values="primary_value")
        order = _strategy_order(g["strategy"], reference)
        metric = _metric_of(g)
        for a, b in combinations(order, 2):
            pair = wide[[a, b]]
            notes: list[str] = []
            unpaired = pair.index[pair.isna().any(axis=1)].tolist()
            if unpaired:
                msg = (f"{task}/{backbone}: seed(s) {unpaired} present for only one of "
                       f"{a!r} and {b!r} (missing pairs)")
                if on_invalid == "raise":
                    raise ValueError(msg)
                notes.append(f"unpaired seed(s) {unpaired} dropped")
            pair = pair.dropna()
            n = len(pair)
            row = dict(task=task, backbone=backbone, primary_metric=metric, strategy_a=a, strategy_b=b,
                       family=_FAMILY_REF if reference in (a, b) else _FAMILY_OTHER, n=n,
                       seeds=" ".join(str(s) for s in pair.index.tolist()), margin=margin)
            if n < 2:
                msg = f"{task}/{backbone}: {a!r} vs {b!r} has {n} paired seed(s); need >= 2"
                if on_invalid == "raise":
                    raise ValueError(msg)
                notes.append(f"skipped: {n} paired seed(s), a paired test needs >= 2")
                if n == 1:
                    row.update(mean_a=float(pair[a].iloc[0]), mean_b=float(pair[b].iloc[0]),
                               mean_diff=float(pair[a].iloc[0] - pair[b].iloc[0]))
                row["note"] = "; ".join(notes)
                rows.append(row)
                continue
            row.update(_paired_stats(pair[a].to_numpy(float), pair[b].to_numpy(float), margin,
                                     confidence, alpha, notes))
            row["note"] = "; ".join(notes)
            rows.append(row)
    out = pd.DataFrame(rows)
    out = out.reindex(columns=_COMPARISON_COLUMNS)
    for fam in (_FAMILY_REF, _FAMILY_OTHER):
        m = out["family"] == fam
        if m.any():
            out.loc[m, "p_holm"] = holm(out.loc[m, "p"])
    out["significant"] = (out["p_holm"] < alpha).astype(bool)
    out["equivalent"] = (out["tost_p"] < alpha).astype(bool)
    out["n"] = out["n"].astype("Int64")
    out["dof"] = out["dof"].astype(float)
    out["note"] = out["note"].fillna("").astype(str)
    out.attrs.update(margin=margin, reference=reference, alpha=alpha, confidence=confidence)
    return out


def _paired_stats(x: np.ndarray, y: np.ndarray, margin: float, confidence: float, alpha: float,
                  notes: list[str]) -> dict:
    d = x - y
    n = d.size
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    dof = n - 1
    if sd == 0:
        notes.append("differences have zero variance: t, p, d_z, BF10 undefined")
        t = p = dz = bf10 = math.nan
        lo = hi = mean
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tt = pg.ttest(x, y, paired=True, confidence=confidence)
        t = float(tt["T"].iloc[0])
        p = float(tt["p_val"].iloc[0])
        dof = int(tt["dof"].iloc[0])
        dz = mean / sd
        # pingouin's table rounds BF10 to a string; recompute it unrounded from the same t and n.
        bf10 = float(pg.bayesfactor_ttest(t, n, paired=True))
        lo, hi = _t_ci(mean, se, dof, confidence)  # pingouin's CI95 column is rounded to 2 decimals
    w_stat, w_p, w_note = _wilcoxon(d, alpha)
    if w_note:
        notes.append(w_note)
    return dict(mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=mean, sd_diff=sd, se_diff=se,
                ci_low=lo, ci_high=hi, t=t, dof=dof, p=p, cohen_dz=dz, bf10=bf10,
                tost_p=tost_paired(d, margin), wilcoxon_stat=w_stat, wilcoxon_p=w_p)


# --------------------------------------------------------------------------------------------------
# power
# --------------------------------------------------------------------------------------------------
def _n_for_power(d: float, power: float, alpha: float) -> float:
    """Smallest integer n (pairs) giving ``power`` for a two-sided paired t-test at effect d_z = d."""
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
            return math.nan
    return float(max(2, math.ceil(n - 1e-9)))


def seeds_needed(comparisons: pd.DataFrame, power: float = 0.8, alpha: float = 0.05,
                 margin: float | None = None) -> pd.DataFrame:
    """Seeds (pairs) needed for ``power`` in a two-sided paired t-test at level ``alpha``.

    - ``n_observed``: at the observed effect ``d_z = cohen_dz`` (inf when d_z = 0);
    - ``n_margin``: to detect a true difference equal to the margin, ``d = margin / sd_diff`` with the
      observed sd of the differences (``margin`` defaults to the comparison's ``margin`` column).

    (Uses ``pingouin.power_ttest(contrast="paired")``; rounded up to an integer, at least 2.)
    """
    _require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "n", "cohen_dz",
                                   "sd_diff"], what="comparisons")
    if not (0 < power < 1) or not (0 < alpha < 1):
        raise ValueError(f"power and alpha must be in (0, 1), got power={power}, alpha={alpha}")
    out = comparisons[["task", "backbone", "strategy_a", "strategy_b", "n"]].copy()
    if margin is None:
        if "margin" not in comparisons.columns:
            raise ValueError("comparisons has no 'margin' column; pass margin=")
        marg = comparisons["margin"].astype(float)
    else:
        marg = pd.Series(float(margin), index=comparisons.index)
    dz = comparisons["cohen_dz"].astype(float)
    sd = comparisons["sd_diff"].astype(float)
    d_margin = np.where(sd > 0, marg / sd.where(sd > 0), np.nan)
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
            rows.append(dict(task=task, backbone=backbone, strategy=strategy, primary_metric=_metric_of(g),
                             k=k, n=len(v), expected_max=expected_max(v, k), extrapolated=k > len(v)))
    return pd.DataFrame(rows)


def degenerate_rate(results: pd.DataFrame, tol: float = 1e-6) -> pd.DataFrame:
    """Share of runs whose dev metric is at or below the majority-class level (Mosbach et al., 2021).

    A run is degenerate when ``primary_value <= majority_value + tol`` (``tol`` absorbs float noise;
    raise it to also count runs that are barely above the majority baseline). Columns: task, backbone,
    strategy, n (ok runs), n_degenerate, rate, n_failed (runs whose status is not ok, not in n).
    """
    _require_columns(results, ["majority_value"])
    df = ok_runs(results, extra_columns=["majority_value"])
    maj = pd.to_numeric(df["majority_value"], errors="coerce")
    if maj.isna().any():
        rows = df.loc[maj.isna(), ["task", "backbone", "strategy", "seed"]].to_dict("records")
        raise ValueError(f"majority_value missing for runs {rows}")
    df["degenerate"] = df["primary_value"] <= maj + tol
    failed = results.loc[results["status"].astype(str) != "ok"].astype(
        {c: str for c in ("task", "backbone", "strategy")}).groupby(["task", "backbone", "strategy"]).size()
    rows = []
    for (task, backbone, strategy), g in df.groupby(["task", "backbone", "strategy"], sort=False):
        nd = int(g["degenerate"].sum())
        rows.append(dict(task=task, backbone=backbone, strategy=strategy, n=len(g), n_degenerate=nd,
                         rate=nd / len(g), majority_value=float(pd.to_numeric(g["majority_value"]).mean()),
                         n_failed=int(failed.get((task, backbone, strategy), 0))))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# conclusion
# --------------------------------------------------------------------------------------------------
def _label(r) -> str:
    return f"{r.task}/{r.backbone} {r.strategy_a} vs {r.strategy_b}"


def conclusion(comparisons: pd.DataFrame, alpha: float | None = None) -> str:
    """One paragraph stating what the comparisons support, built from the numbers in the table.

    Uses the ``vs_reference`` family when present (else all comparisons).
    """
    _require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "family", "p", "p_holm",
                                   "mean_diff", "ci_low", "ci_high", "tost_p", "margin"],
                     what="comparisons")
    alpha = comparisons.attrs.get("alpha", 0.05) if alpha is None else alpha
    if comparisons.empty:
        return "No comparisons could be made (fewer than two strategies in every task/backbone)."
    fam = comparisons[comparisons["family"] == _FAMILY_REF]
    scope = "against the reference strategy"
    if fam.empty:
        fam = comparisons
        scope = "between strategies (the reference strategy is absent)"
    tested = fam[np.isfinite(fam["p"].astype(float))]
    skipped = fam[~np.isfinite(fam["p"].astype(float))]
    margin = float(fam["margin"].iloc[0])
    parts = []
    if tested.empty:
        parts.append(f"None of the {len(fam)} comparisons {scope} could be tested "
                     "(each needs at least two paired seeds with non-constant differences).")
        return " ".join(parts)
    sig = tested[tested["p_holm"] < alpha]
    unadj = tested[tested["p"] < alpha]
    ci0 = tested[(tested["ci_low"] <= 0) & (tested["ci_high"] >= 0)]
    eq = tested[tested["tost_p"] < alpha]
    parts.append(f"{len(tested)} paired comparison(s) {scope} were tested.")
    if sig.empty:
        parts.append(f"None is significant after Holm correction (alpha = {alpha:g}; "
                     f"{len(unadj)} had unadjusted p < {alpha:g}; smallest Holm p = "
                     f"{tested['p_holm'].min():.3g}).")
    else:
        items = ", ".join(f"{_label(r)} (diff {r.mean_diff:+.4f}, Holm p = {r.p_holm:.3g})"
                          for r in sig.itertuples())
        parts.append(f"{len(sig)} significant after Holm correction (alpha = {alpha:g}): {items}.")
    parts.append(f"{len(ci0)} of {len(tested)} 95% CIs of the mean difference contain 0.")
    if eq.empty:
        parts.append(f"TOST shows equivalence within ±{margin:g} for none of them, so the data cannot "
                     f"rule out differences of that size (absence of evidence is not evidence of absence).")
    elif len(eq) == len(tested):
        parts.append(f"TOST shows equivalence within ±{margin:g} for all {len(tested)}.")
    else:
        items = ", ".join(_label(r) for r in eq.itertuples())
        parts.append(f"TOST shows equivalence within ±{margin:g} for {len(eq)} of {len(tested)}: {items}; "
                     "the others are inconclusive at that margin.")
    if not skipped.empty:
        parts.append(f"{len(skipped)} comparison(s) were skipped: "
                     + "; ".join(f"{_label(r)} ({r.note})" for r in skipped.itertuples()
                                 if hasattr(r, "note")) + ".")
    return " ".join(parts)


def skipped(comparisons: pd.DataFrame) -> list[str]:
    """One line per comparison that could not be tested (or dropped seeds), saying why."""
    _require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "p", "note"],
                     what="comparisons")
    out = []
    for r in comparisons.itertuples():
        if not np.isfinite(r.p) or "dropped" in r.note:
            out.append(f"{_label(r)}: {r.note or 'not tested'}")
    return out


# --------------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------------
def _to_markdown(df: pd.DataFrame) -> str:
    try:
        return df.to_markdown(index=False, floatfmt=".4g") + "\n"
    except ImportError:  # tabulate missing: minimal pipe table
        def fmt(x):
            return f"{x:.4g}" if isinstance(x, float) else str(x)
        head = "| " + " | ".join(map(str, df.columns)) + " |"
        sep = "|" + "|".join("---" for _ in df.columns) + "|"
        body = ["| " + " | ".join(fmt(x) for x in row) + " |" for row in df.itertuples(index=False)]
        return "\n".join([head, sep, *body]) + "\n"


def _to_latex(df: pd.DataFrame) -> str:
    return df.to_latex(index=False, float_format="%.4g", na_rep="--", escape=True)


def write_tables(tables: Mapping[str, pd.DataFrame], out_dir: str | os.PathLike) -> dict[str, list[Path]]:
    """Write each table as ``<name>.csv``, ``<name>.md`` and ``<name>.tex`` under ``out_dir``.

    Each file is written to a temporary file in the same directory and then ``os.replace``-d, so
    readers never see a half-written table. Returns ``{name: [csv, md, tex]}``.
    """
    out_dir = Path(out_dir)
    written: dict[str, list[Path]] = {}
    for name, df in tables.items():
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"table {name!r} is not a DataFrame ({type(df).__name__})")
        if not name or os.sep in name or name.startswith("."):
            raise ValueError(f"bad table name {name!r}")
        paths = [out_dir / f"{name}.csv", out_dir / f"{name}.md", out_dir / f"{name}.tex"]
        atomic_write_text(paths[0], df.to_csv(index=False))
        atomic_write_text(paths[1], _to_markdown(df))
        atomic_write_text(paths[2], _to_latex(df))
        written[name] = paths
    return written
