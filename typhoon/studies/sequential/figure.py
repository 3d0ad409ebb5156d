"""The decisive study's figure: each comparison look by look, its paired difference with the repeated CI and
the TOST interval, in the bundle's figure style (written by :func:`typhoon.studies.sequential.decisive.write_outputs`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from typhoon.analysis.run_summary import require_plottable
from typhoon.figure_style import MAX_WIDTH_IN, colorblind, new_figure, save_figure, shared_legend, styled


@styled
def plot_sequential_looks(history: pd.DataFrame, out_path: str | os.PathLike,
                          looks: Sequence[int] | None = None) -> list[Path]:
    """The sequential study look by look (:mod:`typhoon.analysis.sequential`): per task (row) and comparison
    (column), at each look's seed count the paired difference with its repeated CI for "different"
    (thick: it must exclude 0) and its TOST interval (thin: it must lie inside the grey ±margin band),
    each look's verdict as the marker's colour. The seed axis is ticked at the looks analysed; with the design's ``looks`` it spans
    and ticks all of them, so a study in progress shows how far it is from its cap."""
    require_plottable(history, ["task", "comparison", "n_seeds", "difference", "ci_low", "ci_high", "tost_low",
                                "tost_high", "margin", "verdict"], "history")
    tasks, comparisons = list(dict.fromkeys(history["task"])), list(dict.fromkeys(history["comparison"]))
    colours = dict(zip(["continue", "equivalent", "different", "undecided at cap"],
                       colorblind(4), strict=True))
    fig = new_figure(MAX_WIDTH_IN, 1.0 + 2.0 * len(tasks))
    axes = np.atleast_2d(fig.subplots(len(tasks), len(comparisons), sharex=True, squeeze=False))
    for i, task in enumerate(tasks):
        for j, name in enumerate(comparisons):
            ax, rows = axes[i, j], history[(history["task"] == task) & (history["comparison"] == name)]
            if len(rows):
                margin = float(rows["margin"].iloc[0])
                ax.axhspan(-margin, margin, color="0.92", zorder=0)
            ax.axhline(0, color="black", lw=0.7)
            for r in rows.itertuples():
                ax.vlines(r.n_seeds, r.tost_low, r.tost_high, color=colours[r.verdict], lw=0.9)
                ax.vlines(r.n_seeds, r.ci_low, r.ci_high, color=colours[r.verdict], lw=2.4, alpha=0.6)
                ax.plot(r.n_seeds, r.difference, "o", color=colours[r.verdict], label=r.verdict)
            if len(rows):  # the first looks' intervals are huge (2-5 degrees of freedom): clipped to the margin's scale
                limit = max(4 * margin, 1.5 * float(rows["difference"].abs().max()))
                ax.set_ylim(-limit, limit)
            ax.set_title(f"{task}: {name}".replace(" - ", " −\n"), fontsize=8)
            ax.tick_params(labelsize=7.5)
            ax.yaxis.set_major_locator(MaxNLocator(nbins=4, symmetric=True))
            ax.set_xticks(list(looks) if looks else sorted(set(history["n_seeds"].astype(int))))
            if looks:
                ax.set_xlim(looks[0] - 1, looks[-1] + 1)
            if i == len(tasks) - 1:
                ax.set_xlabel("seeds", fontsize=8)
        axes[i, 0].set_ylabel(f"{task} difference", fontsize=8)
    shared_legend(fig, axes)
    return save_figure(fig, out_path, "Each comparison at every look of the sequential design: the paired "
                                      "difference (dot) with its repeated confidence interval for 'different' "
                                      "(thick bar, must exclude 0) and its TOST interval (thin bar, must lie "
                                      "inside the grey ±margin band); the colour is the look's verdict.")
