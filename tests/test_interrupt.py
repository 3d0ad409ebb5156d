"""Stopping cleanly: Ctrl-C / SIGTERM to the real ``reproduce`` and ``run`` commands, and the locks that
leave no file behind.

The signal tests start the real command, wait until a cell is training (its progress file says so), send
the signal to the command's process only -- as a terminal's Ctrl-C reaches the batch but not the kernels
in their own sessions -- and check what is left: the exit status, the time it took, no process, lock,
temp file, progress file or partial record.
"""

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO

from typhoon import atomic
from typhoon.records import locks, run_record
from typhoon.runner import stop

SMALL = ["--set", "max_train_examples=64", "--set", "max_eval_examples=32"]


def start(argv: list[str], tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    env.pop("TYPHOON_FAULT_INJECT", None)
    env.pop("TYPHOON_NOTEBOOKS", None)
    log = open(tmp_path / f"command-{time.monotonic_ns()}.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "typhoon", *argv], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    proc.log = log
    return proc


def output(proc) -> str:
    proc.log.seek(0)
    return proc.log.read()


def wait_until_training(proc, out: Path, timeout: float = 300) -> dict:
    """The first progress file that says a cell is in its MLM or fine-tuning phase."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the command ended before training: {output(proc)[-3000:]}"
        for path in out.glob("runs/*/*/*/.seed*.progress.json"):
            state = run_record.read_json(path)
            if state and state.get("phase") in ("mlm", "finetune"):
                return state
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no cell reached training in {timeout} s: {output(proc)[-3000:]}")


def stop_and_time(proc, signum: int, timeout: float = 30) -> tuple[int, float, list[int]]:
    """Send ``signum`` to the command alone; return its exit status, the seconds to exit and the pids
    of every process it had started (listed before the signal)."""
    children = [child.pid for child in psutil.Process(proc.pid).children(recursive=True)]
    started = time.monotonic()
    os.kill(proc.pid, signum)
    code = proc.wait(timeout=timeout)
    return code, time.monotonic() - started, children


def alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            pass
    return left


def leftovers(out: Path) -> list[str]:
    """Lock, pid, temp, progress and staging files anywhere under ``out``."""
    patterns = ["*.lock", "*.pid", "*.tmp-*", ".*tmp*", "*.progress.json", ".*.old-*"]
    return sorted({p.relative_to(out).as_posix() for pattern in patterns for p in out.rglob(pattern)})


@pytest.mark.slow  # runs `python -m typhoon reproduce` and signals it
def test_ctrl_c_stops_reproduce_within_seconds_and_leaves_nothing_half_done(tmp_path):
    out = tmp_path / "out"
    argv = ["reproduce", "--profile", "smoke", "--out", str(out), "--no-analysis", "--no-estimate", *SMALL]
    proc = start(argv, tmp_path)
    state = wait_until_training(proc, out)
    running = out / state["record_path"]
    assert state["pid"] != proc.pid  # the cell trains in a kernel process, not in the batch

    code, seconds, children = stop_and_time(proc, signal.SIGINT)
    text = output(proc)
    assert code == 130, text[-3000:]
    assert seconds < 15, f"took {seconds:.1f} s to stop"
    assert state["pid"] in children and not alive(children), "a kernel outlived the batch"
    assert leftovers(out) == []
    assert not running.exists(), "the stopped cell must leave no record"
    for run_dir in out.glob("runs/*/*/*/seed*"):  # anything published is whole
        assert run_record.read_json(run_dir / "metrics.json")["status"] == "ok"
    assert "Traceback" not in text
    assert "stopped by SIGINT" in text
    assert_resume_hint(text, argv)
    assert "stopped by SIGINT" in (out / "reproduce.log").read_text()
    print(f"reproduce: SIGINT to exit {seconds:.2f} s")


def assert_resume_hint(text: str, argv: list[str]) -> None:
    """The stop names the same command line (its paths absolute already), run by an interpreter that has the
    package: this test's own (the command ran with it), by its absolute path."""
    (line,) = [line for line in text.splitlines() if "resume with: " in line]
    python, *words = shlex.split(line.partition("resume with: ")[2])
    assert words == ["-m", "typhoon", *argv], line
    assert Path(python).is_absolute() and Path(python).samefile(sys.executable), line


@pytest.mark.slow  # runs `python -m typhoon run` and signals it
def test_sigterm_stops_run_and_leaves_no_lock_record_or_folder(tmp_path):
    out = tmp_path / "out"
    argv = ["run", "--task", "mrpc", "--backbone", "tiny-random", "--profile", "smoke", "--out", str(out), *SMALL]
    proc = start(argv, tmp_path)
    wait_until_training(proc, out)

    code, seconds, _ = stop_and_time(proc, signal.SIGTERM)
    text = output(proc)
    assert code == 143, text[-3000:]
    assert seconds < 10, f"took {seconds:.1f} s to stop"
    assert "Traceback" not in text
    assert "stopped by SIGTERM: run runs/mrpc/tiny-random/random/seed0 not finished; no record written" in text
    assert_resume_hint(text, argv)
    # nothing is left but the cell's resume state, when the stop came after its MLM phase (its folders with it)
    state = out / "runs/mrpc/tiny-random/random/.seed0.resume.pt"
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert left == (["runs/mrpc/tiny-random/random/.seed0.resume.pt"] if state.exists() else []), left
    assert not out.exists() or state.exists()
    assert ("its resume state .seed0.resume.pt is kept: the same command goes on from there" in text) == state.exists()
    print(f"run: SIGTERM to exit {seconds:.2f} s")


# --------------------------------------------------------------------------------------------------
# Locks leave no file behind; a dead holder's file is cleared, a live holder's never


def test_a_released_lock_leaves_no_file(tmp_path):
    lock = tmp_path / ".seed0.lock"
    with locks.exclusive_lock(lock, "x"):
        assert lock.exists() and lock.with_name(".seed0.lock.pid").read_text() == str(os.getpid())
    assert sorted(tmp_path.iterdir()) == []
    with pytest.raises(KeyboardInterrupt), locks.exclusive_lock(lock, "x"):
        raise KeyboardInterrupt
    assert sorted(tmp_path.iterdir()) == []
    with locks.exclusive_lock(lock, "x"):  # and it can be taken again
        pass


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from typhoon.records import locks
    with locks.exclusive_lock(Path(sys.argv[1]), "test"):
        print("held", flush=True)
        time.sleep(120)
""")


@pytest.mark.slow  # a second interpreter holds the lock
def test_stale_lock_of_a_killed_holder_is_removed_a_live_one_kept(tmp_path):
    lock = tmp_path / ".seed0.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not locks.remove_stale_lock(lock) and lock.exists()  # in use: untouched
        with pytest.raises(locks.LockedError):
            with locks.exclusive_lock(lock, "x"):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert lock.exists()  # a killed holder cannot clean up ...
    assert locks.remove_stale_lock(lock)  # ... the next clean-up does
    assert sorted(tmp_path.iterdir()) == []


def test_clean_after_stop_keeps_records_and_live_writers(tmp_path):
    """What a stopped grid leaves is removed; complete records and a live process's files are not."""
    from typhoon.profiles import resolve

    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 0})
    run_dir = tmp_path / config.relative_dir()
    with locks.record_lock(run_dir):
        run_record.write_record(run_dir, config, {"status": "ok"})
    folder = run_dir.parent
    dead = 2**22 + 4321  # above Linux's pid_max: no such process
    (folder / f".seed1.tmp-{dead}-abcd").mkdir()  # a killed kernel's staging folder
    (folder / ".seed1.lock").write_text("")  # ... its lock
    atomic.atomic_write_json(folder / ".seed1.progress.json", {"pid": dead})  # ... its progress file
    live = folder / f".seed2.tmp-{os.getppid()}-abcd"  # a live process's staging (our parent is alive)
    live.mkdir()
    (tmp_path / "runs" / "cola" / "tiny-random" / "random").mkdir(parents=True)  # made for a record never written
    notebook_tmp = tmp_path / "notebooks" / "runs" / "mrpc" / f".seed1.tmp-{os.getpid()}-1.ipynb"
    notebook_tmp.parent.mkdir(parents=True)
    notebook_tmp.write_text("{}")  # this process's own stopped notebook
    (tmp_path / f".results.csv.tmp-{dead}-abcd").write_text("task")  # a table half-written by a killed batch
    figure_tmp = tmp_path / "figures" / "runs" / "mrpc" / f".seed1.png.tmp-{dead}-abcd"  # a killed kernel's figure
    figure_tmp.parent.mkdir(parents=True)
    figure_tmp.write_bytes(b"\x89PNG")
    resume_state = run_record.resume_state_path(folder / "seed3")  # an interrupted cell's: its rerun goes on from it
    resume_state.write_bytes(b"state")
    (folder / f".{resume_state.name}.tmp-{dead}-abcd").write_bytes(b"sta")  # a state a killed writer was saving

    stop.clean_after_stop(tmp_path)
    assert run_record.is_complete(run_dir, config)
    assert sorted(p.name for p in folder.iterdir()) == sorted(["seed0", live.name, resume_state.name])
    assert not (tmp_path / "runs" / "cola").exists() and not (tmp_path / "notebooks").exists()
    assert not figure_tmp.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures", "runs"]


