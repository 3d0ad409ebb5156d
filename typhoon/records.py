"""Run records on disk: atomic writes, completeness, locks, and the results table built from them.

A run's folder appears in one ``rename`` once every file in it is written, so a reader never sees a
half-written record: a crash leaves either the old record, or nothing, plus a temp folder that is
ignored and cleaned up later.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import uuid
from pathlib import Path

import filelock
import pandas as pd

RESULT_COLUMNS = [
    "task", "backbone", "strategy", "seed", "profile", "status", "primary_metric", "primary_value",
    "majority_value", "dev_accuracy", "dev_f1", "dev_mcc", "mlm_wall_s", "ft_wall_s", "wall_s",
    "mlm_tokens_per_s", "ft_tokens_per_s", "device", "record_path", "error",
]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, fsync, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def atomic_write_csv(path: Path, frame: pd.DataFrame) -> None:
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
    path = final.with_name(f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    path.mkdir()
    return path


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``, or None if it is missing or unreadable (e.g. truncated)."""
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


# Where and how fast a run executes does not change what it computes (on one kind of device).
EXECUTION_FIELDS = ("device", "num_threads")


def same_run(stored: dict | None, config: dict) -> bool:
    """Whether a stored config describes the same run as ``config`` (execution fields aside)."""
    if stored is None:
        return False
    config = json.loads(json.dumps(config))  # tuples -> lists etc., as stored
    strip = lambda d: {k: v for k, v in d.items() if k not in EXECUTION_FIELDS}  # noqa: E731
    return strip(stored) == strip(config)


def is_complete(run_dir: Path, config: dict) -> bool:
    """A run is complete when its metrics say ok and its stored config is the same run as ``config``."""
    metrics = read_json(Path(run_dir) / "metrics.json")
    return bool(metrics) and metrics.get("status") == "ok" and same_run(read_json(Path(run_dir) / "config.json"), config)


class LockedError(RuntimeError):
    """Another process holds the lock."""


@contextlib.contextmanager
def exclusive_lock(path: Path, what: str, wait_s: float = 0.0):
    """Hold an OS file lock on ``path`` for the block; wait up to ``wait_s``, then raise LockedError.

    ``filelock`` uses ``flock`` on POSIX and ``msvcrt`` locking on Windows; either way the OS releases
    the lock when the holder dies, so a killed run never leaves a stale lock. The holder's pid goes to
    ``<path>.pid`` (beside the lock, not in it: the lock file's contents belong to the lock) so that a
    refused process can say who holds it; it is removed on release.
    """
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
        lock.release()


def record_row(run_dir: Path, out_dir: Path) -> dict | None:
    """One results-table row from a run record (None if the record is missing or unreadable)."""
    config = read_json(run_dir / "config.json")
    metrics = read_json(run_dir / "metrics.json")
    if config is None or metrics is None:
        return None
    final = metrics.get("final", {})
    timing = metrics.get("timing", {})
    return {
        "task": config["task"], "backbone": config["backbone"],
        "strategy": run_dir.parent.name, "seed": config["seed"], "profile": config["profile"],
        "status": metrics.get("status"), "primary_metric": metrics.get("primary_metric"),
        "primary_value": final.get(f"dev_{metrics.get('primary_metric')}"),
        "majority_value": metrics.get("majority_value"),
        "dev_accuracy": final.get("dev_accuracy"), "dev_f1": final.get("dev_f1"), "dev_mcc": final.get("dev_mcc"),
        "mlm_wall_s": timing.get("mlm_wall_s"), "ft_wall_s": timing.get("ft_wall_s"),
        "wall_s": timing.get("wall_s"), "mlm_tokens_per_s": timing.get("mlm_tokens_per_s"),
        "ft_tokens_per_s": timing.get("ft_tokens_per_s"), "device": metrics.get("device"),
        "record_path": run_dir.relative_to(out_dir).as_posix(), "error": metrics.get("error"),
    }


def collect_results(out_dir: Path, configs: list | None = None) -> pd.DataFrame:
    """The tidy results table (a row per run), rebuilt from the run records under ``out_dir``.

    With ``configs`` (RunConfigs), only those runs, in that order; a missing record is a row with
    status ``missing``.
    """
    out_dir = Path(out_dir)
    rows = []
    if configs is None:
        dirs = sorted(p.parent for p in (out_dir / "runs").glob("*/*/*/seed*/metrics.json"))
        rows = [r for r in (record_row(d, out_dir) for d in dirs) if r is not None]
    else:
        for cfg in configs:
            row = record_row(out_dir / cfg.relative_dir(), out_dir)
            rows.append(row or {"task": cfg.task, "backbone": cfg.backbone, "strategy": cfg.label,
                                "seed": cfg.seed, "profile": cfg.profile, "status": "missing",
                                "record_path": cfg.relative_dir().as_posix()})
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)
