"""Tests for typhoon.analysis.pairwise: numbers against scipy/statsmodels/pingouin and hand computations."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as st

from typhoon.analysis import pairwise, run_summary, seed_budget, significance, stats_tables, verdict_text

# Fixed data: one task/backbone, three strategies, five seeds.
TY = np.array([0.842, 0.861, 0.855, 0.849, 0.870])
RA = np.array([0.851, 0.858, 0.860, 0.838, 0.866])
WW = np.array([0.830, 0.845, 0.852, 0.841, 0.859])


def _frame(values: dict[str, np.ndarray], task="mrpc", backbone="bert", majority=0.8122, metric="f1"):
    rows = []
    for strategy, vals in values.items():
        for seed, v in enumerate(vals):
            rows.append(dict(task=task, backbone=backbone, strategy=strategy, seed=seed, profile="test",
                             status="ok", primary_metric=metric, primary_value=float(v),
                             majority_value=majority, record_path=f"runs/{task}/{backbone}/{strategy}/seed{seed}"))
    return pd.DataFrame(rows)


@pytest.fixture
def results():
    return _frame({"typhoon": TY, "random": RA, "wwm": WW})


@pytest.fixture
def grid():
    """2 tasks x 3 backbones x 3 strategies x 5 seeds (the paper's design), reproducible noise."""
    rng = np.random.default_rng(7)
    frames = []
    for task in ("mrpc", "cola"):
        for bb in ("bert", "roberta", "distilbert"):
            base = rng.normal(0.8, 0.02, size=5)
            frames.append(_frame({s: base + rng.normal(0, 0.01, 5) for s in ("typhoon", "random", "wwm")},
                                 task=task, backbone=bb))
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------ summarize
def test_summarize_matches_hand(results):
    s = run_summary.summarize(results)
    assert list(s["strategy"]) == ["typhoon", "random", "wwm"]
    row = s.set_index("strategy").loc["typhoon"]
    n = len(TY)
    mean, sd = TY.mean(), TY.std(ddof=1)
    h = st.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    assert row["n"] == n
    assert row["mean"] == pytest.approx(mean, abs=1e-12)
    assert row["sd"] == pytest.approx(sd, abs=1e-12)
    assert row["ci_low"] == pytest.approx(mean - h, abs=1e-12)
    assert row["ci_high"] == pytest.approx(mean + h, abs=1e-12)
    lo, hi = st.t.interval(0.95, n - 1, loc=mean, scale=st.sem(TY))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)


def test_summarize_ignores_failed_and_single_seed(results):
    r = results.copy()
    r.loc[(r.strategy == "wwm") & (r.seed > 0), "status"] = "failed"
    r.loc[(r.strategy == "wwm") & (r.seed > 0), "primary_value"] = np.nan
    s = run_summary.summarize(r).set_index("strategy")
    assert s.loc["wwm", "n"] == 1 and s.loc["wwm", "n_failed"] == 4
    assert math.isnan(s.loc["wwm", "sd"]) and math.isnan(s.loc["wwm", "ci_low"])
    assert s.loc["wwm", "mean"] == pytest.approx(WW[0])


# ------------------------------------------------------------------ paired comparisons
def test_paired_t_matches_scipy_and_hand(results):
    c = pairwise.paired_comparisons(results, margin=0.01)
    assert len(c) == 3
    pairs = {"typhoon": TY, "random": RA, "wwm": WW}
    for r in c.itertuples():
        x, y = pairs[r.strategy_a], pairs[r.strategy_b]
        ref = st.ttest_rel(x, y)
        ci = ref.confidence_interval(0.95)
        assert r.t == pytest.approx(ref.statistic, abs=1e-12)
        assert r.p == pytest.approx(ref.pvalue, abs=1e-12)
        assert r.dof == ref.df
        assert r.ci_low == pytest.approx(ci.low, abs=1e-12)
        assert r.ci_high == pytest.approx(ci.high, abs=1e-12)
        # by hand
        d = x - y
        n = len(d)
        se = d.std(ddof=1) / math.sqrt(n)
        t = d.mean() / se
        assert r.t == pytest.approx(t, abs=1e-12)
        assert r.p == pytest.approx(2 * st.t.sf(abs(t), n - 1), abs=1e-12)
        assert r.mean_diff == pytest.approx(d.mean(), abs=1e-12)
        assert r.ci_low == pytest.approx(d.mean() - st.t.ppf(0.975, n - 1) * se, abs=1e-12)
        assert r.cohen_dz == pytest.approx(d.mean() / d.std(ddof=1), abs=1e-12)
        assert r.bf10 == pytest.approx(pg.bayesfactor_ttest(t, n, paired=True), rel=1e-9)
        assert r.bf10 == pytest.approx(float(pg.ttest(x, y, paired=True)["BF10"].iloc[0]), rel=5e-3)
        w = st.wilcoxon(d)
        assert r.wilcoxon_p == pytest.approx(w.pvalue, abs=1e-12)


