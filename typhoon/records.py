"""Run records on disk: the record of one run (write, read back, complete or not),
locks, and the results table built from the records (its schema and its one row builder).

A run's folder appears in one ``rename`` once every file in it is written, so a reader never sees a
half-written record: a crash leaves either the old record, or nothing, plus a temp folder that is
ignored and cleaned up later.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import filelock
import pandas as pd

from typhoon import faults
from typhoon.atomic import (  # noqa: F401 -- re-exported: the writers every record user already calls as records.*
    atomic_write_bytes,
    atomic_write_csv,
    atomic_write_json,
    atomic_write_text,
    publish_dir,
    staged_dir,
    staging_dir,
)

if TYPE_CHECKING:  # typhoon.config loads the masking registry (torch); the table helpers need neither
    from typhoon.config import RunConfig

# The tables' schema. A run is named by RUN_KEYS in every table (strategy = the config's label, which
# adds a non-fixed schedule); results.csv has a row per run, the grid's status table a row per cell.
RUN_KEYS = ["task", "backbone", "strategy", "seed"]
# Typhoon-family runs: how their masking was calibrated, from which loss's saliency, and how far their final
# masking distribution is from uniform masking (budget moved = TV, KL in nats/token: metrics["masking"]).
# Empty for the other strategies.
MASKING_COLUMNS = ["calibration", "saliency", "budget_moved", "kl_to_uniform"]
RESULT_COLUMNS = [
    *RUN_KEYS, "profile", "status", "primary_metric", "primary_value",
    "majority_value", "dev_accuracy", "dev_f1", "dev_mcc", *MASKING_COLUMNS, "mlm_wall_s", "ft_wall_s", "wall_s",
    "mlm_tokens_per_s", "ft_tokens_per_s", "device", "precision", "record_path", "error",
    "task_head_accuracy", "task_head_learned",  # task-loss saliency only: its task model's check (task_saliency)
    "mlm_full_mask_loss",  # the MLM's dev loss with every token masked (pipeline.full_mask_dev_loss; schedule_study)
]
STATUS_COLUMNS = [*RUN_KEYS, "status", "error", "seconds", "record_path", "notebook"]
LOSS_COLUMNS = ["step", "epoch", "split", "loss"]  # mlm_loss.csv




def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``, or None if it is missing or unreadable (e.g. truncated)."""
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


# --------------------------------------------------------------------------------------------------
# The record of one run: <out>/runs/<task>/<backbone>/<strategy>/seed<k>/ (docs/CONTRACTS.md)


@dataclass
class RunRecord:
    """A run record read back: its config, folder, metrics and MLM loss rows."""

    config: RunConfig
    run_dir: Path
    metrics: dict
    mlm_loss: pd.DataFrame
    skipped: bool = False  # True when a complete record already existed and the run was not redone

    @property
    def final(self) -> dict:
        return self.metrics["final"]


def write_record(run_dir: Path, config: RunConfig, metrics: dict, *, loss_rows=None, strategy=None,
                 traceback_text: str | None = None) -> None:
    """Write every file of a record into a staging folder, then publish it with one rename.

    ``strategy`` (a masking strategy) saves its state when it learns one (``needs_saliency``);
    ``traceback_text`` goes to ``traceback.txt``, named in the metrics. Whatever stops the writing (a full
    disk, Ctrl-C) removes the staging folder: the record stays as it was, never half-written.
    """
    with staged_dir(run_dir) as staging:
        stored = resolved_config(config, metrics) if metrics.get("status") == "ok" else config
        atomic_write_json(staging / "config.json", stored.to_dict())
        pd.DataFrame(loss_rows or [], columns=LOSS_COLUMNS).to_csv(staging / "mlm_loss.csv", index=False)
        if strategy is not None and strategy.needs_saliency:
            strategy.save(staging / "masking_state.npz")
        if traceback_text:
            (staging / "traceback.txt").write_text(traceback_text)
            metrics["traceback"] = "traceback.txt"
        atomic_write_json(staging / "metrics.json", metrics)  # written last: it marks completeness
        faults.maybe_inject("record_write", config.relative_dir().as_posix(), staging / "metrics.json")


