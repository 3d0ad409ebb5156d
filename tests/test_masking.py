"""Masking strategies on real MRPC batches: budgets, special tokens, determinism, word alignment,
span law, per-row rates, corruption and parameter validation."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from typhoon.data.batching import collate
from typhoon.masking import (
    STRATEGIES,
    STRATEGY_PARAMS,
    MaskingStrategy,
    get_strategy,
    load_state,
    maskable_positions,
    sample_span_lengths,
    span_length_pmf,
    strategy_names,
)

NAMES = ["random", "whole_word", "span", "typhoon", "typhoon_rank", "typhoon_softmax", "typhoon_task"]
FAST = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def big_batch(mrpc_tokenized, tokenizer):
    """128 real MRPC train pairs in one padded batch (contract keys, see docs/CONTRACTS.md)."""
    split = mrpc_tokenized["train"]
    return collate([split[i] for i in range(128)], tokenizer.pad_token_id)


@pytest.fixture(scope="module")
def counts(big_batch, tokenizer):
    """Token counts of the batch itself, so that Typhoon's corpus-level budget is exact on it."""
    ids = big_batch["input_ids"][maskable_positions(big_batch)]
    return np.bincount(ids.numpy(), minlength=len(tokenizer)).astype(np.int64)


def build(name: str, batch, counts, **params) -> MaskingStrategy:
    """A ready strategy; Typhoon gets one update from a fixed fake saliency so that pi is not uniform."""
    strategy = get_strategy(name, **params)
    strategy.prepare(counts)
    if strategy.needs_saliency:
        g = torch.Generator().manual_seed(1234)
        saliency = torch.randn(batch["input_ids"].shape, generator=g)
        strategy.update(batch, strategy.select(batch, g), saliency)
        assert strategy.probs.min() < strategy.probs.max()
    return strategy


def empirical_rate(strategy, batch, seed: int, draws: int, rate=None) -> tuple[float, float]:
    """The share of maskable tokens selected over ``draws`` selections, and its standard error.

    Rows are drawn independently of each other and of earlier draws, so the variance of the total is
    the sum over rows of each row's variance, estimated from its counts across the draws.
    """
    g = torch.Generator().manual_seed(seed)
    n = draws * int(maskable_positions(batch).sum())
    per_row = torch.stack([strategy.select(batch, g, rate=rate).sum(dim=1) for _ in range(draws)]).double()
    return float(per_row.sum()) / n, float((draws * per_row.var(dim=0).sum()).sqrt()) / n


def assert_rate(strategy, batch, seed: int, expected: float, draws: int = 40, rate=None) -> None:
    """The expected share selected is exactly ``expected``: the mean lies within 5 standard errors
    (a false alarm once in 1.7 million; at p = 0.15 on these 128 MRPC pairs, 5 standard errors are
    about 0.004 for random and whole-word masking and 0.001 for span masking)."""
    mean, se = empirical_rate(strategy, batch, seed, draws, rate)
    assert se > 0 and abs(mean - expected) < 5 * se, (mean, expected, se)


def word_is_split(selected: torch.Tensor, word_ids: torch.Tensor) -> bool:
    """True if some word has both selected and unselected pieces (vectorized per (row, word))."""
    valid = word_ids >= 0
    n_slots = int(word_ids.max()) + 1
    ids = word_ids.clamp(min=0)
    n_tokens = torch.zeros(word_ids.shape[0], n_slots, dtype=torch.long).scatter_add_(1, ids, valid.long())
    n_sel = torch.zeros_like(n_tokens).scatter_add_(1, ids, (selected & valid).long())
    return bool(((n_sel > 0) & (n_sel < n_tokens)).any())


# --------------------------------------------------------------------------------------------------
# Properties shared by every strategy


def test_each_declared_strategy_has_its_class():
    """The registry's classes are the strategies declared in typhoon.masking.params (torch-free, read by the command
    line), in the declared order, each class taking the parameters declared under its name."""
    assert list(STRATEGIES) == list(STRATEGY_PARAMS)
    for name, cls in STRATEGIES.items():
        assert cls.PARAMS == STRATEGY_PARAMS[name], name


def test_registry_builds_every_strategy_under_its_name():
    for name, cls in STRATEGIES.items():
        assert type(get_strategy(name)) is cls and cls().name == name
    assert {"random", "whole_word", "span", "typhoon"} <= set(STRATEGIES) and set(NAMES) <= set(strategy_names())
    assert get_strategy("typhoon_rank").calibration == "rank"
    assert get_strategy("typhoon_softmax").name == "typhoon_softmax"
    assert get_strategy("typhoon").needs_saliency and not get_strategy("random").needs_saliency


