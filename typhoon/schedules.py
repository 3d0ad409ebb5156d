"""Mask schedules for the MLM phase: the masking rate each sequence of a batch gets.

- ``fixed``: every sequence uses the budget p (standard MLM).
- ``uniform``: a per-sequence rate drawn uniformly from (0, 1] (masked-diffusion style).
- ``mixture``: rate p, except that with probability pi0 a whole sequence is masked; the full-mask
  mass is what lets masked prediction see the data's global mode weights (see
  ``typhoon.identifiability``).
"""

from __future__ import annotations

import torch

SCHEDULES = ("fixed", "uniform", "mixture")


def sample_rates(schedule: str, batch_size: int, p: float, pi0: float, generator: torch.Generator) -> torch.Tensor | None:
    """Per-sequence masking rates, shape (batch_size,), or None for the fixed budget p."""
    if schedule == "fixed":
        return None
    if schedule == "uniform":
        # 1 - U[0, 1) lies in (0, 1]: no sequence is left without any masked token on average
        return 1.0 - torch.rand(batch_size, generator=generator, dtype=torch.float64)
    if schedule == "mixture":
        full = torch.rand(batch_size, generator=generator, dtype=torch.float64) < pi0
        return torch.where(full, torch.ones(batch_size, dtype=torch.float64),
                           torch.full((batch_size,), p, dtype=torch.float64))
    raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
