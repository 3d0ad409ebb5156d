"""The kl-original study's tables (typhoon/analysis/kl/: rows, curve, finetune, original_report) against independent references: the
per-token Bernoulli KL written out by hand, scipy's t intervals and paired t test, a Monte Carlo of the TOST
for its power, and hand-built curves."""

from __future__ import annotations

import json
import math
import re
import time

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from typhoon.analysis import paired
from typhoon.analysis.significance import tost_paired
from typhoon.cli import main
from typhoon.studies import kl_original as ko

COUNTS = np.array([0, 50, 30, 15, 5])  # type 0 never occurs (a special token, say)


def _write_state(out, row, task, seed, probs, p=0.15, n_train=20):
    folder = out / "states" / row / task / f"seed{seed}"
    folder.mkdir(parents=True)
    probs = np.asarray(probs, dtype=np.float64)
    with open(folder / "masking_state.npz", "wb") as fh:
        np.savez(fh, meta=np.array(json.dumps({"p": p})), weights=probs, counts=COUNTS,
                 seen=COUNTS > 0, probs=probs)
    (folder / "run.json").write_text(json.dumps({"config": {"p": p}, "n_train": n_train,
                                                 "numerics": {"precision": "fp32", "device": "cpu"}}))


def _bernoulli_by_hand(probs, counts):
    """(1/N) sum_v f_v KL(Bern(pi_v) || Bern(rbar)), written out."""
    f = counts.astype(float)
    rbar = (f * probs).sum() / f.sum()
    total = 0.0
    for pi, c in zip(probs, f, strict=True):
        if c:
            total += c * (pi * math.log(pi / rbar) + (1 - pi) * math.log((1 - pi) / (1 - rbar)))
    return total / f.sum()


def _spread_state(rng, scale):
    """Rates around 0.15 with a spread of ``scale``, rescaled so the realised rate is exactly 0.15."""
    probs = 0.15 * (1 + scale * rng.normal(size=COUNTS.size))
    probs[0] = 0.0
    return probs * 0.15 / ((COUNTS * probs).sum() / COUNTS.sum())


@pytest.fixture
def study(tmp_path):
    rng = np.random.default_rng(3)
    probs = {}
    for task in ("mrpc", "cola"):
        for seed in (0, 1, 2):
            probs["baseline", task, seed] = _spread_state(rng, 0.05)
            probs["p", task, seed] = _spread_state(rng, 0.05 * rng.uniform(1.5, 2.5))
            _write_state(tmp_path, "baseline", task, seed, probs["baseline", task, seed])
            _write_state(tmp_path, "p", task, seed, probs["p", task, seed])
    return tmp_path, probs


def test_each_state_kl_is_the_hand_written_bernoulli_kl(study):
    out, probs = study
    states = ko.read_row_states(out).set_index(["row", "task", "seed"])
    for key, pi in probs.items():
        assert states.loc[key, "bernoulli"] == pytest.approx(_bernoulli_by_hand(pi, COUNTS), rel=1e-10)
        assert states.loc[key, "bernoulli_bits"] == pytest.approx(_bernoulli_by_hand(pi, COUNTS) / math.log(2), rel=1e-10)
        total = COUNTS.sum()
        assert states.loc[key, "bernoulli_per_sequence"] == pytest.approx(
            _bernoulli_by_hand(pi, COUNTS) * total / 20, rel=1e-10)  # 20 sequences


def test_row_interval_and_paired_change_match_scipy(study):
    out, probs = study
    table = ko.rows_table(ko.read_row_states(out)).set_index(["row", "unit"])
    keys = [(task, seed) for task in ("mrpc", "cola") for seed in (0, 1, 2)]
    log_p = np.log([_bernoulli_by_hand(probs["p", *k], COUNTS) for k in keys])
    log_base = np.log([_bernoulli_by_hand(probs["baseline", *k], COUNTS) for k in keys])
    low, high = st.t.interval(0.95, len(log_p) - 1, loc=log_p.mean(), scale=st.sem(log_p))
    r = table.loc[("p", "bernoulli")]
    assert r.kl == pytest.approx(math.exp(log_p.mean()))
    assert (r.kl_ci_low, r.kl_ci_high) == pytest.approx((math.exp(low), math.exp(high)))
    paired = st.ttest_rel(log_p, log_base)
    ci = paired.confidence_interval(0.95)
    assert (r.change_ci_low, r.change_ci_high) == pytest.approx((math.exp(ci.low), math.exp(ci.high)))
    bonferroni = paired.confidence_interval(1 - 0.05 / 7)  # 7 rows beside the baseline
    assert r.change_ci_low_bonferroni == pytest.approx(math.exp(bonferroni.low))
    assert r.direction == ("raises" if ci.low > 0 else "lowers" if ci.high < 0
                           else "leaves" if math.log(0.5) <= ci.low and ci.high <= math.log(2) else "not detected")
    assert r["reaches_7e-4"] == (low <= math.log(7e-4) <= high)
    assert math.isnan(table.loc[("baseline", "bernoulli"), "change"])  # no change of the baseline against itself


