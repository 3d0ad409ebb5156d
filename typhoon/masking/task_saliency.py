"""Task-loss saliency for Typhoon masking (``saliency = "task"``, strategy alias ``typhoon_task``).

Typhoon's paper measures saliency with the MLM loss: s_i = dL_MLM/de_{i,t_i}. That says which tokens
the *language model* finds hard, not which ones matter for the *task* the encoder is fine-tuned on
afterwards. Here the saliency comes from a task loss instead; everything downstream (the per-type EMA,
its signs, the calibrations, the exact budget: :mod:`typhoon.masking.saliency`) is unchanged, so a
``typhoon_task`` run differs from a ``typhoon`` run only in where the gradient comes from.

Design
------
- **A task model that has learned the task.** The saliency is the gradient of the loss of a *separate*
  sequence classifier (the backbone's own, :meth:`typhoon.models.backbones.Backbone.classifier`, built from the
  pretrained encoder as phase 2's is), fine-tuned on the task's training split for
  ``task_head_warmup`` steps before phase 1 (``training.run.warm_up_task_model``: the task's ``ft_lr``,
  its own data order and dropout stream, so the phase-1 data order and dropout draws stay those of
  every other strategy). Its dev accuracy must then exceed the majority class's
  (:func:`require_learned`), else the run is refused: the gradient of a head at chance is noise about
  the labels. (The first version trained a head alongside phase 1 on the shared encoder; its task loss
  stayed at the label-prior entropy, and a head on the frozen encoder does not get above the majority
  class on CoLA either, so the task model has its own encoder.) The record holds the check
  (:func:`task_head_report`, ``metrics.json["task_head"]``).
- **The task gradient stays out of the phase-1 encoder.** The task model is frozen during phase 1
  (eval mode, no update); :func:`task_saliency` differentiates its loss with respect to its word
  embeddings' output only (``torch.autograd.grad``), so no parameter receives a gradient from it. The
  phase-1 encoder is updated by its MLM loss alone, with the same optimizer and clipping as every
  other strategy: ``typhoon`` and ``typhoon_task`` runs differ in the masks, nothing else.
- **The saliency.** For position i holding the original token t_i,
  s_i = dL_task/de_{i,t_i} = <dL_task/dx_i, W[t_i]> (x_i the task model's word-embedding output, W its
  embedding matrix), read by the same hook as the MLM saliency (:class:`~typhoon.masking.SaliencyProbe`),
  on the same masked (corrupted) batch the MLM update sees, so "masked" and "visible" mean the same
  for both saliency sources. Cost per phase-1 step: one more forward and an input-only backward.
- **Signs (unchanged).** At a selected (masked) position the input is [MASK], a random token or
  the token itself, but s_i is the coordinate of the ORIGINAL token: + s_i enters the type's batch
  estimate; at a visible, non-special position - s_i does. [CLS], [SEP] and padding never count.
  At a visible position, -s_i > 0 means that more of this token would lower the task loss, i.e. the
  token carries evidence for the label; such types gain masking probability.
- **Not carried to fine-tuning.** Phase 2 starts from the adapted encoder with a fresh classifier,
  exactly as for every other strategy; the task model is dropped (carrying it would leak a classifier
  trained on the labels into the comparison).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.nn.functional as F

from typhoon.masking import SaliencyProbe
from typhoon.masking.params import uses_task_saliency


class TaskHeadAtChance(ValueError):
    """The task model's dev accuracy is not above the majority class's: its gradient would be noise."""


def require_warmup(config) -> None:
    """A task-saliency run needs ``task_head_warmup >= 1`` (checked before anything is loaded or written)."""
    if uses_task_saliency(config.strategy, config.strategy_params()) and config.task_head_warmup < 1:
        raise ValueError(
            f"strategy {config.strategy!r} takes its saliency from a task model, which must learn the task "
            f"first: set task_head_warmup to a number of fine-tuning steps (e.g. --set task_head_warmup=230 "
            f"for MRPC, two epochs at batch 32), got {config.task_head_warmup}")


def label_entropy(labels) -> float:
    """Entropy (nats) of the label distribution: the task loss of a head that only knows the prior."""
    counts = np.bincount(np.asarray(labels))
    share = counts[counts > 0] / counts.sum()
    return float(-(share * np.log(share)).sum())


def task_head_report(dev_accuracy: float, dev_labels, train_labels, warmup_steps: int) -> dict:
    """What ``metrics.json["task_head"]`` records: the task model's dev accuracy after its warm-up, the
    majority training class's dev accuracy, whether the first is above the second, the warm-up steps,
    and the label-prior entropy (the task loss a head at chance reaches)."""
    dev_labels = np.asarray(dev_labels)
    majority = np.bincount(np.asarray(train_labels)).argmax()
    majority_accuracy = float((dev_labels == majority).mean())
    return {"dev_accuracy": float(dev_accuracy), "majority_accuracy": majority_accuracy,
            "learned": bool(dev_accuracy > majority_accuracy), "warmup_steps": int(warmup_steps),
            "prior_entropy": label_entropy(train_labels)}


def require_learned(report: dict, task: str) -> None:
    """Refuse (:class:`TaskHeadAtChance`) a task model whose dev accuracy is not above the majority class."""
    if not report["learned"]:
        raise TaskHeadAtChance(
            f"{task}: the task model's dev accuracy {report['dev_accuracy']:.4f} after {report['warmup_steps']} "
            f"warm-up steps is not above the majority class's {report['majority_accuracy']:.4f}; its gradient "
            "would be noise about the labels. Raise task_head_warmup.")


def task_loss(classifier: torch.nn.Module, inputs: dict[str, torch.Tensor], task_labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the classifier's logits (in at least float32) against the task labels."""
    logits = classifier(**inputs).logits
    return F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), task_labels)


def task_saliency(classifier: torch.nn.Module, inputs: dict[str, torch.Tensor], task_labels: torch.Tensor,
                  true_ids: torch.Tensor, autocast=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(task loss, saliency dL_task/de_{i,t_i} (B, L) for the ORIGINAL ids ``true_ids``) of one batch.

    ``inputs`` are the classifier's inputs of the masked batch (``Backbone.model_inputs``); ``autocast``
    a context manager factory for the forward (None: none). The loss is differentiated with respect to
    the word-embedding output only: no parameter (of the classifier or anything else) gets a gradient.
    """
    embeddings = classifier.get_input_embeddings()
    captured = []
    handle = embeddings.register_forward_hook(lambda module, args, output: captured.append(output))
    try:
        with SaliencyProbe(embeddings) as probe:
            with autocast() if autocast is not None else contextlib.nullcontext():
                loss = task_loss(classifier, inputs, task_labels)
            torch.autograd.grad(loss, captured[-1:])  # the probe's hook reads dL/dx on the way
            saliency = probe.saliency(true_ids)
    finally:
        handle.remove()
    return loss.detach(), saliency