def test_reference_is_strategy_a_and_families(results):
    c = pairwise.paired_comparisons(results, reference="wwm")
    ref = c[c.family == "vs_reference"]
    assert set(ref.strategy_a) == {"wwm"} and len(ref) == 2
    other = c[c.family == "other"]
    assert len(other) == 1 and {other.strategy_a.iloc[0], other.strategy_b.iloc[0]} == {"typhoon", "random"}


def holm_by_hand(p) -> np.ndarray:
    """Holm's step-down adjustment written out: sorted ascending, the i-th smallest p (from 0) times m - i,
    a running maximum, capped at 1. (The package wraps statsmodels' multipletests, so statsmodels is no
    independent reference here.)"""
    p = np.asarray(p, dtype=float)
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(np.argsort(p, kind="stable")):
        running = max(running, (m - rank) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted


def test_holm_by_hand_on_four_p_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(1 x 0.04, 0.06)
    np.testing.assert_allclose(significance.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02], atol=1e-15)
    np.testing.assert_allclose(significance.holm([0.5, 0.4, 0.9]), [1.0, 1.0, 1.0])  # capped at 1
    # a NaN p is outside the family: the other two are adjusted over m = 2
    np.testing.assert_allclose(significance.holm([0.01, np.nan, 0.04]), [0.02, np.nan, 0.04], atol=1e-15)


def test_holm_is_adjusted_within_each_family(grid):
    c = pairwise.paired_comparisons(grid)
    fam = c[c.family == "vs_reference"]
    assert len(fam) == 12  # 2 tasks x 3 backbones x 2 other strategies
    np.testing.assert_allclose(fam["p_holm"].to_numpy(), holm_by_hand(fam["p"]), atol=1e-12)
    # the 'other' family is corrected separately, over its own members only
    oth = c[c.family == "other"]
    np.testing.assert_allclose(oth["p_holm"].to_numpy(), holm_by_hand(oth["p"]), atol=1e-12)
    assert (c["significant"] == (c["p_holm"] < 0.05)).all()


def test_each_holm_p_says_its_family(grid):
    c = pairwise.paired_comparisons(grid, aso_iterations=20, bootstrap_resamples=199)
    ref, other = c[c.family == "vs_reference"], c[c.family == "other"]
    assert (ref["holm_family"] == "Holm over the 12 comparisons of typhoon vs each other strategy, "
                                  "every task × backbone").all()
    assert (other["holm_family"] == "Holm over the 6 comparisons of the pairs without typhoon, "
                                    "every task × backbone").all()
    assert stats_tables.comparison_notes(c)[:2] == [ref["holm_family"].iloc[0], other["holm_family"].iloc[0]]


def test_paired_differences_of_any_column_match_scipy():
    x, y = TY, RA
    frame = _frame({"typhoon": x, "random": y}).rename(columns={"primary_value": "loss"})
    got = pairwise.paired_differences(frame, "loss", "typhoon", "random").iloc[0]
    d = x - y
    lo, hi = st.t.interval(0.95, d.size - 1, loc=d.mean(), scale=d.std(ddof=1) / math.sqrt(d.size))
    assert (got["n"], got["n_positive"]) == (5, int((d > 0).sum()))
    assert (got["mean_diff"], got["ci_low"], got["ci_high"]) == pytest.approx((d.mean(), lo, hi))
    assert got["p"] == pytest.approx(st.ttest_rel(x, y).pvalue)
    same = pairwise.paired_differences(_frame({"a": x, "b": x - 0.01}), "primary_value", "a", "b").iloc[0]
    assert np.isnan(same["ci_low"]) and np.isnan(same["p"])  # a constant difference: no spread, no interval


def test_holm_helper_nan_and_small():
    out = significance.holm([0.01, np.nan, 0.04, 0.03])
    assert math.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3]], [0.03, 0.06, 0.06])


