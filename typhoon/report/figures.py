"""Figures, regenerated from the tables (PNG + SVG under ``<out>/figures/``), all in one style.

Every ``plot_*`` function takes DataFrames (or arrays) plus an output path (suffix ignored) and returns
the written paths ``[<path>.png, <path>.svg]``. Figures are built on ``matplotlib.figure.Figure`` with
the Agg canvas -- no pyplot state, so they are safe in scripts, tests and notebooks alike (show them in
a notebook with ``IPython.display.Image(paths[0])``).

All are in the bundle's one style, made and written with :mod:`typhoon.figure_style`'s helpers (the style,
the width and font limits, the caption each figure carries).
"""


from __future__ import annotations

import os
from pathlib import Path

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from typhoon.analysis import margin_text, metric_of, ok_runs, require_plottable, strategy_order, summarize
from typhoon.figure_style import (
    MAX_WIDTH_IN,
    colorblind,
    new_figure,
    save_figure,
    shared_legend,
    strategy_palette,
    styled,
)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def _facets(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    return list(dict.fromkeys(df["task"].astype(str))), list(dict.fromkeys(df["backbone"].astype(str)))


# --------------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------------
@styled
def plot_metric_per_seed(results: pd.DataFrame, out_path: str | os.PathLike, confidence: float = 0.95,
                         reference: str | None = "typhoon") -> list[Path]:
    """Dev metric of every seed per strategy (dots), with the mean ± t-based CI beside them (black);
    facets task x backbone."""
    require_plottable(results, ["task", "backbone", "strategy", "seed", "status", "primary_value"], "results")
    df = ok_runs(results)
    if df.empty:
        raise ValueError("results has no runs with status 'ok'")
    summ = summarize(results, confidence=confidence)
    tasks, backbones = _facets(df)
    order = strategy_order(df["strategy"], reference)
    pal = strategy_palette(order)
    jitter = np.random.default_rng(0)  # fixed: the figure is the same every time it is made
    fig = new_figure(max(4.6, 1.0 + 0.75 * len(order) * len(backbones)), 0.8 + 2.4 * len(tasks))
    axes = fig.subplots(len(tasks), len(backbones), squeeze=False, sharey="row")
    for i, task in enumerate(tasks):
        for j, bb in enumerate(backbones):
            ax = axes[i, j]
            sub = df[(df.task == task) & (df.backbone == bb)]
            if sub.empty:
                ax.set_axis_off()
                continue
            sm = summ[(summ.task == task) & (summ.backbone == bb)].set_index("strategy")
            for x, s in enumerate(order):
                values = sub.loc[sub.strategy == s, "primary_value"].to_numpy(float)
                ax.plot(x - 0.1 + jitter.uniform(-0.06, 0.06, values.size), values, "o", color=pal[s], alpha=0.8)
                if s not in sm.index:
                    continue
                r = sm.loc[s]
                if np.isfinite(r["ci_low"]):
                    ax.errorbar(x + 0.12, r["mean"], yerr=[[r["mean"] - r["ci_low"]], [r["ci_high"] - r["mean"]]],
                                fmt="o", color="black", capsize=3, ms=4)
                else:
                    ax.plot(x + 0.12, r["mean"], "o", color="black", ms=4)
            metric = metric_of(sub) or "primary metric"
            ax.set_xticks(range(len(order)), order, rotation=20, ha="right")
            ax.set_xlim(-0.5, len(order) - 0.5)
            ax.set_title(f"{task} / {bb}")
            ax.set_ylabel(f"dev {metric}" if j == 0 else "")
    fig.suptitle(f"Dev metric per seed; black: mean ± {confidence:.0%} CI")
    return save_figure(fig, out_path, f"The dev metric of every seed (coloured dots) per masking strategy, with "
                                      f"the mean and its {confidence:.0%} t confidence interval in black beside "
                                      "them; one panel per task and backbone.")


@styled
def plot_paired_differences(comparisons: pd.DataFrame, out_path: str | os.PathLike,
                            margin: float | None = None, family: str | None = "vs_reference") -> list[Path]:
    """Forest plot of paired mean differences (strategy_a - strategy_b) with CIs, zero line and the
    equivalence band ±margin (``margin``, else each row's own from the ``margin`` column: one band per row
    where the tasks' margins differ); each row names its Holm p. ``family`` selects rows (falls back to all
    rows if none match)."""
    require_plottable(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "mean_diff", "ci_low", "ci_high"],
                      "comparisons")
    df = comparisons
    if family is not None and "family" in df.columns and (df["family"] == family).any():
        df = df[df["family"] == family]
    df = df.reset_index(drop=True)
    margins = (pd.Series(float(margin), index=df.index) if margin is not None else
               df["margin"].astype(float) if "margin" in df.columns and len(df) and df["margin"].notna().all() else None)
    holm = df["p_holm"] if "p_holm" in df.columns else pd.Series(np.nan, index=df.index)
    labels = [f"{r.task}/{r.backbone}: {r.strategy_a} − {r.strategy_b}"
              + (f"\nHolm p = {p:.2g}" if np.isfinite(p) else "\nnot testable")
              for r, p in zip(df.itertuples(), holm.astype(float), strict=True)]
    pal = strategy_palette(pd.concat([df.strategy_a, df.strategy_b]))
    fig = new_figure(MAX_WIDTH_IN, 1.4 + 0.5 * len(df))
    ax = fig.subplots()
    y = np.arange(len(df))[::-1]
    if margins is not None and margins.nunique() == 1:
        ax.axvspan(-margins.iloc[0], margins.iloc[0], color="0.9", zorder=0,
                   label=f"equivalence margin ±{margins.iloc[0]:g}")
    elif margins is not None:  # each row's own band: the tasks' margins differ (F1 and MCC share the axis)
        for i, (yi, m) in enumerate(zip(y, margins, strict=True)):
            ax.fill_betweenx([yi - 0.4, yi + 0.4], -m, m, color="0.9", zorder=0,
                             label=f"equivalence margin ({margin_text(df)})" if i == 0 else None)
    ax.axvline(0, color="black", lw=0.8)
    for yi, r in zip(y, df.itertuples(), strict=True):
        c = pal[r.strategy_b]
        if np.isfinite(r.ci_low):
            ax.errorbar(r.mean_diff, yi, xerr=[[r.mean_diff - r.ci_low], [r.ci_high - r.mean_diff]], fmt="o",
                        color=c, capsize=3)
        elif np.isfinite(r.mean_diff):
            ax.plot(r.mean_diff, yi, "x", color=c, ms=6)  # no CI (fewer than 2 seeds, or no spread)
    ax.set_yticks(y, labels)
    ax.set_ylim(-0.6, len(df) - 0.4)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, symmetric=True))
    ax.grid(axis="y", visible=False)
    metric = metric_of(df).replace(",", " / ") if "primary_metric" in df.columns else ""
    ax.set_xlabel(f"paired mean difference in dev {metric or 'metric'} (95% CI)")
    if margins is not None:
        fig.legend(loc="outside lower center")
    ax.set_title("Paired differences by seed (x: no CI)")
    return save_figure(fig, out_path, "Paired mean difference of the dev metric between two strategies (by seed) "
                                      "with its 95 % t confidence interval, against zero and the grey "
                                      "equivalence band; each row names its Holm-adjusted p.")


