"""Typhoon's saliency (hook at the embedding output == explicit one-hot autograd, with the stock heads and
through ``MaskedLM`` for every backbone family) and EMA update."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from typhoon.masking import SaliencyProbe, batch_weight_estimate, ema_update, get_strategy
from typhoon.masking.calibration import calibrate

VOCAB, MASK_ID, CLS_ID, SEP_ID, PAD_ID = 257, 4, 2, 3, 0


def tiny_bert():
    from transformers import BertConfig, BertForMaskedLM
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, pad_token_id=PAD_ID)
    return BertForMaskedLM(config)


def tiny_distilbert():
    from transformers import DistilBertConfig, DistilBertForMaskedLM
    config = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                              max_position_embeddings=64, pad_token_id=PAD_ID)
    return DistilBertForMaskedLM(config)


def synthetic_batch(seed: int, rows: int = 4, length: int = 16) -> dict[str, torch.Tensor]:
    """[CLS] tokens [SEP] padding, with per-row lengths; ids avoid the special ids (< 5)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, length), generator=g)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=g)
    attention = (torch.arange(length)[None, :] < lengths[:, None]).long()
    ids[:, 0] = CLS_ID
    ids[torch.arange(rows), lengths - 1] = SEP_ID
    ids[attention == 0] = PAD_ID
    special = (ids == CLS_ID) | (ids == SEP_ID) | (attention == 0)
    word_ids = torch.where(special, -1, torch.arange(length)[None, :].expand(rows, -1))
    return {"input_ids": ids, "attention_mask": attention, "special_tokens_mask": special, "word_ids": word_ids}


@pytest.mark.parametrize("make_model", [tiny_bert, tiny_distilbert], ids=["bert", "distilbert"])
def test_hook_saliency_equals_one_hot_autograd(make_model):
    torch.manual_seed(0)  # model init only (HF init uses the global RNG)
    model = make_model().double().eval()  # eval: no dropout, so both passes see the same function
    batch = synthetic_batch(1)
    g = torch.Generator().manual_seed(2)
    strategy = get_strategy("random", p=0.3)
    masked_ids, labels = strategy(batch, g, mask_token_id=MASK_ID, vocab_size=VOCAB)
    assert (labels != -100).any()
    true_ids = batch["input_ids"]

    with SaliencyProbe(model.get_input_embeddings()) as probe:
        model(input_ids=masked_ids, attention_mask=batch["attention_mask"], labels=labels).loss.backward()
    hooked = probe.saliency(true_ids)

    model.zero_grad()
    weight = model.get_input_embeddings().weight
    one_hot = torch.nn.functional.one_hot(masked_ids, VOCAB).double().requires_grad_(True)
    model(inputs_embeds=one_hot @ weight, attention_mask=batch["attention_mask"], labels=labels).loss.backward()
    explicit = one_hot.grad.gather(-1, true_ids[..., None]).squeeze(-1)  # dL/de_{i, t_i}, ORIGINAL token

    assert hooked.shape == true_ids.shape and hooked.dtype == torch.float64
    assert explicit.abs().max() > 0
    torch.testing.assert_close(hooked, explicit, rtol=1e-10, atol=1e-14)
    # at masked positions the input is [MASK] but the saliency is about the original token
    masked = labels != -100
    input_coord = one_hot.grad.gather(-1, masked_ids[..., None]).squeeze(-1)
    assert not torch.allclose(hooked[masked], input_coord[masked])


