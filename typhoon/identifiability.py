r"""Mode blindness of masked prediction, and how low-visibility mask schedules cure it.

Masked prediction does not fit the joint law ``p`` of a sequence ``x ∈ [K]^N``; it fits the family of
conditionals ``p(x_i | x_S)`` that the mask schedule asks about. This module makes that precise for
mixtures of well-separated "modes" (think code vs prose) and checks it exactly, by enumeration.

Setting
-------
* A **schedule** is a law ``π`` on the number ``v ∈ {0, …, N-1}`` of visible coordinates. Given ``v``,
  the visible set ``S`` is uniform among the sets of size ``v`` and the predicted coordinate ``i`` is
  uniform among the ``N - v`` masked ones.
* The **masked-prediction risk** of a model law ``q`` is
  ``R_π(q) = E_{v~π} E_{S,|S|=v} E_{i∉S} E_p[-log q(x_i | x_S)]`` and its **masked discrepancy** (excess
  risk) is ``D_π(q) = R_π(q) - R_π(p) = Σ_v π_v d_v(q)`` with
  ``d_v(q) = E_{S,i} E_p KL(p(x_i|x_S) ‖ q(x_i|x_S))``.
* The truth is a mixture ``p = Σ_m α_m p_m`` of modes (each a product or a Markov law), and the
  **reweighted family** is ``q_λ = Σ_m λ_m p_m``: same within-mode laws, other mode weights.
  Write ``w(x_S) = p(m | x_S)`` and ``u(x_S) = q_λ(m | x_S) ∝ (λ_m / α_m) w_m(x_S)`` for the two
  posteriors over modes and ``θ = log(λ / α)`` (entrywise).

Exact identities (checked to 1e-10 in the tests)
------------------------------------------------
1. *Chain rule.* For any ``q``: ``d_v(q) = k(v+1) - k(v)`` with ``k(v) = E_{|T|=v} KL(p(x_T) ‖ q(x_T))``,
   because a uniform ``S`` of size ``v`` plus a uniform ``i ∉ S`` is a uniform ``T`` of size ``v+1``.
   Hence the uniform masking ratio (masked-diffusion) schedule has ``D_π(q) = KL(p ‖ q) / N``.
2. *Mode form.* For ``q = q_λ``, ``k(v) = KL(α ‖ λ) - g(v)`` where
   ``g(v) = E_{|S|=v} E_p KL(w(x_S) ‖ u(x_S))`` is the information about the mode weights that is still
   available after seeing ``v`` coordinates. So, exactly,

       D_π(q_λ) = Σ_v π_v [g(v) - g(v+1)],      g(0) = KL(α ‖ λ),  g(N) = KL(α‖λ) - KL(p ‖ q_λ).

   ``check_factorisation`` computes the left side from the predictive conditionals and the right side
   from the mode posteriors only, two independent routes through the numbers.
3. *Two modes, closed form.* With posterior ``w = p(m=0 | x_S)`` and odds ratio
   ``r = (λ_0/λ_1) / (α_0/α_1)``, ``KL(w ‖ u) = φ_r(w) = w log(w + (1-w)/r) + (1-w) log(1 + w(r-1))``,
   and ``φ_r(w) ≤ (r + 1/r - 2) · w(1-w)`` (from ``log(1+a) ≤ a``).

The factorisation (second order, checked as a ratio → 1 when λ → α)
-------------------------------------------------------------------
Let ``C(v) = E_{|S|=v} E_p[Cov(e_m | x_S)] = E[diag(w) - w wᵀ]`` be the conditional MMSE matrix of the
one-hot mode indicator given ``v`` visible coordinates (the *residual mode uncertainty*; for two modes
its scalar version is ``mmse(v) = E[w(1-w)]``). ``C(v)`` is non-increasing in ``v``. Then

    D_π(q_λ) = ½ θᵀ M_π θ + O(|θ|³),      M_π = Σ_v π_v [C(v) - C(v+1)],

which for two modes reads ``D_π(q_λ) = ½ (log r)² · Σ_v π_v [mmse(v) - mmse(v+1)] + O(|log r|³)``:
an information term in the mode weights (``½ (log r)² ≈ KL(α‖λ) / (α_0 α_1)``) times the
schedule-averaged drop of residual mode uncertainty. Exactly (all orders, two modes),

    D_π(q_λ) ≤ Σ_v π_v g(v) ≤ (r + 1/r - 2) Σ_v π_v mmse(v) ≤ (r + 1/r - 2) mmse(v_min),

and for product modes ``mmse(v) ≤ ½ sqrt(α_0 α_1) · E_{|S|=v} Π_{j∈S} BC_j`` (``BC_j`` the Bhattacharyya
coefficient of the two modes at coordinate ``j``), so a schedule whose smallest visible set is ``v_min``
sees a macroscopic reweighting (``TV(p, q_λ) = |α_0 - λ_0| · TV(p_0, p_1)``) only through a term that is
exponentially small in ``v_min`` ("mode blindness"); for identically distributed coordinates the rate is
the Chernoff information of the two per-coordinate laws (``chernoff_information``).

Restoring sensitivity
---------------------
Every term of ``D_π`` is ≥ 0, so for *any* model ``q`` the full-mask mass gives
``D_π(q) ≥ π_0 · mean_i KL(p(x_i) ‖ q(x_i))``. When the modes have disjoint supports per coordinate
(``A_{m,i}``), ``|α_m - q(x_i ∈ A_{m,i})| ≤ TV(p(x_i), q(x_i))`` and Pinsker give

    max_m |α_m - λ̂_m| ≤ sqrt(D_π(q) / (2 π_0)),      λ̂_m = mean_i q(x_i ∈ A_{m,i}),

the mode weight read from the model's fully-masked prediction. Mass ``π_s`` on visible size ``s`` gives,
to second order, ``|θ| ≲ sqrt(2 D / (π_s [mmse(s) - mmse(s+1)]))``.

Experiments (tidy DataFrames)
-----------------------------
(a) ``discrepancy_vs_min_visible``: ``D_π(q_λ)`` against ``v_min`` for blind schedules; exponential decay
    (``fit_exponential_decay``) while ``TV(p, q_λ)`` stays put.
(b) ``train_mode_weight_recovery``: a mixture-of-products masked predictor trained by gradient descent
    under a blind schedule and under ``with_full_mask(blind, π_0)``; the recovered mode weight misses
    under the blind one, and its error falls like ``π_0^{-1/2}`` (``fit_power_law``).
(c) ``text_mode_uncertainty``: residual code-vs-prose uncertainty given ``v`` visible characters of real
    text (Python standard library vs CoLA sentences), with exponential and power-law fits compared
    (``compare_decay_fits``).
"""

