"""The targets of issue 50 measured from one ``reproduce`` output folder: the table ``scripts/gpu_check.sh`` prints.

    python benchmarks/gpu_targets.py OUT [--dmon DMON_LOG] [--elapsed-s S --cells N] [--goal-wall-s 300]

- **wall**: the reproduce's wall time (``MANIFEST.json``'s ``wall_s``), against ``--goal-wall-s`` (5 min: the
  paper-shapes grid on one H200). A run stopped by a time cap leaves a manifest with its ``history`` alone (or
  none): then ``--elapsed-s`` (the caller's clock) is the wall time of the cells that finished, and the whole
  grid's (``--cells``) is projected
  from it at the same rate per cell (``elapsed x cells / runs ok``), said as a projection (the grid runs its
  backbones in order, smallest first in paper-shapes: a projection from its first cells is a lower bound).
- **SM busy**: the mean of the ``sm`` column of an ``nvidia-smi dmon -s u`` log (every sample of every GPU),
  against 80 %; "not measured" without a log (a CPU machine).
- **Typhoon / random MLM step**: per (task, backbone, seed) with both records ok, the ratio of seconds per MLM
  step (``timing.mlm_wall_s / timing.mlm_steps``: the same batches for both strategies); their geometric mean and
  range, against 1.05. Cells that shared a device blur it (issue 50): the range says how much.
- **estimate**: the estimate ``reproduce`` made before its cells (``MANIFEST.json``'s ``estimate.total_s``, or the
  stopped invocation's in its ``history``) against the wall time (a stopped run's projection), within +-25 %.

Only files are read, with no import of torch: on a CPU the same table is made from a smoke or reduced run.
Exit status 0 (the table printed, targets met or not), 2 bad input (no such folder, no records in it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

SM_BUSY_GOAL = 80.0  # per cent of the time the SMs are busy (nvidia-smi dmon's sm column)
STEP_RATIO_GOAL = 1.05  # Typhoon's MLM step against random's
ESTIMATE_GOAL = 0.25  # |actual / estimate - 1|


def read_records(out: Path) -> list[dict]:
    """(config, metrics) of every record under ``out/runs`` as dicts with the grid keys, status and timing."""
    rows = []
    for metrics_path in sorted(out.glob("runs/*/*/*/seed*/metrics.json")):
        config = json.loads((metrics_path.parent / "config.json").read_text())
        metrics = json.loads(metrics_path.read_text())
        rows.append({"task": config["task"], "backbone": config["backbone"], "strategy": config["strategy"],
                     "seed": config["seed"], "status": metrics.get("status"), "timing": metrics.get("timing") or {},
                     "device": metrics.get("device")})
    return rows


def step_ratios(records: list[dict]) -> list[tuple[str, float]]:
    """(task/backbone/seed, Typhoon's seconds per MLM step / random's) for every pair with both ok."""
    per_step = {}
    for r in records:
        timing = r["timing"]
        if r["status"] == "ok" and timing.get("mlm_steps"):
            per_step[(r["task"], r["backbone"], r["seed"], r["strategy"])] = timing["mlm_wall_s"] / timing["mlm_steps"]
    return [(f"{task}/{backbone}/seed{seed}", per_step[(task, backbone, seed, "typhoon")] / random_s)
            for (task, backbone, seed, strategy), random_s in sorted(per_step.items())
            if strategy == "random" and (task, backbone, seed, "typhoon") in per_step]


def sm_busy_percent(dmon_log: Path) -> float | None:
    """Mean of the ``sm`` column over every sample of an ``nvidia-smi dmon`` log; None without samples."""
    column, samples = None, []
    for line in dmon_log.read_text().splitlines():
        words = line.split()
        if line.startswith("#") and "sm" in words:
            column = words.index("sm") - (words[0] == "#")  # "# gpu sm ..." (a lone "#"), or "#Time gpu sm ..."
        elif column is not None and words and not line.startswith("#") and len(words) > column:
            if words[column].replace(".", "", 1).isdigit():  # "-" where a sample is missing
                samples.append(float(words[column]))
    return sum(samples) / len(samples) if samples else None


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def targets(out: Path, dmon_log: Path | None = None, elapsed_s: float | None = None, cells: int | None = None,
            goal_wall_s: float = 300.0) -> list[tuple[str, str, str, str]]:
    """(target, measured, goal, met) rows; ``elapsed_s`` and ``cells`` (the grid's size) for a run without manifest."""
    records = read_records(out)
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    ok = sum(r["status"] == "ok" for r in records)
    rows, projected = [], ""
    if "wall_s" in manifest:  # the grid finished
        wall_s, estimate = float(manifest["wall_s"]), manifest.get("estimate")
        rows.append(("grid wall time", f"{minutes(wall_s)} ({ok} runs ok)", f"<= {minutes(goal_wall_s)}",
                     _met(wall_s <= goal_wall_s)))
    elif elapsed_s is not None and ok:  # stopped at a cap: its manifest, if any, holds the stopped invocation
        cells = cells or ok
        wall_s, projected = elapsed_s * cells / ok, " (projected)"
        estimate = (manifest.get("history") or [{}])[-1].get("estimate")
        rows.append(("grid wall time", f"stopped at the cap: {ok} of {cells} runs ok in {minutes(elapsed_s)}; "
                     f"projected {minutes(wall_s)} at their rate", f"<= {minutes(goal_wall_s)}",
                     _met(wall_s <= goal_wall_s) + projected))
    else:
        rows.append(("grid wall time", "no finished MANIFEST.json and no --elapsed-s", f"<= {minutes(goal_wall_s)}",
                     "-"))
        wall_s = estimate = None
    busy = sm_busy_percent(dmon_log) if dmon_log is not None and dmon_log.is_file() else None
    rows.append(("SMs busy", "not measured (no nvidia-smi dmon log)" if busy is None else f"{busy:.0f} %",
                 f">= {SM_BUSY_GOAL:.0f} %", "-" if busy is None else _met(busy >= SM_BUSY_GOAL)))
    ratios = step_ratios(records)
    if ratios:
        values = [r for _, r in ratios]
        mean = math.exp(sum(math.log(v) for v in values) / len(values))
        rows.append(("Typhoon / random MLM step", f"{mean:.3f}x (geometric mean of {len(values)} pairs, "
                     f"{min(values):.3f}-{max(values):.3f})", f"<= {STEP_RATIO_GOAL:.2f}x",
                     _met(mean <= STEP_RATIO_GOAL)))
    else:
        rows.append(("Typhoon / random MLM step", "no pair of ok records", f"<= {STEP_RATIO_GOAL:.2f}x", "-"))
    estimate_s = (estimate or {}).get("total_s")
    if estimate_s and wall_s:
        off = wall_s / estimate_s - 1.0
        rows.append(("estimate vs actual", f"estimate {minutes(estimate_s)}, actual{projected} {minutes(wall_s)} "
                     f"({off:+.0%})", f"within +-{ESTIMATE_GOAL:.0%}", _met(abs(off) <= ESTIMATE_GOAL) + projected))
    else:
        rows.append(("estimate vs actual", "no estimate in MANIFEST.json, or no wall time",
                     f"within +-{ESTIMATE_GOAL:.0%}", "-"))
    return rows


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def format_table(rows: list[tuple[str, str, str, str]]) -> str:
    header = ("target", "measured", "goal", "")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(4)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the output folder of a reproduce (e.g. outputs/paper-shapes)")
    parser.add_argument("--dmon", type=Path, help="an `nvidia-smi dmon -s u` log taken while it ran")
    parser.add_argument("--elapsed-s", type=float, help="the caller's wall time of a run stopped by a time cap")
    parser.add_argument("--cells", type=int, help="the grid's number of cells, to project a capped run's wall time")
    parser.add_argument("--goal-wall-s", type=float, default=300.0, help="the wall-time goal (default 300 s)")
    args = parser.parse_args(argv)
    if not args.out.is_dir():
        print(f"gpu_targets: error: no output folder {args.out}", file=sys.stderr)
        return 2
    if not any(args.out.glob("runs/*/*/*/seed*/metrics.json")):
        print(f"gpu_targets: error: {args.out} holds no run records (runs/<task>/<backbone>/<strategy>/seed<N>/)",
              file=sys.stderr)
        return 2
    print(format_table(targets(args.out, args.dmon, args.elapsed_s, args.cells, args.goal_wall_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
