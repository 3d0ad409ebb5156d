"""One cell of the study, end to end: MLM adaptation -> fine-tuning -> GLUE dev metrics -> run record.

Read :func:`run`, then :func:`train_and_evaluate`, top to bottom. :func:`set_up` loads the backbone and
the data and resolves the device and kernels into a :class:`RunContext`; phase 1 (:func:`phase_one`, the one way
into it for every caller, its loop :func:`typhoon.training.mlm_phase.adapt_mlm`) adapts the encoder with masked
language modelling on the task's own training text, masked by the chosen strategy; phase 2 (:func:`fine_tune`)
fine-tunes a classifier from the adapted encoder and evaluates it on the GLUE dev split every epoch; :func:`run`
writes the run record atomically (:mod:`typhoon.records.run_record`). Each training step of either phase is one of
:mod:`typhoon.training.step`, the steps the grid estimate times too. Both phases call their hooks with a typed
state (:mod:`typhoon.training.callbacks`); the run's resume state is saved from one (:class:`RunState`).

Randomness: the run seed fixes the data order (a numpy Generator), the masks (a torch Generator), the
new heads' initialisation and dropout (the global torch seed, set once at the start of the run, since
dropout draws from it). On CPU the same config and seed give bit-identical metrics, also when the run was
interrupted and resumed from its resume state (:mod:`typhoon.training.resume`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from typhoon import _faults, machine, paths
from typhoon.config import RunConfig
from typhoon.data import TaskSpec, epoch_batches, get_task, glue_metrics, majority_baseline
from typhoon.masking import MaskingStrategy, SaliencySource, get_strategy, plugins, saliency_kind
from typhoon.masking.task_saliency import require_learned, require_warmup, task_head_report
from typhoon.models import Backbone, MaskedLM, load_backbone, seeded
from typhoon.records import (
    RunRecord,
    is_complete,
    read_record,
    record_lock,
    resume_state_path,
    write_record,
)
from typhoon.training import device_settings, examples, flops, resume, software, speed
from typhoon.training import step as training_step
from typhoon.training.boundary import Boundary
from typhoon.training.callbacks import PhaseCallback, PhaseCallbacks, PhaseState, ProgressBars
from typhoon.training.dev_losses import full_mask_dev_loss
from typhoon.training.mlm_phase import adapt_mlm
from typhoon.training.progress_file import ProgressFile
from typhoon.training.step import linear_schedule, make_optimizer, to_device

# The task model of task-loss saliency draws its data order and dropout from streams of their own, so the
# phase-1 data order and dropout draws are those of every other strategy with the same seed.
TASK_MODEL_STREAM = 7919
LOCK_WAIT_S = 120.0  # a killed predecessor's process may still be exiting; wait for it rather than fail


# --------------------------------------------------------------------------------------------------
# Set-up: everything both phases share


@dataclass
class RunContext:
    """What both phases of one run share, built once by :func:`set_up`: every choice the config leaves open made
    there, once (the settings, the strategy and where its saliency comes from), for the phases to read.

    ``rng`` and ``mask_generator`` advance as the run draws from them, and ``strategy`` learns as phase 1 goes, so
    a context serves one run.
    """

    config: RunConfig
    backbone: Backbone
    task: TaskSpec
    data: dict[str, list[dict]]  # tokenized "train" and "validation" examples (contract keys + label)
    settings: device_settings.RunSettings  # device, precision, kernels and threads, every ``auto`` resolved
    rng: np.random.Generator  # data order, both phases in turn
    mask_generator: torch.Generator  # masks, on the device they are drawn on
    masks_on_device: bool = False  # masks drawn and Typhoon's state kept on ``device`` (a GPU run), else the CPU
    strategy: MaskingStrategy | None = None  # the run's masking strategy, prepared on the task's token counts
    saliency: str = "none"  # where the strategy's saliency comes from: none, mlm or task (masking.saliency_kind)
    progress: bool = True  # tqdm bars
    progress_file: ProgressFile | None = None  # the live state the batch polls (typhoon/training/progress_file.py)
    resumed_after: Boundary | None = None  # where the resume state the run went on from was saved, if any

    def report(self, phase: str, **state) -> None:
        """Note the run's phase and step in its progress file (throttled there; nothing without one)."""
        if self.progress_file is not None:
            self.progress_file.note(phase, **state)

    # the settings the steps read, each held once, in ``settings``
    device = property(lambda self: self.settings.device)
    precision = property(lambda self: self.settings.precision)  # bf16 autocast or fp32, and why
    attention = property(lambda self: self.settings.attention)
    dropout = property(lambda self: self.settings.dropout)

    @property
    def kernels(self) -> dict:
        """Keyword arguments of the backbone's model constructors."""
        return dict(attention=self.attention, fast_dropout=self.dropout == "fast")

    def autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision.bf16)


