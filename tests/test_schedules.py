"""Mask schedules, one family for training and theory: the laws of the visible count (against integrals
and hand counts), the per-sequence rates training draws (against the formulas they replaced and the
theory's laws), and every masking strategy honouring those rates."""

import re

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from typhoon.masking import get_strategy, maskable_positions
from typhoon.masking.schedules import (
    SCHEDULES,
    FixedMaskingRatio,
    FixedVisibleCount,
    MixtureSchedule,
    UniformMaskingRatio,
    min_visible_count,
    sample_rates,
    sample_visible_sets,
    training_schedule,
    with_full_mask,
)

# --------------------------------------------------------------------------------------------------
# The law of the visible count (theory)


def test_fixed_visible_and_fixed_ratio_pmfs():
    assert np.array_equal(FixedVisibleCount(2).visible_count_pmf(5), [0, 0, 1, 0, 0, 0])
    # round(0.15 * 10) = 2 masked (half rounds up), so 8 visible; at least one coordinate is always masked
    assert FixedMaskingRatio(0.15).visible_count_pmf(10)[8] == 1.0
    assert FixedMaskingRatio(0.01).visible_count_pmf(10)[9] == 1.0
    assert min_visible_count(FixedMaskingRatio(1.0), 7) == 0


def test_uniform_ratio_is_masked_diffusion():
    pmf = UniformMaskingRatio().visible_count_pmf(6)
    assert np.allclose(pmf[:6], 1 / 6) and pmf[6] == 0
    # "mask each coordinate with probability t ~ U[0,1], given at least one masked" has the same law
    for masked in range(1, 7):
        prob, _ = integrate.quad(lambda t, c=masked: stats.binom.pmf(c, 6, t), 0, 1)
        assert prob / (1 - 1 / 7) == pytest.approx(pmf[6 - masked], abs=1e-10)
    capped = UniformMaskingRatio(0.0, 0.5).visible_count_pmf(8)  # masked count uniform on 1..4
    assert np.allclose(capped[4:8], 0.25) and capped[:4].sum() == 0
    assert min_visible_count(UniformMaskingRatio(0.0, 0.5), 8) == 4


