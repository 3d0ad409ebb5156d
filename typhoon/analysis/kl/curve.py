"""The kl-original study's curve: the 'all' row over the 2023 code's long MLM phase (runs:
:func:`typhoon.runner.kl_original.run_curves`), read from each run's ``epochs.csv`` (the end-of-epoch states)
and ``trace.csv`` (snapshots within each epoch).

- :func:`curve_change`: per definition, the paired log ratio of the last epoch every run reached to epoch 1,
  its 95 % t interval over the runs (prediction 5);
- :func:`curve_trend`: per definition, the power law fitted to each run's every epoch (log KL on log epoch):
  the mean slope with its 95 % t interval, and the KL it extrapolates to the planned 100 (MRPC) / 80 (CoLA)
  epochs against 7e-4 (a supplementary reading, not a registered test);
- :func:`trace_spread`: how much a snapshot's timing within an epoch moves the KL.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.analysis.kl.original_design import CURVE_EPOCHS, CURVE_ROW
from typhoon.analysis.kl.rows import UNITS, change_direction, paper_kl, t_interval

CURVE_FIGURE = "figures/kl_curve"  # drawn by typhoon.runner.kl_original.write_tables, shown in the README


def read_curves(out: str | Path) -> pd.DataFrame:
    """Every curve run's ``epochs.csv`` (one row per MLM epoch), with its task and seed."""
    frames = [pd.read_csv(path).assign(task=path.parts[-3], seed=int(path.parent.name[4:]))
              for path in sorted(Path(out).glob("curve/*/seed*/epochs.csv"))]
    if not frames:
        raise FileNotFoundError(f"{out}: no curve run (curve/<task>/seed<k>/epochs.csv)")
    return pd.concat(frames, ignore_index=True)


def curve_change(curves: pd.DataFrame) -> pd.DataFrame:
    """Per unit: the paired log ratio of the KL at the last epoch all runs reached to epoch 1, as a factor
    with its 95 % t interval over the runs (prediction 5: the KL rises with the epochs)."""
    last = int(curves.groupby(["task", "seed"])["epoch"].max().min())
    first_rows = curves[curves["epoch"] == 1].set_index(["task", "seed"])
    last_rows = curves[curves["epoch"] == last].set_index(["task", "seed"]).loc[first_rows.index]
    out = []
    for unit in UNITS:
        ratio, low, high = t_interval(np.log(last_rows[unit].to_numpy(float) / first_rows[unit].to_numpy(float)))
        out.append({"unit": unit, "runs": len(first_rows), "last_common_epoch": last,
                    "epochs_planned": f"{CURVE_ROW} row, 100 (MRPC) / 80 (CoLA)",
                    "kl_epoch1": float(np.exp(np.log(first_rows[unit]).mean())),
                    "kl_last": float(np.exp(np.log(last_rows[unit]).mean())),
                    "change": math.exp(ratio), "change_ci_low": math.exp(low), "change_ci_high": math.exp(high),
                    "direction": change_direction(low, high)})
    return pd.DataFrame(out)


#: the fewest epochs a run needs for its power law: two points fit any line exactly, with no residual
MIN_TREND_EPOCHS = 3


