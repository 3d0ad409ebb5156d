"""Fast CPU dropout: its drop rate and scaling against the binomial law, its gradient, and that the
models it is swapped into compute what transformers' own eager attention computes."""

import pytest
import torch
from scipy import stats
from torch import nn

N = 1_000_001  # odd: the last 32-bit word is only half used


@pytest.mark.parametrize("p", [0.1, 0.5, 0.03])
def test_drop_rate_scaling_and_both_halves_of_each_word(p):
    from typhoon.models.dropout import drop_threshold, fast_dropout
    torch.manual_seed(0)
    out = fast_dropout(torch.ones(N), p)
    cut = drop_threshold(p)
    dropped = out == 0
    scale = torch.tensor(65536 / (65536 - cut), dtype=torch.float32).item()
    assert set(out.unique().tolist()) == {0.0, scale}  # kept values scaled by 1 / (rounded) keep rate
    # each 16-bit half of a random word must be uniform: test even and odd positions separately
    for half in (dropped[0::2], dropped[1::2]):
        result = stats.binomtest(int(half.sum()), half.numel(), cut / 65536)
        assert result.pvalue > 1e-4, (p, result)
    assert abs(cut / 65536 - p) <= 0.5 / 65536
    assert out.mean().item() == pytest.approx(1.0, abs=5 * (p / (1 - p) / N) ** 0.5)  # the mean is kept


def test_gradient_is_the_mask_times_the_scale():
    from typhoon.models.dropout import drop_threshold, fast_dropout
    torch.manual_seed(1)
    x = torch.randn(64, 33, requires_grad=True)
    out = fast_dropout(x, 0.2)
    weights = torch.randn(64, 33)
    (out * weights).sum().backward()
    kept = out.detach() != 0
    scale = 65536 / (65536 - drop_threshold(0.2))
    assert torch.allclose(x.grad, weights * kept * scale)
    assert torch.allclose(out.detach(), x.detach() * kept * scale)


def test_seeded_off_in_eval_and_edge_rates():
    from typhoon.models.dropout import FastDropout, fast_dropout
    x = torch.randn(1000)
    torch.manual_seed(3)
    a = fast_dropout(x, 0.1)
    torch.manual_seed(3)
    assert torch.equal(a, fast_dropout(x, 0.1))
    assert not torch.equal(a, fast_dropout(x, 0.1))  # the generator moved on
    assert fast_dropout(x, 0.1, training=False) is x and fast_dropout(x, 0.0) is x
    assert torch.equal(fast_dropout(x, 1.0), torch.zeros_like(x))
    module = FastDropout(0.1).eval()
    assert module(x) is x
    with pytest.raises(ValueError, match="dropout probability must be in"):
        fast_dropout(x, 1.5)


@pytest.mark.parametrize("build", ["mlm", "classifier"])
def test_models_with_fast_dropout_match_eager_attention(saved_backbone, family_batch, build):
    """In eval mode (no dropout) the swapped-in modules and attention compute transformers' eager model.

    Families whose attention goes through transformers' attention interface get the registered
    ``eager_fast_dropout`` kernel; DeBERTa-v2 keeps its own eager attention, whose ``nn.Dropout`` is swapped.
    """
    from typhoon.models.backbones import load_backbone
    from typhoon.models.dropout import EAGER_FAST_DROPOUT, FastDropout
    backbone = load_backbone(str(saved_backbone.folder))
    inputs = backbone.model_inputs(family_batch)
    assert (family_batch["attention_mask"] == 0).any()  # padding: the mask path is exercised
    make = (lambda **k: backbone.mlm_model(seed=1, **k).model) if build == "mlm" else \
        (lambda **k: backbone.classifier(2, seed=1, **k))
    reference, fast = make(attention="eager").eval(), make(attention="eager", fast_dropout=True).eval()
    expected = "eager" if saved_backbone.family == "deberta-v2" else EAGER_FAST_DROPOUT
    assert fast.config._attn_implementation == expected
    assert not any(type(m) is nn.Dropout for m in fast.modules())
    assert sum(isinstance(m, FastDropout) for m in fast.modules()) == sum(
        type(m) is nn.Dropout for m in reference.modules()) > 0
    with torch.no_grad():
        assert torch.allclose(fast(**inputs).logits, reference(**inputs).logits, atol=1e-5)
    # in training mode dropout is active: two draws differ, and a seed repeats a draw
    fast.train()
    torch.manual_seed(0)
    first = fast(**inputs).logits
    torch.manual_seed(0)
    assert torch.equal(first, fast(**inputs).logits)
    assert not torch.equal(first, fast(**inputs).logits)
