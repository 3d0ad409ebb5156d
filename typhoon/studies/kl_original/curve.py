"""The kl-original study's curve: the 'all' row over the 2023 code's long MLM phase (runs:
:class:`typhoon.studies.kl_original.policy.KlOriginalCurve`), read two ways (the addendum's (d)):

- the **end-of-epoch state** (registered, prediction 5): each run's ``epochs.csv``, the KL of the masking state
  at the end of each epoch. The EMA puts 0.8 on the last batch's saliency, so each is close to one snapshot;
- the **trace mean** (supplementary): the geometric mean of the epoch's trace snapshots (``trace.csv``, every
  TRACE_EVERY steps), in :func:`read_curves` beside each epoch as the ``trace_mean_<unit>`` columns.

Per reading:

- :func:`curve_change`: per definition, the paired log ratio of the last epoch every run reached to epoch 1,
  its 95 % t interval over the runs (prediction 5 on the end-of-epoch reading);
- :func:`curve_trend`: per definition, the power law fitted to each run's every epoch (log KL on log epoch):
  the mean slope with its 95 % t interval, and the KL it extrapolates to the planned 100 (MRPC) / 80 (CoLA)
  epochs against 7e-4 (a supplementary reading, not a registered test).

And within the epochs: :func:`trace_spread`, how much a snapshot's timing moves the KL, and
:func:`curve_levels`, the share of end-of-epoch states and of snapshots above 7e-4 and their medians.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.studies.kl_original.design import CURVE_EPOCHS, CURVE_ROW
from typhoon.studies.kl_original.rows import UNITS, change_direction, paper_kl, t_interval

CURVE_FIGURE = "figures/kl_curve"  # drawn by typhoon.studies.kl_original.policy.write_tables, shown in the README
#: the two readings of the curve, as the tables name them
END_OF_EPOCH, TRACE_READING = "end of epoch (registered)", "trace mean (supplementary)"
TRACE_MEAN = "trace_mean_"  # a unit's geometric mean over an epoch's trace snapshots: this prefix + the unit


def read_traces(out: str | Path, folder: str = "curve") -> pd.DataFrame:
    """Every run's ``trace.csv`` of the curve in ``folder`` (one row per snapshot within an epoch), with its task
    and seed."""
    frames = [_trace(path).assign(task=path.parts[-3], seed=int(path.parent.name[4:]))
              for path in sorted(Path(out).glob(f"{folder}/*/seed*/trace.csv"))]
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        raise FileNotFoundError(f"{out}: no curve trace ({folder}/<task>/seed<k>/trace.csv)")
    return pd.concat(frames, ignore_index=True)


def _trace(path: Path) -> pd.DataFrame:
    """A run's trace; empty where its epochs were shorter than TRACE_EVERY steps (a rehearsal's: no snapshot)."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def trace_means(traces: pd.DataFrame) -> pd.DataFrame:
    """Per (task, seed, epoch): the geometric mean of each unit over the epoch's trace snapshots
    (``trace_mean_<unit>``) and how many there were (``trace_snapshots``)."""
    logs = np.log(traces[UNITS]).assign(task=traces["task"], seed=traces["seed"], epoch=traces["epoch"])
    grouped = logs.groupby(["task", "seed", "epoch"])
    means = np.exp(grouped[UNITS].mean()).add_prefix(TRACE_MEAN)
    return means.assign(trace_snapshots=grouped.size()).reset_index()


def read_curves(out: str | Path, folder: str = "curve") -> pd.DataFrame:
    """Every run's ``epochs.csv`` of the curve in ``folder`` (one row per MLM epoch), with its task and seed, and,
    where the run has a trace, each epoch's trace mean beside it (:func:`trace_means`; only the epochs the run
    finished)."""
    frames = [pd.read_csv(path).assign(task=path.parts[-3], seed=int(path.parent.name[4:]))
              for path in sorted(Path(out).glob(f"{folder}/*/seed*/epochs.csv"))]
    if not frames:
        raise FileNotFoundError(f"{out}: no curve run ({folder}/<task>/seed<k>/epochs.csv)")
    curves = pd.concat(frames, ignore_index=True)
    try:
        traces = read_traces(out, folder)
    except FileNotFoundError:
        return curves
    return curves.merge(trace_means(traces), on=["task", "seed", "epoch"], how="left")


