"""Atomic file writing: a file or a folder appears whole or not at all.

A file is written to a temp file in the same folder, fsynced, then renamed over its target; a folder is
filled in a staging folder beside it and published with one rename. A SIGTERM is held while a file is
written (:func:`sigterm_deferred`). A crash leaves the old version (or nothing) plus a temp name that carries
the writer's pid (``.<name>.tmp-<pid>-<random>``), so a clean-up can tell a live writer's temp from one a
dead process left (``runner.stop.clean_stale_staging``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import threading
import uuid
from pathlib import Path


def temp_name(final: Path) -> Path:
    """A temp path beside ``final`` that names its writer's pid: ``.<name>.tmp-<pid>-<random>``."""
    return final.with_name(f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


@contextlib.contextmanager
def sigterm_deferred():
    """Hold a SIGTERM that arrives in the block until it ends, then deliver it.

    SIGTERM's default action ends the process at once, skipping every ``finally``: a writer killed so (a
    job at its walltime) would leave its temp file. Only where that default is in force, in the main thread
    (the one place a handler can be set): a program's own handler (a worker's clean stop, which unwinds
    through the ``finally``) is left as it is. SIGKILL cannot be held: its temps carry a dead pid, and
    :func:`typhoon.runner.stop.clean_stale_staging` removes them."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    arrived = []
    signal.signal(signal.SIGTERM, lambda signum, frame: arrived.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if arrived:
            signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def written_atomically(path: Path):
    """Yield a temp path (:func:`temp_name`) for the block to write; rename it over ``path`` when the block
    ends. Whatever stops the block (a full disk, an exception, a SIGTERM: :func:`sigterm_deferred`) removes
    the temp file, so ``path`` stays as it was. For writers that want a file name; bytes in hand go through
    :func:`atomic_write_bytes`, which fsyncs too."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    with sigterm_deferred():
        try:
            yield tmp
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file beside it (:func:`written_atomically`), fsynced
    before the rename."""
    with written_atomically(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def atomic_write_csv(path: Path, frame) -> None:
    """A pandas DataFrame as CSV (no index), atomically."""
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    atomic_write_text(path, buffer.getvalue())


def _json_default(value):
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def publish_dir(staging: Path, final: Path) -> None:
    """Replace ``final`` by the fully written folder ``staging`` (each step a single rename)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(final, old)
        os.rename(staging, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(staging, final)


def staging_dir(final: Path) -> Path:
    """A fresh temp folder beside ``final`` (same file system, so the publishing rename is atomic)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    path = temp_name(final)
    path.mkdir()
    return path


@contextlib.contextmanager
def staged_dir(final: Path):
    """Yield a staging folder (:func:`staging_dir`) to fill; publish it as ``final`` with one rename when
    the block ends. Whatever stops the block (a full disk, Ctrl-C) removes the staging folder instead, so
    ``final`` stays as it was, never half-written."""
    staging = staging_dir(final)
    try:
        yield staging
        publish_dir(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when the publishing rename happened
        raise
