"""The part of Typhoon that learns, as a ``TrainerCallback``: the saliency of each step, taken from the step's own
backward pass, updates the state the next step's masks are drawn from.

Saliency is :class:`typhoon.masking.SaliencyProbe`'s, the bundle's one: a hook on the model's input
embeddings keeps the gradient of the loss at their output, and ``<grad_i, E[t_i]>`` is the gradient of the
loss w.r.t. the one-hot input of the true token t_i (no second forward or backward). What the callback adds is
the ``Trainer``'s timing:

- the masks of an optimizer step's micro-batches are drawn by :meth:`TyphoonCallback.draw`, called by
  :class:`typhoon.hf.trainer.TyphoonTrainerMixin` when the step's batches are fetched, all from the state the
  previous step left;
- after each micro-batch's backward (``on_substep_end``; the last one: ``on_pre_optimizer_step``, before the
  weights move, as the bundle's step reads it) its saliency is read; with fp16 the loss scale is divided out;
- then the strategy learns once per optimizer step, from the step's micro-batches taken together as one
  batch (the bundle's update of a batch that size). A step whose saliency is not finite (fp16 overflow: the
  optimizer skips it too) teaches nothing.

Checkpoints: ``on_save`` writes the strategy's state (``typhoon_masking.npz``, the bundle's format) and the
masks' generators (``typhoon_mask_generators.npz``) into the checkpoint folder; a ``train(resume_from_checkpoint=
...)`` of the mixin reads them back at ``on_train_begin``, so a resumed run draws the masks an uninterrupted one
draws. The callback also serves the non-learning collators there (their generator is saved and restored).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from typhoon.masking import IGNORE_INDEX, SaliencyProbe, load_state

from .collators import MaskingCollator, TyphoonCollator

STATE_FILE = "typhoon_masking.npz"  # the strategy's state, as the bundle's records keep it (load_state reads it)
GENERATORS_FILE = "typhoon_mask_generators.npz"  # the masks' generator state on each device


def require_mlm_head(model) -> None:
    """Refuse a model without a masked-LM head, naming it."""
    if model is None or getattr(model, "get_output_embeddings", lambda: None)() is None:
        name = type(model).__name__
        raise ValueError(f"the model ({name}) has no masked-LM head: masked-LM training needs one to predict the "
                         "masked tokens. Load it with AutoModelForMaskedLM.from_pretrained(...) (a checkpoint "
                         "without a head gets a new one)")


class TyphoonCallback(TrainerCallback):
    """Saliency in, learnt state out, checkpoints kept (see the module docstring). One per collator; the mixin
    adds it when the Trainer's collator is one of typhoon.hf's."""

    def __init__(self, collator: MaskingCollator):
        if not isinstance(collator, MaskingCollator):
            raise TypeError(f"TyphoonCallback takes a typhoon.hf collator, got {type(collator).__name__}")
        self.collator = collator
        self.learns = isinstance(collator, TyphoonCollator)
        self.resume_from: str | None = None  # the checkpoint the Trainer resumes from (set by the mixin's train())
        self.scaler = None  # fp16's gradient scaler (set by the mixin): the probe's gradient is scaled by it
        self.probe: SaliencyProbe | None = None
        self.drawn: list[dict[str, torch.Tensor]] = []  # this step's micro-batches, unmasked, and what was selected
        self.saliency: list[torch.Tensor] = []  # their saliency, read after each backward
        self.steps_learnt = 0

    # -- the masks of a step ---------------------------------------------------------------------
    def draw(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The model's inputs for one micro-batch of the coming step (masks from the current state)."""
        inputs = self.collator.mask(batch)
        self.drawn.append({"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
                           "special_tokens_mask": batch["special_tokens_mask"],
                           "selected": inputs["labels"] != IGNORE_INDEX})
        return inputs

    # -- the Trainer's events --------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        require_mlm_head(model)
        if self.resume_from:
            self.load(self.resume_from)
        if not self.learns:
            return
        if not self.collator.attached:
            raise RuntimeError("TyphoonCallback draws its masks through typhoon.hf.TyphoonTrainerMixin: train with "
                               "typhoon.hf.TyphoonTrainer or a Trainer class with the mixin first among its bases")
        strategy = self.collator.strategy
        if strategy.counts is None:  # neither prepared by the user nor restored from a checkpoint
            self.collator.prepare_on(training_examples(train_dataloader))
        # on a GPU the state learns where the batches are, as in the bundle's GPU runs (no host round trip)
        strategy.learn_on(args.device if args.device.type == "cuda" else None)
        self.drawn, self.saliency = [], []
        self.probe = SaliencyProbe(model.get_input_embeddings()).__enter__()

    def on_substep_end(self, args, state, control, **kwargs):
        if self.learns:
            self.read_saliency()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.learns:
            self.read_saliency()
            self.learn()

    def on_save(self, args, state, control, **kwargs):
        self.save(Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")

    def on_train_end(self, args, state, control, **kwargs):
        if self.probe is not None:
            self.probe.__exit__(None, None, None)
            self.probe = None

    # -- learning --------------------------------------------------------------------------------
    def read_saliency(self) -> None:
        """The saliency of the micro-batch whose backward just ran (the next one drawn and not yet read)."""
        batch = self.drawn[len(self.saliency)]
        saliency = self.probe.saliency(batch["input_ids"]).float()
        if self.scaler is not None:  # fp16: the backward ran on the scaled loss
            saliency = saliency / self.scaler.get_scale()
        self.saliency.append(saliency)

    def learn(self) -> None:
        """One update of the strategy from the step's micro-batches, taken together as one batch."""
        drawn, saliency = self.drawn, self.saliency
        self.drawn, self.saliency = [], []
        if len(saliency) != len(drawn):
            raise RuntimeError(f"{len(drawn)} micro-batches were masked for this step but {len(saliency)} backward "
                               "passes seen: the masks must be drawn by TyphoonTrainerMixin.get_batch_samples")
        batch, selected, saliency = stack_rows(drawn, saliency, self.collator.tokenizer.pad_token_id)
        if not bool(torch.isfinite(saliency).all()):  # fp16 overflow: the optimizer skips this step too
            return
        self.collator.strategy.update(batch, selected, saliency)
        self.steps_learnt += 1

    # -- checkpoints -----------------------------------------------------------------------------
    def save(self, folder: str | os.PathLike) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.learns:
            self.collator.strategy.save(folder / STATE_FILE)
        with open(folder / GENERATORS_FILE, "wb") as fh:
            np.savez(fh, **self.collator.generator_states())

    def load(self, folder: str | os.PathLike) -> None:
        folder = Path(folder)
        missing = [name for name in ((STATE_FILE,) if self.learns else ()) + (GENERATORS_FILE,)
                   if not (folder / name).is_file()]
        if missing:
            raise FileNotFoundError(f"checkpoint {folder} has no {missing}: it was not saved by a Trainer with "
                                    "typhoon.hf's callback, so the masking state cannot be restored; resume from a "
                                    "checkpoint of the same run, or start afresh")
        if self.learns:
            self.collator.strategy.load_state_dict(load_state(folder / STATE_FILE))
        with np.load(folder / GENERATORS_FILE, allow_pickle=False) as states:
            self.collator.load_generator_states({device: states[device] for device in states.files})


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


def stack_rows(drawn: list[dict], saliency: list[torch.Tensor],
               pad_token_id: int) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """The micro-batches of one step as one batch (rows stacked, padded to the widest), its selection and
    saliency. One micro-batch is returned as it is."""
    if len(drawn) == 1:
        only = drawn[0]
        return ({k: only[k] for k in ("input_ids", "attention_mask", "special_tokens_mask")}, only["selected"],
                saliency[0])
    width = max(d["input_ids"].shape[1] for d in drawn)

    def stacked(parts: list[torch.Tensor], fill) -> torch.Tensor:
        out = parts[0].new_full((sum(p.shape[0] for p in parts), width), fill)
        row = 0
        for part in parts:
            out[row:row + part.shape[0], :part.shape[1]] = part
            row += part.shape[0]
        return out

    batch = {"input_ids": stacked([d["input_ids"] for d in drawn], pad_token_id),
             "attention_mask": stacked([d["attention_mask"] for d in drawn], 0),
             "special_tokens_mask": stacked([d["special_tokens_mask"] for d in drawn], True)}  # padding: special
    return batch, stacked([d["selected"] for d in drawn], False), stacked(saliency, 0.0)
