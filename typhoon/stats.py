"""Statistics over the results table (``<out>/results.csv``, see docs/CONTRACTS.md).

Tidy DataFrames in, tidy DataFrames out; one function per statistical question:

- :func:`summarize` -- per (task, backbone, strategy): seeds, mean, sd, t-based CI of the mean.
- :func:`paired_comparisons` -- paired-by-seed comparisons of every pair of strategies within each
  (task, backbone): mean difference with t and bootstrap CIs, paired t (pingouin), Cohen's d_z, BF10,
  Holm-corrected p over the family of comparisons involving the reference strategy, TOST equivalence,
  Wilcoxon, almost stochastic order both ways, and a verdict ("cannot be tested" when the differences
  do not vary or there are < 2 pairs -- never equivalent, never significant).
- :func:`aso_epsilon_min` -- almost stochastic order (Dror et al., 2019), the numbers of ``deepsig.aso``.
- :func:`bootstrap_mean_ci` -- bootstrap CI of the mean paired difference (``scipy.stats.bootstrap``).
- :func:`paired_differences` -- the paired-by-seed difference of any per-run column (a loss, say): mean,
  t CI, p and how many seeds it is positive in; light (no bootstrap, no ASO), for the claims.
- :func:`comparison_table` -- the comparisons as a compact, display-ready table (for notebook 20).
- :func:`seeds_needed` -- seeds for a given power at the observed difference and at the smallest
  difference that matters, both from the measured sd of the paired differences.
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
    "aso_epsilon_min",
    "bootstrap_mean_ci",
    "paired_differences",
    "holm_family",
    "comparison_table",
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
# Metric values live in [0, 1]; differences whose sd is below this are float rounding of one constant
# difference (e.g. accuracies that differ by the same count of examples on every seed), not spread.
_ZERO_SD = 1e-12
UNTESTABLE = "cannot be tested"
ASO_TAU = 0.2  # the usual epsilon_min threshold for "A is better" (Ulmer et al., 2022)


# --------------------------------------------------------------------------------------------------
# input handling
# --------------------------------------------------------------------------------------------------
def _require_columns(df: pd.DataFrame, columns: Iterable[str], what: str = "results") -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} is missing column(s) {missing}; has {list(df.columns)}")


def load_results(path: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Read ``results.csv`` and check it has the columns the statistics need and, when its folder
    (``out_dir``, default the file's own) holds run records, one row per record (:func:`check_against_records`):
    a truncated or stale table is refused with a ValueError naming the file, never summarised."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"results table not found: {path}")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a readable results table: {err}") from None
    _require_columns(df, _RESULT_COLUMNS, what=str(path))
    check_against_records(df, Path(out_dir) if out_dir is not None else path.parent, path)
    return df


def check_against_records(results: pd.DataFrame, out_dir: Path, path: str | os.PathLike = "results.csv") -> None:
    """ValueError naming ``path`` when its rows and the run records under ``out_dir/runs`` disagree: a record
    without a row, or an ok row without a record. A folder with no records (a copied table) is not checked."""
    found = sorted(Path(out_dir).glob("runs/*/*/*/seed*/metrics.json"))
    if not found:
        return
    if "record_path" not in results.columns:
        raise ValueError(f"{path} has no record_path column, so its rows cannot be matched with the records in "
                         f"{out_dir}/runs; has {list(results.columns)}")
    on_disk = {p.parent.relative_to(out_dir).as_posix() for p in found}
    listed = set(results["record_path"].dropna().astype(str))
    ok = set(results.loc[results["status"].astype(str) == "ok", "record_path"].dropna().astype(str))
    unlisted, missing = sorted(on_disk - listed), sorted(ok - on_disk)
    if unlisted or missing:
        parts = ([f"{len(unlisted)} record(s) have no row (e.g. {unlisted[0]})"] if unlisted else []) + \
                ([f"{len(missing)} ok row(s) have no record (e.g. {missing[0]})"] if missing else [])
        raise ValueError(f"{path} does not match the run records beside it ({len(results)} rows, {len(on_disk)} "
                         f"records): {'; '.join(parts)}. A truncated or stale table: rebuild it with "
                         "`python -m typhoon reproduce --profile <profile> --out <folder>` (finished records are kept)")


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

    Same as ``pingouin.tost(x, y, bound=margin, paired=True)``. NaN if n < 2 or if the differences do
    not vary (sd below float rounding): the t statistics are then undefined, and a constant difference
    seen on a few seeds is no evidence that the seed-to-seed spread is small.
    """
    d = np.asarray(diff, dtype=float)
    n = d.size
    if n < 2:
        return math.nan
    mean = d.mean()
    sd = d.std(ddof=1)
    if not sd > _ZERO_SD:
        return math.nan
    se = sd / math.sqrt(n)
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


