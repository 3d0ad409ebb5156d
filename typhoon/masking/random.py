"""Token-level random masking (BERT): every maskable token independently with probability p. With
``specials="maskable"`` (the strategy ``random_2023``), every real position is drawn, [CLS] and [SEP]
included, as the 2023 Typhoon code's random collator drew them (its mask ignored the special-token mask)."""

from __future__ import annotations

import torch

from .base import MaskingStrategy, maskable_positions
from .params import BASE_PARAMS, CORRUPTION, SPECIALS, P


def random_token_mask(maskable: torch.Tensor, rates: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bool (B, L): each maskable position independently with its row's rate.

    A fresh draw on every call (dynamic masking, as RoBERTa and ``DataCollatorForLanguageModeling``),
    so the same sentence gets a new mask each epoch.
    """
    u = torch.rand(maskable.shape, generator=generator, device=maskable.device)
    return (u < rates[:, None]) & maskable


class RandomMasking(MaskingStrategy):
    """BERT's masking: i.i.d. Bernoulli(p) over the non-special tokens (or over every real token:
    ``specials="maskable"``)."""

    PARAMS = (*BASE_PARAMS, SPECIALS)

    def __init__(self, p: float = P.default, corruption: str = CORRUPTION.default, specials: str = SPECIALS.default):
        super().__init__(p, corruption)
        self.specials = SPECIALS.check(specials)

    @property
    def name(self) -> str:  # the alias that fixes the rule: a strategy's name is one get_strategy accepts
        return "random" if self.specials == "never" else "random_2023"

    def selectable_positions(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.specials == "never":
            return maskable_positions(batch)
        if "attention_mask" in batch:
            return batch["attention_mask"].bool()
        return torch.ones_like(batch["input_ids"], dtype=torch.bool)

    def _select(self, batch, maskable, rates, generator):
        return random_token_mask(maskable, rates, generator)
