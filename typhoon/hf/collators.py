"""Data collators for transformers' ``Trainer``, one per masking strategy of the bundle.

``masking_collator(tokenizer, strategy, **params)`` returns what ``DataCollatorForLanguageModeling``
returns -- ``input_ids`` (masked), ``attention_mask``, ``labels`` (the original token where selected, -100
elsewhere) and every other input column (``token_type_ids``, ...) padded alongside -- with the masks of
:mod:`typhoon.masking`: the same strategy classes, the same padding (:func:`typhoon.data.collate`) and the
same 80/10/10 (or mask-only) corruption as the bundle's own training loop, so that the same batches and seed
give the same masks.

- :class:`MaskingCollator` (random, whole_word, span, and a strategy of your own that learns nothing) masks
  each batch as it is collated; it works in a plain ``Trainer``.
- :class:`TyphoonCollator` (typhoon and its calibrations, typhoon_2023) only pads: a Typhoon mask for step
  t + 1 needs the saliency of step t, and a ``Trainer``'s data loader collates ahead of the step (accelerate
  looks one batch ahead; gradient accumulation fetches a step's micro-batches before its first forward).
  Its masks are drawn in the main process at the start of each optimizer step by
  :class:`typhoon.hf.trainer.TyphoonTrainerMixin`, from the state :class:`typhoon.hf.callback.TyphoonCallback`
  learnt from the step before. Used in a ``Trainer`` without them it refuses its first batch.

Word ids and special tokens come from the tokenizer (:mod:`typhoon.hf.words`), or from the features where they
carry ``word_ids`` / ``special_tokens_mask``. A classification ``label`` column is dropped: ``labels`` are
the MLM targets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from typhoon.data import PAD_MULTIPLE, collate
from typhoon.masking import (
    ALIASES,
    PLUGIN_STRATEGIES,
    STRATEGY_PARAMS,
    MaskingStrategy,
    RandomMasking,
    TyphoonMasking,
    get_strategy,
    uses_task_saliency,
)

from .words import WordIds, special_ids

# Keys the collator reads or makes itself; every other column of the features passes through.
OWN_KEYS = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask", "word_ids")
CLASS_LABELS = ("label", "labels", "label_ids")  # a task's labels: dropped, ``labels`` are the MLM targets


def strategy_names() -> list[str]:
    """The strategies a collator takes: the bundle's built-ins and aliases but those whose saliency comes from a
    task model (typhoon_task: it needs the bundle's warmed-up classifier), plus any loaded plugin strategy."""
    names = [*STRATEGY_PARAMS, *ALIASES, *PLUGIN_STRATEGIES]
    return [name for name in names if "_task" not in name]


def check_tokenizer(tokenizer) -> None:
    """Refuse a tokenizer masked-LM collation cannot use, saying what to do."""
    name = type(tokenizer).__name__
    if getattr(tokenizer, "mask_token_id", None) is None:
        raise ValueError(f"the tokenizer ({name}) has no mask token: masked-LM masking replaces tokens with it. "
                         "Use the tokenizer of a masked-LM checkpoint, or add one (tokenizer.add_special_tokens("
                         "{'mask_token': '[MASK]'}) and model.resize_token_embeddings(len(tokenizer)))")
    if getattr(tokenizer, "pad_token_id", None) is None:
        raise ValueError(f"the tokenizer ({name}) has no pad token, which batches are padded with: set one "
                         "(tokenizer.pad_token = tokenizer.eos_token, or add a [PAD] token)")


def as_ids(values: Any) -> list[int]:
    return values.tolist() if hasattr(values, "tolist") else list(values)


class MaskingCollator:
    """Pad a list of tokenized examples and mask them with a strategy of :mod:`typhoon.masking`.

    ``seed`` seeds the masks' own generator (the bundle's run seeds its mask generator with the run seed), so
    the same batches give the same masks whatever else draws random numbers. In a data-loader worker process
    the generator is seeded from ``seed`` and the worker's own seed, so workers do not repeat each other's masks.
    ``pad_to_multiple_of``: the padded width (8, as the bundle pads; None for none).
    """

    def __init__(self, tokenizer, strategy: str = "random", *, seed: int = 0,
                 pad_to_multiple_of: int | None = PAD_MULTIPLE, **params: Any):
        check_tokenizer(tokenizer)
        if strategy not in strategy_names() and ":" not in strategy:
            if strategy in ALIASES and uses_task_saliency(strategy, {}):
                raise ValueError(f"strategy {strategy!r} takes its saliency from a task model, which only the "
                                 f"bundle's own run trains; in a Trainer choose one of {strategy_names()}")
            raise ValueError(f"unknown masking strategy {strategy!r}; choose one of {strategy_names()} "
                             "or name your own as MODULE:CLASS (docs/extending.md)")
        self.strategy: MaskingStrategy = get_strategy(strategy, **params)
        if getattr(self.strategy, "saliency", "mlm") != "mlm":
            raise ValueError(f"strategy {strategy!r} with saliency={self.strategy.saliency!r} needs a task model; "
                             "in a Trainer Typhoon's saliency comes from the MLM loss (saliency='mlm')")
        self.tokenizer = tokenizer
        self.seed = int(seed)
        self.pad_to_multiple_of = pad_to_multiple_of or 1
        # random and Typhoon masking select tokens, not words: no word ids to derive for them
        self.words = None if isinstance(self.strategy, (RandomMasking, TyphoonMasking)) else WordIds(tokenizer)
        self._special = special_ids(tokenizer)
        self._generators: dict[str, torch.Generator] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.strategy!r}, seed={self.seed})"

    def __getstate__(self) -> dict:
        """Pickled for a spawned data-loader worker: without the generators (a worker seeds its own)."""
        return {**self.__dict__, "_generators": {}}

    # -- padding ---------------------------------------------------------------------------------
    def pad(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """The padded, unmasked batch: ``input_ids``, ``attention_mask``, ``special_tokens_mask``, ``word_ids``
        (-1 where not derived), ``token_type_ids`` where the features have them, and every other column."""
        if not features:
            raise ValueError("the collator got no examples")
        ids = [as_ids(f["input_ids"]) for f in features]
        first = features[0]
        special = ([as_ids(f["special_tokens_mask"]) for f in features] if "special_tokens_mask" in first
                   else [[int(t in self._special) for t in row] for row in ids])
        if "word_ids" in first:
            words = [[-1 if w is None else w for w in as_ids(f["word_ids"])] for f in features]
        elif self.words is not None:
            words = self.words.rows(ids)
        else:
            words = [[-1] * len(row) for row in ids]
        rows = [{"input_ids": i, "special_tokens_mask": s, "word_ids": w} for i, s, w in zip(ids, special, words,
                                                                                             strict=True)]
        if "token_type_ids" in first:
            for row, f in zip(rows, features, strict=True):
                row["token_type_ids"] = as_ids(f["token_type_ids"])
        batch = collate(rows, self.tokenizer.pad_token_id, self.pad_to_multiple_of)
        width = batch["input_ids"].shape[1]
        for key in (k for k in first if k not in OWN_KEYS and k not in CLASS_LABELS):  # every other column
            values = [f[key] for f in features]
            if all(hasattr(v, "__len__") and len(v) == len(i) for v, i in zip(values, ids, strict=True)):
                out = torch.zeros((len(values), width), dtype=torch.as_tensor(as_ids(values[0])).dtype)
                for row, v in enumerate(values):
                    out[row, :len(v)] = torch.as_tensor(as_ids(v))
                batch[key] = out
            else:
                batch[key] = torch.as_tensor(np.asarray([as_ids(v) if hasattr(v, "__len__") else v for v in values]))
        return batch

    # -- masking ---------------------------------------------------------------------------------
    def generator(self, device: torch.device | str = "cpu") -> torch.Generator:
        """The masks' generator on ``device`` (one per device, each seeded with ``seed``; see the class)."""
        device = torch.device(device)
        key = str(device)
        if key not in self._generators:
            seed = self.seed
            worker = torch.utils.data.get_worker_info()
            if worker is not None:  # a data-loader worker: its own stream
                seed = int(np.random.SeedSequence([self.seed, worker.seed]).generate_state(1, np.uint64)[0] >> 1)
            self._generators[key] = torch.Generator(device).manual_seed(seed)
        return self._generators[key]

    def mask(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The model's inputs from a padded batch (:meth:`pad`): masked ``input_ids``, MLM ``labels``, the
        other columns as they are; ``special_tokens_mask`` and ``word_ids`` are the collator's own, left out."""
        input_ids = batch["input_ids"]
        masked, labels = self.strategy(dict(batch), self.generator(input_ids.device),
                                       mask_token_id=self.tokenizer.mask_token_id, vocab_size=len(self.tokenizer))
        inputs = {k: v for k, v in batch.items() if k not in ("special_tokens_mask", "word_ids")}
        return {**inputs, "input_ids": masked, "labels": labels}

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        return self.mask(self.pad(features))

    # -- state (the generators, saved with a Trainer's checkpoints by the callback) ---------------
    def generator_states(self) -> dict[str, np.ndarray]:
        return {device: gen.get_state().numpy() for device, gen in self._generators.items()}

    def load_generator_states(self, states: Mapping[str, np.ndarray]) -> None:
        for device, state in states.items():
            self.generator(device).set_state(torch.as_tensor(np.asarray(state, dtype=np.uint8)))


class TyphoonCollator(MaskingCollator):
    """Typhoon's collator: pads here, masks at the step (see the module docstring)."""

    strategy: TyphoonMasking

    def __init__(self, tokenizer, strategy: str = "typhoon", **kwargs: Any):
        super().__init__(tokenizer, strategy, **kwargs)
        if not self.strategy.needs_saliency:
            raise ValueError(f"{strategy!r} learns nothing: use MaskingCollator (masking_collator picks it)")
        self.attached = False  # set by TyphoonTrainerMixin, which draws the masks at each step

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        if not self.attached:
            raise RuntimeError(
                f"the {self.strategy.name!r} collator is used without typhoon.hf's step hook: its masks need the "
                "saliency of the step before, which a collator cannot see, and it will not fall back to uniform "
                "masking. Train with typhoon.hf.TyphoonTrainer (or a Trainer class with typhoon.hf."
                "TyphoonTrainerMixin first among its bases), which adds its TyphoonCallback")
        return self.pad(features)

    def prepare_on(self, examples: Sequence[Mapping[str, Any]]) -> None:
        """Typhoon's corpus counts from the training examples' ``input_ids`` (special tokens as in :meth:`pad`):
        the budget p holds over this text. The callback calls it on the Trainer's training set."""
        rows = [{"input_ids": ids, "special_tokens_mask": [int(t in self._special) for t in ids]}
                for ids in (as_ids(x["input_ids"]) for x in examples)]
        self.strategy.prepare_on(rows, len(self.tokenizer))


def masking_collator(tokenizer, strategy: str = "random", **params: Any) -> MaskingCollator:
    """The collator of ``strategy`` (a :class:`TyphoonCollator` for the Typhoon family, which learns), with the
    strategy's parameters (``p``, ``corruption``, ``delta``, ...; ``seed``, ``pad_to_multiple_of``)."""
    probe = MaskingCollator(tokenizer, strategy, **params)  # checks the name and parameters once
    return TyphoonCollator(tokenizer, strategy, **params) if probe.strategy.needs_saliency else probe
