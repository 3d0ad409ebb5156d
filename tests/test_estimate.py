"""The grid estimate (typhoon.runner.estimate): the work it counts per cell is the work the run does, the
schedule arithmetic is right, and a calibration measures real steps and prices every cell."""

from __future__ import annotations

import math

import numpy as np
import pytest

from typhoon.config import get_profile, resolve
from typhoon.data.batching import collate, length_grouped_batches
from typhoon.runner import estimate, grid
from typhoon.training import flops

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
    work = estimate.cell_work(config, SHAPE, train, dev, num_labels=2)
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
    work = estimate.cell_work(config, SHAPE, train, _examples(3), num_labels=2)
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
    picks = estimate._sample_by_width(batches, [8, 16, 24, 32, 40, 16], 5)
    widths = {0: 8, 1: 16, 2: 24, 3: 32, 4: 40}
    assert [widths[b[0]] for b in picks] == [24, 8, 40, 16, 32]
    assert len(estimate._sample_by_width(batches, [8, 8, 8, 8, 8, 8], 3)) == 1  # one width: one batch


def test_a_calibration_times_real_steps_and_prices_every_cell(monkeypatch):
    """In this process, two tiny-random cells of the smoke profile (one with Typhoon's saliency), with the
    fewest timed steps (two batches per phase)."""
    monkeypatch.setattr(estimate, "PHASE_BUDGET_S", 0.0)
    configs = [c for c in get_profile("smoke").grid() if c.backbone == "tiny-random" and c.seed == 0
               and c.strategy in ("random", "typhoon")]
    result = estimate.calibrate(configs, threads=1)
    (kind,) = result["kinds"]
    assert kind["threads"] == 1 and kind["precision"] == "fp32" and kind["precision_reason"] == "requested"
    for phase in ("mlm_saliency_False", "mlm_saliency_True", "ft", "eval"):
        assert kind[phase]["s_per_gflop"] > 0 and kind[phase]["steps_timed"] >= 2
    for config in configs:
        cell = result["cells"][config.relative_dir().as_posix()]
        assert cell["mlm_steps"] == math.ceil(config.max_train_examples / config.batch_size)
        assert cell["ft_steps"] == cell["mlm_steps"] * config.ft_epochs
        assert all(cell[k] > 0 for k in ("mlm_s", "ft_s", "eval_s", "setup_s"))


def test_the_estimate_text_says_kernels_cells_and_total():
    plan = estimate.GridEstimate(
        profile="cpu", cells_total=3, cells_todo=["runs/mrpc/m/random/seed0"], workers=2, threads=1,
        kernels="bf16 (AMX-BF16: bf16 autocast), eager attention, fast dropout on cpu, 1 thread(s) per cell",
        per_cell={"runs/mrpc/m/random/seed0": {"mlm_steps": 115, "ft_steps": 230, "mlm_s": 100.0, "ft_s": 200.0,
                                               "eval_s": 10.0, "setup_s": 5.0, "total_s": 325.0}},
        cell_start_s=10.0, analysis_s=110.0, grid_s=325.0, total_s=435.0, calibration_s=40.0, how="2 processes")
    text = plan.text()
    assert "1 of 3 cells to run (2 complete), 2 at once, 1 thread(s) each" in text
    assert "AMX-BF16: bf16 autocast" in text and "MLM 115 steps 100 s" in text and "= 325 s" in text
    assert "about 7 min" in text and plan.to_dict()["total_s"] == 435.0 and "shared" not in text
    plan.core_share = 0.5  # other jobs held half the cores while calibrating
    assert "got 50 % of their cores; on idle cores about 4 min" in plan.text()


def test_cli_estimate_prints_and_runs_nothing(monkeypatch, capsys, tmp_path):
    from typhoon import cli

    seen = {}

    def fake_estimate_only(profile, out_dir, *, workers, overrides, analysis):
        seen.update(profile=profile, workers=workers, overrides=overrides, analysis=analysis)
        return estimate.GridEstimate(profile=profile, cells_total=7, cells_todo=[], workers=2, threads=None,
                                     kernels="nothing to run", per_cell={}, cell_start_s=0.0, analysis_s=0.0,
                                     grid_s=0.0, total_s=0.0, calibration_s=0.0, how="")

    monkeypatch.setattr(estimate, "estimate_only", fake_estimate_only)
    monkeypatch.setattr(grid, "reproduce", lambda *a, **k: pytest.fail("--estimate must not run the grid"))
    assert cli.main(["reproduce", "--profile", "smoke", "--out", str(tmp_path), "--estimate", "--workers", "3",
                     "--set", "p=0.2", "--no-analysis"]) == 0
    assert seen == {"profile": "smoke", "workers": 3, "overrides": {"p": 0.2}, "analysis": False}
    assert "0 of 7 cells to run (7 complete)" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.slow
def test_the_estimate_calibrates_in_a_kernel_started_as_a_cells(tmp_path):
    """The whole path of ``reproduce --estimate`` for one tiny cell: a papermill kernel, the run notebook's
    imports, the calibration; a complete record elsewhere would not count (here: none)."""
    config = get_profile("smoke").grid()[0]
    plan = estimate.estimate_grid("smoke", [config], tmp_path, workers=1, analysis=False)
    cell = plan.per_cell[config.relative_dir().as_posix()]
    from typhoon.machine import usable_cores

    assert plan.cells_todo == [config.relative_dir().as_posix()] and plan.threads == usable_cores()  # one worker
    assert 0 < plan.cell_start_s < plan.calibration_s and 0 < plan.core_share <= 1
    assert cell["total_s"] == pytest.approx(sum(cell[k] for k in ("mlm_s", "ft_s", "eval_s", "setup_s"))
                                           + plan.cell_start_s)
    assert plan.grid_s == pytest.approx(cell["total_s"]) and plan.analysis_s == 0.0
    assert "fp32 (requested)" in plan.kernels