def test_tost_matches_pingouin_and_hand(results):
    c = pairwise.paired_comparisons(results, margin=0.01)
    pairs = {"typhoon": TY, "random": RA, "wwm": WW}
    for r in c.itertuples():
        x, y = pairs[r.strategy_a], pairs[r.strategy_b]
        ref = pg.tost(x, y, bound=0.01, paired=True)["pval"].iloc[0]
        assert r.tost_p == pytest.approx(ref, abs=1e-10)
        # hand: equivalent iff the 90% CI lies inside the margin
        d = x - y
        lo, hi = st.t.interval(0.90, len(d) - 1, loc=d.mean(), scale=d.std(ddof=1) / math.sqrt(len(d)))
        assert r.equivalent == (lo > -0.01 and hi < 0.01)


def test_tost_wide_margin_equivalent_and_constant_diffs_untestable():
    assert significance.tost_paired(np.array([0.001, -0.002, 0.0005, 0.001]), margin=0.5) < 1e-4
    # a constant difference has no spread to test against: undefined, not "equivalent" (p = 0)
    assert math.isnan(significance.tost_paired(np.full(4, 0.003), margin=0.01))
    assert math.isnan(significance.tost_paired(np.full(4, 0.03), margin=0.01))
    assert math.isnan(significance.tost_paired(np.array([0.1]), margin=0.01))


def _untestable_row_checks(row):
    assert not row["testable"] and row["verdict"] == "cannot be tested"
    assert not row["equivalent"] and not row["significant"]
    for col in ("t", "p", "p_holm", "tost_p", "ci_low", "ci_high", "boot_ci_low", "boot_ci_high",
                "aso_eps_ab", "aso_eps_ba", "cohen_dz", "bf10"):
        assert math.isnan(row[col]), col
    assert "cannot be tested" in row["note"] and "zero variance" in row["note"]


def test_zero_differences_cannot_be_tested():
    r = _frame({"typhoon": TY, "random": TY.copy()})
    c = pairwise.paired_comparisons(r)
    row = c.iloc[0]
    assert row["mean_diff"] == 0 and math.isnan(row["wilcoxon_p"])
    assert "all differences are zero" in row["note"]
    _untestable_row_checks(row)
    text = verdict_text.conclusion(c)
    assert "could be tested" in text and "cannot be tested" in text and "equivalence" not in text


def test_constant_shift_up_to_rounding_cannot_be_tested():
    # MRPC dev accuracies (408 examples) 2 examples apart on every seed: the float differences vary
    # by rounding only, which must not pass for seed-to-seed spread
    correct = np.array([344, 349, 351, 346, 340])
    shifted, base = correct / 408, (correct - 2) / 408
    assert 0 < np.std(shifted - base, ddof=1) < 1e-15  # not exactly zero, so the tolerance is exercised
    c = pairwise.paired_comparisons(_frame({"typhoon": shifted, "random": base}))
    _untestable_row_checks(c.iloc[0])
    assert c.iloc[0]["mean_diff"] == pytest.approx(2 / 408)
    s = seed_budget.seeds_needed(c)
    assert math.isnan(s["n_observed"].iloc[0]) and math.isnan(s["n_margin"].iloc[0])


def test_wilcoxon_small_n_note():
    r = _frame({"typhoon": TY[:3], "random": RA[:3]})
    row = pairwise.paired_comparisons(r).iloc[0]
    assert np.isfinite(row["wilcoxon_p"]) and "smallest attainable p" in row["note"]


def test_errors_single_seed_missing_pair_missing_column(results):
    with pytest.raises(ValueError, match="1 paired seed"):
        pairwise.paired_comparisons(_frame({"typhoon": TY[:1], "random": RA[:1]}))
    r = results[~((results.strategy == "random") & (results.seed == 3))]
    with pytest.raises(ValueError, match=r"seed\(s\) \[3\].*missing pairs"):
        pairwise.paired_comparisons(r)
    # a failed run also breaks the pairing
    r2 = results.copy()
    r2.loc[(r2.strategy == "wwm") & (r2.seed == 2), "status"] = "failed"
    with pytest.raises(ValueError, match="missing pairs"):
        pairwise.paired_comparisons(r2)
    with pytest.raises(ValueError, match="primary_value"):
        pairwise.paired_comparisons(results.drop(columns="primary_value"))
    with pytest.raises(ValueError, match="majority_value"):
        run_summary.degenerate_rate(results.drop(columns="majority_value"))
    with pytest.raises(ValueError, match="duplicated"):
        run_summary.summarize(pd.concat([results, results.iloc[:1]]))
    with pytest.raises(ValueError, match="margin"):
        pairwise.paired_comparisons(results, margin=0)