def _empirical_quantiles(sorted_scores: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """deepsig's empirical quantile function: the ceil(n p)-th smallest score (1-based, clipped to 1..n).

    ``sorted_scores`` (..., n) is sorted along its last axis; the answer has shape (..., *probs.shape).
    """
    n = sorted_scores.shape[-1]
    index = np.clip(np.ceil(n * probs).astype(np.int64) - 1, 0, n - 1)
    return np.take(sorted_scores, index, axis=-1)


def _violation_ratio(quantiles_a: np.ndarray, quantiles_b: np.ndarray, dt: float) -> np.ndarray:
    """Share of the squared Wasserstein-2 distance where A's quantile function lies below B's.

    Reductions run over the last axis (the grid t = dt, 2 dt, ... < 1). As in deepsig the violation
    integral leaves out the first grid point while the distance keeps it, and two identical
    distributions (distance 0) get 0.5.
    """
    diff = quantiles_b - quantiles_a
    squared_distance = np.sum(diff**2 * dt, axis=-1)
    violation = np.sum(np.where(quantiles_a >= quantiles_b, 0.0, diff)[..., 1:] ** 2 * dt, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(squared_distance == 0, 0.5, violation / squared_distance)


def aso_epsilon_min(scores_a: Iterable[float], scores_b: Iterable[float], confidence: float = 0.95,
                    iterations: int = 1000, dt: float = 0.005, seed: int = 0) -> float:
    """Almost stochastic order (Dror et al., 2019): epsilon_min for "A is better than B".

    epsilon_min is an upper confidence bound (at ``confidence``) on the violation ratio: the share of
    the distance between the two score distributions (squared Wasserstein-2, over quantiles) where A's
    quantile function lies *below* B's, i.e. where A fails to be better. 0 means A stochastically
    dominates B outright; epsilon_min < 0.5 means A *almost* stochastically dominates B, and the usual
    threshold for calling A better is epsilon_min < tau = 0.2 (:data:`ASO_TAU`). epsilon_min >= 0.5 is
    no evidence that A is better -- look at ``aso_epsilon_min(scores_b, scores_a)`` for the other way.
    Higher scores count as better. The two samples are compared as distributions: the test ignores
    any pairing by seed, and with 3-5 seeds per side epsilon_min stays high unless they barely overlap.

    The numbers are those of ``deepsig.aso(scores_a, scores_b, confidence_level=confidence,
    num_bootstrap_iterations=iterations, dt=dt, seed=seed)`` (deepsig 1.2.8), checked in the tests,
    computed vectorized over the bootstrap iterations -- about 200x faster than deepsig, which
    evaluates quantiles one grid point at a time (benchmarks/bench_seed_stats.py: 5 v 5 scores, 1000
    iterations, 42-65 ms against 8.7-16 s on a loaded 2-core Xeon) -- and without touching numpy's
    global random state (deepsig reseeds it).
    Bootstrap iteration i (1-based) draws its uniforms from a RandomState seeded with ``seed + i``, first
    len(A) of them to resample A, then len(B) to resample B, exactly as deepsig does. No
    multiple-comparison correction is applied (deepsig's ``num_comparisons`` would be Bonferroni).
    """
    a = np.asarray(list(scores_a), dtype=float)
    b = np.asarray(list(scores_b), dtype=float)
    for name, v in (("scores_a", a), ("scores_b", b)):
        if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
            raise ValueError(f"{name} must be a non-empty 1-D sequence of finite numbers, got {v!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if int(iterations) != iterations or iterations < 1:
        raise ValueError(f"iterations must be a positive integer, got {iterations}")
    if not 0 < dt < 0.5:
        raise ValueError(f"dt must be in (0, 0.5), got {dt}")
    if int(seed) != seed or not 0 <= seed <= 2**32 - 1 - iterations:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1 - iterations], got {seed}")
    iterations, seed = int(iterations), int(seed)
    grid = np.arange(dt, 1, dt)
    sorted_a, sorted_b = np.sort(a), np.sort(b)
    observed = _violation_ratio(_empirical_quantiles(sorted_a, grid), _empirical_quantiles(sorted_b, grid), dt)
    # Iteration i reseeds a private RandomState with seed + i, as deepsig reseeds the global one, so
    # the numbers match deepsig's; the loop only draws, all arithmetic below is over whole arrays.
    uniforms_a = np.empty((iterations, a.size))
    uniforms_b = np.empty((iterations, b.size))
    rs = np.random.RandomState()
    for i in range(iterations):
        rs.seed(seed + i + 1)
        uniforms_a[i] = rs.uniform(0, 1, a.size)
        uniforms_b[i] = rs.uniform(0, 1, b.size)
    resampled_a = np.sort(_empirical_quantiles(sorted_a, uniforms_a), axis=-1)
    resampled_b = np.sort(_empirical_quantiles(sorted_b, uniforms_b), axis=-1)
    bootstrapped = _violation_ratio(_empirical_quantiles(resampled_a, grid),
                                    _empirical_quantiles(resampled_b, grid), dt)
    const = np.sqrt(a.size * b.size / (a.size + b.size))
    sigma_hat = np.std(const * (bootstrapped - observed))
    return float(np.clip(observed - (1 / const) * sigma_hat * st.norm.ppf(1 - confidence), 0, 1))


_BOOTSTRAP_METHODS = ("percentile", "BCa", "basic")


def _check_bootstrap_method(method: str, name: str) -> None:
    if method not in _BOOTSTRAP_METHODS:
        raise ValueError(f"{name} must be one of {_BOOTSTRAP_METHODS}, got {method!r}")


def bootstrap_mean_ci(diff: Iterable[float], confidence: float = 0.95, method: str = "percentile",
                      n_resamples: int = 9999, seed: int = 0) -> tuple[float, float, str]:
    """Bootstrap ``confidence`` interval of the mean of ``diff``: ``scipy.stats.bootstrap((diff,),
    np.mean, method=method, rng=np.random.default_rng(seed))``. Returns (low, high, note).

    ``note`` carries scipy's warning, if any (e.g. degenerate resamples), else "". With few seeds read
    it with care: a percentile or BCa interval is made of resampled means, so it cannot reach past the
    observed differences and misses the true mean whenever all n differences fall on one side of it
    (probability 2 / 2^n: 25% at n = 3, 6% at n = 5). benchmarks/bench_seed_stats.py measured the
    coverage of nominal 95% intervals for normal differences at 3 / 5 / 10 pairs: percentile 0.75 /
    0.84 / 0.90, BCa 0.72 / 0.85 / 0.90, t interval 0.95 / 0.95 / 0.96. Percentile is the default:
    BCa's bias and skew corrections, estimated from 3-5 values, made it no better at 5 or 10 pairs and
    worse at 3.
    """
    d = np.asarray(list(diff), dtype=float)
    if d.ndim != 1 or d.size < 2 or not np.isfinite(d).all():
        raise ValueError(f"diff must be a 1-D sequence of >= 2 finite numbers, got {d!r}")
    _check_bootstrap_method(method, "method")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = st.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                           method=method, rng=np.random.default_rng(seed))
    note = "; ".join(f"bootstrap: {w.message}" for w in caught)
    return float(res.confidence_interval.low), float(res.confidence_interval.high), note


_COMPARISON_COLUMNS = [
    "task", "backbone", "primary_metric", "strategy_a", "strategy_b", "family", "n", "seeds", "mean_a",
    "mean_b", "mean_diff", "sd_diff", "se_diff", "ci_low", "ci_high", "t", "dof", "p", "p_holm",
    "significant", "cohen_dz", "bf10", "margin", "tost_p", "equivalent", "wilcoxon_stat", "wilcoxon_p",
    "testable", "boot_ci_low", "boot_ci_high", "aso_eps_ab", "aso_eps_ba", "verdict", "holm_family", "note",
]


def paired_comparisons(
    results: pd.DataFrame,
    margin: float = 0.01,
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
    - ``tost_p``, ``equivalent``: TOST with bounds ``±margin``; equivalent = ``tost_p < alpha``
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
    if on_invalid not in ("raise", "skip"):
        raise ValueError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    if not (margin > 0):
        raise ValueError(f"margin must be > 0, got {margin}")
    _check_bootstrap_method(bootstrap_method, "bootstrap_method")
    resampling = dict(bootstrap_method=bootstrap_method, bootstrap_resamples=bootstrap_resamples,
                      aso_iterations=aso_iterations, seed=seed)
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
                                     confidence, alpha, notes, **resampling))
            row["note"] = "; ".join(notes)
            rows.append(row)
    out = pd.DataFrame(rows)
    out = out.reindex(columns=_COMPARISON_COLUMNS)
    out["holm_family"] = ""
    for fam in (_FAMILY_REF, _FAMILY_OTHER):
        m = out["family"] == fam
        if m.any():
            out.loc[m, "p_holm"] = holm(out.loc[m, "p"])
            out.loc[m, "holm_family"] = holm_family(out.loc[m, "p"], _family_members(fam, reference))
    out["testable"] = out["testable"].eq(True)  # NaN (fewer than 2 pairs) -> False
    # NaN compares False, so untestable rows (p and tost_p NaN) are neither significant nor equivalent.
    out["significant"] = (out["p_holm"] < alpha).astype(bool)
    out["equivalent"] = (out["tost_p"] < alpha).astype(bool)
    out["verdict"] = [_verdict(*flags) for flags in zip(out["testable"], out["significant"],
                                                        out["equivalent"], strict=True)]
    out["n"] = out["n"].astype("Int64")
    out["dof"] = out["dof"].astype(float)
    out["note"] = out["note"].fillna("").astype(str)
    out.attrs.update(margin=margin, reference=reference, alpha=alpha, confidence=confidence, **resampling)
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
    d = x - y
    n = d.size
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    dof = n - 1
    testable = sd > _ZERO_SD
    boot_lo = boot_hi = eps_ab = eps_ba = math.nan
    if not testable:
        notes.append(f"{UNTESTABLE}: the differences have zero variance (all {mean:+.6g}): t, p, CIs, "
                     "d_z, BF10, TOST and ASO are undefined")
        t = p = dz = bf10 = lo = hi = math.nan
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
        boot_lo, boot_hi, boot_note = bootstrap_mean_ci(d, confidence, bootstrap_method, bootstrap_resamples,
                                                        seed)
        if boot_note:
            notes.append(boot_note)
        eps_ab = aso_epsilon_min(x, y, confidence, aso_iterations, seed=seed)
        eps_ba = aso_epsilon_min(y, x, confidence, aso_iterations, seed=seed)
    w_stat, w_p, w_note = _wilcoxon(d, alpha)
    if w_note:
        notes.append(w_note)
    return dict(mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=mean, sd_diff=sd, se_diff=se,
                ci_low=lo, ci_high=hi, t=t, dof=dof, p=p, cohen_dz=dz, bf10=bf10,
                tost_p=tost_paired(d, margin), wilcoxon_stat=w_stat, wilcoxon_p=w_p, testable=testable,
                boot_ci_low=boot_lo, boot_ci_high=boot_hi, aso_eps_ab=eps_ab, aso_eps_ba=eps_ba)


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
    _require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "n", "mean_diff",
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
    measured = sd > _ZERO_SD
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


