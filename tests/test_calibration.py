"""Calibration of Typhoon's weights into probabilities: range, exact budget, monotonicity,
water-filling, hand-computed examples and the diagnostics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from typhoon.masking.calibration import (
    BudgetSolver,
    budget_moved,
    calibrate,
    calibrate_budget,
    kl_to_uniform,
    masked_distribution_kl,
    preference,
    spread,
)

METHODS = ["minmax", "rank", "softmax"]
FAST = settings(max_examples=25, deadline=None)


def random_case(seed: int, vocab: int = 300, unseen_frac: float = 0.3):
    """Heavy-tailed (Zipf-like) counts, some zero counts, weights with NaN for unseen types."""
    rng = np.random.default_rng(seed)
    counts = rng.zipf(1.3, size=vocab).clip(max=10_000)
    counts[rng.random(vocab) < 0.05] = 0
    weights = rng.standard_t(3, size=vocab)
    weights[rng.random(vocab) < unseen_frac] = np.nan
    return weights, counts


def budget_error(probs, counts, p):
    return abs((counts * probs).sum() - p * counts.sum()) / (p * counts.sum())


def brute_force(pref, counts, p, eps=0.0):
    """Reference: bisection on beta for sum f min(1, beta (b + eps)) = p F (slow but obviously right).

    With a tiny ``eps`` it also covers budgets beyond the types of positive preference: as eps -> 0
    those types reach 1 and the zero-preference ones share the rest evenly (pi = beta eps for all of them).
    """
    pref = np.asarray(pref, dtype=np.float64) + eps
    lo, hi = 0.0, 1.0
    while (counts * np.minimum(1, hi * pref)).sum() < p * counts.sum():
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (counts * np.minimum(1, mid * pref)).sum() < p * counts.sum() else (lo, mid)
    return np.minimum(1, hi * pref)


@pytest.mark.parametrize("method", METHODS)
@FAST
@given(seed=st.integers(0, 2**32 - 1), p=st.floats(0.01, 0.95), delta=st.floats(0.0, 1.0),
       tau=st.floats(0.2, 5.0))
def test_probabilities_valid_budget_exact_and_monotone(method, seed, p, delta, tau):
    weights, counts = random_case(seed)
    probs = calibrate(weights, counts, p, method=method, delta=delta, tau=tau)
    assert probs.shape == weights.shape and probs.dtype == np.float64
    assert ((probs >= 0) & (probs <= 1)).all()
    assert budget_error(probs, counts, p) < 1e-9
    seen = ~np.isnan(weights)
    order = np.argsort(weights[seen], kind="stable")
    assert (np.diff(probs[seen][order]) >= -1e-12).all()  # monotone (non-decreasing) in w
    pref = preference(weights, method, delta, tau)
    np.testing.assert_allclose(probs, brute_force(pref, counts, p), atol=1e-9)


@pytest.mark.parametrize("method", ["minmax", "rank"])
def test_water_filling_caps_at_one_and_keeps_the_budget(method):
    weights, counts = random_case(3, vocab=2000)
    pref = preference(weights, method, delta=1.0)
    p = 0.7
    uncapped = p * counts.sum() / (counts * pref).sum() * pref
    assert uncapped.max() > 1  # the scaled band would exceed 1 here
    probs = calibrate(weights, counts, p, method=method, delta=1.0)
    assert probs.max() == 1.0 and (probs == 1.0).sum() > 1
    assert budget_error(probs, counts, p) < 1e-9
    free = probs < 1
    ratio = probs[free & (pref > 0)] / pref[free & (pref > 0)]
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)  # one common beta below the cap


def test_hand_computed_minmax_example():
    weights = np.array([0.0, 1.0, 2.0, np.nan])  # z = 0, .5, 1; unseen -> band midpoint
    counts = np.array([1, 1, 1, 1])
    # band (delta .4) = .6, .8, 1.0, .8; sum 3.2; beta = .5 * 4 / 3.2 = .625
    np.testing.assert_allclose(calibrate(weights, counts, 0.5, delta=0.4), [0.375, 0.5, 0.625, 0.5])
    # delta 1: band 0, .5, 1, .5; p = .6 -> beta 1.2 would put the top type at 1.2: cap it,
    # then beta = (2.4 - 1) / (0 + .5 + .5) = 1.4
    np.testing.assert_allclose(calibrate(weights, counts, 0.6, delta=1.0), [0.0, 0.7, 1.0, 0.7])


def test_hand_computed_rank_and_softmax_examples():
    weights = np.array([10.0, 0.0, 1000.0, np.nan])
    counts = np.array([2, 1, 1, 0])
    # rank: quantiles .5, 0, 1 -> band .8, .6, 1.0 (unseen .8); sum f b = 1.6 + .6 + 1 = 3.2; beta = .5*4/3.2
    np.testing.assert_allclose(calibrate(weights, counts, 0.5, method="rank"), np.array([.8, .6, 1., .8]) * 0.625)
    # softmax: standardised w, pi proportional to exp(z / tau) below the cap
    probs = calibrate(weights, counts, 0.1, method="softmax", tau=2.0)
    w = weights[:3]
    z = (w - w.mean()) / w.std()
    np.testing.assert_allclose(probs[:3] / probs[0], np.exp((z - z[0]) / 2.0), rtol=1e-12)
    np.testing.assert_allclose(probs[3] / probs[0], np.exp((0 - z[0]) / 2.0), rtol=1e-12)  # unseen: z = 0


@pytest.mark.parametrize("method", METHODS)
def test_uniform_cases(method):
    weights, counts = random_case(0)
    if method != "softmax":  # delta = 0 collapses the band
        np.testing.assert_allclose(calibrate(weights, counts, 0.15, method=method, delta=0.0), 0.15, rtol=1e-12)
    nothing_seen = np.full(len(counts), np.nan)
    np.testing.assert_allclose(calibrate(nothing_seen, counts, 0.15, method=method), 0.15, rtol=1e-12)
    flat = np.where(np.isnan(weights), np.nan, 3.0)
    np.testing.assert_allclose(calibrate(flat, counts, 0.15, method=method), 0.15, rtol=1e-12)


def test_budget_solver_reuses_one_sort_for_every_rate():
    weights, counts = random_case(5, vocab=1000)
    pref = preference(weights, "minmax", delta=0.8)
    solver = BudgetSolver(pref, counts)
    for p in (0.05, 0.15, 0.5, 0.9, 0.99):
        probs = solver.solve(p)
        assert budget_error(probs, counts, p) < 1e-9
        np.testing.assert_allclose(probs, brute_force(pref, counts, p), atol=1e-9)
        np.testing.assert_array_equal(probs, calibrate_budget(pref, counts, p))


def test_budget_edges_and_errors():
    pref, counts = np.array([1.0, 0.5]), np.array([3, 1])
    assert (calibrate_budget(pref, counts, 1.0) == 1).all() and (calibrate_budget(pref, counts, 0.0) == 0).all()
    with pytest.raises(ValueError, match="calibration must be one of"):
        calibrate(pref, counts, 0.1, method="zscore")
    with pytest.raises(ValueError, match=r"a masking rate must lie in \[0, 1\]"):
        calibrate(pref, counts, 1.5)


def test_a_budget_beyond_the_positive_preferences_spills_evenly_onto_the_rest():
    # 1 token of a type with preference 1, 9 of a type with preference 0 (delta = 1's least salient type).
    # p = 0.5 asks for 5 masked tokens: the first type gives at most 1, the other 9 share the 4 left.
    np.testing.assert_allclose(calibrate_budget(np.array([1.0, 0.0]), np.array([1, 9]), 0.5), [1.0, 4 / 9])
    # within what the positive preferences can hold, nothing changes: zero preference, zero probability
    np.testing.assert_allclose(calibrate_budget(np.array([1.0, 0.0]), np.array([1, 9]), 0.05), [0.5, 0.0])
    # all preferences zero: uniform masking
    np.testing.assert_allclose(calibrate_budget(np.zeros(3), np.array([1, 2, 3]), 0.3), 0.3, rtol=1e-12)


@FAST
@given(seed=st.integers(0, 2**32 - 1), p=st.floats(0.0, 1.0), zero_share=st.floats(0.0, 0.9))
def test_every_budget_in_0_1_is_met_whatever_the_preferences(seed, p, zero_share):
    """Mask schedules ask for any rate in [0, 1]; with delta = 1 some types have preference 0."""
    rng = np.random.default_rng(seed)
    _, counts = random_case(seed)
    pref = rng.random(len(counts)) * (rng.random(len(counts)) >= zero_share)
    counts[0], pref[0] = 1000, 0.5  # at least one counted type with a positive preference
    probs = BudgetSolver(pref, counts).solve(p)
    assert ((probs >= 0) & (probs <= 1)).all()
    assert abs((counts * probs).sum() - p * counts.sum()) <= 1e-9 * counts.sum()
    order = np.argsort(pref, kind="stable")
    assert (np.diff(probs[order]) >= -1e-12).all()  # monotone in the preference
    tied = probs[pref == 0]
    assert tied.size == 0 or tied.min() == tied.max()  # tied types share one probability
    if 0 < p < 1:
        np.testing.assert_allclose(probs, brute_force(pref, counts, p, eps=1e-13), atol=1e-7)


def test_delta_one_calibration_serves_per_row_rates_up_to_one():
    weights, counts = random_case(7, vocab=500)
    counts[np.nanargmin(weights)] = counts.sum()  # the least salient type is frequent: it gets b = 0
    pref = preference(weights, "minmax", delta=1.0)
    solver = BudgetSolver(pref, counts)
    positive_share = counts[pref > 0].sum() / counts.sum()
    rates = np.array([0.0, 0.15, positive_share, (1 + positive_share) / 2, 0.999, 1.0])
    assert 0.4 < positive_share < 0.6 and rates[3] > positive_share  # the last rates used to be "infeasible"
    k, beta, floor = solver.coefficients(rates)
    for rate, k_i, beta_i, floor_i in zip(rates, k, beta, floor, strict=True):
        from_coefficients = np.where(solver.rank < k_i, 1.0, np.maximum(np.minimum(beta_i * pref, 1.0), floor_i))
        np.testing.assert_array_equal(from_coefficients, solver.solve(rate))
        if rate > 0:
            assert budget_error(from_coefficients, counts, rate) < 1e-9
    assert (floor[:3] == 0).all() and (floor[3:5] > 0).all()


def test_any_number_of_budgets_costs_one_sort(monkeypatch):
    """Recalibration runs after every training step at BERT's vocabulary size, and a mask schedule asks
    for a budget per row: one sort per preference vector, none per budget, and still exact."""
    weights, counts = random_case(1, vocab=30522)
    pref = preference(weights, "minmax", delta=1.0)
    sorts, argsort = [], np.argsort
    monkeypatch.setattr(np, "argsort", lambda *args, **kwargs: sorts.append(1) or argsort(*args, **kwargs))
    solver = BudgetSolver(pref, counts)
    assert len(sorts) == 1
    solver.coefficients(np.linspace(0.0, 1.0, 1001))
    probs = {p: solver.solve(p) for p in (0.05, 0.15, 0.5, 0.9)}
    assert len(sorts) == 1
    monkeypatch.undo()
    for p, pi in probs.items():
        np.testing.assert_allclose(pi, brute_force(pref, counts, p), atol=1e-9)


# --------------------------------------------------------------------------------------------------
# Diagnostics


def test_diagnostics_are_zero_for_uniform_masking():
    _, counts = random_case(2)
    probs = np.full(len(counts), 0.15)
    assert kl_to_uniform(probs, counts, 0.15) == pytest.approx(0.0, abs=1e-15)
    assert masked_distribution_kl(probs, counts) == pytest.approx(0.0, abs=1e-12)
    assert budget_moved(probs, counts) == pytest.approx(0.0, abs=1e-12)
    assert spread(probs, None) == {"min": 0.15, "max": 0.15, "ratio": 1.0}


def test_diagnostics_hand_computed():
    probs, counts, p = np.array([0.1, 0.2]), np.array([1, 1]), 0.15

    def bern_kl(a, b):
        return a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))

    assert kl_to_uniform(probs, counts, p) == pytest.approx((bern_kl(.1, p) + bern_kl(.2, p)) / 2, rel=1e-12)
    q, u = np.array([1 / 3, 2 / 3]), np.array([0.5, 0.5])
    assert masked_distribution_kl(probs, counts) == pytest.approx((q * np.log(q / u)).sum(), rel=1e-12)
    assert budget_moved(probs, counts) == pytest.approx(1 / 6, rel=1e-12)
    assert spread(probs, np.array([True, True])) == pytest.approx({"min": 0.1, "max": 0.2, "ratio": 2.0})
    assert spread(np.array([0.0, 0.5]), np.array([True, True]))["ratio"] == float("inf")
    # ``seen`` restricts the sums
    assert kl_to_uniform(probs, counts, p, seen=np.array([True, False])) == pytest.approx(bern_kl(.1, p))


@FAST
@given(seed=st.integers(0, 2**32 - 1))
def test_diagnostics_ranges(seed):
    weights, counts = random_case(seed)
    probs = calibrate(weights, counts, 0.15, delta=0.4)
    assert kl_to_uniform(probs, counts, 0.15) >= 0
    assert masked_distribution_kl(probs, counts) >= 0
    assert 0 <= budget_moved(probs, counts) <= 1
    s = spread(probs, ~np.isnan(weights))
    assert 0 < s["min"] <= s["max"] <= 1 and s["ratio"] <= 1 / 0.6 + 1e-9  # the band's max/min is 1/(1-delta)