from __future__ import annotations

import math
import numbers
import os
import sysconfig
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, log_expit, rel_entr

#: Largest number of sequences ``K**N`` that exact enumeration accepts.
MAX_ENUMERATED_SEQUENCES = 1 << 17

# ==================================================================================================
# Mask schedules
# ==================================================================================================


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_length(length: int) -> None:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"sequence length must be a positive integer, got {length!r}")


class Schedule:
    """A law on the number ``v`` of visible coordinates (given ``v``, the visible set is uniform).

    Subclasses implement ``visible_count_pmf(N)``: an array of length ``N + 1`` over ``v = 0..N`` that
    sums to 1 and has no mass at ``v = N`` (at least one coordinate is always masked).
    """

    def visible_count_pmf(self, length: int) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class FixedVisibleCount(Schedule):
    """Exactly ``visible`` coordinates are visible (``visible = 0``: the fully-masked context)."""

    visible: int

    def __post_init__(self):
        if isinstance(self.visible, bool) or not isinstance(self.visible, (int, np.integer)) or self.visible < 0:
            raise ValueError(f"visible must be a non-negative integer, got visible={self.visible!r}")

    def visible_count_pmf(self, length: int) -> np.ndarray:
        _check_length(length)
        if self.visible > length - 1:
            raise ValueError(f"visible={self.visible} leaves nothing to predict in a sequence of length {length}")
        pmf = np.zeros(length + 1)
        pmf[self.visible] = 1.0
        return pmf


@dataclass(frozen=True)
class FixedMaskingRatio(Schedule):
    """BERT style: exactly ``round(ratio * N)`` coordinates are masked (at least one)."""

    ratio: float

    def __post_init__(self):
        if not (_is_real(self.ratio) and 0.0 < self.ratio <= 1.0):
            raise ValueError(f"masking ratio must be in (0, 1], got ratio={self.ratio!r}")

    def visible_count_pmf(self, length: int) -> np.ndarray:
        _check_length(length)
        masked = min(length, max(1, math.floor(self.ratio * length + 0.5)))
        pmf = np.zeros(length + 1)
        pmf[length - masked] = 1.0
        return pmf


@dataclass(frozen=True)
class UniformMaskingRatio(Schedule):
    """Masked-diffusion style: a ratio ``t ~ U[low, high]``, and ``ceil(t N)`` coordinates masked.

    With ``low = 0, high = 1`` the masked count is uniform on ``1..N``, which is also the law of the
    masked count of "mask each coordinate with probability ``t ~ U[0, 1]``" given at least one masked.
    ``high < 1`` gives a *blind* schedule whose smallest visible set is ``N - ceil(high N)``.
    """

    low: float = 0.0
    high: float = 1.0

    def __post_init__(self):
        if not (_is_real(self.low) and _is_real(self.high) and 0.0 <= self.low < self.high <= 1.0):
            raise ValueError(f"need 0 <= low < high <= 1, got low={self.low!r}, high={self.high!r}")

    def visible_count_pmf(self, length: int) -> np.ndarray:
        _check_length(length)
        pmf = np.zeros(length + 1)
        for masked in range(1, length + 1):
            # t with ceil(t N) = masked is the interval ((masked - 1) / N, masked / N]
            overlap = min(self.high, masked / length) - max(self.low, (masked - 1) / length)
            pmf[length - masked] = max(overlap, 0.0) / (self.high - self.low)
        return pmf / pmf.sum()


@dataclass(frozen=True)
class MixtureSchedule(Schedule):
    """Draw a component schedule with probability ``weights[j]``, then the visible count from it."""

    components: tuple[Schedule, ...]
    weights: tuple[float, ...]

    def __post_init__(self):
        if len(self.components) == 0 or len(self.components) != len(self.weights):
            raise ValueError(
                f"need as many weights as components (>= 1), got {len(self.components)} components "
                f"and weights={self.weights!r}"
            )
        weights = np.asarray(self.weights, dtype=float)
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or abs(weights.sum() - 1.0) > 1e-9:
            raise ValueError(f"mixture weights must be >= 0 and sum to 1, got weights={self.weights!r}")

    def visible_count_pmf(self, length: int) -> np.ndarray:
        pmf = sum(w * c.visible_count_pmf(length) for c, w in zip(self.components, self.weights, strict=True))
        return pmf / pmf.sum()


def with_full_mask(schedule: Schedule, pi0: float) -> MixtureSchedule:
    """``schedule`` with probability ``1 - pi0``, the fully-masked context (``v = 0``) with ``pi0``."""
    if not (_is_real(pi0) and 0.0 <= pi0 < 1.0):
        raise ValueError(f"full-mask mass must be in [0, 1), got pi0={pi0!r}")
    return MixtureSchedule((FixedVisibleCount(0), schedule), (float(pi0), 1.0 - float(pi0)))


def min_visible_count(schedule: Schedule, length: int) -> int:
    """The smallest visible count ``v_min`` with positive probability."""
    return int(np.flatnonzero(schedule.visible_count_pmf(length) > 0)[0])


# ==================================================================================================
# Mixture laws over [K]^N
# ==================================================================================================


def _check_distribution(probs: np.ndarray, what: str, axis: int = -1) -> None:
    if not np.all(np.isfinite(probs)) or np.any(probs < 0):
        raise ValueError(f"{what} must be finite and >= 0")
    sums = probs.sum(axis=axis)
    if np.any(np.abs(sums - 1.0) > 1e-9):
        raise ValueError(f"{what} must sum to 1 along the symbol axis, got sums {np.round(sums, 6)}")


