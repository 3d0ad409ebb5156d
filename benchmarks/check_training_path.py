"""Is the training path numerically unchanged between two commits? Compare two output folders bit for bit.

Issue 23, defect 6: the 18 ``results/cpu`` records were trained at older commits than the code that built
their tables. Every commit named by their ``git_commit`` holds the same ``typhoon/`` tree (31c4c20, the
one of a2f9934), so one old commit stands for all of them. The same reduced cell is trained at that commit
and at the final one, on one machine (same numerics), and the records are compared here:

- ``metrics.json``: ``final``, ``epochs`` (dev metrics and train loss per epoch), ``masking`` (the
  strategy's statistics), ``majority_value``, ``n_train``, ``n_dev`` and the resolved execution choices
  (``precision``, ``attention``, ``dropout``, ``threads``), a ``typhoon_task`` run's ``task_head`` (but
  its warm-up's wall time) and ``mlm_task_loss_by_epoch``, and of ``timing`` the counts (MLM steps, FLOPs);
  times, hardware probe and ``git_commit`` are left out, as they differ by design;
- ``mlm_loss.csv``: its bytes;
- ``masking_state.npz`` (Typhoon): every array's dtype, shape and bytes;
- ``config.json``: the fields both sides hold, with an ``auto`` execution choice (``attention``,
  ``dropout``, ``precision``, ``device``, ``num_threads``) read as the value ``metrics.json`` resolved it
  to (the final code writes resolved values into config.json, the old one wrote ``auto``).

A key one side holds and the other lacks (a field or statistic added since, such as ``saliency``) is
listed under "format", not counted as a difference: the old code ran with its default. Every value both
sides hold must be identical.

Floats are compared through their JSON text (Python writes the shortest repr that reads back to the same
double), so "identical" means the same doubles, not "close".

How to make the check (issue 23's, for example): two checkouts side by side, one at the old commit and one at the
new (``git worktree add --detach ../old a2f9934`` and ``git worktree add --detach ../new 87ffd38``), each with its
own ``make install``; then, one process at a time, one thread, for s in random whole_word typhoon::

    cd ../<old|new>
    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \\
        .venv/bin/python -m typhoon run --profile cpu --task mrpc --strategy $s --seed 0 \\
        --out ../out-<old|new>-fp32 --set max_train_examples=256 --set max_eval_examples=128 \\
        --set num_threads=1 --set precision=fp32

then the typhoon cell again with ``precision=bf16`` into ``out-<old|new>-bf16``, and, since 256 training
examples leave the head at the majority class (dev F1 = the all-positive F1 for every strategy, so the
dev metrics test nothing), the typhoon fp32 cell with ``max_train_examples=1024`` into
``out-<old|new>-fp32-n1024`` (dev F1 0.816, below the all-positive 0.826: a head that predicts both
classes). Then::

    .venv/bin/python benchmarks/check_training_path.py ../out-old-fp32 ../out-new-fp32
    .venv/bin/python benchmarks/check_training_path.py ../out-old-bf16 ../out-new-bf16
    .venv/bin/python benchmarks/check_training_path.py ../out-old-fp32-n1024 ../out-new-fp32-n1024

For issue 23 all five cells were identical (a2f9934 against 87ffd38, on an AMD EPYC with AVX512-BF16 and no
AMX, 2 cores). That CPU is not the one that trained ``results/cpu`` (an Intel Xeon with AMX, bf16), so those
records cannot be reproduced bit for bit on it; old against new code on one machine is the check that can be
made.

Exit status: 0 every cell identical, 1 some cell differs, 2 bad input (a missing folder, no records, a cell
on one side only).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

# metrics.json keys the training computes (or resolves); the rest (timing, hardware, git_commit,
# versions, speed) differ between two runs by design.
TRAINED_METRICS = ("final", "epochs", "masking", "majority_value", "n_train", "n_dev",
                   "precision", "attention", "dropout", "threads", "status",
                   "task_head", "mlm_task_loss_by_epoch", "timing")  # task_head, mlm_task_loss: typhoon_task
# keys of a compared dict that are times, different by design: the task model's warm-up wall time, and in
# ``timing`` everything but the counts the training does (steps, FLOPs)
TIMED_KEYS = frozenset({"warmup_wall_s"})
COUNTED_TIMING = ("mlm_steps", "mlm_gflop", "ft_gflop")


def cells_of(out_dir: Path) -> dict[str, Path]:
    """Every record folder of ``out_dir`` (one holding a ``metrics.json``), keyed by its path under it."""
    if not out_dir.is_dir():
        raise FileNotFoundError(f"{out_dir}: no such folder")
    return {str(p.parent.relative_to(out_dir)): p.parent for p in sorted(out_dir.rglob("metrics.json"))}


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not readable JSON: {err}") from None


def as_text(value) -> str:
    """The exact text of a JSON value: equal texts hold equal doubles (NaN included, unlike ==)."""
    return json.dumps(value, sort_keys=True)


# config.json field -> the metrics.json key holding the value an ``auto`` resolved to
RESOLVED_IN_METRICS = {"attention": "attention", "dropout": "dropout", "precision": "precision",
                       "device": "device", "num_threads": "threads"}


def dict_differences(old: dict, new: dict, prefix: str) -> tuple[list[str], list[str]]:
    """(keys both hold whose values differ, keys only one side holds), each named ``prefix.key``."""
    if prefix == "metrics.timing":
        old, new = ({k: v for k, v in d.items() if k in COUNTED_TIMING} for d in (old, new))
    old, new = ({k: v for k, v in d.items() if k not in TIMED_KEYS} for d in (old, new))
    differ = [f"{prefix}.{key}" for key in sorted(old.keys() & new.keys()) if as_text(old[key]) != as_text(new[key])]
    return differ, [f"{prefix}.{key}" for key in sorted(old.keys() ^ new.keys())]


def metrics_differences(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """Trained values that differ; a dict value (``masking``) is compared key by key."""
    differ, one_side = [], []
    for key in TRAINED_METRICS:
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            d, o = dict_differences(a, b, f"metrics.{key}")
            differ, one_side = differ + d, one_side + o
        elif as_text(a) != as_text(b):
            differ.append(f"metrics.{key}")
    return differ, one_side


def resolved(config: dict, metrics: dict) -> dict:
    """``config`` with each ``auto`` execution choice replaced by what ``metrics`` says it resolved to."""
    values = dict(config)
    for field, key in RESOLVED_IN_METRICS.items():
        if values.get(field) in ("auto", None) and key in metrics:
            values[field] = metrics[key]
    return values


def first_differing_line(old: bytes, new: bytes) -> str:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for number, (a, b) in enumerate(zip(old_lines, new_lines, strict=False), start=1):
        if a != b:
            return f"line {number}: {a.decode()!r} vs {b.decode()!r}"
    return f"{len(old_lines)} vs {len(new_lines)} lines"


def file_differences(old_dir: Path, new_dir: Path, name: str) -> list[str]:
    """A file compared by its bytes; absent on both sides is no difference."""
    old_path, new_path = old_dir / name, new_dir / name
    if not old_path.exists() and not new_path.exists():
        return []
    if old_path.exists() != new_path.exists():
        return [f"{name} on one side only"]
    old, new = old_path.read_bytes(), new_path.read_bytes()
    return [] if old == new else [f"{name} bytes ({first_differing_line(old, new)})"]


def npz_meta(archive) -> dict:
    """The JSON ``meta`` string of a masking state, as a dict."""
    return json.loads(str(archive["meta"]))


def npz_differences(old_dir: Path, new_dir: Path,
                    name: str = "masking_state.npz") -> tuple[list[str], list[str], int]:
    """(arrays that differ in dtype, shape or bytes, format changes, number of numeric arrays compared).
    The ``meta`` string is compared key by key, as ``metrics.masking`` is."""
    old_path, new_path = old_dir / name, new_dir / name
    if not old_path.exists() and not new_path.exists():
        return [], [], 0
    if old_path.exists() != new_path.exists():
        return [f"{name} on one side only"], [], 0
    with np.load(old_path) as old, np.load(new_path) as new:
        differ = [f"{name}:{key} on one side only" for key in sorted(set(old.files) ^ set(new.files))]
        arrays = sorted((set(old.files) & set(new.files)) - {"meta"})
        for key in arrays:
            a, b = old[key], new[key]
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                differ.append(f"{name}:{key}")
        one_side = []
        if "meta" in old.files and "meta" in new.files:
            meta_differ, one_side = dict_differences(npz_meta(old), npz_meta(new), f"{name}:meta")
            differ += meta_differ
    return differ, one_side, len(arrays)


def compare_cell(old_dir: Path, new_dir: Path) -> dict:
    """One row of the table: what of the two records differs, and what was compared."""
    old_metrics, new_metrics = read_json(old_dir / "metrics.json"), read_json(new_dir / "metrics.json")
    metrics_differ, metrics_one_side = metrics_differences(old_metrics, new_metrics)
    config_differ, config_one_side = dict_differences(resolved(read_json(old_dir / "config.json"), old_metrics),
                                                      resolved(read_json(new_dir / "config.json"), new_metrics),
                                                      "config")
    npz_differ, npz_one_side, n_arrays = npz_differences(old_dir, new_dir)
    differ = metrics_differ + config_differ + file_differences(old_dir, new_dir, "mlm_loss.csv") + npz_differ
    return {
        "identical": not differ,
        "differs": ", ".join(differ) or "-",
        "final": as_text(new_metrics.get("final")),
        "train_loss": as_text([epoch.get("train_loss") for epoch in new_metrics.get("epochs") or []]),
        "loss_rows": len((new_dir / "mlm_loss.csv").read_text().splitlines()) - 1,
        "npz_arrays": n_arrays,
        "format": ", ".join(metrics_one_side + config_one_side + npz_one_side) or "-",
        "commits": f"{str(old_metrics.get('git_commit'))[:7]} vs {str(new_metrics.get('git_commit'))[:7]}",
    }


def compare_folders(old_out: Path, new_out: Path) -> list[tuple[str, dict]]:
    old_cells, new_cells = cells_of(old_out), cells_of(new_out)
    if not old_cells or not new_cells:
        raise ValueError(f"no records (metrics.json) under {old_out if not old_cells else new_out}")
    unpaired = sorted(old_cells.keys() ^ new_cells.keys())
    if unpaired:
        raise ValueError(f"cells on one side only: {', '.join(unpaired)}")
    return [(cell, compare_cell(old_cells[cell], new_cells[cell])) for cell in sorted(old_cells)]


def print_table(rows: list[tuple[str, dict]]) -> None:
    print("| cell | commits | identical | what differs | final (new) | train loss per epoch (new) "
          "| mlm loss rows | npz arrays | format (keys on one side only) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cell, row in rows:
        print(f"| {cell} | {row['commits']} | {'yes' if row['identical'] else 'NO'} | {row['differs']} "
              f"| {row['final']} | {row['train_loss']} | {row['loss_rows']} | {row['npz_arrays']} "
              f"| {row['format']} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old_out", type=Path, help="output folder of the run at the old commit")
    parser.add_argument("new_out", type=Path, help="output folder of the run at the new commit")
    args = parser.parse_args(argv)
    try:
        rows = compare_folders(args.old_out, args.new_out)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print_table(rows)
    same = sum(row["identical"] for _, row in rows)
    print(f"\n{same} of {len(rows)} cells identical bit for bit")
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