@pytest.mark.parametrize("name", NAMES)
@FAST
@given(p=st.floats(0.05, 0.6), seed=st.integers(0, 2**31 - 1))
def test_empirical_rate_matches_budget(name, p, seed, big_batch, counts):
    strategy = build(name, big_batch, counts, p=p)
    assert_rate(strategy, big_batch, seed, p)


@pytest.mark.parametrize("name", NAMES)
@FAST
@given(p=st.floats(0.05, 0.95), seed=st.integers(0, 2**31 - 1))
def test_special_and_padding_never_selected(name, p, seed, big_batch, counts):
    strategy = build(name, big_batch, counts, p=p)
    g = torch.Generator().manual_seed(seed)
    forbidden = big_batch["special_tokens_mask"] | (big_batch["attention_mask"] == 0)
    for rate in (None, torch.ones(big_batch["input_ids"].shape[0])):
        selected = strategy.select(big_batch, g, rate=rate)
        assert selected.dtype == torch.bool and selected.shape == big_batch["input_ids"].shape
        assert not (selected & forbidden).any()


@pytest.mark.parametrize("name", NAMES)
@FAST
@given(seed=st.integers(0, 2**31 - 2))
def test_same_seed_same_mask_and_new_seed_new_mask(name, seed, big_batch, counts):
    strategy = build(name, big_batch, counts)
    first = strategy.select(big_batch, torch.Generator().manual_seed(seed))
    again = strategy.select(big_batch, torch.Generator().manual_seed(seed))
    other = strategy.select(big_batch, torch.Generator().manual_seed(seed + 1))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    g = torch.Generator().manual_seed(seed)  # dynamic masking: a new mask on every call
    assert not torch.equal(strategy.select(big_batch, g), strategy.select(big_batch, g))


@pytest.mark.parametrize("name", NAMES)
def test_rate_tensor_per_row(name, big_batch, counts):
    strategy = build(name, big_batch, counts)
    n_rows = big_batch["input_ids"].shape[0]
    maskable = maskable_positions(big_batch)
    g = torch.Generator().manual_seed(0)
    everything = strategy.select(big_batch, g, rate=torch.ones(n_rows))
    assert torch.equal(everything, maskable)  # rate 1.0 masks the whole sequence
    assert not strategy.select(big_batch, g, rate=torch.zeros(n_rows)).any()

    rates = torch.where(torch.arange(n_rows) % 2 == 0, 0.1, 0.5)
    hits = torch.zeros(n_rows)
    for _ in range(20):
        hits += strategy.select(big_batch, g, rate=rates).sum(dim=1)
    per_row_rate = hits / (20 * maskable.sum(dim=1))
    assert abs(per_row_rate[0::2].mean() - 0.1) < 0.02
    assert abs(per_row_rate[1::2].mean() - 0.5) < 0.03
    assert_rate(strategy, big_batch, 1, 0.3, rate=0.3)


def test_rate_validation(big_batch):
    """A per-row rate is refused out of [0, 1] with one message, by a strategy and by a budget solver alike (0 is
    a rate, never a budget p: that is (0, 1])."""
    from typhoon.masking import ClosedFormBudget

    strategy = get_strategy("random")
    g = torch.Generator().manual_seed(0)
    says = re.escape("a masking rate must lie in [0, 1], got [1.5")
    with pytest.raises(ValueError, match=says):
        strategy.select(big_batch, g, rate=torch.full((128,), 1.5))
    with pytest.raises(ValueError, match=says):
        ClosedFormBudget(np.ones(4), np.ones(4)).solve(1.5)
    assert ClosedFormBudget(np.ones(4), np.ones(4)).solve(0.0).tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="one value per row"):
        strategy.select(big_batch, g, rate=torch.full((3,), 0.5))
    with pytest.raises(ValueError, match=re.escape("p must lie in (0, 1], got 0.0")):
        get_strategy("random", p=0.0)


# --------------------------------------------------------------------------------------------------
# Word alignment and spans


@pytest.mark.parametrize("name", ["whole_word", "span"])
@FAST
@given(p=st.floats(0.05, 0.9), seed=st.integers(0, 2**31 - 1))
def test_words_are_never_split(name, p, seed, big_batch, counts):
    strategy = build(name, big_batch, counts, p=p)
    g = torch.Generator().manual_seed(seed)
    for _ in range(5):
        assert not word_is_split(strategy.select(big_batch, g), big_batch["word_ids"])