def test_probe_through_masked_lm_equals_one_hot_autograd(saved_backbone, family_batch):
    """Every family, through ``MaskedLM``'s gathered head, in fp64. The explicit reference feeds
    ``one_hot @ W`` in place of the embedding lookup and reads the gradient of the one-hot itself."""
    from typhoon.models.backbones import load_backbone
    backbone = load_backbone(str(saved_backbone.folder))
    mlm = backbone.mlm_model().double().eval()
    batch = {k: v[:4] for k, v in family_batch.items()}  # the one-hot is (B, L, V): keep B small
    tokenizer = backbone.tokenizer
    masked_ids, labels = get_strategy("random", p=0.3)(batch, torch.Generator().manual_seed(0),
                                                       mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    inputs = backbone.model_inputs({**batch, "input_ids": masked_ids})
    embedding = mlm.input_embeddings()
    with SaliencyProbe(embedding) as probe:
        loss = mlm(labels=labels, **inputs)
        loss.backward()
    hooked = probe.saliency(batch["input_ids"])

    mlm.zero_grad()
    one_hot = torch.nn.functional.one_hot(masked_ids, embedding.num_embeddings).double().requires_grad_(True)
    handle = embedding.register_forward_hook(lambda module, args, output: one_hot @ module.weight)
    try:
        mlm(labels=labels, **inputs).backward()
    finally:
        handle.remove()
    explicit = one_hot.grad.gather(-1, batch["input_ids"][..., None]).squeeze(-1)  # at the ORIGINAL token

    assert loss.dtype == hooked.dtype == torch.float64
    assert explicit.abs().max() > 0
    torch.testing.assert_close(hooked, explicit, rtol=1e-12, atol=1e-12 * explicit.abs().max().item())


def test_probe_without_backward_raises():
    model = tiny_bert()
    batch = synthetic_batch(0)
    with SaliencyProbe(model.get_input_embeddings()) as probe:
        model(input_ids=batch["input_ids"])
    with pytest.raises(RuntimeError, match="backward"):
        probe.saliency(batch["input_ids"])
    assert not model.get_input_embeddings()._forward_hooks  # the hook is removed on exit


def reference_update(weights: dict, batch, selected, saliency, lam):
    """Hand loop over tokens: the definition of the EMA update in the module docstring."""
    masked_sum, masked_n, visible_sum, visible_n = {}, {}, {}, {}
    ids = batch["input_ids"].tolist()
    special = batch["special_tokens_mask"].tolist()
    for r, row in enumerate(ids):
        for i, token in enumerate(row):
            if special[r][i]:
                continue
            s = float(saliency[r, i])
            if selected[r, i]:
                masked_sum[token] = masked_sum.get(token, 0.0) + s
                masked_n[token] = masked_n.get(token, 0) + 1
            else:
                visible_sum[token] = visible_sum.get(token, 0.0) - s
                visible_n[token] = visible_n.get(token, 0) + 1
    out = dict(weights)
    for token in set(masked_n) | set(visible_n):
        estimate = (masked_sum.get(token, 0.0) / masked_n[token] if token in masked_n else 0.0) + (
            visible_sum.get(token, 0.0) / visible_n[token] if token in visible_n else 0.0)
        out[token] = estimate if token not in weights else (1 - lam) * weights[token] + lam * estimate
    return out


def test_ema_update_equals_hand_loop_reference():
    vocab, lam = 30, 0.7
    strategy = get_strategy("typhoon", lam=lam, p=0.3)
    counts = np.arange(vocab) % 7 + 1
    strategy.prepare(counts)
    g = torch.Generator().manual_seed(0)
    reference: dict[int, float] = {}
    for step in range(3):
        batch = synthetic_batch(step, rows=5, length=12)
        batch["input_ids"] = torch.where(batch["special_tokens_mask"], batch["input_ids"] % 5,
                                         batch["input_ids"] % (vocab - 5) + 5)  # few types: repeats
        selected = strategy.select(batch, g)
        saliency = torch.randn(batch["input_ids"].shape, generator=g, dtype=torch.float64)
        strategy.update(batch, selected, saliency)
        reference = reference_update(reference, batch, selected, saliency, lam)

    expected = np.full(vocab, np.nan)
    for token, w in reference.items():
        expected[token] = w
    np.testing.assert_allclose(strategy.weights, expected, rtol=1e-12, atol=1e-14)  # NaN where unseen
    np.testing.assert_array_equal(strategy.seen, ~np.isnan(expected))
    assert strategy.steps == 3
    np.testing.assert_allclose(strategy.probs, calibrate(expected, counts, 0.3), rtol=1e-12)


def test_batch_estimate_missing_side_contributes_zero():
    ids = torch.tensor([[7, 7, 8, 9]])
    maskable = torch.tensor([[True, True, True, False]])  # type 9 only at a special position
    selected = torch.tensor([[True, False, True, False]])
    saliency = torch.tensor([[2.0, 0.5, 3.0, 100.0]])
    types, estimate = batch_weight_estimate(ids, maskable, selected, saliency)
    assert types.tolist() == [7, 8]  # 9 never counts: it sits only where nothing is masked
    assert estimate.tolist() == [2.0 - 0.5, 3.0]
    weights, now_seen = ema_update(np.full(10, np.nan), np.zeros(10, bool), types, estimate, lam=0.5)
    assert weights[7] == pytest.approx(1.5) and np.isnan(weights[9]) and now_seen[8] and not now_seen[9]


def test_batch_estimate_sums_in_batch_order_as_a_bincount_over_the_vocabulary():
    """The estimate runs over the batch's own types; its sums must be those of a bincount over the whole
    vocabulary in the batch's order (the reference below), bit for bit, so that records do not move."""
    g = torch.Generator().manual_seed(3)
    vocab = 50
    ids = torch.randint(0, vocab, (6, 40), generator=g)
    maskable = torch.rand(ids.shape, generator=g) < 0.9
    selected = torch.rand(ids.shape, generator=g) < 0.3
    saliency = torch.randn(ids.shape, generator=g) * 1e3
    flat, s = ids.reshape(-1), saliency.reshape(-1).double()
    reference = torch.zeros(vocab, dtype=torch.float64)
    present = torch.zeros(vocab, dtype=torch.bool)
    for where, sign in (((selected & maskable).reshape(-1), 1.0), ((~selected & maskable).reshape(-1), -1.0)):
        total = torch.bincount(flat[where], weights=sign * s[where], minlength=vocab)
        count = torch.bincount(flat[where], minlength=vocab)
        reference += torch.where(count > 0, total / count.clamp(min=1), 0.0)
        present |= count > 0
    types, estimate = batch_weight_estimate(ids, maskable, selected, saliency)
    np.testing.assert_array_equal(types, np.flatnonzero(present.numpy()))
    assert estimate.tobytes() == reference.numpy()[types].tobytes()


def test_update_shape_mismatch_and_unprepared():
    strategy = get_strategy("typhoon")
    batch = synthetic_batch(0)
    with pytest.raises(RuntimeError, match="prepare"):
        strategy.update(batch, torch.zeros_like(batch["input_ids"], dtype=torch.bool),
                        torch.zeros(batch["input_ids"].shape))
    strategy.prepare(np.ones(VOCAB))
    with pytest.raises(ValueError, match="must match"):
        strategy.update(batch, torch.zeros(2, 2, dtype=torch.bool), torch.zeros(2, 2))


# --------------------------------------------------------------------------------------------------
# Task-loss saliency (typhoon.masking.task_saliency): the gradient of a task model's loss, reaching no parameter


def tiny_bert_classifier():
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(tiny_bert().config).double().eval()


def tiny_distilbert_classifier():
    from transformers import DistilBertForSequenceClassification

    torch.manual_seed(0)
    return DistilBertForSequenceClassification(tiny_distilbert().config).double().eval()


def _one_hot_task_saliency(classifier, masked_ids, true_ids, task_labels, **inputs):
    """Reference: the embedding output replaced by ``one_hot @ W`` (one-hot requiring grad), the task loss
    alone back-propagated, its one-hot gradient read at the ORIGINAL tokens."""
    embedding = classifier.get_input_embeddings()
    one_hot = torch.nn.functional.one_hot(masked_ids, embedding.num_embeddings).double().requires_grad_(True)
    handle = embedding.register_forward_hook(lambda module, args, output: one_hot @ module.weight)
    try:
        logits = classifier(input_ids=masked_ids, **inputs).logits
        loss = torch.nn.functional.cross_entropy(logits, task_labels)
        loss.backward()
    finally:
        handle.remove()
    return loss, one_hot.grad.gather(-1, true_ids[..., None]).squeeze(-1)


@pytest.mark.parametrize("make_classifier", [tiny_bert_classifier, tiny_distilbert_classifier],
                         ids=["bert", "distilbert"])
def test_task_saliency_equals_one_hot_autograd_of_the_task_loss_and_reaches_no_parameter(make_classifier):
    from typhoon.masking.task_saliency import task_saliency

    classifier = make_classifier()
    batch = synthetic_batch(5)
    masked_ids, _ = get_strategy("random", p=0.3)(batch, torch.Generator().manual_seed(1),
                                                  mask_token_id=MASK_ID, vocab_size=VOCAB)
    task_labels = torch.tensor([0, 1, 1, 0])
    loss, hooked = task_saliency(classifier, {"input_ids": masked_ids, "attention_mask": batch["attention_mask"]},
                                 task_labels, batch["input_ids"])
    assert all(p.grad is None for p in classifier.parameters())  # the task loss updates nothing

    ref_loss, explicit = _one_hot_task_saliency(classifier, masked_ids, batch["input_ids"], task_labels,
                                                attention_mask=batch["attention_mask"])
    assert hooked.dtype == torch.float64 and explicit.abs().max() > 0
    torch.testing.assert_close(hooked, explicit, rtol=1e-10, atol=1e-10 * explicit.abs().max().item())
    torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-12, atol=0)
    # ... read at the original tokens, not at the masked input's
    _, at_masked = _one_hot_task_saliency(classifier, masked_ids, masked_ids, task_labels,
                                          attention_mask=batch["attention_mask"])
    assert not torch.allclose(hooked, at_masked)


