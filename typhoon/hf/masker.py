"""The masks of a training step and what the step teaches, for any loop: :class:`Masker`.

A training loop of your own (plain PyTorch, accelerate, nanoGPT's shape) uses the same collator and state as
``TyphoonTrainer`` (whose :class:`~typhoon.hf.callback.TyphoonCallback` holds a Masker)::

    collator = masking_collator(tokenizer, "typhoon", mlm_probability=0.15, seed=0)
    masker = Masker(collator, model)                 # a hook on the model's input embeddings
    masker.prepare_on(train_examples)                # Typhoon: the text its budget holds over
    loader = DataLoader(train_examples, batch_size=32, shuffle=True, collate_fn=collator)  # it only pads now
    for batch in loader:
        inputs = masker.draw(batch)                  # the masks, from the state the last step left
        loss = model(**inputs).loss
        loss.backward()                              # the saliency is read from this backward
        masker.learn()                               # one update (shared by every rank under DDP)
        optimizer.step()
        optimizer.zero_grad()

- :meth:`Masker.draw` masks one (micro-)batch from the step's stream (:meth:`MaskingCollator.generator`, seeded
  per rank) and, for Typhoon, keeps what was selected.
- After each micro-batch's backward, :meth:`Masker.read_saliency` takes its saliency from the probe
  (:class:`typhoon.masking.SaliencyProbe`: the gradient at the input embeddings, no second pass); with fp16 the
  loss scale of ``scaler`` is divided out. :meth:`Masker.learn`, once per optimizer step, reads the last one
  itself and updates the state from the step's micro-batches taken together
  (:func:`typhoon.masking.shared_update`: one ``all_reduce`` under ``torch.distributed``; every rank calls it).
- Checkpoints: :meth:`Masker.state_dict` / :meth:`Masker.load_state_dict` (for ``torch.save`` beside the model's),
  or :meth:`Masker.save` / :meth:`Masker.load` into a folder (the Trainer's checkpoints). What is saved names its
  strategy, parameters and tokenizer, and a state of another strategy, vocabulary or tokenizer is refused,
  naming both.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from typhoon.atomic import atomic_write_json, written_atomically
from typhoon.masking import IGNORE_INDEX, SaliencyProbe, load_state, rank_and_size, shared_update

from .collators import MaskingCollator

IDENTITY_FILE = "typhoon_masking.json"  # what the state belongs to: strategy, parameters, tokenizer, processes
STATE_FILE = "typhoon_masking.npz"  # the strategy's state, as the bundle's records keep it (load_state reads it)
GENERATORS_FILE = "typhoon_mask_generators.npz"  # the step's mask stream on each device (one process)


def generators_file(rank: int, size: int) -> str:
    """The file of one rank's mask streams (one per rank in a data-parallel run, as the Trainer's RNG states)."""
    return GENERATORS_FILE if size == 1 else GENERATORS_FILE.replace(".npz", f"_{rank}.npz")


def vocabulary_digest(tokenizer) -> str:
    """16 hex digits of SHA-256 over the tokenizer's vocabulary (token -> id): two tokenizers that map the same
    tokens to the same ids have the same digest, wherever they were loaded from."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


