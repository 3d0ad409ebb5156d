"""Live progress: the run's progress file (throttled, atomic, removed at the end, never a record), what the
batch prints from it with and without a terminal, and the reproduce log's lines."""

import io
import json
import sys
import threading
import time

from typhoon import atomic
from typhoon.profiles import resolve
from typhoon.records import result_rows, run_record
from typhoon.runner import progress
from typhoon.runner.cells import Cell
from typhoon.training import progress_file


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_progress_file_is_throttled_and_says_phase_step_and_speed(tmp_path):
    clock = Clock()
    run_dir = tmp_path / "runs" / "mrpc" / "tiny-random" / "random" / "seed0"
    file = progress_file.ProgressFile(run_dir, "runs/mrpc/tiny-random/random/seed0", interval_s=1.0, clock=clock)
    assert file.path == run_dir.with_name(".seed0.progress.json")

    file.note("mlm", step=1, steps=10, epoch=1, epochs=1, tokens=0)
    first = json.loads(file.path.read_text())
    clock.now += 0.5
    file.note("mlm", step=2, steps=10, epoch=1, epochs=1, tokens=1000)  # within the interval: not written
    assert json.loads(file.path.read_text()) == first
    clock.now += 0.5
    file.note("mlm", step=3, steps=10, epoch=1, epochs=1, tokens=2000)
    state = json.loads(file.path.read_text())
    assert (state["phase"], state["step"], state["steps"]) == ("mlm", 3, 10)
    assert state["tokens_per_s"] == 2000 / 1.0 and state["elapsed_s"] == 1.0
    clock.now += 0.1
    file.note("finetune", step=1, steps=5, epoch=1, epochs=2, tokens=0)  # a new phase is written at once
    assert json.loads(file.path.read_text())["phase"] == "finetune"
    assert progress.describe(json.loads(file.path.read_text())) == "finetune 1/2 step 1/5 · 1 s"
    assert not list(run_dir.parent.glob(".*.tmp-*"))  # written atomically: no temp file stays

    file.close()
    assert not file.path.exists()


def test_a_phase_resumed_after_an_evaluation_counts_its_rate_from_its_new_start(tmp_path):
    """The pipeline reports tokens cumulated over a phase's epochs; an evaluation in between restarts the
    phase's clock, so the rate must count tokens from the resumed phase's first update only."""
    clock = Clock()
    file = progress_file.ProgressFile(tmp_path / "runs/t/b/s/seed0", "runs/t/b/s/seed0", interval_s=1.0, clock=clock)
    file.note("finetune", step=1, steps=20, epoch=1, epochs=2, tokens=500)
    clock.now += 10
    file.note("finetune", step=10, steps=20, epoch=1, epochs=2, tokens=10_500)
    assert json.loads(file.path.read_text())["tokens_per_s"] == 10_000 / 10
    clock.now += 5
    file.note("eval", epoch=1, epochs=2)
    clock.now += 1
    file.note("finetune", step=11, steps=20, epoch=2, epochs=2, tokens=11_500)  # 11,500 cumulated
    assert json.loads(file.path.read_text())["tokens_per_s"] is None  # no interval measured yet
    clock.now += 2
    file.note("finetune", step=13, steps=20, epoch=2, epochs=2, tokens=13_500)
    assert json.loads(file.path.read_text())["tokens_per_s"] == 2000 / 2  # not 13,500 / 2


def test_a_progress_file_is_never_a_record(tmp_path):
    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 0})
    run_dir = tmp_path / config.relative_dir()
    progress_file.ProgressFile(run_dir, config.relative_dir().as_posix()).note("mlm", step=1, steps=2)
    assert not run_record.is_complete(run_dir, config)
    assert result_rows.collect_results(tmp_path).empty
    assert list(result_rows.collect_results(tmp_path, [config])["status"]) == ["missing"]


def test_unwritable_progress_never_stops_a_run(tmp_path):
    blocker = tmp_path / "runs"
    blocker.write_text("a file where the runs folder should be")
    file = progress_file.ProgressFile(blocker / "mrpc" / "b" / "s" / "seed0", "x")
    file.note("mlm", step=1, steps=2)  # no exception
    file.close()


def test_stale_progress_files_are_removed_live_ones_kept(tmp_path):
    folder = tmp_path / "runs" / "mrpc" / "b" / "s"
    folder.mkdir(parents=True)
    live, dead = folder / ".seed0.progress.json", folder / ".seed1.progress.json"
    atomic.atomic_write_json(live, {"pid": __import__("os").getpid()})
    atomic.atomic_write_json(dead, {"pid": 2**22 + 12345})  # above Linux's pid_max: no such process
    progress.remove_stale_progress(tmp_path)
    assert live.exists() and not dead.exists()


def _configs(n):
    return [resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": s})
            for s in range(n)]


