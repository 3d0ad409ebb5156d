"""Tests for typhoon.analysis.kl.budget_spread (the budget-spread bottleneck) and the two analysis notebooks end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from notebook_here import run_notebook_here
from scipy import stats as st

from typhoon.analysis import bottleneck_verdict
from typhoon.analysis.kl import budget_spread
from typhoon.masking import calibrate

REPO = Path(__file__).resolve().parents[1]
P = 0.15


def _kl_bern(a, b):
    """KL(Bernoulli(a) || Bernoulli(b)) by hand."""
    a = np.asarray(a, dtype=float)
    out = np.where(a > 0, a * np.log(np.where(a > 0, a, 1) / b), 0.0)
    return out + np.where(a < 1, (1 - a) * np.log(np.where(a < 1, 1 - a, 1) / (1 - b)), 0.0)


# ------------------------------------------------------------------ synthetic checks by hand
def test_few_types_minmax_and_rank_by_hand():
    # three ordinary types and one outlier, equal counts
    w = np.array([1.0, 1.0, 1.0, 100.0])
    f = np.array([10, 10, 10, 10])
    sweep = budget_spread.calibration_sweep(w, f, P, deltas=[0.0, 0.4], methods=["minmax", "rank"], taus=[])
    # minmax, delta = 0.4: z = [0, 0, 0, 1], b = [0.6, 0.6, 0.6, 1.0], beta = 4p / 2.8
    beta = 4 * P / 2.8
    pi = beta * np.array([0.6, 0.6, 0.6, 1.0])
    kl = _kl_bern(pi, P).mean()
    q = pi / pi.sum()
    tv = 0.5 * np.abs(q - 0.25).sum()
    r = sweep[(sweep.method == "minmax") & (sweep.delta == 0.4)].iloc[0]
    assert r.kl_to_uniform == pytest.approx(kl, rel=1e-12)
    assert r.budget_moved == pytest.approx(tv, rel=1e-12) and tv == pytest.approx(0.75 / 7)
    assert r.pi_max == pytest.approx(P * 4 / 2.8) and r.pi_ratio == pytest.approx(1 / 0.6)
    assert r.masked_kl == pytest.approx(float(np.sum(q * np.log(q / 0.25))), rel=1e-12)
    # rank: tied types share the average rank 1 of 0..3 -> z = [1/3, 1/3, 1/3, 1]
    b = 0.6 + 0.4 * np.array([1 / 3, 1 / 3, 1 / 3, 1.0])
    pi_r = 4 * P * b / b.sum()
    r = sweep[(sweep.method == "rank") & (sweep.delta == 0.4)].iloc[0]
    assert r.kl_to_uniform == pytest.approx(_kl_bern(pi_r, P).mean(), rel=1e-12)
    # delta = 0 is uniform masking for both
    for m in ("minmax", "rank"):
        r0 = sweep[(sweep.method == m) & (sweep.delta == 0.0)].iloc[0]
        assert r0.kl_to_uniform == pytest.approx(0, abs=1e-15) and r0.budget_moved == pytest.approx(0, abs=1e-12)


def test_pareto_weights_squash_by_hand():
    """Heavy-tailed weights: min-max crowds the bulk at the band's bottom; computed without calibrate."""
    s = budget_spread.synthetic_state(n_types=2000, tail=1.1, p=P, delta=0.4, seed=3)
    w, f = s["weights"], s["counts"].astype(float)
    for delta in (0.2, 0.4, 0.8):
        z = (w - w.min()) / (w.max() - w.min())
        b = (1 - delta) + delta * z
        pi = P * b * f.sum() / (f * b).sum()  # no type reaches 1 for delta < 1 here
        assert pi.max() < 1
        kl = float((f * _kl_bern(pi, P)).sum() / f.sum())
        q, u = f * pi / (f * pi).sum(), f / f.sum()
        sweep = budget_spread.calibration_sweep(w, s["counts"], P, deltas=[delta], methods=["minmax", "rank"], taus=[])
        r = sweep[sweep.method == "minmax"].iloc[0]
        assert r.kl_to_uniform == pytest.approx(kl, rel=1e-9)
        assert r.budget_moved == pytest.approx(0.5 * np.abs(q - u).sum(), rel=1e-9)
        # the squashing: min-max moves far less of the budget than ranks in the same band
        rk = sweep[sweep.method == "rank"].iloc[0]
        assert r.budget_moved < 0.25 * rk.budget_moved
    m = budget_spread.state_metrics(s)
    z = (w - w.min()) / (w.max() - w.min())
    assert m["median_z"] == pytest.approx(np.median(z)) and m["median_z"] < 0.01
    assert m["share_z_below_0_1"] == pytest.approx(np.mean(z < 0.1)) and m["share_z_below_0_1"] > 0.9
    assert m["kl_vs_paper"] == pytest.approx(m["kl_to_uniform"] / 7e-4)
    assert m["spearman_w_pi"] == pytest.approx(1.0)


