"""Rewrite the ``config.json`` of finished records so that they hold resolved values only: what
``precision``, ``attention`` and ``dropout`` resolved to (from the record's own ``metrics.json``) and the
parameters an alias fixes (``typhoon_rank``: ``calibration = "rank"``). Records written since
``run_record.write_record`` stores resolved configs need nothing; older ones (the committed reference runs)
said ``auto`` and the field defaults. What a record computed does not change: only its description.

    python scripts/resolve_record_configs.py results/cpu results/bottleneck results/smoke
"""

from __future__ import annotations

import sys
from pathlib import Path

from typhoon import atomic
from typhoon.records import run_record


def resolve_folder(out_dir: Path) -> int:
    """Rewrite every ok record's config.json under ``out_dir/runs`` that is not resolved yet; returns how many."""
    changed = 0
    for metrics_path in sorted(Path(out_dir).glob("runs/*/*/*/seed*/metrics.json")):
        run_dir = metrics_path.parent
        metrics, stored = run_record.read_json(metrics_path), run_record.read_config(run_dir)
        if stored is None or not metrics or metrics.get("status") != "ok":
            continue
        resolved = run_record.resolved_config(stored, metrics).to_dict()
        if resolved != run_record.read_json(run_dir / "config.json"):
            atomic.atomic_write_json(run_dir / "config.json", resolved)
            changed += 1
    return changed


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for folder in sys.argv[1:]:
        print(f"{folder}: {resolve_folder(Path(folder))} config.json rewritten")