def test_each_task_is_tested_at_its_registered_margin(grid):
    """The TOST margin is decided once, per task, in the decisive design ([decisive.design.margin]: MRPC 0.01 F1,
    CoLA 0.02 MCC), and every comparison takes it unless given another; a task without a margin is refused."""
    from typhoon.profiles import get_profile, task_margins

    assert task_margins() == {"mrpc": 0.01, "cola": 0.02} == get_profile("decisive").design["margin"]
    assert task_margins("cpu") == task_margins() == task_margins("schedules")
    c = pairwise.paired_comparisons(grid, aso_iterations=20, bootstrap_resamples=99)
    assert dict(zip(c["task"], c["margin"], strict=False)) == {"mrpc": 0.01, "cola": 0.02}
    cola = c[c["task"] == "cola"].iloc[0]
    d = grid[(grid.task == "cola") & (grid.backbone == cola.backbone)].pivot(index="seed", columns="strategy",
                                                                             values="primary_value")
    assert cola["tost_p"] == pytest.approx(significance.tost_paired((d[cola.strategy_a] - d[cola.strategy_b]).to_numpy(), 0.02))
    one = pairwise.paired_comparisons(grid, margin=0.01, aso_iterations=20, bootstrap_resamples=99)
    assert set(one["margin"]) == {0.01}
    assert run_summary.margin_text(c) == "±0.01 on mrpc, ±0.02 on cola" and run_summary.margin_text(one) == "±0.01"
    with pytest.raises(ValueError, match="no equivalence margin for task 'cola'"):
        pairwise.paired_comparisons(grid, margin={"mrpc": 0.01})
    assert run_summary.task_margin(0.05, "sst2") == 0.05


def test_skip_mode_reports_why(results):
    one = _frame({"typhoon": TY[:1], "random": RA[:1]})
    c = pairwise.paired_comparisons(one, on_invalid="skip")
    assert len(c) == 1 and math.isnan(c["p"].iloc[0]) and "skipped" in c["note"].iloc[0]
    assert not c["significant"].iloc[0] and not c["equivalent"].iloc[0]
    assert not c["testable"].iloc[0] and c["verdict"].iloc[0] == "cannot be tested"
    r = results[~((results.strategy == "random") & (results.seed == 3))]
    c = pairwise.paired_comparisons(r, on_invalid="skip")
    row = c[(c.strategy_a == "typhoon") & (c.strategy_b == "random")].iloc[0]
    assert row["n"] == 4 and "dropped" in row["note"]
    assert row["t"] == pytest.approx(st.ttest_rel(np.delete(TY, 3), np.delete(RA, 3)).statistic, abs=1e-12)
    text = verdict_text.conclusion(pairwise.paired_comparisons(one, on_invalid="skip"))
    assert "could be tested" in text


def test_conclusion_is_computed(grid):
    c = pairwise.paired_comparisons(grid, margin=0.01)
    text = verdict_text.conclusion(c)
    n_sig = int(c.loc[c.family == "vs_reference", "significant"].sum())
    assert "12 paired comparison(s)" in text
    assert ("None is significant" in text) == (n_sig == 0)
    # with a huge margin everything is equivalent; with a real shift the comparison becomes significant
    assert "for all 12" in verdict_text.conclusion(pairwise.paired_comparisons(grid, margin=1.0))
    shifted = grid.copy()
    shifted.loc[shifted.strategy == "typhoon", "primary_value"] += 0.2
    assert "significant after Holm" in verdict_text.conclusion(pairwise.paired_comparisons(shifted))


# ------------------------------------------------------------------ ASO (against deepsig) and bootstrap (against scipy)
@pytest.fixture(scope="module")
def deepsig():
    import deepsig  # imported here: it takes seconds and only these tests need it

    return deepsig


