"""Rewrite the ``config.json`` of finished records so that they hold resolved values only: what
``precision``, ``attention`` and ``dropout`` resolved to (from the record's own ``metrics.json``) and the
parameters an alias fixes (``typhoon_rank``: ``calibration = "rank"``). Records written since
``run_record.write_record`` stores resolved configs need nothing; older ones (the committed reference runs)
said ``auto`` and the field defaults. What a record computed does not change: only its description.

    python scripts/resolve_record_configs.py results/cpu results/bottleneck results/smoke
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="output folders (their records are under runs/)")
    args = parser.parse_args(argv)
    missing = [str(folder) for folder in args.folders if not (folder / "runs").is_dir()]
    if missing:
        parser.error(f"no runs/ folder in {', '.join(missing)}")
    for folder in args.folders:
        print(f"{folder}: {resolve_folder(folder)} config.json rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