def test_a_bits_row_is_judged_against_7e_4_nats_in_bits(study):
    """7e-4 nats is 7e-4 / ln 2 bits: a row's bits twin has the nats row's ratio to the paper and its verdicts."""
    out, probs = study
    table = ko.rows_table(ko.read_row_states(out)).set_index(["row", "unit"])
    keys = [(task, seed) for task in ("mrpc", "cola") for seed in (0, 1, 2)]
    in_bits = np.log([_bernoulli_by_hand(probs["p", *k], COUNTS) / math.log(2) for k in keys])
    r = table.loc[("p", "bernoulli_bits")]
    assert r.ratio_to_paper == pytest.approx(math.exp(in_bits.mean()) / (7e-4 / math.log(2)), rel=1e-10)
    low, high = st.t.interval(0.95, len(in_bits) - 1, loc=in_bits.mean(), scale=st.sem(in_bits))
    assert r["reaches_7e-4"] == (low <= math.log(7e-4 / math.log(2)) <= high)
    nats = table.loc[("p", "bernoulli")]
    assert (r["reaches_7e-4"], r["within_3x"]) == (nats["reaches_7e-4"], nats["within_3x"])


def test_no_state_is_a_clear_error_in_under_two_seconds_writing_nothing(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="no finished state"):
        ko.rows_table(ko.read_row_states(tmp_path))
    began = time.perf_counter()
    assert main(["kl-original", "table", "--out", str(tmp_path)]) == 2
    assert time.perf_counter() - began < 2
    assert "no finished state" in capsys.readouterr().err
    assert not (tmp_path / "tables").exists() and not (tmp_path / "README.md").exists()


def test_curve_change_pairs_the_last_epoch_all_runs_reached_with_epoch_one():
    rows = []
    for task, seed, epochs in (("mrpc", 0, 5), ("mrpc", 1, 4), ("cola", 0, 6)):
        for epoch in range(1, epochs + 1):
            value = 1e-4 * (1 + 0.1 * seed + 0.2 * epoch + (0.05 if task == "cola" else 0))
            rows.append({"task": task, "seed": seed, "epoch": epoch, **{u: value for u in ko.UNITS}})
    change = ko.curve_change(pd.DataFrame(rows)).set_index("unit").loc["bernoulli"]
    assert change.last_common_epoch == 4
    ratios = [(1 + 0.1 * s + 0.8 + c) / (1 + 0.1 * s + 0.2 + c) for s, c in ((0, 0), (1, 0), (0, 0.05))]
    low, high = st.t.interval(0.95, 2, loc=np.mean(np.log(ratios)), scale=st.sem(np.log(ratios)))
    assert change.change == pytest.approx(math.exp(np.mean(np.log(ratios))))
    assert (change.change_ci_low, change.change_ci_high) == pytest.approx((math.exp(low), math.exp(high)))



def _curves(kl_of_run_and_epoch, epochs_of_run):
    """A curve frame: ``epochs_of_run`` {(task, seed): epochs}, every unit at ``kl_of_run_and_epoch(run, e)``
    nats (its ``_bits`` twin in bits)."""
    return pd.DataFrame([{"task": task, "seed": seed, "epoch": epoch,
                          **{u: kl_of_run_and_epoch((task, seed), epoch) / (math.log(2) if u.endswith("_bits") else 1)
                             for u in ko.UNITS}}
                         for (task, seed), epochs in epochs_of_run.items() for epoch in range(1, epochs + 1)])


