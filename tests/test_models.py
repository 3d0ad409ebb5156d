"""Backbones: the registry, loading by path (BERT and DistilBERT layouts), the gathered MLM head."""

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from typhoon.models import BACKBONES, load_backbone, minilm_dir


def _masked_batch(mrpc_batch):
    gen = torch.Generator().manual_seed(0)
    labels = torch.full_like(mrpc_batch["input_ids"], -100)
    chosen = (torch.rand(mrpc_batch["input_ids"].shape, generator=gen) < 0.15) & ~mrpc_batch["special_tokens_mask"]
    labels[chosen] = mrpc_batch["input_ids"][chosen]
    return labels


def test_load_by_path_and_gathered_head_equals_stock_head(saved_backbone, mrpc_batch):
    family, folder, reference = saved_backbone
    backbone = load_backbone(str(folder))
    assert backbone.family == family
    mlm = backbone.mlm_model().eval()
    reference.eval()
    for name, tensor in reference.state_dict().items():  # the saved weights are what was loaded
        assert torch.equal(mlm.model.state_dict()[name], tensor), name
    labels = _masked_batch(mrpc_batch)
    inputs = {"input_ids": mrpc_batch["input_ids"], "attention_mask": mrpc_batch["attention_mask"]}
    if family == "bert":
        inputs["token_type_ids"] = mrpc_batch["token_type_ids"]
    with torch.no_grad():
        ours = mlm(labels=labels, **inputs)
        stock = reference(labels=labels, **inputs).loss
    assert torch.allclose(ours, stock, atol=1e-5)


@pytest.mark.parametrize("build", ["mlm", "classifier"])
def test_eager_and_sdpa_attention_compute_the_same_model(saved_backbone, mrpc_batch, build):
    """The attention kernel is a speed choice only: same weights, same loss and gradients (fp32)."""
    family, folder, _ = saved_backbone
    backbone = load_backbone(str(folder))
    labels = _masked_batch(mrpc_batch)
    inputs = {"input_ids": mrpc_batch["input_ids"], "attention_mask": mrpc_batch["attention_mask"]}
    if family == "bert":
        inputs["token_type_ids"] = mrpc_batch["token_type_ids"]
    results = {}
    for kernel in ("eager", "sdpa"):
        if build == "mlm":
            mlm = backbone.mlm_model(seed=1, attention=kernel).eval()
            model, loss = mlm.model, mlm(labels=labels, **inputs)
        else:
            model = backbone.classifier(2, seed=1, attention=kernel).eval()
            loss = torch.nn.functional.cross_entropy(model(**inputs).logits, mrpc_batch["labels"])
        assert model.config._attn_implementation == kernel
        loss.backward()
        results[kernel] = (loss.detach(), model.get_input_embeddings().weight.grad.clone())
    assert torch.allclose(results["eager"][0], results["sdpa"][0], atol=1e-5)
    assert torch.allclose(results["eager"][1], results["sdpa"][1], atol=1e-6)
    assert results["eager"][1].abs().max() > 0  # the comparison saw real gradients


def test_classifier_takes_the_adapted_encoder(saved_backbone):
    family, folder, _ = saved_backbone
    backbone = load_backbone(str(folder))
    mlm = backbone.mlm_model()
    with torch.no_grad():
        mlm.input_embeddings().weight.add_(1.0)  # "adapt" the encoder
    clf = backbone.classifier(2, encoder_state=mlm.encoder.state_dict(), seed=3)
    assert torch.equal(clf.get_input_embeddings().weight, mlm.input_embeddings().weight)
    again = backbone.classifier(2, encoder_state=mlm.encoder.state_dict(), seed=3)
    head = [n for n in clf.state_dict() if "classifier" in n][0]
    assert torch.equal(clf.state_dict()[head], again.state_dict()[head])  # the seed fixes the head
    other = backbone.classifier(2, encoder_state=mlm.encoder.state_dict(), seed=4)
    assert not torch.equal(clf.state_dict()[head], other.state_dict()[head])


def test_encoder_state_from_another_model_is_refused(saved_backbone, tmp_path):
    _, folder, _ = saved_backbone
    backbone = load_backbone(str(folder))
    with pytest.raises(ValueError, match="does not fit"):
        backbone.classifier(2, encoder_state={"nonsense.weight": torch.zeros(1)})


def test_pickle_checkpoints_are_not_loaded(tmp_path, tokenizer):
    model = BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=1, intermediate_size=16))
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")  # a pickle checkpoint only
    tokenizer.save_pretrained(tmp_path)
    assert not list(tmp_path.glob("*.safetensors"))
    with pytest.raises(OSError):
        load_backbone(str(tmp_path)).mlm_model()


def test_embedded_default_loads_offline():
    backbone = load_backbone("minilm-l6")
    assert backbone.source == str(minilm_dir())
    assert backbone.config.hidden_size == 384 and backbone.config.num_hidden_layers == 6
    assert backbone.tokenizer.vocab_size == 30522 and backbone.tokenizer.tokenize("Unaffable") == ["una", "##ffa", "##ble"]


def test_tiny_random_is_fixed_across_runs():
    a, b = load_backbone("tiny-random").mlm_model(seed=1), load_backbone("tiny-random").mlm_model(seed=2)
    assert torch.equal(a.input_embeddings().weight, b.input_embeddings().weight)
    assert a.model.config.num_hidden_layers == 2 and a.model.config.vocab_size == 30522


@pytest.mark.parametrize("name", ["bert-base", "distilbert", "tinybert"])
def test_hub_backbone_offline_names_the_offline_choices(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not BACKBONES[name].offline
    with pytest.raises(FileNotFoundError, match=r"Offline choices: \['minilm-l6', 'tiny-random'\]"):
        load_backbone(name)


def test_unknown_names_and_missing_folders():
    with pytest.raises(ValueError, match="unknown backbone 'robertta'"):
        load_backbone("robertta")
    with pytest.raises(FileNotFoundError, match="backbone folder not found"):
        load_backbone("/nonexistent/model")
