"""Bad input is refused with exit 2 and a message naming the file, line or value (issue 23, defect 8):
a truncated results.csv, a syntax error in profiles.toml, an unknown task or backbone (before torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import REPO
from test_findings import make_output

from typhoon import atomic, cli, profiles
from typhoon.analysis import run_summary
from typhoon.cli import main
from typhoon.records import run_record
from typhoon.studies.grid import pages as grid_pages


def _with_records(out):
    """make_output's folder, with a finished record (metrics.json) behind every row."""
    make_output(out)
    for path in pd.read_csv(out / "results.csv")["record_path"]:
        atomic.atomic_write_json(out / path / "metrics.json", {"status": "ok"})
    return out


def test_a_truncated_results_csv_is_refused_naming_the_file(tmp_path, capsys):
    out = _with_records(tmp_path / "ref")
    readme = tmp_path / "README.md"
    readme.write_text(f"{grid_pages.README_BEGIN}\nold\n{grid_pages.README_END}\n")
    assert main(["results-readme", str(out), "--readme", str(readme)]) == 0  # whole: accepted
    table = pd.read_csv(out / "results.csv")
    table.head(1).to_csv(out / "results.csv", index=False)  # rows lost: the old code summarised "1 runs"
    assert main(["results-readme", str(out), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err
    assert "results.csv does not match the run records" in err and "17 record(s) have no row" in err
    with pytest.raises(ValueError, match="results.csv does not match"):
        run_summary.load_results(out / "results.csv")  # what notebook 20 reads it with
    table.drop(columns="primary_value").to_csv(out / "results.csv", index=False)  # a column lost
    assert main(["results-readme", str(out), "--readme", str(readme)]) == 2
    assert "missing column(s) ['primary_value']" in capsys.readouterr().err
    (out / "results.csv").write_text(table.to_csv(index=False)[:200])  # cut mid-line
    with pytest.raises(ValueError, match="results.csv"):
        run_summary.load_results(out / "results.csv")


def test_a_results_csv_with_a_row_but_no_record_is_refused(tmp_path):
    out = _with_records(tmp_path / "ref")
    (out / "runs/mrpc/minilm-l6/typhoon/seed0/metrics.json").unlink()
    with pytest.raises(ValueError, match=r"1 ok row\(s\) have no record \(e.g. runs/mrpc/minilm-l6/typhoon/seed0\)"):
        run_summary.load_results(out / "results.csv")


def test_a_syntax_error_in_profiles_toml_names_the_file_and_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "profiles.toml"
    bad.write_text('[cpu]\ndescription = "unclosed\ntasks = ["mrpc"]\n')
    with pytest.raises(ValueError, match=r"profiles.toml: not valid TOML: .*line 2"):
        profiles.load_profiles(bad)
    monkeypatch.setattr(profiles, "PROFILES_FILE", bad)
    assert main(["profiles"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line 2" in err and "Traceback" not in err


WRAPPER = """
import json, sys
from typhoon.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


@pytest.mark.parametrize("args, message", [
    (["run", "--task", "mrcp"], "unknown GLUE task 'mrcp'"),
    (["run", "--task", "mrpc", "--backbone", "minilm-l7"], "unknown backbone 'minilm-l7'"),
    (["run", "--task", "mrpc", "--set", "backbone=./no/such/folder"], "backbone folder not found"),
    (["reproduce", "--profile", "smoke", "--set", "task=colaa"], "unknown GLUE task 'colaa'"),
])
@pytest.mark.slow  # a fresh interpreter per command
def test_an_unknown_task_or_backbone_is_refused_before_torch_is_imported(args, message, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", WRAPPER, *args, *(["--out", str(tmp_path / "o")])],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"code": 2, "torch": False, "transformers": False}, done.stderr
    assert message in done.stderr


def test_a_corrupted_metrics_json_is_named_when_its_cell_is_trained_again(tmp_path):
    from typhoon.profiles import get_profile

    config = get_profile("cpu").grid()[0]
    run_dir = tmp_path / config.relative_dir()
    assert run_record.why_incomplete(run_dir, config) == "no record yet"
    run_record.write_record(run_dir, config, {"status": "ok", "final": {"dev_f1": 0.8}})
    assert run_record.why_incomplete(run_dir, config) is None
    (run_dir / "metrics.json").write_text('{"status": "ok", "fin')  # truncated mid-write by hand
    why = run_record.why_incomplete(run_dir, config)
    assert "metrics.json is unreadable (JSONDecodeError" in why and "trained again" in why
    run_record.write_record(run_dir, config, {"status": "failed", "error": "RuntimeError: boom"})
    assert run_record.why_incomplete(run_dir, config) == "the last attempt failed: RuntimeError: boom"


def test_check_report_names_a_missing_report_and_takes_an_output_folder(tmp_path, capsys):
    assert main(["check-report", str(tmp_path)]) == 2
    assert f"no report at {tmp_path / 'report.html'}" in capsys.readouterr().err
    assert main(["check-report", str(tmp_path / "nothing.html")]) == 2
    assert "no report at" in capsys.readouterr().err


# Issue 37, item 7: every case below is refused (exit 2, a message naming the bad value) by the checks
# before any work, so nothing is written; {out} is a folder that does not exist yet, {file} a file.
BEFORE_ANY_WORK = [
    (["run", "--task", "mrpc", "--strategy", "typhon", "--out", "{out}"],
     "unknown masking strategy 'typhon'; choose one of ['random'"),
    (["run", "--task", "mrpc", "--profile", "gpu-huge", "--out", "{out}"], "unknown profile 'gpu-huge'; choose one of"),
    (["reproduce", "--profile", "gpu-huge", "--out", "{out}"], "unknown profile 'gpu-huge'; choose one of"),
    (["run", "--task", "mrpc", "--seed", "-1", "--out", "{out}"], "seed must be an integer >= 0, got -1"),
    (["reproduce", "--profile", "smoke", "--workers", "0", "--out", "{out}"],
     "--workers must be an integer >= 1, got 0"),
    (["run", "--task", "mrpc", "--set", "learning_rate=1e-4", "--out", "{out}"], "unknown key 'learning_rate'"),
    (["run", "--task", "mrpc", "--set", "p", "--out", "{out}"], "bad --set 'p': expected key=value"),
    (["run", "--task", "mrpc", "--set", "p=1.5", "--out", "{out}"], "p must lie in (0, 1], got 1.5"),
    (["run", "--task", "mrpc", "--set", "ft_epochs=0", "--out", "{out}"], "ft_epochs must be an integer >= 1, got 0"),
    (["run", "--task", "mrpc", "--set", "mlm_epochs=-1", "--out", "{out}"],
     "mlm_epochs must be an integer >= 0, got -1"),
    (["run", "--task", "mrpc", "--set", "ft_epochs=two", "--out", "{out}"], "bad value for ft_epochs: 'two'"),
    (["run", "--task", "mrpc", "--set", "warmup_ratio=1", "--out", "{out}"], "warmup_ratio must lie in [0, 1), got 1.0"),
    (["run", "--task", "mrpc", "--set", "max_train_examples=0", "--out", "{out}"],
     "max_train_examples must be an integer >= 1, got 0"),
    (["run", "--task", "mrpc", "--set", "ft_lr=0", "--out", "{out}"], "ft_lr must be a finite number > 0, got 0.0"),
    (["run", "--task", "mrpc", "--set", "precision=fp8", "--out", "{out}"],
     "precision must be one of ['auto', 'fp32', 'bf16'], got 'fp8'"),
    (["run", "--task", "mrpc", "--strategy", "typhoon", "--set", "tau=-1", "--out", "{out}"],
     "tau must be a finite number > 0, got -1.0"),
    (["reproduce", "--profile", "smoke", "--set", "batch_size=0", "--out", "{out}"],
     "batch_size must be an integer >= 1, got 0"),
    (["reproduce", "--profile", "smoke", "--reuse-from", "{out}", "--out", "{out}"], "holds no run records"),
    (["reproduce", "--profile", "smoke", "--cluster", "local", "--scheduler", "tcp://h:8786", "--out", "{out}"],
     "give --cluster or --scheduler, not both"),
    (["run", "--task", "mrpc", "--out", "{file}"], "a_file is a file, not a folder"),
    (["reproduce", "--profile", "smoke", "--out", "{file}"], "a_file is a file, not a folder"),
    (["run", "--task", "mrpc", "--out", "{file}/sub/out"], "a file is in the way where a folder must be"),
    (["kl-gap", "--cause", "weather", "--out", "{out}"],
     "unknown cause 'weather'; choose one of ['baseline'"),
    (["kl-gap", "--seeds", "0", "-1", "--out", "{out}"], "--seeds must be an integer >= 0, got -1"),
    (["kl-gap", "--out", "{file}"], "a_file is a file, not a folder"),
    (["results-readme", "{out}"], "out is not a finished run of the study: no such folder"),
    (["results-readme"], "name a study folder, or give --answer"),
    (["check-report", "{out}"], "no report at"),
    (["decisive-design", "--profile", "cpu"], "profile 'cpu' has no [cpu.design]: it is not a sequential profile; "
                                              "choose one of ['decisive', 'decisive-mlm']"),
    (["decisive-tables", "{out}", "--profile", "cpu"], "profile 'cpu' has no [cpu.design]"),
    (["decisive-tables", "{out}"], "no study folder"),
    # issue 51: each was refused only after seconds of imports, an estimate or a warning
    (["run", "--task", "mrpc", "--strategy", "os:path", "--out", "{out}"],
     "bad strategy 'os:path': <module 'posixpath'"),
    (["reproduce", "--profile", "smoke", "--out", "{reference}"],
     "reference holds the 'cpu' profile's results (MANIFEST.json); run 'smoke' into its own folder"),
    (["run", "--task", "mrpc", "--backbone", "{empty}", "--out", "{out}"],
     "no_checkpoint holds no checkpoint: no config.json and no model.safetensors"),
]


def _argv(template, tmp_path):
    return [a.format(out=tmp_path / "out", file=tmp_path / "a_file", empty=tmp_path / "no_checkpoint",
                     reference=tmp_path / "reference") for a in template]


def _scratch(tmp_path):
    """The scratch folder the cases name: a file in the way, a folder with no checkpoint, and a copy of a
    committed reference run's manifest (results/cpu, profile cpu)."""
    (tmp_path / "a_file").write_text("in the way\n")
    (tmp_path / "no_checkpoint").mkdir()
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "MANIFEST.json").write_bytes((REPO / "results" / "cpu" / "MANIFEST.json").read_bytes())


@pytest.mark.parametrize("template, message", BEFORE_ANY_WORK, ids=[" ".join(t[:4]) for t, _ in BEFORE_ANY_WORK])
def test_bad_input_is_refused_before_any_work_and_writes_nothing(template, message, tmp_path, capsys):
    _scratch(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main(_argv(template, tmp_path)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert sorted(tmp_path.rglob("*")) == before, "a refused command must write nothing"


def test_a_good_output_folder_is_probed_and_left_as_it_was(tmp_path):
    from typhoon.paths import check_can_write

    assert check_can_write(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == []  # the folders it made to probe are gone again
    (tmp_path / "kept").mkdir()
    check_can_write(tmp_path / "kept")
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]


ALL_CASES = """
import json, sys, time
from typhoon.cli import main
codes, seconds = [], []
for argv in json.loads(sys.argv[1]):
    start = time.perf_counter()
    codes.append(main(argv))
    seconds.append(time.perf_counter() - start)
print(json.dumps({"codes": codes, "seconds": seconds,
                  "heavy": sorted({"torch", "transformers", "datasets", "pandas"} & set(sys.modules))}))
"""


@pytest.mark.slow  # one fresh interpreter (torch must not be loaded by anything before it)
def test_every_case_is_refused_without_importing_torch(tmp_path):
    """Each refused in well under 2 s (issue 51 asks under 2 s from the shell, the interpreter's start
    included): no case imports torch, so none pays its seconds."""
    _scratch(tmp_path)
    cases = [_argv(template, tmp_path) for template, _ in BEFORE_ANY_WORK]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", ALL_CASES, json.dumps(cases)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    slow = {" ".join(case): round(s, 2) for case, s in zip(cases, seen.pop("seconds"), strict=True) if s > 1.0}
    assert seen == {"codes": [2] * len(cases), "heavy": []}, done.stderr
    assert not slow, slow


def test_a_glue_folder_variable_naming_no_folder_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    """A user who sets TYPHOON_GLUE_DIR means that folder: exit 2 naming it, not a warning and a run on the
    bundled copy; the data stage refuses it the same way."""
    from typhoon.data.glue_files import locate_glue

    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(tmp_path / "nonexistent"))
    for argv in (["run", "--task", "mrpc", "--out", str(tmp_path / "out")],
                 ["reproduce", "--profile", "smoke", "--out", str(tmp_path / "out")],
                 ["kl-gap", "--out", str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"TYPHOON_GLUE_DIR={tmp_path / 'nonexistent'} is not a folder" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError, match="TYPHOON_GLUE_DIR=.*nonexistent is not a folder"):
        locate_glue("mrpc")
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(REPO / "typhoon" / "glue_data"))  # a folder: read from it
    assert locate_glue("mrpc").origin == "$TYPHOON_GLUE_DIR"


def test_a_value_out_of_range_is_said_on_a_short_first_line_and_the_run_on_the_next(tmp_path, capsys):
    assert main(["run", "--task", "mrpc", "--profile", "cpu", "--set", "p=2", "--out", str(tmp_path / "out")]) == 2
    first, second = capsys.readouterr().err.strip().split("\n")
    assert first == "typhoon: error: p must lie in (0, 1], got 2.0"
    assert second.startswith("  in the run {") and json.loads(second.partition("in the run ")[2])["p"] == 2.0


@pytest.mark.parametrize("strategy, warned", [("random", True), ("typhoon", False), ("typhoon_softmax", False)])
def test_a_strategy_parameter_no_named_strategy_takes_is_warned_about(strategy, warned, tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.setattr(cli, "_run", lambda args: 0)  # the command checked: it would run now
    argv = ["run", "--task", "mrpc", "--profile", "smoke", "--strategy", strategy, "--set", "delta=0.3",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    warning = f"typhoon: warning: --set delta: ignored, no strategy named here takes it ({strategy})"
    assert (warning in capsys.readouterr().err) is warned


def test_a_grid_of_strategies_is_warned_only_when_none_takes_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_reproduce", lambda args: 0)
    assert main(["reproduce", "--profile", "smoke", "--set", "tau=2", "--out", str(tmp_path / "out")]) == 0
    assert "warning" not in capsys.readouterr().err  # smoke's typhoon takes tau
    assert main(["reproduce", "--profile", "smoke", "--set", "geometric_p=0.3", "--out", str(tmp_path / "out")]) == 0
    assert "--set geometric_p: ignored" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["data", "fetch", "--task", "nosuch"], ["data", "fetch", "nosuch"]])
def test_data_fetch_takes_its_task_as_an_argument_or_as_task(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("typhoon: error: unknown GLUE task 'nosuch'; choose one of")


def test_data_fetch_wants_one_task(capsys, monkeypatch):
    fetched = []
    monkeypatch.setattr("typhoon.data.glue_files.fetch_glue", lambda task, *a, **k: fetched.append(task) or task)
    assert main(["data", "fetch", "--task", "rte"]) == 0 and fetched == ["rte"]
    assert main(["data", "fetch", "rte", "--task", "cola"]) == 2 and main(["data", "fetch"]) == 2
    assert capsys.readouterr().err.count("data fetch: name one task") == 2


# Issue 50, bad input: a device that is not here is refused before any work, naming the devices that are.
NO_GPU_CASES = [
    ["run", "--task", "mrpc", "--set", "device=cuda", "--out", "{out}"],
    ["run", "--task", "mrpc", "--set", "device=cuda:1", "--out", "{out}"],
    ["reproduce", "--profile", "smoke", "--set", "device=cuda", "--out", "{out}"],
]


@pytest.mark.parametrize("template", NO_GPU_CASES, ids=[" ".join(t[:5]) for t in NO_GPU_CASES])
def test_a_cuda_device_where_none_is_visible_is_refused_naming_the_visible_ones(template, tmp_path, monkeypatch,
                                                                                 capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # every GPU hidden: none visible on any machine
    assert main(_argv(template, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "no GPU is visible here (CUDA_VISIBLE_DEVICES='')" in err, err
    assert "the devices visible are cpu" in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == [], "a refused command must write nothing"


def test_the_visible_cuda_devices_are_the_driver_nodes_narrowed_by_cuda_visible_devices(tmp_path, monkeypatch):
    from typhoon import machine

    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):  # two GPUs and the driver's other nodes
        (tmp_path / name).write_text("")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert machine.cuda_devices_without_torch(tmp_path) == ["cuda:0", "cuda:1"]
    machine.check_device_visible("cuda:1", tmp_path)  # there: no error
    with pytest.raises(ValueError, match=r"there is no cuda:2 here; the devices visible are cuda:0, cuda:1, cpu"):
        machine.check_device_visible("cuda:2", tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert machine.cuda_devices_without_torch(tmp_path) == ["cuda:0"]  # CUDA renumbers the visible ones from 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert machine.cuda_devices_without_torch(tmp_path) == []
    (tmp_path / "kfd").write_text("")  # an AMD GPU: ROCm's torch calls it cuda too, so it cannot be told here
    assert machine.cuda_devices_without_torch(tmp_path) is None
    machine.check_device_visible("cuda", tmp_path)  # left to torch


UNKNOWN_DEVICE_CASES = [
    ["run", "--task", "mrpc", "--set", "device=gpu", "--out", "{out}"],
    ["reproduce", "--profile", "smoke", "--set", "device=cuda0", "--out", "{out}"],
    ["reproduce", "--profile", "smoke", "--set", "device=gpu", "--cluster", "slurm", "--job-script"],
]


@pytest.mark.parametrize("template", UNKNOWN_DEVICE_CASES, ids=[" ".join(t[:5]) for t in UNKNOWN_DEVICE_CASES])
def test_a_device_that_is_none_of_the_allowed_values_is_refused_naming_them(template, tmp_path, capsys):
    """Refused where the config is made (on a cluster too, where the device is not checked for being here)."""
    assert main(_argv(template, tmp_path)) == 2
    err = capsys.readouterr().err
    given = template[4].partition("=")[2]
    assert f"device must be one of ['auto', 'cpu', 'cuda', 'cuda:N', 'mps'], got '{given}'" in err, err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == [], "a refused command must write nothing"


@pytest.mark.slow  # a fresh interpreter: the time a new user waits, torch not imported
@pytest.mark.parametrize("device, message", [("cuda", "the devices visible are cpu"),
                                             ("gpu", "device must be one of ['auto', 'cpu', 'cuda', 'cuda:N', 'mps']")])
def test_a_cuda_device_where_none_is_visible_is_refused_in_under_two_seconds(tmp_path, device, message):
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "typhoon", "run", "--task", "mrpc", "--set", f"device={device}",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=60)
    seconds = time.perf_counter() - started
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2 and seconds < 2.0, (seconds, done.stderr)  # the value, the run
    assert not (tmp_path / "out").exists()
