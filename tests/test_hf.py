"""typhoon.hf in a transformers Trainer: each collator against the bundle's own masking on the same batches,
the Typhoon phase through Trainer against the bundle's own phase (typhoon.training.mlm_phase.adapt_mlm), the saliency
against explicit one-hot autograd, checkpoints and resuming, every model family and tokenizer kind, bad input.

Models here are tiny-random (or the family fixtures) with dropout switched off where two runs are compared:
a Trainer's data loader draws its workers' base seed from torch's global generator, which dropout draws from
too, so with dropout on the two runs' dropout masks would be one draw apart.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("accelerate")  # transformers' Trainer needs it (a dependency of the bundle)

from hf_runs import (  # noqa: E402
    Recorder,
    SeenTrainer,
    SeenTyphoonTrainer,
    dataset_of,
    explicit_saliency,
    features,
    no_dropout,
    quickly,
    recording,
    trainer_args,
)
from transformers import AutoModelForMaskedLM, BertModel, Trainer  # noqa: E402

from typhoon.hf import Masker, TyphoonCallback, TyphoonTrainer, WordIds, masking_collator, strategy_names  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    from typhoon.models import load_backbone

    return load_backbone("tiny-random")


def tiny_model(tiny, seed=0):
    return no_dropout(tiny.mlm_model(seed=seed).model)


# --------------------------------------------------------------------------------------------------
# The collators against the bundle's masking on the same batches


STRATEGY_CASES = [("random", {}), ("whole_word", {}), ("span", {}), ("random", {"corruption": "mask_only"}),
                  ("whole_word", {"p": 0.3})]


def bundle_batches(split, tokenizer, n_batches=3, size=32):
    from typhoon.data import PAD_MULTIPLE, collate

    for start in range(0, n_batches * size, size):
        rows = [split[i] for i in range(start, start + size)]
        yield rows, collate(rows, tokenizer.pad_token_id, PAD_MULTIPLE)


@pytest.mark.parametrize("strategy,params", STRATEGY_CASES)
def test_step_masks_are_the_bundles(mrpc_tokenized, tokenizer, strategy, params):
    """Drawn at the step (a Masker: TyphoonTrainer, a loop of your own), batch after batch, the masks of the
    collator (given only what a Trainer passes: no word ids, no special-token mask) are those the bundle's
    strategy draws on the bundle's padded batches from one generator seeded alike, the bundle's own stream."""
    from typhoon.masking import get_strategy

    reference, generator = get_strategy(strategy, **params), torch.Generator().manual_seed(7)
    collator = masking_collator(tokenizer, strategy, seed=7, **params)
    masker = Masker(collator)
    for rows, batch in bundle_batches(mrpc_tokenized["train"], tokenizer):
        want_ids, want_labels = reference(batch, generator, mask_token_id=tokenizer.mask_token_id,
                                          vocab_size=len(tokenizer))
        got = masker.draw(collator(features(rows)))
        assert set(got) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
        assert torch.equal(got["labels"], want_labels) and torch.equal(got["input_ids"], want_ids)
        assert torch.equal(got["attention_mask"], batch["attention_mask"])
        assert torch.equal(got["token_type_ids"], batch["token_type_ids"])
        assert (got["labels"] != -100).any()


@pytest.mark.parametrize("strategy,params", STRATEGY_CASES)
def test_collated_masks_are_keyed_by_the_batch(mrpc_tokenized, tokenizer, strategy, params):
    """Called on its own (a plain Trainer, any DataLoader), the collator masks each batch as the bundle's
    strategy does from a generator seeded with the seed, the rank (0 here) and the BLAKE2b digest of the padded
    ids and their shape (computed here by hand): the same batch gets the same masks however often, and in
    whatever order, it is collated; another seed, others."""
    import hashlib

    from typhoon.masking import get_strategy

    reference = get_strategy(strategy, **params)
    collator = masking_collator(tokenizer, strategy, seed=7, **params)
    batches = list(bundle_batches(mrpc_tokenized["train"], tokenizer))
    firsts = []
    for rows, batch in batches:
        ids = batch["input_ids"].numpy().astype("<i8")
        digest = hashlib.blake2b(ids.tobytes() + np.asarray(ids.shape, "<i8").tobytes(), digest_size=8).digest()
        state = np.random.SeedSequence(7, spawn_key=(0, int.from_bytes(digest, "little"))).generate_state(1, np.uint64)
        generator = torch.Generator().manual_seed(int(state[0] >> np.uint64(1)))
        want_ids, want_labels = reference(batch, generator, mask_token_id=tokenizer.mask_token_id,
                                          vocab_size=len(tokenizer))
        got = collator(features(rows))
        assert set(got) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
        assert torch.equal(got["labels"], want_labels) and torch.equal(got["input_ids"], want_ids)
        assert (got["labels"] != -100).any()
        firsts.append(got["labels"])
    again = [collator(features(rows))["labels"] for rows, _ in reversed(batches)]
    assert all(torch.equal(a, b) for a, b in zip(firsts, reversed(again), strict=True))
    other = masking_collator(tokenizer, strategy, seed=8, **params)(features(batches[0][0]))["labels"]
    assert not torch.equal(other, firsts[0])


def test_other_columns_pass_through(tokenizer):
    rows = [{"input_ids": tokenizer("a short one")["input_ids"], "position_ids": [0, 1, 2, 3, 4], "weight": 2.0},
            {"input_ids": tokenizer("and a longer sentence here")["input_ids"], "position_ids": list(range(7)),
             "weight": 0.5}]
    out = masking_collator(tokenizer, "random", pad_to_multiple_of=None)(rows)
    assert out["position_ids"].tolist() == [[0, 1, 2, 3, 4, 0, 0], list(range(7))]
    assert out["weight"].tolist() == [2.0, 0.5]
    assert out["attention_mask"].tolist() == [[1] * 5 + [0, 0], [1] * 7]


def test_word_ids_are_the_encodings(saved_backbone, glue_dir):
    """Word ids derived from token ids alone equal the fast tokenizer's own encodings' word ids (pairs numbered
    on through the second sentence), for every family's tokenizer kind: WordPiece, byte-level BPE, SentencePiece."""
    from conftest import _tokenized

    split = _tokenized("mrpc", glue_dir, saved_backbone.tokenizer, n=200)["train"]
    derived = WordIds(saved_backbone.tokenizer).rows(split["input_ids"])
    assert [list(w) for w in split["word_ids"]] == derived