def read_config(run_dir: Path) -> RunConfig | None:
    """The stored config of a record, or None if it is missing, unreadable or not a valid RunConfig."""
    from typhoon.config import RunConfig

    stored = read_json(Path(run_dir) / "config.json")
    try:
        return None if stored is None else RunConfig.from_dict(stored)
    except ValueError:
        return None


def read_record(run_dir: str | Path, skipped: bool = False) -> RunRecord:
    """Read a complete run record back (for notebooks, the CLI and tests)."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    metrics = read_json(run_dir / "metrics.json")
    if config is None or metrics is None:
        raise FileNotFoundError(f"no complete run record in {run_dir}")
    return RunRecord(config, run_dir, metrics, pd.read_csv(run_dir / "mlm_loss.csv"), skipped)


#: RunConfig fields whose ``auto`` is resolved where the run executes (the device decides them). A record's
#: ``config.json`` stores what they resolved to, so it says what ran, never ``auto``.
RESOLVED_FIELDS = ("precision", "attention", "dropout")


def resolved_config(config: RunConfig, metrics: dict | None) -> RunConfig:
    """``config`` with each ``auto`` of :data:`RESOLVED_FIELDS` replaced by what the run used (``metrics``
    of a finished run say it: ``precision``, ``attention``, ``dropout``)."""
    changes = {name: metrics[name] for name in RESOLVED_FIELDS
               if getattr(config, name) == "auto" and (metrics or {}).get(name)}
    return config.replace(**changes) if changes else config


def identity_matches(stored: RunConfig, config: RunConfig) -> bool:
    """Whether the stored (resolved) config of a record computed the run ``config`` asks for: equal
    identities (``RunConfig.identity``), where an ``auto`` in ``config`` stands for whatever the record's run
    resolved it to. Whether the record also ran with this machine's numerics is another question
    (:func:`typhoon.reuse.find_equal_record` asks both)."""
    wanted, found = config.identity(), stored.identity()
    for name in RESOLVED_FIELDS:
        if wanted.get(name) == "auto":
            wanted[name] = found.get(name)
    return wanted == found


def same_run(stored: RunConfig | None, config: RunConfig, metrics: dict | None = None) -> bool:
    """Whether a stored config (with its run's ``metrics``, which resolve an older record's ``auto``)
    describes the same run as ``config``: the same identity in the same profile."""
    return (stored is not None and stored.profile == config.profile
            and identity_matches(resolved_config(stored, metrics), config))


def record_status(run_dir: Path, config: RunConfig) -> str | None:
    """The status ("ok" | "failed") of the record in ``run_dir`` if it is a record of ``config``'s run, else None."""
    metrics = read_json(Path(run_dir) / "metrics.json")
    if not metrics or not same_run(read_config(run_dir), config, metrics):
        return None
    return metrics.get("status")


def why_incomplete(run_dir: Path, config: RunConfig) -> str | None:
    """Why the record in ``run_dir`` does not complete ``config``'s cell, in words (None when it does; "no
    record yet" for an empty folder): a damaged file is named with the error that reading it gave, so a
    grid that trains the cell again says why instead of silently replacing what was there."""
    run_dir = Path(run_dir)
    metrics_path, config_path = run_dir / "metrics.json", run_dir / "config.json"
    if not metrics_path.exists():
        return "no record yet"
    try:
        metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        return f"{metrics_path.name} is unreadable ({type(err).__name__}: {err}); the cell is trained again"
    if not isinstance(metrics, dict):
        return f"{metrics_path.name} holds no JSON object; the cell is trained again"
    stored = read_config(run_dir)
    if stored is None:
        return f"{config_path.name} is missing or not a valid run config; the cell is trained again"
    if not same_run(stored, config, metrics):
        return "the record is of another run (its config differs from this cell's); the cell is trained again"
    if metrics.get("status") != "ok":
        return f"the last attempt {metrics.get('status', 'has no status')}: {metrics.get('error', '')}".rstrip(": ")
    return None


