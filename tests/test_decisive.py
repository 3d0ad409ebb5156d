"""The decisive runner's planning (typhoon/studies/sequential/decisive.py) on synthetic records: which cells the next look
needs, that decided comparisons stop costing cells, stopping when all are decided, capping. No training."""

import zlib

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from typhoon.profiles import get_profile
from typhoon.records import locks, result_rows, run_numerics, run_record, schema
from typhoon.studies import profile_study as study_loop
from typhoon.studies.grid import policy as grid
from typhoon.studies.sequential import checks as decisive_checks
from typhoon.studies.sequential import decisive
from typhoon.studies.sequential import design as decisive_design
from typhoon.studies.sequential import policy as sequential_grid
from typhoon.training import device_settings


@pytest.fixture(scope="module")
def study():
    return decisive_design.study_design("decisive")


def synthetic(study, seeds, value=lambda task, strategy, seed: 0.8, skip=()):
    """A results table with an ok row per (task, strategy, seed) for seeds in ``seeds[strategy]``."""
    rows = []
    for task in study.tasks:
        for strategy in study.arms:
            for seed in seeds.get(strategy, seeds.get("*", [])):
                if (task, strategy, seed) not in skip:
                    rows.append({"task": task, "backbone": "minilm-l6", "strategy": strategy, "schedule": "fixed", "seed": seed,
                                 "status": "ok", "primary_value": value(task, strategy, seed)})
    return pd.DataFrame(rows).reindex(columns=schema.RESULT_COLUMNS)


def noise(scale, offset=0.0):
    def value(task, strategy, seed):
        rng = np.random.default_rng(zlib.crc32(f"{task}/{strategy}/{seed}".encode()))
        return 0.8 + (offset if strategy != "random" else 0.0) + rng.normal(0, scale)
    return value


def test_the_design_is_the_registered_one(study):
    assert study.design.looks == (3, 6, 10, 13, 16) and study.n_comparisons == 10
    assert study.design.alpha_different == pytest.approx(0.005) and study.margins == {"mrpc": 0.01, "cola": 0.02}
    assert get_profile("decisive").seeds == list(range(16))


def test_first_plan_reuses_three_seeds_and_starts_the_new_arm(study):
    """Seeds 0-2 of every arm but typhoon_task exist (results/cpu, results/bottleneck): the next look
    (6 seeds) needs seeds 3-5 of those arms, and typhoon_task starts at its first look (seeds 0-2)."""
    results = synthetic(study, {"*": [0, 1, 2], "typhoon_task": []}, noise(0.01))
    plan = decisive.plan_next_look(results, study)
    got = plan.groupby(["task", "strategy"])["seed"].apply(list).to_dict()
    for task in study.tasks:
        for arm in ("random", "whole_word", "typhoon", "typhoon_softmax"):
            assert got[(task, arm)] == [3, 4, 5]
        assert got[(task, "typhoon_task")] == [0, 1, 2]
    assert len(plan) == 30


def test_decided_comparisons_stop_costing_cells(study):
    """Every arm equal to random up to 1e-5 except typhoon_softmax, which is noisy: at 6 seeds all
    comparisons but typhoon_softmax - random are equivalent, so the next look trains only its two arms."""
    def value(task, strategy, seed):
        return noise(0.05)(task, strategy, seed) if strategy == "typhoon_softmax" else 0.8 + 1e-5 * seed * (strategy == "typhoon")
    results = synthetic(study, {"*": range(6)}, value)
    history, verdicts = decisive.analyse(results, study)
    open_ = verdicts[verdicts["verdict"] == "continue"]
    assert set(open_["comparison"]) == {"typhoon_softmax - random"}
    assert (verdicts[verdicts["verdict"] != "continue"]["verdict"] == "equivalent").all()
    plan = decisive.plan_next_look(results, study)
    assert set(plan["strategy"]) == {"typhoon_softmax", "random"} and set(plan["seed"]) == {6, 7, 8, 9}