def test_resume_command_is_one_absolute_form_from_any_folder_and_under_make(tmp_path, monkeypatch):
    """Issue 68: "resume with:" printed a relative `.venv/bin/python` when started inside the repository, an
    absolute path elsewhere, `python` with the venv on PATH and `make reproduce` under make. One form now: this
    interpreter's absolute path (the file this test runs in, found through the file system) and the same words,
    the paths absolute (resolved here by hand against the folder the command started from)."""
    argv = ["reproduce", "--profile", "smoke", "--out", "a b", "--reuse-from=old", "--backbone", "minilm-l6"]
    (tmp_path / "checkpoint").mkdir()
    said = []
    for folder, environment in ((REPO, {}), (tmp_path, {}), (tmp_path, {"MAKELEVEL": "1", "PATH": str(
            Path(sys.executable).parent)})):
        monkeypatch.chdir(folder)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        python, *words = shlex.split(stop.resume_command(argv))
        assert Path(python).is_absolute() and Path(python).samefile(sys.executable)
        assert "/.." not in python and not python.startswith(".")
        assert words == ["-m", "typhoon", "reproduce", "--profile", "smoke", "--out", f"{folder}/a b",
                         f"--reuse-from={folder}/old", "--backbone", "minilm-l6"]
        said.append(python)
    assert len(set(said)) == 1  # the same interpreter path from inside the repository, outside it and under make
    # a local checkpoint folder is a path: absolute too; a registry name is not (above)
    words = shlex.split(stop.resume_command(["run", "--backbone", "checkpoint", "--out=out"]))
    assert words[1:] == ["-m", "typhoon", "run", "--backbone", str(tmp_path / "checkpoint"), f"--out={tmp_path / 'out'}"]


