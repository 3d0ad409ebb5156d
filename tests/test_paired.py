"""typhoon.analysis.paired (one question per function on a tidy frame of pairs) and the pieces of
typhoon.analysis.pairwise built on it (the pairs, Holm within families, the verdicts), each against an
independent reference: scipy.stats, statsmodels, pingouin, deepsig or a computation by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import integrate
from scipy import stats as st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from typhoon.analysis import paired, pairwise

TY = np.array([0.842, 0.861, 0.855, 0.849, 0.870])
RA = np.array([0.851, 0.858, 0.860, 0.838, 0.866])
WW = np.array([0.830, 0.845, 0.852, 0.841, 0.859])


def _pairs(*comparisons) -> pd.DataFrame:
    """A pairs frame: one row per (comparison, seed); each comparison is (name, a values, b values)."""
    return pd.DataFrame([dict(comparison=name, seed=seed, a=x, b=y) for name, xs, ys in comparisons
                         for seed, (x, y) in enumerate(zip(xs, ys, strict=True))])


@pytest.fixture
def pairs():
    return _pairs(("ty-ra", TY, RA), ("ty-ww", TY, WW), ("ra-ww", RA, WW))


def _runs(values: dict[str, np.ndarray], task="mrpc", backbone="bert") -> pd.DataFrame:
    return pd.DataFrame([dict(task=task, backbone=backbone, strategy=s, seed=seed, status="ok", primary_metric="f1",
                              primary_value=float(v)) for s, vals in values.items() for seed, v in enumerate(vals)])


# ------------------------------------------------------------------ the pairs
def test_pairs_are_every_pair_of_strategies_seed_by_seed_the_reference_first():
    runs = pd.concat([_runs({"random": RA, "typhoon": TY, "wwm": WW}), _runs({"random": RA, "typhoon": TY}, task="cola")])
    p = pairwise.paired_values(runs, reference="typhoon")
    assert list(p.columns) == pairwise.PAIR_COLUMNS
    order = p[["task", "strategy_a", "strategy_b"]].drop_duplicates().values.tolist()
    assert order == [["mrpc", "typhoon", "random"], ["mrpc", "typhoon", "wwm"], ["mrpc", "random", "wwm"],
                     ["cola", "typhoon", "random"]]
    one = p[(p.task == "mrpc") & (p.strategy_b == "wwm") & (p.strategy_a == "typhoon")]
    assert one["seed"].tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(one["a"], TY)
    np.testing.assert_array_equal(one["b"], WW)


def test_pairs_refuse_an_unpaired_seed_or_a_single_pair_unless_told_to_skip():
    runs = _runs({"typhoon": TY, "random": RA})
    gap = runs[~((runs.strategy == "random") & (runs.seed == 3))]
    with pytest.raises(ValueError, match=r"seed\(s\) \[3\] present for only one"):
        pairwise.paired_values(gap)
    with pytest.raises(ValueError, match="has 1 paired seed"):
        pairwise.paired_values(runs[runs.seed == 0])
    kept = pairwise.paired_values(gap, on_invalid="skip")
    assert kept["seed"].tolist() == [0, 1, 2, 3, 4] and np.isnan(kept.loc[kept.seed == 3, "b"]).all()
    assert paired.difference(kept)["n"].iloc[0] == 4  # the unpaired seed enters no statistic


# ------------------------------------------------------------------ the difference and its interval
def test_difference_and_its_t_interval_by_hand(pairs):
    got = paired.difference(pairs, confidence=0.9).set_index("comparison")
    for name, x, y in (("ty-ra", TY, RA), ("ty-ww", TY, WW), ("ra-ww", RA, WW)):
        d, n = x - y, len(x)
        sd = math.sqrt(sum((v - sum(d) / n) ** 2 for v in d) / (n - 1))
        lo, hi = st.t.interval(0.9, n - 1, loc=d.mean(), scale=st.sem(d))
        r = got.loc[name]
        assert (r.n, r.seeds) == (n, "0 1 2 3 4") and r.testable
        assert (r.mean_a, r.mean_b, r.mean_diff) == pytest.approx((x.mean(), y.mean(), sum(d) / n), abs=1e-15)
        assert (r.sd_diff, r.se_diff) == pytest.approx((sd, sd / math.sqrt(n)), rel=1e-12)
        assert (r.ci_low, r.ci_high) == pytest.approx((lo, hi), rel=1e-12)


def test_difference_with_one_pair_none_or_no_spread():
    p = _pairs(("one", [0.8], [0.7]), ("flat", TY, TY - 0.01)).astype({"b": float})
    p = pd.concat([p, pd.DataFrame([dict(comparison="none", seed=0, a=0.5, b=np.nan)])], ignore_index=True)
    got = paired.difference(p).set_index("comparison")
    assert got.loc["one", "mean_diff"] == pytest.approx(0.1) and np.isnan(got.loc["one", ["sd_diff", "ci_low"]]).all()
    assert got.loc["none", "n"] == 0 and np.isnan(got.loc["none", "mean_a"])
    assert got.loc["flat", "sd_diff"] < 1e-12 and np.isnan(got.loc["flat", "ci_low"])
    assert not got["testable"].any()
    assert list(got.index) == ["one", "flat", "none"]  # comparisons in order of first appearance


# ------------------------------------------------------------------ the paired t, d_z and BF10
def _jzs_bf10(t: float, n: int, r: float = 0.707) -> float:
    """Rouder et al. (2009), eq. 1, the Cauchy prior at scale r (0.707, pingouin's): BF10 of a paired t."""
    nu = n - 1

    def integrand(g: float) -> float:
        return ((1 + n * g * r**2) ** -0.5 * (1 + t**2 / ((1 + n * g * r**2) * nu)) ** (-(nu + 1) / 2)
                * (2 * math.pi) ** -0.5 * g**-1.5 * math.exp(-1 / (2 * g)))

    return integrate.quad(integrand, 0, np.inf)[0] / (1 + t**2 / nu) ** (-(nu + 1) / 2)


def test_t_test_matches_scipy_and_the_jzs_integral(pairs):
    got = paired.t_test(pairs).set_index("comparison")
    for name, x, y in (("ty-ra", TY, RA), ("ty-ww", TY, WW), ("ra-ww", RA, WW)):
        ref = st.ttest_1samp(x - y, 0.0)
        r = got.loc[name]
        assert (r.t, r.p, r.dof) == pytest.approx((ref.statistic, ref.pvalue, len(x) - 1), rel=1e-12)
        assert r.cohen_dz == pytest.approx((x - y).mean() / (x - y).std(ddof=1), rel=1e-12)
        assert r.bf10 == pytest.approx(_jzs_bf10(r.t, len(x)), rel=1e-6)


def test_t_test_is_undefined_without_spread():
    got = paired.t_test(_pairs(("flat", TY, TY), ("one", [0.8], [0.7]))).set_index("comparison")
    assert np.isnan(got[["t", "p", "cohen_dz", "bf10"]].to_numpy(float)).all()
    assert got.loc["flat", "dof"] == 4 and np.isnan(got.loc["one", "dof"])


# ------------------------------------------------------------------ TOST
@pytest.mark.parametrize("margin", [0.005, 0.01, 0.05])
def test_tost_is_two_one_sided_t_tests(pairs, margin):
    got = paired.tost(pairs, margin, alpha=0.05).set_index("comparison")
    for name, x, y in (("ty-ra", TY, RA), ("ty-ww", TY, WW), ("ra-ww", RA, WW)):
        d = x - y
        lower = st.ttest_1samp(d, -margin, alternative="greater").pvalue
        upper = st.ttest_1samp(d, margin, alternative="less").pvalue
        r = got.loc[name]
        assert r.tost_p == pytest.approx(max(lower, upper), rel=1e-12)
        assert r.tost_p == pytest.approx(float(pg.tost(x, y, bound=margin, paired=True)["pval"].iloc[0]), rel=1e-9)
        assert r.equivalent == (max(lower, upper) < 0.05) and r.margin == margin
    with pytest.raises(ValueError, match="margin"):
        paired.tost(pairs, 0)


def test_tost_takes_each_tasks_own_margin():
    # interleaved tasks: each comparison's margin is its own task's, whatever the order of the rows
    frame = pd.concat([_pairs(("ty-ra", TY, RA)).assign(task="cola"), _pairs(("ty-ra", TY, RA)).assign(task="mrpc"),
                       _pairs(("ty-ww", TY, WW)).assign(task="cola")], ignore_index=True)
    got = paired.tost(frame, {"mrpc": 0.01, "cola": 0.03})
    assert got[["task", "comparison", "margin"]].values.tolist() == [["cola", "ty-ra", 0.03], ["mrpc", "ty-ra", 0.01],
                                                                       ["cola", "ty-ww", 0.03]]
    for row, (x, y) in zip(got.itertuples(), ((TY, RA), (TY, RA), (TY, WW)), strict=True):
        ref = float(pg.tost(x, y, bound=row.margin, paired=True)["pval"].iloc[0])
        assert row.tost_p == pytest.approx(ref, rel=1e-9)
    with pytest.raises(ValueError, match="no equivalence margin for task 'cola'"):
        paired.tost(frame, {"mrpc": 0.01})
    with pytest.raises(ValueError, match="'task' label"):
        paired.tost(_pairs(("ty-ra", TY, RA)), {"mrpc": 0.01})


# ------------------------------------------------------------------ Wilcoxon
def test_wilcoxon_matches_scipy_and_says_when_it_cannot_reach_alpha(pairs):
    got = paired.wilcoxon(pairs).set_index("comparison")
    for name, x, y in (("ty-ra", TY, RA), ("ty-ww", TY, WW)):
        ref = st.wilcoxon(x - y)
        assert (got.loc[name, "wilcoxon_stat"], got.loc[name, "wilcoxon_p"]) == pytest.approx(
            (ref.statistic, ref.pvalue), rel=1e-12)
    # 5 non-zero differences: the smallest two-sided exact p is 2 / 2^5 = 0.0625 > 0.05
    assert "smallest attainable p is 0.0625" in got.loc["ty-ra", "note"]
    small = paired.wilcoxon(_pairs(("zero", TY, TY), ("one", [0.8], [0.7]))).set_index("comparison")
    assert "all differences are zero" in small.loc["zero", "note"] and "1 pair" in small.loc["one", "note"]
    assert np.isnan(small[["wilcoxon_stat", "wilcoxon_p"]].to_numpy(float)).all()


# ------------------------------------------------------------------ bootstrap and ASO
@pytest.mark.parametrize("method, seed", [("percentile", 0), ("BCa", 3)])
def test_bootstrap_ci_matches_scipy(pairs, method, seed):
    got = paired.bootstrap_ci(pairs, 0.9, method, resamples=999, seed=seed).set_index("comparison")
    for name, x, y in (("ty-ra", TY, RA), ("ra-ww", RA, WW)):
        ref = st.bootstrap((x - y,), np.mean, confidence_level=0.9, n_resamples=999, method=method,
                           rng=np.random.default_rng(seed)).confidence_interval
        assert (got.loc[name, "boot_ci_low"], got.loc[name, "boot_ci_high"]) == pytest.approx((ref.low, ref.high),
                                                                                              abs=1e-12)
    with pytest.raises(ValueError, match="method"):
        paired.bootstrap_ci(pairs, method="bca")


def test_stochastic_order_matches_deepsig_both_ways(pairs):
    import deepsig

    got = paired.stochastic_order(pairs, iterations=40, seed=2).set_index("comparison")
    for name, x, y in (("ty-ra", TY, RA), ("ty-ww", TY, WW)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ab = deepsig.aso(x, y, num_bootstrap_iterations=40, seed=2, num_jobs=1, show_progress=False)
            ba = deepsig.aso(y, x, num_bootstrap_iterations=40, seed=2, num_jobs=1, show_progress=False)
        assert (got.loc[name, "aso_eps_ab"], got.loc[name, "aso_eps_ba"]) == pytest.approx((ab, ba), abs=1e-12)
    flat = paired.stochastic_order(_pairs(("flat", TY, TY)), iterations=10)
    assert np.isnan(flat[["aso_eps_ab", "aso_eps_ba"]].to_numpy(float)).all()


# ------------------------------------------------------------------ power
def _noncentral_t_power(dz: float, n: int, alpha: float) -> float:
    crit = st.t.ppf(1 - alpha / 2, n - 1)
    nc = dz * math.sqrt(n)
    return st.nct.sf(crit, n - 1, nc) + st.nct.cdf(-crit, n - 1, nc)


@pytest.mark.parametrize("dz, alpha", [(0.5, 0.05), (1.0, 0.05), (2.0, 0.1)])
def test_power_matches_statsmodels_and_the_noncentral_t(dz, alpha):
    p = _pairs(("three", TY[:3], RA[:3]), ("five", TY, RA), ("one", [0.8], [0.7]))
    got = paired.power(p, dz=dz, alpha=alpha).set_index("comparison")
    for name, n in (("three", 3), ("five", 5)):
        ref = TTestPower().power(effect_size=dz, nobs=n, alpha=alpha, alternative="two-sided")
        assert got.loc[name, "power"] == pytest.approx(ref, rel=1e-6)
        assert got.loc[name, "power"] == pytest.approx(_noncentral_t_power(dz, n, alpha), rel=1e-6)
        assert got.loc[name, "n"] == n
    assert np.isnan(got.loc["one", "power"])
    # the figure issue 51 quotes: 3 seeds, d_z 0.5 -> a paired t finds it about 1 time in 12
    assert paired.power(_pairs(("x", TY[:3], RA[:3])), dz=0.5)["power"].iloc[0] == pytest.approx(0.0843, abs=5e-4)


# ------------------------------------------------------------------ Holm within families, verdicts
def test_holm_is_adjusted_within_each_family_as_statsmodels_does():
    tests = pd.DataFrame(dict(task=["mrpc"] * 3 + ["cola"] * 3,
                              strategy_a=["typhoon", "typhoon", "random"] * 2,
                              strategy_b=["random", "wwm", "wwm"] * 2,
                              p=[0.01, 0.04, 0.03, 0.002, np.nan, 0.5]))
    got = pairwise.holm_adjusted(tests, reference="typhoon")
    assert list(got.columns) == ["task", "strategy_a", "strategy_b", "family", "p_holm", "holm_family"]
    ref_rows, other_rows = [0, 1, 3], [2, 5]
    assert (got.loc[ref_rows, "family"] == "vs_reference").all() and (got.loc[other_rows, "family"] == "other").all()
    for rows in (ref_rows, other_rows):
        np.testing.assert_allclose(got.loc[rows, "p_holm"], multipletests(tests.loc[rows, "p"], method="holm")[1])
    # by hand, the reference family: sorted 0.002, 0.01, 0.04 times 3, 2, 1, made monotone
    np.testing.assert_allclose(got.loc[ref_rows, "p_holm"], [0.02, 0.04, 0.006])
    assert np.isnan(got.loc[4, "p_holm"]) and got.loc[4, "family"] == "vs_reference"
    assert got.loc[0, "holm_family"] == "Holm over the 3 comparisons of typhoon vs each other strategy, every task × backbone"
    assert got.loc[2, "holm_family"].startswith("Holm over the 2 comparisons of the pairs without typhoon")


def test_verdicts_from_holm_and_tost():
    tests = pd.DataFrame(dict(case=["diff", "equiv", "both", "neither", "untestable"],
                              testable=[True, True, True, True, False],
                              p_holm=[0.01, 0.5, 0.01, 0.5, np.nan], tost_p=[0.5, 0.01, 0.01, 0.5, np.nan]))
    got = pairwise.verdicts(tests, alpha=0.05).set_index("case")
    assert got["verdict"].to_dict() == dict(diff="different", equiv="equivalent", both="different, within margin",
                                            neither="inconclusive", untestable="cannot be tested")
    assert got["significant"].tolist() == [True, False, True, False, False]
    assert got["equivalent"].tolist() == [False, True, True, False, False]


# ------------------------------------------------------------------ the composition
def test_the_comparisons_table_is_the_focused_answers_side_by_side():
    runs = _runs({"typhoon": TY, "random": RA, "wwm": WW})
    table = pairwise.paired_comparisons(runs, margin=0.01, aso_iterations=30, bootstrap_resamples=199, seed=4)
    pairs = pairwise.paired_values(runs)
    keys = paired.labels(pairs)
    for answer in (paired.difference(pairs), paired.t_test(pairs), paired.tost(pairs, 0.01),
                   paired.wilcoxon(pairs).drop(columns="note"),
                   paired.bootstrap_ci(pairs, resamples=199, seed=4).drop(columns="note"),
                   paired.stochastic_order(pairs, iterations=30, seed=4)):
        for column in answer.columns.drop(keys):
            np.testing.assert_array_equal(table[column].to_numpy(), answer[column].to_numpy(), err_msg=column)
    assert len(table.columns) == 35
