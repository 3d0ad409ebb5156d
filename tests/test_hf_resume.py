"""Resuming from a checkpoint draws the masks of an uninterrupted run, for every strategy: in TyphoonTrainer (the
masks drawn at the step from a stream saved with each checkpoint) and with the collator alone in a plain Trainer
(random, whole_word, span: each batch masked from a generator keyed by the batch, nothing to save). Dropout is
on, on the Trainer's own shuffled order, across an epoch boundary; dataloader_num_workers 0 here, 2 in the slow
tier. A checkpoint of another strategy, vocabulary or tokenizer is refused, naming both.

benchmarks/bench_resume_masks.py counts the same for transformers' DataCollatorForLanguageModeling.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("accelerate")

from hf_runs import (  # noqa: E402
    SeenTrainer,
    SeenTyphoonTrainer,
    dataset_of,
    features,
    quickly,
    recording,
    same_masks,
    seen_weights,
    trainer_args,
)

from typhoon.hf import Masker, masking_collator  # noqa: E402

CASES = [(SeenTyphoonTrainer, "random"), (SeenTyphoonTrainer, "whole_word"), (SeenTyphoonTrainer, "span"),
         (SeenTyphoonTrainer, "typhoon"), (SeenTrainer, "random"), (SeenTrainer, "whole_word"),
         (SeenTrainer, "span")]
IDS = [f"{cls.__name__.removeprefix('Seen')}-{strategy}" for cls, strategy in CASES]
FAST = {"TyphoonTrainer-whole_word", "TyphoonTrainer-typhoon", "Trainer-span"}  # the rest: the slow tier
STEPS, SAVED_AT, EXAMPLES, BATCH = 4, 2, 12, 4  # 3 steps an epoch: the resumed steps cross into the second


@pytest.fixture(scope="module")
def tiny():
    from typhoon.models import load_backbone

    return load_backbone("tiny-random")


def resumed_against_whole(tmp_path, tiny, train, cls, strategy, workers: int):
    """(the masks of steps SAVED_AT+1..STEPS of an uninterrupted run, those of a run resumed from its checkpoint
    at SAVED_AT, the two collators at the end)."""
    runs = {}
    for name, resume in (("whole", None), ("resumed", str(tmp_path / "whole" / f"checkpoint-{SAVED_AT}"))):
        out = tmp_path / "whole"  # the resumed run writes where it resumes from, as train(resume=True) does
        collator = masking_collator(tiny.tokenizer, strategy, seed=5)
        args = trainer_args(out, max_steps=STEPS, save_strategy="steps", save_steps=SAVED_AT,
                            per_device_train_batch_size=BATCH, dataloader_num_workers=workers, seed=11)
        model = tiny.mlm_model(seed=0).model  # dropout on (0.1 in every layer)
        trainer = recording(cls, model=model, args=args, train_dataset=dataset_of(train), data_collator=collator)
        trainer.train(resume_from_checkpoint=resume)
        runs[name] = (trainer.seen, collator)
    (whole, whole_collator), (resumed, collator) = runs["whole"], runs["resumed"]
    assert len(whole) == STEPS and len(resumed) == STEPS - SAVED_AT
    return whole[SAVED_AT:], resumed, whole_collator, collator


def check_resumed(tmp_path, tiny, mrpc_tokenized, cls, strategy, workers):
    train = [mrpc_tokenized["train"][i] for i in range(EXAMPLES)]
    whole, resumed, whole_collator, collator = resumed_against_whole(tmp_path, tiny, train, cls, strategy, workers)
    assert same_masks(whole, resumed) == STEPS - SAVED_AT
    assert any((labels != -100).any() for labels in resumed)
    if strategy == "typhoon":  # the state, learnt through dropout's masks too, bit for bit
        assert collator.strategy.steps == whole_collator.strategy.steps == STEPS
        np.testing.assert_array_equal(seen_weights(collator.strategy), seen_weights(whole_collator.strategy))


def tier(cases, ids, fast: set[str]):
    return [pytest.param(*case, id=name, marks=() if name in fast else pytest.mark.slow)
            for case, name in zip(cases, ids, strict=True)]


@pytest.mark.parametrize("cls,strategy", tier(CASES, IDS, FAST))
def test_resume_draws_the_uninterrupted_runs_masks(tmp_path, tiny, mrpc_tokenized, cls, strategy):
    check_resumed(tmp_path, tiny, mrpc_tokenized, cls, strategy, workers=0)


@pytest.mark.slow
@pytest.mark.parametrize("cls,strategy", CASES, ids=IDS)
def test_resume_with_data_loader_workers(tmp_path, tiny, mrpc_tokenized, cls, strategy):
    check_resumed(tmp_path, tiny, mrpc_tokenized, cls, strategy, workers=2)


# --------------------------------------------------------------------------------------------------
# A checkpoint of something else: refused, naming both


def saved_state(tmp_path, tokenizer, rows, strategy="typhoon", **params):
    collator = masking_collator(tokenizer, strategy, seed=1, **params)
    masker = Masker(collator)
    masker.prepare_on(rows)
    collator(rows)  # the step's stream exists once drawn from
    masker.collator.generator()
    masker.save(tmp_path)
    return masker


def test_a_state_of_another_strategy_vocabulary_or_tokenizer_is_refused(tmp_path, tiny, tokenizer, mrpc_tokenized):
    import copy

    rows = features([mrpc_tokenized["train"][i] for i in range(16)])
    saved = saved_state(tmp_path, tokenizer, rows)
    assert json.loads((tmp_path / "typhoon_masking.json").read_text())["vocab_size"] == len(tokenizer)

    def load_into(collator):
        return lambda: Masker(collator).load(tmp_path)

    quickly(load_into(masking_collator(tokenizer, "whole_word")), ValueError, "strategy 'typhoon'", "'whole_word'")
    quickly(load_into(masking_collator(tokenizer, "typhoon", p=0.2)), ValueError, "'p': 0.15", "'p': 0.2")
    quickly(load_into(masking_collator(tokenizer, "typhoon_softmax")), ValueError, "'typhoon'", "'typhoon_softmax'")
    bigger = copy.deepcopy(tokenizer)
    bigger.add_tokens(["[NEW1]", "[NEW2]"])
    quickly(load_into(masking_collator(bigger, "typhoon")), ValueError, f"{len(tokenizer)} tokens",
            f"{len(bigger)} tokens")
    other = copy.deepcopy(tokenizer)  # the same size, two tokens' ids swapped
    vocab = other.get_vocab()
    other.get_vocab = lambda: {**vocab, "the": vocab["a"], "a": vocab["the"]}
    quickly(load_into(masking_collator(other, "typhoon")), ValueError, "digest",
            "a masking state belongs to one vocabulary")
    # its own: loaded, the state and the stream as saved
    again = masking_collator(tokenizer, "typhoon", seed=99)
    Masker(again).load(tmp_path)
    np.testing.assert_array_equal(again.strategy.counts, saved.collator.strategy.counts)
    assert torch.equal(again.generator().get_state(), saved.collator.generator().get_state())


def test_a_state_dict_carries_its_identity(tmp_path, tokenizer, mrpc_tokenized):
    """For a loop of your own: state_dict() / load_state_dict() hold what save() / load() do, checked alike."""
    rows = features([mrpc_tokenized["train"][i] for i in range(16)])
    masker = saved_state(tmp_path, tokenizer, rows, "typhoon")
    state = masker.state_dict()
    again = Masker(masking_collator(tokenizer, "typhoon", seed=1))
    again.load_state_dict(state)
    assert torch.equal(again.collator.generator().get_state(), masker.collator.generator().get_state())
    quickly(lambda: Masker(masking_collator(tokenizer, "span")).load_state_dict(state, where="masking_0.pt"),
            ValueError, "masking_0.pt", "'span'")
