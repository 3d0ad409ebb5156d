"""Where results came from: the numerics check that keeps a reference run from mixing precisions, the
manifest (machine, commit, lock, wall time), one profile per folder, and committing records to git
(fast: records written by hand, no training)."""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from typhoon import paths
from typhoon.profiles import get_profile, resolve
from typhoon.records import provenance, result_rows, run_numerics, run_record
from typhoon.studies.grid import policy as grid
from typhoon.studies.profile_study import reproduce
from typhoon.training import device_settings

GRID = get_profile("cpu").grid()[:3]  # precision "auto": what it means depends on the machine
METRICS = {"status": "ok", "primary_metric": "f1", "majority_value": 0.81, "final": {"dev_f1": 0.8},
           "epochs": [], "timing": {"wall_s": 60.0}, "device": "cpu"}


def finish(out, config, precision: str, device: str = "cpu", status: str = "ok"):
    run_record.write_record(out / config.relative_dir(), config,
                         {**METRICS, "precision": precision, "device": device, "status": status})


def test_the_numerics_of_a_record_and_of_this_machine():
    assert run_numerics.numerics("bf16", "cuda:1") == "bf16 on cuda"
    assert run_numerics.numerics(None, None) == "unknown on unknown"
    fp32 = resolve("cpu", dict(task="mrpc", strategy="random", seed=0), {"precision": "fp32", "device": "cpu"})
    assert device_settings.planned_numerics(fp32) == "fp32 on cpu"
    assert device_settings.planned_numerics(fp32.replace(precision="bf16")) == "bf16 on cpu"


def test_this_machines_bit_source_names_its_cpu_vendor_and_torch_build():
    """What reuse compares a record with: this CPU's vendor as /proc/cpuinfo names it, the installed torch build
    as its package metadata says (neither read through typhoon.machine)."""
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in (cpuinfo.read_text().splitlines() if cpuinfo.is_file() else [])
              if line.startswith("model name")]
    if not models:
        pytest.skip("no CPU model name in /proc/cpuinfo here")
    vendor = next((name for name in ("Intel", "AMD") if name.lower() in models[0].lower()), None)
    if vendor is None:
        pytest.skip(f"a CPU of another vendor ({models[0]}): the check knows Intel's and AMD's names")
    fp32 = resolve("cpu", dict(task="mrpc", strategy="random", seed=0), {"precision": "fp32", "device": "cpu"})
    here = device_settings.bit_source_here(fp32)
    assert here.vendor == vendor
    assert here.torch == importlib.metadata.version("torch")
    assert (here.numerics.precision, here.numerics.device) == ("fp32", "cpu") and here.known


def test_a_grid_is_not_resumed_with_other_numerics(tmp_path, monkeypatch):
    monkeypatch.setattr(device_settings, "planned_numerics", lambda config: "fp32 on cpu")  # e.g. an AVX2-only CPU
    finish(tmp_path, GRID[0], "bf16")
    finish(tmp_path, GRID[1], "bf16")
    with pytest.raises(ValueError, match=r"would mix numerics.*bf16 on cpu \(2 runs\).*fp32 on cpu \(1 run\)"
                                         r".*--allow-mixed-precision"):
        device_settings.check_numerics(GRID, tmp_path)
    assert device_settings.check_numerics(GRID, tmp_path, allow_mixed=True) == {"bf16 on cpu": 2, "fp32 on cpu": 1}
    # the same numerics everywhere: nothing to refuse; a failed record is rerun, so it does not count
    finish(tmp_path, GRID[2], "fp32", status="failed")
    monkeypatch.setattr(device_settings, "planned_numerics", lambda config: "bf16 on cpu")
    assert device_settings.check_numerics(GRID, tmp_path) == {"bf16 on cpu": 3}
    # finished records that already mix are refused even when nothing is left to run
    finish(tmp_path, GRID[2], "fp32")
    with pytest.raises(ValueError, match="would mix numerics"):
        device_settings.check_numerics(GRID, tmp_path)


def test_reproduce_refuses_the_mix_before_running_anything(tmp_path, monkeypatch):
    from typhoon.runner import study

    monkeypatch.setattr(grid, "preflight", lambda configs: None)
    monkeypatch.setattr(study, "run_cells", lambda *a, **k: pytest.fail("the grid must not start"))
    monkeypatch.setattr(study, "local_pool", lambda *a, **k: pytest.fail("no worker may start"))
    monkeypatch.setattr(device_settings, "planned_numerics", lambda config: "fp32 on cpu")
    config = get_profile("cpu").grid()[0]
    finish(tmp_path, config, "bf16")
    with pytest.raises(ValueError, match="would mix numerics"):
        reproduce("cpu", tmp_path, analysis=False)
    assert not (tmp_path / "results.csv").exists() and not (tmp_path / provenance.MANIFEST).exists()


