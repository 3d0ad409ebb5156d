"""The group-sequential design (typhoon/analysis/sequential.py): its boundaries against published tables, its
analysis against plain t intervals, and -- the proof -- its error rates by simulation at the study's
seed counts and variances (the t approximation is checked, not assumed)."""

import numpy as np
import pytest
from scipy import stats as st

from typhoon.analysis import sequential as sq


def equally_spaced(k):
    return np.arange(1, k + 1) / k


# --------------------------------------------------------------------------------------------------
# Boundaries against published tables. Jennison & Turnbull (2000), "Group Sequential Methods with
# Applications to Clinical Trials": Table 2.1 (Pocock's C_P), 2.3 (O'Brien-Fleming's C_B), 2.7-2.9
# (maximum information R and E(N) relative to the fixed sample, as gsDesign's unit tests quote them,
# keaven/gsDesign inst/unitTests/runit.output.R), 7.2 (power-family spending, rho = 1, 2).


def test_pocock_and_obrien_fleming_constants_match_jennison_turnbull_tables_2_1_and_2_3():
    assert sq.constant_shape_boundaries(equally_spaced(5), 0.05, 0.5)[0] == pytest.approx(2.413, abs=5e-4)
    assert sq.constant_shape_boundaries(equally_spaced(5), 0.05, 0.0)[-1] == pytest.approx(2.040, abs=5e-4)
    # K = 4 O'Brien-Fleming, C_B * sqrt(4/k): 4.05, 2.86, 2.34, 2.02 (Anderson 2008, in gsDesign's tests)
    np.testing.assert_allclose(sq.constant_shape_boundaries(equally_spaced(4), 0.05, 0.0),
                               [4.05, 2.86, 2.34, 2.02], atol=5e-3)


@pytest.mark.parametrize("delta, k, power, ratio, expected", [
    (0.5, 4, 0.8, 1.202, [1.175, 1.088, 0.805, 0.522]),  # Table 2.7: Pocock, K = 4, beta = 0.2
    (0.0, 5, 0.8, 1.028, [1.021, None, None, None]),     # Table 2.8: O'Brien-Fleming, K = 5, beta = 0.2
    (0.1, 9, 0.9, 1.048, [None] * 4),                    # Table 2.9: Wang-Tsiatis Delta = 0.1, K = 9
])
def test_maximum_and_expected_information_match_jennison_turnbull_tables_2_7_to_2_9(delta, k, power, ratio, expected):
    bounds = sq.constant_shape_boundaries(equally_spaced(k), 0.05, delta)
    r, en = sq.max_information_ratio(bounds, equally_spaced(k), 0.05, power)
    assert r == pytest.approx(ratio, abs=6e-4)
    for got, want in zip(en, expected, strict=True):
        if want is not None:
            assert got == pytest.approx(want, abs=6e-4)
    if k == 9:
        assert bounds[-1] == pytest.approx(2.113, abs=5e-4)


@pytest.mark.parametrize("rho, k, ratio, expected", [
    (1.0, 3, 1.117, [1.099, 1.034, 0.812, 0.565]),
    (2.0, 10, 1.081, [1.066, 0.997, 0.762, 0.510]),
])
def test_spending_function_designs_match_jennison_turnbull_table_7_2(rho, k, ratio, expected):
    fractions = equally_spaced(k)
    bounds = sq.spending_boundaries(fractions, 0.05, "power", sides=2, rho=rho)
    r, en = sq.max_information_ratio(bounds, fractions, 0.05, 0.8)
    assert r == pytest.approx(ratio, abs=6e-4)
    np.testing.assert_allclose(en, expected, atol=6e-4)


