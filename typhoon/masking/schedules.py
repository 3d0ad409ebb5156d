"""Mask schedules: how much of each sequence is masked. One family serves training and the theory.

A schedule is a law on the share of a sequence that is masked. It answers two questions:

* **Training** (phase 1 of ``typhoon.training.run``): ``sample_rates(batch_size, generator)`` draws one
  masking rate per sequence, which every masking strategy honours as its budget for that row (the
  expected share of its maskable tokens that get selected).
* **Theory** (``typhoon.analysis.identifiability``): ``visible_count_pmf(N)`` is the law of the number ``v`` of
  visible coordinates of a length-``N`` sequence when the same rate fixes the masked count exactly
  (given ``v``, the visible set is uniform among the sets of that size). ``sample_visible_sets`` draws
  masks from that law.

The family:

* ``FixedMaskingRatio(ratio)``: BERT style, every sequence at the same rate.
* ``UniformMaskingRatio(low, high)``: masked-diffusion style, a rate ``t ~ U(low, high]`` per sequence.
* ``FixedVisibleCount(v)``: exactly ``v`` coordinates visible (theory only: as a rate it depends on the
  sequence length).
* ``MixtureSchedule(components, weights)``: a component drawn per sequence; ``with_full_mask(s, pi0)``
  masks a whole sequence with probability ``pi0`` and follows ``s`` otherwise. The full-mask mass is
  what lets masked prediction see the data's global mode weights (see ``typhoon.analysis.identifiability``).

The schedules a run can name (``RunConfig.schedule``) are ``SCHEDULES``; ``training_schedule`` maps a
name to its schedule and ``sample_rates`` is the call the training loop makes.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch

from typhoon.masking.params import SCHEDULES


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def require_sequence_length(length: int) -> None:
    """Raise ValueError unless ``length`` is a positive integer."""
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"sequence length must be a positive integer, got {length!r}")


class Schedule:
    """A law on how much of a sequence is masked (see the module docstring).

    Subclasses implement ``visible_count_pmf(N)``: an array of length ``N + 1`` over ``v = 0..N`` that
    sums to 1 and has no mass at ``v = N`` (at least one coordinate is always masked); and
    ``sample_rates(batch_size, generator)``: float64 masking rates in ``[0, 1]``, shape ``(batch_size,)``.
    """

    def visible_count_pmf(self, length: int) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def sample_rates(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
class FixedVisibleCount(Schedule):
    """Exactly ``visible`` coordinates are visible (``visible = 0``: the fully-masked context)."""

    visible: int

    def __post_init__(self):
        if isinstance(self.visible, bool) or not isinstance(self.visible, (int, np.integer)) or self.visible < 0:
            raise ValueError(f"visible must be a non-negative integer, got visible={self.visible!r}")

    def visible_count_pmf(self, length: int) -> np.ndarray:
        require_sequence_length(length)
        if self.visible > length - 1:
            raise ValueError(f"visible={self.visible} leaves nothing to predict in a sequence of length {length}")
        pmf = np.zeros(length + 1)
        pmf[self.visible] = 1.0
        return pmf

    def sample_rates(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        raise ValueError(f"FixedVisibleCount(visible={self.visible}) has no masking rate independent of the "
                         "sequence length; a training schedule masks a share of each sequence "
                         "(FixedMaskingRatio(1.0) masks all of it)")


@dataclass(frozen=True)
class FixedMaskingRatio(Schedule):
    """BERT style: every sequence at rate ``ratio``; in the theory exactly ``round(ratio * N)``
    coordinates are masked (at least one), so ``ratio = 1`` is the fully-masked context."""

    ratio: float

    def __post_init__(self):
        if not (_is_real(self.ratio) and 0.0 < self.ratio <= 1.0):
            raise ValueError(f"masking ratio must be in (0, 1], got ratio={self.ratio!r}")

    def visible_count_pmf(self, length: int) -> np.ndarray:
        require_sequence_length(length)
        masked = min(length, max(1, math.floor(self.ratio * length + 0.5)))
        pmf = np.zeros(length + 1)
        pmf[length - masked] = 1.0
        return pmf

    def sample_rates(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        return torch.full((batch_size,), float(self.ratio), dtype=torch.float64, device=generator.device)


@dataclass(frozen=True)
class UniformMaskingRatio(Schedule):
    """Masked-diffusion style: a ratio ``t ~ U[low, high]`` per sequence; in the theory ``ceil(t N)``
    coordinates are masked.

    With ``low = 0, high = 1`` the masked count is uniform on ``1..N``, which is also the law of the
    masked count of "mask each coordinate with probability ``t ~ U[0, 1]``" given at least one masked:
    the training rate and the theory's law agree. ``high < 1`` gives a *blind* schedule whose smallest
    visible set is ``N - ceil(high N)``.
    """

    low: float = 0.0
    high: float = 1.0

    def __post_init__(self):
        if not (_is_real(self.low) and _is_real(self.high) and 0.0 <= self.low < self.high <= 1.0):
            raise ValueError(f"need 0 <= low < high <= 1, got low={self.low!r}, high={self.high!r}")

    def visible_count_pmf(self, length: int) -> np.ndarray:
        require_sequence_length(length)
        pmf = np.zeros(length + 1)
        for masked in range(1, length + 1):
            # t with ceil(t N) = masked is the interval ((masked - 1) / N, masked / N]
            overlap = min(self.high, masked / length) - max(self.low, (masked - 1) / length)
            pmf[length - masked] = max(overlap, 0.0) / (self.high - self.low)
        return pmf / pmf.sum()

    def sample_rates(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        # high - (high - low) U[0, 1) lies in (low, high]: with low = 0 no sequence gets rate 0
        draws = torch.rand(batch_size, generator=generator, dtype=torch.float64, device=generator.device)
        return float(self.high) - (float(self.high) - float(self.low)) * draws


@dataclass(frozen=True)
class MixtureSchedule(Schedule):
    """Draw a component schedule with probability ``weights[j]``, then the visible count (or the rate)
    from it."""

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

    def sample_rates(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        # one uniform draw picks every row's component (component j when it falls in the j-th slice of
        # the cumulative weights); then each component draws rates for the whole batch, in order
        draws = torch.rand(batch_size, generator=generator, dtype=torch.float64, device=generator.device)
        edges = torch.tensor(np.cumsum(self.weights), dtype=torch.float64, device=draws.device)
        component = torch.searchsorted(edges, draws, right=True).clamp(max=len(self.components) - 1)
        rates = torch.stack([c.sample_rates(batch_size, generator) for c in self.components])
        return rates.gather(0, component[None]).squeeze(0)


def with_full_mask(schedule: Schedule, pi0: float) -> MixtureSchedule:
    """``schedule`` with probability ``1 - pi0``, the fully-masked context (``v = 0``, rate 1) with ``pi0``."""
    if not (_is_real(pi0) and 0.0 <= pi0 < 1.0):
        raise ValueError(f"full-mask mass must be in [0, 1), got pi0={pi0!r}")
    return MixtureSchedule((FixedMaskingRatio(1.0), schedule), (float(pi0), 1.0 - float(pi0)))


def min_visible_count(schedule: Schedule, length: int) -> int:
    """The smallest visible count ``v_min`` with positive probability."""
    return int(np.flatnonzero(schedule.visible_count_pmf(length) > 0)[0])


def sample_visible_sets(schedule: Schedule, length: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean ``(n, N)``: a visible count ``v ~ π`` per row, then a uniform visible set of that size."""
    pmf = schedule.visible_count_pmf(length)
    counts = rng.choice(length + 1, size=n, p=pmf)
    ranks = rng.random((n, length)).argsort(axis=1).argsort(axis=1)
    return ranks < counts[:, None]


# --------------------------------------------------------------------------------------------------
# The schedules a run names


def training_schedule(name: str, p: float, pi0: float) -> Schedule:
    """The schedule a run config names: ``fixed`` = rate p, ``uniform`` = rate uniform on (0, 1],
    ``mixture`` = rate p with a whole sequence masked with probability pi0."""
    if name == "fixed":
        return FixedMaskingRatio(p)
    if name == "uniform":
        return UniformMaskingRatio()
    if name == "mixture":
        return with_full_mask(FixedMaskingRatio(p), pi0)
    raise ValueError(f"unknown schedule {name!r}; choose one of {SCHEDULES}")


def sample_rates(schedule: str, batch_size: int, p: float, pi0: float, generator: torch.Generator) -> torch.Tensor | None:
    """Per-sequence masking rates of the named schedule, shape (batch_size,), or None for ``fixed``:
    every sequence at the budget p, which each masking strategy applies when given no rate."""
    law = training_schedule(schedule, p, pi0)
    return None if schedule == "fixed" else law.sample_rates(batch_size, generator)
