"""One run end to end on tiny-random: record layout, determinism across processes, resume, failures."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from typhoon.profiles import resolve
from typhoon.records import locks, result_rows, run_record, schema

SMOKE = dict(backbone="tiny-random", max_train_examples=64, max_eval_examples=32, ft_epochs=1)


def cli_run(out, *args):
    cmd = [sys.executable, "-m", "typhoon", "run", "--task", "mrpc", "--backbone", "tiny-random", "--profile", "smoke",
           "--out", str(out), "--set", "max_train_examples=64", "--set", "max_eval_examples=32", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)


@pytest.fixture(scope="module")
def typhoon_run(tmp_path_factory):
    from typhoon.training.run import run
    out = tmp_path_factory.mktemp("out")
    config = resolve("smoke", dict(task="mrpc", strategy="typhoon", seed=0, **SMOKE))
    return out, config, run(config, out, progress=False)


@pytest.mark.slow  # trains a tiny model (module fixture)
def test_record_layout(typhoon_run):
    out, config, result = typhoon_run
    run_dir = out / "runs" / "mrpc" / "tiny-random" / "typhoon" / "seed0"
    assert result.run_dir == run_dir
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.json", "masking_state.npz", "metrics.json", "mlm_loss.csv"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["primary_metric"] == "f1"
    assert set(metrics["final"]) == {"dev_accuracy", "dev_f1"}
    assert 0 <= metrics["final"]["dev_f1"] <= 1 and len(metrics["epochs"]) == config.ft_epochs
    assert metrics["timing"]["mlm_tokens_per_s"] > 0 and metrics["timing"]["wall_s"] > 0
    for phase in ("mlm", "ft"):  # achieved FLOP/s per phase beside the machine's measured matmul peak
        timing = metrics["timing"]
        assert timing[f"{phase}_gflop"] > 0 and timing[f"{phase}_cpu_s"] > 0
        assert timing[f"{phase}_executed_gflop_per_s"] >= timing[f"{phase}_gflop_per_s"] > 0  # padding adds work
        peak = metrics["hardware"]["matmul_peak"]
        assert timing[f"{phase}_peak_fraction"] == timing[f"{phase}_gflop_per_s"] / peak["gflop_per_s"]
        assert timing[f"{phase}_cpu_peak_fraction"] == timing[f"{phase}_gflop_per_cpu_s"] * peak["threads"] / peak["gflop_per_s"]
    assert metrics["hardware"]["matmul_peak"]["dtype"] == metrics["precision"] == "fp32"  # the smoke profile's
    assert metrics["precision_reason"] == "requested" and "avx2" in metrics["hardware"]["cpu"]
    assert metrics["speed"] == {"malloc": "tuned"}  # auto on a glibc CPU (typhoon/training/speed.py)
    assert metrics["versions"]["torch"] and metrics["n_train"] == 64 and metrics["n_dev"] == 32
    assert 0 < metrics["masking"]["kl_to_uniform"] < 1
    assert (metrics["attention"], metrics["dropout"], metrics["device"]) == ("eager", "fast", "cpu")  # "auto" on CPU
    losses = pd.read_csv(run_dir / "mlm_loss.csv")
    assert list(losses.columns) == ["step", "epoch", "split", "loss"]
    assert (losses["split"] == "train").sum() == metrics["timing"]["mlm_steps"] == 4
    assert (losses["split"] == "dev").sum() == config.mlm_epochs
    # no absolute paths beyond the output directory, no home directory
    for name in ("config.json", "metrics.json"):
        text = (run_dir / name).read_text()
        assert str(out) not in text and "/root" not in text and "/home/" not in text


@pytest.mark.slow  # trains a tiny model
def test_complete_record_is_reused_not_recomputed(typhoon_run):
    from typhoon.training.run import run
    out, config, result = typhoon_run
    stamp = (result.run_dir / "metrics.json").stat().st_mtime_ns
    again = run(config, out, progress=False)
    assert again.skipped and (result.run_dir / "metrics.json").stat().st_mtime_ns == stamp
    assert not run(config.replace(ft_epochs=2, max_eval_examples=16), out, progress=False).skipped  # other config: rerun


@pytest.mark.slow  # reads the trained tiny model's record (module fixture)
def test_results_table_from_records(typhoon_run):
    out, config, _ = typhoon_run
    table = result_rows.collect_results(out, [config])
    assert list(table.columns) == schema.RESULT_COLUMNS
    row = table.iloc[0]
    assert row.status == "ok" and row.strategy == "typhoon" and row.record_path == "runs/mrpc/tiny-random/typhoon/seed0"
    assert row.primary_value == run_record.read_record(out / row.record_path).final["dev_f1"]


@pytest.mark.slow  # two `python -m typhoon run` processes; the other seed's run needs none
def test_same_seed_bit_identical_across_processes_and_seeds_differ(tmp_path):
    from typhoon.training.run import run

    a, b = (cli_run(tmp_path / name, "--strategy", "typhoon", "--seed", "0") for name in "ab")
    for proc in (a, b):
        assert proc.returncode == 0, proc.stderr[-2000:]
    run(resolve("smoke", dict(task="mrpc", strategy="typhoon", seed=1, **SMOKE)), tmp_path / "c", progress=False)
    record = "runs/mrpc/tiny-random/typhoon/seed{}"
    ma, mb = (json.loads((tmp_path / n / record.format(0) / "metrics.json").read_text()) for n in "ab")
    assert ma["final"] == mb["final"] and ma["epochs"] == mb["epochs"]
    la, lb = (pd.read_csv(tmp_path / n / record.format(0) / "mlm_loss.csv") for n in "ab")
    pd.testing.assert_frame_equal(la, lb, check_exact=True)
    sa, sb = (np.load(tmp_path / n / record.format(0) / "masking_state.npz") for n in "ab")
    for key in ("weights", "probs", "counts"):
        np.testing.assert_array_equal(sa[key], sb[key])  # same masks and saliencies, bit for bit
    lc = pd.read_csv(tmp_path / "c" / record.format(1) / "mlm_loss.csv")
    assert not la["loss"].equals(lc["loss"])


@pytest.mark.slow  # trains a tiny model
def test_failed_run_is_recorded_and_retried(tmp_path, monkeypatch):
    from typhoon.training.run import run
    config = resolve("smoke", dict(task="mrpc", strategy="random", seed=0, **SMOKE))
    monkeypatch.setenv("TYPHOON_FAULT_INJECT", json.dumps({"stage": "train", "match": "random/seed0"}))
    with pytest.raises(RuntimeError, match="injected fault"):
        run(config, tmp_path, progress=False)
    run_dir = tmp_path / config.relative_dir()
    failed = json.loads((run_dir / "metrics.json").read_text())
    assert failed["status"] == "failed" and "injected fault" in failed["error"]
    assert "InjectedFault" in (run_dir / "traceback.txt").read_text()
    assert not run_record.is_complete(run_dir, config)
    monkeypatch.delenv("TYPHOON_FAULT_INJECT")
    assert run(config, tmp_path, progress=False).metrics["status"] == "ok"


def test_a_record_has_one_writer(tmp_path):
    config = resolve("smoke", dict(task="mrpc", strategy="random", seed=0, **SMOKE))
    run_dir = tmp_path / config.relative_dir()
    with locks.record_lock(run_dir):
        with pytest.raises(locks.LockedError, match="in use by another process"):
            with locks.record_lock(run_dir, wait_s=0.6):
                pass
    assert not run_dir.exists()