def test_nothing_to_train_when_every_comparison_is_decided(study):
    results = synthetic(study, {"*": range(6)}, lambda task, strategy, seed: 0.8 + 1e-6 * seed)
    assert decisive.plan_next_look(results, study).empty
    _, verdicts = decisive.analyse(results, study)
    assert (verdicts["verdict"] == "equivalent").all() and verdicts["next_look_seeds"].isna().all()


def test_a_comparison_is_capped(study):
    """Differences of about half the margin with a large sd decide nothing: at 16 seeds every comparison is
    undecided at cap and the plan is empty (nothing beyond the cap is ever trained)."""
    results = synthetic(study, {"*": range(16)}, noise(0.05))
    _, verdicts = decisive.analyse(results, study)
    assert (verdicts["verdict"] == "undecided at cap").all() and (verdicts["n_seeds"] == 16).all()
    assert decisive.plan_next_look(results, study).empty


def test_a_missing_seed_is_planned_again(study):
    """A failed or missing cell inside a look is what the next plan asks for (resuming)."""
    results = synthetic(study, {"*": range(6)}, noise(0.01), skip={("cola", "typhoon", 4)})
    plan = decisive.plan_next_look(results, study)
    assert ("cola", "typhoon", 4) in set(zip(plan["task"], plan["strategy"], plan["seed"], strict=True))


def test_a_bad_design_is_named(study):
    spec = get_profile("decisive")
    spec.design = {**spec.design, "margin": {"mrpc": 0.01}}
    with pytest.raises(ValueError, match=r"\[decisive.design\].*margin"):
        decisive_design.study_design(spec)


def test_mixed_numerics_within_a_seed_are_refused(study, tmp_path, monkeypatch):

    spec = get_profile("decisive")
    configs = decisive.grid_configs(spec)
    bf16 = run_numerics.Numerics("bf16", "cpu", "amx", "eager", "fast")
    # patched where the seed check reads them (decisive imports them from the records and training faces)
    monkeypatch.setattr(decisive, "record_numerics_detail",
                        lambda run_dir: bf16 if "seed3" in str(run_dir) and "random" in str(run_dir) else None)
    monkeypatch.setattr(decisive, "numerics_here",
                        lambda config: run_numerics.Numerics("fp32", "cpu", "avx512", "eager", "fast"))
    with pytest.raises(ValueError, match="seed 3 of mrpc.*must not mix"):
        decisive.check_seed_numerics([configs[("mrpc", "typhoon", 3)]], configs, tmp_path)
    decisive.check_seed_numerics([configs[("mrpc", "typhoon", 4)]], configs, tmp_path)  # seed 4 has no records


def test_a_stopped_study_says_which_looks_are_done_what_the_next_needs_and_the_verdicts(study):
    """Seeds 0-2 of every arm, noisy (sd 0.03, three times the larger margin): the first look is done;
    nothing is decided at 3 seeds (O'Brien-Fleming spends almost nothing there), so the next look needs seeds
    3-5 of every arm: 5 strategies x 3 seeds x 2 tasks = 30 cells. Before any record: no look, the first 30."""
    spec = get_profile("decisive")
    noise = np.random.default_rng(7).normal(0, 0.03, size=(2, len(spec.strategies), 3))
    rows = [{"task": t, "strategy": s, "seed": seed, "status": "ok", "primary_value": 0.8 + noise[i, j, seed]}
            for i, t in enumerate(("mrpc", "cola")) for j, s in enumerate(spec.strategies) for seed in range(3)]
    text = decisive.where_it_stands(pd.DataFrame(rows), study)
    assert text.startswith("looks done at 3 seeds (of 3, 6, 10, 13, 16)")
    assert "the next look needs 30 more cell(s), seeds up to 5" in text
    assert "verdicts so far: mrpc (margin ±0.01, 3 seeds): 5 continue; the next look is at 6 seeds" in text
    empty = pd.DataFrame(columns=["task", "strategy", "seed", "status", "primary_value"])
    assert decisive.where_it_stands(empty, study) == ("no look done yet (looks at 3, 6, 10, 13, 16 seeds); the next "
                                                      "look needs 30 more cell(s), seeds up to 2")