def _deepsig_aso(deepsig, a, b, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deepsig warns on zero Wasserstein distance (ratio := 0.5)
        return deepsig.aso(np.asarray(a), np.asarray(b), num_jobs=1, show_progress=False, **kwargs)


@pytest.mark.parametrize("a, b", [
    (TY, RA), (RA, TY), (TY + 0.02, RA), (RA, TY + 0.02),
    (TY, RA[:3]),  # unequal sizes
    ([0.8, 0.8, 0.81, 0.82], [0.8, 0.79, 0.8, 0.8]),  # ties
    (TY, TY[::-1]),  # the same distribution: observed ratio 0/0 -> 0.5
])
def test_aso_matches_deepsig(deepsig, a, b):
    # deepsig's own defaults for confidence_level and dt are ours
    ours = significance.aso_epsilon_min(a, b, iterations=100, seed=7)
    assert ours == pytest.approx(_deepsig_aso(deepsig, a, b, num_bootstrap_iterations=100, seed=7), abs=1e-12)
    ours = significance.aso_epsilon_min(a, b, confidence=0.99, iterations=60, dt=0.01, seed=1234)
    ref = _deepsig_aso(deepsig, a, b, confidence_level=0.99, num_bootstrap_iterations=60, dt=0.01, seed=1234)
    assert ours == pytest.approx(ref, abs=1e-12)


def test_aso_direction_determinism_and_global_rng(deepsig):
    better = significance.aso_epsilon_min(TY + 0.02, RA, iterations=200)
    worse = significance.aso_epsilon_min(RA, TY + 0.02, iterations=200)
    assert better < significance.ASO_TAU and worse > 0.5  # "A better than B" is the first argument
    assert better == significance.aso_epsilon_min(TY + 0.02, RA, iterations=200)
    assert significance.aso_epsilon_min(TY, RA, seed=1, iterations=200) != significance.aso_epsilon_min(TY, RA, seed=2, iterations=200)
    np.random.seed(123)
    state = np.random.get_state()
    significance.aso_epsilon_min(TY, RA, iterations=20)
    after = np.random.get_state()
    assert all(np.array_equal(x, y) for x, y in zip(state, after, strict=True))  # deepsig would reseed it
    for bad in (dict(scores_a=[]), dict(scores_a=[0.1, np.nan]), dict(iterations=0), dict(confidence=1.0),
                dict(dt=0.7), dict(seed=-1)):
        kwargs = dict(scores_a=TY, scores_b=RA) | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            significance.aso_epsilon_min(**kwargs)


def test_table_aso_and_bootstrap_match_deepsig_and_scipy(deepsig, results):
    c = pairwise.paired_comparisons(results, aso_iterations=50, seed=3)
    pairs = {"typhoon": TY, "random": RA, "wwm": WW}
    for r in c.itertuples():
        x, y = pairs[r.strategy_a], pairs[r.strategy_b]
        assert r.aso_eps_ab == pytest.approx(_deepsig_aso(deepsig, x, y, num_bootstrap_iterations=50, seed=3),
                                             abs=1e-12)
        assert r.aso_eps_ba == pytest.approx(_deepsig_aso(deepsig, y, x, num_bootstrap_iterations=50, seed=3),
                                             abs=1e-12)
        ref = st.bootstrap((x - y,), np.mean, confidence_level=0.95, n_resamples=9999, method="percentile",
                           rng=np.random.default_rng(3)).confidence_interval
        assert (r.boot_ci_low, r.boot_ci_high) == pytest.approx((ref.low, ref.high), abs=1e-12)
        assert r.testable and r.boot_ci_low <= r.mean_diff <= r.boot_ci_high


@pytest.mark.parametrize("method, confidence, seed", [("BCa", 0.95, 0), ("percentile", 0.9, 5), ("basic", 0.99, 1)])
def test_bootstrap_ci_matches_scipy(method, confidence, seed):
    for d in (TY - RA, (TY - WW)[:3], np.array([0.01, -0.02])):
        lo, hi, note = significance.bootstrap_mean_ci(d, confidence, method, n_resamples=2000, seed=seed)
        ref = st.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=2000, method=method,
                           rng=np.random.default_rng(seed)).confidence_interval
        assert (lo, hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
        # a bootstrap interval never reaches past the observed differences (why it is too narrow at n = 3)
        assert d.min() - 1e-12 <= lo <= hi <= d.max() + 1e-12 or method == "basic"
    with pytest.raises(ValueError, match="method"):
        significance.bootstrap_mean_ci(TY - RA, method="bca")
    assert significance.bootstrap_mean_ci(TY - RA)[:2] == significance.bootstrap_mean_ci(TY - RA, 0.95, "percentile", 9999, 0)[:2]
    with pytest.raises(ValueError, match="2 finite"):
        significance.bootstrap_mean_ci([0.1])


def test_resampled_columns_reproducible_and_row_independent(results):
    c1 = pairwise.paired_comparisons(results, aso_iterations=100)
    c2 = pairwise.paired_comparisons(results, aso_iterations=100)
    pd.testing.assert_frame_equal(c1, c2)
    alone = pairwise.paired_comparisons(results[results.strategy != "wwm"], aso_iterations=100).iloc[0]
    row = c1[(c1.strategy_a == "typhoon") & (c1.strategy_b == "random")].iloc[0]
    for col in ("boot_ci_low", "boot_ci_high", "aso_eps_ab", "aso_eps_ba"):
        assert alone[col] == row[col]
    other = pairwise.paired_comparisons(results, aso_iterations=100, seed=1)
    assert not np.array_equal(other["aso_eps_ab"], c1["aso_eps_ab"])
    with pytest.raises(ValueError, match="bootstrap_method"):
        pairwise.paired_comparisons(results, bootstrap_method="bca")


def test_verdicts():
    rng = np.random.default_rng(11)
    base = rng.normal(0.85, 0.01, 5)
    frames = [
        _frame({"typhoon": base + 0.05 + rng.normal(0, 0.002, 5), "random": base}, backbone="shifted"),
        _frame({"typhoon": base + 0.003 + rng.normal(0, 0.0005, 5), "random": base}, backbone="small"),
        _frame({"typhoon": TY, "random": RA}, backbone="noisy"),
        _frame({"typhoon": base, "random": base.copy()}, backbone="identical"),
    ]
    c = pairwise.paired_comparisons(pd.concat(frames, ignore_index=True), margin=0.01, aso_iterations=50)
    verdict = dict(zip(c.backbone, c.verdict, strict=True))
    assert verdict == {"shifted": "different", "small": "different, within margin",
                       "noisy": "equivalent", "identical": "cannot be tested"}
    c = pairwise.paired_comparisons(pd.concat(frames, ignore_index=True), margin=0.001, aso_iterations=50)
    assert dict(zip(c.backbone, c.verdict, strict=True))["noisy"] == "inconclusive"
    for r in c.itertuples():  # the rule, row by row
        assert r.verdict == ("cannot be tested" if not r.testable else
                             {(True, True): "different, within margin", (True, False): "different",
                              (False, True): "equivalent", (False, False): "inconclusive"}[
                                 (r.significant, r.equivalent)])


def test_comparison_table_for_display(results):
    r = pd.concat([results, _frame({"copy": TY})], ignore_index=True)
    c = pairwise.paired_comparisons(r, aso_iterations=50)
    t = stats_tables.comparison_table(c)
    # the verdict columns first (issue 52: a reader saw them only behind a scrollbar), the long text out
    assert list(t.columns) == ["task", "backbone", "a", "b", "verdict", "a - b", "95% t CI", "Holm p", "TOST p", "n",
                               "95% percentile CI", "ASO eps a>b", "ASO eps b>a"]
    assert len(t) == len(c) == 6
    for row, full in zip(t.itertuples(index=False), c.itertuples(), strict=True):
        assert row[5] == round(full.mean_diff, 4) and row[4] == full.verdict
        if full.testable:
            assert row[6] == f"[{full.ci_low:.4f}, {full.ci_high:.4f}]"
            assert row[10] == f"[{full.boot_ci_low:.4f}, {full.boot_ci_high:.4f}]"
        else:
            assert row[6] == row[10] == "--" and row[4] == "cannot be tested"
    noted = c[c["note"].fillna("") != ""]
    notes = stats_tables.comparison_notes(c)
    assert len(notes) == c["holm_family"].nunique() + len(noted) and len(noted)
    assert [f"{r.task} {r.backbone}, {r.strategy_a} - {r.strategy_b}: {r.note}" for r in noted.itertuples()] == \
        notes[c["holm_family"].nunique():]
    untestable = t[(t.a == "typhoon") & (t.b == "copy")]
    assert len(untestable) == 1 and untestable["verdict"].iloc[0] == "cannot be tested"


def test_conclusion_counts_untestable_apart(results):
    r = pd.concat([results, _frame({"copy": TY})], ignore_index=True)
    c = pairwise.paired_comparisons(r, aso_iterations=50, margin=1.0)
    text = verdict_text.conclusion(c)
    # typhoon vs random, wwm tested (and equivalent within the huge margin); typhoon vs copy is not
    assert "2 paired comparison(s)" in text and "for all 2" in text
    assert "1 comparison(s) cannot be tested" in text and "typhoon vs copy" in text


# ------------------------------------------------------------------ power
def test_seeds_needed(results):
    c = pairwise.paired_comparisons(results, margin=0.01)
    s = seed_budget.seeds_needed(c)
    for r, cr in zip(s.itertuples(), c.itertuples(), strict=True):
        n = r.n_observed
        # n is the smallest integer with power >= 0.8
        assert pg.power_ttest(d=abs(cr.cohen_dz), n=n, contrast="paired") >= 0.8 - 1e-9
        if n > 2:
            assert pg.power_ttest(d=abs(cr.cohen_dz), n=n - 1, contrast="paired") < 0.8
        assert r.d_margin == pytest.approx(0.01 / cr.sd_diff)
        assert pg.power_ttest(d=r.d_margin, n=r.n_margin, contrast="paired") >= 0.8 - 1e-9
    # huge effect -> the minimum of 2; zero effect, or one beyond 10^7 pairs -> inf
    fake = c.copy()
    fake["cohen_dz"] = [50.0, 0.0, 1e-4]
    s = seed_budget.seeds_needed(fake)
    assert s["n_observed"].tolist() == [2.0, math.inf, math.inf]
    with pytest.raises(ValueError, match="smallest difference"):
        seed_budget.seeds_needed(c, margin=0)
    with pytest.raises(ValueError, match="cohen_dz"):
        seed_budget.seeds_needed(c.drop(columns="cohen_dz"))


def _paired_power(d: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test from the noncentral t (independent of pingouin)."""
    crit = st.t.ppf(1 - alpha / 2, n - 1)
    return st.nct.sf(crit, n - 1, d * math.sqrt(n)) + st.nct.cdf(-crit, n - 1, d * math.sqrt(n))


@pytest.mark.parametrize("smallest_difference", [None, 0.005, 0.02])
def test_seeds_needed_against_noncentral_t(grid, smallest_difference):
    c = pairwise.paired_comparisons(grid, margin=0.01, aso_iterations=20)
    s = seed_budget.seeds_needed(c, margin=smallest_difference)
    difference = 0.01 if smallest_difference is None else smallest_difference
    np.testing.assert_allclose(s["mean_diff"], c["mean_diff"])
    for r, cr in zip(s.itertuples(), c.itertuples(), strict=True):
        d_observed = abs(cr.mean_diff) / cr.sd_diff  # the observed difference over the measured paired sd
        d_margin = difference / cr.sd_diff  # the smallest difference that matters, same sd
        assert r.d_margin == pytest.approx(d_margin, rel=1e-12)
        for n, d in ((r.n_observed, d_observed), (r.n_margin, d_margin)):
            assert _paired_power(d, int(n)) >= 0.8 - 1e-9
            assert n == 2 or _paired_power(d, int(n) - 1) < 0.8


# ------------------------------------------------------------------ expected max (Dodge et al.)
@pytest.mark.parametrize("values", [[0.5], [0.3, 0.9], [0.2, 0.5, 0.5, 0.8], [0.81, 0.85, 0.79, 0.88, 0.84]])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_expected_max_brute_force(values, k):
    n = len(values)
    # enumerate all n^k equally likely ordered draws with replacement
    brute = np.mean([max(c) for c in itertools.product(values, repeat=k)])
    assert seed_budget.expected_max(values, k) == pytest.approx(brute, abs=1e-12)
    assert seed_budget.expected_max(values, 1) == pytest.approx(np.mean(values), abs=1e-12)
    assert n >= 1


def test_expected_max_monte_carlo_and_monotone():
    rng = np.random.default_rng(0)
    v = rng.normal(size=6)
    draws = rng.choice(v, size=(200_000, 8)).max(axis=1)
    assert seed_budget.expected_max(v, 8) == pytest.approx(draws.mean(), abs=5e-3)
    e = [seed_budget.expected_max(v, k) for k in range(1, 30)]
    assert all(b >= a - 1e-15 for a, b in itertools.pairwise(e)) and e[-1] <= v.max() + 1e-12
    with pytest.raises(ValueError):
        seed_budget.expected_max([], 2)
    with pytest.raises(ValueError):
        seed_budget.expected_max([1.0], 0)


def test_expected_max_performance_table(results):
    t = seed_budget.expected_max_performance(results, ks=[1, 3, 10])
    assert len(t) == 3 * 3
    row = t[(t.strategy == "wwm") & (t.k == 3)].iloc[0]
    # the mean of the best of every one of the 5^3 equally likely ordered draws of 3 of WW's seeds
    brute = np.mean([max(draw) for draw in itertools.product(WW, repeat=3)])
    assert row["expected_max"] == pytest.approx(brute, abs=1e-12)
    assert bool(t[t.k == 10]["extrapolated"].all()) and not bool(t[t.k == 3]["extrapolated"].any())
    assert seed_budget.expected_max_performance(results)["k"].max() == 5


# ------------------------------------------------------------------ degenerate runs
def test_degenerate_rate(results):
    r = results.copy()
    r.loc[(r.strategy == "random") & (r.seed.isin([1, 2])), "primary_value"] = 0.8122  # = majority
    r.loc[(r.strategy == "random") & (r.seed == 4), "primary_value"] = 0.5  # below
    r.loc[(r.strategy == "wwm") & (r.seed == 0), "status"] = "failed"
    d = run_summary.degenerate_rate(r).set_index("strategy")
    assert d.loc["random", "n_degenerate"] == 3 and d.loc["random", "rate"] == pytest.approx(0.6)
    assert d.loc["typhoon", "rate"] == 0
    assert d.loc["wwm", "n"] == 4 and d.loc["wwm", "n_failed"] == 1
    # tol widens the band above the majority level
    assert run_summary.degenerate_rate(r, tol=0.1).set_index("strategy").loc["typhoon", "rate"] == 1.0


# ------------------------------------------------------------------ writing
def test_write_tables_atomic(tmp_path, results):
    c = pairwise.paired_comparisons(results)
    out = stats_tables.write_tables({"summary": run_summary.summarize(results), "comparisons": c}, tmp_path / "stats")
    for paths in out.values():
        assert [p.suffix for p in paths] == [".csv", ".md", ".tex"]
        for p in paths:
            assert p.is_file() and p.stat().st_size > 0
        assert paths[1].read_text().startswith("| ")
        assert "\\begin{tabular}" in paths[2].read_text()
    back = pd.read_csv(out["comparisons"][0])
    np.testing.assert_allclose(back["t"], c["t"], rtol=1e-12)
    # no temporary files left behind
    assert sorted(p.name for p in (tmp_path / "stats").iterdir()) == sorted(
        p.name for ps in out.values() for p in ps)
    with pytest.raises(TypeError):
        stats_tables.write_tables({"x": [1, 2]}, tmp_path)


def test_what_was_written_reads_as_a_sentence_not_a_python_list(tmp_path, results):
    out = stats_tables.write_tables({"summary": run_summary.summarize(results), "comparisons": pd.DataFrame()},
                                    tmp_path / "stats")
    sentence = stats_tables.written_sentence(out)
    assert sentence == "Written to `stats/`: `summary`, `comparisons` (each as .csv, .md and .tex)."
    assert "[" not in sentence and "'" not in sentence
    assert stats_tables.written_sentence({}) == "No tables written to `stats/`."


def test_a_tidy_table_is_compared_arm_by_arm_as_the_labelled_one_was(tmp_path, results):
    """results.csv holds the strategy and the schedule apart; the statistics compare each strategy under each
    schedule as its own arm, so a tidy table summarises and compares exactly as the same runs written with the
    arm in the strategy column (random+uniform) did -- the reference here, built by hand."""
    uniform = results[results["strategy"] == "random"].assign(primary_value=lambda f: f["primary_value"] - 0.02)
    labelled = pd.concat([results, uniform.assign(strategy="random+uniform")], ignore_index=True)
    tidy = pd.concat([results.assign(schedule="fixed"), uniform.assign(schedule="uniform")], ignore_index=True)
    assert "random+uniform" not in set(tidy["strategy"])
    pd.testing.assert_frame_equal(run_summary.summarize(tidy), run_summary.summarize(labelled))
    pd.testing.assert_frame_equal(pairwise.paired_comparisons(tidy, aso_iterations=20, bootstrap_resamples=100),
                                  pairwise.paired_comparisons(labelled, aso_iterations=20, bootstrap_resamples=100))
    tidy.to_csv(tmp_path / "results.csv", index=False)
    assert set(run_summary.load_results(tmp_path / "results.csv")["strategy"]) == set(labelled["strategy"])
    as_written = run_summary.load_results(tmp_path / "results.csv", tidy=True)
    assert set(zip(as_written["strategy"], as_written["schedule"], strict=True)) >= {("random", "uniform"), ("random", "fixed")}
    with pytest.raises(ValueError, match=r"no schedule for 1 run\(s\)"):
        run_summary.ok_runs(tidy.assign(schedule=lambda f: f["schedule"].where(f.index != 0)))


def test_load_results(tmp_path, results):
    p = tmp_path / "results.csv"
    results.to_csv(p, index=False)
    pd.testing.assert_frame_equal(run_summary.load_results(p), pd.read_csv(p))
    results.drop(columns="seed").to_csv(p, index=False)
    with pytest.raises(ValueError, match="seed"):
        run_summary.load_results(p)
    with pytest.raises(FileNotFoundError):
        run_summary.load_results(tmp_path / "nope.csv")
