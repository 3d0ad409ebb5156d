"""How far a masking state is from uniform masking, under every definition of "KL" a reader may mean.

The paper reports its budget-spread bottleneck as "about 7e-4 nats/token" without saying which divergence
(its code computes none). These are *definitions*, units of one and the same state, not causes of a
difference. With pi_v the masking probability of type v, f_v its count among the maskable tokens,
rbar = sum f pi / sum f the realised rate, q_v = f_v pi_v / sum f pi (which types the masked tokens are) and
u_v = f_v / sum f (what uniform masking gives):

- ``bernoulli``: (1/N) sum_v f_v KL(Bernoulli(pi_v) || Bernoulli(rbar)), nats per token: what one token's
  mask says beyond uniform masking at the same realised rate (the package's ``kl_to_uniform`` where the
  budget is exact, rbar = p);
- ``bernoulli_vs_budget``: the same against Bernoulli(p), the nominal budget: it adds what a budget that
  falls short of p (the 2023 rule's, ``budget="all_ids"``) costs;
- ``masked_distribution``: KL(q || u), nats per masked token;
- ``bernoulli_per_sequence``: ``bernoulli`` summed over a sequence's maskable tokens (the KL of a whole
  sequence's mask, its tokens being independent), nats per sequence;
- ``masked_distribution_per_sequence``: ``masked_distribution`` times the expected masked tokens of a
  sequence, nats per sequence;

each in nats and in bits (``_bits``: divided by ln 2). For small deviations, pi_v = rbar (1 + e_v):
``bernoulli`` ~ rbar / (1 - rbar) E_u[e^2] / 2 and ``masked_distribution`` ~ E_u[e^2] / 2, so
``masked_distribution`` ~ (1 - rbar) / rbar x ``bernoulli`` (x 5.67 at 0.15): the "kl_definition" row of
the KL-gap study was this factor, a unit.

:func:`max_band_kl` is the largest ``bernoulli`` (or ``masked_distribution``) that min-max calibration into
the band [1 - delta, 1] can reach at budget p, whatever the saliency: the ceiling a state is measured against.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from typhoon.masking import kl_to_uniform, masked_distribution_kl, realised_rate

#: The definitions, in the order tables show them: name -> (unit, what it is).
KL_DEFINITIONS: dict[str, tuple[str, str]] = {
    "bernoulli": ("nats/token", "per-token Bernoulli KL against uniform masking at the realised rate"),
    "bernoulli_vs_budget": ("nats/token", "per-token Bernoulli KL against uniform masking at the budget p"),
    "masked_distribution": ("nats/masked token", "KL(q || u) of the masked tokens' types"),
    "bernoulli_per_sequence": ("nats/sequence", "the per-token Bernoulli KL summed over a sequence"),
    "masked_distribution_per_sequence": ("nats/sequence", "KL(q || u) times a sequence's expected masked tokens"),
}


def kl_definitions(probs: np.ndarray, counts: np.ndarray, p: float, n_sequences: int) -> dict[str, float]:
    """Every definition of :data:`KL_DEFINITIONS`, in nats and in bits (``<name>_bits``), of the masking
    probabilities ``probs`` over the maskable-token ``counts`` of a text of ``n_sequences`` sequences at
    budget ``p``; plus ``realised_rate``."""
    if n_sequences < 1:
        raise ValueError(f"n_sequences must be at least 1, got {n_sequences}")
    counts = np.asarray(counts, dtype=np.float64)
    rate = realised_rate(probs, counts)
    tokens_per_sequence = counts.sum() / n_sequences
    nats = {"bernoulli": kl_to_uniform(probs, counts, rate),
            "bernoulli_vs_budget": kl_to_uniform(probs, counts, p),
            "masked_distribution": masked_distribution_kl(probs, counts)}
    nats["bernoulli_per_sequence"] = nats["bernoulli"] * tokens_per_sequence
    nats["masked_distribution_per_sequence"] = nats["masked_distribution"] * rate * tokens_per_sequence
    return {"realised_rate": rate, **nats, **{f"{name}_bits": value / math.log(2) for name, value in nats.items()}}


def rate_spread(probs: np.ndarray, counts: np.ndarray) -> dict[str, float]:
    """min, max and the frequency-weighted standard deviation of pi over the types that occur (f_v > 0)."""
    probs, counts = np.asarray(probs, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    occurs = counts > 0
    pi, f = probs[occurs], counts[occurs]
    mean = float((f * pi).sum() / f.sum())
    return {"pi_min": float(pi.min()), "pi_max": float(pi.max()),
            "pi_sd": float(math.sqrt((f * (pi - mean) ** 2).sum() / f.sum()))}


def _two_point_kl(share_top: float, p: float, delta: float, definition: str) -> float:
    """The KL of a text whose types sit at the band's two ends: a share ``share_top`` of the tokens at b = 1,
    the rest at 1 - delta, scaled to budget p."""
    probs = np.array([1.0, 1.0 - delta]) * p / (share_top + (1 - share_top) * (1 - delta))
    counts = np.array([share_top, 1.0 - share_top])
    if definition == "masked_distribution":
        return masked_distribution_kl(probs, counts)
    return kl_to_uniform(probs, counts, p)


def max_band_kl(p: float, delta: float, definition: str = "bernoulli") -> float:
    """The largest ``bernoulli`` or ``masked_distribution`` KL that calibration into the band [1 - delta, 1]
    at an exact budget p allows. For a given scale beta both KLs are convex in each pi_v, so the maximum puts
    every type at one end of the band; what is left is the share of tokens at the top, found here by a
    bounded scalar search. Probabilities stay below 1 for every share only where p <= 1 - delta (the paper's
    0.15 or 0.3 with delta 0.4); beyond, the water-filling caps would change the answer, and it is refused."""
    if definition not in ("bernoulli", "masked_distribution"):
        raise ValueError(f"definition must be 'bernoulli' or 'masked_distribution', got {definition!r}")
    if not (0 < p < 1 and 0 <= delta <= 1 and p <= 1 - delta):
        raise ValueError(f"need 0 < p <= 1 - delta and 0 <= delta <= 1, got p={p}, delta={delta}")
    if delta == 0:
        return 0.0
    found = optimize.minimize_scalar(lambda a: -_two_point_kl(a, p, delta, definition), bounds=(1e-9, 1 - 1e-9),
                                     method="bounded", options={"xatol": 1e-10})
    return float(-found.fun)