def test_word_ids_of_a_truncated_word(tokenizer):
    """A word cut by truncation (its last pieces gone) still counts as one word."""
    ids = tokenizer("the unbelievably long word", truncation=True, max_length=5)["input_ids"]  # [CLS] the un ##bel [SEP]
    full = tokenizer("the unbelievably long word")
    assert WordIds(tokenizer).rows([ids])[0] == [-1, *full.word_ids()[1:4], -1]


# --------------------------------------------------------------------------------------------------
# Typhoon through a Trainer against the bundle's own phase


def bundle_and_trainer(tmp_path, strategy: str, backbone: str = "tiny-random", n: int = 32, epochs: int = 2):
    """The bundle's MLM phase (adapt_mlm) and a TyphoonTrainer phase on the same backbone, start, data order,
    seed, optimizer and schedule: (bundle's masks, its weights after each step, Trainer's, Trainer's)."""
    from typhoon.config import RunConfig
    from typhoon.data import length_grouped_batches
    from typhoon.masking import SaliencySource
    from typhoon.training import mlm_phase, run
    from typhoon.training.step import linear_schedule, make_optimizer

    config = RunConfig(task="mrpc", backbone=backbone, strategy=strategy, seed=3, max_train_examples=n,
                       max_eval_examples=8, batch_size=8, mlm_epochs=epochs, precision="fp32")
    ctx = run.set_up(config, progress=False)
    mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels)
    no_dropout(mlm)
    start = {k: v.clone() for k, v in mlm.model.state_dict().items()}

    class Recording:  # the bundle's strategy, its masks and weights kept as it goes
        def __init__(self, inner):
            self.inner, self.labels, self.weights = inner, [], []

        def __call__(self, batch, generator, **kwargs):
            ids, labels = self.inner(batch, generator, **kwargs)
            self.labels.append(labels.clone())
            return ids, labels

        def update(self, *args):
            self.inner.update(*args)
            self.weights.append(self.inner.weights.copy())

        def __getattr__(self, name):
            return getattr(self.inner, name)

    bundle = Recording(run.prepared_strategy(ctx))
    mlm_phase.adapt_mlm(ctx, mlm, bundle, SaliencySource("mlm", None))

    train = ctx.data["train"]
    rng = np.random.default_rng(config.seed)  # the bundle's data order, epoch by epoch
    lengths = [len(x["input_ids"]) for x in train]
    orders = [np.concatenate(length_grouped_batches(lengths, config.batch_size, rng)).tolist() for _ in range(epochs)]

    class BundleOrder(torch.utils.data.Sampler):
        def __init__(self):
            self.epoch = 0

        def __len__(self):
            return len(train)

        def __iter__(self):
            self.epoch += 1
            return iter(orders[self.epoch - 1])

    class InBundleOrder(TyphoonTrainer):
        def _get_train_sampler(self, train_dataset=None):
            return BundleOrder()

    model = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).model
    model.load_state_dict(start)
    no_dropout(model)
    collator = masking_collator(ctx.backbone.tokenizer, strategy, seed=config.seed, **config.strategy_params())
    recorder = Recorder(collator)
    optimizer = make_optimizer(model, config.mlm_lr, config.weight_decay)
    schedule = linear_schedule(optimizer, len(bundle.labels), config.warmup_ratio)
    trainer = InBundleOrder(model=model, args=trainer_args(tmp_path, num_train_epochs=epochs, seed=config.seed),
                            train_dataset=dataset_of(train), data_collator=collator, optimizers=(optimizer, schedule),
                            callbacks=[recorder])
    trainer.train()
    return bundle, recorder