def test_grid_monitor_without_a_terminal_prints_a_line_per_change_at_most_every_30_s(tmp_path):
    clock, stream = Clock(), io.StringIO()
    todo = _configs(2)
    monitor = progress.GridMonitor(tmp_path, [Cell(c) for c in todo], skipped=1, stream=stream, tty=False, clock=clock)
    assert stream.getvalue().splitlines() == ["grid: 3 cells, 1 already complete, 2 to run"]

    file = progress_file.ProgressFile(tmp_path / todo[0].relative_dir(), "x", interval_s=0.0)
    file.note("mlm", step=1, steps=10, epoch=1, epochs=1)
    for _ in range(100):  # polled every second for 100 s with a new step each time
        monitor.poll()
        clock.now += 1.0
        file.note("mlm", step=int(clock.now) % 10, steps=10, epoch=1, epochs=1)
    lines = stream.getvalue().splitlines()[1:]
    assert 3 <= len(lines) <= 4, lines  # 100 s / 30 s, not 100 lines
    assert all("running mrpc/tiny-random/random/seed0: mlm 1/1 step" in line for line in lines)

    monitor.poll()  # unchanged and too soon: nothing
    before = len(stream.getvalue().splitlines())
    file.close()
    monitor.finished(result_rows.status_row(todo[0], "ok", seconds=12.3))
    assert stream.getvalue().splitlines()[before:] == [
        "grid: 2/3 done (0 failed): ok runs/mrpc/tiny-random/random/seed0 in 12 s"]
    monitor.close()


def test_grid_monitor_in_a_terminal_redraws_one_bar(tmp_path):
    stream = io.StringIO()
    todo = _configs(1)
    monitor = progress.GridMonitor(tmp_path, [Cell(c) for c in todo], skipped=0, stream=stream, tty=True)
    progress_file.ProgressFile(tmp_path / todo[0].relative_dir(), "x").note("finetune", step=4, steps=8, epoch=1,
                                                                          epochs=2)
    monitor.poll()
    assert "mrpc/tiny-random/random/seed0: finetune 1/2 step 4/8" in stream.getvalue()
    assert "\n" not in stream.getvalue().rstrip("\n")  # redrawn in place with \r, not a line per poll
    monitor.close()


def test_run_log_lines(tmp_path):
    log = progress.RunLog(tmp_path / "reproduce.log")
    config = _configs(1)[0]
    log.write("reproduce started: x")
    log.cell(result_rows.status_row(config, "ok", seconds=3.0))
    log.cell(result_rows.status_row(config, "failed", error="ValueError: boom", seconds=1.0))
    log.cell(result_rows.status_row(config, "ok", seconds=2.0, resumed="fine-tuning epoch 1"))
    text = (tmp_path / "reproduce.log").read_text()
    lines = text.splitlines()
    assert lines[0].endswith("Z reproduce started: x")
    assert lines[1].endswith("cell ok: runs/mrpc/tiny-random/random/seed0 (3.0 s)")
    assert lines[2].endswith("cell failed: runs/mrpc/tiny-random/random/seed0 (1.0 s)")
    assert lines[3] == "    ValueError: boom"
    assert lines[4].endswith("cell ok: runs/mrpc/tiny-random/random/seed0 (2.0 s), resumed after fine-tuning epoch 1")
    assert len(lines) == 5


class SlowLog:
    """A log file that is not a terminal, whose every write takes a moment: two threads that write a line in two
    parts (text, then newline) interleave in it as they would on a loaded machine."""

    def __init__(self):
        self.text, self.lock = "", threading.Lock()

    def write(self, part: str) -> int:
        time.sleep(0.002)
        with self.lock:
            self.text += part
        return len(part)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _announce_at_once(announce, names):
    barrier = threading.Barrier(len(names))

    def one(name):
        barrier.wait()
        announce(f"analysis: {name}")

    threads = [threading.Thread(target=one, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_notebook_lines_from_threads_end_each_with_a_newline_in_a_log(monkeypatch):
    """The issue's log: 'analysis: 00_setup.ipynbanalysis: 01_masking_walkthrough.ipynb'. print() writes the
    text and the newline apart, so two notebooks' threads merge their lines (shown first, on the same log);
    progress.say, which the grid's and reanalyse's notebook announcements use, writes whole lines."""
    from typhoon.runner import progress

    names = [f"{i:02d}_notebook.ipynb" for i in range(6)]
    merged = SlowLog()
    _announce_at_once(lambda line: print(line, file=merged), names)
    assert sorted(merged.text.splitlines()) != sorted(f"analysis: {n}" for n in names)  # the failure it fixes

    log = SlowLog()
    monkeypatch.setattr(sys, "stdout", log)
    _announce_at_once(progress.say, names)
    assert log.text.endswith("\n") and sorted(log.text.splitlines()) == sorted(f"analysis: {n}" for n in names)
