"""Locks: one writer per record (a lock file next to the run's folder) and per output folder, with stale
locks of dead processes removed."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from typhoon.atomic import atomic_write_text


class LockedError(RuntimeError):
    """Another process holds the lock."""


@contextlib.contextmanager
def exclusive_lock(path: Path, what: str, wait_s: float = 0.0):
    """Hold an OS file lock on ``path`` for the block; wait up to ``wait_s``, then raise LockedError.

    ``filelock`` uses ``flock`` on POSIX and ``msvcrt`` locking on Windows; either way the OS releases
    the lock when the holder dies, so a killed run never leaves a stale lock. The holder's pid goes to
    ``<path>.pid`` (beside the lock, not in it: the lock file's contents belong to the lock) so that a
    refused process can say who holds it; it is removed on release.

    On POSIX the lock file itself is removed too, while the lock is still held, so a finished or
    interrupted process leaves no ``.lock`` file behind. That is safe with ``flock``: a waiter that then
    gets the lock on the unlinked file sees it has no name left and retries on a fresh file (filelock
    checks ``st_nlink``). Windows' filelock removes the file itself once it is unlocked. A process that
    was killed leaves its lock file (unlocked); :func:`remove_stale_lock` clears it.
    """
    import filelock  # here, not at the top: the command line imports this module and answers bad input at once

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    holder_file = path.with_name(path.name + ".pid")
    lock = filelock.FileLock(path)
    try:
        lock.acquire(timeout=wait_s, poll_interval=0.5)
    except filelock.Timeout:
        try:
            holder = holder_file.read_text().strip() or "unknown"
        except OSError:
            holder = "unknown"
        raise LockedError(f"{what} is in use by another process (pid {holder}; lock file {path})") from None
    try:
        atomic_write_text(holder_file, str(os.getpid()))
        yield
    finally:
        holder_file.unlink(missing_ok=True)
        if os.name == "posix":
            path.unlink(missing_ok=True)
        lock.release()


def output_folder_lock(out_dir: Path):
    """The lock a ``reproduce`` (or a re-analysis of its records) holds on its output folder: one writer
    of its records and tables at a time."""
    return exclusive_lock(_folder_lock_path(out_dir), f"output folder {out_dir}")


def _folder_lock_path(out_dir: Path) -> Path:
    return Path(out_dir) / ".reproduce.lock"


def check_folder_free(out_dir: Path) -> None:
    """Raise :class:`LockedError` now if another process holds ``out_dir``'s lock (:func:`output_folder_lock`).

    A batch asks this before it loads the training stack (about 15 s of imports), so a second batch on a folder in
    use is refused at once; it still takes the lock itself afterwards, which is what keeps two batches apart.
    Without a lock file nobody holds it, and nothing is created."""
    if _folder_lock_path(out_dir).exists():
        with output_folder_lock(out_dir):
            pass  # free (a killed holder's file): released, and its file removed, at once


def pid_alive(pid) -> bool:
    """Whether a process ``pid`` (an int from a temp name or a progress file) still runs on this machine."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        return True
    return True


def remove_stale_lock(path: Path) -> bool:
    """Remove the lock file ``path`` (and its ``.pid`` file) if no live process holds it; True if removed.

    Taken with :func:`exclusive_lock` (no wait), so a lock in use is never touched.
    """
    path = Path(path)
    if not path.exists():
        return False
    try:
        with exclusive_lock(path, f"lock {path}"):
            pass  # released and removed on exit
    except LockedError:
        return False
    return True


def record_lock(run_dir: Path, wait_s: float = 0.0):
    """The lock that gives a run record one writer at a time (:func:`exclusive_lock` on a file beside it)."""
    run_dir = Path(run_dir)
    return exclusive_lock(run_dir.with_name(f".{run_dir.name}.lock"), f"run record {run_dir}", wait_s=wait_s)
