"""The figures of ``notebooks/40_mask_schedules``, on ``typhoon.figure_style``'s helpers and in its style (PNG + SVG).

Each ``plot_*`` function takes the result of one experiment (``typhoon.analysis.identifiability.experiments``)
and an output path (suffix ignored) and returns the written paths ``[<path>.png, <path>.svg]``, like
the figures of ``typhoon.report.figures``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from typhoon.analysis.identifiability.experiments import (
    DiscrepancyStudy,
    RecoveryStudy,
    TextStudy,
    range_label,
)
from typhoon.figure_style import MAX_WIDTH_IN, colorblind, new_figure, save_figure, shared_legend, styled


@styled
def plot_discrepancy_decay(study: DiscrepancyStudy, out_path: str | os.PathLike) -> list[Path]:
    """Left: the masked discrepancy of the mis-weighted model (exact, second order, upper bound) against
    ``v_min``, per schedule family, on a log scale. Right: the distance of the joint laws (TV, KL)."""
    table = study.table
    families = list(dict.fromkeys(table["family"]))
    colors = dict(zip(families, colorblind(len(families)), strict=True))
    quantities = {"discrepancy": ("-", "o", "exact"), "second_order": ("--", None, "second order"),
                  "upper_bound": (":", None, "upper bound")}
    fig = new_figure(MAX_WIDTH_IN, 4.4)
    decay_ax, joint_ax = fig.subplots(1, 2)
    for family in families:
        part = table[table.family == family]
        for column, (style, marker, label) in quantities.items():
            decay_ax.plot(part["v_min"], part[column], ls=style, marker=marker, ms=4, color=colors[family],
                          label=f"{family}: {label}")
    decay_ax.set_yscale("log")
    decay_ax.set(xlabel=r"smallest visible-set size $v_{\min}$", ylabel=r"masked discrepancy $D_\pi(q_\lambda)$ (nats)")
    decay_ax.set_title("excess masked risk of the mis-weighted model")
    joint = table.drop_duplicates("v_min")
    for column, label in (("total_variation", "total variation"), ("joint_kl", "KL (nats)")):
        joint_ax.plot(joint["v_min"], joint[column], marker="o", ms=4, label=label)
    joint_ax.set_ylim(0, None)
    joint_ax.set(xlabel=r"smallest visible-set size $v_{\min}$", ylabel="distance of the joint laws")
    joint_ax.set_title("the joint laws stay far apart")
    shared_legend(fig, [decay_ax, joint_ax], ncols=3)
    return save_figure(fig, out_path, "Left: the excess masked risk of a model with the wrong mode weights "
                                      "against the smallest number of visible coordinates, per schedule family "
                                      "(exact, second-order and upper bound; log scale). Right: the total "
                                      "variation and KL between the joint laws, which stay large.")


@styled
def plot_mode_weight_recovery(study: RecoveryStudy, out_path: str | os.PathLike) -> list[Path]:
    """Left: the recovered mode weight of every trained model per schedule, against the truth. Right: its
    RMSE against the full-mask mass ``π_0`` (log-log), with the sampling floor, the fit and the blind RMSE."""
    table, cured, fit = study.table, study.cured, study.slope_fit
    schedules = list(dict.fromkeys(table["schedule"]))
    fig = new_figure(MAX_WIDTH_IN, 4.4)
    weight_ax, error_ax = fig.subplots(1, 2)
    jitter = np.random.default_rng(0)  # fixed (seaborn's stripplot draws from the global RNG): the same figure every time
    for i, schedule in enumerate(schedules):
        values = table.loc[table["schedule"] == schedule, "recovered_weight"].to_numpy(float)
        weight_ax.plot(i + jitter.uniform(-0.15, 0.15, values.size), values, "o", color="C0", alpha=0.6, ms=4)
    weight_ax.set_xticks(range(len(schedules)), schedules)
    weight_ax.set_xlim(-0.5, len(schedules) - 0.5)
    weight_ax.grid(axis="x", visible=False)
    weight_ax.axhline(study.law.weights[0], color="black", ls="--", lw=1, label=r"true $\alpha_0$")
    weight_ax.set(xlabel="", ylabel=r"recovered mode weight $\hat\lambda_0$")
    weight_ax.set_title("mode weight read from the fully-masked prediction")
    weight_ax.tick_params(axis="x", labelrotation=30)
    error_ax.loglog(cured["pi0"], cured["rmse"], "o", label="trained model (RMSE over seeds)")
    error_ax.loglog(cured["pi0"], cured["sampling_floor"], "s--", alpha=0.7,
                    label=r"sampling floor $\sqrt{\alpha_0\alpha_1 E[1/n_0]}$")
    grid = np.geomspace(cured["pi0"].min(), cured["pi0"].max(), 50)
    error_ax.loglog(grid, fit["prefactor"] * grid ** fit["slope"], "-", label=f"fit: slope {fit['slope']:.2f}")
    blind_rmse = study.summary.query("schedule == 'blind'")["rmse"].item()
    error_ax.axhline(blind_rmse, color="gray", ls=":", label="blind schedule")
    error_ax.set_xticks(cured["pi0"], [f"{p:g}" for p in cured["pi0"]])
    error_ax.xaxis.set_minor_formatter(NullFormatter())
    error_ax.set(xlabel=r"full-mask mass $\pi_0$", ylabel=r"RMSE of $\hat\lambda_0$")
    error_ax.set_title("error vs full-mask mass")
    shared_legend(fig, [weight_ax, error_ax], ncols=2)
    return save_figure(fig, out_path, "Left: the mode weight recovered by each trained masked predictor, per "
                                      "schedule, against the true weight (dashed). Right: its RMSE against the "
                                      "full-mask mass π0 (log-log), with the sampling floor, a power-law fit and "
                                      "the blind schedule's RMSE.")


@styled
def plot_text_uncertainty(study: TextStudy, out_path: str | os.PathLike) -> list[Path]:
    """The residual code-vs-prose uncertainty (and the Brier score) against ``v`` visible characters, with
    the exponential and power-law fits over ``v >= 1`` and over the tail, on semilog and log-log axes."""
    part = study.table[study.table.visible >= 1]
    v = part["visible"].to_numpy(dtype=float)
    curves = {}
    for lowest, style in ((1, "-"), (study.tail_from, "--")):
        rows = study.fits[(study.fits.quantity == "posterior_variance")
                          & (study.fits.range == range_label(lowest))].set_index("model")
        on = v >= lowest
        exponential, power_law = rows.loc["exponential"], rows.loc["power_law"]
        curves[f"exponential fit ({range_label(lowest)})"] = (
            v[on], exponential.prefactor * np.exp(-exponential.rate_or_exponent * v[on]), style)
        curves[f"power-law fit ({range_label(lowest)})"] = (
            v[on], power_law.prefactor * v[on] ** -power_law.rate_or_exponent, style)
    fig = new_figure(MAX_WIDTH_IN, 4.8)
    axes = fig.subplots(1, 2)
    for ax, scale in zip(axes, ("semilog", "log-log"), strict=True):
        ax.plot(v, part["posterior_variance"], "o", ms=4, label=r"$E[w(1-w)]$ (held out)")
        ax.plot(v, part["brier"], ".", ms=4, alpha=0.6, label="Brier score")
        for name, (x_fit, curve, style) in curves.items():
            ax.plot(x_fit, curve, style, label=name)
        ax.set_yscale("log")
        if scale == "log-log":
            ax.set_xscale("log")
        ax.set(xlabel="visible characters $v$", ylabel="residual code-vs-prose uncertainty")
        ax.set_title(f"{scale} axes")
    shared_legend(fig, axes, ncols=2)
    return save_figure(fig, out_path, "The residual uncertainty about whether a snippet is code or prose, "
                                      "against the number of visible characters (held out, and the Brier score), "
                                      "with exponential and power-law fits; semilog (left) and log-log (right).")
