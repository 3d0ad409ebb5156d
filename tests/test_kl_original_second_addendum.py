"""The kl-original study's addendum as its states show it and its second addendum (issue 68), against independent
references: the measured reading of hand-made states (which rows share their states, the family of the testable
comparisons, scipy's paired t intervals at that Bonferroni level), the second addendum's curves (prediction 12's
GPU / CPU ratio and predictions 10-11 by hand and scipy, interim readings), and the command line's refusals of
what the registered design does not allow."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pandas as pd
import pytest
from kl_states import COUNTS, KEYS, bernoulli_kl_by_hand, drawn_state
from scipy import stats as st

from typhoon import cli
from typhoon.studies import kl_original as kl
from typhoon.studies.kl_original.as_measured import measured_addendum, same_states
from typhoon.studies.kl_original.design import CURVE_EPOCHS, CURVES
from typhoon.studies.kl_original.second_addendum import (
    addendum_predictions,
    second_addendum_tables,
)

SPECIALS = np.array([7, 0, 0, 0, 0])


def _write_state(out, row, task, seed, probs, max_length=128):
    folder = out / "states" / row / task / f"seed{seed}"
    folder.mkdir(parents=True)
    weights = np.where(COUNTS > 0, probs, np.nan)
    with open(folder / "masking_state.npz", "wb") as fh:
        np.savez(fh, meta=np.array(json.dumps({"p": 0.3})), weights=weights, counts=COUNTS, seen=COUNTS > 0,
                 probs=np.asarray(probs, dtype=np.float64), special_counts=SPECIALS)
    (folder / "run.json").write_text(json.dumps({"config": {"p": 0.3, "max_length": max_length}, "n_train": 20}))


@pytest.fixture
def study(tmp_path):
    """The addendum as it landed: max_length a bit-for-bit copy of numerics (at max_length 512), all_plus of
    sampler; all, numerics and sampler each their own states."""
    rng = np.random.default_rng(3)
    probs = {}
    for task, seed in KEYS:
        for row, scale in (("baseline", 0.03), ("all", 0.05), ("numerics", 0.06), ("sampler", 0.12)):
            probs[row, task, seed] = drawn_state(rng, scale)
        probs["max_length", task, seed] = probs["numerics", task, seed].copy()
        probs["all_plus", task, seed] = probs["sampler", task, seed].copy()
    for (row, task, seed), pi in probs.items():
        _write_state(tmp_path, row, task, seed, pi, max_length=512 if row in ("max_length", "all_plus") else 128)
    return tmp_path, probs


def test_the_addendum_as_measured_names_shared_states_once_and_drops_the_identity_from_the_family(study):
    out, probs = study
    states = kl.read_row_states(out)
    tables = kl.study_tables(out, states)
    assert same_states(tables["identity"]) == {"max_length": "numerics", "all_plus": "sampler"}
    measured = measured_addendum(states, tables["rows"], tables["identity"]).set_index(["rows", "against"])
    assert list(measured["testable"]) == [True, True, True, False]  # the untestable line last
    untestable = measured.loc[("max_length", "numerics")]
    assert untestable["measurement"] == "max_length" and pd.isna(untestable["change"])
    # every token of the text, specials included: 6 x (100 + 7) at 512 as at 128
    assert "training tokens cola 107, mrpc 107 at max_length 512, as 'numerics' has cola 107, mrpc 107 at " \
           "max_length 128" in untestable["why"]
    assert measured.loc[("sampler", "numerics"), "measurement"] == "sampler = all_plus"
    assert measured.loc[("all_plus", "all"), "measurement"] == "sampler = all_plus"
    assert measured.loc[("numerics", "all"), "measurement"] == "numerics = max_length"
    logs = {row: np.log([bernoulli_kl_by_hand(probs[row, *key]) for key in KEYS]) for row in ("all", "numerics", "sampler")}
    for (row, against), mine in ((("numerics", "all"), "numerics"), (("sampler", "numerics"), "sampler"),
                                 (("all_plus", "all"), "sampler")):
        r = measured.loc[(row, against)]
        paired = st.ttest_rel(logs[mine], logs[against])
        low, high = paired.confidence_interval(1 - 0.05 / 3)  # Bonferroni over the 3 testable comparisons
        assert r["family"] == 3 and r["n_pairs"] == 6
        assert (r["change_ci_low_bonferroni"], r["change_ci_high_bonferroni"]) == pytest.approx(
            (math.exp(low), math.exp(high)))
        assert r["registered"].startswith("×") and "Bonferroni over 4" in r["registered"]
    answer = kl.answer(tables)
    assert "'max_length' is untestable here" in answer and "Bonferroni over the 3 testable comparisons" in answer
    assert "('sampler = all_plus', 6 states)" in answer


def test_a_row_with_one_pair_differing_is_its_own_measurement(study):
    out, probs = study
    state = out / "states" / "max_length" / "cola" / "seed2" / "masking_state.npz"
    moved = probs["max_length", "cola", 2].copy()
    moved[1] = np.nextafter(moved[1], 1.0)  # one ulp
    folder = state.parent
    state.unlink()
    (folder / "run.json").unlink()
    folder.rmdir()
    _write_state(out, "max_length", "cola", 2, moved, max_length=512)
    states = kl.read_row_states(out)
    tables = kl.study_tables(out, states)
    assert same_states(tables["identity"]) == {"all_plus": "sampler"}
    measured = measured_addendum(states, tables["rows"], tables["identity"])
    assert measured["testable"].all() and set(measured["family"]) == {4}


def _write_curve(out, folder, task, seed, kls):
    """A curve run whose end-of-epoch per-token KL at epoch e is kls[e - 1] (every unit alike), no trace."""
    run = out / folder / task / f"seed{seed}"
    run.mkdir(parents=True)
    pd.DataFrame([{"epoch": e, **{u: v for u in kl.UNITS}} for e, v in enumerate(kls, start=1)]).to_csv(
        run / "epochs.csv", index=False)


def test_the_gpu_curve_is_compared_with_the_cpu_one_over_the_epochs_both_reached(tmp_path):
    rng = np.random.default_rng(5)
    cpu = {key: np.exp(rng.normal(math.log(1.5e-4), 0.4, 42)) for key in KEYS}
    gpu = {key: cpu[key][:45].copy() * np.exp(rng.normal(0.1, 0.3, 42)) for key in KEYS}
    gpu = {key: np.concatenate([values, [2e-4] * 8]) for key, values in gpu.items()}  # 50 epochs: past the CPU's 42
    for key in KEYS:
        _write_curve(tmp_path, "curve", *key, cpu[key])
        _write_curve(tmp_path, CURVES["all_gpu"].folder, *key, gpu[key])
    tables = second_addendum_tables(tmp_path, kl.read_curves(tmp_path))
    r = tables["curve_all_gpu_vs_cpu"].set_index("unit").loc["bernoulli"]
    per_run = [np.mean(np.log(gpu[key][:42]) - np.log(cpu[key])) for key in KEYS]  # the 42 epochs both reached
    ci = st.ttest_1samp(per_run, 0).confidence_interval(0.95)
    assert (r.gpu_over_cpu, r.ci_low, r.ci_high) == pytest.approx((math.exp(np.mean(per_run)), math.exp(ci.low),
                                                                    math.exp(ci.high)))
    assert (r.runs, r.runs_short, r.epochs_max) == (6, 0, 42)
    verdicts = addendum_predictions(tables).set_index("prediction")
    expected = "holds" if 0.5 <= math.exp(ci.low) and math.exp(ci.high) <= 2 else "not decided"
    assert verdicts.loc[12, "verdict"] == expected
    assert verdicts.loc[10, "verdict"] == verdicts.loc[11, "verdict"] == "not yet run"


def test_a_gpu_curve_short_of_the_cpu_runs_epochs_is_an_interim_reading(tmp_path):
    for key in KEYS:
        _write_curve(tmp_path, "curve", *key, [1e-4] * 42)
        _write_curve(tmp_path, CURVES["all_gpu"].folder, *key, [1e-4] * 30)
    tables = second_addendum_tables(tmp_path, kl.read_curves(tmp_path))
    verdict = addendum_predictions(tables).set_index("prediction").loc[12]
    assert verdict["verdict"] == "not decided" and "an interim reading (6 of 6 runs, 6 short" in verdict["evidence"]


@pytest.mark.parametrize("epochs, growth, verdict10, verdict11", [
    (None, 1.005, "holds", "holds"),  # at the plan: x1.005^(e-1), under 2x; the level stays below 7e-4
    (None, 1.02, "fails", "fails"),  # x1.02^99 = 7.1 on MRPC, x1.02^79 = 4.8 on CoLA; past 7e-4 at the end
    (30, 1.005, "not decided", "not decided"),  # short of the plan: an interim reading
])
def test_predictions_ten_and_eleven_read_the_all_plus_curve_at_its_last_common_epoch(tmp_path, epochs, growth,
                                                                                     verdict10, verdict11):
    rng = np.random.default_rng(9)
    for task, seed in KEYS:
        n = epochs or CURVE_EPOCHS[task]
        start = 1.5e-4 * math.exp(rng.normal(0, 0.05))
        _write_curve(tmp_path, CURVES["all_plus"].folder, task, seed, [start * growth ** e for e in range(n)])
    tables = second_addendum_tables(tmp_path, None)
    c = tables["curve_all_plus"]
    c = c[(c["reading"] == kl.END_OF_EPOCH) & (c["unit"] == "bernoulli")].iloc[0]
    last = epochs or min(CURVE_EPOCHS.values())  # the last epoch all six runs reached
    assert c.last_common_epoch == last
    ratios = [growth ** (last - 1)] * 6  # by construction every run grows alike
    assert c.change == pytest.approx(math.prod(ratios) ** (1 / 6), rel=1e-9)
    verdicts = addendum_predictions(tables).set_index("prediction")
    assert (verdicts.loc[10, "verdict"], verdicts.loc[11, "verdict"]) == (verdict10, verdict11)
    if epochs:
        assert "short of the plan: " in verdicts.loc[10, "evidence"]


def refused(argv, capsys) -> str:
    started = time.perf_counter()
    assert cli.main(argv) == 2
    assert time.perf_counter() - started < 2.0
    return capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    (["--epochs", "101"], "--epochs 101 is past the registered plan: the curve runs mrpc to 100, cola to 80"),
    (["--tasks", "cola", "--epochs", "90"], "ask for at most 80"),
    (["--curve", "all_gpu"], "the curve 'all_gpu' is registered in the numerics of a cuda device: run it with "
                             "--set device=cuda"),
    (["--curve", "all_gpu", "--set", "device=cpu"], "registered in the numerics of a cuda device"),
    (["--curve", "sideways"], "unknown curve 'sideways'; the study's curves: all, all_plus, all_gpu"),
    (["--set", "batch_order=random"], "another rule, batch order or length is another registered row or curve: "
                                      "--row (rows), --curve all / all_plus / all_gpu (curve)"),
    (["--epochs-per-cell", "0"], "--epochs-per-cell 0: a cell trains at least 1 MLM epoch"),
    (["--rehearse", "0"], "--rehearse 0: a rehearsal needs at least 1 example per run"),
])
def test_a_curve_the_registered_design_does_not_allow_is_refused_naming_what_it_allows(tmp_path, capsys, argv, said):
    err = refused(["kl-original", "curve", *argv, "--out", str(tmp_path / "study")], capsys)
    assert said in err
    assert not (tmp_path / "study").exists()  # nothing written


def test_a_rehearsal_is_refused_in_the_studys_folder_and_its_runs_by_the_studys_tables(tmp_path, capsys):
    (tmp_path / "states").mkdir()
    err = refused(["kl-original", "curve", "--rehearse", "8", "--out", str(tmp_path)], capsys)
    assert f"--rehearse: {tmp_path} holds the study's states" in err
    run = tmp_path / CURVES["all_plus"].folder / "mrpc" / "seed0"
    run.mkdir(parents=True)
    from typhoon.studies.kl_original.runs import curve_config

    config = curve_config("mrpc", 0, "all_plus", rehearse=8).to_dict()
    (run / "run.json").write_text(json.dumps({"config": config, "epochs_reached": 1}))
    before = sorted(tmp_path.rglob("*"))
    err = refused(["kl-original", "table", "--out", str(tmp_path)], capsys)
    assert "not a run of the registered curve 'all_plus' (differs in max_eval_examples, max_train_examples)" in err
    assert sorted(tmp_path.rglob("*")) == before
    config = curve_config("mrpc", 0, "all_plus").to_dict()  # the registered run's config passes that check
    (run / "run.json").write_text(json.dumps({"config": config, "epochs_reached": 1}))
    from typhoon.studies.kl_original.runs import check_curve_runs

    check_curve_runs(tmp_path)


def test_the_committed_curve_runs_are_the_registered_curves(tmp_path):
    from typhoon.paths import repo_root
    from typhoon.studies.kl_original.runs import check_curve_runs

    check_curve_runs(repo_root() / "results" / "kl_original")  # the 'all' curve's six runs: no error


def _plan_module():
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("kl_curve_gpu_plan", REPO / "benchmarks" / "kl_curve_gpu_plan.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_plan_shares_the_rate_among_the_runs_still_going_as_by_hand():
    plan = _plan_module().plan
    per_epoch = {"mrpc": 230, "cola": 535}
    # 600 steps/s among 12 runs: 50 each; MRPC would need 23,000 steps (460 s), so at 450 s all have 22,500
    reached = {(r["curve"], r["task"]): r["epochs"] for r in plan(per_epoch, 600, 450)}
    assert set(reached.values()) == {22_500 // 230, 22_500 // 535} == {97, 42}
    assert reached["all_plus", "mrpc"] == 97 and reached["all_gpu", "cola"] == 42
    # 1,200 steps/s: MRPC at its plan after 230 s, then the 6 CoLA runs share it: 42,800 - 23,000 at 200/s, 99 s
    runs = plan(per_epoch, 1200, 450)
    assert all(r["epochs"] == CURVE_EPOCHS[r["task"]] for r in runs)
    assert {round(r["finished_s"], 6) for r in runs} == {230.0, 329.0}


def test_the_results_page_gives_the_plan_the_plan_computes():
    from conftest import REPO

    module = _plan_module()
    per_epoch = {task: module.steps_per_epoch(task) for task in ("mrpc", "cola")}
    assert per_epoch == {"mrpc": 230, "cola": 535}  # 3,668 and 8,551 training examples at batch 16
    text = (REPO / "docs" / "results.md").read_text()
    total = sum(per_epoch[t] * CURVE_EPOCHS[t] for t in per_epoch) * 3 * 2
    assert f"need {total:,} MLM steps (230 an MRPC epoch, 535\na CoLA one" in text
    for rate in (150, 300, 600, 1200):
        runs = {(r["curve"], r["task"]): r["epochs"] for r in module.plan(per_epoch, rate, 450)}
        minutes = total / rate / 60
        row = f"| {rate:,} | {minutes:.2g} min | {runs['all_plus', 'mrpc']} / {runs['all_plus', 'cola']}"
        assert row in text, row