EPOCHS_OF_RUN = {("mrpc", 0): 8, ("mrpc", 1): 7, ("cola", 0): 5, ("cola", 1): 6}
PLANNED = {"mrpc": 100, "cola": 80}  # the 2023 code's epochs, written here, not read from the design


def test_curve_trend_recovers_an_exact_power_law_and_its_value_at_the_planned_end():
    b, c = 0.3, {("mrpc", 0): 2e-5, ("mrpc", 1): 5e-5, ("cola", 0): 1e-4, ("cola", 1): 3e-5}
    trend = ko.curve_trend(_curves(lambda run, e: c[run] * e ** b, EPOCHS_OF_RUN)).set_index("unit")
    r = trend.loc["bernoulli"]
    assert (r.runs, r.epochs_min, r.epochs_max) == (4, 5, 8)
    assert r.slope == pytest.approx(b, abs=1e-12)
    assert r.slope_ci_low == pytest.approx(b, abs=1e-9) and r.slope_ci_high == pytest.approx(b, abs=1e-9)
    assert r.trend == "rises"
    by_hand = [c[run] * PLANNED[run[0]] ** b for run in c]
    geometric_mean = math.prod(by_hand) ** (1 / len(by_hand))
    assert r.kl_end == pytest.approx(geometric_mean, rel=1e-10)
    assert r.ratio_to_paper == pytest.approx(geometric_mean / 7e-4, rel=1e-10)
    logs = np.log(by_hand)
    low, high = st.t.interval(0.95, 3, loc=logs.mean(), scale=st.sem(logs))
    assert (r.kl_end_ci_low, r.kl_end_ci_high) == pytest.approx((math.exp(low), math.exp(high)), rel=1e-10)
    # the bits units: the same KLs in bits, compared with 7e-4 nats in bits
    bits = trend.loc["bernoulli_bits"]
    assert bits.kl_end == pytest.approx(geometric_mean / math.log(2), rel=1e-10)
    assert bits.ratio_to_paper == pytest.approx(geometric_mean / 7e-4, rel=1e-10)


def test_curve_trend_slopes_and_interval_match_scipy_on_noisy_curves():
    rng = np.random.default_rng(7)
    noise = {(run, e): rng.normal(0, 0.4) for run in EPOCHS_OF_RUN for e in range(1, 9)}
    kl = {(run, e): 1e-4 * e ** -0.1 * math.exp(noise[run, e]) for run, e in noise}
    r = ko.curve_trend(_curves(lambda run, e: kl[run, e], EPOCHS_OF_RUN)).set_index("unit").loc["bernoulli"]
    fits = {run: st.linregress(np.log(np.arange(1, n + 1)), np.log([kl[run, e] for e in range(1, n + 1)]))
            for run, n in EPOCHS_OF_RUN.items()}
    slopes = np.array([fit.slope for fit in fits.values()])
    low, high = st.t.interval(0.95, len(slopes) - 1, loc=slopes.mean(), scale=st.sem(slopes))
    assert r.slope == pytest.approx(slopes.mean(), rel=1e-10)
    assert (r.slope_ci_low, r.slope_ci_high) == pytest.approx((low, high), rel=1e-10)
    assert r.trend == ("rises" if low > 0 else "falls" if high < 0 else "not detected")
    ends = [fit.intercept + fit.slope * math.log(PLANNED[run[0]]) for run, fit in fits.items()]
    assert r.kl_end == pytest.approx(math.exp(np.mean(ends)), rel=1e-10)


def test_each_runs_power_law_is_scipys_least_squares_line_on_log_log():
    rng = np.random.default_rng(3)
    kl = {(run, e): 2e-4 * e ** 0.2 * math.exp(rng.normal(0, 0.3)) for run in EPOCHS_OF_RUN for e in range(1, 9)}
    fits = ko.run_power_laws(_curves(lambda run, e: kl[run, e], EPOCHS_OF_RUN), "bernoulli_bits")
    assert sorted(zip(fits["task"], fits["seed"], fits["epochs"], strict=True)) == sorted((*run, n) for run, n in EPOCHS_OF_RUN.items())
    for fit in fits.itertuples():
        n = EPOCHS_OF_RUN[fit.task, fit.seed]
        ref = st.linregress(np.log(np.arange(1, n + 1)), np.log([kl[(fit.task, fit.seed), e] / math.log(2)
                                                                 for e in range(1, n + 1)]))
        assert (fit.slope, fit.intercept) == pytest.approx((ref.slope, ref.intercept), rel=1e-10)
        assert fit.planned_epochs == PLANNED[fit.task]
        assert fit.log_kl_end == pytest.approx(ref.intercept + ref.slope * math.log(PLANNED[fit.task]), rel=1e-10)