def test_random_masking_does_split_words(big_batch):
    """Sanity check of the splitting detector: token-level masking splits multi-piece words."""
    g = torch.Generator().manual_seed(0)
    assert word_is_split(get_strategy("random", p=0.5).select(big_batch, g), big_batch["word_ids"])


def test_span_lengths_follow_truncated_geometric_law():
    g = torch.Generator().manual_seed(7)
    lengths = sample_span_lengths((20_000,), g).numpy()
    observed = np.bincount(lengths, minlength=11)[1:]
    pmf = stats.geom(0.2).pmf(np.arange(1, 11))
    pmf /= pmf.sum()  # clipped at 10 words = truncated and renormalised (SpanBERT, mean 3.8)
    np.testing.assert_allclose(span_length_pmf().numpy(), pmf, rtol=1e-12)
    assert lengths.min() == 1 and lengths.max() == 10
    assert stats.chisquare(observed, pmf * len(lengths)).pvalue > 1e-3
    assert abs(lengths.mean() - 3.797) < 0.05


def _masked_word_runs(selected: torch.Tensor, word_ids: torch.Tensor) -> np.ndarray:
    """Lengths (in words) of maximal runs of consecutive masked words, over all rows."""
    runs = []
    for row_sel, row_words in zip(selected, word_ids, strict=True):
        n_words = int(row_words.max()) + 1
        masked = np.zeros(n_words, dtype=bool)
        masked[row_words[row_sel].numpy()] = True
        padded = np.concatenate(([False], masked, [False])).astype(int)
        edges = np.flatnonzero(np.diff(padded))
        runs.extend(edges[1::2] - edges[0::2])
    return np.asarray(runs)


def test_spans_are_contiguous_runs_of_words(big_batch, counts):
    """Realised runs are long (about the span law's 3.8 words, cut by budgets and row ends) where
    whole-word masking gives isolated words."""
    g = torch.Generator().manual_seed(3)
    span_runs = _masked_word_runs(get_strategy("span").select(big_batch, g), big_batch["word_ids"])
    word_runs = _masked_word_runs(get_strategy("whole_word").select(big_batch, g), big_batch["word_ids"])
    assert 2.3 < span_runs.mean() < 4.5
    assert word_runs.mean() < 1.3


# --------------------------------------------------------------------------------------------------
# Corruption and labels


@pytest.mark.parametrize("name", NAMES)
def test_labels_and_bert_corruption(name, big_batch, counts, tokenizer):
    strategy = build(name, big_batch, counts, p=0.5)
    original = big_batch["input_ids"].clone()
    g = torch.Generator().manual_seed(5)
    mask_id, vocab = tokenizer.mask_token_id, len(tokenizer)
    n_masked = n_mask_token = n_changed = 0
    for _ in range(10):
        inputs, labels = strategy(big_batch, g, mask_token_id=mask_id, vocab_size=vocab)
        selected = labels != -100
        assert torch.equal(big_batch["input_ids"], original)  # never modified in place
        assert torch.equal(labels[selected], original[selected])
        assert torch.equal(inputs[~selected], original[~selected])
        assert ((inputs >= 0) & (inputs < vocab)).all()
        n_masked += int(selected.sum())
        n_mask_token += int((inputs[selected] == mask_id).sum())
        n_changed += int(((inputs != original) & (inputs != mask_id) & selected).sum())
    assert abs(n_mask_token / n_masked - 0.8) < 0.015
    assert abs(n_changed / n_masked - 0.1) < 0.01  # random tokens (a draw equal to the original is rare)
    assert abs(1 - (n_mask_token + n_changed) / n_masked - 0.1) < 0.01


def test_mask_only_corruption(big_batch, tokenizer):
    strategy = get_strategy("random", p=0.3, corruption="mask_only")
    inputs, labels = strategy(big_batch, torch.Generator().manual_seed(0), mask_token_id=tokenizer.mask_token_id,
                              vocab_size=len(tokenizer))
    selected = labels != -100
    assert selected.any() and (inputs[selected] == tokenizer.mask_token_id).all()
    assert torch.equal(inputs[~selected], big_batch["input_ids"][~selected])


# --------------------------------------------------------------------------------------------------
# Typhoon specifics