@dataclass(frozen=True, eq=False)
class ProductMode:
    """Independent coordinates: ``p(x) = Π_i probs[i, x_i]``; ``probs`` has shape ``(N, K)``."""

    probs: np.ndarray

    def __post_init__(self):
        probs = np.array(self.probs, dtype=float)
        if probs.ndim != 2:
            raise ValueError(f"probs must have shape (N, K), got shape {probs.shape}")
        _check_distribution(probs, "ProductMode.probs rows")
        probs.setflags(write=False)
        object.__setattr__(self, "probs", probs)

    @property
    def length(self) -> int:
        return self.probs.shape[0]

    @property
    def num_symbols(self) -> int:
        return self.probs.shape[1]

    def joint(self) -> np.ndarray:
        """The probability of every sequence, as an array of shape ``(K,) * N``."""
        table = np.ones(())
        for row in self.probs:
            table = table[..., None] * row
        return table

    def position_marginals(self) -> np.ndarray:
        """``p(x_i = k)`` as an ``(N, K)`` array."""
        return self.probs.copy()

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` sequences, shape ``(n, N)``, by inverse-CDF sampling per coordinate."""
        cdf = np.cumsum(self.probs, axis=1)
        draws = rng.random((n, self.length, 1))
        return np.minimum((draws >= cdf[None]).sum(axis=2), self.num_symbols - 1)


@dataclass(frozen=True, eq=False)
class MarkovMode:
    """A homogeneous Markov chain: ``p(x) = initial[x_0] Π_t transition[x_{t-1}, x_t]``."""

    initial: np.ndarray
    transition: np.ndarray
    length: int

    def __post_init__(self):
        initial = np.array(self.initial, dtype=float)
        transition = np.array(self.transition, dtype=float)
        k = initial.shape[0] if initial.ndim == 1 else -1
        if initial.ndim != 1 or transition.shape != (k, k):
            raise ValueError(f"need initial (K,) and transition (K, K), got {initial.shape} and {transition.shape}")
        _check_distribution(initial, "MarkovMode.initial")
        _check_distribution(transition, "MarkovMode.transition rows")
        _check_length(self.length)
        for name, value in (("initial", initial), ("transition", transition)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def num_symbols(self) -> int:
        return self.initial.shape[0]

    def joint(self) -> np.ndarray:
        table = self.initial
        for _ in range(self.length - 1):
            table = table[..., None] * self.transition  # broadcasts over the earlier coordinates
        return table

    def position_marginals(self) -> np.ndarray:
        rows = [self.initial]
        for _ in range(self.length - 1):
            rows.append(rows[-1] @ self.transition)
        return np.stack(rows)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.empty((n, self.length), dtype=np.int64)
        out[:, 0] = np.minimum((rng.random((n, 1)) >= np.cumsum(self.initial)).sum(1), self.num_symbols - 1)
        cdf = np.cumsum(self.transition, axis=1)
        for t in range(1, self.length):
            out[:, t] = np.minimum((rng.random((n, 1)) >= cdf[out[:, t - 1]]).sum(1), self.num_symbols - 1)
        return out


Mode = ProductMode | MarkovMode


@dataclass(frozen=True, eq=False)
class MixtureLaw:
    """``p = Σ_m weights[m] · modes[m]`` over ``[K]^N``, with exact enumeration helpers.

    Enumeration keeps the marginal of every mode on every subset of coordinates, about
    ``M (K+1)^N`` numbers, so it is meant for ``K**N`` up to a few times 10^4.
    """

    modes: tuple[Mode, ...]
    weights: np.ndarray

    def __post_init__(self):
        modes = tuple(self.modes)
        if len(modes) < 2:
            raise ValueError(f"a mixture needs at least two modes, got {len(modes)}")
        shapes = {(m.length, m.num_symbols) for m in modes}
        if len(shapes) != 1:
            raise ValueError(f"all modes must share (length, num_symbols), got {sorted(shapes)}")
        weights = np.array(self.weights, dtype=float)
        if weights.shape != (len(modes),) or not np.all(weights > 0) or abs(weights.sum() - 1) > 1e-9:
            raise ValueError(f"mode weights must be {len(modes)} positive numbers summing to 1, got {self.weights!r}")
        weights = weights / weights.sum()
        weights.setflags(write=False)
        object.__setattr__(self, "modes", modes)
        object.__setattr__(self, "weights", weights)

    @property
    def length(self) -> int:
        return self.modes[0].length

    @property
    def num_symbols(self) -> int:
        return self.modes[0].num_symbols

    @property
    def num_modes(self) -> int:
        return len(self.modes)

    def reweighted(self, weights: Sequence[float]) -> MixtureLaw:
        """``q_λ``: the same modes with other weights. It shares this law's enumeration cache."""
        other = MixtureLaw(self.modes, np.asarray(weights, dtype=float))
        if "mode_subset_marginals" in self.__dict__:
            other.__dict__["mode_subset_marginals"] = self.mode_subset_marginals
        return other

    def _check_enumerable(self) -> None:
        size = self.num_symbols**self.length
        if size > MAX_ENUMERATED_SEQUENCES:
            raise ValueError(
                f"exact enumeration of K**N = {self.num_symbols}**{self.length} = {size} sequences exceeds "
                f"MAX_ENUMERATED_SEQUENCES = {MAX_ENUMERATED_SEQUENCES}"
            )

    def mode_joints(self) -> np.ndarray:
        """The joint table of every mode, shape ``(M,) + (K,) * N``."""
        self._check_enumerable()
        return np.stack([m.joint() for m in self.modes])

    def joint(self) -> np.ndarray:
        """``p(x)`` for every sequence, shape ``(K,) * N``."""
        return np.tensordot(self.weights, self.mode_joints(), axes=1)

    @cached_property
    def mode_subset_marginals(self) -> dict[tuple[int, ...], np.ndarray]:
        """``p_m(x_S)`` for every subset ``S`` (sorted tuple), each of shape ``(M,) + (K,) * |S|``."""
        return subset_marginals(self.mode_joints(), self.length)

    def subset_marginals(self) -> dict[tuple[int, ...], np.ndarray]:
        """``p(x_S)`` of the mixture for every subset ``S``, each of shape ``(K,) * |S|``."""
        return {s: np.tensordot(self.weights, t, axes=1) for s, t in self.mode_subset_marginals.items()}

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` sequences ``(n, N)`` and their modes ``(n,)``."""
        modes = np.minimum((rng.random((n, 1)) >= np.cumsum(self.weights)).sum(1), self.num_modes - 1)
        x = np.empty((n, self.length), dtype=np.int64)
        for m, mode in enumerate(self.modes):
            rows = np.flatnonzero(modes == m)
            x[rows] = mode.sample(rows.size, rng)
        return x, modes


def separated_product_law(
    length: int,
    num_symbols: int,
    weights: Sequence[float],
    leak: float | Sequence[float] = 0.0,
    rng: np.random.Generator | None = None,
) -> MixtureLaw:
    """Well-separated product modes: mode ``m`` lives on its own block of symbols.

    The symbols are split into ``M`` contiguous blocks; mode ``m`` puts mass ``1 - leak`` on block ``m``
    (uniformly, or with per-coordinate Dirichlet(2) proportions when ``rng`` is given) and ``leak``
    uniformly on the other symbols; ``leak`` may be one number per mode (unequal leaks avoid exact ties
    of the likelihood ratio). ``leak = 0`` gives disjoint supports ("mode-identifying" symbols).
    """
    weights = np.asarray(weights, dtype=float)
    num_modes = weights.size
    if num_symbols < num_modes:
        raise ValueError(f"need at least one symbol per mode, got num_symbols={num_symbols} for {num_modes} modes")
    leaks = np.broadcast_to(np.asarray(leak, dtype=float), (num_modes,))
    if np.any(leaks < 0) or np.any(leaks >= 1):
        raise ValueError(f"leak must be in [0, 1) (per mode), got leak={leak!r}")
    blocks = np.array_split(np.arange(num_symbols), num_modes)
    modes = []
    for block, leak in zip(blocks, leaks, strict=True):
        inside = np.zeros((length, num_symbols))
        if rng is None:
            inside[:, block] = 1.0 / block.size
        else:
            inside[:, block] = rng.dirichlet(2.0 * np.ones(block.size), size=length)
        outside = np.ones(num_symbols)
        outside[block] = 0.0
        probs = (1 - leak) * inside + (leak * outside / outside.sum() if leak > 0 else 0.0)
        modes.append(ProductMode(probs))
    return MixtureLaw(tuple(modes), weights)


def mode_identifying_sets(law: MixtureLaw) -> np.ndarray:
    """Boolean ``(M, N, K)``: symbol ``k`` at coordinate ``i`` is possible under mode ``m``.

    Raises ValueError unless the modes' supports are disjoint at every coordinate, which is what lets
    a fully-masked prediction be read back as mode weights.
    """
    support = np.stack([m.position_marginals() > 0 for m in law.modes])
    if np.any(support.sum(axis=0) > 1):
        raise ValueError("the modes' supports overlap at some coordinate: mode weights cannot be read off a marginal")
    return support


# ==================================================================================================
# Exact enumeration: risks, discrepancies, mode information, residual uncertainty
# ==================================================================================================


def subset_marginals(tables: np.ndarray, length: int) -> dict[tuple[int, ...], np.ndarray]:
    """Marginals of ``tables`` (leading batch axes, then ``length`` symbol axes) on every subset.

    Returns ``{S: table}`` with ``S`` a sorted tuple of coordinates and the kept symbol axes in that
    order. Each marginal is obtained from a one-larger superset by summing one axis.
    """
    n_batch = tables.ndim - length
    everything = tuple(range(length))
    out = {everything: tables}
    for size in range(length - 1, -1, -1):
        for subset in combinations(everything, size):
            extra = next(j for j in everything if j not in subset)
            parent = tuple(sorted(subset + (extra,)))
            out[subset] = out[parent].sum(axis=n_batch + parent.index(extra))
    return out


def _joint_of(law_or_table: MixtureLaw | np.ndarray) -> np.ndarray:
    return law_or_table.joint() if isinstance(law_or_table, MixtureLaw) else np.asarray(law_or_table, dtype=float)


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def conditional_risks_by_visible_count(
    p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per visible count ``v = 0..N-1``: the masked cross-entropy and the conditional KL, directly.

    Returns ``(cross_entropy, kl)`` with ``cross_entropy[v] = E_{S,i} E_p[-log q(x_i | x_S)]`` and
    ``kl[v] = E_{S,i} E_p KL(p(x_i|x_S) ‖ q(x_i|x_S))``, each computed from the predictive conditionals
    ``p(x_{S∪i}) / p(x_S)`` for every visible set ``S`` and every masked ``i`` (no chain rule used).
    """
    p_joint, q_joint = _joint_of(p), _joint_of(q)
    if p_joint.shape != q_joint.shape:
        raise ValueError(f"p and q must be tables of the same shape, got {p_joint.shape} and {q_joint.shape}")
    length = p_joint.ndim
    p_marg = subset_marginals(p_joint, length)
    p_log = {s: _log(t) for s, t in p_marg.items()}
    q_log = {s: _log(t) for s, t in subset_marginals(q_joint, length).items()}
    cross_entropy, kl = np.zeros(length), np.zeros(length)
    for v in range(length):
        total_ce = total_kl = 0.0
        pairs = 0
        for visible in combinations(range(length), v):
            for target in (i for i in range(length) if i not in visible):
                both = tuple(sorted(visible + (target,)))
                axis = both.index(target)
                weight = p_marg[both]
                seen = weight > 0  # elsewhere the logs below may be -inf - (-inf); those terms are unused
                with np.errstate(invalid="ignore"):
                    log_p_cond = p_log[both] - np.expand_dims(p_log[visible], axis)
                    log_q_cond = q_log[both] - np.expand_dims(q_log[visible], axis)
                total_ce -= np.sum(weight[seen] * log_q_cond[seen])
                total_kl += np.sum(weight[seen] * (log_p_cond[seen] - log_q_cond[seen]))
                pairs += 1
        cross_entropy[v], kl[v] = total_ce / pairs, total_kl / pairs
    return cross_entropy, kl


