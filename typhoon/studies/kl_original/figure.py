"""The kl-original curve's figure: the KL after each MLM epoch, per seed and task, read two ways, with each run's
power law (:func:`plot_kl_curve`), in the bundle's one figure style."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.analysis import require_plottable
from typhoon.figure_style import MAX_WIDTH_IN, colorblind, new_figure, save_figure, shared_legend, styled
from typhoon.studies.kl_original.curve import TRACE_MEAN, run_power_laws
from typhoon.studies.kl_original.rows import paper_kl


@styled
def plot_kl_curve(curves: pd.DataFrame, out_path: str | os.PathLike, unit: str = "bernoulli") -> list[Path]:
    """The kl-original curve (:func:`~typhoon.studies.kl_original.curve.read_curves`): ``unit``'s KL after each MLM epoch, one line per seed and a
    panel per task, log-log, read two ways where the curve has both: each epoch's end-of-epoch state (points,
    registered) and the geometric mean of its trace snapshots (a thicker pale line, :data:`~typhoon.studies.kl_original.curve.TRACE_MEAN`;
    supplementary); each run's fitted power law of the end-of-epoch reading (:func:`~typhoon.studies.kl_original.curve.run_power_laws`) dashed out to
    its planned end (dotted), and the paper's figure in that unit (:func:`~typhoon.studies.kl_original.rows.paper_kl`) dashed in black."""
    require_plottable(curves, ["task", "seed", "epoch", unit], "curve")
    fits, paper = run_power_laws(curves, unit), paper_kl(unit)
    tasks = list(dict.fromkeys(curves["task"].astype(str)))
    seeds = sorted(curves["seed"].unique())
    colours = dict(zip(seeds, colorblind(len(seeds)), strict=True))
    fig = new_figure(MAX_WIDTH_IN, 3.4)
    axes = fig.subplots(1, len(tasks), squeeze=False, sharey=True)[0]
    traced = f"{TRACE_MEAN}{unit}"
    for ax, task in zip(axes, tasks, strict=True):
        runs = curves[curves["task"] == task]
        for seed, run in runs.groupby("seed", sort=True):
            run = run.sort_values("epoch")
            ax.plot(run["epoch"], run[unit], "o-", ms=2.5, lw=0.7, color=colours[seed],
                    label=f"seed {seed}: end of epoch")
            if traced in run and run[traced].notna().any():
                ax.plot(run["epoch"], run[traced], "-", lw=2.2, alpha=0.45, color=colours[seed],
                        label=f"seed {seed}: trace mean")
        for fit in fits[fits["task"] == task].itertuples():
            epochs = np.geomspace(1, fit.planned_epochs, 50)
            ax.plot(epochs, np.exp(fit.intercept + fit.slope * np.log(epochs)), ls="--", lw=0.9,
                    color=colours[fit.seed], label="power law (least squares), extrapolated")
        planned = int(fits.loc[fits["task"] == task, "planned_epochs"].max())
        ax.axvline(planned, color="0.5", ls=":", lw=1.0, label="planned end (2023 code)")
        ax.axhline(paper, color="black", ls="--", lw=0.8, label=f"paper: {paper:g} nats/token")
        ax.set_xscale("log")
        ax.set_yscale("log")
        reached = runs.groupby("seed")["epoch"].max()
        span = f"{reached.min()}" if reached.min() == reached.max() else f"{reached.min()}-{reached.max()}"
        ax.set_title(f"{task}: {span} of {planned} MLM epochs")
        ax.set_xlabel("MLM epoch")
    axes[0].set_ylabel(f"KL from uniform: {unit} (nats)")
    shared_legend(fig, axes, ncols=3)
    both = traced in curves and curves[traced].notna().any()
    return save_figure(fig, out_path, f"The {unit} KL of Typhoon's calibrated masking from uniform masking after "
                                      "each MLM epoch under the 2023 code's rules, one line per seed (log-log): "
                                      "points, the state at the epoch's end (registered)"
                                      + ("; pale thick line, the geometric mean of the epoch's trace snapshots "
                                         "(supplementary)" if both else "") + "; "
                                      "dashed, each run's least-squares power law over the epochs it reached, "
                                      "extended to the 2023 code's planned end (dotted): an extrapolation, not a "
                                      f"registered test. Black dashed: the paper's {paper:g}.")
