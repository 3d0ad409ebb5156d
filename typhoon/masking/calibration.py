"""Turn Typhoon's per-token-type saliency weights into masking probabilities with an exact budget.

Everything here is numpy float64 over the vocabulary (V ~ 30k): cheap enough to run after every
training step.

Calibration (``calibrate``)
---------------------------
1. A *preference* b_v >= 0 per token type, from the weights w of the seen types:
   - ``minmax`` (the paper's): min-max normalise w over seen types to z in [0, 1], then
     b = (1 - delta) + delta z, a band [1 - delta, 1] (delta = 0: uniform; delta = 1: from 0 to 1);
   - ``rank``: the same band, but z is the saliency *quantile* (average rank of ties, (r-1)/(n-1)),
     so outliers in w cannot squash everybody else to one end of the band;
   - ``softmax``: b = exp(z / tau) with z the standardised w (mean 0, sd 1 over seen types);
     ``delta`` is not used.
   Unseen types (weight never observed, NaN) get the neutral preference: the band midpoint
   1 - delta/2 (minmax, rank) or exp(0) = the preference of an average type (softmax); with
   ``unseen="top"`` (the paper's 2023 code) they get 1, the highest preference any method gives (there,
   min-max ran over the seen types and left the never-updated ones at the top of the band). A degenerate
   spread (one seen type, or all weights equal) gives every seen type the neutral value.
2. A scale beta so that the expected number of masked tokens equals the budget under the
   token-independence approximation: sum_v f_v pi_v = p sum_v f_v, with f_v the corpus counts of
   non-special tokens and pi_v = min(1, beta b_v). Probabilities are capped at 1 and beta is
   re-solved for the uncapped types (water-filling, :class:`BudgetSolver`), found by one sort,
   prefix sums and a ``searchsorted``, not an iterative loop. The budget then holds to float64
   rounding, and any other budget (per-row rates) is solved from the same sort in O(1).
   A budget larger than the corpus share of the types with a positive preference (possible with
   delta = 1, where the least salient types get b = 0, and a high per-row rate) caps all of those
   at 1 and spreads the rest evenly over the zero-preference types, so every budget in [0, 1] is met.
   The paper's 2023 code solved it otherwise (``budget="all_ids"``, :class:`ClosedFormBudget`):
   beta = p N / sum_v b_v c_v over the counts c_v of *every* training input id, [CLS] and [SEP]
   included, with no cap. Special tokens are never masked, so their share of the budget is lost and
   the realised rate over the maskable tokens falls below p.

Because the band is affine in z and beta > 0, pi is monotone (non-decreasing) in w for all three
methods; uniform p is recovered when delta = 0 or nothing has been seen yet.

Diagnostics
-----------
- ``kl_to_uniform``: the per-token Bernoulli KL, (1/N) sum_v f_v KL(Bernoulli(pi_v) || Bernoulli(p)),
  in nats per token: how much the mask of one token says beyond uniform masking at the same budget
  (the paper reports ~7e-4). It is not a divergence between q and u below.
- With q_v = f_v pi_v / sum f pi (the distribution of masked tokens over types) and u_v = f_v / sum f
  (what uniform masking gives): ``masked_distribution_kl`` = KL(q || u) and ``budget_moved`` = TV(q, u).
- ``spread``: min, max and max/min of pi.
"""

from __future__ import annotations

import numpy as np

from typhoon.masking.params import CALIBRATION, DELTA, TAU, UNSEEN, check_rates

TOP_PREFERENCE = 1.0  # the highest preference of every method: the band's top, softmax's exp(0) after its shift


