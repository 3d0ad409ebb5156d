"""Shared fixtures: the real GLUE files (bundled, or $TYPHOON_GLUE_DIR if set) and the real uncased WordPiece tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Tests never reach a hub; the data is the official TSVs bundled in the package (typhoon/glue_data),
# unless TYPHOON_GLUE_DIR points elsewhere.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def glue_dir() -> Path:
    """The GLUE folder load_glue reads CoLA and MRPC from."""
    from typhoon.data import locate_glue

    return locate_glue("mrpc").folder.parent


@pytest.fixture(scope="session")
def tokenizer():
    from typhoon.models import load_tokenizer, minilm_dir

    return load_tokenizer(minilm_dir())


def _tokenized(task: str, glue_dir: Path, tokenizer, n: int = 256):
    from typhoon.data import load_glue, tokenize_glue

    raw = load_glue(task, glue_dir)
    small = raw.__class__({k: v.select(range(min(n, len(v)))) for k, v in raw.items() if k != "test"})
    return tokenize_glue(small, tokenizer, task, max_length=128)


@pytest.fixture(scope="session")
def mrpc_tokenized(glue_dir, tokenizer):
    """The first 256 MRPC train and dev pairs, tokenized with word ids."""
    return _tokenized("mrpc", glue_dir, tokenizer)


@pytest.fixture(scope="session")
def cola_tokenized(glue_dir, tokenizer):
    """The first 256 CoLA train and dev sentences, tokenized with word ids."""
    return _tokenized("cola", glue_dir, tokenizer)


def make_batch(tokenized_split, tokenizer, start: int = 0, size: int = 32):
    from typhoon.data import collate

    rows = [tokenized_split[i] for i in range(start, start + size)]
    return collate(rows, tokenizer.pad_token_id)


@pytest.fixture()
def mrpc_batch(mrpc_tokenized, tokenizer):
    """A padded batch of 32 real MRPC pairs (see docs/CONTRACTS.md for the keys)."""
    return make_batch(mrpc_tokenized["train"], tokenizer)


@pytest.fixture()
def cola_batch(cola_tokenized, tokenizer):
    """A padded batch of 32 real CoLA sentences."""
    return make_batch(cola_tokenized["train"], tokenizer)


@pytest.fixture(scope="session", params=["bert", "distilbert"])
def saved_backbone(request, tmp_path_factory, tokenizer):
    """A small random-init model of the paper's architectures, saved as a hub checkpoint would be."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, DistilBertConfig, DistilBertForMaskedLM

    folder = tmp_path_factory.mktemp(request.param)
    torch.manual_seed(0)
    if request.param == "bert":
        model = BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                           num_attention_heads=2, intermediate_size=64))
    else:
        model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=32, n_layers=2,
                                                       n_heads=2, hidden_dim=64))
    model.save_pretrained(folder)  # safetensors
    tokenizer.save_pretrained(folder)
    return request.param, folder, model
