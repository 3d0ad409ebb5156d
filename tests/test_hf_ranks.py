"""Typhoon under torch.distributed: one state shared by the ranks (typhoon.masking.across_ranks).

Fast: :func:`shared_update` with a second rank stood in for (its sums added by a stand-in all-reduce) against
the one-process update on the union of the two batches, computed by the numpy reference path; a rank's overflow
makes every rank skip. Slow: ``torchrun --nproc_per_node 2`` (gloo) trains TyphoonTrainer on tiny-random
(tests/ddp_run.py); both ranks hold the same state, bit for bit, and it equals the state of one process that
replays the steps on the union of the ranks' micro-batches (its saliency read by explicit autograd at the
embedding output) to a stated tolerance; the ranks' masks differ on the same batch; the Typhoon collator in a
plain Trainer is refused on every rank.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from typhoon.masking import across_ranks, get_strategy

# Of the weights' largest magnitude. The first step reads the same saliency in both (the same model, the same
# micro-batches, one thread each): only the order of the float64 sums may differ (measured: none). From the
# second step on, the weights that DDP averaged and those one process summed differ in float32's last bits
# (measured on a 2-core Xeon: 9e-8 after step 2, 6e-7 after step 3).
FIRST_STEP_RTOL, LATER_RTOL = 1e-12, 1e-5


def random_batch(seed: int, rows: int = 6, width: int = 24, vocab: int = 40):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (rows, width), generator=g)
    attention = torch.ones_like(ids)
    attention[:, width - 4 - seed % 3:] = 0  # padding at the end of every row
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = True
    batch = {"input_ids": ids, "attention_mask": attention, "special_tokens_mask": special}
    selected = torch.rand(ids.shape, generator=g) < 0.3
    saliency = torch.randn(ids.shape, generator=g, dtype=torch.float32)
    return batch, selected, saliency


def union(*parts):
    batch = {k: torch.cat([p[0][k] for p in parts]) for k in parts[0][0]}
    return batch, torch.cat([p[1] for p in parts]), torch.cat([p[2] for p in parts])


def prepared(strategy: str, vocab: int = 40):
    out = get_strategy(strategy)
    out.prepare(np.arange(1, vocab + 1), special_counts=np.ones(vocab, dtype=np.int64))
    return out


def seen_weights(strategy):
    return np.where(strategy.seen, strategy.weights, np.nan)


@pytest.mark.parametrize("learns_on", [None, "cpu"], ids=["numpy", "tensors"])
@pytest.mark.parametrize("strategy", ["typhoon", "typhoon_2023", "typhoon_softmax"])
def test_shared_update_is_the_update_on_the_union(monkeypatch, strategy, learns_on):
    """Rank 0 of 2 learns from its batch and the other rank's (whose sums the stand-in all-reduce adds): over
    three steps, the one-process update of the union of both batches, to float64 rounding. Each rank's saliency
    is twice the union's (a Trainer's rank loss is scaled by the number of ranks), as DDP's mean of losses has it.
    The state held as numpy arrays (the host's path) or as tensors (a GPU's path, run here on the CPU)."""
    summing = prepared(strategy)  # per-type sums depend on the vocabulary only, not on the state

    def all_reduce(sums, group=None):
        return sums.add_(summing.batch_sums(*theirs))  # the other rank: its saliency (2x) over 2

    monkeypatch.setattr(across_ranks, "rank_and_size", lambda group=None: (0, 2))
    monkeypatch.setattr(across_ranks, "all_reduce_sum", all_reduce)
    shared, reference = prepared(strategy).learn_on(learns_on), prepared(strategy)
    for step in range(3):
        mine, theirs = random_batch(2 * step), random_batch(2 * step + 1)
        assert across_ranks.shared_update(shared, mine[0], mine[1], 2 * mine[2])
        reference.update(*union(mine, theirs))
        assert shared.steps == reference.steps == step + 1
        want, got = seen_weights(reference), seen_weights(shared)
        np.testing.assert_array_equal(np.isnan(want), np.isnan(got))
        assert np.nanmax(np.abs(want - got)) <= FIRST_STEP_RTOL * np.nanmax(np.abs(want))
        np.testing.assert_allclose(shared.probs, reference.probs, rtol=1e-9, atol=1e-12)


def test_a_rank_whose_saliency_overflowed_makes_every_rank_skip(monkeypatch):
    """A saliency that is not finite on another rank (fp16 overflow) reaches this one through the sums: both
    skip the step together, the state as it was; in one process, the step's own overflow does the same."""
    monkeypatch.setattr(across_ranks, "rank_and_size", lambda group=None: (0, 2))
    monkeypatch.setattr(across_ranks, "all_reduce_sum", lambda sums, group=None: sums.add_(torch.nan))
    strategy = prepared("typhoon")
    batch, selected, saliency = random_batch(0)
    assert not across_ranks.shared_update(strategy, batch, selected, saliency)
    assert strategy.steps == 0 and not strategy.seen.any()
    monkeypatch.setattr(across_ranks, "rank_and_size", lambda group=None: (0, 1))
    saliency[0, 1] = torch.inf
    assert not across_ranks.shared_update(strategy, batch, selected, saliency) and strategy.steps == 0