@pytest.mark.parametrize("strategy", ["typhoon", pytest.param("typhoon_softmax", marks=pytest.mark.slow),
                                      pytest.param("typhoon_2023", marks=pytest.mark.slow)])
def test_trainer_phase_is_the_bundles_phase(tmp_path, strategy):
    """Same masks on every step; the state equal after the first step bit for bit, then within 1e-6 of its
    scale: the Trainer's stock head scores every position where the bundle's scores the masked ones only, so
    the encoder's weights (and the saliency after them) differ in the last bits of float32 from step 2 on."""
    bundle, trainer = bundle_and_trainer(tmp_path, strategy)
    steps = len(bundle.labels)
    assert steps == 8 and len(trainer.labels) == steps
    assert all(torch.equal(a, b) for a, b in zip(bundle.labels, trainer.labels, strict=True))
    assert len(trainer.weights) == steps
    first_b, first_t = bundle.weights[0], trainer.weights[0]
    assert np.array_equal(np.isnan(first_b), np.isnan(first_t))
    assert np.array_equal(first_b[~np.isnan(first_b)], first_t[~np.isnan(first_t)])
    for b, t in zip(bundle.weights, trainer.weights, strict=True):
        seen = ~np.isnan(b)
        assert np.array_equal(seen, ~np.isnan(t))
        assert np.abs(b[seen] - t[seen]).max() <= 1e-6 * np.abs(b[seen]).max()