def masked_risk(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray, schedule: Schedule) -> float:
    """``R_π(q) = E_{v~π} E_{S,i} E_p[-log q(x_i | x_S)]`` (nats per predicted coordinate)."""
    cross_entropy, _ = conditional_risks_by_visible_count(p, q)
    return float(schedule.visible_count_pmf(cross_entropy.size)[:-1] @ cross_entropy)


def masked_discrepancy(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray, schedule: Schedule) -> float:
    """``D_π(q) = E_{v~π} E_{S,i} E_p KL(p(x_i|x_S) ‖ q(x_i|x_S)) = R_π(q) - R_π(p)``, computed directly."""
    _, kl = conditional_risks_by_visible_count(p, q)
    return float(schedule.visible_count_pmf(kl.size)[:-1] @ kl)


def total_variation(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray) -> float:
    """``TV(p, q) = ½ Σ_x |p(x) - q(x)|`` of the joint laws."""
    return float(0.5 * np.abs(_joint_of(p) - _joint_of(q)).sum())


def joint_kl(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray) -> float:
    """``KL(p ‖ q)`` of the joint laws."""
    p_joint, q_joint = _joint_of(p), _joint_of(q)
    seen = p_joint > 0
    return float(np.sum(p_joint[seen] * (np.log(p_joint[seen]) - _log(q_joint[seen]))))


def _categorical_kl(a: np.ndarray, b: np.ndarray) -> float:
    seen = a > 0
    return float(np.sum(a[seen] * (np.log(a[seen]) - _log(b[seen]))))


