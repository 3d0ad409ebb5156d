"""Experiment (c): residual code-vs-prose uncertainty given ``v`` visible characters of real text.

Code is the Python standard library's top-level modules; prose is CoLA's sentences, read through
``typhoon.data.glue_files.load_glue``. A byte-unigram Naive-Bayes classifier, recalibrated per visible count,
gives the posterior ``w = P̂(code | x_S)`` whose expected variance is the residual mode uncertainty.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from typhoon.data import load_glue


def load_code_texts(stdlib_dir: str | os.PathLike | None = None, max_files: int | None = None) -> list[str]:
    """The top-level ``*.py`` files of the Python standard library, sorted by name."""
    root = Path(stdlib_dir) if stdlib_dir is not None else Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py"))[:max_files]
    if not files:
        raise FileNotFoundError(f"no *.py files under {root}")
    return [f.read_text(encoding="utf-8", errors="replace") for f in files]


def load_prose_sentences(data_dir: str | os.PathLike | None = None) -> list[str]:
    """CoLA train + dev sentences, from wherever ``typhoon.data.glue_files.load_glue`` finds them (``data_dir``
    if given)."""
    splits = load_glue("cola", data_dir)
    return list(splits["train"]["sentence"]) + list(splits["validation"]["sentence"])


def text_bytes(texts: Sequence[str], collapse_whitespace: bool = True) -> np.ndarray:
    """UTF-8 bytes of the texts joined by single spaces (whitespace runs collapsed if asked), uint8."""
    joined = " ".join(" ".join(t.split()) if collapse_whitespace else t for t in texts)
    return np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)


def random_windows(stream: np.ndarray, length: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` windows of ``length`` consecutive bytes at uniform offsets, shape ``(count, length)``."""
    if stream.size < length:
        raise ValueError(f"text of {stream.size} bytes is shorter than the window length {length}")
    starts = rng.integers(0, stream.size - length + 1, size=count)
    return stream[starts[:, None] + np.arange(length)]


def unigram_log_probs(stream: np.ndarray, smoothing: float = 0.5) -> np.ndarray:
    """Add-``smoothing`` byte unigram log-probabilities, shape ``(256,)``."""
    counts = np.bincount(stream, minlength=256).astype(float) + smoothing
    return np.log(counts / counts.sum())


def cumulative_log_odds(windows: np.ndarray, byte_log_odds: np.ndarray, orders: int,
                        rng: np.random.Generator) -> np.ndarray:
    """Naive-Bayes log odds after revealing ``v = 0..L`` characters in uniformly random orders.

    Returns ``(len(windows) * orders, L + 1)``: row ``(snippet, order)``, column ``v`` sums the byte log
    odds of the first ``v`` revealed positions, so column ``v`` is the evidence of a uniform visible set
    of size ``v``.
    """
    per_char = np.repeat(byte_log_odds[windows], orders, axis=0)
    order = rng.random(per_char.shape).argsort(axis=1)
    revealed = np.take_along_axis(per_char, order, axis=1)
    return np.concatenate([np.zeros((per_char.shape[0], 1)), np.cumsum(revealed, axis=1)], axis=1)


def fit_platt(log_odds: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Logistic recalibration ``P(code | z) = σ(a + b z)`` by maximum likelihood (L-BFGS)."""
    sign = 2.0 * labels - 1.0

    def loss_and_grad(params):
        a, b = params
        margin = sign * (a + b * log_odds)
        loss = -np.mean(log_expit(margin))
        weight = -sign * expit(-margin)
        return loss, np.array([np.mean(weight), np.mean(weight * log_odds)])

    result = minimize(loss_and_grad, x0=np.array([0.0, 1.0]), jac=True, method="L-BFGS-B")
    return float(result.x[0]), float(result.x[1])


def text_mode_uncertainty(
    code_texts: Sequence[str],
    prose_sentences: Sequence[str],
    snippet_length: int = 64,
    n_snippets: int = 1000,
    orders: int = 4,
    seed: int = 0,
    collapse_whitespace: bool = True,
) -> pd.DataFrame:
    """Experiment (c): residual code-vs-prose uncertainty given ``v`` visible characters of real text.

    Files (code) and sentences (prose) are shuffled and split into thirds: *train* (byte unigram
    Naive Bayes per mode), *calibration* (a logistic recalibration of the log odds per ``v``) and *test*.
    ``n_snippets`` windows of ``snippet_length`` bytes per mode and split are revealed ``orders`` times
    in random order. With ``w = P̂(code | x_S)``, the table has per ``v``:

    * ``posterior_variance = E[w(1-w)]`` (the residual mode uncertainty, mode prior ½),
    * ``brier = E[(1{code} - w)²]``, an unbiased held-out estimate of the MSE of ``w``, which upper-bounds
      the true conditional MMSE (for a calibrated ``w`` the two columns agree in expectation),
    * ``accuracy`` of ``w > ½``.
    """
    rng = np.random.default_rng(seed)
    splits = {}
    for mode, texts in (("code", list(code_texts)), ("prose", list(prose_sentences))):
        parts = np.array_split(rng.permutation(len(texts)), 3)
        splits[mode] = [text_bytes([texts[i] for i in part], collapse_whitespace) for part in parts]
    log_odds_per_byte = unigram_log_probs(splits["code"][0]) - unigram_log_probs(splits["prose"][0])

    def evidence(split: int) -> tuple[np.ndarray, np.ndarray]:
        z, y = [], []
        for label, mode in ((1.0, "code"), (0.0, "prose")):
            windows = random_windows(splits[mode][split], snippet_length, n_snippets, rng)
            z.append(cumulative_log_odds(windows, log_odds_per_byte, orders, rng))
            y.append(np.full(n_snippets * orders, label))
        return np.concatenate(z), np.concatenate(y)

    z_cal, y_cal = evidence(1)
    z_test, y_test = evidence(2)
    rows = []
    for v in range(snippet_length + 1):
        a, b = fit_platt(z_cal[:, v], y_cal)
        w = expit(a + b * z_test[:, v])
        rows.append({
            "visible": v,
            "posterior_variance": float(np.mean(w * (1 - w))),
            "brier": float(np.mean((y_test - w) ** 2)),
            "accuracy": float(np.mean((w > 0.5) == (y_test == 1))),
            "n_test": int(y_test.size),
        })
    return pd.DataFrame(rows)