def test_typhoon_before_any_update_is_uniform(big_batch, counts):
    strategy = get_strategy("typhoon", p=0.2)
    strategy.prepare(counts)
    np.testing.assert_allclose(strategy.probs, 0.2, rtol=1e-12)
    assert_rate(strategy, big_batch, 0, 0.2)
    unprepared = get_strategy("typhoon", p=0.2)  # no counts at all: plain random masking
    assert_rate(unprepared, big_batch, 0, 0.2)


def test_typhoon_with_delta_one_masks_any_per_row_rate(big_batch, counts):
    """delta = 1 gives the least salient type preference 0; a mask schedule's rate above the share of
    the other types must still be met (it spills onto the zero-preference types), not refused."""
    strategy = get_strategy("typhoon", delta=1.0)
    strategy.prepare(counts)
    ids, maskable = big_batch["input_ids"], maskable_positions(big_batch)
    frequent = int(counts.argmax())  # make the most frequent type the least salient
    saliency = torch.where(ids == frequent, -100.0, torch.randn(ids.shape, generator=torch.Generator().manual_seed(0)))
    strategy.update(big_batch, maskable, saliency)
    assert strategy.probs[frequent] == 0.0
    positive_share = 1 - counts[frequent] / counts.sum()
    rate = (1 + positive_share) / 2
    rates = torch.full((ids.shape[0],), rate, dtype=torch.float64)
    probs = strategy.token_probs(ids, rates)
    np.testing.assert_array_equal(probs, torch.as_tensor(strategy.probs_for_rate(rate))[ids])
    assert_rate(strategy, big_batch, 0, rate, rate=rates)
    assert 0 < probs[ids == frequent].min() < 1  # the spill reaches the zero-preference type


def test_typhoon_samples_with_its_probabilities(big_batch, counts):
    """Per token type, the selection frequency follows pi_v (the lookup probs[input_ids])."""
    strategy = build("typhoon", big_batch, counts, delta=1.0)
    g = torch.Generator().manual_seed(0)
    ids = big_batch["input_ids"]
    maskable = maskable_positions(big_batch)
    hits = torch.zeros(ids.shape)
    draws = 200
    for _ in range(draws):
        hits += strategy.select(big_batch, g)
    expected = torch.as_tensor(strategy.probs, dtype=torch.float32)[ids][maskable]
    observed = (hits / draws)[maskable]
    corr = np.corrcoef(expected.numpy(), observed.numpy())[0, 1]
    assert corr > 0.7
    assert abs(observed.mean() - expected.mean()) < 0.005
    # a per-row rate uses the same preferences re-solved (water-filled, pi_v = min(1, beta b_v)) for that
    # budget; checked by hand: the solution at a rate spends exactly that share of the token mass, wherever
    # neither solution is capped at 1 it is the solution at the configured rate times one common factor, and
    # the types capped at 1 are the most preferred ones (at 0.9 some are)
    base = np.asarray(strategy.probs, dtype=float)
    token_mass = np.asarray(strategy.counts, dtype=float)
    for rate in (0.4, 0.9):
        at_rate = np.asarray(strategy.probs_for_rate(rate), dtype=float)
        assert (token_mass * at_rate).sum() == pytest.approx(rate * token_mass.sum(), rel=1e-12)
        free = (token_mass > 0) & (base > 0) & (at_rate < 1)
        factor = at_rate[free] / base[free]
        assert free.sum() >= 10 and factor.min() > 1
        np.testing.assert_allclose(factor, factor[0], rtol=1e-9)
    capped = (token_mass > 0) & (at_rate == 1)
    assert capped.any() and base[capped].min() >= base[free].max()
    assert strategy.probs_for_rate(1.0).min() == 1.0 and strategy.probs_for_rate(0.0).max() == 0.0
    # the batched per-row solution equals solving each row's budget on its own
    rates = torch.linspace(0.0, 1.0, ids.shape[0], dtype=torch.float64)
    token_probs = strategy.token_probs(ids, rates)
    for row in (0, 1, 40, 77, ids.shape[0] - 1):
        expected_row = strategy.probs_for_rate(float(rates[row]))[ids[row].numpy()]
        np.testing.assert_allclose(token_probs[row].numpy(), expected_row, rtol=1e-12)


