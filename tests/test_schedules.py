"""Mask schedules of the MLM phase: per-sequence rates, and every strategy honouring them."""

import pytest
import torch

from typhoon.masking import get_strategy, maskable_positions
from typhoon.schedules import sample_rates


def test_rates_follow_each_schedule():
    gen = torch.Generator().manual_seed(0)
    assert sample_rates("fixed", 8, 0.15, 0.0, gen) is None
    uniform = sample_rates("uniform", 20_000, 0.15, 0.0, gen)
    assert uniform.min() > 0 and uniform.max() <= 1 and abs(uniform.mean().item() - 0.5) < 0.01
    mixture = sample_rates("mixture", 20_000, 0.15, 0.1, gen)
    assert set(mixture.unique().tolist()) == {0.15, 1.0}
    assert abs((mixture == 1.0).double().mean().item() - 0.1) < 0.01
    with pytest.raises(ValueError, match="unknown schedule 'cosine'"):
        sample_rates("cosine", 4, 0.15, 0.0, gen)


@pytest.mark.parametrize("strategy", ["random", "whole_word", "span", "typhoon"])
def test_full_mask_rows_and_rates_are_honoured(strategy, mrpc_batch, mrpc_tokenized, tokenizer):
    from typhoon.data import token_counts

    masking = get_strategy(strategy)
    train = mrpc_tokenized["train"]
    masking.prepare(token_counts(train["input_ids"], train["special_tokens_mask"], tokenizer.vocab_size))
    maskable = maskable_positions(mrpc_batch)
    rates = torch.full((len(maskable),), 0.15, dtype=torch.float64)
    rates[::4] = 1.0  # every fourth sequence fully masked (the mixture schedule's full-mask mass)
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([masking.select(mrpc_batch, gen, rate=rates) for _ in range(200)]).double()
    full = draws[:, ::4]
    assert torch.equal(full.amin(0).bool() & maskable[::4], maskable[::4])  # every maskable token, always
    partial = draws[:, 1::4].sum((0, 2)) / (200 * maskable[1::4].sum(1))
    assert torch.allclose(partial, torch.full_like(partial, 0.15), atol=0.03)
    assert not (draws.amax(0).bool() & ~maskable).any()
