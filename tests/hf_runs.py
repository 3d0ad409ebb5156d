"""Trainer runs of typhoon.hf as a user makes them: the helpers of tests/test_hf*.py (tiny models, what a Trainer
hands a collator, Trainer classes that record what each step trained on)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from typhoon.hf import TyphoonTrainer


def no_dropout(model):
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def features(examples, keep=("input_ids", "token_type_ids", "label")):
    """What a Trainer hands a collator: the model's input columns (and a task label), no word ids or masks."""
    return [{k: x[k] for k in keep if k in x} for x in examples]


def dataset_of(examples):
    import datasets

    return datasets.Dataset.from_list(features(examples))


def trainer_args(out, **overrides):
    base = dict(output_dir=str(out), per_device_train_batch_size=8, num_train_epochs=1, report_to=[],
                save_strategy="no", logging_strategy="no", disable_tqdm=True, use_cpu=True, seed=0)
    return TrainingArguments(**{**base, **overrides})


class Recorder(TrainerCallback):
    """The masks each step drew (through the collator's step stream) and Typhoon's weights after each step."""

    def __init__(self, collator):
        self.collator, self.labels, self.weights, self.inputs = collator, [], [], []
        draw = collator.mask

        def mask(batch, generator=None):
            out = draw(batch, generator)
            self.labels.append(out["labels"].clone())
            self.inputs.append({k: v.clone() for k, v in out.items()})
            return out

        collator.mask = mask  # the instance's own: the Masker and the collator call it

    def on_step_end(self, args, state, control, **kwargs):
        if self.collator.strategy.needs_saliency:
            self.weights.append(self.collator.strategy.weights.copy())


class SeenInputs:
    """Mixin of a Trainer class: ``seen``, the labels (hence masks) each micro-batch trained on, wherever they
    were drawn (a data-loader worker, the main process)."""

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.seen.append(inputs["labels"].detach().clone())
        return super().training_step(model, inputs, num_items_in_batch)


class SeenTyphoonTrainer(SeenInputs, TyphoonTrainer):
    seen: list


class SeenTrainer(SeenInputs, Trainer):
    seen: list


def recording(cls, **kwargs):
    trainer = cls(**kwargs)
    trainer.seen = []
    return trainer


def same_masks(a: list[torch.Tensor], b: list[torch.Tensor]) -> int:
    """How many steps of ``a`` and ``b`` (each step's labels) are equal."""
    return sum(bool(x.shape == y.shape and torch.equal(x, y)) for x, y in zip(a, b, strict=True))


def explicit_saliency(model, inputs: dict, true_ids: torch.Tensor, num_items: int) -> torch.Tensor:
    """d loss/d onehot[i, t_i] with the one-hot input built explicitly: inputs_embeds = onehot @ E. The loss is
    the model's, called as a Trainer calls it (with the step's count of masked tokens, ``num_items_in_batch``:
    what the model does with it, the reference does too)."""
    weight = model.get_input_embeddings().weight.detach()
    onehot = torch.nn.functional.one_hot(inputs["input_ids"], weight.shape[0]).to(weight.dtype).requires_grad_()
    rest = {k: v for k, v in inputs.items() if k != "input_ids"}
    loss = model(inputs_embeds=onehot @ weight, **rest, num_items_in_batch=torch.tensor(num_items)).loss
    (grad,) = torch.autograd.grad(loss, onehot)
    return grad.gather(-1, true_ids[..., None]).squeeze(-1)


def quickly(call, error, *words):
    started = time.perf_counter()
    with pytest.raises(error) as info:
        call()
    assert time.perf_counter() - started < 2.0
    for word in words:
        assert word in str(info.value), str(info.value)


def seen_weights(strategy) -> np.ndarray:
    return np.where(strategy.seen, strategy.weights, np.nan)