def test_sweep_shape_softmax_and_monotone():
    s = budget_spread.synthetic_state(n_types=500, seed=1, unseen_share=0.1)
    sw = budget_spread.calibration_sweep(s["weights"], s["counts"], P, seen=s["seen"])
    n_d, n_t = len(budget_spread.DEFAULT_DELTAS), len(budget_spread.DEFAULT_TAUS)
    assert len(sw) == 2 * n_d + n_t
    soft = sw[sw.method == "softmax"]
    assert soft["delta"].isna().all() and soft["tau"].tolist() == list(budget_spread.DEFAULT_TAUS)
    # smaller temperature -> further from uniform
    assert soft["kl_to_uniform"].is_monotonic_decreasing
    for m in ("minmax", "rank"):
        kl = sw[sw.method == m].sort_values("delta")["kl_to_uniform"].to_numpy()
        assert np.all(np.diff(kl) >= -1e-15)
    with pytest.raises(ValueError, match="unknown calibration"):
        budget_spread.calibration_sweep(s["weights"], s["counts"], P, methods=["zscore"])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        budget_spread.calibration_sweep(s["weights"], s["counts"], P, deltas=[1.5])


# ------------------------------------------------------------------ fake outputs directory
def _save_state(path: Path, seed: int, n_types: int = 300) -> None:
    s = budget_spread.synthetic_state(n_types=n_types, seed=seed, unseen_share=0.05)
    meta = dict(name="typhoon", p=P, delta=0.4, lam=0.8, calibration="minmax", tau=1.0, steps=10,
                kl_to_uniform=s["meta"]["kl_to_uniform"])
    probs = calibrate(s["weights"], s["counts"], P, method="minmax", delta=0.4, seen=s["seen"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, weights=s["weights"], counts=s["counts"], seen=s["seen"], probs=probs,
                 meta=np.array(json.dumps(meta)))


def make_outputs(root: Path, seeds: int = 3, strategies=("typhoon", "random", "whole_word"),
                 tasks=("mrpc",), backbones=("minilm",), states: bool = True, losses: bool = True) -> Path:
    rng = np.random.default_rng(0)
    rows = []
    for task in tasks:
        for bb in backbones:
            for strat in strategies:
                for seed in range(seeds):
                    rec = f"runs/{task}/{bb}/{strat}/seed{seed}"
                    (root / rec).mkdir(parents=True, exist_ok=True)
                    v = 0.80 + rng.normal(0, 0.01)
                    rows.append(dict(task=task, backbone=bb, strategy=strat, seed=seed, profile="smoke",
                                     status="ok", primary_metric="f1", primary_value=v, majority_value=0.81,
                                     dev_accuracy=v, dev_f1=v, dev_mcc=np.nan, mlm_wall_s=1.0, ft_wall_s=1.0,
                                     wall_s=2.0, mlm_tokens_per_s=1e3, ft_tokens_per_s=1e3, device="cpu",
                                     record_path=rec, error=""))
                    if losses:
                        steps = np.arange(0, 40, 10)
                        tr = pd.DataFrame(dict(step=steps, epoch=0, split="train",
                                               loss=6 - 0.02 * steps + rng.normal(0, 0.05, len(steps))))
                        dv = pd.DataFrame(dict(step=[39], epoch=[0], split="dev", loss=[5.5]))
                        pd.concat([tr, dv]).to_csv(root / rec / "mlm_loss.csv", index=False)
                    if states and strat.startswith("typhoon"):
                        _save_state(root / rec / "masking_state.npz", seed)
    pd.DataFrame(rows).to_csv(root / "results.csv", index=False)
    return root


def test_find_summarize_and_sweep_states(tmp_path):
    out = make_outputs(tmp_path, seeds=3)
    results = pd.read_csv(out / "results.csv")
    found = budget_spread.find_masking_states(results, out)
    assert len(found) == 3 and found["exists"].all()
    # a path to results.csv works too; a missing one gives an empty table with a note
    assert len(budget_spread.find_masking_states(out / "results.csv", out)) == 3
    none = budget_spread.find_masking_states(tmp_path / "nope.csv", out)
    assert none.empty and "no results table" in none.attrs["note"]
    states = budget_spread.summarize_states(found)
    assert len(states) == 3 and set(states["calibration"]) == {"minmax"}
    st = budget_spread.load_masking_state(found["path"].iloc[0])
    m = budget_spread.state_metrics(st)
    assert states.iloc[0]["kl_to_uniform"] == pytest.approx(m["kl_to_uniform"])
    assert m["n_seen"] == int(st["seen"].sum()) < m["n_types"]
    sw = budget_spread.sweep_states(found, deltas=[0.2, 0.4], taus=[1.0])
    assert len(sw) == 3 * (2 * 2 + 1) and list(sw.columns[:4]) == ["task", "backbone", "strategy", "seed"]
    label, state = budget_spread.analysis_source(found, states)
    rep = budget_spread.representative_state(states, found)
    assert label.endswith(f"seed {rep['seed']}") and state["meta"]["p"] == P
    median = states["kl_to_uniform"].median()
    assert budget_spread.state_metrics(state)["kl_to_uniform"] == pytest.approx(median)
    label, state = budget_spread.analysis_source(found.iloc[:0], states.iloc[:0])
    assert label.startswith("synthetic")


def test_bottleneck_conclusion_reads_numbers(tmp_path):
    out = make_outputs(tmp_path, seeds=2)
    found = budget_spread.find_masking_states(out / "results.csv", out)
    states = budget_spread.summarize_states(found)
    label, state = budget_spread.analysis_source(found, states)
    sweep = budget_spread.calibration_sweep(state["weights"], state["counts"], P, seen=state["seen"])
    text = budget_spread.bottleneck_conclusion(states, sweep, label, delta=0.4)
    assert f"{states['kl_to_uniform'].median():.2e}" in text
    assert "Bottleneck" in text
    synth = budget_spread.bottleneck_conclusion(None, sweep, "synthetic")
    assert "No saved Typhoon masking states" in synth
    with pytest.raises(ValueError, match="sweep"):
        budget_spread.bottleneck_conclusion(states, sweep.iloc[:0], label)


def test_bottleneck_conclusion_states_the_sweeps_numbers():
    """The sweep's numbers, written out by hand: a sweep row of min-max and one of rank calibration at
    delta = 0.4 with known values."""
    sweep = pd.DataFrame([
        dict(method="minmax", delta=0.4, tau=np.nan, kl_to_uniform=1.234e-4, budget_moved=0.0567, pi_ratio=1.66,
             pi_p90_p10=1.25),
        dict(method="rank", delta=0.4, tau=np.nan, kl_to_uniform=3.7e-3, budget_moved=0.2, pi_ratio=1.66,
             pi_p90_p10=1.5)])
    text = budget_spread.bottleneck_conclusion(None, sweep, "a hand-made state", delta=0.4)
    assert ("min-max gives KL 1.23e-04 nats/token and moves 5.67% of the budget (max/min pi 1.66, "
            "p90/p10 1.25); rank calibration in the same band gives KL 3.70e-03 (30x), moves 20.00%") in text
    # 0.0567 / 0.2 of rank's budget; 1 - 0.0567 overlap with uniform masking
    assert "moves 0.28 of what rank calibration moves" in text and "overlaps 94.33% with" in text


def test_state_errors(tmp_path):
    p = tmp_path / "bad.npz"
    with open(p, "wb") as fh:
        np.savez(fh, weights=np.ones(3), counts=np.ones(4, dtype=np.int64), seen=np.ones(3, bool),
                 probs=np.ones(3), meta=np.array(json.dumps({"p": P})))
    with pytest.raises(ValueError, match="one length"):
        budget_spread.load_masking_state(p)
    empty = dict(weights=np.zeros(0), counts=np.zeros(0, np.int64), seen=np.zeros(0, bool), probs=np.zeros(0),
                 meta={"p": P})
    with pytest.raises(ValueError, match="empty"):
        budget_spread.state_metrics(empty)
    with pytest.raises(ValueError, match="record_path"):
        budget_spread.find_masking_states(pd.DataFrame({"task": ["a"]}), tmp_path)


def test_runs_are_compared_with_the_papers_kl():
    """The paper reports about 7e-4 nats/token between its calibrated masking and uniform masking; the
    conclusion states each run's KL against that figure."""
    synthetic = budget_spread.synthetic_state(n_types=200, seed=0)
    sweep = budget_spread.calibration_sweep(synthetic["weights"], synthetic["counts"], P, deltas=[0.4, 1.0], taus=[1.0])
    states = pd.DataFrame({"kl_to_uniform": [7e-4, 1.4e-3, 2.1e-3], "budget_moved": 0.01, "pi_ratio": 1.5,
                           "median_z": 0.1, "share_z_below_0_1": 0.5})
    text = budget_spread.bottleneck_conclusion(states, sweep, "three runs")
    assert "1.40e-03 nats/token (median; range 7.00e-04-2.10e-03), 2x the paper's ~7e-04" in text


# ------------------------------------------------------------------ notebooks end to end
def _run(nb: str, out: Path, tmp_path: Path, **params) -> None:
    papermill = pytest.importorskip("papermill")
    papermill.execute_notebook(str(REPO / "notebooks" / nb), str(tmp_path / f"executed_{nb}"),
                               parameters={"out_dir": str(out), **params}, kernel_name="python3",
                               cwd=str(REPO), progress_bar=False)


def _stored_without_outputs(nb: str) -> None:
    import nbformat

    book = nbformat.read(REPO / "notebooks" / nb, as_version=4)
    assert book.cells[0].cell_type == "markdown"
    assert "parameters" in book.cells[1].metadata.get("tags", [])
    for c in book.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None


def test_notebooks_end_to_end(tmp_path):
    """Every table and figure the two notebooks write, their code run in this process (tests/notebook_here.py;
    the next test and the smoke run execute them in kernels)."""
    _stored_without_outputs("20_statistics.ipynb")
    _stored_without_outputs("30_budget_spread.ipynb")
    out = make_outputs(tmp_path / "outputs", seeds=3)
    run_notebook_here(REPO / "notebooks" / "20_statistics.ipynb", {"out_dir": str(out), "margin": 0.02})
    run_notebook_here(REPO / "notebooks" / "30_budget_spread.ipynb",
                      {"out_dir": str(out), "deltas": [0.0, 0.4, 1.0], "taus": [0.5, 1.0]})
    for name in ("summary", "comparisons", "seeds_needed", "expected_max", "degenerate", "budget_states",
                 "budget_sweep", "budget_synthetic_sweep"):
        for ext in ("csv", "md", "tex"):
            assert (out / "stats" / f"{name}.{ext}").stat().st_size > 0
    for fig in ("metric_per_seed", "paired_differences", "expected_max", "mlm_loss", "budget_rank",
                "budget_pi_hist", "budget_sweep", "budget_sweep_synthetic"):
        for ext in ("png", "svg"):
            assert (out / "figures" / f"{fig}.{ext}").stat().st_size > 0
    comp = pd.read_csv(out / "stats" / "comparisons.csv")
    assert len(comp) == 3 and (comp["margin"] == 0.02).all()


@pytest.mark.slow
def test_notebooks_smoke_one_seed_no_states(tmp_path):
    """The tiny profile: one seed, no typhoon state -> tests are skipped with a reason, synthetic only."""
    out = make_outputs(tmp_path / "outputs", seeds=1, strategies=("random", "whole_word", "span"),
                       states=False, losses=False)
    _run("20_statistics.ipynb", out, tmp_path)
    _run("30_budget_spread.ipynb", out, tmp_path, deltas=[0.0, 0.4, 1.0], taus=[1.0])
    executed = json.loads((tmp_path / "executed_20_statistics.ipynb").read_text())
    text = json.dumps(executed)
    assert "skipped" in text and "paired seed" in text
    executed = json.dumps(json.loads((tmp_path / "executed_30_budget_spread.ipynb").read_text()))
    assert "No saved Typhoon masking states" in executed
    assert (out / "figures" / "budget_sweep_synthetic.png").stat().st_size > 0


# --------------------------------------------------------------------------------------------------
# bottleneck_verdict: does moving the budget help? (synthetic results tables)


def _results(values: dict[str, list[float]], moved: dict[str, float], task="mrpc") -> pd.DataFrame:
    rows = []
    for strategy, scores in values.items():
        for seed, score in enumerate(scores):
            rows.append(dict(task=task, backbone="minilm-l6", strategy=strategy, seed=seed, status="ok",
                             primary_metric="f1", primary_value=score, budget_moved=moved.get(strategy),
                             kl_to_uniform=None if strategy not in moved else moved[strategy] / 3))
    return pd.DataFrame(rows)


RANDOM_F1 = [0.80, 0.83, 0.79, 0.84, 0.81, 0.82, 0.78, 0.85]


def test_verdict_when_moving_the_budget_helps():
    noise = [0.001, -0.002, 0.0015, 0.0, -0.001, 0.002, -0.0005, 0.001]
    softmax = [r + 0.05 + e for r, e in zip(RANDOM_F1, noise, strict=True)]
    table, sentence = bottleneck_verdict.bottleneck_verdict(
        _results({"random": RANDOM_F1, "typhoon_softmax": softmax}, {"typhoon_softmax": 0.37}))
    row = table.iloc[0]
    d = np.array(softmax) - np.array(RANDOM_F1)
    lo, hi = st.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(len(d)))
    assert (row.strategy, row.calibration, row.saliency, row.n) == ("typhoon_softmax", "softmax", "mlm", 8)
    assert row["diff"] == pytest.approx(d.mean()) and (row.ci_low, row.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert row.budget_moved == pytest.approx(0.37) and row.outcome == "helps"
    assert sentence.startswith("Moving the budget helps") and "typhoon_softmax on mrpc (+0.050, moving 37%)" in sentence


def test_verdict_when_moving_the_budget_does_not_help():
    tiny = [0.0005, -0.0004, 0.0003, -0.0002, 0.0001, -0.0003, 0.0004, -0.0001]
    values = {"random": RANDOM_F1, "typhoon": [r + e for r, e in zip(RANDOM_F1, tiny, strict=True)],
              "typhoon_task": [r - e for r, e in zip(RANDOM_F1, tiny, strict=True)]}
    table, sentence = bottleneck_verdict.bottleneck_verdict(_results(values, {"typhoon": 0.005, "typhoon_task": 0.2}),
                                                       margin=0.01)
    assert list(table["strategy"]) == ["typhoon", "typhoon_task"]
    assert list(table["saliency"]) == ["mlm", "task"] and list(table["calibration"]) == ["minmax", "minmax"]
    assert table["task_model_accuracy"].isna().all() and table["task_model_learned"].tolist() == [None, None]
    assert (table["outcome"] == "no difference that matters").all() and (table["tost_p"] < 0.05).all()
    assert sentence.startswith("Moving the budget does not help (up to 20% of the budget moved)")
    assert (table["seeds_for_power"] >= 2).all()


def test_verdict_with_too_few_seeds_and_without_bottleneck_runs():
    table, sentence = bottleneck_verdict.bottleneck_verdict(
        _results({"random": RANDOM_F1[:1], "typhoon_rank": [0.9]}, {"typhoon_rank": 0.07}))
    assert list(table["outcome"]) == ["too few seeds"] and sentence.startswith("Too few seeds to tell")
    assert table.iloc[0]["diff"] == pytest.approx(0.9 - RANDOM_F1[0]) and np.isnan(table.iloc[0]["seeds_for_power"])
    same = [0.81] * 3  # every run the same score (a model stuck at the majority class): no spread to test
    table, sentence = bottleneck_verdict.bottleneck_verdict(_results({"random": same, "typhoon": same}, {"typhoon": 0.01}))
    assert list(table["outcome"]) == ["cannot be tested"] and sentence.startswith("Cannot tell")
    table, sentence = bottleneck_verdict.bottleneck_verdict(_results({"random": RANDOM_F1, "whole_word": RANDOM_F1}, {}))
    assert table.empty and sentence.startswith("No bottleneck runs")


def test_verdict_is_inconclusive_with_noisy_small_differences():
    noisy = [0.03, -0.02, 0.01, -0.03, 0.02, -0.01, 0.025, -0.02]
    table, sentence = bottleneck_verdict.bottleneck_verdict(
        _results({"random": RANDOM_F1, "typhoon_rank": [r + e for r, e in zip(RANDOM_F1, noisy, strict=True)]},
                 {"typhoon_rank": 0.07}))
    assert table.iloc[0]["outcome"] == "inconclusive" and sentence.startswith("Inconclusive")
    assert f"about {int(table.iloc[0]['seeds_for_power'])} seeds" in sentence


def test_the_verdict_says_its_holm_family_beside_the_p_values():
    """Its Holm family (random vs each typhoon-family strategy) is not that of stats/comparisons.csv
    (typhoon vs each strategy): each table names its own, so two Holm p of one test can be told apart."""
    noisy = [0.03, -0.02, 0.01, -0.03, 0.02, -0.01, 0.025, -0.02]
    values = {"random": RANDOM_F1, "typhoon": [r + e for r, e in zip(RANDOM_F1, noisy, strict=True)]}
    frames = [_results(values, {"typhoon": 0.004}, task=t) for t in ("mrpc", "cola")]
    table, _ = bottleneck_verdict.bottleneck_verdict(pd.concat(frames, ignore_index=True))
    assert (table["holm_family"] == "Holm over the 2 comparisons of random vs each other strategy, "
                                    "every task × backbone").all()
    p = [st.ttest_rel(values["typhoon"], RANDOM_F1).pvalue] * 2
    assert table["p_holm"].to_numpy() == pytest.approx(np.minimum(1, 2 * np.array(p)))


def test_verdict_says_whether_the_task_model_behind_task_saliency_learned():
    values = {"random": RANDOM_F1, "typhoon_task": [r + 0.001 for r in RANDOM_F1]}
    results = _results(values, {"typhoon_task": 0.004})
    accuracy = [0.82, 0.80, 0.66, 0.81, 0.79, 0.83, 0.80, 0.81]  # seed 2's model stayed at the majority class
    task_rows = results["strategy"] == "typhoon_task"
    results.loc[task_rows, "task_head_accuracy"] = accuracy
    results.loc[task_rows, "task_head_learned"] = ["True", "True", "False", "True", "True", "True", "True", "True"]
    row = bottleneck_verdict.bottleneck_verdict(results)[0].iloc[0]
    assert row.task_model_accuracy == pytest.approx(np.mean(accuracy)) and row.task_model_learned == "7/8"
