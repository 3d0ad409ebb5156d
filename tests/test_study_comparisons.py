"""The two study tables split by question: the schedules grid (schedule_study.metric_comparisons, does a schedule
change the dev metric?; loss_comparisons, does the full-mask loss move as the theory predicts?) and the
bottleneck (bottleneck_verdict.bottleneck_comparisons, does moving the budget change the dev metric?;
masking_of_strategies, how each strategy masks). Each against scipy, statsmodels or a computation by hand, and
each whole table as its questions side by side."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from typhoon.analysis import bottleneck_verdict
from typhoon.studies.schedules import analysis as schedule_study

HYPOTHESIS = schedule_study.schedule_hypothesis("schedules")
FIXED = np.array([0.84, 0.85, 0.83, 0.86])
MIXTURE = np.array([0.845, 0.853, 0.839, 0.866])
UNIFORM = np.array([0.80, 0.812, 0.787, 0.821])
LOSS = {"fixed": [7.1, 7.0, 7.2, 7.1], "mixture": [5.0, 5.2, 5.1, np.nan], "uniform": [6.0, 6.1, 5.9, 6.2]}


def _schedule_runs() -> pd.DataFrame:
    rows = [dict(task="mrpc", backbone="minilm-l6", strategy="random", schedule=schedule, seed=seed, status="ok",
                 primary_metric="f1", primary_value=float(values[seed]), mlm_full_mask_loss=LOSS[schedule][seed])
            for schedule, values in (("fixed", FIXED), ("mixture", MIXTURE), ("uniform", UNIFORM))
            for seed in range(len(values))]
    return pd.DataFrame(rows)


def _power(dz: float, n: int, alpha: float = 0.05) -> float:
    """The two-sided paired t's power at d_z with n pairs, integrated over the chi-square of the sd: P(|Z + dz sqrt(n)|
    > c sqrt(V / (n - 1))) (scipy's noncentral t, and statsmodels' power through it, give NaN at such large
    noncentralities)."""
    df, nc = n - 1, dz * math.sqrt(n)
    c = st.t.ppf(1 - alpha / 2, df)

    def given(v: float) -> float:
        s = c * math.sqrt(v / df)
        return (st.norm.sf(s - nc) + st.norm.cdf(-s - nc)) * st.chi2.pdf(v, df)

    return sum(integrate.quad(given, lo, hi)[0] for lo, hi in ((0, 1), (1, np.inf)))


def _seeds_for_power(sd: float, margin: float, power: float = 0.8, alpha: float = 0.05) -> int:
    """The fewest pairs (at least 2) whose paired t has ``power`` at d_z = margin / sd."""
    return next(n for n in range(2, 10_000) if _power(margin / sd, n, alpha) >= power)


# ------------------------------------------------------------------ the schedules grid
def test_the_dev_metric_comparisons_match_scipy_and_statsmodels():
    table = schedule_study.metric_comparisons(_schedule_runs(), HYPOTHESIS).set_index("schedule")
    assert list(table.index) == ["uniform", "mixture"]  # the hypothesis's order
    p = []
    for schedule, values in (("uniform", UNIFORM), ("mixture", MIXTURE)):
        d, r = values - FIXED, table.loc[schedule]
        lo, hi = st.t.interval(0.95, 3, loc=d.mean(), scale=d.std(ddof=1) / 2)
        assert (r["diff"], r.ci_low, r.ci_high) == pytest.approx((d.mean(), lo, hi), rel=1e-12)
        assert r.p == pytest.approx(st.ttest_1samp(d, 0).pvalue, rel=1e-12)
        tost = max(st.ttest_1samp(d, -0.01, alternative="greater").pvalue,
                   st.ttest_1samp(d, 0.01, alternative="less").pvalue)
        assert (r.margin, r.tost_p) == (0.01, pytest.approx(tost, rel=1e-12))
        assert r.seeds_for_power == _seeds_for_power(d.std(ddof=1), 0.01)
        p.append(st.ttest_1samp(d, 0).pvalue)
    assert table["p_holm"].tolist() == pytest.approx(multipletests(p, method="holm")[1].tolist(), rel=1e-12)
    assert table.loc["uniform", "outcome"] == "different"


def test_the_full_mask_loss_comparisons_by_hand():
    table = schedule_study.loss_comparisons(_schedule_runs(), HYPOTHESIS).set_index("schedule")
    mixture = table.loc["mixture"]
    # each schedule's mean loss over all its runs; the difference over the seeds where both have one
    assert mixture.full_mask_loss_reference == pytest.approx(np.mean(LOSS["fixed"]))
    assert mixture.full_mask_loss == pytest.approx(np.mean(LOSS["mixture"][:3]))
    d = np.array(LOSS["mixture"][:3]) - np.array(LOSS["fixed"][:3])
    assert mixture.full_mask_loss_diff == pytest.approx(d.mean())
    assert mixture.full_mask_loss_p == pytest.approx(st.ttest_1samp(d, 0).pvalue, rel=1e-12)
    p = [st.ttest_1samp(np.array(LOSS[s]) - np.array(LOSS["fixed"]), 0).pvalue for s in ("uniform",)] + [
        mixture.full_mask_loss_p]
    assert table["full_mask_loss_p_holm"].tolist() == pytest.approx(multipletests(p, method="holm")[1].tolist())
    assert mixture.predicted == HYPOTHESIS.full_mask_loss.get("mixture")
    assert mixture.observed_unadjusted == "lower" and mixture.observed in ("lower", "not decided")


def test_the_schedules_table_is_its_two_questions_side_by_side():
    runs = _schedule_runs()
    whole = schedule_study.schedule_comparisons(runs, HYPOTHESIS)
    metric = schedule_study.metric_comparisons(runs, HYPOTHESIS)
    loss = schedule_study.loss_comparisons(runs, HYPOTHESIS)
    assert list(whole.columns) == schedule_study.COLUMNS
    for part in (metric, loss):
        pd.testing.assert_frame_equal(whole[list(part.columns)], part)
    with pytest.raises(ValueError, match="no schedule column"):
        schedule_study.schedule_pairs(runs.drop(columns="schedule"), HYPOTHESIS)


# ------------------------------------------------------------------ the bottleneck
RANDOM = np.array([0.80, 0.83, 0.79, 0.84, 0.81])
SOFTMAX = RANDOM + np.array([0.05, 0.052, 0.049, 0.051, 0.048])
RANK = RANDOM + np.array([0.01, -0.02, 0.015, -0.005, 0.0])


def _bottleneck_runs() -> pd.DataFrame:
    rows = []
    for task in ("mrpc", "cola"):
        for strategy, values, moved in (("random", RANDOM, None), ("typhoon_softmax", SOFTMAX, 0.37),
                                        ("typhoon_rank", RANK, 0.07), ("whole_word", RANDOM[::-1], None)):
            for seed, v in enumerate(values):
                rows.append(dict(task=task, backbone="minilm-l6", strategy=strategy, seed=seed, status="ok",
                                 primary_metric="f1", primary_value=float(v),
                                 budget_moved=None if moved is None else moved + seed / 100,
                                 kl_to_uniform=None if moved is None else moved / 3))
    return pd.DataFrame(rows)


def test_the_bottleneck_comparisons_match_scipy_and_statsmodels():
    table = bottleneck_verdict.bottleneck_comparisons(_bottleneck_runs(), margin=0.01)
    assert table[["task", "strategy"]].values.tolist() == [["mrpc", "typhoon_softmax"], ["mrpc", "typhoon_rank"],
                                                           ["cola", "typhoon_softmax"], ["cola", "typhoon_rank"]]
    p = [st.ttest_rel(values, RANDOM).pvalue for values in (SOFTMAX, RANK, SOFTMAX, RANK)]
    np.testing.assert_allclose(table["p_holm"], multipletests(p, method="holm")[1], rtol=1e-12)
    for r, values in zip(table.itertuples(), (SOFTMAX, RANK, SOFTMAX, RANK), strict=True):
        d = values - RANDOM  # the strategy minus random
        lo, hi = st.t.interval(0.95, 4, loc=d.mean(), scale=st.sem(d))
        assert (r.n, r.diff, r.ci_low, r.ci_high) == (5, pytest.approx(d.mean()), pytest.approx(lo), pytest.approx(hi))
        tost = max(st.ttest_1samp(d, -0.01, alternative="greater").pvalue,
                   st.ttest_1samp(d, 0.01, alternative="less").pvalue)
        assert r.tost_p == pytest.approx(tost, rel=1e-9)
        assert r.seeds_for_power == _seeds_for_power(d.std(ddof=1), 0.01)
    assert table.set_index(["task", "strategy"]).loc[("mrpc", "typhoon_softmax"), "outcome"] == "helps"
    assert table.set_index(["task", "strategy"]).loc[("mrpc", "typhoon_rank"), "outcome"] == "inconclusive"


def test_how_each_strategy_masks_by_hand():
    masking = bottleneck_verdict.masking_of_strategies(_bottleneck_runs()).set_index(["task", "strategy"])
    assert list(masking.index) == [("mrpc", "typhoon_softmax"), ("mrpc", "typhoon_rank"),
                                   ("cola", "typhoon_softmax"), ("cola", "typhoon_rank")]
    softmax = masking.loc[("mrpc", "typhoon_softmax")]
    assert (softmax.calibration, softmax.saliency) == ("softmax", "mlm")  # from the name: no such columns
    assert softmax.budget_moved == pytest.approx(np.mean([0.37 + s / 100 for s in range(5)]))
    assert softmax.kl_to_uniform == pytest.approx(0.37 / 3) and np.isnan(softmax.task_model_accuracy)


def test_the_bottleneck_verdict_is_its_two_questions_side_by_side():
    runs = _bottleneck_runs()
    table, _ = bottleneck_verdict.bottleneck_verdict(runs, margin=0.01)
    comparisons = bottleneck_verdict.bottleneck_comparisons(runs, margin=0.01)
    masking = bottleneck_verdict.masking_of_strategies(runs)
    for part in (comparisons, masking):
        pd.testing.assert_frame_equal(table[list(part.columns)], part)
