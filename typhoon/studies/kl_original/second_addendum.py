"""The kl-original study's second addendum (issue 68; registered text:
:data:`~typhoon.studies.kl_original.design.SECOND_ADDENDUM`): two curves beside the registered one, their
tables and predictions (10)-(12).

- ``all_plus``: the 2023 recipe's curve (every 2023 rule, random batches) over 100 (MRPC) / 80 (CoLA) epochs;
- ``all_gpu``: the registered 'all' curve again from epoch 0 on a GPU, compared with the CPU's 'all' curve over
  the epochs both reached (:func:`numerics_comparison`).

Each curve is read as the registered one is (:mod:`typhoon.studies.kl_original.curve`: end of epoch, registered; trace
mean, supplementary), at the last epoch all its runs reached. The runs of both are one GPU command
(``scripts/gpu_curve.sh``); until their files land, every table here is absent and the predictions 'not yet run'.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.studies.kl_original.curve import (
    END_OF_EPOCH,
    curve_change,
    curve_levels,
    read_curves,
    read_traces,
    trace_spread,
)
from typhoon.studies.kl_original.design import CURVE_EPOCHS, CURVES, SEEDS, TASKS
from typhoon.studies.kl_original.rows import UNITS, change_direction, paper_kl, t_interval
from typhoon.studies.kl_original.verdicts import NOT_YET_RUN, within_factor

ADDED = ("all_plus", "all_gpu")  # the second addendum's curves
RUNS = len(TASKS) * len(SEEDS)  # a curve's registered runs


def curve_tables(out: str | Path, name: str) -> dict[str, pd.DataFrame]:
    """The tables of the curve ``name`` as far as its runs have landed (none: an empty dict): ``curve_<name>``
    (its change, both readings), ``curve_<name>_epochs`` (every epoch of every run), ``curve_<name>_levels`` and
    ``curve_<name>_spread`` (the trace's levels against 7e-4 and its spread within an epoch)."""
    curve = CURVES[name]
    try:
        curves = read_curves(out, curve.folder)
    except FileNotFoundError:
        return {}
    tables = {f"curve_{name}": curve_change(curves, curve.row), f"curve_{name}_epochs": curves}
    try:
        tables[f"curve_{name}_levels"] = curve_levels(curves, read_traces(out, curve.folder))
        tables[f"curve_{name}_spread"] = trace_spread(out, folder=curve.folder)
    except FileNotFoundError:
        pass
    return tables


def numerics_comparison(cpu: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    """Prediction 12: per unit, the GPU's 'all' curve against the CPU's at the end of each epoch. Per run (task,
    seed) that both have: the mean over the epochs both reached of log(KL GPU / KL CPU); over the runs, its
    geometric mean as a factor with the 95 % t interval, and what it says (:func:`~typhoon.studies.kl_original.rows.
    change_direction`)."""
    merged = gpu.merge(cpu, on=["task", "seed", "epoch"], suffixes=("_gpu", "_cpu"))
    # a GPU run short of its CPU twin's epochs: the comparison is interim (prediction 12 waits for it)
    reached = gpu.groupby(["task", "seed"])["epoch"].max()
    twin = cpu.groupby(["task", "seed"])["epoch"].max().reindex(reached.index)
    short = int((reached < twin).sum())
    out = []
    for unit in UNITS:
        per_run = (np.log(merged[f"{unit}_gpu"]) - np.log(merged[f"{unit}_cpu"])).groupby(
            [merged["task"], merged["seed"]]).mean()
        mean, low, high = t_interval(per_run.to_numpy(float))
        epochs = merged.groupby(["task", "seed"])["epoch"].max()
        out.append({"unit": unit, "runs": len(per_run), "runs_short": short,
                    "epochs_min": int(epochs.min()) if len(epochs) else 0,
                    "epochs_max": int(epochs.max()) if len(epochs) else 0, "gpu_over_cpu": math.exp(mean),
                    "ci_low": math.exp(low), "ci_high": math.exp(high), "direction": change_direction(low, high)})
    return pd.DataFrame(out)


def _end_of_epoch(table: pd.DataFrame, unit: str = "bernoulli") -> pd.Series:
    return table[(table["reading"] == END_OF_EPOCH) & (table["unit"] == unit)].iloc[0]


def _short_of_plan(epochs: pd.DataFrame) -> str:
    """'' when every run reached its plan, else 'an interim reading: ...' naming where they stand."""
    reached = epochs.groupby(["task", "seed"])["epoch"].max()
    short = [f"{task}/seed{seed} {int(e)} of {CURVE_EPOCHS[task]}" for (task, seed), e in reached.items()
             if e < CURVE_EPOCHS[task]]
    runs = len(reached)
    if not short and runs == RUNS:
        return ""
    return (f"an interim reading ({runs} of {RUNS} runs" + (f"; short of the plan: {', '.join(short)}" if short else "")
            + "): ")


def addendum_predictions(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Predictions (10)-(12) of the second addendum, each with its verdict and what it rests on; 'not yet run'
    until the curve's runs land, and 'not decided' while a reading is interim (runs short of their plan)."""
    out = []

    def add(number: int, claim: str, verdict: str, evidence: str) -> None:
        out.append({"prediction": number, "claim": claim, "verdict": verdict, "evidence": evidence})

    claims = {10: "along 'all_plus' the per-token Bernoulli KL is within 2x of epoch 1's at the last common epoch",
              11: "'all_plus' at its last common epoch does not reach 7e-4 under the per-token Bernoulli KL",
              12: "the GPU's 'all' curve has the CPU one's level (GPU / CPU within 2x)"}
    if "curve_all_plus" not in tables:
        add(10, claims[10], NOT_YET_RUN, "")
        add(11, claims[11], NOT_YET_RUN, "")
    else:
        interim = _short_of_plan(tables["curve_all_plus_epochs"])
        c = _end_of_epoch(tables["curve_all_plus"])
        verdict = within_factor(c.change_ci_low, c.change_ci_high)
        add(10, claims[10], "not decided" if interim else verdict,
            f"{interim}epoch {c.last_common_epoch} against epoch 1 over {c.runs} runs: ×{c.change:.2g} [95 % "
            f"{c.change_ci_low:.2g}, {c.change_ci_high:.2g}], {c.direction} (KL {c.kl_epoch1:.2g} → {c.kl_last:.2g})")
        level = _last_level(tables["curve_all_plus_epochs"], int(c.last_common_epoch))
        below = level["high"] < paper_kl("bernoulli")
        add(11, claims[11], "not decided" if interim else "holds" if below else "fails",
            f"{interim}epoch {c.last_common_epoch}: {level['kl']:.2g} nats/token [95 % {level['low']:.2g}, "
            f"{level['high']:.2g}] over {level['runs']} runs, ×{level['kl'] / paper_kl('bernoulli'):.2g} the paper's")
    if "curve_all_gpu_vs_cpu" not in tables:
        add(12, claims[12], NOT_YET_RUN, "")
    else:
        r = tables["curve_all_gpu_vs_cpu"].set_index("unit").loc["bernoulli"]
        partial = r.runs < RUNS or r.runs_short > 0
        add(12, claims[12], "not decided" if partial else within_factor(r.ci_low, r.ci_high),
            (f"an interim reading ({r.runs:.0f} of {RUNS} runs, {r.runs_short:.0f} short of the CPU run's epochs): "
             if partial else "") + f"GPU / CPU ×{r.gpu_over_cpu:.2g} [95 % {r.ci_low:.2g}, {r.ci_high:.2g}] over "
            f"{r.runs:.0f} runs, the epochs both reached ({r.epochs_min:.0f}–{r.epochs_max:.0f} a run)")
    return pd.DataFrame(out)


def _last_level(epochs: pd.DataFrame, epoch: int, unit: str = "bernoulli") -> dict:
    """The geometric mean of ``unit`` over the runs at ``epoch`` with the 95 % t interval of its logs."""
    values = epochs.loc[epochs["epoch"] == epoch, unit].to_numpy(float)
    mean, low, high = t_interval(np.log(values))
    return {"kl": math.exp(mean), "low": math.exp(low), "high": math.exp(high), "runs": values.size}


def second_addendum_tables(out: str | Path, registered_curve: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Every table of the second addendum from the files in ``out`` (``registered_curve``: the CPU's 'all' curve,
    :func:`~typhoon.studies.kl_original.curve.read_curves`, for prediction 12)."""
    tables = {}
    for name in ADDED:
        tables.update(curve_tables(out, name))
    if "curve_all_gpu_epochs" in tables and registered_curve is not None:
        tables["curve_all_gpu_vs_cpu"] = numerics_comparison(registered_curve, tables["curve_all_gpu_epochs"])
    return tables


def _markdown(frame: pd.DataFrame) -> str:
    return frame.to_markdown(index=False, floatfmt=".3g")


def second_addendum_section(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The README's section on the second addendum: the curves as far as they ran, and what waits."""
    from typhoon.analysis.kl import KL_DEFINITIONS

    lines = ["## The second addendum: the 2023 recipe's curve, and the 'all' curve on a GPU\n",
             "Registered before any of their states (the text is above). Both run as one command on one GPU "
             "(`scripts/gpu_curve.sh`; docs/results.md gives the plan, its slots and its minutes).\n"]
    waiting = [name for name in ADDED if f"curve_{name}" not in tables]
    for name, title in (("all_plus", "'all_plus': every 2023 rule, random batches"),
                        ("all_gpu", "'all_gpu': the registered 'all' curve from epoch 0 on a GPU "
                                    "(prediction 5 read again, in the GPU's numerics)")):
        if f"curve_{name}" not in tables:
            continue
        change = tables[f"curve_{name}"]
        lines += [f"### {title}\n", _markdown(change[change["unit"].isin(KL_DEFINITIONS)]) + "\n",
                  f"Every epoch of every run: `tables/curve_{name}_epochs.csv`.\n"]
    if "curve_all_gpu_vs_cpu" in tables:
        lines += ["### The GPU's 'all' curve against the CPU's (prediction 12)\n",
                  _markdown(tables["curve_all_gpu_vs_cpu"][tables["curve_all_gpu_vs_cpu"]["unit"].isin(KL_DEFINITIONS)])
                  + "\n",
                  "Per run, the mean log ratio GPU / CPU of the end-of-epoch KL over the epochs both reached; over the "
                  "runs, its geometric mean with the 95 % t interval (`tables/curve_all_gpu_vs_cpu.csv`).\n"]
    if waiting:
        lines.append(f"Not yet run: {', '.join(repr(name) for name in waiting)} (no run has landed in "
                     + ", ".join(f"`{CURVES[name].folder}/`" for name in waiting) + ").\n")
    return lines
