"""The part of Typhoon that learns, as a ``TrainerCallback``: the saliency of each step, taken from the step's own
backward pass, updates the state the next step's masks are drawn from. The work is a
:class:`~typhoon.hf.masker.Masker`'s (the same as in a loop of your own); what the callback adds is the
``Trainer``'s timing:

- the masks of an optimizer step's micro-batches (every strategy's) are drawn by the Masker, called by
  :class:`typhoon.hf.trainer.TyphoonTrainerMixin` when the step's batches are fetched, all from the state the
  previous step left and from one stream saved with checkpoints;
- after each micro-batch's backward (``on_substep_end``; the last one: ``on_pre_optimizer_step``, before the
  weights move, as the bundle's step reads it) its saliency is read; with fp16 the loss scale is divided out;
- then the strategy learns once per optimizer step, from the step's micro-batches taken together as one
  batch (the bundle's update of a batch that size), and under ``torch.distributed`` from every rank's
  (:func:`typhoon.masking.shared_update`). A step whose saliency is not finite (fp16 overflow: the optimizer
  skips it too) teaches nothing.

Checkpoints: ``on_save`` writes into the checkpoint folder what the masks resume from (``typhoon_masking.json``:
strategy, parameters, tokenizer; ``typhoon_masking.npz``: Typhoon's state, the bundle's format;
``typhoon_mask_generators.npz``: the mask stream, one file per rank in a data-parallel run); a
``train(resume_from_checkpoint=...)`` of the mixin reads them back at ``on_train_begin``, checked against the
collator, so a resumed run draws the masks an uninterrupted one draws.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .collators import MaskingCollator, TyphoonCollator
from .masker import Masker


def require_mlm_head(model) -> None:
    """Refuse a model without a masked-LM head, naming it."""
    if model is None or getattr(model, "get_output_embeddings", lambda: None)() is None:
        name = type(model).__name__
        raise ValueError(f"the model ({name}) has no masked-LM head: masked-LM training needs one to predict the "
                         "masked tokens. Load it with AutoModelForMaskedLM.from_pretrained(...) (a checkpoint "
                         "without a head gets a new one)")


class TyphoonCallback(TrainerCallback):
    """Saliency in, learnt state out, checkpoints kept (see the module docstring). One per collator; the mixin
    adds it when the Trainer's collator is one of typhoon.hf's, and makes the Masker that draws the masks."""

    def __init__(self, collator: MaskingCollator):
        if not isinstance(collator, MaskingCollator):
            raise TypeError(f"TyphoonCallback takes a typhoon.hf collator, got {type(collator).__name__}")
        self.collator = collator
        self.learns = isinstance(collator, TyphoonCollator)
        self.masker: Masker | None = None  # made by TyphoonTrainerMixin (attach), which draws the masks through it
        self.resume_from: str | None = None  # the checkpoint the Trainer resumes from (set by the mixin's train())

    def attach(self) -> Masker:
        """The Masker that draws this collator's masks at each step (the collator only pads from now on)."""
        if self.masker is None:
            self.masker = Masker(self.collator)
        return self.masker

    @property
    def steps_learnt(self) -> int:
        return 0 if self.masker is None else self.masker.steps_learnt

    # -- the Trainer's events --------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        require_mlm_head(model)
        if self.masker is None:
            raise RuntimeError("TyphoonCallback draws its masks through typhoon.hf.TyphoonTrainerMixin: train with "
                               "typhoon.hf.TyphoonTrainer or a Trainer class with the mixin first among its bases "
                               "(a plain Trainer takes a random, whole_word or span collator alone)")
        if self.resume_from:
            self.masker.load(self.resume_from)
        self.masker.drawn, self.masker.saliency = [], []
        if self.learns:
            if self.collator.strategy.counts is None:  # neither prepared by the user nor restored from a checkpoint
                self.masker.prepare_on(training_examples(train_dataloader))
            self.masker.watch(model)

    def on_substep_end(self, args, state, control, **kwargs):
        self.masker.read_saliency()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.masker.learn()

    def on_save(self, args, state, control, **kwargs):
        self.masker.save(Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")

    def on_train_end(self, args, state, control, **kwargs):
        if self.masker is not None:
            self.masker.close()


def training_examples(train_dataloader):
    """The training set behind a Trainer's data loader, for Typhoon's corpus counts."""
    dataset = getattr(train_dataloader, "dataset", None)
    if dataset is None or isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
        raise ValueError("Typhoon's budget holds over the training text's token counts, and this training set "
                         f"({type(dataset).__name__}) cannot be read ahead: call collator.prepare_on(examples) "
                         "with your tokenized training examples before trainer.train()")
    if hasattr(dataset, "column_names"):  # a datasets.Dataset: the column in one read
        return [{"input_ids": ids} for ids in dataset["input_ids"]]
    return [dataset[i] for i in range(len(dataset))]