def conclusion(comparisons: pd.DataFrame, alpha: float | None = None, tau: float = ASO_TAU) -> str:
    """One paragraph stating what the comparisons support, built from the numbers in the table.

    Uses the ``vs_reference`` family when present (else all comparisons). Comparisons that cannot be
    tested (``testable`` False) are named as such, apart from the rest: never counted as significant,
    equivalent or inconclusive. ASO calls a strategy better when its epsilon_min < ``tau``.
    """
    _require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "family", "p", "p_holm",
                                   "mean_diff", "ci_low", "ci_high", "tost_p", "margin", "testable",
                                   "boot_ci_low", "boot_ci_high", "aso_eps_ab", "aso_eps_ba", "note"],
                     what="comparisons")
    alpha = comparisons.attrs.get("alpha", 0.05) if alpha is None else alpha
    level = f"{100 * comparisons.attrs.get('confidence', 0.95):g}%"
    if comparisons.empty:
        return "No comparisons could be made (fewer than two strategies in every task/backbone)."
    fam = comparisons[comparisons["family"] == _FAMILY_REF]
    scope = "against the reference strategy"
    if fam.empty:
        fam = comparisons
        scope = "between strategies (the reference strategy is absent)"
    testable = fam["testable"].astype(bool)
    tested, untested = fam[testable], fam[~testable]
    margin = float(fam["margin"].iloc[0])
    parts = []
    if tested.empty:
        parts.append(f"None of the {len(fam)} comparisons {scope} could be tested (each needs at least "
                     "two paired seeds whose differences vary).")
    else:
        parts.extend(_tested_sentences(tested, scope, alpha, level, margin, tau))
    if not untested.empty:
        parts.append(f"{len(untested)} comparison(s) {UNTESTABLE}, so they are neither significant nor "
                     "equivalent: " + "; ".join(f"{_label(r)} ({r.note})" for r in untested.itertuples())
                     + ".")
    return " ".join(parts)


