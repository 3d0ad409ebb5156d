"""Figures of Typhoon's masking: saliency weights against masking probabilities, the probability
histogram, the calibration sweep, the kl-original curve (KL against MLM epochs), the budget moved against the
difference it makes, rates and token saliency."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter  # noqa: E402

from typhoon.analysis import require_plottable
from typhoon.figure_style import (
    MAX_WIDTH_IN,
    MIN_FONT_PT,
    colorblind,
    legend_handles,
    new_figure,
    save_figure,
    shared_legend,
    strategy_palette,
    styled,
)
from typhoon.report.figures import MASKED_COLOUR, PI_COLOUR, VISIBLE_COLOUR


# --------------------------------------------------------------------------------------------------
# budget spread
# --------------------------------------------------------------------------------------------------
def _seen_arrays(weights, probs, seen):
    w = np.asarray(weights, dtype=float)
    pi = np.asarray(probs, dtype=float)
    if w.shape != pi.shape or w.ndim != 1:
        raise ValueError(f"weights and probs must be 1-D of equal length, got {w.shape} and {pi.shape}")
    m = np.isfinite(w) & np.isfinite(pi)
    if seen is not None:
        m &= np.asarray(seen, dtype=bool)
    if not m.any():
        raise ValueError("no seen token types with finite weight and probability")
    return w[m], pi[m]


@styled
def plot_weights_vs_probs(weights, probs, p: float, out_path: str | os.PathLike, seen=None,
                          title: str = "") -> list[Path]:
    """Rank plot: saliency weight w and calibrated pi of the seen types, both sorted by w (descending),
    on a log scale relative to their mean / the budget p; right panel: pi against w."""
    w, pi = _seen_arrays(weights, probs, seen)
    order = np.argsort(-w, kind="stable")
    rank = np.arange(1, w.size + 1)
    fig = new_figure(MAX_WIDTH_IN, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    wpos = w[order] / np.mean(np.abs(w)) if np.mean(np.abs(w)) > 0 else w[order]
    ax1.plot(rank, np.where(wpos > 0, wpos, np.nan), label="saliency weight w / mean(w)")
    ax1.plot(rank, pi[order] / p, label="calibrated π / p")
    ax1.axhline(1.0, color="0.5", ls=":", lw=0.8)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("rank of the type by saliency weight")
    ax1.set_ylabel("relative to mean / budget")
    ax1.legend()
    ax2.scatter(w, pi, s=4, alpha=0.5, rasterized=True)
    ax2.axhline(p, color="0.5", ls=":", lw=0.8, label=f"budget p = {p:g}")
    ax2.set_xlabel("saliency weight w")
    ax2.set_ylabel("masking probability π")
    ax2.legend()
    fig.suptitle(title or "Saliency ranking vs calibrated masking probabilities")
    return save_figure(fig, out_path, "Left: the saliency weight of every seen token type and its calibrated "
                                      "masking probability π, both sorted by weight (log scales, relative to "
                                      "their mean and the budget). Right: π against the weight.")


@styled
def plot_prob_histogram(probs, p: float, out_path: str | os.PathLike, seen=None, counts=None,
                        title: str = "") -> list[Path]:
    """Histogram of pi over seen types (and, with ``counts``, weighted by token frequency)."""
    pi = np.asarray(probs, dtype=float)
    m = np.isfinite(pi)
    if seen is not None:
        m &= np.asarray(seen, dtype=bool)
    if not m.any():
        raise ValueError("no seen token types with a finite probability")
    fig = new_figure(6.0, 3.4)
    ax = fig.subplots()
    bins = np.linspace(pi[m].min(), pi[m].max(), 41) if np.ptp(pi[m]) > 0 else 10
    ax.hist(pi[m], bins=bins, alpha=0.6, density=True, label="per type")
    if counts is not None:
        f = np.asarray(counts, dtype=float)[m]
        if f.sum() > 0:
            ax.hist(pi[m], bins=bins, weights=f, alpha=0.6, density=True, label="per token (weighted by count)")
    ax.axvline(p, color="black", ls="--", lw=0.8, label=f"budget p = {p:g}")
    ax.set_yscale("log")
    ax.set_xlabel("masking probability π")
    ax.set_ylabel("density (log scale)")
    ax.legend()
    ax.set_title(title or "Distribution of calibrated masking probabilities")
    return save_figure(fig, out_path, "Histogram of the calibrated masking probabilities π over the seen token "
                                      "types (and weighted by how often each type occurs), with the budget p "
                                      "dashed.")


@styled
def plot_calibration_sweep(sweep: pd.DataFrame, out_path: str | os.PathLike,
                           paper_kl: float | None = None, title: str = "") -> list[Path]:
    """Calibration sweep (``kl.budget_spread.calibration_sweep``): KL to uniform, budget moved and max/min pi
    vs delta, one line per calibration (softmax, which has no band: a dash-dotted level per tau)."""
    require_plottable(sweep, ["method", "delta", "tau", "kl_to_uniform", "budget_moved", "pi_ratio"], "sweep")
    df = sweep.copy()
    df["label"] = [f"{m} (τ = {t:g})" if np.isfinite(t) else m for m, t in zip(df["method"], df["tau"].astype(float),
                                                                                 strict=True)]
    labels = list(dict.fromkeys(df["label"]))
    colors = dict(zip(labels, colorblind(len(labels)), strict=True))
    fig = new_figure(MAX_WIDTH_IN, 6.2)
    grid = fig.subplots(2, 2)
    axes = [grid[0, 0], grid[0, 1], grid[1, 0]]
    panels = [("kl_to_uniform", "KL to uniform (nats / token)", True),
              ("budget_moved", "budget moved (TV(q, u))", False),
              ("pi_ratio", "max π / min π", True)]
    for ax, (col, ylabel, logy) in zip(axes, panels, strict=True):
        for lab in labels:
            g = df[df.label == lab].sort_values("delta")
            y = g[col].to_numpy(float)
            y = np.where(np.isfinite(y) & ((y > 0) if logy else True), y, np.nan)
            if g["delta"].isna().all():  # calibration without a band (softmax): a horizontal line
                if np.isfinite(y).any():
                    ax.axhline(np.nanmean(y), color=colors[lab], ls="-.", lw=1.2, label=lab)
                continue
            ax.plot(g["delta"], y, "o-", ms=3, color=colors[lab], label=lab)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("band width δ (minmax, rank)")
        ax.set_ylabel(ylabel)
    if paper_kl is not None:
        axes[0].axhline(paper_kl, color="black", ls="--", lw=0.8, label=f"paper: {paper_kl:g}")
    grid[1, 1].set_axis_off()  # the fourth panel holds the legend of the three
    handles = legend_handles(axes)
    grid[1, 1].legend(list(handles.values()), list(handles), loc="center", title="calibration")
    fig.suptitle(title or "Calibration sweep on fixed saliency weights (no retraining)")
    caption = ("The same saliency weights calibrated by each method over band widths δ: the KL divergence of the "
               "masking to uniform masking, the share of the masking budget moved away from uniform, and the "
               "spread of π (max / min).")
    if paper_kl is not None:
        caption += f" Dashed: the paper's KL of {paper_kl:g} nats/token."
    return save_figure(fig, out_path, caption)


# --------------------------------------------------------------------------------------------------
# masking walkthrough (notebooks/01_masking_walkthrough, tables from typhoon.report.masking_walkthrough)
# --------------------------------------------------------------------------------------------------
_LOG_TICKS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def percent_label(share: float) -> str:
    """A share as a percentage with the decimals it needs: 0.004 -> "0.4 %", 0.07 -> "7 %", 0.3 -> "30 %"."""
    value = 100 * share
    decimals = 0 if value >= 1 or value == 0 else max(1, -int(np.floor(np.log10(value))))
    return f"{value:.{decimals}f} %"


def _percent_log_axis(ax, shares: pd.Series) -> None:
    """Log x axis over ``shares`` (budget spans 0.4 % to 30 %: linear, all but one sit at 0), ticked in
    readable percentages."""
    finite = pd.to_numeric(shares, errors="coerce")
    finite = finite[np.isfinite(finite) & (finite > 0)]
    if finite.empty:
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        return
    low, high = float(finite.min()) / 1.6, min(1.0, float(finite.max()) * 1.6)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ticks = [t for t in _LOG_TICKS if low <= t <= high] or [float(finite.min())]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: percent_label(x)))


@styled
def plot_budget_vs_difference(verdict: pd.DataFrame, out_path: str | os.PathLike, margin: float | None = None,
                              reference: str = "random") -> list[Path]:
    """Budget moved (TV to uniform masking) against the paired dev-metric difference to ``reference``
    (95 % CI), one panel per task: a point per typhoon-family strategy, coloured by strategy, shaped by
    saliency source (the table of :func:`typhoon.analysis.bottleneck_verdict.bottleneck_verdict`)."""
    require_plottable(verdict, ["task", "strategy", "saliency", "budget_moved", "diff", "ci_low", "ci_high"], "verdict")
    margin = verdict.attrs.get("margin") if margin is None else margin
    tasks = list(dict.fromkeys(verdict["task"]))
    pal = strategy_palette(verdict["strategy"])
    markers = {"mlm": "o", "task": "s"}
    fig = new_figure(MAX_WIDTH_IN, 3.2)
    axes = np.atleast_1d(fig.subplots(1, max(1, len(tasks)), sharey=False))
    for ax, task in zip(axes, tasks, strict=False):
        if margin:
            ax.axhspan(-margin, margin, color="0.9", zorder=0, label=f"±{margin:g} (does not matter)")
        ax.axhline(0, color="black", lw=0.8)
        for r in verdict[verdict["task"] == task].itertuples():
            if not np.isfinite(r.budget_moved) or r.budget_moved <= 0:
                continue  # no masking state to measure: nowhere on a log axis (the table has the row)
            x = r.budget_moved
            yerr = ([[r.diff - r.ci_low], [r.ci_high - r.diff]] if np.isfinite(r.ci_low) else None)
            ax.errorbar(x, r.diff, yerr=yerr, fmt=markers.get(str(r.saliency), "D"), color=pal[r.strategy],
                        capsize=3, label=f"{r.strategy} ({r.saliency} saliency)")
        ax.set_title(task)
        ax.set_xlabel("budget moved (TV to uniform, log scale)")
        _percent_log_axis(ax, verdict["budget_moved"])
    axes[0].set_ylabel(f"dev metric − {reference} (95% CI)")
    shared_legend(fig, axes, ncols=2)
    return save_figure(fig, out_path, f"Per task, each typhoon-family strategy's budget moved away from uniform "
                                      f"masking (total variation, mean over its runs) against its paired dev-metric "
                                      f"difference to {reference} with the 95 % t CI; the grey band is the margin "
                                      "that would not matter. Circles: MLM saliency; squares: task saliency.")


@styled
def plot_rates(table: pd.DataFrame, out_path: str | os.PathLike) -> list[Path]:
    """Left: empirical rate (mean ± sd between draws) against the budget p. Right: the sd between draws."""
    palette = strategy_palette(table["strategy"])
    fig = new_figure(MAX_WIDTH_IN, 3.4)
    ax_rate, ax_sd = fig.subplots(1, 2)
    top = float(max(table["p"].max(), (table["mean_rate"] + table["sd_rate"]).max()))
    ax_rate.plot([0, top], [0, top], color="black", lw=0.8, ls="--", label="rate = p")
    n_strategies = table["strategy"].nunique()
    for i, (name, sub) in enumerate(table.sort_values("p").groupby("strategy", sort=False)):
        offset = (i - (n_strategies - 1) / 2) * 0.004  # keep the error bars apart
        ax_rate.errorbar(sub["p"] + offset, sub["mean_rate"], yerr=sub["sd_rate"], marker="o", capsize=3,
                         color=palette[name], label=name)
        ax_sd.plot(sub["p"], sub["sd_rate"], marker="o", color=palette[name], label=name)
    ax_rate.set_xlabel("budget p")
    ax_rate.set_ylabel("share of maskable tokens selected")
    ax_rate.legend()
    ax_rate.set_title(f"Mean rate over {int(table['draws'].iloc[0])} draws (bars: sd)")
    ax_sd.set_xlabel("budget p")
    ax_sd.set_ylabel("sd of the rate between draws")
    ax_sd.set_title("Draw-to-draw spread of the masked share")
    return save_figure(fig, out_path, "Left: the share of maskable tokens each strategy selects (mean ± sd over "
                                      "draws) against the budget p, with the line rate = p. Right: how much that "
                                      "share varies from draw to draw.")


@styled
def plot_saliency(tokens: pd.DataFrame, p: float, out_path: str | os.PathLike) -> list[Path]:
    """Two bar panels over a sentence's non-special tokens: saliency (masked vs visible) and pi (line at p)."""
    df = tokens[~tokens["special"]].reset_index(drop=True)
    colors = [MASKED_COLOUR if s else VISIBLE_COLOUR for s in df["selected"]]
    fig = new_figure(max(5.0, 0.2 * len(df) + 1.5), 5.0)
    ax_s, ax_p = fig.subplots(2, 1, sharex=True)
    x = np.arange(len(df))
    ax_s.bar(x, df["saliency"], color=colors)
    ax_s.axhline(0, color="black", lw=0.6)
    visible = df.loc[~df["selected"], "saliency"].abs()
    if (visible > 0).any():  # masked positions' saliency is orders of magnitude larger: symlog shows both
        ax_s.set_yscale("symlog", linthresh=float(visible[visible > 0].median()))
    ax_s.set_ylabel("saliency s_i (symlog)")
    ax_s.set_title("Saliency ⟨∂L/∂x_i, W[t_i]⟩ (orange: masked in this draw, grey: visible)")
    ax_p.bar(x, df["pi"], color=PI_COLOUR)
    ax_p.axhline(p, color="black", lw=0.8, ls="--")
    ax_p.set_ylabel("masking probability π")
    ax_p.set_title(f"Calibrated π of each token's type (dashed: the budget p = {p:g})")
    ax_p.set_xticks(x, df["token"], rotation=90, fontsize=MIN_FONT_PT)
    return save_figure(fig, out_path, "Top: the saliency of every token of one sentence (orange: masked in this "
                                      "draw, grey: visible). Bottom: the calibrated masking probability π of each "
                                      "token's type, with the budget p dashed.")