def _trend_direction(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "not testable"
    return "rises" if low > 0 else "falls" if high < 0 else "flat"


def run_power_laws(curves: pd.DataFrame, unit: str = "bernoulli") -> pd.DataFrame:
    """Per curve run: the least-squares line log KL = intercept + slope · log(epoch) of ``unit`` over every epoch
    it reached, and ``log_kl_end``, the line at its task's planned end (:data:`CURVE_EPOCHS`). Fewer than
    :data:`MIN_TREND_EPOCHS` epochs, or a task without a planned end, is an error."""
    fits = []
    for (task, seed), run in curves.groupby(["task", "seed"], sort=True):
        if len(run) < MIN_TREND_EPOCHS:
            raise ValueError(f"curve run {task}/seed{seed} has {len(run)} epoch(s); its trend needs at least "
                             f"{MIN_TREND_EPOCHS}")
        if task not in CURVE_EPOCHS:
            raise ValueError(f"curve run {task}/seed{seed}: no planned number of epochs for {task!r} "
                             f"(CURVE_EPOCHS has {sorted(CURVE_EPOCHS)})")
        x, y = np.log(run["epoch"].to_numpy(float)), np.log(run[unit].to_numpy(float))
        dx = x - x.mean()
        slope = float(np.dot(dx, y - y.mean()) / np.dot(dx, dx))
        intercept = float(y.mean() - slope * x.mean())
        fits.append({"task": task, "seed": seed, "unit": unit, "epochs": len(run), "slope": slope, "intercept":
                     intercept, "planned_epochs": CURVE_EPOCHS[task], "log_kl_end": intercept + slope * math.log(CURVE_EPOCHS[task])})
    if not fits:
        raise ValueError("no curve run to fit a trend to")
    return pd.DataFrame(fits)


def curve_trend(curves: pd.DataFrame) -> pd.DataFrame:
    """Per unit: the trend of the KL over the curve's epochs and its extrapolation to the planned end.

    NOT part of the registered hypothesis (prediction 5 is :func:`curve_change`): end-of-epoch KLs move a lot
    with the step a snapshot is taken at. Over the runs' power laws (:func:`run_power_laws`): the mean slope with
    its 95 % t interval (``trend``: 'rises', 'falls' or 'flat' as it lies above, below or around 0), and the
    geometric mean of the KLs they give at the planned ends with the 95 % t interval of their logs, its ratio to
    7e-4 nats/token (:func:`paper_kl`) and ``verdict``: 'reaches 7e-4' (the interval holds it), 'below 7e-4' or
    'above 7e-4'. It assumes the power law fitted over the reached epochs holds to the planned end."""
    out = []
    for unit in UNITS:
        fits = run_power_laws(curves, unit)
        slope, s_low, s_high = t_interval(fits["slope"])
        end, e_low, e_high = t_interval(fits["log_kl_end"])
        paper = paper_kl(unit)
        if not (math.isfinite(e_low) and math.isfinite(e_high)):
            verdict = "not testable"
        else:
            verdict = ("below 7e-4" if e_high < math.log(paper) else "above 7e-4" if e_low > math.log(paper)
                       else "reaches 7e-4")
        out.append({"unit": unit, "runs": len(fits), "epochs_min": int(fits["epochs"].min()),
                    "epochs_max": int(fits["epochs"].max()),
                    "slope": slope, "slope_ci_low": s_low, "slope_ci_high": s_high,
                    "trend": _trend_direction(s_low, s_high),
                    "kl_end": math.exp(end), "kl_end_ci_low": math.exp(e_low), "kl_end_ci_high": math.exp(e_high),
                    "ratio_to_paper": math.exp(end) / paper, "verdict": verdict})
    return pd.DataFrame(out)


def trace_spread(out: str | Path, unit: str = "bernoulli") -> pd.DataFrame:
    """How much a snapshot's timing within an epoch moves the KL: per curve run and epoch, the lowest and
    highest ``unit`` of its trace (every TRACE_EVERY steps), their ratio and the value at the epoch's end."""
    frames = [pd.read_csv(path).assign(task=path.parts[-3], seed=int(path.parent.name[4:]))
              for path in sorted(Path(out).glob("curve/*/seed*/trace.csv"))]
    if not frames:
        raise FileNotFoundError(f"{out}: no curve trace (curve/<task>/seed<k>/trace.csv)")
    trace = pd.concat(frames, ignore_index=True)
    grouped = trace.groupby(["task", "seed", "epoch"])[unit]
    spread = pd.DataFrame({"lowest": grouped.min(), "highest": grouped.max(), "last_traced": grouped.last()})
    return spread.assign(highest_over_lowest=spread["highest"] / spread["lowest"]).reset_index()