def test_results_table_keeps_each_runs_precision(tmp_path):
    finish(tmp_path, GRID[0], "bf16")
    finish(tmp_path, GRID[1], "fp32")
    table = result_rows.collect_results(tmp_path, GRID)
    assert list(table["precision"][:2]) == ["bf16", "fp32"] and pd.isna(table["precision"][2])
    assert run_numerics.results_numerics(table) == {"bf16 on cpu": 1, "fp32 on cpu": 1}


def test_manifest_says_where_the_results_came_from_and_keeps_earlier_invocations(tmp_path):
    finish(tmp_path, GRID[0], "bf16")
    cells = pd.DataFrame([result_rows.status_row(GRID[0], "ok", seconds=60.0)])
    first = provenance.write_manifest(tmp_path, "cpu", "2026-01-01T00:00:00+00:00", 61.0, ["reproduce"],
                                      {"bf16 on cpu": 1}, cells)
    assert first["profile"] == "cpu" and first["command"] == "python -m typhoon reproduce"
    assert first["runs_ok"] == 1 and first["runs_wall_s"] == 60.0 and first["cells"] == {"ok": 1}
    assert first["machine"]["cores"] >= 1 and first["machine"]["cpu"] and first["history"] == []
    assert len(first["commit"]) == 40 and set(first["locks"]) <= set(provenance.LOCK_FILES)
    # the same invocation writes again after its analysis: replaced, not added to the history
    again = provenance.write_manifest(tmp_path, "cpu", first["started"], 70.0, ["reproduce"], {}, cells)
    assert again["history"] == [] and again["wall_s"] == 70.0
    later = provenance.write_manifest(tmp_path, "cpu", "2026-01-02T00:00:00+00:00", 5.0, ["reproduce"], {}, cells)
    assert [h["started"] for h in later["history"]] == [first["started"]]
    assert provenance.read_manifest(tmp_path) == later


def test_one_output_folder_holds_one_profile(tmp_path):
    provenance.write_manifest(tmp_path, "cpu", provenance.now(), 1.0, [], {}, pd.DataFrame())
    paths.check_profile(tmp_path, "cpu")
    paths.check_profile(tmp_path / "fresh", "smoke")
    with pytest.raises(ValueError, match=r"holds the 'cpu' profile's results.*outputs/smoke"):
        paths.check_profile(tmp_path, "smoke")


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_a_finished_cell_is_committed_alone(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / ".gitignore").write_text("results/**/.*.lock\n")
    (repo / "other.txt").write_text("staged by someone else\n")
    git(repo, "add", ".gitignore", "other.txt")
    out = repo / "results" / "cpu"
    config = GRID[0]
    finish(out, config, "bf16")
    (out / config.relative_dir()).with_name(f".{config.relative_dir().name}.lock").write_text("123")
    row = result_rows.status_row(config, "ok")
    assert provenance.commit_cell(out, row)
    committed = git(repo, "show", "--name-only", "--format=%s", "HEAD").split()
    assert any(name.endswith("seed0/metrics.json") for name in committed)
    assert "other.txt" not in committed and not any(name.endswith(".lock") for name in committed)
    assert "other.txt" in git(repo, "diff", "--cached", "--name-only")  # still staged, untouched
    assert not provenance.commit_cell(out, row)  # nothing new: no empty commit
    with pytest.raises(ValueError, match="not inside a git work tree"):
        provenance.check_git_repo(tmp_path / "elsewhere")


