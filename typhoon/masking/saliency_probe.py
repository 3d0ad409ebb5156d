"""How saliency is measured: :class:`SaliencyProbe`, a hook on a model's word embedding that turns one
backward pass into the saliency of every position, for any loss (the MLM loss of phase 1, or a task loss,
:mod:`typhoon.masking.task_saliency`). The Typhoon strategy learns from it
(:meth:`typhoon.masking.saliency.TyphoonMasking.update`) but never computes it: the MLM phase, the Trainer
callback and the walkthrough hold the probe.

For position i holding the true token t_i, s_i = dL/de_{i,t_i}: the gradient of the loss with respect to the
one-hot input, as if the word embedding were ``one_hot @ W``. Since x_i = W[t_i] is the embedding output,
dL/de_{i,v} = <dL/dx_i, W[v]>, so s_i only needs the gradient at the word-embedding output (captured by a
hook) and one (B, L, H) product: no B x L x V tensor. At a masked position the input is [MASK], but t_i is
the ORIGINAL token (the one the model should recover); pass the original ids to :meth:`SaliencyProbe.saliency`.
"""

from __future__ import annotations

import torch
from torch import nn


class SaliencyProbe:
    """Capture the gradient at a word-embedding module's output to compute token saliency.

    Usage (register on ``model.get_input_embeddings()``)::

        with SaliencyProbe(model.get_input_embeddings()) as probe:
            loss = model(input_ids=masked_ids, ..., labels=mlm_labels).loss
            loss.backward()
        saliency = probe.saliency(original_ids)          # (B, L) = <dL/dx_i, W[t_i]>

    Each forward through the module replaces the captured gradient, so with gradient accumulation
    read the saliency after each micro-batch's backward. The embedding weight must require grad
    (or the forward must otherwise build a graph through the embedding output).
    """

    def __init__(self, embedding: nn.Module):
        if not isinstance(getattr(embedding, "weight", None), torch.Tensor):
            raise ValueError(f"SaliencyProbe needs an embedding module with a .weight, got {type(embedding).__name__}")
        self.embedding = embedding
        self._handle = None
        self._grad: torch.Tensor | None = None
        self._saw_forward = False

    def __enter__(self) -> SaliencyProbe:
        self._handle = self.embedding.register_forward_hook(self._on_forward)
        return self

    def __exit__(self, *exc) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _on_forward(self, module, inputs, output) -> None:
        self._grad = None
        self._saw_forward = True
        if output.requires_grad:
            output.register_hook(self._on_grad)

    def _on_grad(self, grad: torch.Tensor) -> None:
        self._grad = grad.detach()

    def saliency(self, true_ids: torch.Tensor) -> torch.Tensor:
        """(B, L) <dL/dx_i, W[t_i]> for the ORIGINAL token ids ``true_ids`` (at least float32)."""
        if self._grad is None:
            why = ("the embedding output did not require grad" if self._saw_forward
                   else "no forward pass went through the embedding inside the probe")
            raise RuntimeError(f"no gradient captured ({why}); call loss.backward() inside the probe")
        weight = self.embedding.weight.detach()
        true_ids = true_ids.to(weight.device)
        dtype = torch.promote_types(torch.promote_types(self._grad.dtype, weight.dtype), torch.float32)
        rows = weight.index_select(0, true_ids.reshape(-1)).view(*true_ids.shape, -1)  # W[t_i]
        return (self._grad.to(dtype) * rows.to(dtype)).sum(dim=-1)
