"""Adapted backbones (typhoon.models.adapted): which tensors an adaptation trains, the hash check that refuses
a missing or altered weights file (naming it and the expected hash, fast, from the command line too), and
the shipped ``minilm-l6-mlm``: its tensors land where they belong and it predicts masked words."""

import shutil
import time

import pytest
import torch
from conftest import REPO
from safetensors.torch import save_file

from typhoon.cli import main
from typhoon.models import adapted
from typhoon.paths import file_sha256

MLM = adapted.ADAPTED["minilm-l6-mlm"]
shipped = pytest.mark.skipif(not MLM.sha256, reason="minilm-l6-mlm's weights are not shipped yet")


def test_trained_tensor_names_are_the_top_layers_and_the_head_of_the_stock_model():
    from transformers import BertConfig, BertForMaskedLM

    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=4, num_attention_heads=2,
                                       intermediate_size=16))
    expected = sorted(name for name, _ in model.named_parameters()
                      if name.startswith(("bert.encoder.layer.2.", "bert.encoder.layer.3.", "cls.")))
    assert sorted(adapted.trained_tensor_names(4, 2)) == expected
    with pytest.raises(ValueError, match=r"top_layers must lie in \[1, 4\], got 5"):
        adapted.trained_tensor_names(4, 5)


@pytest.fixture()
def fake_spec(tmp_path, monkeypatch):
    """A spec whose weights file is a small safetensors file in tmp_path, with its true hash."""
    monkeypatch.setattr(adapted, "WEIGHTS_DIR", tmp_path)
    save_file({"cls.predictions.bias": torch.arange(4.0)}, str(tmp_path / "fake.safetensors"))
    return adapted.AdaptedSpec("fake", "minilm-l6", file_sha256(tmp_path / "fake.safetensors"))


def test_the_hash_check_accepts_the_file_and_refuses_a_missing_or_altered_one(fake_spec):
    import hashlib

    assert fake_spec.sha256 == hashlib.sha256(fake_spec.weights.read_bytes()).hexdigest()
    assert torch.equal(adapted.adapted_state(fake_spec)["cls.predictions.bias"], torch.arange(4.0))
    data = bytearray(fake_spec.weights.read_bytes())
    data[-1] ^= 1
    fake_spec.weights.write_bytes(bytes(data))
    with pytest.raises(adapted.AdaptedWeightsError, match=rf"fake\.safetensors has sha256 [0-9a-f]{{64}}, expected "
                                                          rf"{fake_spec.sha256}"):
        adapted.adapted_state(fake_spec)
    fake_spec.weights.unlink()
    with pytest.raises(adapted.AdaptedWeightsError, match=rf"fake\.safetensors is missing; expected a file with "
                                                          rf"sha256 {fake_spec.sha256}"):
        adapted.adapted_state(fake_spec)


@shipped
def test_an_altered_weights_file_stops_the_command_line_with_exit_2_naming_file_and_hash(tmp_path, monkeypatch,
                                                                                          capsys):
    monkeypatch.setattr(adapted, "WEIGHTS_DIR", tmp_path)
    copy = tmp_path / MLM.weights.name
    shutil.copyfile(REPO / "typhoon/models/weights" / MLM.weights.name, copy)
    with open(copy, "r+b") as handle:  # one flipped bit in the last tensor's data
        handle.seek(-1, 2)
        last = handle.read(1)
        handle.seek(-1, 2)
        handle.write(bytes([last[0] ^ 1]))
    started = time.perf_counter()
    code = main(["run", "--task", "mrpc", "--backbone", "minilm-l6-mlm", "--out", str(tmp_path / "out")])
    assert code == 2 and time.perf_counter() - started < 10
    err = capsys.readouterr().err
    assert str(copy) in err and MLM.sha256 in err
    assert not (tmp_path / "out").exists()  # nothing written for a refused run


@shipped
def test_minilm_l6_mlm_carries_the_shipped_tensors_over_the_embedded_minilm():
    from safetensors.torch import load_file

    from typhoon.models.backbones import load_backbone

    shipped_tensors = load_file(str(MLM.weights))
    base, mlm_backbone = load_backbone("minilm-l6"), load_backbone("minilm-l6-mlm")
    model, fresh = mlm_backbone.mlm_model(seed=3).model.state_dict(), base.mlm_model(seed=3).model.state_dict()
    for name, tensor in shipped_tensors.items():
        assert torch.equal(model[name], tensor), name
        assert not torch.equal(fresh[name], tensor), f"{name} did not change in training"
    shipped_storage = {model[name].data_ptr() for name in shipped_tensors}  # and the tensors tied to them
    for name in set(model) - set(shipped_tensors):  # everything else is the embedded checkpoint's
        if model[name].data_ptr() not in shipped_storage:
            assert torch.equal(model[name], fresh[name]), name
    classifier = mlm_backbone.classifier(num_labels=2, seed=0).base_model.state_dict()
    for name, tensor in shipped_tensors.items():
        if name.startswith("bert."):
            assert torch.equal(classifier[name.removeprefix("bert.")], tensor), name


@shipped
def test_minilm_l6_mlm_predicts_masked_words_of_mrpc_train_text(mrpc_batch):
    """The issue's target for the first MLM step: masked-token loss <= 5.5 nats on MRPC (fresh head: 10.7)."""
    from typhoon.masking import get_strategy
    from typhoon.models.backbones import load_backbone

    backbone = load_backbone("minilm-l6-mlm")
    tokenizer = backbone.tokenizer
    masked, labels = get_strategy("random")(mrpc_batch, torch.Generator().manual_seed(0),
                                            mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    mlm = backbone.mlm_model().eval()
    with torch.no_grad():
        loss = float(mlm(labels=labels, **backbone.model_inputs({**mrpc_batch, "input_ids": masked})))
    assert loss <= 5.5