def set_up(config: RunConfig, progress: bool = True) -> RunContext:
    """Load the backbone and the data, resolve every ``auto`` setting (:func:`device_settings.resolve_settings`),
    seed the run's generators, prepare the masking strategy and decide where its saliency comes from.

    Bad inputs (missing or malformed data, an unreachable backbone) fail here, before any record is written.
    """
    require_warmup(config)  # task saliency without a warm-up would take its gradient from a head at chance
    backbone = load_backbone(config.backbone)
    settings = device_settings.resolve_settings(config)
    device = settings.device
    # a GPU run draws its masks and keeps Typhoon's state on the GPU, so that a step never waits for the device
    # (typhoon.training.step.mlm_step); a CPU run draws them on the host, as the committed records were drawn
    on_device = device.type == "cuda"
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    ctx = RunContext(
        config=config, backbone=backbone, task=get_task(config.task),
        data=examples.prepare_data(config, backbone.tokenizer), settings=settings,
        rng=np.random.default_rng(config.seed),
        mask_generator=torch.Generator(device if on_device else "cpu").manual_seed(config.seed),
        masks_on_device=on_device, progress=progress)
    ctx.strategy, ctx.saliency = prepared_strategy(ctx), saliency_kind(config)
    return ctx


def prepared_strategy(ctx: RunContext) -> MaskingStrategy:
    """A masking strategy of the run's, prepared on the task's token counts (``set_up`` makes the run's)."""
    config, data = ctx.config, ctx.data
    strategy = get_strategy(config.strategy, **config.strategy_params())
    strategy.prepare_on(data["train"], len(ctx.backbone.tokenizer))
    return strategy.learn_on(ctx.device if ctx.masks_on_device else None)



# --------------------------------------------------------------------------------------------------
# Phase 2: fine-tuning and evaluation


