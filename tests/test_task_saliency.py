"""Task-loss saliency in the pipeline (typhoon.masking.task_saliency): the task model learns before its gradient
drives the masks (checked against the majority class, stored, refused at chance, flagged in the results
table), and the task gradient stays out of the phase-1 encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from typhoon.config import RunConfig
from typhoon.masking import TyphoonMasking
from typhoon.masking.task_saliency import TaskHeadAtChance, label_entropy, require_learned, task_head_report
from typhoon.profiles import resolve
from typhoon.records import result_rows

TINY = dict(backbone="tiny-random", max_train_examples=64, max_eval_examples=32, ft_epochs=1, num_threads=1,
            precision="fp32", task_head_warmup=40, ft_lr=1e-3)


def task_config(**changes) -> RunConfig:
    return resolve("smoke", {"task": "mrpc", "strategy": "typhoon_task", "seed": 0, **TINY, **changes})


def learnable(data: dict[str, list[dict]], marker: int) -> dict[str, list[dict]]:
    """The examples relabelled so that the label is visible: label 1 iff the first token is ``marker``
    (alternate examples, so the majority class has half the dev set)."""
    out = {}
    for split, examples in data.items():
        out[split] = []
        for i, example in enumerate(examples):
            ids = list(example["input_ids"])
            ids[1] = marker if i % 2 else ids[1] if ids[1] != marker else marker + 1
            out[split].append({**example, "input_ids": ids, "label": i % 2})
    return out


@pytest.fixture
def learnable_data(monkeypatch):
    """examples.prepare_data returns the learnable relabelling of the real (capped) MRPC examples."""
    from typhoon.training import examples
    original = examples.prepare_data

    def prepare(config, tokenizer):
        return learnable(original(config, tokenizer), tokenizer.convert_tokens_to_ids("[unused7]"))

    monkeypatch.setattr(examples, "prepare_data", prepare)


def test_report_against_an_independent_count():
    train, dev = [0, 0, 0, 1, 1], np.array([1, 0, 0, 1, 0, 0, 0, 1])
    report = task_head_report(0.75, dev, train, warmup_steps=12)
    assert report["majority_accuracy"] == 5 / 8 and report["learned"] and report["warmup_steps"] == 12
    assert report["prior_entropy"] == pytest.approx(-(0.6 * np.log(0.6) + 0.4 * np.log(0.4)))
    assert label_entropy([3, 3]) == 0.0
    at_majority = task_head_report(5 / 8, dev, train, warmup_steps=12)
    assert not at_majority["learned"]  # equal to the majority class is chance, not learning
    with pytest.raises(TaskHeadAtChance, match=r"0\.6250 after 12 warm-up steps is not above the majority"):
        require_learned(at_majority, "mrpc")


@pytest.mark.slow  # trains phase 1
def test_the_encoders_phase_one_gradient_is_the_mlm_losss_alone(learnable_data, monkeypatch):
    """Every phase-1 step's encoder gradient equals an explicit autograd of the MLM loss alone on the same
    masked batch (same parameters, same dropout draws). The first version added the task loss's gradient."""
    from typhoon.training import run as training_run
    from typhoon.training import step as training_step
    config = task_config()
    ctx = training_run.set_up(config, progress=False)
    steps = []

    original_call = TyphoonMasking.__call__

    def recording_call(self, batch, generator, **kwargs):
        masked_ids, labels = original_call(self, batch, generator, **kwargs)
        steps.append({"batch": batch, "masked_ids": masked_ids, "labels": labels, "rng": torch.get_rng_state()})
        return masked_ids, labels

    original_step = training_step.optimizer_step

    def recording_step(model, optimizer, scheduler):
        mlm = getattr(model, "mlm", model)  # the first version's phase-1 model wrapped the MaskedLM
        if isinstance(mlm, training_run.MaskedLM):
            steps[-1]["params"] = {n: p.detach().clone() for n, p in mlm.named_parameters()}
            steps[-1]["grads"] = {n: p.grad.clone() for n, p in mlm.named_parameters() if p.grad is not None}
        original_step(model, optimizer, scheduler)

    monkeypatch.setattr(TyphoonMasking, "__call__", recording_call)
    monkeypatch.setattr(training_step, "optimizer_step", recording_step)
    training_run.train_and_evaluate(ctx)
    assert len(steps) == 4 and all("grads" in s for s in steps)

    reference = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels)
    reference.train()
    for step in steps:
        with torch.no_grad():
            for name, param in reference.named_parameters():
                param.copy_(step["params"][name])
        torch.set_rng_state(step["rng"])  # the dropout draws of that step's forward
        inputs = ctx.backbone.model_inputs({**step["batch"], "input_ids": step["masked_ids"]})
        loss = reference(labels=step["labels"], **inputs)
        names = [n for n, p in reference.named_parameters() if p.requires_grad]
        grads = torch.autograd.grad(loss, [dict(reference.named_parameters())[n] for n in names], allow_unused=True)
        encoder_names = [n for n in names if n.startswith("model.") and "embeddings" not in n]
        assert encoder_names
        for name, grad in zip(names, grads, strict=True):
            if grad is not None:
                torch.testing.assert_close(step["grads"][name], grad, rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.slow  # trains a task model
def test_a_task_model_that_learned_is_checked_and_stored(learnable_data, tmp_path):
    from typhoon.training import run as training_run
    config = task_config()
    record = training_run.run(config, tmp_path, progress=False)
    head = record.metrics["task_head"]
    assert head["learned"] and head["dev_accuracy"] > head["majority_accuracy"] == 0.5
    assert head["warmup_steps"] == 40 and head["prior_entropy"] == pytest.approx(np.log(2))
    stored = json.loads((record.run_dir / "metrics.json").read_text())["task_head"]
    assert stored == head
    (task_loss,) = record.metrics["mlm_task_loss_by_epoch"]
    assert task_loss < head["prior_entropy"]  # the masks' gradient comes from a head that beats the prior
    assert record.metrics["masking"]["saliency"] == "task" and record.metrics["masking"]["name"] == "typhoon_task"
    assert "mlm_task_loss_by_epoch" not in record.metrics["timing"]
    mlm_record = training_run.run(task_config(strategy="typhoon"), tmp_path, progress=False)
    assert "task_head" not in mlm_record.metrics
    task_state, mlm_state = (np.load(r.run_dir / "masking_state.npz") for r in (record, mlm_record))
    np.testing.assert_array_equal(task_state["counts"], mlm_state["counts"])  # same corpus, other saliency
    assert not np.allclose(np.nan_to_num(task_state["weights"]), np.nan_to_num(mlm_state["weights"]))
    table = result_rows.collect_results(tmp_path).set_index("strategy")
    row = table.loc["typhoon_task"]
    assert (row.saliency, row.task_head_accuracy, row.task_head_learned) == ("task", head["dev_accuracy"], True)
    assert table.loc["typhoon", "task_head_learned"] is None


@pytest.mark.slow  # trains a task model
def test_a_task_model_at_chance_is_refused(learnable_data, tmp_path, monkeypatch):
    """The dev check sees the majority class's accuracy: the run fails, naming why, before phase 1."""
    from typhoon.training import run as training_run
    monkeypatch.setattr(training_run, "evaluate", lambda ctx, classifier, batches: {"dev_accuracy": 0.5})
    monkeypatch.setattr(training_run, "adapt_mlm", lambda *a, **k: pytest.fail("phase 1 ran after a head at chance"))
    with pytest.raises(TaskHeadAtChance, match="not above the majority class's 0.5000"):
        training_run.run(task_config(), tmp_path, progress=False)
    failed = json.loads((tmp_path / task_config().relative_dir() / "metrics.json").read_text())
    assert failed["status"] == "failed" and "TaskHeadAtChance" in failed["error"]


def test_no_warm_up_is_refused_before_anything_is_loaded(tmp_path, monkeypatch):
    from typhoon.training import run as training_run
    monkeypatch.setattr(training_run, "load_backbone", lambda name: pytest.fail("loaded a backbone"))
    with pytest.raises(ValueError, match="set task_head_warmup"):
        training_run.run(task_config(task_head_warmup=0), tmp_path, progress=False)
    assert not (tmp_path / "runs").exists()


def test_a_task_saliency_record_without_the_check_is_flagged():
    """Records written before the check (the first typhoon_task cells) are not known to have learned."""
    config = task_config()
    old = {"status": "ok", "primary_metric": "f1", "final": {"dev_f1": 0.8},
           "masking": {"calibration": "minmax", "saliency": "task"}}
    row = result_rows.result_row(config, old, "runs/x")
    assert row["task_head_learned"] is False and row["task_head_accuracy"] is None
    mlm = result_rows.result_row(config.replace(strategy="typhoon"), {**old, "masking": {"calibration": "minmax"}}, "x")
    assert mlm["task_head_learned"] is None and mlm["task_head_accuracy"] is None


def test_the_warm_up_is_in_task_saliencys_identity_only():
    """Old typhoon_task records (no warm-up field: 0) are not the new runs; other strategies ignore it."""
    old_task = RunConfig.from_dict({k: v for k, v in task_config().to_dict().items() if k != "task_head_warmup"})
    assert old_task.identity() != task_config().identity()
    for strategy in ("random", "whole_word", "typhoon", "typhoon_rank"):
        assert task_config(strategy=strategy).identity() == task_config(strategy=strategy, task_head_warmup=0).identity()
    bottleneck = {c["task"]: resolve("bottleneck", c) for c in (dict(task=t, strategy="typhoon_task") for t in ("mrpc", "cola"))}
    assert bottleneck["mrpc"].task_head_warmup == 230 and bottleneck["cola"].task_head_warmup == 804
    assert resolve("bottleneck", dict(task="mrpc", strategy="typhoon")).identity() == \
        resolve("cpu", dict(task="mrpc", strategy="typhoon")).identity()  # still the cpu profile's runs


def test_the_saliency_source_is_decided_from_the_config():
    """The kind follows the strategy's declaration (the paper's Typhoon: the MLM loss; typhoon_task and
    saliency=task: a task model; the rest learn from none), and a source holds a task model iff it is a task one."""
    import torch

    from typhoon.config import RunConfig
    from typhoon.masking.saliency_source import SaliencySource, saliency_kind

    kinds = {name: saliency_kind(RunConfig(strategy=name))
             for name in ("random", "whole_word", "span", "typhoon", "typhoon_rank", "typhoon_task")}
    assert kinds == {"random": "none", "whole_word": "none", "span": "none", "typhoon": "mlm", "typhoon_rank": "mlm",
                     "typhoon_task": "task"}
    assert saliency_kind(RunConfig(strategy="typhoon", saliency="task")) == "task"
    model = torch.nn.Linear(2, 2)
    assert SaliencySource.for_run(RunConfig(strategy="typhoon_task"), model).task_model is model
    with pytest.raises(ValueError, match="needs the warmed-up task model"):
        SaliencySource.for_run(RunConfig(strategy="typhoon_task"))
    with pytest.raises(ValueError, match="takes no task model"):
        SaliencySource.for_run(RunConfig(strategy="typhoon"), model)
