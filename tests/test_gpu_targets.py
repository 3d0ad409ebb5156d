"""benchmarks/gpu_targets.py: the table of issue 50's GPU targets, made from an output folder's files. Checked
on hand-written records, a manifest and an nvidia-smi dmon log whose figures are worked out here by hand."""

from __future__ import annotations

import importlib.util
import json

from conftest import REPO

_spec = importlib.util.spec_from_file_location("gpu_targets", REPO / "benchmarks" / "gpu_targets.py")
gpu_targets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_targets)

DMON = """\
# gpu    sm   mem   enc   dec   jpg   ofa
# Idx     %     %     %     %     %     %
    0    90    40     0     0     0     0
    0    70    35     0     0     0     0
    0     -     -     -     -     -     -
# gpu    sm   mem   enc   dec   jpg   ofa
# Idx     %     %     %     %     %     %
    0    95    50     0     0     0     0
"""


def write_record(out, strategy, seed, mlm_wall_s, mlm_steps, status="ok", backbone="tinybert-shape"):
    run = out / "runs" / "mrpc" / backbone / strategy / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "mrpc", "backbone": backbone, "strategy": strategy,
                                                 "seed": seed}))
    (run / "metrics.json").write_text(json.dumps({"status": status, "device": "cuda",
                                                  "timing": {"mlm_wall_s": mlm_wall_s, "mlm_steps": mlm_steps}}))


def test_the_targets_table_from_records_a_manifest_and_a_dmon_log(tmp_path):
    write_record(tmp_path, "random", 0, 10.0, 100)  # 0.100 s per step
    write_record(tmp_path, "typhoon", 0, 12.1, 110)  # 0.110 s per step: 1.1x
    write_record(tmp_path, "random", 1, 8.0, 100)  # 0.080 s
    write_record(tmp_path, "typhoon", 1, 8.8, 100)  # 0.088 s: 1.1x
    write_record(tmp_path, "random", 2, 5.0, 100)
    write_record(tmp_path, "typhoon", 2, 1.0, 100, status="failed")  # no pair: left out
    write_record(tmp_path, "whole_word", 0, 3.0, 100)  # not in the ratio
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"wall_s": 270.0, "estimate": {"total_s": 200.0}}))
    (tmp_path / "dmon.log").write_text(DMON)
    rows = {row[0]: row[1:] for row in gpu_targets.targets(tmp_path, tmp_path / "dmon.log")}
    assert rows["grid wall time"] == ("4.5 min (6 runs ok)", "<= 5.0 min", "met")
    assert rows["SMs busy"] == ("85 %", ">= 80 %", "met")  # (90 + 70 + 95) / 3; the missing sample is left out
    assert rows["Typhoon / random MLM step"] == ("1.100x (geometric mean of 2 pairs, 1.100-1.100)", "<= 1.05x",
                                                 "NOT met")
    assert rows["estimate vs actual"] == ("estimate 3.3 min, actual 4.5 min (+35%)", "within +-25%", "NOT met")


def test_a_run_stopped_at_its_cap_is_projected_and_a_cpu_run_has_no_sm_figure(tmp_path, capsys):
    write_record(tmp_path, "random", 0, 10.0, 100)
    write_record(tmp_path, "typhoon", 0, 10.0, 100)
    rows = {row[0]: row[1:] for row in gpu_targets.targets(tmp_path, None, elapsed_s=120.0, cells=6)}
    # 2 runs in 2 min: 6 cells at that rate take 6 min
    assert rows["grid wall time"] == ("stopped at the cap: 2 of 6 runs ok in 2.0 min; projected 6.0 min at their rate",
                                      "<= 5.0 min", "NOT met (projected)")
    assert rows["SMs busy"][0] == "not measured (no nvidia-smi dmon log)"
    assert rows["estimate vs actual"][2] == "-"
    assert gpu_targets.main([str(tmp_path), "--elapsed-s", "120", "--cells", "6"]) == 0
    assert "Typhoon / random MLM step  1.000x" in capsys.readouterr().out


def test_a_grid_stopped_at_its_cap_is_read_from_the_manifest_its_stop_left(tmp_path):
    """The manifest a stopped reproduce writes (typhoon.records.provenance.record_stopped_invocation: history only,
    no wall_s) with the estimate the grid made first: the wall time is projected, and so is the estimate's check."""
    from typhoon.records.provenance import record_stopped_invocation

    for seed in (0, 1):
        write_record(tmp_path, "random", seed, 10.0, 100)
        write_record(tmp_path, "typhoon", seed, 10.0, 100)
    record_stopped_invocation(tmp_path, "paper-shapes", "2026-12-05T00:00:00+00:00", 240.0, ["reproduce"],
                              "stopped by SIGINT", code={"commit": "x", "dirty": False},
                              estimate={"total_s": 900.0})
    rows = {row[0]: row[1:] for row in gpu_targets.targets(tmp_path, None, elapsed_s=240.0, cells=20)}
    # 4 runs in 4 min: 20 cells at that rate take 20 min, against an estimate of 15 min: +33 %
    assert rows["grid wall time"] == ("stopped at the cap: 4 of 20 runs ok in 4.0 min; projected 20.0 min at their "
                                      "rate", "<= 5.0 min", "NOT met (projected)")
    assert rows["estimate vs actual"] == ("estimate 15.0 min, actual (projected) 20.0 min (+33%)", "within +-25%",
                                          "NOT met (projected)")


def test_a_folder_without_records_is_bad_input(tmp_path, capsys):
    assert gpu_targets.main([str(tmp_path / "missing")]) == 2
    assert gpu_targets.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no output folder" in err and "holds no run records" in err