def fine_tune(ctx: RunContext, classifier: torch.nn.Module, *, strategy: MaskingStrategy | None = None,
              saved: resume.SavedState | None = None, callbacks: Sequence[PhaseCallback] = ()) -> tuple[list, dict]:
    """Fine-tune the classifier, evaluating on the dev split after every epoch.

    ``saved``: a resume state saved after a fine-tuning epoch (:mod:`typhoon.training.resume`): the
    classifier, optimizer, schedule, epochs and counters are loaded from it and the next epoch follows.
    ``callbacks``: their hooks with the phase's state, ``on_epoch_end`` after each epoch's evaluation (the run saves
    its resume state there; its time is not the phase's; the progress bars are one, where ``ctx.progress``).
    ``strategy``: the run's, which the phase carries to them (its resume state keeps it).
    """
    config, pad = ctx.config, ctx.backbone.tokenizer.pad_token_id
    train, dev = ctx.data["train"], ctx.data["validation"]
    lengths = [len(x["input_ids"]) for x in train]
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    optimizer = make_optimizer(classifier, config.ft_lr, config.weight_decay)
    scheduler = linear_schedule(optimizer, steps_per_epoch * config.ft_epochs, config.warmup_ratio)
    dev_batches = examples.eval_batches(dev, config, pad)
    num_labels = classifier.config.num_labels
    meter = flops.PhaseMeter(ctx.backbone.config)  # FLOPs, wall and CPU time of the phase
    state = PhaseState("ft", classifier, optimizer, scheduler, meter, strategy)
    if saved is not None:
        state.restore(saved)
    hooks = PhaseCallbacks([*([ProgressBars("fine-tune", steps_per_epoch)] if ctx.progress else []), *callbacks])
    state.meter.start()
    for epoch in range(state.epoch + 1, config.ft_epochs + 1):
        state.epoch = epoch
        classifier.train()
        losses = []
        batches = epoch_batches(lengths, config.batch_size, ctx.rng, config.batch_order)
        hooks.on_epoch_begin(state)
        for idx in batches:
            loss, batch = training_step.fine_tune_step(ctx, classifier, [train[i] for i in idx], optimizer, scheduler)
            state.tokens += int(batch["attention_mask"].sum())
            state.meter.add(batch["attention_mask"], num_labels=num_labels)
            losses.append(loss.item())
            state.loss = losses[-1]
            state.step += 1
            ctx.report("finetune", step=state.step, steps=steps_per_epoch * config.ft_epochs, epoch=epoch,
                       epochs=config.ft_epochs, tokens=state.tokens)
            hooks.on_step_end(state)
        ctx.report("eval", epoch=epoch, epochs=config.ft_epochs)
        metrics = evaluate(ctx, classifier, dev_batches)
        for batch in dev_batches:
            state.meter.add(batch["attention_mask"], num_labels=num_labels, backward=False)
        state.rows.append({"epoch": epoch, "train_loss": float(np.mean(losses)), **metrics})
        state.meter.stop()
        hooks.on_epoch_end(state)
        state.meter.start()
    state.meter.stop()
    wall = state.meter.wall_s
    return state.rows, {"ft_wall_s": wall, "ft_tokens_per_s": state.tokens / wall if wall > 0 else None,
                        **state.meter.summary("ft")}


def warm_up_task_model(ctx: RunContext) -> tuple[torch.nn.Module, dict]:
    """The task model of task-loss saliency (:mod:`typhoon.masking.task_saliency`): the backbone's classifier from
    the pretrained encoder, fine-tuned for ``task_head_warmup`` steps on the training split (the task's
    ``ft_lr``, batch size and warm-up ratio), then frozen; returns it (eval mode) and its check
    (:func:`~typhoon.masking.task_saliency.task_head_report`). Raises ``TaskHeadAtChance`` if its dev accuracy
    is not above the majority class's.

    Its data order and dropout come from streams of their own (``TASK_MODEL_STREAM``): the run's data
    order, masks and phase-1 dropout draws are untouched by the warm-up.
    """
    config, pad = ctx.config, ctx.backbone.tokenizer.pad_token_id
    train, dev = ctx.data["train"], ctx.data["validation"]
    steps = config.task_head_warmup
    started, losses = time.perf_counter(), []
    with seeded(config.seed + TASK_MODEL_STREAM):  # dropout of the warm-up: a forked global generator
        classifier = ctx.backbone.classifier(ctx.task.num_labels, seed=config.seed + TASK_MODEL_STREAM,
                                             **ctx.kernels).to(ctx.device)
        optimizer = make_optimizer(classifier, config.ft_lr, config.weight_decay)
        scheduler = linear_schedule(optimizer, steps, config.warmup_ratio)
        classifier.train()
        for step, idx in enumerate(task_model_batches(config, [len(x["input_ids"]) for x in train]), start=1):
            loss, _ = training_step.fine_tune_step(ctx, classifier, [train[i] for i in idx], optimizer, scheduler)
            losses.append(loss.item())
            ctx.report("task_warmup", step=step, steps=steps)
    metrics = evaluate(ctx, classifier, examples.eval_batches(dev, config, pad))
    classifier.eval()  # frozen from here: no dropout, no update (its loss is differentiated w.r.t. inputs only)
    report = task_head_report(metrics["dev_accuracy"], [x["label"] for x in dev], [x["label"] for x in train], steps)
    report.update(train_loss_last_epoch=float(np.mean(losses[-math.ceil(len(train) / config.batch_size):])),
                  warmup_wall_s=time.perf_counter() - started)
    require_learned(report, config.task)
    return classifier, report


