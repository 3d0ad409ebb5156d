"""The tests one paired comparison uses: Holm's correction, TOST equivalence, the Wilcoxon signed-rank
test, almost stochastic order (epsilon_min) and bootstrap intervals of a mean difference."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import numpy as np
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

# Metric values live in [0, 1]; differences whose sd is below this are float rounding of one constant
# difference (e.g. accuracies that differ by the same count of examples on every seed), not spread.
ZERO_SD = 1e-12


ASO_TAU = 0.2  # the usual epsilon_min threshold for "A is better" (Ulmer et al., 2022)


# --------------------------------------------------------------------------------------------------
# descriptive
# --------------------------------------------------------------------------------------------------
def t_ci(mean: float, se: float, dof: float, confidence: float) -> tuple[float, float]:
    if not (dof >= 1) or not np.isfinite(se):
        return (math.nan, math.nan)
    h = st.t.ppf(0.5 + confidence / 2.0, dof) * se
    return (mean - h, mean + h)


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


# A result of "no significant difference" is stated with the power the test had: that of a two-sided paired
# t-test at alpha (before any multiplicity correction, which only lowers it) for a medium standardized paired
# effect, Cohen's dz 0.5. Below POWER_TARGET, "not significant" was likely whatever the truth, and says little.
NULL_POWER_DZ = 0.5


POWER_TARGET = 0.8


def paired_t_power(n: int, dz: float = NULL_POWER_DZ, alpha: float = 0.05) -> float:
    """The power of a two-sided paired t-test with ``n`` pairs at a standardized effect ``dz`` (statsmodels'
    ``TTestPower``); NaN below 2 pairs."""
    if not n >= 2:
        return math.nan
    from statsmodels.stats.power import TTestPower

    return float(TTestPower().power(effect_size=dz, nobs=int(n), alpha=alpha, alternative="two-sided"))


def null_power_text(n: int, dz: float = NULL_POWER_DZ, alpha: float = 0.05) -> str:
    """'a power of 0.08 (paired t, 3 seeds, dz 0.5)': what a non-significant result at ``n`` seeds could see."""
    return f"a power of {paired_t_power(n, dz, alpha):.2f} (paired t, {int(n)} seeds, dz {dz:g})"


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
    if not sd > ZERO_SD:
        return math.nan
    se = sd / math.sqrt(n)
    p_lower = st.t.sf((mean + margin) / se, n - 1)   # H0: mean <= -margin
    p_upper = st.t.cdf((mean - margin) / se, n - 1)  # H0: mean >= +margin
    return float(max(p_lower, p_upper))


def wilcoxon(d: np.ndarray, alpha: float) -> tuple[float, float, str]:
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


def check_bootstrap_method(method: str, name: str) -> None:
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
    check_bootstrap_method(method, "method")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = st.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                           method=method, rng=np.random.default_rng(seed))
    note = "; ".join(f"bootstrap: {w.message}" for w in caught)
    return float(res.confidence_interval.low), float(res.confidence_interval.high), note
