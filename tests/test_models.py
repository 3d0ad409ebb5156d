"""Backbones of every supported family: the registry, loading by path, the gathered MLM head (against the
stock head, in fp64), attention kernels, the classifier on the adapted encoder, and the refusals."""

import copy
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import FAMILY_NAMES

from typhoon.masking import SaliencyProbe, get_strategy


def masked_inputs(backbone, batch, seed: int = 0):
    """(model inputs with ~15 % of the tokens corrupted BERT-style, MLM labels: -100 where not selected)."""
    tokenizer = backbone.tokenizer
    masked_ids, labels = get_strategy("random")(batch, torch.Generator().manual_seed(seed),
                                                mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    assert (labels != -100).any()
    return backbone.model_inputs({**batch, "input_ids": masked_ids}), labels


def stock_loss(model, inputs, labels):
    """Cross-entropy of the stock head's full (B, L, V) logits; -100 positions are ignored."""
    logits = model(**inputs).logits
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def test_every_family_is_tested():
    from typhoon.models.mlm_head import FAMILIES
    assert sorted(FAMILIES) == sorted(FAMILY_NAMES)


def test_load_by_path_and_gathered_head_equals_stock_head(saved_backbone, family_batch):
    from typhoon.models.backbones import load_backbone
    backbone = load_backbone(str(saved_backbone.folder))
    assert backbone.family == saved_backbone.family
    mlm = backbone.mlm_model()
    for name, tensor in saved_backbone.model.state_dict().items():  # the saved weights are what was loaded
        assert torch.equal(mlm.model.state_dict()[name], tensor), name
    mlm = mlm.double().eval()
    reference = copy.deepcopy(saved_backbone.model).double().eval()
    inputs, labels = masked_inputs(backbone, {k: v[:8] for k, v in family_batch.items()})  # (B, L, V) fp64 logits
    with torch.no_grad():
        ours, stock = mlm(labels=labels, **inputs), stock_loss(reference, inputs, labels)
    assert ours.dtype == torch.float64  # promoted, never cast down
    torch.testing.assert_close(ours, stock, rtol=1e-12, atol=0)
    with torch.no_grad():  # low-precision models: the loss is computed in fp32
        assert mlm.to(torch.bfloat16)(labels=labels, **inputs).dtype == torch.float32


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_a_bf16_autocast_training_step_runs(saved_backbone, family_batch, attention):
    """What the cpu profile does on CPUs with bf16 (and GPUs do): a phase-1 step with the saliency probe,
    and the classifier on the adapted encoder, under bf16 autocast; the loss comes back in fp32."""
    from typhoon.models.backbones import load_backbone
    backbone = load_backbone(str(saved_backbone.folder))
    inputs, labels = masked_inputs(backbone, family_batch)
    mlm = backbone.mlm_model(attention=attention, fast_dropout=attention == "eager").train()
    with SaliencyProbe(mlm.input_embeddings()) as probe:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = mlm(labels=labels, **inputs)
        loss.backward()
    saliency = probe.saliency(family_batch["input_ids"])
    assert loss.dtype == torch.float32 and torch.isfinite(loss) and torch.isfinite(saliency).all()
    classifier = backbone.classifier(2, encoder_state=mlm.encoder.state_dict(), attention=attention)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = classifier(**backbone.model_inputs(family_batch)).logits
    assert logits.shape == (len(family_batch["labels"]), 2) and torch.isfinite(logits).all()


@pytest.mark.parametrize("legacy", [True, False])
def test_both_deberta_v2_head_layouts_equal_the_stock_head(legacy, tokenizer, mrpc_batch):
    """DeBERTa-v2's config flag ``legacy`` picks ``cls`` or ``lm_predictions`` (checkpoints carry either)."""
    from family_backbones import family_config
    from transformers import (
        AutoModelForMaskedLM,
    )

    from typhoon.models.mlm_head import MaskedLM
    torch.manual_seed(0)
    model = AutoModelForMaskedLM.from_config(family_config("deberta-v2", tokenizer, legacy=legacy)).double().eval()
    assert hasattr(model, "cls" if legacy else "lm_predictions")
    batch = {k: v[:8] for k, v in mrpc_batch.items()}  # the stock head's fp64 logits are (B, L, V)
    labels = torch.where(torch.rand(batch["input_ids"].shape) < 0.15, batch["input_ids"], -100)
    labels[batch["special_tokens_mask"]] = -100
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    with torch.no_grad():
        torch.testing.assert_close(MaskedLM(model)(labels=labels, **inputs), stock_loss(model, inputs, labels),
                                   rtol=1e-12, atol=0)


def test_token_type_ids_reach_only_models_that_use_them(saved_backbone, family_batch, mrpc_batch):
    """RoBERTa has one token type and DeBERTa-v3 none: a pair's segment ids (from any tokenizer) stay out."""
    from typhoon.models.backbones import load_backbone
    backbone = load_backbone(str(saved_backbone.folder))
    uses_them = saved_backbone.family in ("bert", "electra")
    assert backbone.takes_token_type_ids == uses_them
    assert ("token_type_ids" in backbone.model_inputs(mrpc_batch)) == uses_them  # WordPiece pairs: types 0 and 1
    assert set(backbone.model_inputs(family_batch)) <= {"input_ids", "attention_mask", "token_type_ids"}


@pytest.mark.parametrize("build", ["mlm", "classifier"])
def test_eager_and_sdpa_attention_compute_the_same_model(saved_backbone, family_batch, build):
    """The attention kernel is a speed choice only: same weights, same loss and gradients (fp32).

    DeBERTa-v2 has its own attention code: asking it for SDPA falls back to its eager kernel.
    """
    from typhoon.models.backbones import load_backbone
    backbone = load_backbone(str(saved_backbone.folder))
    inputs, labels = masked_inputs(backbone, family_batch)
    results = {}
    for kernel in ("eager", "sdpa"):
        if build == "mlm":
            mlm = backbone.mlm_model(seed=1, attention=kernel).eval()
            model, loss = mlm.model, mlm(labels=labels, **inputs)
        else:
            model = backbone.classifier(2, seed=1, attention=kernel).eval()
            loss = F.cross_entropy(model(**inputs).logits, family_batch["labels"])
        expected = "eager" if saved_backbone.family == "deberta-v2" else kernel
        assert model.config._attn_implementation == backbone.attention_kernel(kernel) == expected
        loss.backward()
        results[kernel] = (loss.detach(), model.get_input_embeddings().weight.grad.clone())
    assert torch.allclose(results["eager"][0], results["sdpa"][0], atol=1e-5)
    assert torch.allclose(results["eager"][1], results["sdpa"][1], atol=1e-6)
    assert results["eager"][1].abs().max() > 0  # the comparison saw real gradients


def test_classifier_takes_the_adapted_encoder(saved_backbone):
    from typhoon.models.backbones import load_backbone
    backbone = load_backbone(str(saved_backbone.folder))
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
    # layers on top of the encoder that the checkpoint has (ModernBERT's prediction head) start from it
    saved, encoder = saved_backbone.model.state_dict(), clf.base_model_prefix + "."
    from_checkpoint = [k for k in clf.state_dict() if not k.startswith(encoder) and k in saved]
    assert all(torch.equal(clf.state_dict()[k], saved[k]) for k in from_checkpoint)
    assert bool(from_checkpoint) == (saved_backbone.family == "modernbert")


def test_encoder_state_from_another_model_is_refused(saved_backbone):
    from typhoon.models.backbones import load_backbone
    backbone = load_backbone(str(saved_backbone.folder))
    with pytest.raises(ValueError, match="does not fit"):
        backbone.classifier(2, encoder_state={"nonsense.weight": torch.zeros(1)})


def test_unsupported_families_are_refused_naming_the_supported(tmp_path):
    from transformers import (
        AlbertConfig,
        AlbertForMaskedLM,
    )

    from typhoon.models.backbones import load_backbone
    from typhoon.models.mlm_head import MaskedLM
    AlbertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                 intermediate_size=16).save_pretrained(tmp_path)
    supported = r"supported families: \['bert', 'deberta-v2', 'distilbert', 'electra', 'modernbert', 'roberta'\]"
    with pytest.raises(ValueError, match=rf"backbone '{re.escape(str(tmp_path))}' is a 'albert' model; {supported}"):
        load_backbone(str(tmp_path))
    with pytest.raises(ValueError, match=rf"'albert' model; {supported}"):
        MaskedLM(AlbertForMaskedLM(AlbertConfig.from_pretrained(tmp_path)))


