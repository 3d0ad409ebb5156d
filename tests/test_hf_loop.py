"""Typhoon in a loop of your own (typhoon.hf.Masker): the masks drawn from the state, the saliency read from the
step's own backward (against explicit one-hot autograd), one update per optimizer step from the micro-batches
together; the state saved beside the model. The slow tier runs both examples as docs/hf_trainer.md does: the
loop (one process, resumed, and two under torchrun) and the Trainer (two processes under torchrun and under
accelerate launch).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from hf_runs import explicit_saliency, features, no_dropout, seen_weights

from typhoon.hf import Masker, masking_collator
from typhoon.masking import get_strategy


@pytest.fixture(scope="module")
def tiny():
    from typhoon.models import load_backbone

    return load_backbone("tiny-random")


@pytest.mark.parametrize("accumulation", [1, 2])
def test_a_plain_loop_learns_from_its_own_backward(tiny, mrpc_tokenized, accumulation):
    """Two optimizer steps of the loop of the Masker's docstring (micro-batches of 4): after each, the state is a
    fresh strategy's update from the step's micro-batches taken together, with the saliency of explicit one-hot
    autograd on the model as it was at that step (float32 products summed in another order: 1e-5)."""
    rows = features([mrpc_tokenized["train"][i] for i in range(16)], keep=("input_ids", "token_type_ids"))
    model = no_dropout(tiny.mlm_model(seed=0).model)
    collator = masking_collator(tiny.tokenizer, "typhoon", mlm_probability=0.2, seed=3)
    masker = Masker(collator, model)
    masker.prepare_on(rows)
    reference = get_strategy("typhoon", p=0.2)
    reference.prepare_on([{"input_ids": x["input_ids"], "special_tokens_mask": x["special_tokens_mask"]}
                          for x in mrpc_tokenized["train"].select(range(16))], len(tiny.tokenizer))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = torch.utils.data.DataLoader(rows, batch_size=4, collate_fn=collator)
    micro = []
    for batch in loader:
        before = {k: v.clone() for k, v in model.state_dict().items()}
        inputs = masker.draw(batch)
        (model(**inputs).loss / accumulation).backward()
        micro.append((batch, inputs, before))
        if len(micro) < accumulation:
            masker.read_saliency()
            continue
        assert masker.learn()
        optimizer.step()
        optimizer.zero_grad()
        # the reference: the same micro-batches, explicit autograd on the weights of the step
        start = no_dropout(tiny.mlm_model(seed=0).model)
        start.load_state_dict(micro[0][2])
        # the loop's loss: each micro-batch's mean over its masked tokens, over the number of micro-batches
        saliency = [explicit_saliency(start, i, b["input_ids"], int((i["labels"] != -100).sum())) / accumulation
                    for b, i, _ in micro]
        width = max(b["input_ids"].shape[1] for b, _, _ in micro)

        def stacked(parts, fill, width=width):
            return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=fill) for p in parts])

        union = {"input_ids": stacked([b["input_ids"] for b, _, _ in micro], tiny.tokenizer.pad_token_id),
                 "attention_mask": stacked([b["attention_mask"] for b, _, _ in micro], 0),
                 "special_tokens_mask": stacked([b["special_tokens_mask"].bool() for b, _, _ in micro], True)}
        reference.update(union, stacked([i["labels"] != -100 for _, i, _ in micro], False), stacked(saliency, 0.0))
        np.testing.assert_allclose(seen_weights(collator.strategy), seen_weights(reference), rtol=1e-4, atol=1e-9)
        micro = []
    assert collator.strategy.steps == reference.steps == 4 // accumulation


# --------------------------------------------------------------------------------------------------
# The examples, as docs/hf_trainer.md runs them


def example_env():
    from conftest import REPO

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}, REPO


def run(command, **kwargs):
    env, _ = example_env()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, **kwargs)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    return done


@pytest.mark.slow
def test_loop_example_runs_and_resumes(tmp_path):
    """examples/loop_typhoon.py: 4 steps then 2 more from its checkpoint end with the state, masks stream and
    model of 6 steps in one go, bit for bit; under torchrun its two processes end with one state."""
    _, repo = example_env()
    script = str(repo / "examples" / "loop_typhoon.py")
    common = [script, "--model", "tiny-random", "--task", "mrpc", "--max-train-examples", "48", "--batch-size", "8",
              "--log-every", "2"]
    whole = run([sys.executable, *common, "--max-steps", "6", "--output-dir", str(tmp_path / "whole")])
    assert "typhoon on tiny-random, 1 process(es): 6 steps, 6 Typhoon updates" in whole.stdout
    assert "step 6: loss" in whole.stdout
    run([sys.executable, *common, "--max-steps", "4", "--output-dir", str(tmp_path / "split")])
    run([sys.executable, *common, "--max-steps", "6", "--resume", "--output-dir", str(tmp_path / "split")])
    a = torch.load(tmp_path / "whole" / "masking_0.pt", weights_only=False)
    b = torch.load(tmp_path / "split" / "masking_0.pt", weights_only=False)
    assert a["masking"]["state"]["weights"].tobytes() == b["masking"]["state"]["weights"].tobytes()
    assert a["masking"]["generators"]["cpu"].tobytes() == b["masking"]["generators"]["cpu"].tobytes()
    models = [torch.load(tmp_path / name / "checkpoint.pt", weights_only=False)["model"] for name in ("whole", "split")]
    assert all(torch.equal(models[0][k], models[1][k]) for k in models[0])

    ranks = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *common,
                 "--max-steps", "3", "--output-dir", str(tmp_path / "ddp")])
    assert "2 process(es): 3 steps, 3 Typhoon updates" in ranks.stdout
    states = [torch.load(tmp_path / "ddp" / f"masking_{r}.pt", weights_only=False)["masking"] for r in (0, 1)]
    assert states[0]["state"]["weights"].tobytes() == states[1]["state"]["weights"].tobytes()
    assert states[0]["generators"]["cpu"].tobytes() != states[1]["generators"]["cpu"].tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_trainer_example_runs_data_parallel(tmp_path, launcher):
    """examples/hf_trainer_typhoon.py under torchrun and accelerate launch on this CPU: two processes, one
    Typhoon state, the first process reporting."""
    env, repo = example_env()
    script = str(repo / "examples" / "hf_trainer_typhoon.py")
    launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
              if launcher == "torchrun" else
              [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"])
    done = run([*launch, script, "--model", "tiny-random", "--task", "mrpc", "--max-train-examples", "48",
                "--batch-size", "4", "--max-steps", "3", "--save-steps", "3", "--output-dir", str(tmp_path)])
    assert done.stdout.count("typhoon on tiny-random: 3 steps") == 1 and "Typhoon: 3 updates" in done.stdout
    assert "parallel_mode" not in done.stderr  # transformers trains the two processes data-parallel
    assert sorted(p.name for p in (tmp_path / "checkpoint-3").glob("typhoon_mask_generators*")) == [
        "typhoon_mask_generators_0.npz", "typhoon_mask_generators_1.npz"]