def marginal_kl_by_visible_count(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray) -> np.ndarray:
    """``k(v) = E_{|T|=v} KL(p(x_T) ‖ q(x_T))`` for ``v = 0..N``; the chain rule says ``d_v = k(v+1) - k(v)``."""
    p_joint, q_joint = _joint_of(p), _joint_of(q)
    length = p_joint.ndim
    p_marg, q_marg = subset_marginals(p_joint, length), subset_marginals(q_joint, length)
    return np.array([
        np.mean([_categorical_kl(p_marg[t].ravel(), q_marg[t].ravel()) for t in combinations(range(length), v)])
        for v in range(length + 1)
    ])


def _mode_posteriors(law: MixtureLaw, subset: tuple[int, ...], weights: np.ndarray):
    """Context probabilities ``p(x_S)`` (flattened, only where > 0) and posteriors ``(M, ·)`` under ``weights``."""
    per_mode = law.mode_subset_marginals[subset].reshape(law.num_modes, -1)
    joint = law.weights[:, None] * per_mode
    context = joint.sum(axis=0)
    seen = context > 0
    posterior = joint[:, seen] / context[seen]
    other = weights[:, None] * per_mode[:, seen]
    return context[seen], posterior, other / other.sum(axis=0)


def _check_alternative(law: MixtureLaw, weights: Sequence[float]) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (law.num_modes,) or np.any(weights <= 0) or abs(weights.sum() - 1) > 1e-9:
        raise ValueError(f"alternative mode weights must be {law.num_modes} positive numbers summing to 1, got {weights}")
    return weights


def mode_information_by_visible_count(law: MixtureLaw, alternative: Sequence[float]) -> np.ndarray:
    """``g(v) = E_{|S|=v} E_p KL(p(m | x_S) ‖ q_λ(m | x_S))`` for ``v = 0..N``, from the posteriors only."""
    alternative = _check_alternative(law, alternative)
    info = np.zeros(law.length + 1)
    for v in range(law.length + 1):
        subsets = list(combinations(range(law.length), v))
        for subset in subsets:
            context, w, u = _mode_posteriors(law, subset, alternative)
            info[v] += context @ rel_entr(w, u).sum(axis=0) / len(subsets)
    return info


def residual_mode_covariance(law: MixtureLaw) -> np.ndarray:
    """``C(v) = E_{|S|=v} E_p[diag(w) - w wᵀ]``, ``w = p(m | x_S)``: the conditional MMSE matrix of the
    one-hot mode indicator, shape ``(N + 1, M, M)``."""
    cov = np.zeros((law.length + 1, law.num_modes, law.num_modes))
    for v in range(law.length + 1):
        subsets = list(combinations(range(law.length), v))
        for subset in subsets:
            context, w, _ = _mode_posteriors(law, subset, law.weights)
            cov[v] += (np.diag(w @ context) - (w * context) @ w.T) / len(subsets)
    return cov


def residual_mode_uncertainty(law: MixtureLaw) -> np.ndarray:
    """The scalar residual mode uncertainty ``½ E[1 - Σ_m w_m²] = ½ trace C(v)`` for ``v = 0..N``.

    For two modes this is ``mmse(v) = E[w(1-w)]``, the MMSE of the mode indicator given ``v`` visible
    coordinates.
    """
    return 0.5 * np.trace(residual_mode_covariance(law), axis1=1, axis2=2)


def discrepancy_from_mode_information(mode_information: np.ndarray, schedule: Schedule) -> float:
    """The mode form of the masked discrepancy: ``Σ_v π_v [g(v) - g(v+1)]`` (exact for ``q_λ``)."""
    pmf = schedule.visible_count_pmf(mode_information.size - 1)
    return float(pmf[:-1] @ (mode_information[:-1] - mode_information[1:]))


def schedule_sensitivity_matrix(law: MixtureLaw, schedule: Schedule) -> np.ndarray:
    """``M_π = Σ_v π_v [C(v) - C(v+1)]``: the curvature of ``D_π(q_λ)`` in ``θ = log(λ/α)`` at ``θ = 0``."""
    cov = residual_mode_covariance(law)
    pmf = schedule.visible_count_pmf(law.length)
    return np.tensordot(pmf[:-1], cov[:-1] - cov[1:], axes=1)


def second_order_discrepancy(law: MixtureLaw, alternative: Sequence[float], schedule: Schedule) -> float:
    """The factorised approximation ``½ θᵀ M_π θ`` of ``D_π(q_λ)``, ``θ = log(λ / α)``."""
    theta = np.log(_check_alternative(law, alternative) / law.weights)
    return float(0.5 * theta @ schedule_sensitivity_matrix(law, schedule) @ theta)


def two_mode_posterior_kl(posterior: np.ndarray, odds_ratio: float) -> np.ndarray:
    """``φ_r(w) = KL(Bern(w) ‖ Bern(u))`` with ``u`` the posterior whose odds are ``r`` times those of ``w``:
    ``w log(w + (1-w)/r) + (1-w) log(1 + w(r-1))``."""
    w = np.asarray(posterior, dtype=float)
    return w * np.log1p((1 - w) * (1 / odds_ratio - 1)) + (1 - w) * np.log1p(w * (odds_ratio - 1))


def odds_ratio(law: MixtureLaw, alternative: Sequence[float]) -> float:
    """``r = (λ_0/λ_1) / (α_0/α_1)`` for a two-mode law."""
    if law.num_modes != 2:
        raise ValueError(f"the odds ratio is defined for two modes, got {law.num_modes}")
    lam = _check_alternative(law, alternative)
    return float((lam[0] / lam[1]) / (law.weights[0] / law.weights[1]))


def two_mode_discrepancy_bound(law: MixtureLaw, alternative: Sequence[float], schedule: Schedule) -> float:
    """The exact upper bound ``(r + 1/r - 2) Σ_v π_v mmse(v) ≥ D_π(q_λ)`` (two modes)."""
    r = odds_ratio(law, alternative)
    pmf = schedule.visible_count_pmf(law.length)
    return float((r + 1 / r - 2) * pmf @ residual_mode_uncertainty(law))