def readings(curves: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The curve as each reading sees it, each a frame of task, seed, epoch and the units: the end-of-epoch
    states, and the trace means where :func:`read_curves` found them (the epochs that have one)."""
    found = {END_OF_EPOCH: curves}
    traced = [f"{TRACE_MEAN}{unit}" for unit in UNITS]
    if set(traced) <= set(curves.columns):
        frame = curves[["task", "seed", "epoch", *traced]].dropna()
        found[TRACE_READING] = frame.rename(columns=dict(zip(traced, UNITS, strict=True)))
    return found


def curve_change(curves: pd.DataFrame, row: str = CURVE_ROW) -> pd.DataFrame:
    """Per reading (:func:`readings`) and unit: the paired log ratio of the KL at the last epoch all runs
    reached to epoch 1, as a factor with its 95 % t interval over the runs (prediction 5, on the end-of-epoch
    reading: the KL rises with the epochs); ``row``: the row the curve follows."""
    return pd.concat([_change(frame, row).assign(reading=name) for name, frame in readings(curves).items()],
                     ignore_index=True).pipe(lambda t: t[["reading", *t.columns.drop("reading")]])


def _change(curves: pd.DataFrame, row: str) -> pd.DataFrame:
    last = int(curves.groupby(["task", "seed"])["epoch"].max().min())
    first_rows = curves[curves["epoch"] == 1].set_index(["task", "seed"])
    last_rows = curves[curves["epoch"] == last].set_index(["task", "seed"]).loc[first_rows.index]
    out = []
    for unit in UNITS:
        ratio, low, high = t_interval(np.log(last_rows[unit].to_numpy(float) / first_rows[unit].to_numpy(float)))
        out.append({"unit": unit, "runs": len(first_rows), "last_common_epoch": last,
                    "epochs_planned": f"{row} row, {CURVE_EPOCHS['mrpc']} (MRPC) / {CURVE_EPOCHS['cola']} (CoLA)",
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
    return "rises" if low > 0 else "falls" if high < 0 else "not detected"


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
    """Per reading (:func:`readings`): :func:`reading_trend`."""
    return pd.concat([reading_trend(frame).assign(reading=name) for name, frame in readings(curves).items()],
                     ignore_index=True).pipe(lambda t: t[["reading", *t.columns.drop("reading")]])


def reading_trend(curves: pd.DataFrame) -> pd.DataFrame:
    """Per unit: the trend of the KL over the curve's epochs and its extrapolation to the planned end.

    NOT part of the registered hypothesis (prediction 5 is :func:`curve_change`): end-of-epoch KLs move a lot
    with the step a snapshot is taken at. Over the runs' power laws (:func:`run_power_laws`): the mean slope with
    its 95 % t interval (``trend``: 'rises', 'falls' or 'not detected' as it lies above, below or around 0), and the
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


def trace_spread(out: str | Path, unit: str = "bernoulli", folder: str = "curve") -> pd.DataFrame:
    """How much a snapshot's timing within an epoch moves the KL: per run of the curve in ``folder`` and epoch,
    the lowest and highest ``unit`` of its trace (every TRACE_EVERY steps), their ratio and the value at the
    epoch's end."""
    grouped = read_traces(out, folder).groupby(["task", "seed", "epoch"])[unit]
    spread = pd.DataFrame({"lowest": grouped.min(), "highest": grouped.max(), "last_traced": grouped.last()})
    return spread.assign(highest_over_lowest=spread["highest"] / spread["lowest"]).reset_index()


def curve_levels(curves: pd.DataFrame, traces: pd.DataFrame, unit: str = "bernoulli") -> pd.DataFrame:
    """Where the curve's KLs lie against the paper's figure (:func:`paper_kl`): for the end-of-epoch states
    (``curves``) and for every trace snapshot (``traces``), how many there are, how many and what share lie
    above it, their median, their highest, and the median's ratio to the paper's."""
    paper = paper_kl(unit)
    out = []
    for name, values in (("end-of-epoch states", curves[unit]), ("trace snapshots", traces[unit])):
        values = values.to_numpy(float)
        above = int((values > paper).sum())
        out.append({"kls": name, "unit": unit, "n": values.size, "above_7e-4": above, "share_above": above / values.size,
                    "median": float(np.median(values)), "highest": float(values.max()),
                    "median_to_paper": float(np.median(values)) / paper})
    return pd.DataFrame(out)
