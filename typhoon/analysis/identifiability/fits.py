"""Least-squares fits of decaying curves on log scales: exponential vs power law."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd


def _line_fit(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    slope, intercept = np.polyfit(x, y, deg=1)
    residual = y - (intercept + slope * x)
    total = np.sum((y - y.mean()) ** 2)
    return {
        "slope": float(slope),
        "intercept": float(intercept),
        "rmse_log": float(np.sqrt(np.mean(residual**2))),
        "r2_log": float(1 - np.sum(residual**2) / total) if total > 0 else math.nan,
        "n_points": int(x.size),
    }


def _positive(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(y) & (y > 0)
    if keep.sum() < 2:
        raise ValueError("need at least two positive values to fit a decay")
    return x[keep], y[keep]


def fit_exponential_decay(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Least squares of ``log y = a - rate · x``; returns rate, prefactor ``e^a``, rmse/R² of ``log y``."""
    x, y = _positive(x, y)
    fit = _line_fit(x, np.log(y))
    return {"rate": -fit["slope"], "prefactor": math.exp(fit["intercept"]), **fit}


def fit_power_law(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Least squares of ``log y = a + slope · log x`` (``x > 0``); ``exponent = -slope``."""
    x, y = _positive(x, y)
    keep = x > 0
    fit = _line_fit(np.log(x[keep]), np.log(y[keep]))
    return {"exponent": -fit["slope"], "prefactor": math.exp(fit["intercept"]), **fit}


def compare_decay_fits(x: Sequence[float], y: Sequence[float]) -> pd.DataFrame:
    """Exponential vs power-law fit of a positive decaying curve, both with two parameters.

    One row per model with its rmse and R² of ``log y``; ``better`` marks the smaller rmse.
    """
    exp_fit, pow_fit = fit_exponential_decay(x, y), fit_power_law(x, y)
    table = pd.DataFrame(
        [
            {"model": "exponential", "rate_or_exponent": exp_fit["rate"], "prefactor": exp_fit["prefactor"],
             "rmse_log": exp_fit["rmse_log"], "r2_log": exp_fit["r2_log"], "n_points": exp_fit["n_points"]},
            {"model": "power_law", "rate_or_exponent": pow_fit["exponent"], "prefactor": pow_fit["prefactor"],
             "rmse_log": pow_fit["rmse_log"], "r2_log": pow_fit["r2_log"], "n_points": pow_fit["n_points"]},
        ]
    )
    table["better"] = table["rmse_log"] == table["rmse_log"].min()
    return table
