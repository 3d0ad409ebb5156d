"""The grid estimate (typhoon.runner.estimate): the work it counts per cell is the work the run does, the
schedule arithmetic is right, and a calibration measures real steps and prices every cell."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import typhoon.studies.profile_study as reproducing
from typhoon.data.batching import collate, length_grouped_batches
from typhoon.profiles import get_profile, resolve
from typhoon.records import run_record
from typhoon.runner import cell_work, cells, estimate, step_timing
from typhoon.training import Boundary, flops

SHAPE = flops.EncoderShape(hidden=64, layers=2, intermediate=256, vocab=1000)


def _examples(n: int, seed: int = 0) -> list[dict]:
    """Made-up tokenized examples of varied lengths: [CLS] tokens [SEP], the specials marked."""
    rng = np.random.default_rng(seed)
    out = []
    for length in rng.integers(5, 60, size=n):
        ids = [101, *rng.integers(1000, 2000, size=length - 2).tolist(), 102]
        out.append({"input_ids": ids, "special_tokens_mask": [1] + [0] * (length - 2) + [1], "label": 0,
                    "word_ids": list(range(length)), "token_type_ids": [0] * length})
    return out


@pytest.mark.parametrize("n, batch_size, mlm_epochs, ft_epochs", [(100, 16, 1, 2), (33, 32, 2, 1), (7, 8, 0, 1)])
def test_cell_work_counts_the_runs_steps_widths_and_flops(n, batch_size, mlm_epochs, ft_epochs):
    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 3},
                     {"batch_size": batch_size, "mlm_epochs": mlm_epochs, "ft_epochs": ft_epochs, "eval_batch_size": 10})
    train, dev = _examples(n), _examples(25, seed=1)
    work = cell_work.cell_work(config, SHAPE, train, dev, num_labels=2)
    assert work["mlm"].steps == math.ceil(n / batch_size) * mlm_epochs
    assert work["ft"].steps == math.ceil(n / batch_size) * ft_epochs
    assert work["eval"].steps == math.ceil(25 / 10) * (mlm_epochs + ft_epochs)
    # reference: the run's own batching and padding (collate), in the run's order of draws from its seed
    rng, lengths = np.random.default_rng(3), [len(x["input_ids"]) for x in train]
    widths = {"mlm": set(), "ft": set()}
    ft_gflop = 0.0
    for phase, epochs in (("mlm", mlm_epochs), ("ft", ft_epochs)):
        for _ in range(epochs):
            for idx in length_grouped_batches(lengths, batch_size, rng):
                mask = collate([train[i] for i in idx], 0, 8)["attention_mask"]
                widths[phase].add(mask.shape[1])
                if phase == "ft":
                    ft_gflop += flops.step_flops(SHAPE, [mask.shape[1]] * mask.shape[0], num_labels=2) / 1e9
    assert work["mlm"].widths == widths["mlm"] and work["ft"].widths == widths["ft"]
    assert work["ft"].gflop == pytest.approx(ft_gflop)


def test_mlm_work_counts_the_expected_selected_positions():
    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 0},
                     {"batch_size": 1000, "mlm_epochs": 1, "p": 0.2})
    train = _examples(50)
    work = cell_work.cell_work(config, SHAPE, train, _examples(3), num_labels=2)
    width = max(-(-len(x["input_ids"]) // 8) * 8 for x in train)
    maskable = sum(len(x["input_ids"]) - 2 for x in train)
    expected = flops.step_flops(SHAPE, [width] * 50, selected=round(0.2 * maskable)) / 1e9
    assert work["mlm"].gflop == pytest.approx(expected)


def test_makespan_takes_cells_in_order_to_the_first_free_worker():
    assert estimate.makespan([], 2) == 0.0
    assert estimate.makespan([5.0, 5.0, 5.0], 1) == 15.0
    assert estimate.makespan([10.0, 1.0, 1.0, 1.0], 2) == 10.0  # the short cells share the second worker
    assert estimate.makespan([1.0, 1.0, 10.0], 2) == 11.0  # in grid order, as a thread pool takes them


def test_sampled_batches_span_the_widths_with_the_middle_first():
    batches = [[i] for i in range(6)]
    picks = step_timing._sample_by_width(batches, [8, 16, 24, 32, 40, 16], 5)
    widths = {0: 8, 1: 16, 2: 24, 3: 32, 4: 40}
    assert [widths[b[0]] for b in picks] == [24, 8, 40, 16, 32]
    assert len(step_timing._sample_by_width(batches, [8, 8, 8, 8, 8, 8], 3)) == 1  # one width: one batch


@pytest.fixture
def mlm_steps(monkeypatch) -> list[dict]:
    """Every call of the one MLM step (typhoon.training.step.mlm_step), recorded, then taken as it is."""
    from typhoon.training import step as training_step
    calls, original = [], training_step.mlm_step

    def recording(ctx, mlm, strategy, optimizer, scheduler, examples, saliency):
        calls.append({"strategy": strategy, "task_model": saliency.task_model, "rows": len(examples), "ctx": ctx})
        return original(ctx, mlm, strategy, optimizer, scheduler, examples, saliency)

    monkeypatch.setattr(training_step, "mlm_step", recording)
    return calls


@pytest.mark.slow  # times real training steps
def test_a_calibration_times_real_steps_and_prices_every_cell(monkeypatch, mlm_steps):
    """In this process, three tiny-random cells of the smoke profile (one with Typhoon's saliency, one with
    the task loss's), with the fewest timed steps (two batches per phase). The typhoon_task kind takes its
    MLM steps with a frozen task model, and its cell is priced with its task model's warm-up."""
    monkeypatch.setattr(step_timing, "PHASE_BUDGET_S", 0.0)
    configs = [c.replace(task_head_warmup=20) for c in get_profile("smoke").grid()
               if c.backbone == "tiny-random" and c.seed == 0 and c.strategy in ("random", "typhoon")]
    configs.append(configs[-1].replace(strategy="typhoon_task"))
    result = step_timing.calibrate(configs, threads=1)
    (kind,) = result["kinds"]
    assert kind["threads"] == 1 and kind["precision"] == "fp32" and kind["precision_reason"] == "requested"
    for phase in ("mlm_task_saliency", "mlm_mlm_saliency", "mlm_no_saliency", "ft", "eval"):
        assert kind[phase]["s_per_gflop"] > 0 and kind[phase]["steps_timed"] >= 2
    # the kinds' steps: the task kind's with an eval-mode classifier, the others' without one
    by_kind = {}
    for call in mlm_steps:
        by_kind.setdefault((call["strategy"].name, call["task_model"] is not None), []).append(call)
    assert set(by_kind) == {("typhoon_task", True), ("typhoon", False), ("random", False)}
    (task_model,) = {id(c["task_model"]): c["task_model"] for c in by_kind["typhoon_task", True]}.values()
    assert isinstance(task_model, torch.nn.Module) and not task_model.training
    assert all(c["ctx"].config.strategy == name for (name, _), calls in by_kind.items() for c in calls)
    for config in configs:
        cell = result["cells"][config.relative_dir().as_posix()]
        assert cell["mlm_steps"] == math.ceil(config.max_train_examples / config.batch_size)
        assert cell["ft_steps"] == cell["mlm_steps"] * config.ft_epochs
        assert all(cell[k] > 0 for k in ("mlm_s", "ft_s", "eval_s", "setup_s"))
        task = config.strategy == "typhoon_task"
        assert cell["warmup_steps"] == (20 if task else 0) and (cell["warmup_s"] > 0) == task
        assert cell["mlm_kind"] == cell["mlm_kind_timed"] == cell_work.mlm_kind(config)
        # one more dev pass for the task model's check
        assert cell["eval_passes"] == math.ceil(config.max_eval_examples / config.eval_batch_size) * (2 + task)


@pytest.mark.slow  # times real training steps
def test_the_estimate_times_the_mlm_step_the_run_takes(mlm_steps):
    """The run's phase 1 and the estimate's calibration call one function (the recorder stands in for it
    in both): neither holds a copy of the step."""
    from typhoon.training import run as training_run
    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "typhoon", "seed": 0},
                     {"max_train_examples": 32, "max_eval_examples": 16, "num_threads": 1})
    ctx = training_run.set_up(config, progress=False)
    one = training_run.phase_one(ctx)
    run_calls = len(mlm_steps)
    assert run_calls == sum(r["split"] == "train" for r in one.loss_rows) == 2  # 32 examples, batches of 16
    assert all(c["strategy"] is one.strategy and c["task_model"] is None for c in mlm_steps)
    step_timing.calibrate_kind(config, {"mlm_saliency": config})
    assert len(mlm_steps) > run_calls and mlm_steps[-1]["ctx"] is not ctx


