"""Where the time of ``reproduce --profile smoke`` goes: preflight, each cell (its time in the batch against
the run's own wall time in its record: the difference is the cell's fixed cost, set-up and writing the record;
a worker's start and imports come on top once per worker, before its first cell), and each notebook and the
report.

    python benchmarks/bench_smoke.py [--profile smoke] [--workers N] [--set KEY=VALUE ...] [--cells N]
        [--no-analysis] [--out DIR] [--json FILE]

It runs the grid as ``reproduce`` does (typhoon.runner.study: run_cells on the local pool of worker processes,
then typhoon.studies.grid.analysis.run_analysis; each notebook's time is the duration papermill records in it), into a
fresh temporary folder unless ``--out`` is given, and prints a table, then the fixed cost per cell (median and
range over the cells). ``--cells N`` runs only the grid's first N cells; ``--no-analysis`` stops after the grid
(the fixed cost needs only the cells). Say the machine and its load beside the figures: a shared machine's
load moves them a lot.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from typhoon import atomic
from typhoon.config import parse_overrides
from typhoon.profiles import get_profile
from typhoon.records import result_rows, run_record
from typhoon.runner import notebooks, study
from typhoon.runner.cells import Cell
from typhoon.studies.grid import policy as grid


def papermill_duration(notebook: Path) -> float | None:
    """The seconds papermill recorded for executing ``notebook`` (its metadata)."""
    meta = json.loads(notebook.read_text()).get("metadata", {}).get("papermill", {}) if notebook.is_file() else {}
    return meta.get("duration")


def fixed_costs(cells: list[dict]) -> list[float]:
    """Each finished cell's time in the batch less its record's own wall time: the cell's fixed cost."""
    return [c["cell_s"] - c["run_wall_s"] for c in cells if c["status"] == "ok" and c["run_wall_s"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--set", action="append", metavar="KEY=VALUE")
    parser.add_argument("--cells", type=int, help="only the grid's first N cells")
    parser.add_argument("--no-analysis", action="store_true", help="stop after the grid (no notebooks, no report)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    spec = get_profile(args.profile)
    workers = args.workers or spec.workers
    out = args.out or Path(tempfile.mkdtemp(prefix=f"bench_{args.profile}_"))
    figures = {"profile": args.profile, "workers": workers, "out": str(out), "load_before": os.getloadavg()}
    total = time.perf_counter()

    start = time.perf_counter()
    configs = spec.grid(parse_overrides(args.set))[: args.cells]
    grid.preflight(configs)
    figures["preflight_s"] = time.perf_counter() - start

    start = time.perf_counter()
    with study.local_pool(workers) as pool:  # the worker processes reproduce runs the cells in
        cells = study.run_cells([Cell(config) for config in configs], out, pool)
    figures["grid_s"] = time.perf_counter() - start
    figures["cells"] = []
    for row in cells.to_dict("records"):
        metrics = run_record.read_json(out / row["record_path"] / "metrics.json") or {}
        timing = metrics.get("timing", {})
        figures["cells"].append({"cell": row["record_path"], "status": row["status"], "cell_s": row["seconds"],
                                 "run_wall_s": timing.get("wall_s"), "mlm_s": timing.get("mlm_wall_s"),
                                 "ft_s": timing.get("ft_wall_s"), "threads": metrics.get("threads")})
    atomic.atomic_write_csv(out / "results.csv", result_rows.collect_results(out, configs))
    print(f"grid {figures['grid_s']:.1f} s", flush=True)

    if not args.no_analysis:
        start = time.perf_counter()
        grid.run_analysis(out, notebooks.notebooks_dir(), spec.analysis, spec.name, configs=configs,
                          workers=workers)  # as reproduce does
        figures["analysis_s"] = time.perf_counter() - start
        figures["analysis"] = {nb.name: papermill_duration(out / "notebooks" / nb.name)
                               for nb in notebooks.ANALYSIS_NOTEBOOKS}
    figures["total_s"] = time.perf_counter() - total
    figures["load_after"] = os.getloadavg()

    print(f"profile {args.profile}: {len(configs)} cells, {workers} worker(s); load average before "
          f"{figures['load_before'][0]:.1f}, after {figures['load_after'][0]:.1f}")
    print(f"preflight {figures['preflight_s']:.1f} s; grid {figures['grid_s']:.1f} s")
    for c in figures["cells"]:
        overhead = c["cell_s"] - c["run_wall_s"] if c["run_wall_s"] else float("nan")
        print(f"  {c['cell']:45s} {c['status']:6s} cell {c['cell_s']:6.1f} s  run {c['run_wall_s'] or 0:6.1f} s "
              f"(MLM {c['mlm_s'] or 0:5.1f}, FT {c['ft_s'] or 0:5.1f})  outside the run {overhead:5.1f} s  "
              f"threads {c['threads']}")
    fixed = fixed_costs(figures["cells"])
    if fixed:
        figures["fixed_cost_s"] = {"median": statistics.median(fixed), "min": min(fixed), "max": max(fixed)}
        print(f"fixed cost per cell (its time in the batch less its run's wall time): median "
              f"{statistics.median(fixed):.2f} s, range {min(fixed):.2f}-{max(fixed):.2f} s over {len(fixed)} cell(s)")
    for name, seconds in figures.get("analysis", {}).items():
        print(f"  analysis {name:32s} {seconds:6.1f} s (papermill's duration, kernel start included)")
    if "analysis_s" in figures:
        print(f"analysis and report {figures['analysis_s']:.1f} s ({workers} notebook(s) at once)")
    print(f"total {figures['total_s']:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    failed = [c["cell"] for c in figures["cells"] if c["status"] != "ok"]
    if failed:
        print(f"failed cells: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
