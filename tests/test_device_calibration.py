"""Typhoon's state on a device (``TyphoonMasking.learn_on``, :mod:`typhoon.masking.device_calibration`) against
the numpy path, which is the reference: the same steps of saliency, in every calibration and 2023 rule, give
the same weights, probabilities and per-row token probabilities to float64 rounding. And the device path reads
nothing back to the host: run on ``meta`` tensors (shapes without values), any ``.item()``, ``nonzero`` or
boolean index would raise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from typhoon.masking import device_calibration, get_strategy

V, ROWS, LENGTH = 40, 6, 24
SPECIAL_IDS = (0, 1)  # [CLS], [SEP]; id 2 is padding


def synthetic_batch(seed: int) -> dict[str, torch.Tensor]:
    """Rows of Zipf-ish ids in 3..V-1 (types 30+ rare), [CLS] first, [SEP] last, right padding."""
    g = torch.Generator().manual_seed(seed)
    ids = (torch.distributions.Geometric(probs=torch.tensor(0.12)).sample((ROWS, LENGTH)).long() % (V - 3)) + 3
    lengths = torch.randint(8, LENGTH + 1, (ROWS,), generator=g)
    attention = torch.arange(LENGTH)[None, :] < lengths[:, None]
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = True
    special[torch.arange(ROWS), lengths - 1] = True
    ids[:, 0] = SPECIAL_IDS[0]
    ids[torch.arange(ROWS), lengths - 1] = SPECIAL_IDS[1]
    ids = torch.where(attention, ids, 2)
    return {"input_ids": ids, "attention_mask": attention.long(), "special_tokens_mask": special.long()}


def corpus_counts() -> tuple[np.ndarray, np.ndarray]:
    counts, special = np.zeros(V, dtype=np.int64), np.zeros(V, dtype=np.int64)
    for seed in range(20):
        b = synthetic_batch(100 + seed)
        real = b["attention_mask"].bool()
        np.add.at(counts, b["input_ids"][real & ~b["special_tokens_mask"].bool()].numpy(), 1)
        np.add.at(special, b["input_ids"][real & b["special_tokens_mask"].bool()].numpy(), 1)
    counts[V - 2] = 0  # a type the text never holds
    return counts, special


def run_steps(strategy, steps: int = 12) -> list[np.ndarray]:
    """Draw masks and feed a heavy-tailed saliency for ``steps`` batches; the probabilities after each."""
    torch.manual_seed(0)
    out = []
    for step in range(steps):
        batch = synthetic_batch(step)
        g = torch.Generator().manual_seed(1000 + step)
        rates = torch.rand(ROWS, generator=g, dtype=torch.float64) * 0.5
        masked_ids, labels = strategy(batch, g, rate=rates, mask_token_id=3, vocab_size=V)
        saliency = torch.distributions.StudentT(2.0).sample(batch["input_ids"].shape)
        strategy.update(batch, labels != -100, saliency)
        out.append(strategy.probs)
    return out


CASES = [dict(calibration=c) for c in ("minmax", "rank", "softmax")] + [
    dict(calibration="minmax", ema_start="zeros", unseen="top", budget="all_ids", p=0.3),
    dict(calibration="rank", delta=1.0, unseen="top"),
    dict(calibration="minmax", delta=1.0, lam=1.0),
]


@pytest.mark.parametrize("params", CASES, ids=lambda d: "-".join(f"{k}={v}" for k, v in d.items()))
def test_the_device_path_learns_what_the_numpy_path_learns(params):
    counts, special = corpus_counts()
    on_host = get_strategy("typhoon", **params)
    on_device = get_strategy("typhoon", **params)
    for strategy in (on_host, on_device):
        strategy.prepare(counts, special_counts=special)
    on_device.learn_on("cpu")
    assert on_device.device == torch.device("cpu") and on_host.device is None
    host_probs, device_probs = run_steps(on_host), run_steps(on_device)
    for a, b in zip(host_probs, device_probs, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(on_device.seen, on_host.seen)
    np.testing.assert_allclose(on_device.weights, on_host.weights, rtol=1e-12, atol=1e-15, equal_nan=True)
    assert on_host.steps == on_device.steps == 12
    # per-row budgets, schedules' way: every row its own rate, 0 and 1 included
    ids = synthetic_batch(77)["input_ids"]
    rates = torch.tensor([0.0, 0.05, 0.15, 0.5, 0.9, 1.0], dtype=torch.float64)
    np.testing.assert_allclose(on_device.token_probs(ids, rates).numpy(), on_host.token_probs(ids, rates).numpy(),
                               rtol=1e-12, atol=1e-15)
    for rate in (0.0, 0.15, 0.95, 1.0):
        np.testing.assert_allclose(on_device.probs_for_rate(rate), on_host.probs_for_rate(rate), rtol=1e-12, atol=1e-15)


def test_the_state_moves_both_ways_and_saves_the_same():
    counts, special = corpus_counts()
    strategy = get_strategy("typhoon", calibration="rank")
    strategy.prepare(counts, special_counts=special)
    run_steps(strategy, steps=5)
    before = strategy.state_dict()
    strategy.learn_on("cpu")
    moved = strategy.state_dict()
    strategy.learn_on(None)
    back = strategy.state_dict()
    for key in ("weights", "seen", "probs", "counts"):
        np.testing.assert_allclose(moved[key], before[key], rtol=1e-12, equal_nan=True)
        np.testing.assert_array_equal(back[key], moved[key])
    # a saved state loads into a strategy that learns on a device
    fresh = get_strategy("typhoon", calibration="rank").learn_on("cpu")
    fresh.load_state_dict(before)
    np.testing.assert_allclose(fresh.probs, before["probs"], rtol=1e-12)
    assert fresh.steps == 5


def test_min_max_positions_and_ranks_by_hand():
    weights = torch.tensor([3.0, float("nan"), 1.0, 3.0, 2.0, 7.0], dtype=torch.float64)
    seen = torch.tensor([True, False, True, True, True, False])  # type 5's weight is stale: not seen
    minmax = device_calibration.preference(weights, seen, "minmax", delta=0.4, tau=1.0, unseen="neutral")
    # seen weights 3, 1, 3, 2: min 1, max 3 -> z = 1, 0, 1, 0.5; band 0.6 + 0.4 z; unseen at 0.8
    torch.testing.assert_close(minmax, torch.tensor([1.0, 0.8, 0.6, 1.0, 0.8, 0.8], dtype=torch.float64))
    rank = device_calibration.preference(weights, seen, "rank", delta=1.0, tau=1.0, unseen="top")
    # ranks among 3, 1, 3, 2: 2.5, 0, 2.5, 1 (the two 3s share 2 and 3) over n - 1 = 3; unseen at the top, 1
    torch.testing.assert_close(rank, torch.tensor([2.5 / 3, 1.0, 0.0, 2.5 / 3, 1 / 3, 1.0], dtype=torch.float64))


def test_the_device_path_reads_nothing_back_to_the_host():
    """On ``meta`` tensors every operation must run from shapes alone: reading a value (``.item()``, ``bool()``,
    ``nonzero``, a boolean index, a slice by a count) raises there, as it would make a GPU wait."""
    meta = torch.device("meta")
    ids = torch.zeros(ROWS, LENGTH, dtype=torch.long, device=meta)
    flags = torch.zeros(ROWS, LENGTH, dtype=torch.bool, device=meta)
    saliency = torch.zeros(ROWS, LENGTH, device=meta)
    present, estimate = device_calibration.batch_estimate(ids, flags, flags, saliency, V)
    weights = torch.zeros(V, dtype=torch.float64, device=meta)
    weights, seen = device_calibration.ema_update(weights, present, present, estimate, 0.8)
    for method in ("minmax", "rank", "softmax"):
        pref = device_calibration.preference(weights, seen, method, 0.4, 1.0, "top")
        for closed_form in (False, True):
            budget = device_calibration.DeviceBudget.solve_for(pref, weights, closed_form)
            probs = budget.token_probs(ids, torch.zeros(ROWS, dtype=torch.float64, device=meta))
            assert probs.shape == (ROWS, LENGTH) and probs.device == meta
