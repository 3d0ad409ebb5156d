"""The estimate against the real grid: ``reproduce --estimate``'s figures, then the same cells run.

    python benchmarks/bench_estimate.py --profile smoke [--analysis]
    python benchmarks/bench_estimate.py --profile cpu --cells 2 --set max_train_examples=1000 --set ft_epochs=1
    python benchmarks/bench_estimate.py --manifest outputs/smoke   # after `python -m typhoon reproduce`

Runs :func:`typhoon.runner.estimate.estimate_grid` on the first ``--cells`` cells of the profile's grid (all by
default), then those cells with :func:`typhoon.runner.study.run_cells` (``--workers`` at once, default the
profile's) into a fresh temporary folder, then with ``--analysis`` the analysis notebooks as
``reproduce`` runs them. Prints each cell's estimate beside its real notebook time, and the grid's
(and with ``--analysis`` the whole reproduction's) estimate beside the real wall time, with the error
in percent. ``--manifest DIR`` instead compares a finished ``reproduce`` (which estimated first) with
its estimate: each cell's notebook time (papermill's, from the executed notebook) and the manifest's
``wall_s`` against its ``estimate``. Say the machine and its load with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from typhoon import atomic
from typhoon.config import parse_overrides
from typhoon.profiles import get_profile
from typhoon.records import result_rows, run_record
from typhoon.runner import estimate, notebooks, study
from typhoon.runner.cells import Cell
from typhoon.studies.grid import policy as grid


def error(estimated: float, actual: float) -> str:
    return f"{100 * (estimated - actual) / actual:+5.0f} %"


def compare_manifest(out: Path) -> None:
    """A finished reproduce's estimate (MANIFEST.json) against what its cells and the whole run took."""
    manifest = json.loads((out / "MANIFEST.json").read_text())
    plan = manifest.get("estimate")
    if not plan:
        raise SystemExit(f"{out}/MANIFEST.json has no estimate (was reproduce run with --no-estimate?)")
    print(f"{out}: estimate taken in {plan['calibration_s']:.0f} s, cores' share {100 * plan['core_share']:.0f} %")
    for path, cell in plan["per_cell"].items():
        rel = Path(path)
        notebook = out / "notebooks" / rel.parent / f"{rel.name}.ipynb"
        meta = json.loads(notebook.read_text())["metadata"].get("papermill", {}) if notebook.is_file() else {}
        if meta.get("duration"):
            print(f"  {path:45s} estimate {cell['total_s']:6.0f} s  actual {meta['duration']:6.0f} s  "
                  f"{error(cell['total_s'], meta['duration'])}")
    # wall_s covers the cells and the analysis, not the estimate's own calibration (taken before the clock
    # of the grid)
    actual = manifest["wall_s"] - plan["calibration_s"]
    print(f"  reproduce after the estimate: estimate {plan['total_s']:.0f} s, actual {actual:.0f} s  "
          f"{error(plan['total_s'], actual)} (the manifest's wall_s {manifest['wall_s']:.0f} s includes the estimate)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, help="compare a finished reproduce's estimate with its run")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--cells", type=int, help="only N cells of the grid (from --start)")
    parser.add_argument("--start", type=int, default=0, help="the first cell taken (its index in the grid)")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--set", action="append", metavar="KEY=VALUE")
    parser.add_argument("--analysis", action="store_true", help="also run the analysis notebooks and compare")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.manifest:
        compare_manifest(args.manifest)
        return
    spec = get_profile(args.profile)
    workers = args.workers or spec.workers
    configs = spec.grid(parse_overrides(args.set))[args.start:][: args.cells]
    out = args.out or Path(tempfile.mkdtemp(prefix=f"bench_estimate_{args.profile}_"))
    load_before = os.getloadavg()[0]

    plan = estimate.estimate_grid(spec.name, configs, out, workers, analysis=args.analysis,
                                  quick_analysis=bool(spec.analysis.get("quick")))
    print(plan.text(max_cells=10**6), flush=True)

    grid.preflight(configs)
    start = time.perf_counter()
    with study.local_pool(workers) as pool:  # the worker processes reproduce runs the cells in
        cells = study.run_cells([Cell(config) for config in configs], out, pool)
    grid_s = time.perf_counter() - start
    analysis_s = None
    if args.analysis:
        atomic.atomic_write_csv(out / "results.csv", result_rows.collect_results(out, configs))
        start = time.perf_counter()
        grid.run_analysis(out, notebooks.notebooks_dir(), spec.analysis, spec.name, configs=configs, workers=workers)
        analysis_s = time.perf_counter() - start

    rows = []
    print(f"\nestimate vs actual ({len(configs)} cells, {workers} worker(s); load average before "
          f"{load_before:.1f}, after {os.getloadavg()[0]:.1f}; estimate took {plan.calibration_s:.0f} s)")
    for row in cells.to_dict("records"):
        predicted = plan.per_cell.get(row["record_path"], {}).get("total_s")
        metrics = run_record.read_json(out / row["record_path"] / "metrics.json") or {}
        timing = metrics.get("timing", {})
        share = ((timing.get("mlm_cpu_s", 0) + timing.get("ft_cpu_s", 0))
                 / max((timing.get("mlm_wall_s", 0) + timing.get("ft_wall_s", 0)) * (metrics.get("threads") or 1), 1e-9))
        rows.append({"cell": row["record_path"], "status": row["status"], "estimate_s": predicted, "core_share": share,
                     "actual_s": row["seconds"], "run_wall_s": timing.get("wall_s"),
                     "mlm_s": timing.get("mlm_wall_s"), "ft_s": timing.get("ft_wall_s"),
                     "estimate_mlm_s": plan.per_cell.get(row["record_path"], {}).get("mlm_s"),
                     "estimate_ft_s": plan.per_cell.get(row["record_path"], {}).get("ft_s")})
        r = rows[-1]
        if predicted and r["actual_s"]:
            print(f"  {r['cell']:45s} estimate {predicted:6.0f} s  actual {r['actual_s']:6.0f} s  "
                  f"{error(predicted, r['actual_s'])}   (MLM {r['estimate_mlm_s']:.0f} vs {r['mlm_s'] or 0:.0f} s, "
                  f"FT {r['estimate_ft_s']:.0f} vs {r['ft_s'] or 0:.0f} s)")
    print(f"  grid: estimate {plan.grid_s:.0f} s, actual {grid_s:.0f} s  {error(plan.grid_s, grid_s)}")
    # The load of other jobs moves both figures: the estimate at the share of their cores the calibration
    # processes got, rescaled to the share the real cells got (from their records' CPU and wall time).
    shares = [r["core_share"] for r in rows if r["core_share"]]
    run_share = sum(shares) / len(shares) if shares else 1.0
    rescaled = plan.grid_s * plan.core_share / run_share
    print(f"  cores' share: calibration {100 * plan.core_share:.0f} %, real cells {100 * run_share:.0f} %; grid "
          f"estimate at the cells' share {rescaled:.0f} s  {error(rescaled, grid_s)}; on idle cores "
          f"{plan.grid_s * plan.core_share:.0f} s")
    if analysis_s is not None:
        print(f"  analysis: estimate {plan.analysis_s:.0f} s (reference), actual {analysis_s:.0f} s  "
              f"{error(plan.analysis_s, analysis_s)}")
        print(f"  total: estimate {plan.total_s:.0f} s, actual {grid_s + analysis_s:.0f} s  "
              f"{error(plan.total_s, grid_s + analysis_s)}")
    if args.json:
        args.json.write_text(json.dumps({"estimate": plan.to_dict(), "cells": rows, "grid_s": grid_s,
                                         "run_core_share": run_share, "rescaled_grid_s": rescaled,
                                         "analysis_s": analysis_s, "load_before": load_before}, indent=1))


if __name__ == "__main__":
    main()
