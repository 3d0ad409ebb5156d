"""Your run against the reference (typhoon.analysis.reference), on synthetic output folders: agree, disagree, mixed
numerics, a missing cell. The interval is checked against scipy's own t interval."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from typhoon.analysis import reference

TORCH = {"versions": {"torch": "2.13.0+cpu"}}
AMX = {"precision": "bf16", "device": "cpu", "attention": "eager", "dropout": "fast", **TORCH,
       "hardware": {"cpu": {"avx512f": True, "avx512_bf16": True, "amx_bf16": True, "model": "Intel(R) Xeon(R) Platinum"}}}
AVX2 = {"precision": "fp32", "device": "cpu", "attention": "eager", "dropout": "fast", **TORCH,
        "hardware": {"cpu": {"avx2": True, "model": "AMD EPYC 7B12"}}}
# one kernel family (fp32 AVX-512 products), two vendors: the Intel Xeon against the reference's AMD EPYC
AVX512_INTEL = {"precision": "fp32", "device": "cpu", "attention": "eager", "dropout": "fast", **TORCH,
                "hardware": {"cpu": {"avx2": True, "avx512f": True, "model": "Intel(R) Xeon(R) Processor"}}}
AVX512_AMD = {**AVX512_INTEL, "hardware": {"cpu": {"avx2": True, "avx512f": True, "model": "AMD EPYC"}}}


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


def test_a_strategy_with_one_seed_is_one_pair_said_as_its_cell_compares_never_not_decided(tmp_path):
    """The smoke grid's MiniLM cell: one seed in both runs, the same record in both. One pair has no interval, so
    no verdict; the summary says so, and says the pair is bit-identical (as the cells line does), not that it is
    "not decided". The two strategies with three seeds keep their verdicts."""
    one_seed = {**REF, ("whole_word", 0): 0.83}
    ref, run = make_run(tmp_path / "ref", one_seed), make_run(tmp_path / "run", one_seed)
    comparison = reference.compare_with_reference(run, ref)
    verdicts = comparison.means.set_index("strategy")["verdict"].to_dict()
    assert verdicts == {"random": reference.AGREES, "typhoon": reference.AGREES, "whole_word": reference.ONE_PAIR}
    summary = comparison.summary()
    assert "cells: 7 bit-identical" in summary and "not decided" not in summary, summary
    assert "2 agrees of 2 with two or more seeds" in summary, summary
    assert ("1 of 3 with one seed in both runs (one pair: no interval, no verdict on the mean): "
            "mrpc/minilm-l6/whole_word +0.0000, bit-identical") in summary, summary
    # the same pair from other numerics, 0.012 apart: said with its difference and the cell's status
    moved = make_run(tmp_path / "moved", {**REF, ("whole_word", 0): 0.842}, numerics=AVX2)
    summary = reference.compare_with_reference(moved, ref).summary()
    assert "mrpc/minilm-l6/whole_word +0.0120, differs (other numerics)" in summary, summary


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


def test_the_cpu_vendor_is_read_off_the_model_name():
    from typhoon.machine import cpu_vendor

    assert cpu_vendor("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz") == "Intel"
    assert cpu_vendor("AMD EPYC 9B14") == "AMD" and cpu_vendor("AMD EPYC") == "AMD"
    assert cpu_vendor("Neoverse-N1") == "Arm" and cpu_vendor("") == "unknown" and cpu_vendor(None) == "unknown"


LOSS = "step,epoch,split,loss\n1,1,train,7.0\n2,1,train,6.5\n"
LOSS_MOVED = "step,epoch,split,loss\n1,1,train,7.000007\n2,1,train,6.5\n"  # 1e-6 of 7.0: another summation order


def test_another_vendor_of_one_kernel_family_agrees_within_the_tolerance_with_no_warning(tmp_path):
    """The issue's false alarm: the same fp32 AVX-512 kernels on an Intel and on an AMD CPU, every dev metric
    equal, the MLM losses 1e-6 apart. Not the same numerics (no bit-identity expected), so no warning; every
    number within 1e-5, said so."""
    ref = make_run(tmp_path / "ref", REF, numerics=AVX512_AMD, loss=LOSS)
    run = make_run(tmp_path / "run", REF, numerics=AVX512_INTEL, loss=LOSS_MOVED)
    comparison = reference.compare_with_reference(run, ref)
    assert set(comparison.cells["status"]) == {reference.WITHIN_TOLERANCE}
    assert not comparison.cells["same_numerics"].any()
    assert comparison.cells["largest_difference"].to_numpy() == pytest.approx(0.000007 / 7.0)  # relative: 1e-6
    assert "Intel cpu (avx512)" in comparison.cells["run_numerics"].iloc[0]
    assert "AMD cpu (avx512)" in comparison.cells["reference_numerics"].iloc[0]
    summary = comparison.summary()
    assert "WARNING" not in summary and "agrees within 1e-5 on every metric" in summary, summary
    assert "largest difference 1.0e-06" in summary


def test_the_same_vendor_kernels_precision_and_torch_must_be_bit_identical(tmp_path):
    """The same CPU vendor and kernels, precision and torch build: the 1e-6 is a warning. Another torch build
    alone makes them other numerics again."""
    ref = make_run(tmp_path / "ref", REF, numerics=AVX512_INTEL, loss=LOSS)
    run = make_run(tmp_path / "run", REF, numerics=AVX512_INTEL, loss=LOSS_MOVED)
    comparison = reference.compare_with_reference(run, ref)
    assert set(comparison.cells["status"]) == {reference.SAME_NUMERICS_DIFFER}
    assert "WARNING" in comparison.summary()
    other_torch = make_run(tmp_path / "torch", REF, numerics={**AVX512_INTEL, "versions": {"torch": "2.12.1+cpu"}},
                           loss=LOSS_MOVED)
    comparison = reference.compare_with_reference(other_torch, ref)
    assert set(comparison.cells["status"]) == {reference.WITHIN_TOLERANCE}
    assert "torch 2.12.1+cpu" in comparison.summary() and "WARNING" not in comparison.summary()


def test_other_numerics_beyond_the_tolerance_are_said_with_the_largest_difference(tmp_path):
    ref = make_run(tmp_path / "ref", REF, numerics=AVX512_AMD, loss=LOSS)
    run = make_run(tmp_path / "run", {**REF, ("random", 0): 0.86}, numerics=AVX512_INTEL, loss=LOSS)
    comparison = reference.compare_with_reference(run, ref)
    cells = comparison.cells.set_index(["strategy", "seed"])
    assert cells.loc[("random", 0), "status"] == reference.OTHER_NUMERICS
    assert cells.loc[("random", 0), "largest_difference"] == pytest.approx(0.01)  # dev F1 0.86 against 0.85
    assert cells.loc[("random", 1), "status"] == reference.IDENTICAL  # equal bits are equal, whatever ran them
    summary = comparison.summary()
    assert "1 cell(s) of other numerics: 0 agree within 1e-5" in summary and "largest 1.0e-02" in summary, summary


def test_an_older_reference_reads_the_fields_it_lacks_at_their_defaults_said_once(tmp_path):
    """results/smoke's config.json predates `budget`, `ema_start` and `unseen`: it still compares, and the
    summary says once which fields were read at which defaults (the defaults the docs give them)."""
    from typhoon.profiles import resolve

    ref = make_run(tmp_path / "ref", REF)
    run = make_run(tmp_path / "run", REF)
    for folder, drop in ((ref, ("budget", "ema_start", "unseen")), (run, ())):
        for (strategy, seed) in REF:
            config = resolve("smoke", dict(task="mrpc", backbone="minilm-l6", strategy=strategy, seed=seed)).to_dict()
            record = folder / f"runs/mrpc/minilm-l6/{strategy}/seed{seed}/config.json"
            record.write_text(json.dumps({k: v for k, v in config.items() if k not in drop}))
    summary = reference.compare_with_reference(run, ref).summary()
    assert summary.count("predate") == 1, summary
    assert ("the reference's records predate field(s) budget, ema_start, unseen: read at their defaults "
            "(budget=non_special, ema_start=first_sighting, unseen=neutral)") in summary


def test_the_committed_smoke_run_against_a_run_of_another_vendor(tmp_path):
    """The committed results/smoke (an AMD EPYC, fp32 AVX-512) against the same records said to come from an
    Intel Xeon, with their MLM losses moved by 1e-6 of their value: within the tolerance, no warning."""
    import shutil

    from conftest import REPO

    ref = REPO / "results" / "smoke"
    run = tmp_path / "run"
    shutil.copytree(ref, run, ignore=shutil.ignore_patterns("notebooks", "figures", "report.html", "setup"))
    for metrics_file in sorted(run.glob("runs/*/*/*/*/metrics.json")):
        metrics = json.loads(metrics_file.read_text())
        assert "AMD" in metrics["hardware"]["cpu"]["model"]
        metrics["hardware"]["cpu"]["model"] = "Intel(R) Xeon(R) Processor"
        metrics_file.write_text(json.dumps(metrics))
        loss = pd.read_csv(metrics_file.parent / "mlm_loss.csv")
        loss["loss"] *= 1 + 1e-6
        loss.to_csv(metrics_file.parent / "mlm_loss.csv", index=False)
    comparison = reference.compare_with_reference(run, ref)
    assert set(comparison.cells["status"]) == {reference.WITHIN_TOLERANCE}
    assert comparison.cells["largest_difference"].max() == pytest.approx(1e-6, rel=0.01)
    summary = comparison.summary()
    assert "WARNING" not in summary and "agrees within 1e-5 on every metric" in summary


def test_a_reference_with_one_seed_has_no_sd_and_says_so(tmp_path):
    """One seed per strategy: no seed-to-seed sd. The cell is empty (never "nan"), the note says why, and the
    margin is the study's 0.01."""
    one_seed = {key: value for key, value in REF.items() if key[1] == 0}
    ref, run = make_run(tmp_path / "ref", one_seed), make_run(tmp_path / "run", one_seed)
    comparison = reference.compare_with_reference(run, ref)
    margins = comparison.margins.iloc[0]
    assert math.isnan(margins["reference_seed_sd"]) and margins["margin"] == 0.01
    assert "one seed per strategy: no sd" in margins["note"]
    shown = comparison.margins_table()
    assert shown["reference_seed_sd"].tolist() == [""] and shown["margin"].tolist() == ["0.0100"]
    assert "nan" not in shown.to_string().lower()
    # with seeds: the sd to 4 digits, and the note says which of sd and 0.01 the margin is
    shown = reference.compare_with_reference(make_run(tmp_path / "run3", REF), make_run(tmp_path / "ref3", REF)).margins_table()
    pooled = math.sqrt((np.var([0.85, 0.84, 0.86], ddof=1) + np.var([0.845, 0.850, 0.848], ddof=1)) / 2)
    assert pooled < 0.01 and shown["reference_seed_sd"].tolist() == [f"{pooled:.4f}"]
    assert shown["note"].tolist() == ["the study's 0.01 (above the sd)"] and shown["margin"].tolist() == ["0.0100"]
