"""The record of one run on disk: write it, read it back, and say whether it is complete for a config
(the same run, resolved the same way). Locks are in :mod:`.locks`, the tables' schema in :mod:`.schema`,
the results table's rows in :mod:`.result_rows`.

A run's folder appears in one ``rename`` once every file in it is written, so a reader never sees a
half-written record: a crash leaves either the old record, or nothing, plus a temp folder that is
ignored and cleaned up later.
"""


from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from typhoon import _faults
from typhoon.atomic import atomic_write_json, staged_dir

if TYPE_CHECKING:  # typhoon.config loads the masking registry (torch); the table helpers need neither
    from typhoon.config import RunConfig
from typhoon.records.schema import LOSS_COLUMNS


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``, or None if it is missing or unreadable (e.g. truncated)."""
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


@dataclass
class RunRecord:
    """A run record read back: its config, folder, metrics and MLM loss rows."""

    config: RunConfig
    run_dir: Path
    metrics: dict
    mlm_loss: pd.DataFrame
    skipped: bool = False  # True when a complete record already existed and the run was not redone
    resumed_after: str | None = None  # where this run went on from (its resume state's boundary, in words), if it did

    @property
    def final(self) -> dict:
        return self.metrics["final"]


def write_record(run_dir: Path, config: RunConfig, metrics: dict, *, loss_rows=None, strategy=None,
                 traceback_text: str | None = None) -> None:
    """Write every file of a record into a staging folder, then publish it with one rename.

    ``config`` is stored as given: a finished run passes it with its ``auto`` settings as they resolved
    (:meth:`typhoon.training.device_settings.RunSettings.stored_config`), so that its record says what ran.
    ``strategy`` (a masking strategy) saves its state when it learns one (``needs_saliency``);
    ``traceback_text`` goes to ``traceback.txt``, named in the metrics. Whatever stops the writing (a full
    disk, Ctrl-C) removes the staging folder: the record stays as it was, never half-written.
    """
    with staged_dir(run_dir) as staging:
        atomic_write_json(staging / "config.json", config.to_dict())
        pd.DataFrame(loss_rows or [], columns=LOSS_COLUMNS).to_csv(staging / "mlm_loss.csv", index=False)
        if strategy is not None and strategy.needs_saliency:
            strategy.save(staging / "masking_state.npz")
        if traceback_text:
            (staging / "traceback.txt").write_text(traceback_text)
            metrics["traceback"] = "traceback.txt"
        atomic_write_json(staging / "metrics.json", metrics)  # written last: it marks completeness
        _faults.maybe_inject("record_write", config.relative_dir().as_posix(), staging / "metrics.json")


def resume_state_path(run_dir: Path) -> Path:
    """The resume state of the run whose record goes to ``run_dir``: ``.seed<k>.resume.pt`` beside it, kept
    while the run has not written its record (:mod:`typhoon.training.resume`). Its name is not a record
    folder's, and no clean-up of temp files removes it: an interrupted cell goes on from it."""
    run_dir = Path(run_dir)
    return run_dir.with_name(f".{run_dir.name}.resume.pt")


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


#: RunConfig fields whose ``auto`` is resolved where the run executes (the device decides them). A finished
#: record's ``config.json`` stores what they resolved to, so it says what ran, never ``auto``; an older one
#: said ``auto``, and its ``metrics.json`` what that resolved to.
RESOLVED_FIELDS = ("precision", "attention", "dropout")


def resolved_config(config: RunConfig, metrics: dict | None) -> RunConfig:
    """A stored ``config`` read as what its run used: each ``auto`` of :data:`RESOLVED_FIELDS` that an older
    record stored replaced by the value its ``metrics`` name (``precision``, ``attention``, ``dropout``)."""
    changes = {name: metrics[name] for name in RESOLVED_FIELDS
               if getattr(config, name) == "auto" and (metrics or {}).get(name)}
    return config.replace(**changes) if changes else config


def identity_matches(stored: RunConfig, config: RunConfig) -> bool:
    """Whether the stored (resolved) config of a record computed the run ``config`` asks for: equal
    identities (``RunConfig.identity``), where an ``auto`` in ``config`` stands for whatever the record's run
    resolved it to. Whether the record also ran with this machine's numerics is another question
    (:func:`typhoon.records.reuse.find_equal_record` asks both)."""
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
