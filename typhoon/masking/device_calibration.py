"""Typhoon's learning and calibration as torch operations on the device that trains (issue 50, build item 4).

The algorithm is the one of :mod:`typhoon.masking.saliency` (batch estimate, EMA) and
:mod:`typhoon.masking.calibration` (preference, budget); those numpy functions stay its reference and the
CPU's path. Here every step runs on vocabulary-sized tensors that stay where the model is, so that a
training step on a GPU needs no host transfer and no wait: nothing below reads a number back to the host
(no ``.item()``, no boolean indexing, no ``nonzero``, no slicing by a count that lives on the device).
That is why the shapes are fixed at V and "the seen types" are masks, not index lists:

- the batch estimate sums per type with ``index_add_`` into V-sized tensors instead of ``np.unique`` over the
  batch (whose size a GPU would have to report);
- the rank calibration finds each group of tied weights' first and last position by running maxima and
  minima over the sorted order instead of ``flatnonzero``;
- the water-filling thresholds past the last type with a positive remaining mass are +inf instead of cut off.

Numbers: the same float64 operations, elementwise identical to numpy's; the sums differ only in their order
(numpy's pairwise sums, CUDA's atomic adds: ``index_add_`` on a GPU adds in no fixed order unless
``torch.use_deterministic_algorithms(True)``), so the probabilities agree with the reference to float64
rounding (tests/test_device_calibration.py), not bit for bit. The CPU keeps the numpy path, whose bits are
the committed records'.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from typhoon.masking.calibration import TOP_PREFERENCE

F64 = torch.float64


def type_sums(input_ids: torch.Tensor, maskable: torch.Tensor, selected: torch.Tensor, saliency: torch.Tensor,
              vocab_size: int) -> torch.Tensor:
    """Float64 (4, V): per type, the sum of +s over its masked occurrences, their count, the sum of -s over its
    visible (maskable, not masked) ones, their count. Sums and counts add up over batches (and over the ranks of
    a data-parallel run: :mod:`typhoon.masking.across_ranks`); :func:`estimate_from_sums` turns them into the
    batch estimate."""
    ids = input_ids.reshape(-1)
    counted = maskable.reshape(-1)
    masked = selected.reshape(-1).bool() & counted
    visible = counted & ~masked
    s = saliency.reshape(-1).to(F64)
    zeros = torch.zeros(vocab_size, dtype=F64, device=ids.device)

    def side_sums(side: torch.Tensor, sign: float) -> tuple[torch.Tensor, torch.Tensor]:
        return (zeros.clone().index_add_(0, ids, torch.where(side, sign * s, 0.0)),
                zeros.clone().index_add_(0, ids, side.to(F64)))

    return torch.stack([*side_sums(masked, 1.0), *side_sums(visible, -1.0)])


def estimate_from_sums(sums: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(present (V,) bool, w_hat (V,) float64) from :func:`type_sums`' rows: the mean of each side (a side with no
    occurrence adds 0), the types with an occurrence on either."""
    on_masked, n_masked, on_visible, n_visible = sums

    def mean(total: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return torch.where(count > 0, total / count.clamp(min=1.0), 0.0)

    return (n_masked + n_visible) > 0, mean(on_masked, n_masked) + mean(on_visible, n_visible)


def batch_estimate(input_ids: torch.Tensor, maskable: torch.Tensor, selected: torch.Tensor, saliency: torch.Tensor,
                   vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(present (V,) bool, w_hat (V,) float64): the types at the batch's maskable positions and their estimate
    (mean of +s over their masked occurrences plus mean of -s over their visible ones; a side with none adds 0),
    as :func:`typhoon.masking.saliency.batch_weight_estimate`, over the whole vocabulary."""
    return estimate_from_sums(type_sums(input_ids, maskable, selected, saliency, vocab_size))


def ema_update(weights: torch.Tensor, seen: torch.Tensor, present: torch.Tensor, estimate: torch.Tensor, lam: float,
               first_weight: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """w <- (1 - lam) w + lam w_hat on the ``present`` types, first_weight w_hat at a first sighting
    (:func:`typhoon.masking.saliency.ema_update`); new tensors."""
    again = (1.0 - lam) * weights + lam * estimate
    weights = torch.where(present, torch.where(seen, again, first_weight * estimate), weights)
    return weights, seen | present


def preference(weights: torch.Tensor, seen: torch.Tensor, method: str, delta: float, tau: float,
               unseen: str) -> torch.Tensor:
    """b_v >= 0 per type (:func:`typhoon.masking.calibration.preference`, its parameters already checked)."""
    seen = seen & ~torch.isnan(weights)
    if method == "softmax":
        pref = _softmax_preference(weights, seen, tau)
    else:
        z = _minmax_position(weights, seen) if method == "minmax" else _rank_position(weights, seen)
        pref = torch.where(seen, (1.0 - delta) + delta * z, 1.0 - delta / 2.0)
    return torch.where(seen, pref, TOP_PREFERENCE) if unseen == "top" else pref


def _minmax_position(weights: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    lo = torch.where(seen, weights, torch.inf).min()
    hi = torch.where(seen, weights, -torch.inf).max()
    spread = hi > lo  # false with nothing or one value seen: every seen type at the midpoint
    return torch.where(spread, (weights - lo) / torch.where(spread, hi - lo, 1.0), 0.5)


def _rank_position(weights: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """(average rank among the seen types) / (n_seen - 1), ties sharing their average rank; 0.5 if all tie."""
    n = weights.numel()
    sorted_w, order = torch.sort(torch.where(seen, weights, torch.inf), stable=True)  # the unseen last
    index = torch.arange(n, device=weights.device)
    starts_group = torch.ones(n, dtype=torch.bool, device=weights.device)
    starts_group[1:] = sorted_w[1:] != sorted_w[:-1]
    ends_group = torch.ones_like(starts_group)
    ends_group[:-1] = starts_group[1:]
    first = torch.cummax(torch.where(starts_group, index, 0), 0).values
    last = torch.cummin(torch.where(ends_group, index, n).flip(0), 0).values.flip(0)
    ranks = torch.empty(n, dtype=F64, device=weights.device)
    ranks[order] = (first + last).to(F64) / 2.0
    n_seen = seen.sum()
    top = torch.where(seen, ranks, -1.0).max()
    bottom = torch.where(seen, ranks, torch.inf).min()
    spread = (n_seen > 1) & (top > bottom)
    return torch.where(spread, ranks / torch.where(spread, n_seen - 1, 1).to(F64), 0.5)


def _softmax_preference(weights: torch.Tensor, seen: torch.Tensor, tau: float) -> torch.Tensor:
    n_seen = seen.sum().to(F64)
    w = torch.where(seen, weights, 0.0)
    mean = w.sum() / n_seen.clamp(min=1.0)
    sd = torch.sqrt(torch.where(seen, (weights - mean) ** 2, 0.0).sum() / n_seen.clamp(min=1.0))
    z = torch.where(sd > 0, (weights - mean) / torch.where(sd > 0, sd, 1.0), 0.0)
    top = torch.where(seen, z, 0.0).max().clamp(min=0.0)  # shift for overflow safety; beta absorbs it
    return torch.where(seen, torch.exp((z - top) / tau), torch.exp(-top / tau))


@dataclass
class DeviceBudget:
    """A budget rule solved on the device for one preference vector: :meth:`coefficients` gives (k, beta, floor)
    per row budget, as :class:`typhoon.masking.calibration.BudgetSolver` (``closed_form`` False) or
    :class:`~typhoon.masking.calibration.ClosedFormBudget` (True) do, and ``rank`` each type's place in the
    descending order of preference. Everything stays on ``pref``'s device."""

    pref: torch.Tensor
    rank: torch.Tensor
    closed_form: bool
    total: torch.Tensor
    mass: torch.Tensor | None = None  # closed form: sum b c
    threshold: torch.Tensor | None = None  # water-filling: t_k, +inf past the open prefix
    capped_mass: torch.Tensor | None = None
    rest: torch.Tensor | None = None
    n_open: torch.Tensor | None = None
    n_positive: torch.Tensor | None = None
    positive_mass: torch.Tensor | None = None
    zero_mass: torch.Tensor | None = None

    @classmethod
    def solve_for(cls, pref: torch.Tensor, counts: torch.Tensor, closed_form: bool) -> DeviceBudget:
        counts = counts.to(F64)
        order = torch.argsort(-pref, stable=True)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(len(pref), device=pref.device)
        total = counts.sum()
        if closed_form:
            return cls(pref, rank, True, total, mass=(pref * counts).sum())
        sorted_pref, sorted_counts = pref[order], counts[order]
        capped_mass = torch.cat([sorted_counts.new_zeros(1), torch.cumsum(sorted_counts, 0)[:-1]])
        rest = torch.cumsum((sorted_counts * sorted_pref).flip(0), 0).flip(0)
        open_ = rest > 0  # a prefix: R_k is non-increasing
        threshold = torch.where(open_, (capped_mass + rest / torch.where(open_, sorted_pref, 1.0)) / total, torch.inf)
        positive = pref > 0
        return cls(pref, rank, False, total, threshold=torch.cummax(threshold, 0).values, capped_mass=capped_mass,
                   rest=rest, n_open=open_.sum(), n_positive=positive.sum(),
                   positive_mass=torch.where(positive, counts, 0.0).sum(),
                   zero_mass=torch.where(positive, 0.0, counts).sum())

    def coefficients(self, ps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(k, beta, floor), each (R,), for the row budgets ``ps`` (float64, on the device, in [0, 1])."""
        n = len(self.pref)
        if self.closed_form:
            k = torch.where(ps >= 1, n, 0)
            return k, ps * self.total / self.mass, torch.zeros_like(ps)
        k = torch.searchsorted(self.threshold, ps, side="left")
        interior = (ps > 0) & (ps < 1)
        overflow = interior & (k >= self.n_open)  # more budget than the positive preferences can hold
        safe_k = torch.minimum(k, (self.n_open - 1).clamp(min=0))
        beta = torch.where(interior & ~overflow,
                           (ps * self.total - self.capped_mass[safe_k]) / self.rest[safe_k], 0.0)
        spill = torch.where(self.zero_mass > 0, (ps * self.total - self.positive_mass) / self.zero_mass, 1.0)
        floor = torch.where(overflow, spill.clamp(0.0, 1.0), 0.0)
        k = torch.where(overflow, self.n_positive, k)
        k = torch.where(ps >= 1, n, torch.where(ps <= 0, 0, k))
        return k, beta, floor

    def probs(self, p: float) -> torch.Tensor:
        """pi (V,) at one budget ``p``."""
        k, beta, floor = self.coefficients(torch.full((1,), p, dtype=F64, device=self.pref.device))
        return torch.where(self.rank < k, 1.0, torch.maximum((beta * self.pref).clamp(max=1.0), floor))

    def token_probs(self, input_ids: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
        """Float64 (B, L): pi of every token for its row's budget ``rates`` (B,)."""
        k, beta, floor = self.coefficients(rates.to(F64))
        token_pref = self.pref[input_ids]
        token_rank = self.rank[input_ids]
        return torch.where(token_rank < k[:, None], 1.0,
                           torch.maximum((beta[:, None] * token_pref).clamp(max=1.0), floor[:, None]))