def is_complete(run_dir: Path, config: RunConfig) -> bool:
    """A run is complete when its record says ok and its stored config is the same run as ``config``."""
    return record_status(run_dir, config) == "ok"


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


# --------------------------------------------------------------------------------------------------
# Tables: the one row builder per table, and results.csv rebuilt from the records


def run_keys(config: RunConfig) -> dict:
    """The columns that name a run in every table (RUN_KEYS), from its config."""
    return {"task": config.task, "backbone": config.backbone, "strategy": config.label, "seed": config.seed}


def result_row(config: RunConfig, metrics: dict | None, record_path: str) -> dict:
    """The results-table row of a run (RESULT_COLUMNS) from its config and metrics; metrics None: missing."""
    metrics = metrics if metrics is not None else {"status": "missing"}
    final, timing, masking = metrics.get("final", {}), metrics.get("timing", {}), metrics.get("masking") or {}
    primary = metrics.get("primary_metric")
    row = {
        **run_keys(config), "profile": config.profile,
        "status": metrics.get("status"), "primary_metric": primary,
        "primary_value": final.get(f"dev_{primary}"), "majority_value": metrics.get("majority_value"),
        "dev_accuracy": final.get("dev_accuracy"), "dev_f1": final.get("dev_f1"), "dev_mcc": final.get("dev_mcc"),
        "calibration": masking.get("calibration"),
        # records written before the saliency source existed computed it from the MLM loss
        "saliency": masking.get("saliency", "mlm") if "calibration" in masking else None,
        "budget_moved": masking.get("budget_moved"), "kl_to_uniform": masking.get("kl_to_uniform"),
        **{key: timing.get(key) for key in ("mlm_wall_s", "ft_wall_s", "wall_s", "mlm_tokens_per_s", "ft_tokens_per_s")},
        "device": metrics.get("device"), "precision": metrics.get("precision"), "record_path": record_path,
        "error": metrics.get("error"), **task_head_columns(masking.get("saliency"), metrics),
        "mlm_full_mask_loss": metrics.get("mlm_full_mask_loss"),
    }
    return {column: row[column] for column in RESULT_COLUMNS}


def task_head_columns(saliency: str | None, metrics: dict) -> dict:
    """The task model's dev accuracy and whether it beat the majority class, for task-saliency runs (else
    None). A task-saliency record without the check (written before it existed) is not known to have
    learned: ``task_head_learned`` False flags it in every table built from results.csv."""
    if saliency != "task":
        return {"task_head_accuracy": None, "task_head_learned": None}
    head = metrics.get("task_head") or {}
    return {"task_head_accuracy": head.get("dev_accuracy"), "task_head_learned": bool(head.get("learned", False))}


def status_row(config: RunConfig, status: str, *, error: str | None = None, seconds: float = 0.0,
               notebook: str | None = None) -> dict:
    """The grid's status-table row of a cell (STATUS_COLUMNS): ok / failed / skipped, its error, how long."""
    return {**run_keys(config), "status": status, "error": error, "seconds": seconds,
            "record_path": config.relative_dir().as_posix(), "notebook": notebook}


def _stored_row(run_dir: Path, out_dir: Path) -> dict | None:
    """The results row of the record in ``run_dir`` (None if it is missing or unreadable)."""
    config, metrics = read_config(run_dir), read_json(run_dir / "metrics.json")
    if config is None or metrics is None:
        return None
    return result_row(config, metrics, run_dir.relative_to(out_dir).as_posix())


def collect_results(out_dir: Path, configs: list[RunConfig] | None = None) -> pd.DataFrame:
    """The tidy results table (a row per run), rebuilt from the run records under ``out_dir``.

    With ``configs``, only those runs, in that order; a missing record is a row with status ``missing``.
    """
    out_dir = Path(out_dir)
    if configs is None:
        dirs = sorted(p.parent for p in (out_dir / "runs").glob("*/*/*/seed*/metrics.json"))
        rows = [r for r in (_stored_row(d, out_dir) for d in dirs) if r is not None]
    else:
        rows = [_stored_row(out_dir / c.relative_dir(), out_dir)
                or result_row(c, None, c.relative_dir().as_posix()) for c in configs]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)