def test_the_runner_trains_look_by_look_and_writes_the_verdicts(tmp_path, monkeypatch):
    """The study loop with the design's policy and the training replaced by synthetic records (equal arms): it
    trains the first look's seeds, then the next look's, stops when all comparisons are equivalent, and writes
    verdicts.csv, history.csv, seeds.csv and the figure; a second run trains nothing (resumable)."""
    from inline_executor import InlineExecutor

    spec = get_profile("decisive")
    spec.design = {**spec.design, "reuse_from": []}
    monkeypatch.setattr(sequential_grid, "get_profile", lambda name: spec)
    monkeypatch.setattr(study_loop, "get_profile", lambda name: spec)
    monkeypatch.setattr(grid, "preflight", lambda configs: None)
    here = run_numerics.Numerics("bf16", "cpu", "unknown", "eager", "fast")
    for reader in (device_settings, decisive):  # this machine's numerics, wherever they are read
        monkeypatch.setattr(reader, "numerics_here", lambda config: here)
    monkeypatch.setattr(grid, "bit_source_here", lambda config: run_numerics.BitSource(here, "AMD", "2.13.0+cpu"))
    monkeypatch.setattr(decisive_checks, "POWER_STUDIES", 2_000)  # the power's precision is not under test here
    batches, arm = [], {s: i for i, s in enumerate(spec.strategies)}

    def synthetic_cell(cell, out_dir):
        c = cell.config
        metrics = {"status": "ok", "primary_metric": "f1" if c.task == "mrpc" else "mcc", "precision": "bf16",
                   "device": "cpu", "final": {f"dev_{m}": 0.8 + 1e-6 * c.seed * arm[c.strategy] for m in ("f1", "mcc")}}
        run_record.write_record(out_dir / c.relative_dir(), c, metrics)
        return result_rows.status_row(c, "ok")

    executor = InlineExecutor(synthetic_cell)
    out = tmp_path / "decisive"
    summary = study_loop.reproduce("decisive", out, analysis=False, executor=executor)
    batches = [sorted({c.seed for c in look}) for look in executor.batches]  # the seeds of each look
    assert summary.ok and batches == [[0, 1, 2], [3, 4, 5]]
    verdicts = pd.read_csv(out / "stats" / "verdicts.csv")
    assert len(verdicts) == 10 and (verdicts["verdict"] == "equivalent").all() and (verdicts["n_seeds"] == 6).all()
    assert set(decisive_checks.CHECK_COLUMNS) <= set(verdicts.columns) and verdicts["mixed_seeds"].isna().all()
    assert pd.read_csv(out / "stats" / "seeds.csv")["numerics"].str.startswith("bf16 on cpu (").all()  # full numerics
    assert (out / "figures" / "decisive_looks.png").is_file() and (out / "stats" / "history.csv").is_file()
    ran = len(executor.ran)
    study_loop.reproduce("decisive", out, analysis=False, executor=executor)
    assert len(executor.ran) == ran  # resumable: the records are the state, nothing trains again

    # decisive-tables: the same tables from the records alone, without training; a folder without records: exit 2
    from typhoon.cli import main

    written = {p.name: p.read_bytes() for p in (out / "stats").glob("*.csv")}
    for path in (out / "stats").glob("*.csv"):
        path.unlink()
    assert main(["decisive-tables", str(out), "--no-report"]) == 0 and batches == [[0, 1, 2], [3, 4, 5]]
    assert {p.name: p.read_bytes() for p in (out / "stats").glob("*.csv")} == written
    assert main(["decisive-tables", str(tmp_path / "empty")]) == 2 and not (tmp_path / "empty").exists()
    with locks.output_folder_lock(out):  # a reproduce writing here: the re-analysis waits its turn, exit 2
        assert main(["decisive-tables", str(out), "--no-report"]) == 2