@styled
def plot_expected_max(evp: pd.DataFrame, out_path: str | os.PathLike) -> list[Path]:
    """Expected best-of-k dev metric vs k (table from ``seed_budget.expected_max_performance``); one legend."""
    require_plottable(evp, ["task", "backbone", "strategy", "k", "expected_max"], "expected-max table")
    tasks, backbones = _facets(evp)
    pal = strategy_palette(evp["strategy"])
    fig = new_figure(1.0 + 3.0 * len(backbones), 1.0 + 2.4 * len(tasks))
    axes = fig.subplots(len(tasks), len(backbones), squeeze=False)
    extrapolated = False
    for i, task in enumerate(tasks):
        for j, bb in enumerate(backbones):
            ax = axes[i, j]
            sub = evp[(evp.task == task) & (evp.backbone == bb)]
            for s, g in sub.groupby("strategy", sort=False):
                ax.plot(g["k"], g["expected_max"], "o-", color=pal[s], label=s)
                if "extrapolated" in g.columns and g["extrapolated"].any():
                    ax.axvline(g.loc[~g["extrapolated"], "k"].max(), color="0.6", ls=":", lw=1)
                    extrapolated = True
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(f"{task} / {bb}")
            ax.set_xlabel("k (seeds)")
            ax.set_ylabel("E[max of k]" if j == 0 else "")
    shared_legend(fig, axes)
    note = " Right of a dotted line, k exceeds the seeds a strategy has: the values there are extrapolated." \
        if extrapolated else ""
    return save_figure(fig, out_path, "Expected best dev metric among k seeds (Dodge et al., 2019) against k, per "
                                      "strategy; one panel per task and backbone." + note)


