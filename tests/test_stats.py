"""Tests for typhoon.stats: numbers against scipy/statsmodels/pingouin and hand computations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from typhoon import stats as S

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
    s = S.summarize(results)
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
    s = S.summarize(r).set_index("strategy")
    assert s.loc["wwm", "n"] == 1 and s.loc["wwm", "n_failed"] == 4
    assert math.isnan(s.loc["wwm", "sd"]) and math.isnan(s.loc["wwm", "ci_low"])
    assert s.loc["wwm", "mean"] == pytest.approx(WW[0])


# ------------------------------------------------------------------ paired comparisons
def test_paired_t_matches_scipy_and_hand(results):
    c = S.paired_comparisons(results, margin=0.01)
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
    c = S.paired_comparisons(results, reference="wwm")
    ref = c[c.family == "vs_reference"]
    assert set(ref.strategy_a) == {"wwm"} and len(ref) == 2
    other = c[c.family == "other"]
    assert len(other) == 1 and {other.strategy_a.iloc[0], other.strategy_b.iloc[0]} == {"typhoon", "random"}


def test_holm_matches_statsmodels_and_hand(grid):
    c = S.paired_comparisons(grid)
    fam = c[c.family == "vs_reference"]
    assert len(fam) == 12  # 2 tasks x 3 backbones x 2 other strategies
    expected = multipletests(fam["p"].to_numpy(), method="holm")[1]
    np.testing.assert_allclose(fam["p_holm"].to_numpy(), expected, atol=1e-12)
    # by hand: sorted step-down with running max, capped at 1
    p = fam["p"].to_numpy()
    m = len(p)
    order = np.argsort(p)
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        adj[i] = min(1.0, running)
    np.testing.assert_allclose(fam["p_holm"].to_numpy(), adj, atol=1e-12)
    # the 'other' family is corrected separately
    oth = c[c.family == "other"]
    np.testing.assert_allclose(oth["p_holm"], multipletests(oth["p"], method="holm")[1], atol=1e-12)
    assert (c["significant"] == (c["p_holm"] < 0.05)).all()


def test_holm_helper_nan_and_small():
    out = S.holm([0.01, np.nan, 0.04, 0.03])
    assert math.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3]], [0.03, 0.06, 0.06])


def test_tost_matches_pingouin_and_hand(results):
    c = S.paired_comparisons(results, margin=0.01)
    pairs = {"typhoon": TY, "random": RA, "wwm": WW}
    for r in c.itertuples():
        x, y = pairs[r.strategy_a], pairs[r.strategy_b]
        ref = pg.tost(x, y, bound=0.01, paired=True)["pval"].iloc[0]
        assert r.tost_p == pytest.approx(ref, abs=1e-10)
        # hand: equivalent iff the 90% CI lies inside the margin
        d = x - y
        lo, hi = st.t.interval(0.90, len(d) - 1, loc=d.mean(), scale=d.std(ddof=1) / math.sqrt(len(d)))
        assert r.equivalent == (lo > -0.01 and hi < 0.01)


def test_tost_wide_margin_equivalent_and_identical_diffs():
    assert S.tost_paired(np.array([0.001, -0.002, 0.0005, 0.001]), margin=0.5) < 1e-4
    assert S.tost_paired(np.full(4, 0.003), margin=0.01) == 0.0
    assert S.tost_paired(np.full(4, 0.03), margin=0.01) == 1.0
    assert math.isnan(S.tost_paired(np.array([0.1]), margin=0.01))


def test_zero_differences_graceful():
    r = _frame({"typhoon": TY, "random": TY.copy()})
    c = S.paired_comparisons(r)
    row = c.iloc[0]
    assert row["mean_diff"] == 0 and math.isnan(row["t"]) and math.isnan(row["wilcoxon_p"])
    assert "all differences are zero" in row["note"] and "zero variance" in row["note"]
    assert row["equivalent"]  # identical results are equivalent within any positive margin


def test_wilcoxon_small_n_note():
    r = _frame({"typhoon": TY[:3], "random": RA[:3]})
    row = S.paired_comparisons(r).iloc[0]
    assert np.isfinite(row["wilcoxon_p"]) and "smallest attainable p" in row["note"]


def test_errors_single_seed_missing_pair_missing_column(results):
    with pytest.raises(ValueError, match="1 paired seed"):
        S.paired_comparisons(_frame({"typhoon": TY[:1], "random": RA[:1]}))
    r = results[~((results.strategy == "random") & (results.seed == 3))]
    with pytest.raises(ValueError, match=r"seed\(s\) \[3\].*missing pairs"):
        S.paired_comparisons(r)
    # a failed run also breaks the pairing
    r2 = results.copy()
    r2.loc[(r2.strategy == "wwm") & (r2.seed == 2), "status"] = "failed"
    with pytest.raises(ValueError, match="missing pairs"):
        S.paired_comparisons(r2)
    with pytest.raises(ValueError, match="primary_value"):
        S.paired_comparisons(results.drop(columns="primary_value"))
    with pytest.raises(ValueError, match="majority_value"):
        S.degenerate_rate(results.drop(columns="majority_value"))
    with pytest.raises(ValueError, match="duplicated"):
        S.summarize(pd.concat([results, results.iloc[:1]]))
    with pytest.raises(ValueError, match="margin"):
        S.paired_comparisons(results, margin=0)


def test_skip_mode_reports_why(results):
    one = _frame({"typhoon": TY[:1], "random": RA[:1]})
    c = S.paired_comparisons(one, on_invalid="skip")
    assert len(c) == 1 and math.isnan(c["p"].iloc[0]) and "skipped" in c["note"].iloc[0]
    assert not c["significant"].iloc[0]
    r = results[~((results.strategy == "random") & (results.seed == 3))]
    c = S.paired_comparisons(r, on_invalid="skip")
    row = c[(c.strategy_a == "typhoon") & (c.strategy_b == "random")].iloc[0]
    assert row["n"] == 4 and "dropped" in row["note"]
    assert row["t"] == pytest.approx(st.ttest_rel(np.delete(TY, 3), np.delete(RA, 3)).statistic, abs=1e-12)
    text = S.conclusion(S.paired_comparisons(one, on_invalid="skip"))
    assert "could be tested" in text


def test_conclusion_is_computed(grid):
    c = S.paired_comparisons(grid, margin=0.01)
    text = S.conclusion(c)
    n_sig = int(c.loc[c.family == "vs_reference", "significant"].sum())
    assert "12 paired comparison(s)" in text
    assert ("None is significant" in text) == (n_sig == 0)
    # with a huge margin everything is equivalent; with a real shift the comparison becomes significant
    assert "for all 12" in S.conclusion(S.paired_comparisons(grid, margin=1.0))
    shifted = grid.copy()
    shifted.loc[shifted.strategy == "typhoon", "primary_value"] += 0.2
    assert "significant after Holm" in S.conclusion(S.paired_comparisons(shifted))


# ------------------------------------------------------------------ power
def test_seeds_needed(results):
    c = S.paired_comparisons(results, margin=0.01)
    s = S.seeds_needed(c)
    for r, cr in zip(s.itertuples(), c.itertuples(), strict=True):
        n = r.n_observed
        # n is the smallest integer with power >= 0.8
        assert pg.power_ttest(d=abs(cr.cohen_dz), n=n, contrast="paired") >= 0.8 - 1e-9
        if n > 2:
            assert pg.power_ttest(d=abs(cr.cohen_dz), n=n - 1, contrast="paired") < 0.8
        assert r.d_margin == pytest.approx(0.01 / cr.sd_diff)
        assert pg.power_ttest(d=r.d_margin, n=r.n_margin, contrast="paired") >= 0.8 - 1e-9
    # huge effect -> the minimum of 2; zero effect -> inf
    fake = c.head(2).copy()
    fake["cohen_dz"] = [50.0, 0.0]
    s = S.seeds_needed(fake)
    assert s["n_observed"].tolist() == [2.0, math.inf]
    with pytest.raises(ValueError, match="cohen_dz"):
        S.seeds_needed(c.drop(columns="cohen_dz"))


# ------------------------------------------------------------------ expected max (Dodge et al.)
@pytest.mark.parametrize("values", [[0.5], [0.3, 0.9], [0.2, 0.5, 0.5, 0.8], [0.81, 0.85, 0.79, 0.88, 0.84]])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_expected_max_brute_force(values, k):
    n = len(values)
    # enumerate all n^k equally likely ordered draws with replacement
    brute = np.mean([max(c) for c in itertools.product(values, repeat=k)])
    assert S.expected_max(values, k) == pytest.approx(brute, abs=1e-12)
    assert S.expected_max(values, 1) == pytest.approx(np.mean(values), abs=1e-12)
    assert n >= 1


def test_expected_max_monte_carlo_and_monotone():
    rng = np.random.default_rng(0)
    v = rng.normal(size=6)
    draws = rng.choice(v, size=(200_000, 8)).max(axis=1)
    assert S.expected_max(v, 8) == pytest.approx(draws.mean(), abs=5e-3)
    e = [S.expected_max(v, k) for k in range(1, 30)]
    assert all(b >= a - 1e-15 for a, b in itertools.pairwise(e)) and e[-1] <= v.max() + 1e-12
    with pytest.raises(ValueError):
        S.expected_max([], 2)
    with pytest.raises(ValueError):
        S.expected_max([1.0], 0)


def test_expected_max_performance_table(results):
    t = S.expected_max_performance(results, ks=[1, 3, 10])
    assert len(t) == 3 * 3
    row = t[(t.strategy == "wwm") & (t.k == 3)].iloc[0]
    assert row["expected_max"] == pytest.approx(S.expected_max(WW, 3))
    assert bool(t[t.k == 10]["extrapolated"].all()) and not bool(t[t.k == 3]["extrapolated"].any())
    assert S.expected_max_performance(results)["k"].max() == 5


# ------------------------------------------------------------------ degenerate runs
def test_degenerate_rate(results):
    r = results.copy()
    r.loc[(r.strategy == "random") & (r.seed.isin([1, 2])), "primary_value"] = 0.8122  # = majority
    r.loc[(r.strategy == "random") & (r.seed == 4), "primary_value"] = 0.5  # below
    r.loc[(r.strategy == "wwm") & (r.seed == 0), "status"] = "failed"
    d = S.degenerate_rate(r).set_index("strategy")
    assert d.loc["random", "n_degenerate"] == 3 and d.loc["random", "rate"] == pytest.approx(0.6)
    assert d.loc["typhoon", "rate"] == 0
    assert d.loc["wwm", "n"] == 4 and d.loc["wwm", "n_failed"] == 1
    # tol widens the band above the majority level
    assert S.degenerate_rate(r, tol=0.1).set_index("strategy").loc["typhoon", "rate"] == 1.0


# ------------------------------------------------------------------ writing
def test_write_tables_atomic(tmp_path, results):
    c = S.paired_comparisons(results)
    out = S.write_tables({"summary": S.summarize(results), "comparisons": c}, tmp_path / "stats")
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
        S.write_tables({"x": [1, 2]}, tmp_path)


def test_load_results(tmp_path, results):
    p = tmp_path / "results.csv"
    results.to_csv(p, index=False)
    pd.testing.assert_frame_equal(S.load_results(p), pd.read_csv(p))
    results.drop(columns="seed").to_csv(p, index=False)
    with pytest.raises(ValueError, match="seed"):
        S.load_results(p)
    with pytest.raises(FileNotFoundError):
        S.load_results(tmp_path / "nope.csv")
