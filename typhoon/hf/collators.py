"""Data collators for transformers' ``Trainer``, one per masking strategy of the bundle.

``masking_collator(tokenizer, strategy, **params)`` returns what ``DataCollatorForLanguageModeling``
returns -- ``input_ids`` (masked), ``attention_mask``, ``labels`` (the original token where selected, -100
elsewhere) and every other input column (``token_type_ids``, ...) padded alongside -- with the masks of
:mod:`typhoon.masking`: the same strategy classes, the same padding (:func:`typhoon.data.collate`) and the
same 80/10/10 (or mask-only) corruption as the bundle's own training loop. ``mlm_probability`` is taken as
transformers names it, for the budget ``p``.

Where the masks come from:

- **At the step** (:class:`typhoon.hf.masker.Masker`: ``TyphoonTrainer`` and a loop of your own). The collator
  only pads, and the masks of a step's batches are drawn when the step takes them, from one stream seeded with
  ``seed`` (per rank in a data-parallel run) and saved with checkpoints: the bundle's own stream, so the same
  batches and seed give the bundle's masks, and a resumed run draws the masks an uninterrupted one drew,
  whatever the data loader fetched ahead. Typhoon (:class:`TyphoonCollator`) is only used this way: a mask for
  step t + 1 needs the saliency of step t, and a ``Trainer``'s data loader collates ahead of the step.
- **As it collates** (:class:`MaskingCollator` called on its own: a plain ``Trainer``, any ``DataLoader``;
  random, whole_word, span and a strategy of your own that learns nothing). Each batch is masked from a
  generator of its own, seeded with ``seed``, the rank and the batch's token ids: the same batch gets the same
  masks in the main process or a data-loader worker, in an uninterrupted run or one resumed from a checkpoint,
  with no state to save (a plain ``Trainer`` saves none of a collator's). A batch that recurs identically (an
  unshuffled dataset over several epochs) is masked alike each time.

Word ids and special tokens come from the tokenizer (:mod:`typhoon.hf.words`), or from the features where they
carry ``word_ids`` / ``special_tokens_mask``. A classification ``label`` column is dropped: ``labels`` are
the MLM targets.
"""

from __future__ import annotations

