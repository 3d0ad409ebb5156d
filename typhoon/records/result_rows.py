"""Rows of the results table (results.csv: one per run, from its record) and of the grid's status table,
and ``collect_results``, which builds results.csv from the records on disk."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:  # typhoon.config loads the masking registry (torch); the table helpers need neither
    from typhoon.config import RunConfig
from typhoon.records.run_record import read_config, read_json
from typhoon.records.schema import RESULT_COLUMNS


def run_keys(config: RunConfig) -> dict:
    """The columns that name a run in results.csv and the status table (GRID_KEYS, one per grid axis), from
    its config: the strategy alone, the schedule beside it."""
    return {"task": config.task, "backbone": config.backbone, "strategy": config.strategy,
            "schedule": config.schedule, "seed": config.seed}


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
               resumed: str | None = None) -> dict:
    """The grid's status-table row of a cell (STATUS_COLUMNS): ok / failed / skipped / stopped, its error, how
    long, and what it resumed after (``resumed``: e.g. "the MLM phase", when it went on from a resume state)."""
    return {**run_keys(config), "status": status, "error": error, "seconds": seconds,
            "record_path": config.relative_dir().as_posix(), "resumed": resumed}


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
