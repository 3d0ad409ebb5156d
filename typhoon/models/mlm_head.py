"""The model families a backbone may be (each one's MLM head, token types and attention interface), and
``MaskedLM``: an encoder plus its family's MLM head, scoring the vocabulary at the selected positions only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


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

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None, every_position: bool = False):
        """Mean cross-entropy over the selected positions (``labels != -100``).

        Pass the inputs :meth:`Backbone.model_inputs` chose (token_type_ids only where the model uses them).
        ``labels`` may stay on the CPU while the model is on a GPU (the training step keeps them there): the
        selected positions are then counted on the host, and the step needs no sync with the device to size
        them, as ``hidden[labels != -100]`` on the device would (a boolean index waits for its count).
        ``every_position``: score every position and average over the selected ones, for labels that live on
        the device (masks drawn there): more head work, but nothing to count, so nothing to wait for. With
        nothing selected the loss is then 0, not NaN.
        """
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        if every_position:
            logits = self.head(hidden.reshape(-1, hidden.shape[-1]))
            targets = labels.reshape(-1).to(hidden.device, non_blocking=True)
            per_token = F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), targets,
                                        reduction="sum")
            return per_token / (targets != -100).sum().clamp(min=1)
        # the selected positions in row-major order, the order hidden[selected] has: the same rows, gathered
        # by index_select, whose backward puts each row's gradient back unchanged (the indices are distinct)
        positions = (labels != -100).reshape(-1).nonzero().squeeze(1)
        targets = labels.reshape(-1).index_select(0, positions).to(hidden.device, non_blocking=True)
        positions = positions.to(hidden.device, non_blocking=True)
        logits = self.head(hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions))
        # at least fp32 (bf16 autocast logits are promoted), never lower than the model (fp64 stays fp64)
        return F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), targets)
