"""Token-level random masking (BERT): every maskable token independently with probability p."""

from __future__ import annotations

import torch

from .base import MaskingStrategy


def random_token_mask(maskable: torch.Tensor, rates: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bool (B, L): each maskable position independently with its row's rate.

    A fresh draw on every call (dynamic masking, as RoBERTa and ``DataCollatorForLanguageModeling``),
    so the same sentence gets a new mask each epoch.
    """
    u = torch.rand(maskable.shape, generator=generator, device=maskable.device)
    return (u < rates[:, None]) & maskable


class RandomMasking(MaskingStrategy):
    """BERT's masking: i.i.d. Bernoulli(p) over the non-special tokens."""

    name = "random"

    def _select(self, batch, maskable, rates, generator):
        return random_token_mask(maskable, rates, generator)