def test_a_task_saliency_verdict_says_whether_its_task_models_learned(study):
    """typhoon_task's comparisons carry the mean dev accuracy of the task models behind the seeds they
    used, and how many learned; comparisons without a task-saliency arm carry nothing."""
    results = synthetic(study, {"*": [0, 1, 2, 3]}, noise(0.01))
    task_rows = results["strategy"] == "typhoon_task"
    accuracy = {0: 0.82, 1: 0.80, 2: 0.66, 3: 0.99}  # seed 3 is past the look of 3 seeds: not counted
    results["task_head_learned"] = results["task_head_learned"].astype(object)
    results.loc[task_rows, "task_head_accuracy"] = results.loc[task_rows, "seed"].map(accuracy)
    results.loc[task_rows, "task_head_learned"] = results.loc[task_rows, "seed"].map({0: True, 1: True, 2: False, 3: True})
    verdicts = decisive.analyse(results, study)[1].set_index(["task", "comparison"])
    row = verdicts.loc[("mrpc", "typhoon_task - random")]
    assert row.n_seeds == 3 and row.task_model_accuracy == pytest.approx((0.82 + 0.80 + 0.66) / 3)
    assert row.task_model_learned == "2/3"
    assert pd.isna(verdicts.loc[("mrpc", "typhoon - random"), "task_model_learned"])


@pytest.mark.results
def test_decisive_mlm_plans_each_comparison_at_the_sd_the_committed_study_measured():
    """decisive-mlm plans every comparison at the sd the fresh-head study (results/decisive) measured for it
    at its cap."""
    study = decisive_design.study_design("decisive-mlm")
    measured = pd.read_csv(REPO / "results/decisive/stats/verdicts.csv")
    assert len(measured) == 10
    for row in measured.itertuples():  # the registered sds are the measured ones, to the 4 decimals registered
        pair = tuple(row.comparison.split(" - "))
        assert study.planning_sd_of(row.task, pair) == pytest.approx(row.power_sd, abs=5e-5)


def test_a_design_may_plan_each_comparison_at_its_own_sd():
    import dataclasses

    study = decisive_design.study_design("decisive-mlm")
    small = dataclasses.replace(study, tasks=("cola",), comparisons=(("typhoon", "random"), ("whole_word", "random")),
                                planning_sd={"cola": {"typhoon - random": 0.005, "whole_word - random": 0.05}})
    table = decisive_design.design_table(small, studies=2000).set_index("comparison")
    assert list(table["planning_sd"]) == [0.005, 0.05]
    # a quiet comparison is decided by the cap almost surely, a noisy one (2.5 margins of sd) rarely
    assert table.loc["typhoon - random", "p_decided_at_0"] > 0.99 > 0.5 > table.loc["whole_word - random",
                                                                                     "p_decided_at_0"]
    profile = get_profile("decisive-mlm")
    bad = dataclasses.replace(profile, design={**profile.design, "planning_sd": {"mrpc": {"typhoon - random": 0.01}}})
    with pytest.raises(ValueError, match=r"planning_sd.mrpc must name each comparison once"):
        decisive_design.study_design(bad)


def test_the_looks_figure_spans_the_designs_looks_while_the_study_is_in_progress(tmp_path, monkeypatch):
    """At its first look the figure's seed axis runs to the cap, ticked at every registered look (an axis
    of one look would show 2.9-3.1 seeds); without the looks it is ticked at the looks analysed."""
    from typhoon.studies.sequential import figure as decisive_figure

    figures = []
    monkeypatch.setattr(decisive_figure, "save_figure", lambda fig, path, caption: figures.append(fig) or [])
    history = pd.DataFrame({"task": ["mrpc"] * 2, "comparison": ["typhoon - random", "whole_word - random"],
                            "n_seeds": 3, "difference": [0.002, -0.001], "ci_low": -np.inf, "ci_high": np.inf,
                            "tost_low": -5.0, "tost_high": 5.0, "margin": 0.01, "verdict": "continue"})
    decisive_figure.plot_sequential_looks(history, tmp_path / "looks", looks=(3, 6, 10, 15, 20, 24))
    decisive_figure.plot_sequential_looks(history, tmp_path / "plain")
    with_looks, plain = (fig.axes[0] for fig in figures)
    assert list(with_looks.get_xticks()) == [3, 6, 10, 15, 20, 24] and with_looks.get_xlim() == (2, 25)
    assert list(plain.get_xticks()) == [3]
