"""File-system errors: an output path that is a file or lies under one, a folder without write permission,
a disk that fills up while a record is written. Each exits 2 with a message naming the path, without a
traceback; the record stays absent, never half-written.

Tests run as root in CI, where ``chmod`` does not stop a write; "no permission" and "disk full" are
therefore the real ``OSError`` raised at the real write (monkeypatched in this process, or injected in
the notebook kernel with ``TYPHOON_FAULT_INJECT``), and "a file in the way" is a real file.
"""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from typhoon import atomic, paths
from typhoon.cli import main
from typhoon.profiles import resolve
from typhoon.records import run_record
from typhoon.runner.cells import Cell

RUN = ["run", "--task", "mrpc", "--backbone", "tiny-random", "--profile", "smoke",
       "--set", "max_train_examples=32", "--set", "max_eval_examples=16"]


def no_leftovers(folder: Path) -> list[str]:
    """Temp, lock and pid files under ``folder``; a cell's resume state is none (its rerun goes on from it)."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if (p.name.startswith(".") or p.name.endswith((".lock", ".pid"))) and not p.name.endswith(".resume.pt"))


def test_check_writable_names_the_path(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(paths.OutputPathError, match=f"output folder {blocker} is a file"):
        paths.check_writable(blocker)
    with pytest.raises(paths.OutputPathError, match=f"{blocker / 'out'}.*a file is in the way"):
        paths.check_writable(blocker / "out")

    def refuse(self, data):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_bytes", refuse)
    with pytest.raises(paths.OutputPathError, match=f"cannot write {tmp_path / 'ro'}/.typhoon-write-probe-.*Permission denied"):
        paths.check_writable(tmp_path / "ro")

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(paths.OutputPathError, match="no space left on the device writing .* free space on the file system"):
        paths.check_writable(tmp_path / "full")


@pytest.mark.parametrize("command", ["run", "reproduce"])
def test_output_under_a_file_exits_2_before_any_training(capsys, tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    argv = RUN if command == "run" else ["reproduce", "--profile", "smoke", "--no-analysis", "--no-estimate"]
    code = main([*argv, "--out", str(blocker / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"typhoon: error: output folder {blocker / 'out'}" in err and "a file is in the way" in err
    assert "Traceback" not in err
    assert blocker.read_text() == "x"


def test_run_into_an_unwritable_folder_exits_2(capsys, tmp_path, monkeypatch):
    def refuse(self, data):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_bytes", refuse)  # what chmod a-w does to a non-root user's write
    code = main([*RUN, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot write {tmp_path / 'out'}" in err and "Permission denied" in err, err


@pytest.mark.slow  # trains a tiny model
def test_disk_full_while_writing_the_record_exits_2_and_leaves_no_record(capsys, tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_json = atomic.atomic_write_json

    def full_at_metrics(path, obj):
        if Path(path).name == "metrics.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        write_json(path, obj)

    monkeypatch.setattr(run_record, "atomic_write_json", full_at_metrics)
    code = main([*RUN, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no space left on the device writing " + str(out / "runs/mrpc/tiny-random/random") in err
    assert f"free space on the file system that holds {out}" in err and "rerun the same command" in err
    assert "Traceback" not in err
    assert not out.exists() or no_leftovers(out) == [] and not list(out.rglob("metrics.json"))
    # the training is kept: the state after the last fine-tuning epoch, which the rerun writes the record from
    assert (out / "runs/mrpc/tiny-random/random/.seed0.resume.pt").is_file()


def test_a_cell_out_of_space_ends_the_grid_without_a_failed_record(tmp_path, monkeypatch):
    """A cell that hit a full disk is not a failed cell (every cell would fail alike): its row carries the
    error, the study loop stops the grid on it and names the path, and no record is written for it. Another
    OSError (a bug, a missing input) is the cell's own failure."""
    from inline_executor import InlineExecutor

    from typhoon.runner import study
    from typhoon.runner.cells import train_cell
    from typhoon.training import run as training_run

    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 0})
    where = str(tmp_path / "runs/mrpc/tiny-random/random/.seed0.tmp-1-2/metrics.json")

    def out_of_space(config, out_dir, progress=True):
        raise OSError(28, "No space left on device", where)

    monkeypatch.setattr(training_run, "run", out_of_space)
    row = train_cell(config, tmp_path)
    assert row["os_error"] == [28, "No space left on device", where]
    with pytest.raises(OSError) as raised:
        study.run_cells([Cell(config)], tmp_path, InlineExecutor())
    assert paths.describe_os_error(raised.value, tmp_path).startswith(f"no space left on the device writing {where}")
    assert not (tmp_path / config.relative_dir()).exists()

    def missing_input(config, out_dir, progress=True):
        raise FileNotFoundError(2, "No such file or directory", "a")

    monkeypatch.setattr(training_run, "run", missing_input)  # not the file system's fault: a failed cell
    row = train_cell(config, tmp_path)
    assert row["status"] == "failed" and "os_error" not in row and "No such file" in row["error"]