def task_model_batches(config: RunConfig, lengths: list[int]):
    """The task model's warm-up batches (index arrays): ``task_head_warmup`` of them, epoch after epoch,
    in a data order of its own (``TASK_MODEL_STREAM``), so the run's data order is untouched."""
    rng = np.random.default_rng([config.seed, TASK_MODEL_STREAM])
    epochs = (idx for _ in itertools.count() for idx in epoch_batches(lengths, config.batch_size, rng, config.batch_order))
    return itertools.islice(epochs, config.task_head_warmup)


@torch.no_grad()
def evaluate(ctx: RunContext, classifier: torch.nn.Module, dev_batches: list[dict]) -> dict:
    classifier.eval()
    predictions, labels = [], []
    for batch in dev_batches:
        inputs = to_device(batch, ctx.device)
        with ctx.autocast():
            logits = classifier(**ctx.backbone.model_inputs(inputs)).logits
        predictions.append(logits.float().argmax(-1).cpu())
        labels.append(batch["labels"])
    classifier.train()
    values = glue_metrics(ctx.config.task, torch.cat(labels).numpy(), torch.cat(predictions).numpy())
    return {f"dev_{k}": v for k, v in values.items()}


# --------------------------------------------------------------------------------------------------
# The run


@dataclass
class PhaseOne:
    """What phase 1 leaves: the adapted model, the masking strategy with its learned state, the loss rows,
    the timing, the full-mask dev loss and (task-loss saliency) the task model's check."""

    mlm: MaskedLM
    strategy: MaskingStrategy
    loss_rows: list
    timing: dict
    full_mask_loss: float | None
    task_head: dict | None


def phase_one(ctx: RunContext, *, saved: resume.SavedState | None = None, callbacks: Sequence[PhaseCallback] = (),
              until_epoch: int | None = None) -> PhaseOne:
    """Phase 1 of a run, the one way into it: the global torch seed set (dropout draws from it), the task model
    warmed up where the saliency comes from the task, the MLM built and adapted as it teaches the run's strategy
    (:func:`typhoon.training.mlm_phase.adapt_mlm`) and, when the call trains the whole phase, its full-mask dev loss.

    A whole run calls it bare, and so do a study that measures the masking alone and the walkthrough's few
    steps. A study that follows a long phase epoch by epoch calls it an epoch at a time: ``saved``, the resume state
    its last epoch left (the strategy and the generators are restored here, the model, optimizer and progress in the loop);
    ``callbacks``, what writes its files (:mod:`typhoon.training.callbacks`); ``until_epoch``, the last epoch to
    train.
    """
    config, strategy = ctx.config, ctx.strategy
    torch.manual_seed(config.seed)  # dropout draws from the global generator (a saved state's replaces it below)
    task_model, task_head = None, None
    if ctx.saliency == "task" and config.mlm_epochs > 0:
        task_model, task_head = warm_up_task_model(ctx)  # refuses a task model at chance
    mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device)
    if saved is not None:  # the strategy and every generator as the saved epoch left them
        resume.load_strategy_state(strategy, saved.strategy)
        resume.restore_rng_states(ctx, saved.rng)
    loss_rows, timing = [], {"mlm_wall_s": 0.0, "mlm_tokens_per_s": None, "mlm_steps": 0}
    full_mask_loss = None
    if config.mlm_epochs > 0:
        loss_rows, timing = adapt_mlm(ctx, mlm, strategy, SaliencySource(ctx.saliency, task_model), saved=saved,
                                      callbacks=callbacks, until_epoch=until_epoch)
        if until_epoch is None:
            full_mask_loss = full_mask_dev_loss(ctx, mlm)
    return PhaseOne(mlm, strategy, loss_rows, timing, full_mask_loss, task_head)