# --------------------------------------------------------------------------------------------------
# MLM loss curves
# --------------------------------------------------------------------------------------------------
@styled
def plot_loss_curves(curves: pd.DataFrame, out_path: str | os.PathLike) -> list[Path]:
    """MLM loss vs step per strategy (mean ± sd over seeds); rows task/backbone, columns train/dev; one legend."""
    require_plottable(curves, ["task", "backbone", "strategy", "seed", "step", "epoch", "split", "loss"], "loss curves")
    agg = (curves.groupby(["task", "backbone", "strategy", "split", "step", "epoch"], sort=False)["loss"]
           .agg(["mean", "std", "count"]).reset_index().sort_values("step"))
    combos = list(dict.fromkeys(zip(agg["task"], agg["backbone"], strict=True)))
    splits = [s for s in ("train", "dev") if s in set(agg["split"])] or sorted(set(agg["split"]))
    pal = strategy_palette(agg["strategy"])
    fig = new_figure(1.0 + 3.2 * len(splits), 1.0 + 2.3 * len(combos))
    axes = fig.subplots(len(combos), len(splits), squeeze=False)
    for i, (task, bb) in enumerate(combos):
        for j, split in enumerate(splits):
            ax = axes[i, j]
            sub = agg[(agg.task == task) & (agg.backbone == bb) & (agg.split == split)]
            x = "step" if split == "train" else "epoch"  # the dev loss is measured once, after each epoch
            for s, g in sub.groupby("strategy", sort=False):
                ax.plot(g[x], g["mean"], color=pal[s], label=s, marker="o" if len(g) < 30 else None)
                sd = g["std"].fillna(0.0)
                ax.fill_between(g[x], g["mean"] - sd, g["mean"] + sd, color=pal[s], alpha=0.2, lw=0)
            if x == "epoch" and len(sub):
                epochs = sorted(sub["epoch"].astype(int).unique())
                ax.set_xticks(epochs)
                ax.set_xlim(epochs[0] - 0.5, epochs[-1] + 0.5)
            else:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
            ax.set_title(f"{task} / {bb}: {split}" + (" (one fixed random mask)" if x == "epoch" else ""))
            ax.set_xlabel(f"MLM {x}")
            ax.set_ylabel("MLM loss" if j == 0 else "")
    shared_legend(fig, axes)
    fig.suptitle("MLM loss (mean ± sd over seeds)")
    return save_figure(fig, out_path, "Masked-language-model loss during phase 1 per strategy, mean over seeds "
                                      "with a band of ± one sd: training loss under each strategy's own masks "
                                      "(left) and the dev loss under one fixed random mask (right).")


@styled
def plot_run_curves(mlm_loss: pd.DataFrame, epochs: pd.DataFrame, primary_metric: str,
                    majority_value: float | None, out_path: str | os.PathLike) -> list[Path]:
    """One run: MLM loss per step (train, and dev per epoch) and the dev metric per fine-tuning epoch."""
    require_plottable(mlm_loss, ["step", "split", "loss"], "MLM loss")
    column = f"dev_{primary_metric}"
    require_plottable(epochs, ["epoch", column], "epoch metrics")
    fig = new_figure(MAX_WIDTH_IN, 3.0)
    loss_ax, metric_ax = fig.subplots(1, 2)
    for split, style in (("train", dict(lw=1.0)), ("dev", dict(marker="o", lw=1.5))):
        part = mlm_loss[mlm_loss["split"] == split]
        if len(part):
            loss_ax.plot(part["step"], part["loss"], label=split, **style)
    loss_ax.set(xlabel="MLM step", ylabel="MLM loss", title="phase 1: MLM adaptation")
    loss_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(mlm_loss):
        loss_ax.legend()
    metric_ax.plot(epochs["epoch"], epochs[column], marker="o")
    if majority_value is not None and np.isfinite(majority_value):
        metric_ax.axhline(majority_value, ls="--", color="grey", lw=1, label="majority class")
        metric_ax.legend()
    metric_ax.set_xticks(epochs["epoch"].astype(int))  # whole epochs only, also for a one-epoch run
    metric_ax.set_xlim(epochs["epoch"].min() - 0.5, epochs["epoch"].max() + 0.5)
    metric_ax.set(xlabel="fine-tuning epoch", ylabel=f"dev {primary_metric}", title="phase 2: fine-tuning")
    return save_figure(fig, out_path, "One run: the MLM loss per step of phase 1 (training, and the dev loss "
                                      f"after each epoch) and the dev {primary_metric} after each fine-tuning "
                                      "epoch, with the majority-class level dashed.")


