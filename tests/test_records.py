"""typhoon.records.run_record: the run record written and read back, when it counts as complete, and the one row
builder of the results table (fast: records written by hand, no training)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from typhoon.profiles import resolve
from typhoon.records import result_rows, run_record, schema

CONFIG = resolve("smoke", dict(task="mrpc", backbone="tiny-random", strategy="random", seed=1, schedule="uniform"))
METRICS = {"status": "ok", "primary_metric": "f1", "majority_value": 0.81,
           "final": {"dev_accuracy": 0.7, "dev_f1": 0.8}, "epochs": [{"epoch": 1, "dev_f1": 0.8}],
           "timing": {"mlm_wall_s": 1.0, "ft_wall_s": 2.0, "wall_s": 3.5, "mlm_tokens_per_s": 10.0,
                      "ft_tokens_per_s": 20.0}, "device": "cpu"}
LOSS_ROWS = [{"step": 1, "epoch": 1, "split": "train", "loss": 9.5}, {"step": 1, "epoch": 1, "split": "dev", "loss": 9.0}]


def write(out, config=CONFIG, metrics=METRICS, run_dir=None):
    run_dir = run_dir or out / config.relative_dir()
    run_record.write_record(run_dir, config, dict(metrics), loss_rows=LOSS_ROWS)
    return run_dir


def test_a_record_round_trips(tmp_path):
    run_dir = write(tmp_path)
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.json", "metrics.json", "mlm_loss.csv"]
    assert json.loads((run_dir / "config.json").read_text()) == CONFIG.to_dict()
    record = run_record.read_record(run_dir)
    assert record.config == CONFIG and record.metrics == METRICS and record.final == METRICS["final"]
    pd.testing.assert_frame_equal(record.mlm_loss, pd.DataFrame(LOSS_ROWS))
    assert not record.skipped and run_record.read_record(run_dir, skipped=True).skipped
    assert not list(tmp_path.rglob(".*tmp*")), "the staging folder is gone once published"
    with pytest.raises(FileNotFoundError, match="no complete run record"):
        run_record.read_record(tmp_path / "elsewhere")


def test_a_failed_record_keeps_its_traceback(tmp_path):
    run_dir = tmp_path / CONFIG.relative_dir()
    run_record.write_record(run_dir, CONFIG, {"status": "failed", "error": "boom"}, traceback_text="Traceback ...")
    assert (run_dir / "traceback.txt").read_text() == "Traceback ..."
    assert run_record.read_json(run_dir / "metrics.json")["traceback"] == "traceback.txt"
    assert run_record.record_status(run_dir, CONFIG) == "failed" and not run_record.is_complete(run_dir, CONFIG)


def test_complete_means_ok_and_the_same_run(tmp_path):
    run_dir = write(tmp_path)
    assert run_record.is_complete(run_dir, CONFIG)
    assert run_record.is_complete(run_dir, CONFIG.replace(num_threads=1, device="cpu"))  # execution fields aside
    assert run_record.is_complete(run_dir, CONFIG.replace(delta=0.9))  # random masking does not take delta
    assert not run_record.is_complete(run_dir, CONFIG.replace(p=0.2))
    assert not run_record.is_complete(run_dir, CONFIG.replace(profile="cpu"))
    (run_dir / "config.json").write_text('{"task": "mrpc", "colour": "red"}')  # not a RunConfig: not complete
    assert run_record.read_config(run_dir) is None and not run_record.is_complete(run_dir, CONFIG)


def test_a_record_written_before_a_field_existed_is_still_complete(tmp_path):
    run_dir = write(tmp_path)
    stored = json.loads((run_dir / "config.json").read_text())
    del stored["geometric_p"], stored["max_span"]
    (run_dir / "config.json").write_text(json.dumps(stored))
    assert run_record.is_complete(run_dir, CONFIG)


def test_result_rows_name_the_strategy_from_the_stored_config_not_the_folder(tmp_path):
    moved = tmp_path / "runs" / "mrpc" / "tiny-random" / "renamed" / "seed1"
    write(tmp_path, run_dir=moved)
    table = result_rows.collect_results(tmp_path)
    assert list(table.columns) == schema.RESULT_COLUMNS and len(table) == 1
    row = table.iloc[0]
    assert (row.strategy, row.schedule) == ("random", "uniform") and row.record_path == "runs/mrpc/tiny-random/renamed/seed1"
    assert (row.profile, row.status, row.primary_metric, row.primary_value, row.dev_accuracy) == ("smoke", "ok", "f1", 0.8, 0.7)
    assert (row.wall_s, row.ft_tokens_per_s, row.device) == (3.5, 20.0, "cpu") and pd.isna(row.dev_mcc)


def test_results_for_a_grid_list_every_cell_in_order_missing_ones_too(tmp_path):
    other = CONFIG.replace(seed=0)
    write(tmp_path)
    table = result_rows.collect_results(tmp_path, [other, CONFIG])
    assert list(table["status"]) == ["missing", "ok"] and list(table["seed"]) == [0, 1]
    missing = table.iloc[0]
    assert missing.record_path == other.relative_dir().as_posix()
    # tidy: the strategy alone, the schedule in its own column (the record's folder keeps the arm's name)
    assert (missing.strategy, missing.schedule) == ("random", "uniform") and "random+uniform" in missing.record_path
    assert missing.profile == "smoke" and pd.isna(missing.primary_value)
    assert result_rows.result_row(other, None, "x") == {**{c: None for c in schema.RESULT_COLUMNS},
                                                     **result_rows.run_keys(other), "profile": "smoke",
                                                     "status": "missing", "record_path": "x"}


def test_status_rows_share_the_run_keys():
    row = result_rows.status_row(CONFIG, "skipped")
    assert list(row) == schema.STATUS_COLUMNS
    assert {k: row[k] for k in schema.GRID_KEYS} == result_rows.run_keys(CONFIG)
    assert (row["strategy"], row["schedule"]) == ("random", "uniform")
    assert row["record_path"] == "runs/mrpc/tiny-random/random+uniform/seed1" and row["seconds"] == 0.0


def test_typhoon_rows_carry_their_calibration_saliency_and_budget_moved():
    typhoon = CONFIG.replace(strategy="typhoon_softmax", schedule="fixed")
    masking = {"name": "typhoon_softmax", "calibration": "softmax", "saliency": "task", "budget_moved": 0.37,
               "kl_to_uniform": 0.13}
    row = result_rows.result_row(typhoon, {"status": "ok", "masking": masking}, "x")
    assert (row["calibration"], row["saliency"], row["budget_moved"], row["kl_to_uniform"]) == ("softmax", "task", 0.37, 0.13)
    older = {k: v for k, v in masking.items() if k != "saliency"}  # written before the saliency source existed
    assert result_rows.result_row(typhoon, {"status": "ok", "masking": older}, "x")["saliency"] == "mlm"
    plain = result_rows.result_row(CONFIG, {"status": "ok"}, "x")
    assert all(plain[c] is None for c in schema.MASKING_COLUMNS)