def test_lan_demets_obrien_fleming_spending_k5():
    """Lan-DeMets O'Brien-Fleming-type z boundaries, 5 equally spaced looks, 0.025 per side: 4.877,
    3.357, 2.680, 2.290 (the figures the issue quotes; its fifth, 2.041, is 2.031 here, the value of
    the same recursion that reproduces every Jennison & Turnbull table above)."""
    one = sq.spending_boundaries(equally_spaced(5), 0.025, "obrien_fleming", sides=1)
    two = sq.spending_boundaries(equally_spaced(5), 0.05, "obrien_fleming", sides=2)
    np.testing.assert_allclose(one[:4], [4.877, 3.357, 2.680, 2.290], atol=6e-4)
    np.testing.assert_allclose(two, one, atol=1e-3)  # the two sides barely interact at these levels


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_spending_reaches_alpha_and_the_boundaries_spend_it(spending):
    fractions = np.array([3, 6, 10, 13, 16]) / 16
    cumulative = sq.spent(spending, 0.05, fractions)
    assert cumulative[-1] == pytest.approx(0.05) and np.all(np.diff(cumulative) > 0)
    bounds = sq.spending_boundaries(fractions, 0.05, spending, sides=2)
    table = sq.crossing_probabilities(-bounds, bounds, fractions)
    np.testing.assert_allclose(np.cumsum(table["p_upper"] + table["p_lower"]), 2 * sq.spent(spending, 0.025, fractions),
                               rtol=1e-6, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# The analysis


def test_a_single_look_is_the_plain_t_interval_and_tost():
    """A one-look design is the fixed-sample t test: its interval is scipy's t interval, its equivalence
    the TOST at the same level (an independent reference)."""
    rng = np.random.default_rng(3)
    d = rng.normal(0.002, 0.004, 12)
    design = sq.Design((12,), 0.05, 0.05)
    row = sq.analyse_look({"a - b": d}, design, 1, {"a - b": 0.01}).iloc[0]
    ci = st.ttest_1samp(d, 0.0).confidence_interval(0.95)
    tost = st.ttest_1samp(d, 0.0).confidence_interval(0.90)
    assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert (row.tost_low, row.tost_high) == pytest.approx((tost.low, tost.high), rel=1e-9)
    p_tost = max(st.ttest_1samp(d, -0.01, alternative="greater").pvalue, st.ttest_1samp(d, 0.01, alternative="less").pvalue)
    assert (row.verdict == "equivalent") == (p_tost < 0.05)


def test_history_stops_each_comparison_at_its_first_decision():
    design = sq.Design((3, 6, 10), 0.05, 0.05)
    rng = np.random.default_rng(0)
    tiny = rng.normal(0, 1e-5, 10)     # equivalent as soon as a look can say so
    large = 0.05 + rng.normal(0, 1e-3, 10)  # far outside the margin: different
    noisy = rng.normal(0.005, 0.02, 10)     # neither: undecided at the cap
    history = sq.analyse_history({"tiny": tiny, "large": large, "noisy": noisy}, design,
                                 {"tiny": 0.01, "large": 0.01, "noisy": 0.01})
    last = history.groupby("comparison").tail(1).set_index("comparison")
    assert last.loc["tiny", "verdict"] == "equivalent" and last.loc["large", "verdict"] == "different"
    assert last.loc["noisy", "verdict"] == "undecided at cap" and last.loc["noisy", "n_seeds"] == 10
    assert (history.groupby("comparison")["verdict"].apply(lambda v: (v[:-1] == "continue").all())).all()
    short = sq.analyse_history({"tiny": tiny[:5]}, design, {"tiny": 0.01})
    assert list(short["n_seeds"]) == [3]  # look 2 needs 6 seeds: not analysed yet


def test_bad_designs_are_refused():
    with pytest.raises(ValueError, match="looks"):
        sq.Design((6, 3), 0.05, 0.05)
    with pytest.raises(ValueError, match="spending"):
        sq.Design((3, 6), 0.05, 0.05, "linear")
    with pytest.raises(ValueError, match="needs 6"):
        sq.analyse_look({"a": [0.1, 0.2, 0.3]}, sq.Design((3, 6), 0.05, 0.05), 2, {"a": 0.01})


# --------------------------------------------------------------------------------------------------
# The proof: error rates by simulation, with the study's stopping rule, looks and variances
# (results/cpu + results/bottleneck: paired sd 0.0090 F1 on MRPC, 0.0164 MCC on CoLA; margins 0.01, 0.02)

STUDIES = 40_000
DECISIVE = sq.Design((3, 6, 10, 13, 16), 0.005, 0.005, "obrien_fleming")
MEASURED = [(0.0090, 0.01), (0.0164, 0.02)]


def allowed(alpha, studies=STUDIES):
    """The most errors a design whose true rate is alpha shows in ``studies`` with probability 0.999:
    more than this is evidence (p < 0.001) that the rate exceeds alpha."""
    return st.binom.ppf(0.999, studies, alpha) / studies


@pytest.mark.parametrize("design", [DECISIVE, sq.Design((3, 6, 10, 13, 16), 0.05, 0.05, "pocock")],
                         ids=["decisive", "pocock-alpha0.05"])
@pytest.mark.parametrize("sd, margin", MEASURED, ids=["mrpc", "cola"])
def test_false_different_and_false_equivalent_stay_within_alpha(design, sd, margin):
    null = sq.simulate_design(design, 0.0, sd, margin, STUDIES, seed=11)
    assert null["p_different"] <= allowed(design.alpha_different)
    for edge in (margin, -margin):
        at_margin = sq.simulate_design(design, edge, sd, margin, STUDIES, seed=12)
        assert at_margin["p_equivalent"] <= allowed(design.alpha_equivalent)


def test_the_simulation_detects_unadjusted_repeated_testing():
    """The same simulation with the fixed-sample t quantile at every look (no spending) exceeds alpha:
    the check above would catch a design that does not spend its error."""
    design = sq.Design((3, 6, 10, 13, 16), 0.05, 0.05)
    naive = sq.design_boundaries(design)
    dof = naive["n_seeds"] - 1
    naive["t_different"], naive["t_equivalent"] = st.t.isf(0.025, dof), st.t.isf(0.05, dof)
    result = sq.simulate_design(design, 0.0, 0.009, 0.01, STUDIES, seed=13, boundaries=naive)
    assert result["p_different"] > allowed(0.05)


def test_the_cap_decides_with_the_registered_power():
    for sd, margin in MEASURED:
        assert sq.simulate_design(DECISIVE, 0.0, sd, margin, 20_000, seed=1)["p_equivalent"] >= 0.8
        assert sq.simulate_design(DECISIVE, margin, sd, margin, 20_000, seed=2)["p_different"] >= 0.8