MASKED_COLOUR, VISIBLE_COLOUR, PI_COLOUR = "#d55e00", "#999999", "#0072b2"  # colorblind-safe


@styled
def plot_schedule_comparisons(table: pd.DataFrame, out_path: str | os.PathLike) -> list[Path]:
    """The schedules grid against ``fixed`` (:func:`typhoon.studies.schedules.analysis.schedule_comparisons`): one
    row per task × strategy × schedule; left, the dev-metric difference with its 95 % t interval against the
    grey ±margin band; right, the full-mask MLM loss difference with its interval, coloured by the verdict
    (``theory``: whether the difference, Holm-adjusted over the table, shows the theory's predicted direction)."""
    require_plottable(table, ["task", "strategy", "schedule", "reference", "diff", "ci_low", "ci_high", "margin",
                              "full_mask_loss_diff", "full_mask_loss_ci_low", "full_mask_loss_ci_high", "theory"], "schedule table")
    df = table.reset_index(drop=True)
    agrees, disagrees = colorblind(2)
    colours = {"agrees": agrees, "disagrees": disagrees, "not decided": "0.55"}  # undecided: grey, not a third hue
    fig = new_figure(MAX_WIDTH_IN, 1.5 + 0.42 * len(df))
    metric_ax, loss_ax = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(df))[::-1]
    for yi, r in zip(y, df.itertuples(), strict=True):
        # each row's own margin band (F1 and MCC rows share the axis, their margins differ)
        metric_ax.fill_betweenx([yi - 0.4, yi + 0.4], -r.margin, r.margin, color="0.9", zorder=0)
        if np.isfinite(r.ci_low):
            metric_ax.errorbar(r.diff, yi, xerr=[[r.diff - r.ci_low], [r.ci_high - r.diff]], fmt="o", color="0.25", capsize=3)
        colour = colours.get(r.theory, "0.5")
        if np.isfinite(r.full_mask_loss_ci_low):
            loss_ax.errorbar(r.full_mask_loss_diff, yi, capsize=3, fmt="o", color=colour, label=f"theory (Holm) {r.theory}",
                             xerr=[[r.full_mask_loss_diff - r.full_mask_loss_ci_low],
                                   [r.full_mask_loss_ci_high - r.full_mask_loss_diff]])
    for ax in (metric_ax, loss_ax):
        ax.axvline(0, color="black", lw=0.8)
        ax.grid(axis="y", visible=False)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, symmetric=True))
    metric_ax.set_yticks(y, [f"{r.task} ({r.primary_metric})/{r.strategy}: {r.schedule}" for r in df.itertuples()])
    metric_ax.set_ylim(-0.6, len(df) - 0.4)
    reference = df["reference"].iloc[0]
    metric_ax.set_xlabel(f"schedule − {reference}\n(dev metric, 95% CI)")
    loss_ax.set_xlabel(f"schedule − {reference}\n(nats, 95% CI)")
    metric_ax.set_title("Fine-tuned dev metric (grey: ±margin)")
    loss_ax.set_title("MLM loss, fully masked dev inputs")
    shared_legend(fig, loss_ax)
    return save_figure(fig, out_path, f"Each schedule against {reference} masking, paired by seed: left, the "
                                      "fine-tuned dev-metric difference with its 95 % t interval against the grey "
                                      "equivalence band; right, the difference of the masked LM's loss on fully "
                                      "masked dev inputs, coloured by whether it shows the direction the theory "
                                      "predicts with Holm over the table (the unadjusted 95 % interval is drawn).")
