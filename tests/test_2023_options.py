"""The 2023 Typhoon code's data pipeline as options of a run: its random arm (``random_2023``: [CLS] and
[SEP] drawn like any token) and its data order (``batch_order="random"``: a plain shuffle), against hand counts."""

import numpy as np
import pytest
import torch

from typhoon.config import RunConfig
from typhoon.data import epoch_batches
from typhoon.masking import get_strategy


def _batch():
    # two rows: [CLS] a b [SEP] pad, and [CLS] c [SEP] pad pad
    return {"input_ids": torch.tensor([[101, 7, 8, 102, 0], [101, 9, 102, 0, 0]]),
            "attention_mask": torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]),
            "special_tokens_mask": torch.tensor([[1, 0, 0, 1, 1], [1, 0, 1, 1, 1]])}


def _selection_rate(strategy, draws: int = 4000) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.stack([strategy.select(_batch(), generator) for _ in range(draws)]).float().mean(0)


def test_random_2023_draws_specials_at_p_and_never_padding():
    rate = _selection_rate(get_strategy("random_2023", p=0.3))
    real = _batch()["attention_mask"].bool()
    # every real position, [CLS] and [SEP] included, at 0.3 (4000 draws: sd 0.0072, 5 sd = 0.036)
    assert torch.all((rate[real] - 0.3).abs() < 0.036)
    assert torch.all(rate[~real] == 0)


def test_random_never_draws_specials():
    rate = _selection_rate(get_strategy("random", p=0.3))
    maskable = _batch()["attention_mask"].bool() & ~_batch()["special_tokens_mask"].bool()
    assert torch.all(rate[~maskable] == 0)
    assert torch.all((rate[maskable] - 0.3).abs() < 0.036)


def test_random_2023_is_a_named_run_of_its_own():
    config = RunConfig(strategy="random_2023")
    assert config.specials == "maskable" and config.relative_dir().parts[-2] == "random_2023"
    assert get_strategy("random_2023").name == "random_2023" and get_strategy("random").name == "random"
    with pytest.raises(ValueError, match="specials"):
        RunConfig(strategy="random", specials="sometimes")


def test_random_batch_order_is_a_plain_shuffle_of_every_example_once():
    lengths = [5, 40, 7, 33, 12, 9, 28, 3, 16, 21, 11]
    batches = epoch_batches(lengths, 4, np.random.default_rng(3), "random")
    # what a shuffle by hand gives: the permutation cut into batches of 4, the last one short
    order = np.random.default_rng(3).permutation(len(lengths))
    assert [b.tolist() for b in batches] == [order[:4].tolist(), order[4:8].tolist(), order[8:].tolist()]


def test_bad_batch_order_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="length_grouped.*random"):
        RunConfig(batch_order="sorted")