@pytest.mark.parametrize("accumulation", [1, 2])
def test_saliency_is_one_hot_autograd(tmp_path, tiny, mrpc_tokenized, accumulation):
    """The saliency the callback learns from equals the gradient of the loss the step backpropagates w.r.t. the
    explicit one-hot input at each true token (float32: the product is summed in another order, hence 1e-5); with gradient
    accumulation, every micro-batch's masks come from the same state and the strategy learns once, from the
    micro-batches taken together."""
    from typhoon.masking import get_strategy

    train = [mrpc_tokenized["train"][i] for i in range(8 * accumulation)]
    model = tiny_model(tiny)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    collator = masking_collator(tiny.tokenizer, "typhoon", seed=1)
    recorder, learnt = Recorder(collator), []
    update = collator.strategy.update
    collator.strategy.update = lambda batch, selected, saliency: (learnt.append((batch, selected, saliency)),
                                                                  update(batch, selected, saliency))
    args = trainer_args(tmp_path, max_steps=1, gradient_accumulation_steps=accumulation, train_sampling_strategy="sequential")
    TyphoonTrainer(model=model, args=args, train_dataset=dataset_of(train), data_collator=collator,
                   callbacks=[recorder]).train()
    assert len(learnt) == 1 and collator.strategy.steps == 1 and len(recorder.inputs) == accumulation

    reference = tiny_model(tiny)
    reference.load_state_dict(start)
    total = sum(int((x["labels"] != -100).sum()) for x in recorder.inputs)
    rows, row = [], 0
    for inputs in recorder.inputs:
        n = inputs["input_ids"].shape[0]
        true_ids = learnt[0][0]["input_ids"][row:row + n, :inputs["input_ids"].shape[1]]
        rows.append((explicit_saliency(reference, inputs, true_ids, total), n))
        row += n
    _, selected, saliency = learnt[0]
    row = 0
    for want, n in rows:
        got = saliency[row:row + n, :want.shape[1]]
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-9)
        assert not got[:, want.shape[1]:].any()
        row += n
    # one update from the micro-batches together: the state a fresh strategy learns from that saliency
    fresh = get_strategy("typhoon")
    fresh.prepare_on([{"input_ids": x["input_ids"], "special_tokens_mask": x["special_tokens_mask"]} for x in train],
                     len(tiny.tokenizer))
    stacked_saliency = torch.zeros_like(saliency)
    row = 0
    for want, n in rows:
        stacked_saliency[row:row + n, :want.shape[1]] = want
        row += n
    fresh.update(learnt[0][0], selected, stacked_saliency)
    np.testing.assert_allclose(collator.strategy.weights, fresh.weights, rtol=1e-4, atol=1e-12)


def test_bf16_autocast_runs_and_learns(tmp_path, tiny, mrpc_tokenized):
    """Under bf16 autocast the saliency is read in float32 from the bf16 step's gradient and the state learns."""
    collator = masking_collator(tiny.tokenizer, "typhoon", seed=0)
    train = [mrpc_tokenized["train"][i] for i in range(8)]
    TyphoonTrainer(model=tiny_model(tiny), args=trainer_args(tmp_path, bf16=True, max_steps=1),
                   train_dataset=dataset_of(train), data_collator=collator).train()
    weights = collator.strategy.weights
    assert collator.strategy.steps == 1 and np.isfinite(weights[~np.isnan(weights)]).all()
    assert (~np.isnan(weights)).sum() > 50


# --------------------------------------------------------------------------------------------------
# Any masked-LM model and fast tokenizer


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["typhoon", "whole_word"])
def test_every_family_trains(tmp_path, saved_backbone, glue_dir, strategy):
    from conftest import _tokenized

    split = _tokenized("mrpc", glue_dir, saved_backbone.tokenizer, n=16)["train"]
    model = AutoModelForMaskedLM.from_pretrained(saved_backbone.folder)
    collator = masking_collator(saved_backbone.tokenizer, strategy, seed=0)
    keep = [c for c in ("input_ids", "token_type_ids") if c in split.column_names]
    cls = TyphoonTrainer if strategy == "typhoon" else Trainer  # whole words need no more than a plain Trainer
    result = cls(model=model, args=trainer_args(tmp_path, max_steps=2), train_dataset=split.select_columns(keep),
                 data_collator=collator).train()
    assert np.isfinite(result.training_loss)
    if strategy == "typhoon":
        assert collator.strategy.steps == 2


# --------------------------------------------------------------------------------------------------
# Bad input: refused at once, saying what to do