def test_typhoon_state_roundtrip(tmp_path, big_batch, counts):
    strategy = build("typhoon_rank", big_batch, counts, p=0.2, delta=0.5)
    path = strategy.save(tmp_path / "run" / "masking_state.npz")
    assert path.name == "masking_state.npz" and path.is_file()
    state = load_state(path)
    assert set(state) >= {"weights", "counts", "seen", "probs", "meta"}
    assert state["weights"].dtype == np.float64 and state["counts"].dtype == np.int64
    assert np.isnan(state["weights"][~state["seen"]]).all()
    meta = state["meta"]
    assert meta["p"] == 0.2 and meta["delta"] == 0.5 and meta["calibration"] == "rank" and meta["steps"] == 1
    assert meta["kl_to_uniform"] > 0

    restored = get_strategy("typhoon_rank", p=0.2, delta=0.5)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.probs, strategy.probs)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert torch.equal(restored.select(big_batch, g1), strategy.select(big_batch, g2))
    with pytest.raises(ValueError, match="delta"):
        get_strategy("typhoon_rank", p=0.2, delta=0.3).load_state_dict(state)


def test_other_strategies_accept_counts_and_ignore_updates(big_batch, counts):
    strategy = get_strategy("span")
    strategy.prepare(counts)
    strategy.update(big_batch, torch.zeros_like(big_batch["input_ids"], dtype=torch.bool),
                    torch.zeros(big_batch["input_ids"].shape))
    assert strategy.state_dict()["meta"]["name"] == "span"


# --------------------------------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("bert", {}, r"unknown masking strategy 'bert'.*random.*whole_word.*span.*typhoon"),
        ("random", {"p": 0.0}, r"p must lie in \(0, 1\], got 0.0"),
        ("random", {"p": 1.0001}, r"p must lie in \(0, 1\]"),
        ("random", {"p": "0.15"}, "p must be a real number"),
        ("whole_word", {"p": float("nan")}, "nan"),
        ("random", {"corruption": "bart"}, r"corruption must be one of \['bert', 'mask_only'\], got 'bart'"),
        ("random", {"delta": 0.4}, r"unknown parameter\(s\) \['delta'\]; valid: \['p', 'corruption', 'specials'\]"),
        ("span", {"max_span": 0}, "max_span must be an integer >= 1"),
        ("typhoon", {"delta": 1.5}, r"delta must lie in \[0, 1\], got 1.5"),
        ("typhoon", {"lam": 0.0}, r"lam must lie in \(0, 1\], got 0.0"),
        ("typhoon", {"tau": -1.0}, r"tau must be a finite number > 0, got -1.0"),
        ("typhoon", {"calibration": "zscore"}, r"calibration must be one of \['minmax', 'rank', 'softmax'\]"),
        ("typhoon_rank", {"calibration": "softmax"}, "fixes calibration='rank'"),
    ],
)
def test_bad_parameters_raise_helpful_errors(name, params, message):
    with pytest.raises(ValueError, match=message):
        get_strategy(name, **params)


def test_defaults():
    strategy = get_strategy("typhoon")
    assert (strategy.p, strategy.delta, strategy.lam, strategy.calibration, strategy.corruption) == (
        0.15, 0.4, 0.8, "minmax", "bert")
    assert get_strategy("span").params == {"p": 0.15, "corruption": "bert", "geometric_p": 0.2, "max_span": 10}


@pytest.mark.parametrize("name", ["random", "whole_word", "span", "typhoon", "typhoon_2023", "typhoon_softmax"])
def test_p_one_selects_every_maskable_token(big_batch, tokenizer, name):
    """p = 1 (allowed, as transformers allows mlm_probability=1) selects every real, non-special token and nothing
    else, for every built-in strategy; Typhoon whether or not it has counts and a learnt state."""
    strategy = get_strategy(name, p=1.0)
    maskable = big_batch["attention_mask"].bool() & ~big_batch["special_tokens_mask"].bool()
    states = [strategy]
    if strategy.needs_saliency:
        learnt = get_strategy(name, p=1.0)
        learnt.prepare(np.bincount(big_batch["input_ids"][maskable].numpy(), minlength=len(tokenizer)),
                       special_counts=np.bincount(big_batch["input_ids"][~maskable].numpy(), minlength=len(tokenizer)))
        saliency = torch.randn(big_batch["input_ids"].shape, generator=torch.Generator().manual_seed(0))
        learnt.update(big_batch, maskable & (torch.rand(maskable.shape) < 0.5), saliency)
        states.append(learnt)
    for each in states:
        selected = each.select(big_batch, torch.Generator().manual_seed(1))
        assert torch.equal(selected, maskable), name