@pytest.mark.slow  # runs `python -m typhoon reproduce` with its worker processes
def test_reproduce_with_a_full_disk_in_a_worker_exits_2(tmp_path):
    """The real grid: the first cell's worker meets ENOSPC while publishing its record."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "TYPHOON_FAULT_INJECT": json.dumps({"stage": "record_write", "match": "random/seed0", "action": "enospc"})}
    env.pop("TYPHOON_NOTEBOOKS", None)
    proc = subprocess.run([sys.executable, "-m", "typhoon", "reproduce", "--profile", "smoke", "--out", str(out),
                           "--no-analysis", "--no-estimate", "--set", "max_train_examples=32", "--set", "max_eval_examples=16"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "typhoon: error: no space left on the device writing " + str(out / "runs/mrpc/tiny-random/random") in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "runs/mrpc/tiny-random/random/seed0").exists()
    assert no_leftovers(out) == []
    assert (out / "runs/mrpc/tiny-random/random/.seed0.resume.pt").is_file()  # the rerun goes on from it
    assert "stopped by an error: OutputPathError: no space left" in (out / "reproduce.log").read_text()


def test_a_figure_that_cannot_be_written_leaves_the_old_one_and_no_temp_file(tmp_path, monkeypatch):
    """save_figure writes through a temp file: a full disk mid-write keeps the figure that was there."""
    from matplotlib.figure import Figure

    from typhoon import figure_style

    fig = Figure()
    fig.add_subplot().plot([0, 1], [0, 1])
    png, svg = figure_style.save_figure(fig, tmp_path / "figures" / "line", caption="a line")
    before = png.read_bytes()

    def full(fd):  # the figure's bytes are in the temp file; the disk is full when they are flushed
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        figure_style.save_figure(fig, tmp_path / "figures" / "line", caption="a line")
    assert png.read_bytes() == before
    assert sorted(p.name for p in png.parent.iterdir()) == ["line.png", "line.svg"]


@pytest.mark.slow  # trains two tiny cells
def test_a_cell_out_of_gpu_memory_is_recorded_failed_and_the_grid_goes_on(tmp_path, monkeypatch):
    """Issue 50: a cell that runs out of memory (torch.OutOfMemoryError, injected here on the CPU at the end of
    its MLM phase) is a failed cell with the message, in its row and its record; the next cell still runs."""
    import torch
    from inline_executor import InlineExecutor

    from typhoon.runner import study

    monkeypatch.setenv("TYPHOON_FAULT_INJECT", json.dumps({"stage": "train", "match": "random/seed0", "action": "oom"}))
    cell = {"task": "mrpc", "backbone": "tiny-random", "seed": 0}
    configs = [resolve("smoke", {**cell, "strategy": strategy}, {"max_train_examples": 32, "max_eval_examples": 16})
               for strategy in ("random", "whole_word")]
    assert issubclass(torch.OutOfMemoryError, RuntimeError)
    rows = study.run_cells([Cell(c) for c in configs], tmp_path, InlineExecutor())
    assert list(rows["status"]) == ["failed", "ok"]
    assert rows["error"].iloc[0].startswith("OutOfMemoryError: CUDA out of memory (injected at train")
    assert run_record.record_status(tmp_path / configs[0].relative_dir(), configs[0]) == "failed"
    metrics = json.loads((tmp_path / configs[0].relative_dir() / "metrics.json").read_text())
    assert metrics["error"].startswith("OutOfMemoryError: CUDA out of memory (injected at train")