def test_exit_codes():
    assert stop.Interrupted(signal.SIGINT).exit_code == 130
    assert stop.Interrupted(signal.SIGTERM).exit_code == 143
    assert stop.as_interrupted(KeyboardInterrupt()).signal_name == "SIGINT"


def test_a_batch_start_removes_a_killed_cells_lock_and_progress_file_but_not_a_live_ones(tmp_path):
    """A cell killed just after its record was written is complete, so no rerun trains it and removes its lock and
    progress file: the next batch's start does (``clean_dead_writers``), sparing live writers and resume states."""
    from typhoon.profiles import resolve

    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 1})
    run_dir = tmp_path / config.relative_dir()
    with locks.record_lock(run_dir):
        run_record.write_record(run_dir, config, {"status": "ok"})
    folder, dead = run_dir.parent, 2**22 + 4321  # above Linux's pid_max: no such process
    (folder / ".seed1.lock").write_text("")  # the killed kernel's lock, no longer held
    atomic.atomic_write_json(folder / ".seed1.progress.json", {"pid": dead})  # ... and its progress file
    atomic.atomic_write_json(folder / ".seed2.progress.json", {"pid": os.getpid()})  # a live run's
    resume_state = run_record.resume_state_path(folder / "seed3")
    resume_state.write_bytes(b"state")
    with locks.record_lock(folder / "seed4"):  # held by a live writer while the batch starts
        stop.clean_dead_writers(tmp_path)
        assert (folder / ".seed4.lock").exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted(["seed1", ".seed2.progress.json", resume_state.name])
    assert run_record.is_complete(run_dir, config)