def full_mask_weight_error_bound(discrepancy: float, pi0: float) -> float:
    """``sqrt(D / (2 π_0))``: bounds ``max_m |α_m - λ̂_m|`` for any model whose masked discrepancy is ``D``
    under a schedule with full-mask mass ``π_0``, when the modes have disjoint supports."""
    if not 0.0 < pi0 <= 1.0:
        raise ValueError(f"the bound needs full-mask mass pi0 in (0, 1], got pi0={pi0!r}")
    if discrepancy < 0:
        raise ValueError(f"a masked discrepancy is >= 0, got {discrepancy!r}")
    return math.sqrt(discrepancy / (2.0 * pi0))


def fully_masked_mode_weights(law: MixtureLaw, marginals: np.ndarray) -> np.ndarray:
    """``λ̂_m = mean_i q(x_i ∈ A_{m,i})``: mode weights read from fully-masked predicted marginals ``(N, K)``."""
    support = mode_identifying_sets(law)
    return np.einsum("mik,ik->m", support, np.asarray(marginals, dtype=float)) / law.length


def chernoff_information(p0: np.ndarray, p1: np.ndarray) -> float:
    """``-log min_{s∈[0,1]} Σ_k p0(k)^s p1(k)^{1-s}``: the exponential rate at which the mode of a product
    law is revealed by i.i.d. coordinates (the decay rate of ``mmse(v)``)."""
    p0, p1 = np.asarray(p0, dtype=float), np.asarray(p1, dtype=float)
    both = (p0 > 0) & (p1 > 0)
    if not both.any():
        return math.inf
    a, b = np.log(p0[both]), np.log(p1[both])
    result = minimize_scalar(lambda s: np.logaddexp.reduce(s * a + (1 - s) * b), bounds=(0, 1), method="bounded")
    return float(-min(result.fun, 0.0))


@dataclass(frozen=True)
class FactorisationCheck:
    """Both sides of the exact mode-form identity, and the second-order factorisation."""

    direct: float  # Σ_v π_v E KL(p(x_i|x_S) ‖ q_λ(x_i|x_S)), from the predictive conditionals
    mode_form: float  # Σ_v π_v [g(v) - g(v+1)], from the mode posteriors only
    second_order: float  # ½ θᵀ M_π θ
    abs_error: float = field(init=False)
    second_order_ratio: float = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "abs_error", abs(self.direct - self.mode_form))
        ratio = self.direct / self.second_order if self.second_order > 0 else math.nan
        object.__setattr__(self, "second_order_ratio", ratio)


def check_factorisation(law: MixtureLaw, alternative: Sequence[float], schedule: Schedule) -> FactorisationCheck:
    """Compute ``D_π(q_λ)`` directly and through the mode information, and its second-order form."""
    q = law.reweighted(alternative)
    return FactorisationCheck(
        direct=masked_discrepancy(law, q, schedule),
        mode_form=discrepancy_from_mode_information(mode_information_by_visible_count(law, alternative), schedule),
        second_order=second_order_discrepancy(law, alternative, schedule),
    )


# ==================================================================================================
# Fits on log scales
# ==================================================================================================


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


# ==================================================================================================
# (a) Discrepancy against the smallest visible set
# ==================================================================================================


def blind_schedules(length: int) -> dict[str, list[tuple[int, Schedule]]]:
    """Two families of schedules indexed by their smallest visible count ``v_min = 0..N-1``.

    ``fixed_visible``: exactly ``v_min`` visible. ``uniform_ratio_capped``: masked-diffusion ratio
    ``t ~ U[0, (N - v_min)/N]``, i.e. masked count uniform on ``1..N-v_min`` (``v_min = 0`` is the full
    masked-diffusion schedule).
    """
    return {
        "fixed_visible": [(v, FixedVisibleCount(v)) for v in range(length)],
        "uniform_ratio_capped": [(v, UniformMaskingRatio(0.0, (length - v) / length)) for v in range(length)],
    }


def discrepancy_vs_min_visible(law: MixtureLaw, alternative: Sequence[float]) -> pd.DataFrame:
    """Experiment (a): ``D_π(q_λ)`` for blind schedules of growing ``v_min``, with ``TV(p, q_λ)``.

    Columns: ``family, v_min, discrepancy`` (exact, direct), ``mode_form`` (exact, from posteriors),
    ``second_order``, ``upper_bound`` (two modes: ``(r+1/r-2) Σ π_v mmse(v)``), ``mmse_at_v_min``,
    ``total_variation`` and ``joint_kl`` (of the joint laws; the same on every row).
    """
    alternative = _check_alternative(law, alternative)
    q = law.reweighted(alternative)
    _, kl_by_v = conditional_risks_by_visible_count(law, q)
    information = mode_information_by_visible_count(law, alternative)
    covariance = residual_mode_covariance(law)
    mmse = 0.5 * np.trace(covariance, axis1=1, axis2=2)
    theta = np.log(alternative / law.weights)
    r = odds_ratio(law, alternative) if law.num_modes == 2 else math.nan
    tv, kl_joint = total_variation(law, q), joint_kl(law, q)
    rows = []
    for family, schedules in blind_schedules(law.length).items():
        for v_min, schedule in schedules:
            pmf = schedule.visible_count_pmf(law.length)
            sensitivity = np.tensordot(pmf[:-1], covariance[:-1] - covariance[1:], axes=1)
            rows.append({
                "family": family,
                "v_min": v_min,
                "discrepancy": float(pmf[:-1] @ kl_by_v),
                "mode_form": discrepancy_from_mode_information(information, schedule),
                "second_order": float(0.5 * theta @ sensitivity @ theta),
                "upper_bound": float((r + 1 / r - 2) * pmf @ mmse),
                "mmse_at_v_min": float(mmse[v_min]),
                "total_variation": tv,
                "joint_kl": kl_joint,
            })
    return pd.DataFrame(rows)


def decay_rates(table: pd.DataFrame, floor: float = 1e-13) -> pd.DataFrame:
    """Fitted exponential rate of ``discrepancy`` vs ``v_min`` per family (values above ``floor``)."""
    rows = []
    for family, part in table.groupby("family", sort=False):
        part = part[part["discrepancy"] > floor]
        fit = fit_exponential_decay(part["v_min"], part["discrepancy"])
        rows.append({"family": family, "rate": fit["rate"], "r2_log": fit["r2_log"], "n_points": fit["n_points"],
                     "v_min_range": f"{part['v_min'].min()}-{part['v_min'].max()}"})
    return pd.DataFrame(rows)


# ==================================================================================================
# (b) Gradient training of a masked predictor
# ==================================================================================================