def test_a_stopped_invocation_is_kept_in_the_history_and_the_report_sums_every_invocation(tmp_path):
    from datetime import UTC, datetime, timedelta

    from typhoon.report.html import wall_time

    provenance.record_stopped_invocation(tmp_path, "cpu", "2026-01-01T00:00:00+00:00", 600.0, ["reproduce"],
                                         "stopped by SIGINT")
    first = provenance.read_manifest(tmp_path)
    assert first["profile"] == "cpu" and "started" not in first  # no finished invocation yet
    [stopped] = first["history"]
    assert (stopped["command"], stopped["started"], stopped["outcome"]) == ("python -m typhoon reproduce",
                                                                              "2026-01-01T00:00:00+00:00",
                                                                              "stopped by SIGINT")
    assert stopped["finished"] and stopped["machine"]["cores"] >= 1
    cells = pd.DataFrame([result_rows.status_row(GRID[0], "ok", seconds=60.0)])
    now = datetime.now(UTC).replace(microsecond=0)
    started = (now - timedelta(minutes=5)).isoformat()
    done = provenance.write_manifest(tmp_path, "cpu", started, 300.0, ["reproduce"], {}, cells)
    assert done["outcome"] == "finished" and [h["outcome"] for h in done["history"]] == ["stopped by SIGINT"]
    assert [run["started"] for run in provenance.invocations(done)] == ["2026-01-01T00:00:00+00:00", started]
    stopped_span = (datetime.fromisoformat(stopped["finished"]) - datetime.fromisoformat(stopped["started"]))
    total = (stopped_span.total_seconds() + 300) / 60
    assert wall_time(done, now) == ("5.0 min for this reproduce, grid and analysis (from its start to this report); "
                                    f"{total:.1f} min over all 2 invocations into this folder (1 stopped early)")


def test_the_study_loop_records_a_stop_in_the_manifest(tmp_path, monkeypatch):
    from inline_executor import InlineExecutor

    from typhoon.runner import stop
    from typhoon.studies.grid import policy as grid

    def stopped_by_ctrl_c(config, out_dir):
        raise KeyboardInterrupt

    monkeypatch.setattr(grid, "preflight", lambda configs: None)  # the data and backbones: not what this checks
    with pytest.raises(stop.Interrupted):
        reproduce("smoke", tmp_path, analysis=False, executor=InlineExecutor(stopped_by_ctrl_c))
    [entry] = provenance.read_manifest(tmp_path)["history"]
    assert entry["outcome"] == "stopped by SIGINT" and entry["wall_s"] >= 0 and entry["finished"] >= entry["started"]


def test_the_manifest_wall_time_is_the_whole_reproduce_and_the_grid_keeps_its_own(tmp_path, monkeypatch):
    """The issue's manifest said 132.6 s, the grid alone, for a reproduce of 241 s: wall_s is the whole (cells,
    tables, notebooks, report), grid_wall_s the cells' part. Here the cells are complete already and the
    analysis takes 1.5 s (a stand-in that sleeps), so the whole exceeds the grid's part by at least that."""
    import time


    monkeypatch.setattr(grid, "preflight", lambda configs: None)
    monkeypatch.setattr(device_settings, "planned_numerics", lambda config: "fp32 on cpu")
    configs = get_profile("smoke").grid()
    for config in configs:
        finish(tmp_path, config, "fp32")

    def analysis(out_dir, *args, **kwargs):
        time.sleep(1.5)
        (out_dir / "report.html").write_text("<html></html>")
        return out_dir / "report.html"

    def against_reference(profile, out_dir):  # the comparison said after the summary: 1 s here
        time.sleep(1.0)
        return "your run against the reference: a stand-in"

    monkeypatch.setattr(grid, "run_analysis", analysis)
    monkeypatch.setattr(grid, "against_reference", against_reference)
    started = time.perf_counter()
    reproduce("smoke", tmp_path, estimate=False)
    took = time.perf_counter() - started
    manifest = provenance.read_manifest(tmp_path)
    assert manifest["wall_s"] >= manifest["grid_wall_s"] + 1.5 + 1.0
    # issue 68: the manifest missed the last seconds (the comparison with the reference among them); measured here
    # around the call, the whole of it is in wall_s (to the 0.1 s it is rounded to, and the return)
    assert took - 0.3 <= manifest["wall_s"] <= took + 0.1


def test_a_command_invocation_is_timed_from_its_process_start(monkeypatch):
    """Run as the typhoon command, an invocation's clock starts when its process started (its imports and input
    checks count), told by psutil here from the wall clock, and by the code from /proc and the boot clock; called
    from Python it starts at the call."""
    import time

    import psutil

    age = time.time() - psutil.Process().create_time()  # this test's process: pytest started seconds ago at least
    assert provenance.process_age_s() == pytest.approx(age, abs=1.5)  # psutil counts from the boot's whole second
    _, clock = provenance.invocation_clock()
    assert 0 <= time.perf_counter() - clock < 0.1  # pytest is not the typhoon command: from now
    monkeypatch.setattr("sys.argv", [str(Path(provenance.__file__).parents[1] / "__main__.py"), "reproduce"])
    started, clock = provenance.invocation_clock()
    assert time.perf_counter() - clock == pytest.approx(age, abs=1.5)
    from datetime import datetime

    assert datetime.fromisoformat(started).timestamp() == pytest.approx(psutil.Process().create_time(), abs=2.0)