@dataclass
class RunState(PhaseCallback):
    """A whole run's resume state, saved at the end of its MLM phase (:meth:`save_encoder`) and after each
    fine-tuning epoch (:meth:`on_epoch_end`), or nothing without a ``path``: beside the phase's own, what phase 1
    left (``phase_one``: loss rows, timing, full-mask loss, the task model's check) and the wall time so far. Made
    once phase 1 is done or restored, so it holds every value it writes."""

    path: Path | None
    ctx: RunContext
    record_path: str
    phase_one: dict
    elapsed_s: float  # what earlier, interrupted runs of the cell spent
    started: float  # this run's start (time.perf_counter)

    def progress(self) -> dict:
        return {"phase_one": self.phase_one, "elapsed_s": self.elapsed_s + time.perf_counter() - self.started}

    def save_encoder(self, encoder_state: dict) -> None:
        """Phase 1 done: the adapted encoder (fine-tuning starts a fresh head and optimizer from it)."""
        if self.path is not None:
            resume.save(self.path, self.ctx, Boundary("mlm", self.ctx.config.mlm_epochs), strategy=self.ctx.strategy,
                        models={"encoder": encoder_state}, progress=self.progress(), record_path=self.record_path)

    def on_epoch_end(self, state: PhaseState) -> None:
        if self.path is not None:
            state.save(self.path, self.ctx, record_path=self.record_path, progress=self.progress())


def train_and_evaluate(ctx: RunContext, run_dir: Path | None = None) -> tuple[dict, list, MaskingStrategy]:
    """Phases 1 and 2 of one run; returns (metrics, mlm loss rows, masking strategy).

    With ``run_dir`` (the record's folder) the run saves its resume state beside it at the end of phase 1
    and after each fine-tuning epoch (:class:`RunState`), and goes on from the state a same run left there
    (:mod:`typhoon.training.resume`; the caller removes it once the record is written).
    """
    started = time.perf_counter()
    config, backbone, data = ctx.config, ctx.backbone, ctx.data
    speed_choices = speed.configure(ctx.device.type)  # process-level settings that win here (typhoon/training/speed.py)
    peak = flops.matmul_peak(ctx.precision.name, device=str(ctx.device))  # on this run's thread count
    record_path = config.relative_dir().as_posix()
    state_path = None if run_dir is None else resume_state_path(run_dir)
    saved = None if state_path is None else resume.load(state_path, ctx, record_path)
    ctx.resumed_after = None if saved is None else saved.boundary

    strategy = ctx.strategy
    if saved is None:
        one = phase_one(ctx)
        elapsed = 0.0
        phase_one_done = {"loss_rows": one.loss_rows, "timing": one.timing, "full_mask_loss": one.full_mask_loss,
                          "task_head": one.task_head}
        encoder_state = {k: v.detach().cpu() for k, v in one.mlm.encoder.state_dict().items()}
        del one
    else:  # phase 1 (and maybe some fine-tuning epochs) done by an earlier, interrupted run of this cell
        resume.load_strategy_state(strategy, saved.strategy)
        phase_one_done, elapsed = saved.progress["phase_one"], saved.progress["elapsed_s"]
        encoder_state = saved.models.get("encoder")  # None after a fine-tuning epoch: the classifier is saved
        if saved.boundary.phase == "mlm":  # the generators as phase 1 left them, before the classifier is built
            resume.restore_rng_states(ctx, saved.rng)
    run_state = RunState(state_path, ctx, record_path, phase_one_done, elapsed, started)
    if saved is None:
        run_state.save_encoder(encoder_state)
    loss_rows, timing = phase_one_done["loss_rows"], phase_one_done["timing"]
    full_mask_loss, task_head = phase_one_done["full_mask_loss"], phase_one_done["task_head"]
    _faults.maybe_inject("train", record_path)

    classifier = backbone.classifier(ctx.task.num_labels, encoder_state=encoder_state, seed=config.seed,
                                     **ctx.kernels).to(ctx.device)
    saved_ft = saved if saved is not None and saved.boundary.phase == "ft" else None
    if saved_ft is not None:  # the generators as the saved epoch left them (building the classifier may seed CUDA's)
        resume.restore_rng_states(ctx, saved_ft.rng)
    epochs, ft_timing = fine_tune(ctx, classifier, strategy=strategy, saved=saved_ft, callbacks=[run_state])
    timing = {**timing, **ft_timing, "wall_s": elapsed + time.perf_counter() - started}
    for phase in ("mlm", "ft"):  # achieved shares of the measured matmul peak (useful FLOPs)
        timing = {**timing, **flops.peak_fractions(timing, phase, peak)}

    train_labels = [x["label"] for x in data["train"]]
    dev_labels = [x["label"] for x in data["validation"]]
    metrics = {
        "status": "ok",
        "primary_metric": ctx.task.metric,
        "majority_value": majority_baseline(config.task, train_labels, dev_labels),
        "final": {k: v for k, v in epochs[-1].items() if k.startswith("dev_")},
        "epochs": epochs,
        "timing": timing,
        "n_train": len(data["train"]), "n_dev": len(data["validation"]),
        **ctx.settings.record(),  # device, precision and its reason, kernels, threads, numerics
        "hardware": {"cpu": machine.cpu_features().to_dict(), "matmul_peak": peak.to_dict()}, "speed": speed_choices,
        "versions": software.library_versions(), "git_commit": software.git_commit(),
        "mlm_full_mask_loss": full_mask_loss,  # nats/token on the fully masked dev split after phase 1
    }
    if strategy.needs_saliency:
        metrics["masking"] = strategy.meta()
    if task_head is not None:  # task-loss saliency: the task model's check and its loss on the phase-1 batches
        metrics["task_head"] = task_head
        metrics["mlm_task_loss_by_epoch"] = timing.pop("mlm_task_loss_by_epoch")
    return metrics, loss_rows, strategy