def _tested_sentences(tested: pd.DataFrame, scope: str, alpha: float, level: str, margin: float,
                      tau: float) -> list[str]:
    n = len(tested)
    sig = tested[tested["p_holm"] < alpha]
    unadj = tested[tested["p"] < alpha]
    ci0 = tested[(tested["ci_low"] <= 0) & (tested["ci_high"] >= 0)]
    boot0 = tested[(tested["boot_ci_low"] <= 0) & (tested["boot_ci_high"] >= 0)]
    eq = tested[tested["tost_p"] < alpha]
    parts = [f"{n} paired comparison(s) {scope} were tested."]
    if sig.empty:
        parts.append(f"None is significant after Holm correction (alpha = {alpha:g}; "
                     f"{len(unadj)} had unadjusted p < {alpha:g}; smallest Holm p = "
                     f"{tested['p_holm'].min():.3g}).")
    else:
        items = ", ".join(f"{_label(r)} (diff {r.mean_diff:+.4f}, Holm p = {r.p_holm:.3g})"
                          for r in sig.itertuples())
        parts.append(f"{len(sig)} significant after Holm correction (alpha = {alpha:g}): {items}.")
    parts.append(f"{len(ci0)} of {n} {level} t CIs of the mean difference contain 0 "
                 f"({len(boot0)} of the bootstrap CIs, which are too narrow with few seeds).")
    if eq.empty:
        parts.append(f"TOST shows equivalence within ±{margin:g} for none of them, so the data cannot "
                     f"rule out differences of that size (absence of evidence is not evidence of absence).")
    elif len(eq) == n:
        parts.append(f"TOST shows equivalence within ±{margin:g} for all {n}.")
    else:
        items = ", ".join(_label(r) for r in eq.itertuples())
        parts.append(f"TOST shows equivalence within ±{margin:g} for {len(eq)} of {n}: {items}; "
                     "the others are inconclusive at that margin.")
    a_better = tested[tested["aso_eps_ab"] < tau]
    b_better = tested[tested["aso_eps_ba"] < tau]
    if a_better.empty and b_better.empty:
        parts.append(f"Almost stochastic order (epsilon_min < {tau:g}, uncorrected) calls neither strategy "
                     f"better in any of the {n}.")
    else:
        items = [f"{r.strategy_a} over {r.strategy_b} in {r.task}/{r.backbone} "
                 f"(epsilon_min = {r.aso_eps_ab:.3g})" for r in a_better.itertuples()]
        items += [f"{r.strategy_b} over {r.strategy_a} in {r.task}/{r.backbone} "
                  f"(epsilon_min = {r.aso_eps_ba:.3g})" for r in b_better.itertuples()]
        parts.append(f"Almost stochastic order (epsilon_min < {tau:g}, uncorrected) calls one strategy "
                     f"better in {len(items)} of {n}: {', '.join(items)}.")
    return parts


