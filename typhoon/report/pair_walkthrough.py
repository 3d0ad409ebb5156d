"""What the walkthrough of one backbone × task (``notebooks/10_walkthrough.ipynb``) shows, read from the records
of that pair's cells under an output folder: which runs there are, each strategy's MLM loss curves, Typhoon's
saliency weights and masking rates, the tokens it prefers and avoids, and the dev metric per seed and strategy.

It reads whatever records exist, so it can run while the grid still trains, and after it. The figures go to
``<out_dir>/figures/pairs/<task>-<backbone>_<name>.{png,svg}``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.analysis import load_loss_curves, ok_runs
from typhoon.masking import load_state
from typhoon.records import collect_results
from typhoon.report import figures, masking_figures


def pair_results(out_dir: str | os.PathLike, task: str, backbone: str) -> pd.DataFrame:
    """The results rows (``results.csv``'s columns) of the records of ``task`` × ``backbone`` under ``out_dir``,
    ok or failed, by strategy and seed."""
    results = collect_results(Path(out_dir))
    if results.empty:
        return results
    pair = results[(results["task"] == task) & (results["backbone"] == backbone)]
    return pair.sort_values(["strategy", "seed"]).reset_index(drop=True)


def figure_path(out_dir: str | os.PathLike, task: str, backbone: str, name: str) -> Path:
    return Path(out_dir) / "figures" / "pairs" / f"{task}-{backbone.replace('/', '__')}_{name}"


def run_table(results: pd.DataFrame) -> pd.DataFrame:
    """One line per run for a reader: strategy, seed, status, the dev metric, MLM steps' wall time, and for
    Typhoon its KL from uniform masking and the budget it moved."""
    columns = ["strategy", "seed", "status", "primary_metric", "primary_value", "majority_value", "mlm_wall_s",
               "wall_s", "kl_to_uniform", "budget_moved", "error"]
    table = results[[c for c in columns if c in results.columns]].copy()
    return table.dropna(axis="columns", how="all")


def typhoon_states(results: pd.DataFrame, out_dir: str | os.PathLike) -> pd.DataFrame:
    """The masking states of the pair's ok Typhoon-family runs (strategy, seed, path), those that have one."""
    ok = ok_runs(results) if len(results) else results
    rows = [{"strategy": r.strategy, "seed": int(r.seed), "path": Path(out_dir) / r.record_path / "masking_state.npz"}
            for r in ok.itertuples()]
    return pd.DataFrame([row for row in rows if row["path"].is_file()], columns=["strategy", "seed", "path"])


def salient_tokens(state_path: str | os.PathLike, tokenizer, n: int = 10) -> pd.DataFrame:
    """The ``n`` seen token types with the highest and the ``n`` with the lowest saliency weight of a masking
    state, with their count in the training text and their masking probability (the budget for comparison)."""
    state = load_state(state_path)
    weights, seen = np.asarray(state["weights"], dtype=float), np.asarray(state["seen"], dtype=bool)
    counts, probs = np.asarray(state["counts"]), np.asarray(state["probs"], dtype=float)
    ids = np.flatnonzero(seen & np.isfinite(weights) & (counts > 0))
    order = ids[np.argsort(-weights[ids], kind="stable")]
    picked = [("most salient", i) for i in order[:n]] + [("least salient", i) for i in order[::-1][:n]]
    return pd.DataFrame([{"end": end, "token": tokenizer.convert_ids_to_tokens(int(i)), "weight": weights[i],
                          "count": int(counts[i]), "masking probability": probs[i]} for end, i in picked])


def plot_pair(results: pd.DataFrame, out_dir: str | os.PathLike, task: str, backbone: str) -> dict[str, list[Path]]:
    """The pair's figures (those its records allow): ``mlm_loss`` (each strategy's MLM loss, mean ± sd over
    seeds), ``metric_per_seed`` (the dev metric per seed and strategy), and for its first Typhoon-family run
    with a state ``rates`` (the calibrated masking probabilities, per type and per token) and ``weights``
    (saliency ranking against the rates)."""
    made = {}
    if len(results) and (results["status"] == "ok").any():
        curves = load_loss_curves(results, out_dir)
        if len(curves):
            made["mlm_loss"] = figures.plot_loss_curves(curves, figure_path(out_dir, task, backbone, "mlm_loss"))
        made["metric_per_seed"] = figures.plot_metric_per_seed(
            results, figure_path(out_dir, task, backbone, "metric_per_seed"),
            reference="typhoon" if (results["strategy"] == "typhoon").any() else None)
    states = typhoon_states(results, out_dir)
    if len(states):
        first = states.iloc[0]
        state = load_state(first["path"])
        p = float(state["meta"]["p"])
        label = f"{first['strategy']} seed {first['seed']}"
        made["rates"] = masking_figures.plot_prob_histogram(
            state["probs"], p, figure_path(out_dir, task, backbone, "rates"), seen=state["seen"],
            counts=state["counts"], title=f"{task} / {backbone}, {label}: masking probabilities")
        made["weights"] = masking_figures.plot_weights_vs_probs(
            state["weights"], state["probs"], p, figure_path(out_dir, task, backbone, "weights"), seen=state["seen"],
            title=f"{task} / {backbone}, {label}: saliency and masking probability")
    return made
