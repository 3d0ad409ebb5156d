"""Stopping cleanly: Ctrl-C (SIGINT) or SIGTERM to ``run`` or ``reproduce``.

What a stop must do, whatever the command was doing:

* **stop the work within seconds.** ``run`` trains in this process: the signal raises
  :class:`Interrupted` (a ``KeyboardInterrupt``) in the main thread. ``reproduce`` runs each cell in a
  notebook kernel, a separate process in its own session (jupyter_client starts kernels with
  ``start_new_session``), so a terminal's Ctrl-C never reaches it: :func:`stop_child_processes` sends the
  kernels SIGTERM, then SIGKILL to any still there after a grace period.
* **leave nothing half-done.** Records are staged and published with one rename (:mod:`typhoon.records.run_record`),
  so a stopped run has either its whole record or none; :func:`clean_after_stop` removes what dead
  writers left (staging folders, temp notebooks, unlocked lock files, progress files, empty folders).
* **say what happened and how to go on**, and exit 128 + the signal's number (130 for SIGINT, 143 for
  SIGTERM), as shells expect of a program stopped by a signal.

The handlers are installed only around the ``run`` and ``reproduce`` commands (:func:`stop_on_signals`),
in the main thread; a second signal while stopping is noted and otherwise ignored, so an impatient
second Ctrl-C cannot cut the clean-up short. Worker threads ask :func:`stopping` whether a cell's
failure is a real failure (to record) or the stop (to leave unrecorded).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import sys
import threading
from pathlib import Path

from typhoon.records import pid_alive

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
KILL_GRACE_S = 3.0  # how long a kernel gets to exit on SIGTERM before SIGKILL

_stop = threading.Event()
# Temp files being written by this process's threads (a notebook's executed copy, :func:`temp_file`): a stop
# removes them as the process ends, even when the thread writing one is still waiting on a killed kernel.
_temp_files: set[Path] = set()
_temp_lock = threading.Lock()


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal; ``exit_code`` is what the process should exit with."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name


def as_interrupted(error: KeyboardInterrupt) -> Interrupted:
    """A plain KeyboardInterrupt (Python's own SIGINT handler) as an :class:`Interrupted` by SIGINT."""
    return error if isinstance(error, Interrupted) else Interrupted(signal.SIGINT)


def stopping() -> bool:
    """Whether a stop was requested (by a signal, or a fatal error that ends the grid)."""
    return _stop.is_set()


def request_stop() -> None:
    _stop.set()


def clear_stop() -> None:
    """Forget an earlier stop (a new grid starts in a process whose last one was stopped)."""
    _stop.clear()


def remove_empty_folders(folder: Path, stop_at: Path) -> None:
    """Remove ``folder`` and its parents up to (not including) ``stop_at`` while they are empty."""
    folder, stop_at = Path(folder), Path(stop_at)
    while folder != stop_at and stop_at in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


@contextlib.contextmanager
def temp_file(path: Path):
    """For the block, ``path`` is a temp file this process writes (``.<name>.tmp-<pid>-<n>``): a stop removes it
    when the process ends (:func:`remove_temp_files`), whatever the thread writing it is doing then. A notebook's
    thread may still wait on its killed kernel when the stopped command exits, and papermill writes the executed
    copy once more as its kernel dies: the thread's own clean-up would never run."""
    path = Path(path)
    with _temp_lock:
        _temp_files.add(path)
    try:
        yield path
    finally:
        with _temp_lock:
            _temp_files.discard(path)


def remove_temp_files() -> list[Path]:
    """Remove the temp files of :func:`temp_file` blocks still open (after a stop); returns those removed."""
    with _temp_lock:
        found = list(_temp_files)
    removed = [path for path in found if path.exists()]
    for path in found:
        path.unlink(missing_ok=True)
    return removed


@contextlib.contextmanager
def stop_on_signals():
    """For the block: SIGINT and SIGTERM raise :class:`Interrupted` in the main thread, once.

    Outside the main thread (where Python cannot install handlers) the block runs with the handlers as
    they are. The previous handlers come back afterwards, and the stop flag is cleared on entry.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _stop.clear()
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def handler(signum, frame):
        if _stop.is_set():
            print(f"typhoon: {signal.Signals(signum).name} again: already stopping, please wait", file=sys.stderr)
            return
        _stop.set()
        _terminate_children()
        raise Interrupted(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def child_processes() -> list:
    """This process's descendants (psutil processes), deepest last; [] without psutil.

    psutil comes with ipykernel (which ``reproduce`` needs for its kernels), so it is there whenever
    there are kernels to stop.
    """
    try:
        import psutil
    except ImportError:  # pragma: no cover - no kernels without ipykernel, which requires psutil
        return []
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _terminate_children() -> None:
    """SIGTERM every descendant at once, from the signal handler: before the exception unwinds through a
    notebook client, which would otherwise ask its kernel to shut down mid-cell (the kernel then prints
    a ZMQ traceback on the way out). Waiting for them is :func:`stop_child_processes`' job."""
    with contextlib.suppress(Exception):
        for child in child_processes():
            with contextlib.suppress(Exception):
                child.terminate()


def stop_child_processes(grace_s: float = KILL_GRACE_S) -> list[int]:
    """SIGTERM every descendant process (the notebook kernels and anything they started), SIGKILL those
    still alive after ``grace_s``, and wait for them; returns their pids.

    The whole tree is listed before anything is signalled, so a kernel's own children are found even
    after the kernel is gone.
    """
    children = child_processes()
    if not children:
        return []
    import psutil

    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return [child.pid for child in children]


def stop_worker_cells() -> list[int]:
    """On a Dask worker (``client.run``, when a grid on a cluster is stopped): stop its cells now. Its
    ``run_cell`` sees the stop (the cell's temp notebook is removed, no failure recorded) and its notebook
    kernels get SIGTERM, then SIGKILL (:func:`stop_child_processes`)."""
    request_stop()
    return stop_child_processes()


def clean_stale_staging(out_dir: Path, own: bool = False) -> None:
    """Remove temp folders and files left by processes that died mid-write (never read as records).

    Temp names carry the writer's pid (``.<name>.tmp-<pid>-...``); those of live processes are kept,
    except this process's own when ``own`` (after a stop, once its cells have ended). A cell's resume state
    (``.seed<k>.resume.pt``, :mod:`typhoon.training.resume`) is no temp file: it stays for the rerun; only
    the temp file a writer killed mid-save left (``..seed<k>.resume.pt.tmp-<pid>-...``) goes.
    """
    leftovers = [*(out_dir / "runs").glob("*/*/*/.seed*.tmp-*"), *(out_dir / "runs").glob("*/*/*/.seed*.old-*"),
                 *(out_dir / "runs").glob("*/*/*/..seed*.resume.pt.tmp-*"),
                 *(out_dir / "notebooks").rglob(".*.tmp-*"), *(out_dir / "figures").rglob(".*.tmp-*"),
                 *out_dir.glob(".*.tmp-*")]
    for path in leftovers:
        pid = path.name.split(".tmp-", 1)[1].split("-", 1)[0] if ".tmp-" in path.name else ""
        if pid.isdigit() and pid_alive(int(pid)) and not (own and int(pid) == os.getpid()):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def clean_dead_writers(out_dir: Path, own: bool = False) -> None:
    """Remove what writers that died left under ``out_dir``: staging folders and temp files
    (:func:`clean_stale_staging`), record locks no live process holds, and progress files of dead processes.
    A batch runs it as it starts: a cell killed after its record was written (complete, so never rerun) leaves
    its lock and progress file, and only a clean-up of the whole folder removes them. Live writers' files stay."""
    from typhoon.records import remove_stale_lock
    from typhoon.runner import progress

    clean_stale_staging(out_dir, own=own)
    for lock in (Path(out_dir) / "runs").glob("*/*/*/.seed*.lock"):
        remove_stale_lock(lock)
    progress.remove_stale_progress(out_dir)


def clean_after_stop(out_dir: Path) -> None:
    """Remove what stopped or killed writers left under ``out_dir`` (:func:`clean_dead_writers`, this process's
    temp notebooks too: its cells have stopped), and the empty folders a run made for a record it never wrote."""
    out_dir = Path(out_dir)
    clean_dead_writers(out_dir, own=True)
    runs = out_dir / "runs"
    for tree in (runs, out_dir / "notebooks"):
        # only empty ones go, and never a hidden one: that is a live writer's staging folder
        folders = [tree, *(p for p in tree.rglob("[!.]*") if p.is_dir())] if tree.is_dir() else []
        for folder in sorted(folders, key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                folder.rmdir()


# The options whose value is a path: the resume command gives them absolute, so it runs from any folder. A
# --backbone is a registry name or hub id unless it names a folder that exists (a local checkpoint).
PATH_OPTIONS = ("--out", "--reuse-from")
FOLDER_OPTIONS = ("--backbone",)


def resume_command(argv: list[str] | None = None) -> str:
    """The command that goes on where this one stopped (finished records and resume states are kept): this
    interpreter by its absolute path (the venv's python, which a bare ``python`` outside the venv is not; not
    resolved through links: a venv's python is a link to the system's, and only the venv's has the package) with
    the same command line, its paths absolute. One form wherever it is printed, whatever the folder the command
    was started from or whether make started it: it runs as printed from any folder."""
    argv = list(sys.argv[1:] if argv is None else argv)
    words, i = [], 0
    while i < len(argv):
        word = argv[i]
        option, equals, value = word.partition("=")
        if equals and option in PATH_OPTIONS + FOLDER_OPTIONS:
            words.append(f"{option}={_absolute(option, value)}")
        elif word in PATH_OPTIONS + FOLDER_OPTIONS and i + 1 < len(argv):
            words += [word, _absolute(word, argv[i + 1])]
            i += 1
        else:
            words.append(word)
        i += 1
    return shlex.join([os.path.abspath(sys.executable), "-m", "typhoon", *words])


def _absolute(option: str, value: str) -> str:
    if option in FOLDER_OPTIONS and not Path(value).is_dir():
        return value
    return os.path.abspath(value)


def exit_now_if_threads_linger(code: int, join_s: float = 2.0) -> None:
    """End the process with ``code`` if a worker thread is still busy after the stop (say, a notebook
    client waiting on a kernel that is already gone): Python's exit would otherwise wait for it."""
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    for thread in others:
        thread.join(timeout=join_s / max(1, len(others)))
    if any(t.is_alive() for t in others):
        _exit(code)


def exit_stopped(code: int, join_s: float = 2.0) -> None:
    """End a stopped command now, once its threads are done or ``join_s`` has passed.

    Everything the command owns is cleaned up by then (records, locks, temp files, kernels), so the
    interpreter's own teardown is skipped: with torch, transformers and datasets loaded it takes about
    3 s on a loaded 2-core machine, which is half the time a stop takes. Output streams and logging are
    flushed first.
    """
    exit_now_if_threads_linger(code, join_s)
    _exit(code)


def exit_finished(code: int, join_s: float = 2.0) -> None:
    """End a finished training command (``run``, ``reproduce``, a study's command that trains) now, as a stopped one ends
    (:func:`exit_stopped`): what it wrote is on disk, its workers and kernels are closed, and the interpreter's
    teardown (2-3 s on a loaded 2-core machine with torch, transformers and datasets loaded) would come after
    the manifest's last write, which says the invocation's wall time. Output streams and logging are flushed."""
    exit_stopped(code, join_s)


def _exit(code: int) -> None:
    import logging

    remove_temp_files()  # the last moment: no thread of this process writes after it
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
