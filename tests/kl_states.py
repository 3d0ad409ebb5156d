"""Small hand-made Typhoon states of five token types for the kl-original addendum tests: the corpus counts
(type 0 never seen), a state drawn around p = 0.3, and the Bernoulli KL of a state computed by hand from its
definition (sum over types of f_v KL(Bernoulli(pi_v) || Bernoulli(r)) / sum f, r the token-weighted mean rate),
the reference the package's KL is checked against."""

from __future__ import annotations

import math

import numpy as np

COUNTS = np.array([0, 50, 30, 15, 5])
KEYS = [(task, seed) for task in ("mrpc", "cola") for seed in (0, 1, 2)]


def bernoulli_kl_by_hand(probs) -> float:
    f = COUNTS.astype(float)
    rbar = (f * probs).sum() / f.sum()
    return sum(c * (pi * math.log(pi / rbar) + (1 - pi) * math.log((1 - pi) / (1 - rbar)))
               for pi, c in zip(probs, f, strict=True) if c) / f.sum()


def drawn_state(rng, scale: float) -> np.ndarray:
    """Per-type probabilities spread by ``scale`` around 0.3, type 0 at 0, scaled to a token-weighted rate of 0.3."""
    probs = 0.3 * (1 + scale * rng.normal(size=COUNTS.size))
    probs[0] = 0.0
    return probs * 0.3 / ((COUNTS * probs).sum() / COUNTS.sum())