def test_one_process_is_the_strategys_own_update():
    """Without torch.distributed the update is the strategy's own, bit for bit (the records' path)."""
    shared, own = prepared("typhoon"), prepared("typhoon")
    for step in range(2):
        batch, selected, saliency = random_batch(step)
        assert across_ranks.shared_update(shared, batch, selected, saliency)
        own.update(batch, selected, saliency)
    assert seen_weights(shared).tobytes() == seen_weights(own).tobytes()


# --------------------------------------------------------------------------------------------------
# Two processes under torchrun


def stacked(parts, fill):
    """Rows of several micro-batches as one batch, padded to the widest with ``fill``."""
    width = max(p.shape[1] for p in parts)
    return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=fill) for p in parts])


def replay_on_one_process(records, tokenizer):
    """The ranks' steps again in one process, on the union of their micro-batches: the same start, loss (every
    masked token of the step over their count), SGD step and Typhoon update. States after each step."""
    from ddp_run import ACCUMULATION, LR, STEPS

    from typhoon.models import load_backbone

    model = load_backbone("tiny-random").mlm_model(seed=0).model
    model.load_state_dict(records[0]["start"])
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    strategy = get_strategy("typhoon")
    strategy.prepare_on(records[0]["corpus"], len(tokenizer))
    embeddings = model.get_input_embeddings()
    seen = {}

    def keep_output(module, inputs, output):  # its gradient, after each micro-batch's backward
        output.retain_grad()
        seen["out"] = output

    embeddings.register_forward_hook(keep_output)
    states = []
    for step in range(STEPS):
        micro = [r["micro"][step * ACCUMULATION + i] for r in records for i in range(ACCUMULATION)]
        total = sum(int((m["inputs"]["labels"] != -100).sum()) for m in micro)
        model.zero_grad()
        rows, selected, saliency = [], [], []
        for m in micro:
            loss = model(**m["inputs"], num_items_in_batch=torch.tensor(total)).loss
            loss.backward()
            true_ids = m["batch"]["input_ids"]
            grad = seen["out"].grad
            saliency.append((grad * embeddings.weight.detach()[true_ids]).sum(-1))
            selected.append(m["inputs"]["labels"] != -100)
            rows.append(m["batch"])
        with torch.no_grad():
            for param in model.parameters():
                if param.grad is not None:
                    param -= LR * param.grad
        batch = {"input_ids": stacked([r["input_ids"] for r in rows], tokenizer.pad_token_id),
                 "attention_mask": stacked([r["attention_mask"] for r in rows], 0),
                 "special_tokens_mask": stacked([r["special_tokens_mask"].bool() for r in rows], True)}
        strategy.update(batch, stacked(selected, False), stacked(saliency, 0.0))
        states.append(seen_weights(strategy))
    return states, model


@pytest.mark.slow
def test_two_ranks_hold_one_state_equal_to_one_process(tmp_path, tokenizer):
    from conftest import REPO

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests"),
                                                        os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(REPO / "tests" / "ddp_run.py"), str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    records = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert [r["world"] for r in records] == [2, 2] and [r["steps"] for r in records] == [3, 3]
    assert {r["wrapped"] for r in records} == {"DistributedDataParallel"}
    # one state: the same on both ranks, bit for bit, after every step
    for w0, w1 in zip(records[0]["weights"], records[1]["weights"], strict=True):
        assert w0.numpy().tobytes() == w1.numpy().tobytes()
    # and the one-process state on the union of the ranks' micro-batches
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank ran: the same float32 sums in the model's products
    try:
        states, model = replay_on_one_process(records, tokenizer)
    finally:
        torch.set_num_threads(threads)
    for step, (want, got) in enumerate(zip(states, records[0]["weights"], strict=True)):
        got = got.numpy()
        np.testing.assert_array_equal(np.isnan(want), np.isnan(got))
        difference, scale = np.nanmax(np.abs(want - got)), np.nanmax(np.abs(want))
        print(f"step {step + 1}: state against one process: max |difference| {difference:.3g} "
              f"({difference / scale:.2g} of the weights' scale {scale:.3g}); between the ranks: 0")
        assert difference <= (FIRST_STEP_RTOL if step == 0 else LATER_RTOL) * scale, step
    for name, value in model.state_dict().items():  # DDP's averaged step is the one-process step
        torch.testing.assert_close(records[0]["end"][name], value, rtol=1e-5, atol=1e-6)
    # each rank its own stream: the same batch gets other masks on the other rank
    assert not torch.equal(records[0]["same_batch_typhoon"], records[1]["same_batch_typhoon"])
    assert not torch.equal(records[0]["same_batch_random"], records[1]["same_batch_random"])
    # the Typhoon collator without its trainer: refused on every rank, naming it and what to do
    for rank, record in enumerate(records):
        assert record["refused"] is not None and f"process {rank} of 2" in record["refused"]
        assert "TyphoonTrainer" in record["refused"] and "Masker(collator, model)" in record["refused"]