@pytest.mark.parametrize("level, verdict", [(1e-4, "below 7e-4"), (7e-4, "reaches 7e-4"), (5e-3, "above 7e-4")])
def test_curve_trend_verdict_reads_the_extrapolated_interval_against_7e_4(level, verdict):
    """Flat curves at ``level`` for every run, a run's level spread by x1.2 either way: the planned end's
    interval is [level/1.3, level*1.3] or so, far from 7e-4 or around it."""
    spread = {("mrpc", 0): 1.0, ("mrpc", 1): 1.2, ("cola", 0): 1 / 1.2, ("cola", 1): 1.0}
    r = ko.curve_trend(_curves(lambda run, e: level * spread[run], EPOCHS_OF_RUN)).set_index("unit").loc["bernoulli"]
    assert r.kl_end_ci_low < level < r.kl_end_ci_high
    assert r.trend == "not detected" and r.slope == pytest.approx(0, abs=1e-12)
    assert r.verdict == verdict


def test_curve_trend_refuses_a_run_with_fewer_than_three_epochs():
    with pytest.raises(ValueError, match=r"cola/seed1 has 2 epoch\(s\); its trend needs at least 3"):
        ko.curve_trend(_curves(lambda run, e: 1e-4 * e, {("mrpc", 0): 8, ("cola", 1): 2}))

@pytest.mark.parametrize("n, sd, margin", [(3, 0.0093, 0.01), (6, 0.01, 0.02), (10, 0.02, 0.015)])
def test_tost_power_matches_a_monte_carlo_of_the_tost(n, sd, margin):
    rng = np.random.default_rng(n)
    studies = 20_000
    hits = sum(tost_paired(rng.normal(0.0, sd, n), margin) < 0.05 for _ in range(studies))
    simulated = hits / studies
    tolerance = 4 * math.sqrt(max(simulated * (1 - simulated), 1e-4) / studies)
    assert paired.tost_power(n, sd, margin) == pytest.approx(simulated, abs=tolerance)


def test_tost_power_refuses_a_design_it_cannot_describe():
    with pytest.raises(ValueError, match="n >= 2"):
        paired.tost_power(1, 0.01, 0.01)


def test_budget_prediction_reads_the_realised_rate_against_p():
    rows = pd.DataFrame(columns=["row", "unit", "reaches_7e-4", "kl_ci_high"])
    below = pd.DataFrame([{"row": "budget", "n_states": 6, "rate_over_p_min": 0.97, "rate_over_p_max": 0.99,
                           "mean_band_value_min": 0.85, "mean_band_value_max": 0.9}])
    above = below.assign(rate_over_p_min=1.001, rate_over_p_max=1.03)
    verdict = {name: ko.predictions(rows, rates, None).set_index("prediction").loc[2, "verdict"]
               for name, rates in (("below", below), ("above", above))}
    assert verdict == {"below": "holds", "above": "fails"}


@pytest.mark.results
def test_the_committed_readme_and_tables_recompute_from_the_committed_states(tmp_path):
    """results/kl_original/README.md and tables/ are what write_report makes of the committed states."""
    import shutil

    from typhoon.paths import repo_root

    committed = repo_root() / "results" / "kl_original"
    copy = tmp_path / "kl_original"
    shutil.copytree(committed, copy, ignore=shutil.ignore_patterns("README.md", "tables"))
    ko.write_report(copy)
    assert (copy / "README.md").read_text() == (committed / "README.md").read_text()
    for table in sorted((committed / "tables").glob("*.csv")):
        # the same table, to the last bits numpy's vectorised log and exp may differ in between CPU kinds
        pd.testing.assert_frame_equal(pd.read_csv(copy / "tables" / table.name), pd.read_csv(table),
                                      check_exact=False, rtol=1e-12, atol=0, obj=table.name)
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (committed / "README.md").read_text())
    assert [image for image in images if not (committed / image).is_file()] == []