class Masker:
    """Draws a step's masks and learns from the step's own backward, in any training loop (module docstring).

    ``model``: the model whose input embeddings the saliency is read at (Typhoon only; :meth:`watch` it later
    if it is not built yet). ``group``: the process group the state is shared across (None: every process of
    ``torch.distributed``, where it is initialized). The collator only pads from now on (``attached``).
    """

    def __init__(self, collator: MaskingCollator, model=None, *, group=None):
        if not isinstance(collator, MaskingCollator):
            raise TypeError(f"Masker takes a typhoon.hf collator (masking_collator(...)), got {type(collator).__name__}")
        self.collator = collator
        self.learns = bool(collator.strategy.needs_saliency)
        self.group = group
        self.scaler = None  # fp16's gradient scaler, if the backward ran on a scaled loss
        self.probe: SaliencyProbe | None = None
        self.drawn: list[dict[str, torch.Tensor]] = []  # this step's micro-batches, unmasked, and what was selected
        self.saliency: list[torch.Tensor] = []  # their saliency, read after each backward
        self.steps_learnt = 0
        self._vocabulary: str | None = None
        collator.attached = True
        if model is not None:
            self.watch(model)

    def __repr__(self) -> str:
        return f"Masker({self.collator!r})"

    # -- set-up ----------------------------------------------------------------------------------
    def watch(self, model) -> None:
        """Read the saliency at ``model``'s input embeddings (Typhoon; nothing for a strategy that learns nothing).
        On a GPU the state learns where the embeddings are, as in the bundle's GPU runs (no host round trip)."""
        if not self.learns:
            return
        self.close()
        if not hasattr(model, "get_input_embeddings"):  # DistributedDataParallel(model), accelerate's wrappers
            model = getattr(model, "module", model)
        embeddings = model.get_input_embeddings()
        self.probe = SaliencyProbe(embeddings).__enter__()
        device = embeddings.weight.device
        self.collator.strategy.learn_on(device if device.type == "cuda" else None)

    def prepare_on(self, examples) -> None:
        """Typhoon's corpus counts from the tokenized training examples (``input_ids``): its budget holds over
        this text. Nothing for a strategy that learns nothing."""
        if self.learns:
            self.collator.prepare_on(examples)

    def close(self) -> None:
        """Remove the hook on the embeddings."""
        if self.probe is not None:
            self.probe.__exit__(None, None, None)
            self.probe = None

    # -- a step ----------------------------------------------------------------------------------
    def draw(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The model's inputs for one (micro-)batch the collator padded: its masks from the current state."""
        if self.learns:
            if self.probe is None:
                raise RuntimeError("the Masker reads Typhoon's saliency at the model's input embeddings: give it the "
                                   "model (Masker(collator, model), or masker.watch(model)) before the first step")
            if self.collator.strategy.counts is None:
                raise RuntimeError("Typhoon's budget holds over the training text's token counts: call "
                                   "masker.prepare_on(train_examples) with your tokenized training examples first")
        if "special_tokens_mask" not in batch:
            raise ValueError("draw() takes a batch the collator padded (collate_fn=collator, which only pads once a "
                             f"Masker draws the masks), got one with {sorted(batch)}")
        inputs = self.collator.mask(batch)
        if self.learns:
            self.drawn.append({"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
                               "special_tokens_mask": batch["special_tokens_mask"],
                               "selected": inputs["labels"] != IGNORE_INDEX})
        return inputs

    def read_saliency(self) -> None:
        """The saliency of the micro-batch whose backward just ran (the next one drawn and not yet read)."""
        if not self.learns:
            return
        if len(self.saliency) >= len(self.drawn):
            raise RuntimeError(f"{len(self.drawn)} micro-batches were drawn but {len(self.saliency) + 1} backward "
                               "passes read: draw each micro-batch with masker.draw(batch) before its forward")
        batch = self.drawn[len(self.saliency)]
        saliency = self.probe.saliency(batch["input_ids"]).float()
        if self.scaler is not None:  # fp16: the backward ran on the scaled loss
            saliency = saliency / self.scaler.get_scale()
        self.saliency.append(saliency)

    def learn(self) -> bool:
        """One update of the state from this optimizer step's micro-batches, taken together as one batch (and
        with every other rank's: a collective). Reads the last backward's saliency if it is not read yet. False
        where nothing was learnt (a strategy that learns nothing; a saliency that is not finite, fp16 overflow,
        whose step the optimizer skips too)."""
        if not self.learns:
            return False
        if len(self.saliency) < len(self.drawn):
            self.read_saliency()
        drawn, saliency = self.drawn, self.saliency
        self.drawn, self.saliency = [], []
        if len(saliency) != len(drawn) or not drawn:
            raise RuntimeError(f"{len(drawn)} micro-batches were masked for this step but {len(saliency)} backward "
                               "passes read: draw each micro-batch with masker.draw(batch), then backward")
        batch, selected, saliency = stack_rows(drawn, saliency, self.collator.tokenizer.pad_token_id)
        learnt = shared_update(self.collator.strategy, batch, selected, saliency, self.group)
        self.steps_learnt += int(learnt)
        return learnt

    # -- checkpoints -----------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """What a saved state belongs to: the strategy and its parameters, the tokenizer (name, vocabulary size,
        :func:`vocabulary_digest`) and the number of processes (one mask stream each)."""
        if self._vocabulary is None:
            self._vocabulary = vocabulary_digest(self.collator.tokenizer)
        strategy, tokenizer = self.collator.strategy, self.collator.tokenizer
        return {"strategy": strategy.name, "params": strategy.params, "seed": self.collator.seed,
                "tokenizer": getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__,
                "vocab_size": len(tokenizer), "vocabulary": self._vocabulary,
                "processes": rank_and_size(self.group)[1]}

    def check_identity(self, saved: Mapping[str, Any], where: str) -> None:
        """Refuse a state saved for another strategy, its parameters, tokenizer or number of processes, naming
        both sides."""
        here = self.identity()
        if (saved.get("strategy"), saved.get("params")) != (here["strategy"], here["params"]):
            raise ValueError(f"{where} holds the masking state of strategy {saved.get('strategy')!r} with "
                             f"{saved.get('params')}, but this collator's is {here['strategy']!r} with {here['params']}: "
                             "resume with the strategy it was saved with, or start afresh")
        if (saved.get("vocab_size"), saved.get("vocabulary")) != (here["vocab_size"], here["vocabulary"]):
            raise ValueError(f"{where} was saved with the tokenizer {saved.get('tokenizer')!r} (a vocabulary of "
                             f"{saved.get('vocab_size')} tokens, digest {saved.get('vocabulary')}), but this collator "
                             f"has {here['tokenizer']!r} ({here['vocab_size']} tokens, digest {here['vocabulary']}): "
                             "a masking state belongs to one vocabulary; resume with that tokenizer, or start afresh")
        if saved.get("processes") != here["processes"]:
            raise ValueError(f"{where} was saved by {saved.get('processes')} process(es), this run has "
                             f"{here['processes']}: each process resumes its own mask stream; resume with "
                             f"{saved.get('processes')}, or start afresh")

    def state_dict(self) -> dict[str, Any]:
        """Everything to resume this process's masks: ``identity``, the strategy's ``state`` (Typhoon) and this
        rank's ``generators`` (arrays and plain values: for ``torch.save`` beside the model's state)."""
        state = self.collator.strategy.state_dict() if self.learns else None
        return {"identity": self.identity(), "state": state, "generators": self.collator.generator_states()}

    def load_state_dict(self, state: Mapping[str, Any], where: str = "the state") -> None:
        self.check_identity(state["identity"], where)
        if self.learns:
            self.collator.strategy.load_state_dict(dict(state["state"]))
        self.collator.load_generator_states(state["generators"])

    def save(self, folder: str | os.PathLike) -> None:
        """Into ``folder`` (a Trainer checkpoint): the identity and state (the first process: every rank holds the
        same) and this rank's mask streams."""
        folder = Path(folder)
        rank, size = rank_and_size(self.group)
        if rank == 0:
            atomic_write_json(folder / IDENTITY_FILE, self.identity())
            if self.learns:
                with written_atomically(folder / STATE_FILE) as tmp:
                    self.collator.strategy.save(tmp)
        with written_atomically(folder / generators_file(rank, size)) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **self.collator.generator_states())

    def load(self, folder: str | os.PathLike) -> None:
        """What :meth:`save` wrote into ``folder``, checked against this collator first."""
        folder = Path(folder)
        rank, size = rank_and_size(self.group)
        if not (folder / IDENTITY_FILE).is_file():
            raise FileNotFoundError(f"checkpoint {folder} has no {IDENTITY_FILE}: it was not saved by a Trainer with "
                                    "typhoon.hf's callback, so the masks cannot be resumed; resume from a checkpoint "
                                    "of the same run, or start afresh")
        self.check_identity(json.loads((folder / IDENTITY_FILE).read_text(encoding="utf-8")), f"checkpoint {folder}")
        missing = [name for name in ((STATE_FILE,) if self.learns else ()) + (generators_file(rank, size),)
                   if not (folder / name).is_file()]
        if missing:
            raise FileNotFoundError(f"checkpoint {folder} lacks {missing} (a save that did not finish?): resume from "
                                    "another checkpoint of the run, or start afresh")
        if self.learns:
            self.collator.strategy.load_state_dict(load_state(folder / STATE_FILE))
        with np.load(folder / generators_file(rank, size), allow_pickle=False) as states:
            self.collator.load_generator_states({device: states[device] for device in states.files})


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