def test_task_saliency_through_every_family(saved_backbone, family_batch):
    """Every backbone family's own classifier: the hook equals the one-hot autograd of the task loss."""
    from typhoon.masking.task_saliency import task_saliency
    from typhoon.models.backbones import load_backbone

    backbone = load_backbone(str(saved_backbone.folder))
    classifier = backbone.classifier(2, seed=3).double().eval()
    batch = {k: v[:4] for k, v in family_batch.items()}
    tokenizer = backbone.tokenizer
    masked_ids, _ = get_strategy("random", p=0.3)(batch, torch.Generator().manual_seed(0),
                                                  mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    inputs = backbone.model_inputs({**batch, "input_ids": masked_ids})
    _, hooked = task_saliency(classifier, inputs, batch["labels"], batch["input_ids"])
    assert all(p.grad is None for p in classifier.parameters())
    rest = {k: v for k, v in inputs.items() if k != "input_ids"}
    _, explicit = _one_hot_task_saliency(classifier, masked_ids, batch["input_ids"], batch["labels"], **rest)
    assert explicit.abs().max() > 0
    torch.testing.assert_close(hooked, explicit, rtol=1e-10, atol=1e-10 * explicit.abs().max().item())


def test_the_alias_asks_for_task_saliency():
    strategy = get_strategy("typhoon_task")
    assert strategy.saliency == "task" and strategy.calibration == "minmax" and strategy.name == "typhoon_task"
    assert get_strategy("typhoon", saliency="task", calibration="rank").name == "typhoon_rank_task"
    for calibration in ("minmax", "rank", "softmax"):  # every name a strategy gives is one get_strategy takes
        for saliency in ("mlm", "task"):
            name = get_strategy("typhoon", saliency=saliency, calibration=calibration).name
            again = get_strategy(name)
            assert (again.calibration, again.saliency, again.name) == (calibration, saliency, name)
    with pytest.raises(ValueError, match="saliency must be one of"):
        get_strategy("typhoon", saliency="loss")
