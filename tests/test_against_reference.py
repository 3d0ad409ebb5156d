"""Your run against the reference (typhoon.analysis.reference), on synthetic output folders: agree, disagree, mixed
numerics, a missing cell. The interval is checked against scipy's own t interval."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from typhoon.analysis import reference

AMX = {"precision": "bf16", "device": "cpu", "attention": "eager", "dropout": "fast",
       "hardware": {"cpu": {"avx512f": True, "avx512_bf16": True, "amx_bf16": True}}}
AVX2 = {"precision": "fp32", "device": "cpu", "attention": "eager", "dropout": "fast", "hardware": {"cpu": {"avx2": True}}}


def make_run(folder, values: dict, numerics=AMX, loss="split,step,loss\ntrain,1,7.0\n", backbone="minilm-l6"):
    """An output folder with one record per (strategy, seed) -> dev F1, and its results.csv."""
    rows = []
    for (strategy, seed), value in values.items():
        rel = f"runs/mrpc/{backbone}/{strategy}/seed{seed}"
        (folder / rel).mkdir(parents=True)
        metrics = {"status": "ok", "final": {"dev_f1": value}, "epochs": [{"epoch": 1, "dev_f1": value}], **numerics}
        (folder / rel / "metrics.json").write_text(json.dumps(metrics))
        (folder / rel / "mlm_loss.csv").write_text(loss)
        rows.append(dict(task="mrpc", backbone=backbone, strategy=strategy, seed=seed, profile="cpu",
                         status="ok", primary_metric="f1", primary_value=value, record_path=rel))
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    return folder


REF = {("random", s): v for s, v in enumerate([0.85, 0.84, 0.86])} | {("typhoon", s): v for s, v in
                                                                       enumerate([0.845, 0.850, 0.848])}


def test_the_paired_interval_is_the_t_interval():
    d = np.array([0.01, -0.004, 0.006, 0.002])
    mean, low, high = reference.paired_interval(d)
    expected = scipy_stats.t.interval(0.90, d.size - 1, loc=d.mean(), scale=scipy_stats.sem(d))
    assert mean == pytest.approx(d.mean()) and (low, high) == pytest.approx(expected)
    assert reference.paired_interval(np.zeros(3)) == (0.0, 0.0, 0.0)  # bit-identical cells
    assert all(math.isnan(x) for x in reference.paired_interval(np.array([0.1]))[1:])  # one pair: no interval


def test_the_verdict_follows_the_stated_criterion():
    assert reference.verdict(-0.004, 0.006, 0.01) == reference.AGREES
    assert reference.verdict(0.012, 0.03, 0.01) == reference.DISAGREES
    assert reference.verdict(-0.03, -0.011, 0.01) == reference.DISAGREES
    assert reference.verdict(-0.002, 0.015, 0.01) == reference.NOT_DECIDED
    assert reference.verdict(math.nan, math.nan, 0.01) == reference.NOT_DECIDED


def test_a_bit_identical_run_agrees_everywhere(tmp_path):
    ref, run = make_run(tmp_path / "ref", REF), make_run(tmp_path / "run", REF)
    comparison = reference.compare_with_reference(run, ref)
    assert set(comparison.cells["status"]) == {reference.IDENTICAL} and comparison.cells["same_numerics"].all()
    assert list(comparison.means["verdict"]) == [reference.AGREES] * 2
    assert (comparison.means["identical_cells"] == 3).all()
    assert "6 bit-identical" in comparison.summary()


def test_the_same_numerics_with_other_numbers_is_flagged(tmp_path):
    ref = make_run(tmp_path / "ref", REF)
    run = make_run(tmp_path / "run", REF, loss="split,step,loss\ntrain,1,7.5\n")  # same metric, other loss curve
    comparison = reference.compare_with_reference(run, ref)
    assert set(comparison.cells["status"]) == {reference.SAME_NUMERICS_DIFFER}
    assert "WARNING" in comparison.summary()


def test_other_numerics_that_shift_the_mean_disagree_and_small_shifts_agree(tmp_path):
    ref = make_run(tmp_path / "ref", REF)
    shifted = {key: value + (0.05 + 0.001 * key[1] if key[0] == "random" else 0.001 * (2 * key[1] - 1.5))
               for key, value in REF.items()}
    run = make_run(tmp_path / "run", shifted, numerics=AVX2)
    comparison = reference.compare_with_reference(run, ref)
    assert set(comparison.cells["status"]) == {reference.OTHER_NUMERICS} and not comparison.cells["same_numerics"].any()
    verdicts = dict(zip(comparison.means["strategy"], comparison.means["verdict"], strict=True))
    assert verdicts == {"random": reference.DISAGREES, "typhoon": reference.AGREES}
    # the margin: the reference's pooled seed sd (random's sd 0.01, typhoon's 0.0025), here above 0.01
    pooled = math.sqrt((np.var([0.85, 0.84, 0.86], ddof=1) + np.var([0.845, 0.850, 0.848], ddof=1)) / 2)
    assert comparison.margins["margin"].iloc[0] == pytest.approx(max(0.01, pooled))


def test_other_numerics_with_every_dev_metric_equal_read_equal_not_differs(tmp_path):
    """A pipeline check on another machine: other numerics, a different loss curve, and every dev metric the
    same as the reference's (0.0 difference): the cells say "equal value", never "differs"."""
    ref = make_run(tmp_path / "ref", REF)
    run = make_run(tmp_path / "run", REF, numerics=AVX2, loss="split,step,loss\ntrain,1,7.5\n")
    comparison = reference.compare_with_reference(run, ref)
    assert (comparison.cells["run_value"] == comparison.cells["reference_value"]).all()
    assert set(comparison.cells["status"]) == {"equal value, other numerics"}
    summary = comparison.summary()
    assert "cells: 6 equal value, other numerics" in summary and "differs" not in summary
    # one cell moved: that one differs, the rest stay equal
    moved = make_run(tmp_path / "moved", {**REF, ("random", 0): 0.851}, numerics=AVX2,
                     loss="split,step,loss\ntrain,1,7.5\n")
    status = reference.compare_with_reference(moved, ref).cells.set_index(["strategy", "seed"])["status"]
    assert status[("random", 0)] == "differs (other numerics)" and status[("random", 1)] == "equal value, other numerics"