def sample_visible_sets(schedule: Schedule, length: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean ``(n, N)``: a visible count ``v ~ π`` per row, then a uniform visible set of that size."""
    pmf = schedule.visible_count_pmf(length)
    counts = rng.choice(length + 1, size=n, p=pmf)
    ranks = rng.random((n, length)).argsort(axis=1).argsort(axis=1)
    return ranks < counts[:, None]


class MixtureOfProductsPredictor(torch.nn.Module):
    """``R`` independent replicas of a masked predictor ``q(x_i | x_S) = Σ_m q(m | x_S) q_m(x_i)``.

    Each replica has mode logits (``R, M``) and per-mode, per-coordinate symbol logits (``R, M, N, K``);
    its posterior over modes given the visible symbols is exact Bayes inside the model. The replicas
    share nothing: summing their losses and stepping Adam (elementwise) trains each on its own.
    """

    def __init__(self, replicas: int, num_modes: int, length: int, num_symbols: int, generator: torch.Generator):
        super().__init__()
        self.mode_logits = torch.nn.Parameter(torch.zeros(replicas, num_modes))
        self.symbol_logits = torch.nn.Parameter(
            0.5 * torch.randn(replicas, num_modes, length, num_symbols, generator=generator)
        )

    def per_mode_log_likelihood(self, x: torch.Tensor) -> torch.Tensor:
        """``log q_m(x_j)`` for every row, coordinate and mode: ``x`` is ``(R, n, N)`` long, out ``(R, n, N, M)``."""
        replicas, num_modes, length, num_symbols = self.symbol_logits.shape
        log_symbol = torch.log_softmax(self.symbol_logits, dim=-1)
        table = log_symbol.permute(0, 2, 3, 1).reshape(replicas, length * num_symbols, num_modes)
        index = (torch.arange(length) * num_symbols + x).reshape(replicas, -1, 1).expand(-1, -1, num_modes)
        return torch.gather(table, 1, index).reshape(*x.shape, num_modes)

    def masked_log_likelihood(self, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """``log q(x_i | x_S)`` for every coordinate ``i``, shape ``(R, n, N)`` (meaningful where masked).

        ``x``: ``(R, n, N)`` long symbols; ``visible``: ``(R, n, N)`` bool, the set ``S`` of each row.
        """
        per_mode = self.per_mode_log_likelihood(x)
        evidence = (per_mode * visible[..., None]).sum(dim=2)  # Σ_{j∈S} log q_m(x_j): (R, n, M)
        log_posterior = torch.log_softmax(torch.log_softmax(self.mode_logits, -1)[:, None, :] + evidence, dim=-1)
        return torch.logsumexp(log_posterior[:, :, None, :] + per_mode, dim=-1)

    def masked_loss_per_replica(self, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """Per replica, the mean over rows of the mean over masked coordinates of ``-log q(x_i | x_S)``."""
        masked = (~visible).float()
        per_row = -(self.masked_log_likelihood(x, visible) * masked).sum(-1) / masked.sum(-1)
        return per_row.mean(dim=1)

    @torch.no_grad()
    def fully_masked_marginals(self) -> np.ndarray:
        """``q(x_i = k | nothing visible) = Σ_m q(m) q_m(x_i = k)``, shape ``(R, N, K)``."""
        prior = torch.softmax(self.mode_logits, dim=-1)
        return torch.einsum("rm,rmjk->rjk", prior, torch.softmax(self.symbol_logits, dim=-1)).double().numpy()

    @torch.no_grad()
    def as_mixture_law(self, replica: int) -> MixtureLaw:
        """Replica ``replica`` as an exact ``MixtureLaw`` of product modes (for enumeration)."""
        weights = torch.softmax(self.mode_logits[replica].double(), dim=-1).numpy()
        tables = torch.softmax(self.symbol_logits[replica].double(), dim=-1).numpy()
        return MixtureLaw(tuple(ProductMode(t) for t in tables), weights)


@contextmanager
def _single_torch_thread():
    """Run torch on one thread (restored afterwards): for these tiny tensors, thread hand-offs cost more
    than they save, badly so on a shared machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass(frozen=True, eq=False)
class TrainingSets:
    """One training set per (seed, schedule) replica, stacked: ``x`` and ``visible`` are ``(R, n, N)``."""

    x: np.ndarray
    visible: np.ndarray
    replicas: list[tuple[int, str]]  # (seed, schedule label) of each replica
    n_full_mask: list[int]  # fully-masked examples per replica
    full_mask_fraction: list[float]  # mode-0 fraction among them (NaN if none)


def draw_training_sets(law: MixtureLaw, schedules: Mapping[str, tuple[float, Schedule]], n_train: int,
                       n_seeds: int, seed: int) -> TrainingSets:
    """For every seed, ``n_train`` sequences from ``law`` (``Generator([seed, s])``), and for every schedule
    one visible set per sequence (``Generator([seed, s, c])``), so schedules differ only in their masks."""
    xs, visibles, replicas, n_full, fractions = [], [], [], [], []
    for s in range(n_seeds):
        x, modes = law.sample(n_train, np.random.default_rng([seed, s]))
        for c, (label, (_, schedule)) in enumerate(schedules.items()):
            visible = sample_visible_sets(schedule, law.length, n_train, np.random.default_rng([seed, s, c]))
            full = visible.sum(axis=1) == 0
            xs.append(x)
            visibles.append(visible)
            replicas.append((s, label))
            n_full.append(int(full.sum()))
            fractions.append(float(np.mean(modes[full] == 0)) if full.any() else math.nan)
    return TrainingSets(np.stack(xs), np.stack(visibles), replicas, n_full, fractions)


def fit_masked_predictors(data: TrainingSets, law: MixtureLaw, steps: int, lr: float,
                          seed: int) -> tuple[MixtureOfProductsPredictor, np.ndarray]:
    """Train one ``MixtureOfProductsPredictor`` replica per training set: full batch, Adam, ``steps`` steps,
    initialised from ``torch.Generator().manual_seed(seed)``. Returns the model and each replica's final
    training loss."""
    x, visible = torch.as_tensor(data.x), torch.as_tensor(data.visible)
    model = MixtureOfProductsPredictor(len(data.replicas), law.num_modes, law.length, law.num_symbols,
                                       torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    with _single_torch_thread():
        for _ in range(steps):
            optimizer.zero_grad()
            model.masked_loss_per_replica(x, visible).sum().backward()
            optimizer.step()
        with torch.no_grad():
            final_loss = model.masked_loss_per_replica(x, visible).numpy()
    return model, final_loss


def train_mode_weight_recovery(
    law: MixtureLaw,
    schedules: Mapping[str, tuple[float, Schedule]],
    n_train: int = 1000,
    n_seeds: int = 8,
    steps: int = 200,
    lr: float = 0.1,
    seed: int = 0,
    exact_discrepancy: bool = True,
) -> pd.DataFrame:
    """Experiment (b): train masked predictors under each schedule and read back the mode weights.

    ``schedules`` maps a label to ``(pi0, schedule)``. For every seed, one training set of ``n_train``
    sequences is drawn from ``law``; every schedule draws its own visible set for each of those
    sequences (one fixed mask per sequence, so about ``n_train · π_0`` examples are fully masked). Each
    (schedule, seed) replica is trained full-batch with Adam for ``steps`` steps. The recovered weight
    is ``λ̂_0 = mean_i q(x_i ∈ A_{0,i})`` from the fully-masked prediction (``fully_masked_mode_weights``).

    When the modes have disjoint supports, examples with a visible symbol carry no information about
    the mode weights, so the best a model can do is the mode-0 fraction among the fully-masked
    examples (column ``full_mask_fraction``): its error is ``≈ sqrt(α_0 α_1 / (n π_0))``.

    With ``exact_discrepancy`` each trained model's population masked discrepancy ``D_π(q̂)`` under its
    training schedule is computed by enumeration (column ``discrepancy``), with the guarantee
    ``error_bound = sqrt(D_π(q̂) / (2 π_0))`` that its ``error`` must respect (NaN when ``π_0 = 0``).

    Returns one row per (schedule, seed): ``schedule, pi0, seed, true_weight, recovered_weight, error,
    n_full_mask, full_mask_fraction, final_loss`` (+ ``discrepancy, error_bound``).
    """
    mode_identifying_sets(law)  # the weights can only be read back when the supports are disjoint
    data = draw_training_sets(law, schedules, n_train, n_seeds, seed)
    model, final_loss = fit_masked_predictors(data, law, steps, lr, seed)
    marginals = model.fully_masked_marginals()
    alpha = float(law.weights[0])
    rows = []
    for r, (s, label) in enumerate(data.replicas):
        pi0, schedule = schedules[label]
        recovered = float(fully_masked_mode_weights(law, marginals[r])[0])
        row = {
            "schedule": label,
            "pi0": float(pi0),
            "seed": s,
            "true_weight": alpha,
            "recovered_weight": recovered,
            "error": abs(recovered - alpha),
            "n_full_mask": data.n_full_mask[r],
            "full_mask_fraction": data.full_mask_fraction[r],
            "final_loss": float(final_loss[r]),
        }
        if exact_discrepancy:
            row["discrepancy"] = max(masked_discrepancy(law, model.as_mixture_law(r), schedule), 0.0)
            row["error_bound"] = full_mask_weight_error_bound(row["discrepancy"], pi0) if pi0 > 0 else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def recovery_error_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per schedule: RMSE of the recovered weight, next to the RMSE of the best estimate the data allow
    (the mode-0 fraction among the fully-masked examples) and its theory ``sqrt(α_0 α_1 E[1/n_0])``,
    ``n_0 ≈ n π_0`` the number of fully-masked examples (the "sampling floor")."""
    rows = []
    for (label, pi0), part in table.groupby(["schedule", "pi0"], sort=False):
        alpha = part["true_weight"].iloc[0]
        counts = part["n_full_mask"].to_numpy()
        sampling_floor = math.sqrt(alpha * (1 - alpha) * np.mean(1 / counts)) if np.all(counts > 0) else math.nan
        rows.append({
            "schedule": label,
            "pi0": pi0,
            "rmse": float(np.sqrt(np.mean(part["error"] ** 2))),
            "mean_recovered": float(part["recovered_weight"].mean()),
            "rmse_full_mask_fraction": float(np.sqrt(np.nanmean((part["full_mask_fraction"] - alpha) ** 2)))
            if part["full_mask_fraction"].notna().any() else math.nan,
            "sampling_floor": sampling_floor,
            "mean_n_full_mask": float(part["n_full_mask"].mean()),
            "n_seeds": int(len(part)),
        })
    return pd.DataFrame(rows)


# ==================================================================================================
# (c) Real text: code vs prose
# ==================================================================================================

#: Where the lead's tests and notebooks put the official GLUE TSVs when ``$TYPHOON_GLUE_DIR`` is unset.
DEFAULT_GLUE_DIR = Path("/work/shared/data/glue")


def load_code_texts(stdlib_dir: str | os.PathLike | None = None, max_files: int | None = None) -> list[str]:
    """The top-level ``*.py`` files of the Python standard library, sorted by name."""
    root = Path(stdlib_dir) if stdlib_dir is not None else Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py"))[:max_files]
    if not files:
        raise FileNotFoundError(f"no *.py files under {root}")
    return [f.read_text(encoding="utf-8", errors="replace") for f in files]


def load_prose_sentences(glue_dir: str | os.PathLike | None = None) -> list[str]:
    """CoLA train + dev sentences: via ``typhoon.data.load_glue`` when available, else the raw TSVs.

    The folder is ``glue_dir``, else ``$TYPHOON_GLUE_DIR``, else ``DEFAULT_GLUE_DIR``.
    """
    root = Path(glue_dir or os.environ.get("TYPHOON_GLUE_DIR") or DEFAULT_GLUE_DIR)
    try:
        from typhoon.data import load_glue

        splits = load_glue("cola", root)
        return list(splits["train"]["sentence"]) + list(splits["validation"]["sentence"])
    except ImportError:
        pass
    sentences = []
    for name in ("train.tsv", "dev.tsv"):
        path = root / "CoLA" / name
        if not path.is_file():
            raise FileNotFoundError(f"CoLA file not found: {path} (set TYPHOON_GLUE_DIR)")
        frame = pd.read_csv(path, sep="\t", header=None, quoting=3, names=["source", "label", "mark", "sentence"],
                            dtype=str, keep_default_na=False)
        sentences += frame["sentence"].tolist()
    return sentences


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


# ==================================================================================================
# Writing results
# ==================================================================================================


def write_csv_atomic(frame: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``frame`` as CSV atomically (temp file in the same folder, then rename)."""
    from typhoon.records import atomic_write_csv

    atomic_write_csv(Path(path), frame)
    return Path(path)


def save_figure(figure, folder: str | os.PathLike, name: str) -> list[Path]:
    """Save a matplotlib figure as ``<folder>/<name>.png`` and ``.svg``, each written atomically."""
    from typhoon.plots import save_figure as save

    return save(figure, Path(folder) / name)