import hashlib
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
    rank_and_size,
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

    ``seed`` seeds the masks (see the module docstring for the two streams). ``pad_to_multiple_of``: the padded
    width (8, as the bundle pads; None for none). ``mlm_probability``: transformers' name for the budget ``p``.
    """

    def __init__(self, tokenizer, strategy: str = "random", *, seed: int = 0,
                 pad_to_multiple_of: int | None = PAD_MULTIPLE, mlm_probability: float | None = None, **params: Any):
        check_tokenizer(tokenizer)
        if mlm_probability is not None:
            if "p" in params and params["p"] != mlm_probability:
                raise ValueError(f"p={params['p']!r} and mlm_probability={mlm_probability!r} name the same budget "
                                 "(mlm_probability is transformers' name for p): give one of them")
            params["p"] = mlm_probability
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
        self.attached = False  # True once a Masker draws the masks at the step: the collator then only pads

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.strategy!r}, seed={self.seed})"

    def __getstate__(self) -> dict:
        """Pickled for a spawned data-loader worker: without the step's generators (drawn from in the main
        process only), with this process's rank (a spawned worker has no torch.distributed of its own)."""
        return {**self.__dict__, "_generators": {}, "_rank": rank_and_size()[0]}

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
        lengths = [len(i) for i in ids]
        for key in (k for k in first if k not in OWN_KEYS and k not in CLASS_LABELS):  # every other column
            batch[key] = column_tensor(key, [f[key] for f in features], lengths, width)
        return batch

    # -- masking ---------------------------------------------------------------------------------
    def generator(self, device: torch.device | str = "cpu") -> torch.Generator:
        """The step's mask stream on ``device`` (one per device), drawn from by a :class:`~typhoon.hf.masker.Masker`
        in the main process: seeded with ``seed`` in one process, with ``seed`` and the rank in a data-parallel
        run, so that each rank draws its own masks."""
        device = torch.device(device)
        key = str(device)
        if key not in self._generators:
            rank, size = rank_and_size()
            seed = self.seed if size == 1 else stream_seed(self.seed, rank)
            self._generators[key] = torch.Generator(device).manual_seed(seed)
        return self._generators[key]

    def batch_generator(self, batch: Mapping[str, torch.Tensor]) -> torch.Generator:
        """The generator a batch is masked from as it is collated: seeded with ``seed``, the rank and the batch's
        padded token ids (see the module docstring), the same wherever and whenever the batch is collated."""
        input_ids = batch["input_ids"]
        ids = input_ids.detach().cpu().numpy().astype("<i8")
        digest = hashlib.blake2b(ids.tobytes() + np.asarray(ids.shape, "<i8").tobytes(), digest_size=8).digest()
        rank, size = rank_and_size()
        if size == 1:  # one process, or a worker spawned by a rank, which said its rank when pickled
            rank = self.__dict__.get("_rank", 0)
        seed = stream_seed(self.seed, rank, int.from_bytes(digest, "little"))
        return torch.Generator(input_ids.device).manual_seed(seed)

    def mask(self, batch: Mapping[str, torch.Tensor], generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The model's inputs from a padded batch (:meth:`pad`): masked ``input_ids``, MLM ``labels``, the
        other columns as they are; ``special_tokens_mask`` and ``word_ids`` are the collator's own, left out.
        ``generator``: where the masks come from (None: the step's stream, :meth:`generator`)."""
        input_ids = batch["input_ids"]
        generator = generator if generator is not None else self.generator(input_ids.device)
        masked, labels = self.strategy(dict(batch), generator,
                                       mask_token_id=self.tokenizer.mask_token_id, vocab_size=len(self.tokenizer))
        inputs = {k: v for k, v in batch.items() if k not in ("special_tokens_mask", "word_ids")}
        return {**inputs, "input_ids": masked, "labels": labels}

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.pad(features)
        if self.attached:  # masked at the step by the Masker that attached this collator
            return batch
        return self.mask(batch, self.batch_generator(batch))

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

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        if not self.attached:
            rank, size = rank_and_size()
            where = f" (process {rank} of {size})" if size > 1 else ""
            raise RuntimeError(
                f"the {self.strategy.name!r} collator is used without typhoon.hf's step hook{where}: its masks need "
                "the saliency of the step before, which a collator cannot see, and it will not fall back to uniform "
                "masking. Train with typhoon.hf.TyphoonTrainer (or a Trainer class with typhoon.hf."
                "TyphoonTrainerMixin first among its bases), which adds its TyphoonCallback; in a loop of your own, "
                "draw the masks with typhoon.hf.Masker(collator, model) (docs/hf_trainer.md)")
        return self.pad(features)

    def prepare_on(self, examples: Sequence[Mapping[str, Any]]) -> None:
        """Typhoon's corpus counts from the training examples' ``input_ids`` (special tokens as in :meth:`pad`):
        the budget p holds over this text. The callback calls it on the Trainer's training set."""
        rows = [{"input_ids": ids, "special_tokens_mask": [int(t in self._special) for t in ids]}
                for ids in (as_ids(x["input_ids"]) for x in examples)]
        self.strategy.prepare_on(rows, len(self.tokenizer))


def stream_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed for ``torch.Generator.manual_seed`` from ``seed`` and further ``keys`` (a rank, a batch's
    digest): numpy's SeedSequence, so that neighbouring keys give unrelated streams."""
    state = np.random.SeedSequence(seed, spawn_key=tuple(keys)).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))


def column_tensor(key: str, values: list, lengths: list[int], width: int) -> torch.Tensor:
    """One more column of the features as a tensor: padded to ``width`` where it holds one value per token (a
    list as long as each row's ``input_ids``), else stacked (a number, or equal-length lists, per example).
    ValueError naming the column where it cannot be batched (a text column, lists of different lengths)."""
    try:
        if all(hasattr(v, "__len__") and not isinstance(v, (str, bytes)) and len(v) == n
               for v, n in zip(values, lengths, strict=True)):
            out = torch.zeros((len(values), width), dtype=torch.as_tensor(as_ids(values[0])).dtype)
            for row, v in enumerate(values):
                out[row, :len(v)] = torch.as_tensor(as_ids(v))
            return out
        return torch.as_tensor(np.asarray([as_ids(v) if hasattr(v, "__len__") else v for v in values]))
    except (TypeError, ValueError, RuntimeError) as error:
        kind = type(values[0]).__name__
        raise ValueError(
            f"column {key!r} cannot be batched ({kind} values: {error}). The collator pads input_ids and the "
            "columns with one value per token, and stacks every other column, which must hold a number or "
            f"equal-length lists per example. Drop it (dataset.remove_columns([{key!r}]), or keep the Trainer's "
            "remove_unused_columns=True) or tokenize it") from None


def masking_collator(tokenizer, strategy: str = "random", **params: Any) -> MaskingCollator:
    """The collator of ``strategy`` (a :class:`TyphoonCollator` for the Typhoon family, which learns), with the
    strategy's parameters (``p`` or ``mlm_probability``, ``corruption``, ``delta``, ...; ``seed``,
    ``pad_to_multiple_of``)."""
    probe = MaskingCollator(tokenizer, strategy, **params)  # checks the name and parameters once
    return TyphoonCollator(tokenizer, strategy, **params) if probe.strategy.needs_saliency else probe