def test_mlm_work_draws_per_row_rates_from_the_schedule():
    """Uniform rates on (0, 1] select half the maskable tokens on average; the mixture with full-mask mass
    pi0 selects pi0 + (1 - pi0) p of them; fixed, p."""
    maskable = [20] * 4000
    for schedule, mean in (("uniform", 0.5), ("mixture", 0.1 + 0.9 * 0.15), ("fixed", 0.15)):
        config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 0},
                         {"schedule": schedule, "p": 0.15, "pi0": 0.1})
        selected = cell_work.selected_positions(config, maskable, torch.Generator().manual_seed(0))
        assert selected / sum(maskable) == pytest.approx(mean, abs=0.02)


def test_a_task_saliency_cell_counts_its_task_models_warm_up():
    def config_of(strategy: str):
        return resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": strategy, "seed": 0},
                       {"batch_size": 16, "task_head_warmup": 23, "eval_batch_size": 10})

    config = config_of("typhoon_task")
    train, dev = _examples(100), _examples(25, seed=1)
    work = cell_work.cell_work(config, SHAPE, train, dev, num_labels=2)
    assert work["warmup"].steps == 23 and work["mlm"].steps == math.ceil(100 / 16)
    # 100 examples fit one mega-batch: every epoch has the same 7 batches (in another order), so the 23 steps
    # are 3 epochs and 2 batches of a fourth
    lengths = sorted((len(x["input_ids"]) for x in train), reverse=True)
    batch_gflop = [flops.step_flops(SHAPE, [-(-lengths[i] // 8) * 8] * len(lengths[i:i + 16]), num_labels=2) / 1e9
                   for i in range(0, 100, 16)]
    epoch = sum(batch_gflop)
    assert work["ft"].gflop == pytest.approx(epoch * config.ft_epochs)
    assert 3 * epoch + 2 * min(batch_gflop) - 1e-12 <= work["warmup"].gflop <= 3 * epoch + 2 * max(batch_gflop) + 1e-12
    assert work["eval"].steps == 3 * (1 + config.mlm_epochs + config.ft_epochs)  # the task model's check first
    plain = cell_work.cell_work(config_of("typhoon"), SHAPE, train, dev, num_labels=2)
    assert plain["warmup"].steps == 0 and plain["mlm"].gflop == work["mlm"].gflop


def test_the_estimate_text_says_kernels_cells_and_total():
    plan = estimate.GridEstimate(
        profile="cpu", cells_total=3, cells_todo=["runs/mrpc/m/random/seed0"], workers=2, threads=1,
        kernels="bf16 (AMX-BF16: bf16 autocast), eager attention, fast dropout on cpu, 1 thread(s) per cell",
        per_cell={"runs/mrpc/m/random/seed0": {"mlm_steps": 115, "ft_steps": 230, "mlm_s": 100.0, "ft_s": 200.0,
                                               "eval_s": 10.0, "setup_s": 5.0, "total_s": 325.0}},
        worker_start_s=10.0, analysis_s=110.0, grid_s=335.0, total_s=445.0, calibration_s=40.0, how="2 processes")
    text = plan.text()
    assert "1 of 3 cells to run (2 complete), 2 at once, 1 thread(s) each" in text
    assert "per worker, once: start, imports and the matmul peak 10.0 s" in text and "fixed 5.0 s" in text
    assert "AMX-BF16: bf16 autocast" in text and "MLM 115 steps 100 s" in text and "= 325 s" in text
    assert "about 7 min" in text and plan.to_dict()["total_s"] == 445.0 and "shared" not in text
    plan.core_share = 0.5  # other jobs held half the cores while calibrating
    assert "got 50 % of their cores; on idle cores about 4 min" in plan.text()


def test_cli_estimate_prints_and_runs_nothing(monkeypatch, capsys, tmp_path):
    from typhoon import cli

    seen = {}

    def fake_estimate_only(profile, out_dir, *, workers, configs, analysis):
        seen.update(profile=profile, workers=workers, p={c.p for c in configs}, cells=len(configs), analysis=analysis)
        return estimate.GridEstimate(profile=profile, cells_total=7, cells_todo=[], workers=2, threads=None,
                                     kernels="nothing to run", per_cell={}, worker_start_s=0.0, analysis_s=0.0,
                                     grid_s=0.0, total_s=0.0, calibration_s=0.0, how="")

    monkeypatch.setattr(estimate, "estimate_only", fake_estimate_only)
    monkeypatch.setattr(reproducing, "reproduce", lambda *a, **k: pytest.fail("--estimate must not run the grid"))
    assert cli.main(["reproduce", "--profile", "smoke", "--out", str(tmp_path), "--estimate", "--workers", "3",
                     "--set", "p=0.2", "--no-analysis"]) == 0
    assert seen == {"profile": "smoke", "workers": 3, "p": {0.2}, "cells": 7, "analysis": False}
    assert "0 of 7 cells to run (7 complete)" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.slow
def test_the_estimate_calibrates_in_a_worker_process_started_as_the_grids(tmp_path):
    """The whole path of ``reproduce --estimate`` for one tiny cell: a worker process started as the pool starts
    them, its imports, the calibration; a complete record elsewhere would not count (here: none)."""
    config = get_profile("smoke").grid()[0]
    plan = estimate.estimate_grid("smoke", [config], tmp_path, workers=1, analysis=False)
    cell = plan.per_cell[config.relative_dir().as_posix()]
    from typhoon.machine import usable_cores

    assert plan.cells_todo == [config.relative_dir().as_posix()] and plan.threads == usable_cores()  # one worker
    assert 0 < plan.worker_start_s < plan.calibration_s and 0 < plan.core_share <= 1
    assert cell["total_s"] == pytest.approx(sum(cell[k] for k in ("warmup_s", "mlm_s", "ft_s", "eval_s", "setup_s")))
    assert plan.grid_s == pytest.approx(plan.worker_start_s + cell["total_s"]) and plan.analysis_s == 0.0
    assert "fp32 (requested)" in plan.kernels


# --------------------------------------------------------------------------------------------------
# The calibration kept for a restart (typhoon.runner.calibration_cache)

def _measured(configs, seconds=1.0):
    """What run_calibration returns for one process: a price per cell, the kinds, the start cost."""
    cells = {c.relative_dir().as_posix(): {"warmup_s": 0.0, "mlm_s": seconds, "ft_s": seconds, "eval_s": 0.5,
                                          "mlm_steps": 12, "ft_steps": 12,
                                          "setup_s": 0.5} for c in configs}
    return [{"cells": cells, "kinds": [{"precision": "fp32", "precision_reason": "requested", "attention": "eager",
                                        "dropout": "fast", "device": "cpu", "threads": 1, "peak_s": 0.5}],
             "start_s": 2.0, "core_share": 1.0}]


def test_a_kept_calibration_is_used_only_for_the_same_cells_code_and_age(tmp_path, monkeypatch):
    from typhoon.runner import calibration_cache as cache

    monkeypatch.setenv("TYPHOON_CACHE_DIR", str(tmp_path))
    grid_configs = get_profile("smoke").grid()
    assert cache.load("smoke", grid_configs, 1, 2) is None  # nothing kept yet
    assert cache.last_duration("smoke", 1, 2) is None
    cache.save("smoke", grid_configs, 1, 2, _measured(grid_configs), calibration_s=95.0)
    made = cache.load("smoke", grid_configs, 1, 2)
    assert made.results == _measured(grid_configs) and made.calibration_s == 95.0 and 0 <= made.age_s < 5
    assert cache.load("smoke", grid_configs[2:], 1, 2) is not None  # a restart: fewer cells left, all priced
    assert cache.load("smoke", get_profile("smoke").grid({"p": 0.2}), 1, 2) is None  # other configs
    assert cache.load("smoke", grid_configs, 2, 2) is None and cache.load("cpu", grid_configs, 1, 2) is None
    import time as clock

    assert cache.load("smoke", grid_configs, 1, 2, now=clock.time() + cache.MAX_AGE_S + 1) is None  # too old
    assert cache.last_duration("smoke", 1, 2) == 95.0  # what the next calibration announces, whatever its age
    monkeypatch.setattr(cache, "code_version", lambda package=None: "another-commit")
    assert cache.load("smoke", grid_configs, 1, 2) is None  # the code changed


def test_a_restarted_estimate_reuses_the_calibration_and_says_how_old_it_is(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TYPHOON_CACHE_DIR", str(tmp_path / "cache"))
    configs = get_profile("smoke").grid()[:2]
    calls = []

    def fake_calibration(todo, threads, processes, device=None, expected_s=None):
        calls.append(expected_s)
        return _measured(todo) * processes

    monkeypatch.setattr(estimate, "run_calibration", fake_calibration)
    first = estimate.estimate_grid("smoke", configs, tmp_path / "out", workers=1, analysis=False)
    again = estimate.estimate_grid("smoke", configs, tmp_path / "out", workers=1, analysis=False)
    assert len(calls) == 1 and calls[0] is None  # calibrated once, with nothing to expect from
    # one worker: its start (2.0) and matmul peak (0.5) once, then the two cells (1 + 1 + 0.5 + 0.5 each)
    assert again.grid_s == first.grid_s == pytest.approx(2.0 + 0.5 + 2 * (1 + 1 + 0.5 + 0.5))
    assert "is reused" in capsys.readouterr().out


def test_a_cell_with_a_resume_state_is_priced_for_what_is_left(tmp_path):
    """Issue 52: the estimate on a rerun counted every resumed cell whole. By hand: a cell priced MLM 100 s,
    fine-tuning 300 s over 3 epochs, eval 10 s, set-up 5 s; saved after fine-tuning epoch 1 it has 200 s of
    fine-tuning left and no MLM; saved after the MLM phase, all of its fine-tuning."""
    from typhoon.records.run_record import resume_state_path

    config = resolve("cpu", {"task": "mrpc", "backbone": "minilm-l6-mlm", "strategy": "random", "seed": 0},
                     {"ft_epochs": 3})
    parts = {"mlm_s": 100.0, "ft_s": 300.0, "eval_s": 10.0, "setup_s": 5.0, "total_s": 415.0}
    assert cells.saved_boundary(config, tmp_path) is None
    assert estimate.left_to_run(parts, None, config) == {}
    state = resume_state_path(tmp_path / config.relative_dir())
    state.parent.mkdir(parents=True)
    torch.save({"boundary": {"phase": "ft", "epoch": 1}}, state)
    boundary = cells.saved_boundary(config, tmp_path)
    assert (boundary.phase, boundary.epoch) == ("ft", 1)
    left = estimate.left_to_run(parts, boundary, config)
    assert left["resumes_after"] == "fine-tuning epoch 1" and left["mlm_s"] == 0.0
    assert left["ft_s"] == pytest.approx(200.0) and left["total_s"] == pytest.approx(215.0)
    assert estimate.left_to_run(parts, Boundary("mlm", 1), config)["total_s"] == pytest.approx(315.0)
    # a phase 1 of 4 epochs saved after its first: 3/4 of its 100 s left, and all of the rest
    long_phase = config.replace(mlm_epochs=4)
    assert estimate.left_to_run(parts, Boundary("mlm", 1), long_phase)["total_s"] == pytest.approx(390.0)
    # a state of the format that named its boundary by a string is never resumed: the cell is priced whole
    torch.save({"boundary": "ft1"}, state)
    assert cells.saved_boundary(config, tmp_path) is None


def test_the_kept_calibration_is_keyed_by_commit_software_and_workers(tmp_path, monkeypatch):
    """Issue 64: a fresh clone's estimate reused another checkout's calibration. The key holds what decides the
    timings: another commit, another torch or another worker count (same threads, same processes) is another
    key; the same ones find it, and say at which commit it was made."""
    from typhoon.runner import calibration_cache as cache

    monkeypatch.setenv("TYPHOON_CACHE_DIR", str(tmp_path))
    grid_configs = get_profile("smoke").grid()
    software = {"commit": "a" * 40, "code": "0.1.0+aaaa", "torch": "2.13.0+cpu", "python": "3.11.7"}
    real_software_key = cache.software_key
    monkeypatch.setattr(cache, "software_key", lambda: dict(software))
    cache.save("smoke", grid_configs, 1, 2, _measured(grid_configs), calibration_s=40.0, workers=2)
    found = cache.load("smoke", grid_configs, 1, 2, workers=2)
    assert found is not None and found.commit == "a" * 40
    assert cache.load("smoke", grid_configs, 1, 2, workers=3) is None  # 3 workers, 2 calibration processes
    for field, other in (("commit", "b" * 40), ("torch", "2.12.1+cpu"), ("code", "0.1.0+bbbb")):
        monkeypatch.setattr(cache, "software_key", lambda field=field, other=other: {**software, field: other})
        assert cache.load("smoke", grid_configs, 1, 2, workers=2) is None, field
    # the real key: this checkout's commit (as git says it), the torch this process runs
    import subprocess

    from conftest import REPO

    monkeypatch.setattr(cache, "software_key", real_software_key)
    key = cache.timing_key("smoke", 1, 2)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert key["workers"] == 2 and key["threads"] == 1 and key["torch"] == torch.__version__
    assert key["commit"] == (head or None)


def test_a_resume_prices_what_is_left_from_its_own_estimate_without_calibrating(tmp_path, monkeypatch, capsys):
    """Issue 64: after Ctrl-C the rerun spent 34 s calibrating the one cell left (18 s of work): fewer cells meant
    fewer calibration processes and another cache key. The grid's own estimate, kept in its folder's manifest with
    the stopped invocation, prices the cells still to run: no calibration, the same prices, the resumed cell's
    saved part left out. Another worker count or other settings calibrate again."""
    from typhoon.records import provenance
    from typhoon.records.run_record import resume_state_path

    monkeypatch.setenv("TYPHOON_CACHE_DIR", str(tmp_path / "cache"))
    configs = get_profile("smoke").grid()[:3]
    out = tmp_path / "out"
    calls = []

    def fake_calibration(todo, threads, processes, device=None, expected_s=None):
        calls.append(len(todo))
        return _measured(todo) * processes

    monkeypatch.setattr(estimate, "run_calibration", fake_calibration)
    first = estimate.estimate_grid("smoke", configs, out, workers=2, analysis=False)
    provenance.record_stopped_invocation(out, "smoke", provenance.now(), 60.0, ["reproduce"], "stopped by SIGINT",
                                         estimate=first.to_dict())
    # the stop: the first cell finished, the second saved its MLM phase, the third never started
    run_record.write_record(out / configs[0].relative_dir(), configs[0],
                            {"status": "ok", "final": {"dev_f1": 0.8}, "epochs": [], "device": "cpu"})
    state = resume_state_path(out / configs[1].relative_dir())
    torch.save({"boundary": {"phase": "mlm", "epoch": 1}}, state)
    monkeypatch.setenv("TYPHOON_CACHE_DIR", str(tmp_path / "empty-cache"))  # not the calibration cache's doing
    capsys.readouterr()
    again = estimate.estimate_grid("smoke", configs, out, workers=2, analysis=False)
    assert calls == [3]  # calibrated once, for the whole grid
    said = capsys.readouterr().out
    assert "2 cell(s) left, priced from this grid's own estimate" in said and "no calibration" in said
    second, third = (c.relative_dir().as_posix() for c in configs[1:])
    assert again.cells_todo == [second, third]
    # by hand: MLM 1 s, fine-tuning 1 s, eval 0.5 s, set-up 0.5 s; the second cell saved its MLM phase
    assert again.per_cell[third]["total_s"] == pytest.approx(3.0) == first.per_cell[third]["total_s"]
    assert again.per_cell[second]["total_s"] == pytest.approx(2.0)
    assert again.per_cell[second]["resumes_after"] == "MLM epoch 1" and "priced by this grid's own estimate" in again.text()
    # a second resume of the same grid finds the whole price again, not the part left last time
    provenance.record_stopped_invocation(out, "smoke", provenance.now(), 5.0, ["reproduce"], "stopped by SIGINT",
                                         estimate=again.to_dict())
    state.unlink()
    assert estimate.estimate_grid("smoke", configs, out, workers=2, analysis=False).per_cell[second]["total_s"] == \
        pytest.approx(3.0)
    assert calls == [3]
    estimate.estimate_grid("smoke", configs, out, workers=1, analysis=False)  # another worker count
    assert calls == [3, 2]
    estimate.estimate_grid("smoke", get_profile("smoke").grid({"p": 0.2})[:3], out, workers=2, analysis=False)
    assert calls == [3, 2, 3]  # other settings: the kept prices are not theirs (the first cell's record is of p=0.15)


def test_only_a_calibration_that_ran_is_said_to_have_run(tmp_path, monkeypatch, capsys):
    """Issue 68: a resume priced from its own estimate still said "while calibrating, ... got 51 %", and a rerun
    with nothing to train "calibrated in 0 s: 1 calibration process(es)". The calls to the calibration are the
    reference: where none was made, the text names where the prices (and the measured core share) came from."""
    monkeypatch.setenv("TYPHOON_CACHE_DIR", str(tmp_path / "cache"))
    configs = get_profile("smoke").grid()[:3]
    out = tmp_path / "out"
    calls = []

    def fake_calibration(todo, threads, processes, device=None, expected_s=None):  # other jobs held half the cores
        calls.append(len(todo))
        return [{**measured, "core_share": 0.51} for measured in _measured(todo)] * processes

    monkeypatch.setattr(estimate, "run_calibration", fake_calibration)
    monkeypatch.setattr(estimate.machine, "gpu_devices", lambda: [])
    first = estimate.estimate_grid("smoke", configs, out, workers=2, analysis=True)
    assert calls == [3] and first.calibrated_now
    assert "calibrated in" in first.text() and "while calibrating, the cells' processes got 51 %" in first.text()

    # a resume: priced from the grid's own estimate, no calibration
    from typhoon.records import provenance

    provenance.record_stopped_invocation(out, "smoke", provenance.now(), 60.0, ["reproduce"], "stopped by SIGINT",
                                         estimate=first.to_dict())
    resumed = estimate.estimate_grid("smoke", configs, out, workers=2, analysis=True)
    assert calls == [3] and not resumed.calibrated_now
    text = resumed.text()
    assert "calibrated in" not in text and "while calibrating" not in text, text
    assert "priced by this grid's own estimate" in text and "when these prices were measured, the cells' processes " \
        "got 51 %" in text, text

    # a restart in another folder: the kept calibration prices it, again none runs now
    restarted = estimate.estimate_grid("smoke", configs, tmp_path / "other", workers=2, analysis=True)
    assert calls == [3] and not restarted.calibrated_now
    assert "while calibrating" not in restarted.text() and "when these prices were measured" in restarted.text()

    # every cell complete: nothing to train, nothing calibrated, only the analysis is left to price
    for config in configs:
        run_record.write_record(out / config.relative_dir(), config,
                                {"status": "ok", "final": {"dev_f1": 0.8}, "epochs": [], "device": "cpu"})
    capsys.readouterr()
    done = estimate.estimate_grid("smoke", configs, out, workers=2, analysis=True)
    assert calls == [3] and capsys.readouterr().out == ""
    text = done.text()
    assert text.splitlines()[0] == "estimate for profile 'smoke': 0 of 3 cells to run (3 complete): nothing to train, " \
        "so no calibration", text
    assert "calibrated in" not in text and "process(es)" not in text and "analysis notebooks ~" in text, text
    assert done.calibration_s == 0.0 and done.how == "no calibration: no cell to run"