def test_mixed_numerics_and_a_missing_cell_are_said_per_cell(tmp_path):
    ref = make_run(tmp_path / "ref", REF)
    partial = {k: v for k, v in REF.items() if k != ("typhoon", 2)}
    run = make_run(tmp_path / "run", partial)
    # one cell of this run ran with other numerics
    cell = run / "runs/mrpc/minilm-l6/random/seed1/metrics.json"
    cell.write_text(json.dumps({**json.loads(cell.read_text()), **AVX2, "final": {"dev_f1": 0.835}}))
    table = pd.read_csv(run / "results.csv")  # its row, as the run's own results.csv would say
    table.loc[(table["strategy"] == "random") & (table["seed"] == 1), "primary_value"] = 0.835
    table.to_csv(run / "results.csv", index=False)
    comparison = reference.compare_with_reference(run, ref)
    status = {(r.strategy, r.seed): r.status for r in comparison.cells.itertuples()}
    assert status[("typhoon", 2)] == reference.MISSING_HERE
    assert status[("random", 1)] == reference.OTHER_NUMERICS and status[("random", 0)] == reference.IDENTICAL
    typhoon = comparison.means.set_index("strategy").loc["typhoon"]
    assert typhoon["n_pairs"] == 2  # only the seeds both runs have are paired


def test_tidy_tables_pair_each_strategy_under_each_schedule(tmp_path):
    """Two tidy results.csv (strategy and schedule apart): random under fixed and under uniform are two arms,
    each paired with the same arm of the reference, never with each other."""
    values = {("random", 0): 0.85, ("random", 1): 0.84, ("random+uniform", 0): 0.80, ("random+uniform", 1): 0.79}
    folders = []
    for name in ("ref", "run"):
        folder = make_run(tmp_path / name, values)
        table = pd.read_csv(folder / "results.csv")
        strategy_and_schedule = table["strategy"].str.partition("+")
        table["strategy"] = strategy_and_schedule[0]
        table.insert(3, "schedule", strategy_and_schedule[2].replace("", "fixed"))
        table.to_csv(folder / "results.csv", index=False)
        folders.append(folder)
    comparison = reference.compare_with_reference(folders[1], folders[0])
    assert sorted(comparison.means["strategy"]) == ["random", "random+uniform"]
    assert (comparison.cells["difference"] == 0).all() and len(comparison.cells) == 4


def test_a_truncated_results_table_is_refused_by_name(tmp_path):
    ref = make_run(tmp_path / "ref", REF)
    run = make_run(tmp_path / "run", REF)
    pd.read_csv(run / "results.csv")[["task", "seed"]].to_csv(run / "results.csv", index=False)
    with pytest.raises(ValueError, match=r"results.csv is not a results table: missing column"):
        reference.compare_with_reference(run, ref)


def test_the_reference_of_a_run_is_the_committed_run_of_its_profile_and_backbone(tmp_path, monkeypatch):
    from typhoon import paths

    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path)
    mine = make_run(tmp_path / "outputs" / "cpu", REF, backbone="minilm-l6-mlm")
    assert reference.reference_for("cpu", mine) is None  # none committed
    assert reference.no_reference_note("cpu", mine) is None  # and nothing to explain
    fresh_head = make_run(tmp_path / "results" / "cpu", REF)
    (fresh_head / "MANIFEST.json").write_text(json.dumps({"profile": "cpu"}))
    assert reference.reference_for("cpu", mine) is None  # another backbone's reference is not this run's
    note = reference.no_reference_note("cpu", mine)
    assert "not compared" in note and "minilm-l6-mlm" in note and "trained minilm-l6" in note
    adapted = make_run(tmp_path / "results" / "cpu-mlm", REF, backbone="minilm-l6-mlm")
    (adapted / "MANIFEST.json").write_text(json.dumps({"profile": "cpu"}))
    other_profile = make_run(tmp_path / "results" / "another", REF, backbone="minilm-l6-mlm")
    (other_profile / "MANIFEST.json").write_text(json.dumps({"profile": "bottleneck"}))
    assert reference.reference_for("cpu", mine) == adapted
    assert reference.reference_for("cpu", make_run(tmp_path / "outputs" / "old", REF)) == fresh_head
    assert reference.reference_for("cpu", adapted) is None  # refreshing the reference itself
    # a run with no table yet is matched by the profile's own backbones (minilm-l6-mlm)
    assert reference.reference_for("cpu", tmp_path / "outputs" / "empty") == adapted