def skipped(comparisons: pd.DataFrame) -> list[str]:
    """One line per comparison that could not be tested (or dropped seeds), saying why."""
    _require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "testable", "note"],
                     what="comparisons")
    out = []
    for r in comparisons.itertuples():
        if not r.testable or "dropped" in r.note:
            out.append(f"{_label(r)}: {r.note or 'not tested'}")
    return out


def comparison_table(comparisons: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """The comparisons from :func:`paired_comparisons` as a compact table to show (notebook 20).

    One row per comparison: the difference with its t and bootstrap CIs, Holm p, TOST p, ASO
    epsilon_min both ways and the verdict; numbers rounded to ``digits`` decimals, intervals as
    "[low, high]" text ("--" where undefined). The full table stays the one to write and compute from.
    """
    _require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "n", "mean_diff",
                                   "ci_low", "ci_high", "boot_ci_low", "boot_ci_high", "p_holm", "tost_p",
                                   "aso_eps_ab", "aso_eps_ba", "verdict"], what="comparisons")
    level = f"{100 * comparisons.attrs.get('confidence', 0.95):g}%"
    method = comparisons.attrs.get("bootstrap_method", "bootstrap")

    def interval(lows: pd.Series, highs: pd.Series) -> list[str]:
        return [f"[{lo:.{digits}f}, {hi:.{digits}f}]" if np.isfinite(lo) and np.isfinite(hi) else "--"
                for lo, hi in zip(lows.astype(float), highs.astype(float), strict=True)]

    c = comparisons
    return pd.DataFrame({
        "task": c["task"], "backbone": c["backbone"], "a": c["strategy_a"], "b": c["strategy_b"],
        "n": c["n"], "a - b": c["mean_diff"].astype(float).round(digits),
        f"{level} t CI": interval(c["ci_low"], c["ci_high"]),
        f"{level} {method} CI": interval(c["boot_ci_low"], c["boot_ci_high"]),
        "Holm p": c["p_holm"].astype(float).round(digits),
        "Holm family": c["holm_family"] if "holm_family" in c else "",
        "TOST p": c["tost_p"].astype(float).round(digits),
        "ASO eps a>b": c["aso_eps_ab"].astype(float).round(3),
        "ASO eps b>a": c["aso_eps_ba"].astype(float).round(3), "verdict": c["verdict"],
    }).reset_index(drop=True)


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