def _seen_mask(weights: np.ndarray, seen: np.ndarray | None) -> np.ndarray:
    weights = np.asarray(weights, dtype=np.float64)
    if seen is None:
        return ~np.isnan(weights)
    seen = np.asarray(seen, dtype=bool)
    if seen.shape != weights.shape:
        raise ValueError(f"seen has shape {seen.shape}, weights {weights.shape}")
    return seen & ~np.isnan(weights)


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """0-based ranks, ties sharing their average rank (like scipy.stats.rankdata - 1)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    new_group = np.concatenate(([True], sorted_values[1:] != sorted_values[:-1]))
    group = np.cumsum(new_group) - 1
    starts = np.flatnonzero(new_group)
    ends = np.append(starts[1:], len(values)) - 1
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = ((starts + ends) / 2.0)[group]
    return ranks


def preference(weights: np.ndarray, method: str = "minmax", delta: float = 0.4, tau: float = 1.0,
               seen: np.ndarray | None = None, unseen: str = "neutral") -> np.ndarray:
    """Unnormalised masking preference b_v >= 0 (step 1 of the module docstring)."""
    # the values typhoon's parameters declare (typhoon.masking.params), checked as the strategy checks them
    CALIBRATION.check(method)
    delta, tau, unseen = DELTA.check(delta), TAU.check(tau), UNSEEN.check(unseen)
    pref = _seen_preference(weights, method, delta, tau, seen)
    if unseen == "top":
        pref[~_seen_mask(weights, seen)] = TOP_PREFERENCE
    return pref


def _seen_preference(weights: np.ndarray, method: str, delta: float, tau: float,
                     seen: np.ndarray | None) -> np.ndarray:
    """:func:`preference` with the unseen types at the neutral value."""
    weights = np.asarray(weights, dtype=np.float64)
    seen = _seen_mask(weights, seen)
    w = weights[seen]

    if method == "softmax":
        z = np.zeros_like(w)
        sd = w.std() if w.size else 0.0
        if sd > 0:
            z = (w - w.mean()) / sd
        top = max(float(z.max(initial=0.0)), 0.0)  # shift for overflow safety; beta absorbs it
        pref = np.full(weights.shape, np.exp(-top / tau))
        pref[seen] = np.exp((z - top) / tau)
        return pref

    z = np.full(w.shape, 0.5)
    if method == "minmax":
        lo, hi = (w.min(), w.max()) if w.size else (0.0, 0.0)
        if hi > lo:
            z = (w - lo) / (hi - lo)
    elif w.size > 1:  # rank
        ranks = _average_ranks(w)
        if ranks.max() > ranks.min():
            z = ranks / (w.size - 1)
    pref = np.full(weights.shape, 1.0 - delta / 2.0)  # the neutral band midpoint for unseen types
    pref[seen] = (1.0 - delta) + delta * z
    return pref


class _Budget:
    """What both budget rules share: the checked preference and counts, the types' rank by preference
    (descending, ties by index) and :meth:`solve` from the (k, beta, floor) of :meth:`coefficients`."""

    def __init__(self, pref: np.ndarray, counts: np.ndarray):
        pref = np.asarray(pref, dtype=np.float64)
        counts = np.asarray(counts, dtype=np.float64)
        if pref.shape != counts.shape or pref.ndim != 1:
            raise ValueError(f"preference {pref.shape} and counts {counts.shape} must be 1-D of the same length")
        if not np.isfinite(pref).all() or (pref < 0).any() or (counts < 0).any():
            raise ValueError("preferences must be finite and non-negative, counts non-negative")
        self.total = counts.sum()
        if self.total <= 0:
            raise ValueError("counts must have a positive total (corpus counts of non-special tokens)")
        self.pref, self.counts = pref, counts
        self.order = np.argsort(-pref, kind="stable")
        self.rank = np.empty(len(pref), dtype=np.int64)  # position of each type in the sorted order
        self.rank[self.order] = np.arange(len(pref))

    @staticmethod
    def _checked(ps) -> np.ndarray:
        return check_rates(np.atleast_1d(np.asarray(ps, dtype=np.float64)))

    def coefficients(self, ps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def solve(self, p: float) -> np.ndarray:
        """pi (V,) for the rate ``p`` in [0, 1] (checked by :meth:`coefficients`)."""
        (k,), (beta,), (floor,) = self.coefficients([p])
        return np.where(self.rank < k, 1.0, np.maximum(np.minimum(beta * self.pref, 1.0), floor))


class ClosedFormBudget(_Budget):
    """The paper's 2023 budget rule: beta = p N / sum_v b_v c_v, pi_v = min(1, beta b_v), where c_v counts
    *every* input id of the training text (special tokens included) and N = sum c. No water-filling: with
    the band's b <= 1, beta b stays below 1 for p <= 1 - delta, the regime of the paper (the 2023 code drew
    against beta b as it was). A budget of 1 masks everything and 0 nothing, as :class:`BudgetSolver`'s.
    Special tokens are never masked, so the expected rate over the maskable tokens is
    (p N - beta sum_special b c) / N_maskable < p: the specials' share of the budget is lost."""

    def __init__(self, pref: np.ndarray, counts: np.ndarray):
        super().__init__(pref, counts)
        self.mass = float((self.pref * self.counts).sum())
        if self.mass <= 0:
            raise ValueError("no preference on any counted token: beta = p N / sum b c is undefined")

    def coefficients(self, ps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(k, beta, floor) per budget: k = 0 (V for p = 1), beta = p N / sum b c, no floor."""
        ps = self._checked(ps)
        k = np.where(ps >= 1, len(self.pref), 0)
        return k, ps * self.total / self.mass, np.zeros_like(ps)


class BudgetSolver(_Budget):
    """Water-filling for one preference vector, solved for any budget p (mask schedules) in O(1).

    pi_v = min(1, beta b_v) with beta solving sum f_v pi_v = p sum f_v. Sort types by preference,
    descending (once, here). If the top k types are capped at 1, the rest need
    beta_k = (p F - C_k) / R_k  (C_k: corpus mass of the top k types, R_k: sum of f b after them);
    the answer is the smallest k for which the largest uncapped type stays at or below 1,
    beta_k b_(k) <= 1, i.e. p <= t_k = (C_k + R_k / b_(k)) / F. The thresholds t_k are
    non-decreasing in k, so k(p) is one ``searchsorted``: a budget costs no sort and no loop, and a
    whole batch of per-row budgets is solved at once (:meth:`coefficients`). Types with f_v = 0 do
    not affect the budget and still get min(1, beta b_v). p = 0 gives zeros and p = 1 ones.

    Beyond the last threshold (P / F, P the corpus mass of the types with b_v > 0) scaling cannot
    meet the budget: every type with b_v > 0 gets 1 and the types with b_v = 0, tied at the bottom,
    share the rest evenly, pi = (p F - P) / (F - P): a floor. In general
    pi_v = 1 if rank_v < k else max(min(1, beta b_v), floor), with floor = 0 below P / F.
    """

    def __init__(self, pref: np.ndarray, counts: np.ndarray):
        super().__init__(pref, counts)
        pref, counts = self.pref, self.counts
        sorted_pref, sorted_counts = pref[self.order], counts[self.order]
        self.capped_mass = np.concatenate(([0.0], np.cumsum(sorted_counts)[:-1]))  # C_k
        self.rest = (sorted_counts * sorted_pref)[::-1].cumsum()[::-1]  # R_k
        n_open = int((self.rest > 0).sum())  # R_k > 0 on a prefix (R is non-increasing), so b_(k) > 0 there
        threshold = (self.capped_mass[:n_open] + self.rest[:n_open] / sorted_pref[:n_open]) / self.total
        self.threshold = np.maximum.accumulate(threshold)  # non-decreasing in exact arithmetic; guard rounding
        positive = pref > 0
        self.n_positive = int(positive.sum())  # they rank first: ranks 0 .. n_positive - 1
        self.positive_mass = counts[positive].sum()  # P
        self.zero_mass = counts[~positive].sum()  # F - P, summed exactly rather than subtracted

    def coefficients(self, ps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(k, beta, floor) per budget in ``ps``: types of rank < k get 1, the others max(min(1, beta b_v), floor)."""
        ps = self._checked(ps)
        k = np.searchsorted(self.threshold, ps, side="left")
        interior = (ps > 0) & (ps < 1)
        overflow = interior & (k >= len(self.threshold))  # more budget than the positive preferences can hold
        safe_k = np.minimum(k, max(len(self.threshold) - 1, 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            beta = np.where(interior & ~overflow, (ps * self.total - self.capped_mass[safe_k]) / self.rest[safe_k], 0.0)
            spill = (ps * self.total - self.positive_mass) / self.zero_mass if self.zero_mass > 0 else np.ones_like(ps)
        floor = np.where(overflow, np.clip(spill, 0.0, 1.0), 0.0)
        k = np.where(overflow, self.n_positive, k)
        k = np.where(ps >= 1, len(self.pref), np.where(ps <= 0, 0, k))
        return k, beta, floor


def calibrate_budget(pref: np.ndarray, counts: np.ndarray, p: float) -> np.ndarray:
    """pi_v = min(1, beta b_v) with sum f_v pi_v = p sum f_v exactly (water-filling, :class:`BudgetSolver`)."""
    return BudgetSolver(pref, counts).solve(p)


def calibrate(weights: np.ndarray, counts: np.ndarray, p: float, method: str = "minmax", delta: float = 0.4,
              tau: float = 1.0, seen: np.ndarray | None = None) -> np.ndarray:
    """Masking probability pi_v of every token type (float64 (V,)); see the module docstring."""
    return calibrate_budget(preference(weights, method, delta, tau, seen), counts, p)


def budget_rule(budget: str, pref: np.ndarray, counts: np.ndarray, special_counts: np.ndarray | None) -> _Budget:
    """The solver of budget rule ``budget`` (typhoon.masking.params.BUDGET): water-filling over the non-special
    ``counts``, or the 2023 closed form over every input id (``counts + special_counts``)."""
    if budget == "non_special":
        return BudgetSolver(pref, counts)
    if special_counts is None:
        raise ValueError("budget='all_ids' counts the special tokens too: give their corpus counts (special_counts)")
    return ClosedFormBudget(pref, np.asarray(counts) + np.asarray(special_counts))


# --------------------------------------------------------------------------------------------------
# Diagnostics


def _restrict(probs, counts, seen):
    probs = np.asarray(probs, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    keep = np.ones(probs.shape, dtype=bool) if seen is None else np.asarray(seen, dtype=bool)
    probs, counts = probs[keep], counts[keep]
    if counts.sum() <= 0:
        raise ValueError("no token mass to measure (counts are all zero on the selected types)")
    return probs, counts


def _xlogy_ratio(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x log(x / y) with 0 log 0 = 0."""
    out = np.zeros_like(x)
    pos = x > 0
    out[pos] = x[pos] * np.log(x[pos] / y[pos])
    return out


def kl_to_uniform(probs: np.ndarray, counts: np.ndarray, p: float, seen: np.ndarray | None = None) -> float:
    """(1/N) sum_v f_v KL(Bernoulli(pi_v) || Bernoulli(p)), in nats per token (N = sum f_v).

    The per-token information the mask carries beyond uniform masking. ``seen`` restricts the sum
    (and N) to those types; by default all types count.
    """
    probs, counts = _restrict(probs, counts, seen)
    p_arr = np.full_like(probs, p)
    kl = _xlogy_ratio(probs, p_arr) + _xlogy_ratio(1 - probs, 1 - p_arr)
    return float((counts * kl).sum() / counts.sum())


def _masked_and_uniform(probs, counts, seen):
    probs, counts = _restrict(probs, counts, seen)
    q = counts * probs
    if q.sum() <= 0:
        raise ValueError("no masked token mass (all probabilities are zero on the selected types)")
    return q / q.sum(), counts / counts.sum()


def masked_distribution_kl(probs: np.ndarray, counts: np.ndarray, seen: np.ndarray | None = None) -> float:
    """KL(q || u) in nats: which token types get masked, versus uniform masking."""
    q, u = _masked_and_uniform(probs, counts, seen)
    return float(_xlogy_ratio(q, u).sum())


def budget_moved(probs: np.ndarray, counts: np.ndarray, seen: np.ndarray | None = None) -> float:
    """Total variation TV(q, u): the fraction of the masking budget moved between token types."""
    q, u = _masked_and_uniform(probs, counts, seen)
    return float(0.5 * np.abs(q - u).sum())


def realised_rate(probs: np.ndarray, counts: np.ndarray) -> float:
    """sum f pi / sum f: the expected share of the counted (maskable) tokens masked; p for the exact budget."""
    probs, counts = _restrict(probs, counts, None)
    return float((counts * probs).sum() / counts.sum())


def spread(probs: np.ndarray, seen: np.ndarray | None) -> dict[str, float]:
    """min, max and max/min of pi over the seen types (inf when the min is 0, nan if none seen)."""
    probs = np.asarray(probs, dtype=np.float64)
    values = probs if seen is None else probs[np.asarray(seen, dtype=bool)]
    if values.size == 0:
        return {"min": float("nan"), "max": float("nan"), "ratio": float("nan")}
    lo, hi = float(values.min()), float(values.max())
    return {"min": lo, "max": hi, "ratio": hi / lo if lo > 0 else float("inf")}