def test_bad_input_is_refused(tmp_path, tiny, tokenizer, mrpc_tokenized):
    import copy

    no_mask = copy.deepcopy(tokenizer)
    no_mask.mask_token = None
    quickly(lambda: masking_collator(no_mask, "random"), ValueError, "no mask token", "add_special_tokens")
    quickly(lambda: masking_collator(tokenizer, "random", p=0.0), ValueError, "p")
    quickly(lambda: masking_collator(tokenizer, "typhoon", p=1.5), ValueError, "p")
    quickly(lambda: masking_collator(tokenizer, "random", p=0.2, mlm_probability=0.3), ValueError,
            "mlm_probability", "p=0.2")
    quickly(lambda: masking_collator(tokenizer, "bert_random"), ValueError, "unknown", *strategy_names()[:4])
    quickly(lambda: masking_collator(tokenizer, "typhoon_task"), ValueError, "task model")
    train = dataset_of([mrpc_tokenized["train"][i] for i in range(16)])
    encoder = BertModel(tiny.config)
    quickly(lambda: TyphoonTrainer(model=encoder, args=trainer_args(tmp_path), train_dataset=train,
                                   data_collator=masking_collator(tokenizer, "typhoon")),
            ValueError, "no masked-LM head", "AutoModelForMaskedLM")
    # the Typhoon collator in a plain Trainer: refused at its first batch, never uniform masks
    collator = masking_collator(tokenizer, "typhoon")
    plain = Trainer(model=tiny_model(tiny), args=trainer_args(tmp_path, max_steps=1), train_dataset=train,
                    data_collator=collator)
    quickly(plain.train, RuntimeError, "TyphoonTrainer", "uniform", "Masker(collator, model)")
    assert collator.strategy.steps == 0
    for strategy in ("typhoon", "whole_word"):  # the callback alone: the masks are the mixin's to draw
        collator = masking_collator(tokenizer, strategy)
        plain = Trainer(model=tiny_model(tiny), args=trainer_args(tmp_path, max_steps=1), train_dataset=train,
                        data_collator=collator, callbacks=[TyphoonCallback(collator)])
        quickly(plain.train, RuntimeError, "TyphoonTrainer", "plain Trainer takes a random, whole_word or span")
    # a loop of your own: the model and the corpus counts first, and batches the collator padded
    masker = Masker(masking_collator(tokenizer, "typhoon"))
    rows = features([mrpc_tokenized["train"][i] for i in range(4)])
    batch = masker.collator(rows)
    quickly(lambda: masker.draw(batch), RuntimeError, "Masker(collator, model)", "watch")
    masker.watch(tiny_model(tiny))
    quickly(lambda: masker.draw(batch), RuntimeError, "prepare_on")
    masker.prepare_on(rows)
    quickly(lambda: masker.draw({"input_ids": batch["input_ids"]}), ValueError, "collate_fn=collator")
    assert masker.collator.strategy.steps == 0 and masker.draw(batch)["labels"].shape == batch["input_ids"].shape


# --------------------------------------------------------------------------------------------------
# transformers' conventions


def test_mlm_probability_is_p_and_p_one_masks_every_token(tokenizer, mrpc_tokenized):
    """``mlm_probability`` (transformers' name) sets the budget p; p = 1 selects every non-special token, padding
    and special tokens never, for every strategy (Typhoon with its state learnt on a step, and as uniform)."""
    rows = features([mrpc_tokenized["train"][i] for i in range(16)])
    assert masking_collator(tokenizer, "whole_word", mlm_probability=0.3).strategy.p == 0.3
    for strategy in ("random", "whole_word", "span", "typhoon"):
        collator = masking_collator(tokenizer, strategy, mlm_probability=1.0, seed=3)
        masker = Masker(collator)
        if strategy == "typhoon":
            collator.prepare_on(rows)
            masker.probe = True  # no model: the masks only, drawn from the prepared state
        batch = collator(rows)
        out = masker.draw(batch)
        real = batch["attention_mask"].bool() & ~batch["special_tokens_mask"].bool()
        assert torch.equal(out["labels"] != -100, real), strategy
        assert torch.equal(out["labels"][real], batch["input_ids"][real])


def test_a_column_that_cannot_be_batched_is_named(tokenizer):
    rows = [{"input_ids": tokenizer("a short one")["input_ids"], "text": "a short one"},
            {"input_ids": tokenizer("and a longer sentence here")["input_ids"], "text": "and a longer sentence here"}]
    quickly(lambda: masking_collator(tokenizer, "random")(rows), ValueError, "column 'text' cannot be batched",
            "remove_columns(['text'])")
    ragged = [{"input_ids": tokenizer("one")["input_ids"], "extra": [1, 2]},
              {"input_ids": tokenizer("two words")["input_ids"], "extra": [1, 2, 3, 4, 5, 6, 7]}]
    quickly(lambda: masking_collator(tokenizer, "whole_word")(ragged), ValueError, "column 'extra'")