def test_a_tokenizer_larger_than_the_model_is_refused(tmp_path, tokenizer):
    from transformers import (
        BertConfig,
    )

    from typhoon.models.backbones import load_backbone
    BertConfig(vocab_size=1000, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
               intermediate_size=16).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="its 30522 tokens exceed the model's vocab_size 1000"):
        load_backbone(str(tmp_path))


def test_pickle_checkpoints_are_not_loaded(tmp_path, tokenizer):
    from transformers import (
        BertConfig,
        BertForMaskedLM,
    )

    from typhoon.models.backbones import load_backbone
    model = BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=1, intermediate_size=16))
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")  # a pickle checkpoint only
    tokenizer.save_pretrained(tmp_path)
    assert not list(tmp_path.glob("*.safetensors"))
    with pytest.raises(OSError):
        load_backbone(str(tmp_path)).mlm_model()


def test_embedded_default_loads_offline():
    from typhoon.models.backbones import load_backbone, minilm_dir
    backbone = load_backbone("minilm-l6")
    assert backbone.source == str(minilm_dir())
    assert backbone.config.hidden_size == 384 and backbone.config.num_hidden_layers == 6
    assert backbone.tokenizer.vocab_size == 30522 and backbone.tokenizer.tokenize("Unaffable") == ["una", "##ffa", "##ble"]