def test_with_full_mask_and_mixtures():
    blind = UniformMaskingRatio(0.0, 0.5)
    pmf = with_full_mask(blind, 0.1).visible_count_pmf(8)
    assert pmf[0] == pytest.approx(0.1) and pmf.sum() == pytest.approx(1.0)
    assert np.allclose(pmf[4:8], 0.9 * 0.25)
    assert min_visible_count(with_full_mask(blind, 0.0), 8) == 4
    mix = MixtureSchedule((FixedVisibleCount(1), FixedVisibleCount(3)), (0.25, 0.75))
    assert np.allclose(mix.visible_count_pmf(4), [0, 0.25, 0, 0.75, 0])


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: with_full_mask(UniformMaskingRatio(), 1.0), "pi0=1.0"),
        (lambda: with_full_mask(UniformMaskingRatio(), -0.2), "pi0=-0.2"),
        (lambda: FixedVisibleCount(-1), "visible=-1"),
        (lambda: FixedVisibleCount(4).visible_count_pmf(4), "visible=4"),
        (lambda: FixedMaskingRatio(0.0), "ratio=0.0"),
        (lambda: FixedMaskingRatio(1.5), "ratio=1.5"),
        (lambda: UniformMaskingRatio(0.6, 0.4), "low=0.6"),
        (lambda: MixtureSchedule((FixedVisibleCount(0),), (0.5,)), "weights=(0.5,)"),
        (lambda: UniformMaskingRatio().visible_count_pmf(0), "got 0"),
    ],
)
def test_schedule_validation(build, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        build()


def test_visible_sets_follow_the_schedule():
    schedule = with_full_mask(UniformMaskingRatio(0.0, 0.5), 0.2)
    visible = sample_visible_sets(schedule, 8, 40_000, np.random.default_rng(0))
    counts = np.bincount(visible.sum(axis=1), minlength=9)
    pmf = schedule.visible_count_pmf(8)
    assert counts[pmf == 0].sum() == 0
    assert stats.chisquare(counts[pmf > 0], 40_000 * pmf[pmf > 0]).pvalue > 1e-3
    # given its size, the visible set is uniform: every coordinate equally often visible
    per_coordinate = visible[visible.sum(axis=1) == 5].sum(axis=0)
    assert stats.chisquare(per_coordinate).pvalue > 1e-3


# --------------------------------------------------------------------------------------------------
# Per-sequence rates (training)


def test_rates_follow_each_schedule():
    gen = torch.Generator().manual_seed(0)
    assert sample_rates("fixed", 8, 0.15, 0.0, gen) is None
    uniform = sample_rates("uniform", 20_000, 0.15, 0.0, gen)
    assert uniform.min() > 0 and uniform.max() <= 1 and abs(uniform.mean().item() - 0.5) < 0.01
    mixture = sample_rates("mixture", 20_000, 0.15, 0.1, gen)
    assert set(mixture.unique().tolist()) == {0.15, 1.0}
    assert abs((mixture == 1.0).double().mean().item() - 0.1) < 0.01
    with pytest.raises(ValueError, match=re.escape(f"unknown schedule 'cosine'; choose one of {SCHEDULES}")):
        sample_rates("cosine", 4, 0.15, 0.0, gen)


def test_named_rates_are_bit_identical_to_the_formulas_they_replaced():
    """Training draws the same rates, from the same generator state, as before the schedules became one
    family: uniform = 1 - U[0, 1); mixture = 1 where U[0, 1) < pi0, else p."""
    for seed in range(3):
        reference, new = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        for batch_size in (1, 7, 256):
            expected = 1.0 - torch.rand(batch_size, generator=reference, dtype=torch.float64)
            assert torch.equal(sample_rates("uniform", batch_size, 0.15, 0.0, new), expected)
            full = torch.rand(batch_size, generator=reference, dtype=torch.float64) < 0.3
            expected = torch.where(full, torch.ones(batch_size, dtype=torch.float64),
                                   torch.full((batch_size,), 0.15, dtype=torch.float64))
            assert torch.equal(sample_rates("mixture", batch_size, 0.15, 0.3, new), expected)
            assert sample_rates("fixed", batch_size, 0.15, 0.0, new) is None  # draws nothing
        assert torch.equal(torch.rand(5, generator=reference), torch.rand(5, generator=new))  # still in step


def test_named_schedules_are_members_of_the_family():
    # each name's law on the visible count of a 20-token sequence, by hand: fixed 0.15 masks round(3.0) = 3
    # tokens (17 visible); uniform masks 1..20 tokens with probability 1/20 each; the mixture masks all 20
    # with probability 0.1 and 3 otherwise
    fixed, uniform, full = np.zeros(21), np.zeros(21), np.zeros(21)
    fixed[17] = 1.0
    uniform[:20] = 1 / 20
    full[[0, 17]] = [0.1, 0.9]
    np.testing.assert_allclose(training_schedule("fixed", 0.15, 0.0).visible_count_pmf(20), fixed, atol=1e-15)
    np.testing.assert_allclose(training_schedule("uniform", 0.15, 0.0).visible_count_pmf(20), uniform, atol=1e-15)
    np.testing.assert_allclose(training_schedule("mixture", 0.15, 0.1).visible_count_pmf(20), full, atol=1e-15)
    assert set(SCHEDULES) == {"fixed", "uniform", "mixture"}
    # the full-mask component is the fully-masked context of the theory
    assert np.array_equal(FixedMaskingRatio(1.0).visible_count_pmf(9), FixedVisibleCount(0).visible_count_pmf(9))
    with pytest.raises(ValueError, match="no masking rate independent of the sequence length"):
        FixedVisibleCount(2).sample_rates(4, torch.Generator())


def test_sampled_rates_follow_the_theory_law():
    gen = torch.Generator().manual_seed(1)
    n = 60_000
    # masked diffusion: masking each of N coordinates at the drawn rate, given at least one masked,
    # gives the theory's law of the visible count
    rates = UniformMaskingRatio().sample_rates(n, gen)
    masked = (torch.rand(n, 6, generator=gen, dtype=torch.float64) < rates[:, None]).sum(1).numpy()
    visible = 6 - masked[masked > 0]
    pmf = UniformMaskingRatio().visible_count_pmf(6)
    assert stats.chisquare(np.bincount(visible, minlength=7)[:6], visible.size * pmf[:6]).pvalue > 1e-3
    # capped: the rate t ~ U(0, 0.5] masks ceil(t N) coordinates in the theory
    capped = UniformMaskingRatio(0.0, 0.5)
    rates = capped.sample_rates(n, gen).numpy()
    assert rates.min() > 0 and rates.max() <= 0.5
    visible = 8 - np.ceil(rates * 8).astype(int)
    pmf = capped.visible_count_pmf(8)
    assert stats.chisquare(np.bincount(visible, minlength=9)[pmf > 0], n * pmf[pmf > 0]).pvalue > 1e-3
    # full-mask mass on top of a random component: rate 1 with probability pi0, else the component's law
    rates = with_full_mask(capped, 0.2).sample_rates(n, gen).numpy()
    full = rates == 1.0
    assert stats.binomtest(int(full.sum()), n, 0.2).pvalue > 1e-3
    assert stats.kstest(rates[~full], stats.uniform(0, 0.5).cdf).pvalue > 1e-3


def test_mixture_rates_pick_each_component_by_its_weight():
    schedule = MixtureSchedule((FixedMaskingRatio(0.1), FixedMaskingRatio(0.4), FixedMaskingRatio(0.9)),
                               (0.5, 0.3, 0.2))
    rates = schedule.sample_rates(30_000, torch.Generator().manual_seed(2)).numpy()
    counts = [int((rates == r).sum()) for r in (0.1, 0.4, 0.9)]
    assert sum(counts) == 30_000
    assert stats.chisquare(counts, [15_000, 9_000, 6_000]).pvalue > 1e-3


@pytest.mark.parametrize("strategy", ["random", "whole_word", "span", "typhoon"])
def test_full_mask_rows_and_rates_are_honoured(strategy, mrpc_batch, mrpc_tokenized, tokenizer):
    from typhoon.data.batching import token_counts

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