def test_fp16_on_a_cpu_is_refused_and_pinned_memory_not_asked_for(tmp_path, tiny, mrpc_tokenized):
    import warnings

    train = dataset_of([mrpc_tokenized["train"][i] for i in range(8)])
    args = trainer_args(tmp_path, use_cpu=False, max_steps=1)
    if args.device.type != "cpu":
        pytest.skip("a GPU is here: fp16 runs on it")
    with pytest.raises(ValueError, match="fp16=True on a CPU.*bf16=True"):
        TyphoonTrainer(model=tiny_model(tiny), args=trainer_args(tmp_path, use_cpu=False, fp16=True),
                       train_dataset=train, data_collator=masking_collator(tiny.tokenizer, "random"))
    assert args.dataloader_pin_memory  # transformers' default: pinned memory, which only warns on a CPU
    trainer = TyphoonTrainer(model=tiny_model(tiny), args=args, train_dataset=train,
                             data_collator=masking_collator(tiny.tokenizer, "random"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    assert not [w for w in caught if "pin_memory" in str(w.message)], [str(w.message) for w in caught]


# --------------------------------------------------------------------------------------------------
# The slow tier: the embedded backbone, worker processes, the example script


@pytest.mark.slow
def test_minilm_phase_is_the_bundles_phase(tmp_path):
    """minilm-l6-mlm (the embedded backbone, adapted weights) for a few steps: the masks of every step equal, the
    state within 1e-5 of its scale at every step, the first included. Unlike tiny-random's, the first step's state
    is not equal bit for bit: 141 of 30,522 token types differ by at most 2.6e-8 (7.6e-5 of the value, near
    zero) on an Intel Ice Lake and on an AMD EPYC, so some float32 sum of the first step is taken in another
    order on the two paths at this backbone's shapes (the head over all positions or the masked ones alone is
    not it: those agree bit for bit in isolation). That noise grows through the steps (2.4e-7 at a scale of 0.21,
    1.1e-6 of it, by step 3), hence 1e-5; an error of substance (a sign, a token left out) is of the scale itself."""
    bundle, trainer = bundle_and_trainer(tmp_path, "typhoon", backbone="minilm-l6-mlm", n=24, epochs=1)
    assert len(bundle.labels) == len(trainer.labels) == 3
    assert all(torch.equal(a, b) for a, b in zip(bundle.labels, trainer.labels, strict=True))
    np.testing.assert_array_equal(np.isnan(bundle.weights[0]), np.isnan(trainer.weights[0]))
    for b, t in zip(bundle.weights, trainer.weights, strict=True):
        seen = ~np.isnan(b)
        assert np.abs(b[seen] - t[seen]).max() <= 1e-5 * np.abs(b[seen]).max()


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["typhoon", "whole_word"])
def test_data_loader_workers(tmp_path, tiny, mrpc_tokenized, strategy):
    """dataloader_num_workers=2 changes no mask: in TyphoonTrainer every strategy's masks are drawn in the main
    process (and Typhoon's state is that of a run without workers); in a plain Trainer a whole-word batch is
    masked in a worker from its own keyed generator, as the main process would."""
    train = [mrpc_tokenized["train"][i] for i in range(32)]
    for cls in (SeenTyphoonTrainer, SeenTrainer) if strategy == "whole_word" else (SeenTyphoonTrainer,):
        runs = []
        for workers in (0, 2):
            collator = masking_collator(tiny.tokenizer, strategy, seed=4)
            args = trainer_args(tmp_path / str(workers), max_steps=4, dataloader_num_workers=workers,
                                train_sampling_strategy="sequential")
            trainer = recording(cls, model=tiny_model(tiny), args=args, train_dataset=dataset_of(train),
                                data_collator=collator)
            trainer.train()
            runs.append((trainer.seen, collator))
        (alone, alone_collator), (workers, workers_collator) = runs
        assert len(alone) == 4 and all(torch.equal(a, b) for a, b in zip(alone, workers, strict=True)), cls
        if strategy == "typhoon":
            np.testing.assert_array_equal(alone_collator.strategy.weights, workers_collator.strategy.weights)


@pytest.mark.slow
def test_example_script(tmp_path):
    """examples/hf_trainer_typhoon.py as docs/hf_trainer.md runs it: Typhoon on the embedded backbone, whole-word
    masking on a text file, a refused parameter; the Trainer's progress bar and logs are shown (nothing of the
    bundle quiets them), and the checkpoints go where --output-dir says."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    script = str(REPO / "examples" / "hf_trainer_typhoon.py")
    done = subprocess.run([sys.executable, script, "--model", "minilm-l6-mlm", "--task", "mrpc", "--strategy",
                           "typhoon", "--max-steps", "3", "--batch-size", "4", "--max-train-examples", "64",
                           "--save-steps", "3", "--output-dir", str(tmp_path / "typhoon")], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "typhoon on minilm-l6-mlm: 3 steps" in done.stdout and "Typhoon: 3 updates" in done.stdout
    assert f"checkpoints go to {tmp_path / 'typhoon'}" in done.stdout
    assert "3/3 [" in done.stderr and "'loss':" in done.stdout  # the Trainer's tqdm bar and its logs
    assert (tmp_path / "typhoon" / "checkpoint-3" / "typhoon_masking.npz").is_file()
    assert "pin_memory" not in done.stderr
    text = tmp_path / "corpus.txt"
    text.write_text("The cat sat on the mat.\nA dog barked twice at the unbelievably loud thunder.\n" * 8)
    done = subprocess.run([sys.executable, script, "--model", "tiny-random", "--train-file", str(text), "--strategy",
                           "whole_word", "--mlm-probability", "0.3", "--set", "corruption=mask_only", "--max-steps",
                           "2", "--batch-size", "4", "--output-dir", str(tmp_path / "ww")], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "whole_word on tiny-random: 2 steps" in done.stdout
    bad = subprocess.run([sys.executable, script, "--strategy", "typhoon", "--p", "1.5"], capture_output=True,
                         text=True, env=env, timeout=600)
    assert bad.returncode != 0 and "p" in bad.stderr.splitlines()[-1]


def test_processes_that_would_each_train_alone_are_refused(monkeypatch):
    """Under torchrun on a machine without a GPU, transformers trains each process alone unless use_cpu=True:
    TyphoonTrainer refuses that (one Typhoon state over models drifting apart), saying what to set."""
    from types import SimpleNamespace

    from transformers.training_args import ParallelMode

    from typhoon.hf import trainer

    monkeypatch.setattr(trainer, "rank_and_size", lambda group=None: (1, 2))
    alone = SimpleNamespace(parallel_mode=ParallelMode.NOT_PARALLEL, device=torch.device("cpu"), fp16=False,
                            dataloader_pin_memory=True)
    quickly(lambda: trainer.check_arguments(alone), ValueError, "2 processes", "use_cpu=True")
    together = SimpleNamespace(**{**vars(alone), "parallel_mode": ParallelMode.DISTRIBUTED})
    trainer.check_arguments(together)
    assert together.dataloader_pin_memory is False


def test_a_spawned_workers_collator_keeps_its_ranks_keys(tokenizer, mrpc_tokenized, monkeypatch):
    """A data-loader worker started by spawning (no torch.distributed of its own) masks a batch with its rank's
    keys: the rank goes with the pickled collator, so the same batch gets other masks on another rank's worker."""
    import pickle

    from typhoon.hf import collators

    rows = features([mrpc_tokenized["train"][i] for i in range(8)])
    collator = masking_collator(tokenizer, "whole_word", seed=2)
    here = collator(rows)["labels"]
    monkeypatch.setattr(collators, "rank_and_size", lambda group=None: (1, 2))
    pickled = pickle.dumps(collator)  # as rank 1 of 2 hands it to a spawned worker
    monkeypatch.setattr(collators, "rank_and_size", lambda group=None: (0, 1))  # the worker: no process group
    in_worker = pickle.loads(pickled)(rows)["labels"]
    monkeypatch.setattr(collators, "rank_and_size", lambda group=None: (1, 2))
    assert torch.equal(in_worker, collator(rows)["labels"]) and not torch.equal(in_worker, here)
