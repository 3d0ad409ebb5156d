"""Task-loss saliency for Typhoon masking (``saliency = "task"``, strategy alias ``typhoon_task``).

Typhoon's paper measures saliency with the MLM loss: s_i = dL_MLM/de_{i,t_i}. That says which tokens
the *language model* finds hard, not which ones matter for the *task* the encoder is fine-tuned on
afterwards. Here the saliency comes from a task loss instead; everything downstream (the per-type EMA,
its signs, the calibrations, the exact budget: :mod:`typhoon.masking.saliency`) is unchanged, so a
``typhoon_task`` run differs from a ``typhoon`` run only in where the gradient comes from.

Design
------
- **A task head in phase 1.** :class:`MaskedLMWithTask` puts a small classification head
  (:class:`TaskHead`: dense, tanh, linear on the first token's final hidden state, the [CLS]
  position of every supported family, i.e. BERT's pooler + classifier shape) on the *same* encoder
  as the MLM head. Phase 1 minimises L = L_MLM + L_task (cross-entropy on the task's labels, which
  the task's training split has), both computed from **one forward pass of the same masked
  (corrupted) batch**. Why the corrupted input and not a second, clean forward: one forward serves
  both losses (a clean pass would cost another forward and backward of the encoder), and the
  saliency is then measured on exactly the input the MLM update sees, so "masked" and "visible"
  mean the same for both saliency sources. Why train the head (rather than freeze a random one): the
  gradient of an untrained head's loss is noise about the labels; trained alongside, it becomes the
  gradient of a classifier that is learning the task, from the first steps on.
- **The saliency.** For position i holding the original token t_i,
  s_i = dL_task/de_{i,t_i} = <dL_task/dx_i, W[t_i]> (x_i the word-embedding output), read by the
  same hook as the MLM saliency (:class:`~typhoon.masking.SaliencyProbe`). It must be the gradient
  of L_task alone, not of L: :func:`backward_with_task_saliency` back-propagates L_task first
  (keeping the graph), reads the saliency, then back-propagates L_MLM, so the parameters receive the
  gradient of the sum and the saliency only the task's part. The backward pass split in two (the graph
  kept between them) is the extra cost of this source: a step's forward and backward took 1.4x those
  of an MLM-saliency step (minilm-l6, MRPC, batch 32, bf16, 1 thread on a loaded 2-core Xeon;
  ``benchmarks/bench_task_saliency.py``).
- **Signs (unchanged).** At a selected (masked) position the input is [MASK], a random token or
  the token itself, but s_i is the coordinate of the ORIGINAL token: + s_i enters the type's batch
  estimate; at a visible, non-special position - s_i does. [CLS], [SEP] and padding never count
  (they are never masked). At a visible position, -s_i > 0 means that more of this token would lower
  the task loss, i.e. the token carries evidence for the label; such types gain masking probability,
  as MLM-salient types do in the paper.
- **Not carried to fine-tuning.** Phase 2 starts from the adapted encoder only, with a fresh
  classifier (:meth:`typhoon.models.Backbone.classifier`), exactly as for every other strategy: the
  phase-1 task head is dropped, so the only difference between ``typhoon`` and ``typhoon_task`` runs
  is the masking (and the task loss's gradient in the encoder during phase 1, which comes with it).
  Carrying the head would also let phase 1 leak a head pre-trained on the labels into the comparison.
- **Mask-free step.** A batch with nothing selected has no MLM loss; the pipeline skips it, for
  both sources, so the task loss alone never updates the encoder.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from typhoon.masking import SaliencyProbe
from typhoon.models import MaskedLM, seeded


class TaskHead(nn.Module):
    """dense -> tanh -> linear on the first token's hidden state (the shape of BERT's pooler + classifier)."""

    def __init__(self, hidden_size: int, num_labels: int):
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"the task head classifies: it needs num_labels >= 2, got {num_labels}")
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size, num_labels)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (B, num_labels) from the encoder's final hidden states (B, L, H)."""
        return self.out(torch.tanh(self.dense(hidden[:, 0])))


class MaskedLMWithTask(nn.Module):
    """A :class:`~typhoon.models.MaskedLM` plus a :class:`TaskHead` on the same encoder: one forward,
    two losses (the module docstring). The head starts from ``seed``; ``mlm`` is shared, not copied."""

    def __init__(self, mlm: MaskedLM, num_labels: int, seed: int = 0):
        super().__init__()
        self.mlm = mlm
        with seeded(seed):
            self.task_head = TaskHead(mlm.model.config.hidden_size, num_labels)
        dtype = next(mlm.parameters()).dtype
        device = next(mlm.parameters()).device
        self.task_head.to(device=device, dtype=dtype)

    def forward(self, attention_mask: torch.Tensor, labels: torch.Tensor, task_labels: torch.Tensor,
                input_ids: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(MLM loss over the selected positions, task cross-entropy over the rows), from one encoder pass.

        ``input_ids`` or ``inputs_embeds`` (the word embeddings; the tests' one-hot reference) is the input.
        """
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        source = {"input_ids": input_ids} if inputs_embeds is None else {"inputs_embeds": inputs_embeds}
        hidden = self.mlm.encoder(attention_mask=attention_mask, **source, **kwargs).last_hidden_state
        selected = labels != -100
        logits = self.mlm.head(hidden[selected])
        at_least_fp32 = torch.promote_types(logits.dtype, torch.float32)  # as MaskedLM.forward
        mlm_loss = F.cross_entropy(logits.to(at_least_fp32), labels[selected])
        task_logits = self.task_head(hidden)
        task_loss = F.cross_entropy(task_logits.to(torch.promote_types(task_logits.dtype, torch.float32)), task_labels)
        return mlm_loss, task_loss


def backward_with_task_saliency(model: MaskedLMWithTask, inputs: dict[str, torch.Tensor], labels: torch.Tensor,
                                task_labels: torch.Tensor, true_ids: torch.Tensor,
                                autocast=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One phase-1 step's forward and backward: the parameters get d(L_MLM + L_task), the returned
    saliency is dL_task/de_{i,t_i} at every position (B, L), for the ORIGINAL ids ``true_ids``.

    ``inputs`` are the model inputs of the masked batch (``Backbone.model_inputs``); ``autocast`` a
    context manager factory for the forward (None: none). Returns (mlm_loss, task_loss, saliency).
    """
    embeddings = model.mlm.input_embeddings()
    with SaliencyProbe(embeddings) as probe:
        with autocast() if autocast is not None else contextlib.nullcontext():
            mlm_loss, task_loss = model(labels=labels, task_labels=task_labels, **inputs)
        task_loss.backward(retain_graph=True)  # the task's part alone reaches the probe first
        saliency = probe.saliency(true_ids)
        mlm_loss.backward()  # the parameters now hold the gradient of the sum
    return mlm_loss, task_loss, saliency
