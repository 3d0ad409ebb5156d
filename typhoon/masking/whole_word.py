"""Whole-word masking: select words, then mask all of their word-pieces.

Unbiased token budget
---------------------
Each word is selected independently with probability p (the row's rate). A token is then masked
exactly when its word is, so *every token* is masked with marginal probability p and the expected
number of masked tokens is exactly p x (#maskable tokens), whatever the word lengths. This is the
simplest scheme whose expected TOKEN rate is p. (Rescaling the word probability by
#tokens/#words would instead make the expected number of selected *words* equal p x #tokens, which
over-masks tokens by that same factor.) Long words are still masked as a unit, which is the point.

The implementation draws one uniform per word id and gathers it back to the tokens: O(B x L), no
(B, L, L) same-word tensor as in ``DataCollatorForLanguageModeling``.
"""

from __future__ import annotations

import torch

from .base import MaskingStrategy, word_ids_of


def whole_word_mask(word_ids: torch.Tensor, maskable: torch.Tensor, rates: torch.Tensor,
                    generator: torch.Generator) -> torch.Tensor:
    """Bool (B, L): all tokens of independently selected words (word probability = row rate).

    ``word_ids`` is (B, L) long with -1 at special/padding positions and word indices unique within
    a row (docs/CONTRACTS.md).
    """
    has_word = maskable & (word_ids >= 0)
    n_word_slots = int(word_ids.max().item()) + 1 if word_ids.numel() else 0
    if n_word_slots <= 0:
        return torch.zeros_like(maskable)
    u = torch.rand((word_ids.shape[0], n_word_slots), generator=generator, device=word_ids.device)
    word_selected = u < rates[:, None]
    return word_selected.gather(1, word_ids.clamp(min=0)) & has_word


class WholeWordMasking(MaskingStrategy):
    """Whole-word masking with an expected token rate of exactly p (see the module docstring)."""

    name = "whole_word"

    def _select(self, batch, maskable, rates, generator):
        return whole_word_mask(word_ids_of(batch, self.name), maskable, rates, generator)