def run(config: RunConfig, out_dir: str | Path | None = None, *, force: bool = False,
        progress: bool = True) -> RunRecord:
    """Run one cell and write its record to ``<out_dir>/runs/<task>/<backbone>/<strategy>/seed<k>/``
    (``out_dir`` None: the profile's own output folder, ``<repo>/outputs/<profile>``).

    A complete record of the same run is reused unless ``force``. Bad inputs fail before anything
    is written; so does an output folder that cannot be written (:func:`typhoon.paths.check_writable`).
    A run that fails while training leaves a record with status ``failed``, its error and traceback, and
    re-raises. A run stopped by Ctrl-C / SIGTERM (``KeyboardInterrupt``) or by a full disk records
    nothing: the old record (or none) stays, and so does the resume state it saved at its last boundary
    (end of phase 1, each fine-tuning epoch; :mod:`typhoon.training.resume`): the same call goes on from
    there and writes the record an uninterrupted run writes (its times aside). The state is removed once
    a record is written, ok or failed (a failed cell starts over). While it runs, its progress file says
    where it is (:mod:`typhoon.runner.progress`); the file is removed when the run ends, however it ends.
    """
    if config.strategy_source:  # a strategy of your own: registered in this process too (the config may have
        plugins.load(config.strategy_source)  # travelled pickled, to a worker)
    out = paths.resolve_out_dir(out_dir, config.profile)
    run_dir = out / config.relative_dir()
    if not force and is_complete(run_dir, config):
        return read_record(run_dir, skipped=True)
    ctx = set_up(config, progress)  # bad data or an unknown backbone fail here, before anything is written
    paths.check_writable(out)  # ... and an output folder that cannot be written, before any training
    # "setup" until the first MLM step (the lock, the kernel peak, the models); removed however the run ends
    with ProgressFile(run_dir, config.relative_dir().as_posix()) as ctx.progress_file, \
            record_lock(run_dir, wait_s=LOCK_WAIT_S):
        if not force and is_complete(run_dir, config):  # finished while we waited
            return read_record(run_dir, skipped=True)
        try:
            metrics, loss_rows, strategy = train_and_evaluate(ctx, run_dir)
        except Exception as err:
            write_record(run_dir, config, {"status": "failed", "error": f"{type(err).__name__}: {err}",
                                           "primary_metric": ctx.task.metric},
                         traceback_text=traceback.format_exc())
            resume.remove(resume_state_path(run_dir))  # a failed cell starts over
            raise
        ctx.report("write")
        write_record(run_dir, ctx.settings.stored_config(config), metrics, loss_rows=loss_rows, strategy=strategy)
        resume.remove(resume_state_path(run_dir))  # the record is complete
    resumed_after = None if ctx.resumed_after is None else ctx.resumed_after.describe()
    return dataclasses.replace(read_record(run_dir), resumed_after=resumed_after)