WRITE_A_FIGURE_BLOCKING_IN_FSYNC = textwrap.dedent("""
    import os, sys, time
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from typhoon import figure_style

    fsync = os.fsync
    def fsync_after_a_pause(fd):  # the bytes are in the temp file, not yet renamed: the test's SIGTERM comes now
        print("writing", flush=True)
        time.sleep(2)
        fsync(fd)
    os.fsync = fsync_after_a_pause
    fig = Figure()
    FigureCanvasAgg(fig)
    fig.add_subplot().plot([0, 1])
    figure_style.save_figure(fig, sys.argv[1], "a line")
""")


@pytest.mark.slow  # starts an interpreter
def test_a_writer_killed_by_sigterm_mid_write_leaves_no_temp_file(tmp_path):
    """Issue 52: a job killed at its walltime left figures/.../.seed0.svg.tmp-<pid>-... behind. SIGTERM's default
    action skips every `finally`; the write holds it until the temp file is renamed, then the process ends by it."""
    proc = subprocess.Popen([sys.executable, "-c", WRITE_A_FIGURE_BLOCKING_IN_FSYNC, str(tmp_path / "figure")],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "writing\n"
    assert [p.name for p in tmp_path.glob(".figure.png.tmp-*")]  # mid-write: the temp file is there
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM  # ended by the SIGTERM, after the write
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png"]  # whole (the SVG never started)
    assert (tmp_path / "figure.png").read_bytes().startswith(b"\x89PNG")


def test_a_programs_own_sigterm_handler_unwinds_a_write_and_removes_its_temp(tmp_path, monkeypatch):
    def stop_cleanly(signum, frame):
        raise stop.Interrupted(signum)

    monkeypatch.setattr(signal, "getsignal", lambda signum: stop_cleanly)  # as a worker process sets it
    previous = signal.signal(signal.SIGTERM, stop_cleanly)
    try:
        with pytest.raises(stop.Interrupted), atomic.written_atomically(tmp_path / "figure.svg") as tmp:
            tmp.write_text("<svg")
            signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert list(tmp_path.iterdir()) == []


def test_a_kernel_ended_by_a_stop_is_not_reported_dead(caplog):
    """nbclient logs "Kernel died while waiting for execute reply." (through papermill's logger, which prints
    on stderr) when a kernel is gone; a deliberate stop kills the kernels itself, so it says nothing then."""
    import asyncio

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    from typhoon.runner import notebooks

    class GoneKernel:
        def is_alive(self) -> bool:
            return False

    client = NotebookClient(nbformat.v4.new_notebook(), log=notebooks.PAPERMILL_LOG)
    client.kc = GoneKernel()
    stop.clear_stop()  # a stopped study in an earlier test of this process leaves the flag set (study.stopped)
    for stopped in (False, True):
        if stopped:
            stop.request_stop()
        try:
            with pytest.raises(DeadKernelError):
                asyncio.run(client._async_check_alive())
        finally:
            stop.clear_stop()
        said = [record.getMessage() for record in caplog.records]
        assert ("Kernel died while waiting for execute reply." in said) is not stopped
        caplog.clear()


def _in_flight(out: Path, stem: str = "") -> list[Path]:
    return sorted((out / "notebooks").glob(f".{stem}*.tmp-*")) if (out / "notebooks").is_dir() else []


def _wait_for(proc, ready, what: str, timeout: float = 240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the command ended before {what}: {output(proc)[-3000:]}"
        if ready():
            return
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"never reached {what} in {timeout} s: {output(proc)[-3000:]}")


@pytest.mark.slow  # runs `python -m typhoon reproduce` three times into its analysis notebooks and signals it
def test_a_stop_at_any_moment_of_the_analysis_leaves_no_temp_notebook(tmp_path):
    """Issue 64: Ctrl-C while `20_statistics` ran left `notebooks/.20_statistics.tmp-<pid>-<n>.ipynb`. The
    smoke grid's cells are complete (the committed results/smoke records), so each reproduce goes straight to
    its notebooks; SIGINT as the first one is announced (no kernel yet), inside a notebook being executed (its
    temp file there), and inside 20_statistics. After each: exit 130 and no temp file anywhere. A temp notebook
    that an older stop left (a dead writer's pid) is removed by the rerun."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(REPO / "results" / "smoke" / "runs", out / "runs")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = out / "notebooks" / f".20_statistics.tmp-{dead.pid}-7.ipynb"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    argv = ["reproduce", "--profile", "smoke", "--out", str(out), "--no-estimate"]
    moments = {
        "the first notebook announced": lambda proc: "analysis: " in output(proc),
        "a notebook executing": lambda proc: any(p != stale for p in _in_flight(out)),
        "inside 20_statistics": lambda proc: bool(_in_flight(out, "20_statistics")) and not stale.exists(),
    }
    for moment, ready in moments.items():
        proc = start(argv, tmp_path)
        _wait_for(proc, lambda ready=ready, proc=proc: ready(proc), moment)
        if moment == "a notebook executing":
            time.sleep(2.0)  # its kernel started, cells running
        code, seconds, children = stop_and_time(proc, signal.SIGINT, timeout=60)
        text = output(proc)
        assert code == 130, f"{moment}: {text[-3000:]}"
        assert not stale.exists(), f"{moment}: the rerun kept an older stop's temp notebook"
        assert leftovers(out) == [], f"{moment}: {leftovers(out)}"
        assert not list((REPO / "notebooks").glob(".*.tmp-*")), moment
        assert not alive(children), f"{moment}: a kernel outlived the batch"
        assert "stopped by SIGINT" in text and "Traceback" not in text, text[-3000:]
        print(f"{moment}: SIGINT to exit {seconds:.1f} s")


def test_a_temp_file_a_stop_leaves_behind_is_removed_as_the_process_ends(tmp_path):
    """A notebook's thread still waiting on its killed kernel when the stopped command exits never reaches its own
    clean-up: the temp file it registered is removed by the exit (stop.remove_temp_files, which _exit calls)."""
    waiting = tmp_path / ".20_statistics.tmp-1-2.ipynb"
    done = tmp_path / ".00_setup.tmp-1-3.ipynb"
    with stop.temp_file(done):
        done.write_text("{}")
    done_block = stop.temp_file(waiting)
    done_block.__enter__()
    try:
        waiting.write_text("{}")  # papermill wrote it; the kernel is killed; the thread hangs
        assert stop.remove_temp_files() == [waiting]
        assert not waiting.exists() and done.exists()  # a file whose block ended is its writer's (renamed or kept)
    finally:
        done_block.__exit__(None, None, None)
    assert stop.remove_temp_files() == []


def test_no_notebook_starts_after_a_stop(tmp_path, monkeypatch):
    """A notebook queued behind the others when the stop came never starts: no kernel, no temp file."""
    import papermill

    from typhoon.runner import notebooks

    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a kernel started after the stop"))
    stop.request_stop()
    try:
        with pytest.raises(stop.Interrupted):
            notebooks.execute_notebook(REPO / "notebooks" / "20_statistics.ipynb", tmp_path / "20_statistics.ipynb", {})
    finally:
        stop.clear_stop()
    assert list(tmp_path.iterdir()) == []
