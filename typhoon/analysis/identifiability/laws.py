"""Mixture laws over ``[K]^N``: product and Markov modes, their mixture, exact enumeration helpers.

The truth of the theory is a mixture ``p = Σ_m α_m p_m`` of modes; ``MixtureLaw.reweighted(λ)`` is the
model ``q_λ`` with the same modes and other weights. Enumeration (``joint``, ``subset_marginals``) is
exact and meant for ``K**N`` up to a few times 10^4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import numpy as np

from typhoon.masking import require_sequence_length

#: Largest number of sequences ``K**N`` that exact enumeration accepts.
MAX_ENUMERATED_SEQUENCES = 1 << 17


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
        require_sequence_length(self.length)
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