def test_tiny_random_is_fixed_across_runs():
    from typhoon.models.backbones import load_backbone
    a, b = load_backbone("tiny-random").mlm_model(seed=1), load_backbone("tiny-random").mlm_model(seed=2)
    assert torch.equal(a.input_embeddings().weight, b.input_embeddings().weight)
    assert a.model.config.num_hidden_layers == 2 and a.model.config.vocab_size == 30522


@pytest.mark.parametrize("name", ["bert-base", "distilbert", "tinybert", "roberta-base", "deberta-v3-base",
                                  "modernbert-base", "electra-base-generator"])
def test_hub_backbone_offline_names_the_offline_choices(name, monkeypatch):
    from typhoon.models.backbones import BACKBONES, load_backbone
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not BACKBONES[name].offline
    with pytest.raises(FileNotFoundError, match=r"Offline choices: \['bert-base-shape', 'distilbert-shape', "
                                                r"'minilm-l6', 'minilm-l6-mlm', 'tiny-random', 'tinybert-shape'\]"):
        load_backbone(name)


def bert_encoder_parameters(vocab: int, positions: int, token_types: int, hidden: int, layers: int,
                            intermediate: int) -> int:
    """Parameters of a BERT encoder without pooler, counted by hand: word, position and token-type embeddings and
    their LayerNorm; per layer Q, K, V and the attention output (H x H + H each), its LayerNorm (2H), the FFN's
    two layers (H x I + I, I x H + H) and their LayerNorm (2H). DistilBERT is the same with no token types."""
    embeddings = (vocab + positions + token_types) * hidden + 2 * hidden
    layer = 4 * (hidden * hidden + hidden) + 2 * hidden + (hidden * intermediate + intermediate) + \
        (intermediate * hidden + hidden) + 2 * hidden
    return embeddings + layers * layer


# the paper's backbones (hub configs huawei-noah/TinyBERT_General_4L_312D, distilbert-base-uncased,
# bert-base-uncased) over the 30522-token uncased vocabulary
PAPER_SHAPES = {"tinybert-shape": ("bert", bert_encoder_parameters(30522, 512, 2, 312, 4, 1200)),
                "distilbert-shape": ("distilbert", bert_encoder_parameters(30522, 512, 0, 768, 6, 3072)),
                "bert-base-shape": ("bert", bert_encoder_parameters(30522, 512, 2, 768, 12, 3072))}


def test_the_paper_shapes_have_the_hand_counted_parameters_and_need_no_hub(monkeypatch):
    """Their encoders count what BERT's formula gives for the paper's shapes (BERT-base: 108,891,648, the
    published 110M less the pooler's 590,592), built on the meta device; no connection is opened."""
    import socket

    from transformers import AutoModelForMaskedLM

    from typhoon.models.backbones import load_backbone

    assert PAPER_SHAPES["bert-base-shape"][1] == 108_891_648

    def no_network(*args, **kwargs):
        raise AssertionError("a paper-shape backbone tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    for name, (family, parameters) in PAPER_SHAPES.items():
        backbone = load_backbone(name)
        assert backbone.family == family and backbone.source is None and len(backbone.tokenizer) == 30522
        with torch.device("meta"):
            encoder = AutoModelForMaskedLM.from_config(backbone.config).base_model
        assert sum(p.numel() for p in encoder.parameters()) == parameters, name
    mlm = load_backbone("tinybert-shape").mlm_model(seed=3)  # built for real: the same "pretrained" encoder per run
    assert torch.equal(mlm.input_embeddings().weight, load_backbone("tinybert-shape").mlm_model(seed=4)
                       .input_embeddings().weight)
    assert sum(p.numel() for p in mlm.encoder.parameters()) == PAPER_SHAPES["tinybert-shape"][1]


def test_unknown_names_and_missing_folders():
    from typhoon.models.backbones import load_backbone
    with pytest.raises(ValueError, match="unknown backbone 'robertta'"):
        load_backbone("robertta")
    with pytest.raises(FileNotFoundError, match="backbone folder not found"):
        load_backbone("/nonexistent/model")
