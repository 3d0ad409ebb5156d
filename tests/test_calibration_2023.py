"""The paper's 2023 calibration rules (``ema_start``, ``unseen``, ``budget``; all three: ``typhoon_2023``),
checked against a hand computation on a vocabulary of a dozen types, against a transcription of the 2023
code's rule written here from its description (shift by the max, never-updated types left at 0, min-max over
the whole array, band, beta over every input id), and one rule at a time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from typhoon.masking import get_strategy, load_state
from typhoon.masking.calibration import ClosedFormBudget, preference, realised_rate

# The dozen types: 0 = [CLS], 1 = [SEP] (special), 2-11 words. Two sequences' worth of text.
SPECIAL = np.array([2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
COUNTS = np.array([0, 0, 4, 2, 1, 3, 2, 0, 0, 0, 0, 0])  # type 6 is in the text but never updated
WEIGHTS = np.full(12, np.nan)
WEIGHTS[[2, 3, 4, 5]] = [1.0, 3.0, 2.0, 5.0]  # min 1, max 5: z = 0, 0.5, 0.25, 1
P, DELTA = 0.3, 0.4


def test_unseen_types_get_the_top_preference_and_seen_ones_the_band():
    top = preference(WEIGHTS, "minmax", DELTA, unseen="top")
    neutral = preference(WEIGHTS, "minmax", DELTA)
    # b = 0.6 + 0.4 z for the seen types; every other type (the specials and type 6 among them) at 1.0
    np.testing.assert_allclose(top, [1, 1, 0.6, 0.8, 0.7, 1.0, 1, 1, 1, 1, 1, 1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(neutral[[0, 1, 6, 11]], 0.8, rtol=0, atol=1e-15)  # the band's midpoint
    np.testing.assert_array_equal(top[[2, 3, 4, 5]], neutral[[2, 3, 4, 5]])


def test_closed_form_budget_by_hand():
    """N = 16 input ids (4 of them special); sum b c = 2 + 2 + 2.4 + 1.6 + 0.7 + 3 + 2 = 13.7, so
    beta = 0.3 * 16 / 13.7 = 48 / 137, and the 12 maskable tokens are masked at 9.7 beta / 12 < 0.3."""
    pref = preference(WEIGHTS, "minmax", DELTA, unseen="top")
    solver = ClosedFormBudget(pref, COUNTS + SPECIAL)
    (k,), (beta,), (floor,) = solver.coefficients([P])
    assert (k, floor) == (0, 0.0)
    assert beta == pytest.approx(48 / 137, rel=1e-15)
    probs = solver.solve(P)
    np.testing.assert_allclose(probs[[2, 3, 4, 5, 6]], np.array([0.6, 0.8, 0.7, 1.0, 1.0]) * 48 / 137, rtol=1e-15)
    assert realised_rate(probs, COUNTS) == pytest.approx(9.7 * 48 / 137 / 12, rel=1e-14)  # 0.2832...
    assert realised_rate(probs, COUNTS) < P
    # the formula's budget over every id is met; the specials' share (4 beta) is what is lost
    assert ((COUNTS + SPECIAL) * probs).sum() == pytest.approx(P * 16, rel=1e-14)
    assert P * 16 - (COUNTS * probs).sum() == pytest.approx(4 * 48 / 137, rel=1e-13)


def original_rates(ema: np.ndarray, all_ids_counts: np.ndarray, p: float, spread_frac: float) -> np.ndarray:
    """The 2023 rule as its code ran it, from its description: zeros where never updated, the updated ones
    shifted so that their max is 0, the whole array min-max scaled to [0, 1], put in the band, scaled by
    p N / sum(b c) over every input id."""
    w = ema.astype(np.float64).copy()
    touched = w != 0
    w[touched] -= w[touched].max()
    w -= w.min()
    w /= w.max()
    b = (1 - spread_frac) + spread_frac * w
    return b * p * all_ids_counts.sum() / (b * all_ids_counts).sum()


def test_the_2023_strategy_equals_the_transcribed_rule():
    strategy = get_strategy("typhoon_2023", p=P)
    assert strategy.name == "typhoon_2023"
    assert (strategy.ema_start, strategy.unseen, strategy.budget) == ("zeros", "top", "all_ids")
    strategy.prepare(COUNTS, special_counts=SPECIAL)
    strategy.weights, strategy.seen = np.nan_to_num(WEIGHTS), ~np.isnan(WEIGHTS)
    strategy.recalibrate()
    expected = original_rates(np.nan_to_num(WEIGHTS), COUNTS + SPECIAL, P, DELTA)
    np.testing.assert_allclose(strategy.probs, expected, rtol=1e-14)
    # the lookup the masks are drawn from gives the same probabilities, at p and at another rate
    ids = torch.arange(12)[None, :]
    looked_up = strategy.token_probs(ids, torch.tensor([P, 0.15], dtype=torch.float64))
    np.testing.assert_allclose(looked_up[0].numpy(), expected, rtol=1e-14)
    np.testing.assert_allclose(looked_up[1].numpy(), expected * 0.5, rtol=1e-14)
    assert strategy.diagnostics()["realised_rate"] == pytest.approx(9.7 * 48 / 137 / 12, rel=1e-14)


def batch_of(ids):
    ids = torch.tensor([ids])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "special_tokens_mask": (ids <= 1).long()}


def test_ema_from_zeros_by_hand():
    """Step 1 sets w = w_hat for its types; a type first seen at step 2 gets lam w_hat; a type seen again
    gets (1 - lam) w + lam w_hat. With first_sighting the late type gets its estimate itself."""
    lam = 0.8
    runs = {}
    for start in ("zeros", "first_sighting"):
        strategy = get_strategy("typhoon", p=P, lam=lam, ema_start=start)
        strategy.prepare(COUNTS)
        # step 1: [CLS] 2 3 [SEP], type 2 selected (saliency +1.5), type 3 visible (saliency 0.5 -> -0.5)
        strategy.update(batch_of([0, 2, 3, 1]), torch.tensor([[False, True, False, False]]),
                        torch.tensor([[9.0, 1.5, 0.5, 9.0]]))
        # step 2: [CLS] 2 5 [SEP]: type 2 visible (saliency 1 -> -1), type 5 selected (+2), first seen
        strategy.update(batch_of([0, 2, 5, 1]), torch.tensor([[False, False, True, False]]),
                        torch.tensor([[9.0, 1.0, 2.0, 9.0]]))
        runs[start] = strategy
    z = runs["zeros"]
    assert z.weights[2] == pytest.approx((1 - lam) * 1.5 + lam * -1.0)
    assert z.weights[3] == pytest.approx(-0.5)
    assert z.weights[5] == pytest.approx(lam * 2.0)
    assert runs["first_sighting"].weights[5] == pytest.approx(2.0)
    assert np.isnan(z.weights[[0, 1, 4, 6]]).all()  # specials and types absent from both batches: unseen


@pytest.mark.parametrize("rule,value", [("ema_start", "zeros"), ("unseen", "top"), ("budget", "all_ids")])
def test_each_rule_switches_on_alone(rule, value):
    strategy = get_strategy("typhoon", p=P, **{rule: value})
    others = {"ema_start": "first_sighting", "unseen": "neutral", "budget": "non_special"}
    others.pop(rule)
    assert getattr(strategy, rule) == value
    assert all(getattr(strategy, name) == default for name, default in others.items())
    assert strategy.rules_2023() == {rule}
    assert strategy.name == "typhoon"


def test_all_ids_needs_the_special_counts_and_keeps_them_in_its_state(tmp_path):
    strategy = get_strategy("typhoon", p=P, budget="all_ids")
    with pytest.raises(ValueError, match="special_counts"):
        strategy.prepare(COUNTS)
    strategy.prepare(COUNTS, special_counts=SPECIAL)
    strategy.update(batch_of([0, 2, 3, 1]), torch.tensor([[False, True, False, False]]),
                    torch.tensor([[0.0, 1.5, 0.5, 0.0]]))
    path = strategy.save(tmp_path / "state.npz")
    again = get_strategy("typhoon", p=P, budget="all_ids")
    again.load_state_dict(load_state(path))
    np.testing.assert_array_equal(again.special_counts, SPECIAL)
    np.testing.assert_array_equal(again.probs, strategy.probs)


@pytest.mark.parametrize("rule", ["ema_start", "unseen", "budget"])
def test_an_unknown_rule_value_names_the_allowed_ones(rule):
    with pytest.raises(ValueError, match=rf"{rule}.*(first_sighting|neutral|non_special)"):
        get_strategy("typhoon", **{rule: "bogus"})
