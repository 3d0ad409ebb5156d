"""The hooks of a training phase, as transformers' ``TrainerCallback`` and ``TrainerState`` have them: a
:class:`PhaseCallback` overrides the hooks it needs, and every hook takes one argument, the phase's
:class:`PhaseState` -- where the phase is (its :class:`~typhoon.training.boundary.Boundary`), what it has measured
so far and what it trains.

The MLM phase (:func:`typhoon.training.run.phase_one`) calls ``on_step_end`` after each update and
``on_epoch_end`` after each epoch's dev loss; fine-tuning (:func:`typhoon.training.run.fine_tune`) calls
``on_epoch_end`` after each epoch's evaluation. A study's curve writes its trace and its files from such hooks
(a study's own, such as a curve's files); a whole run saves its resume state from one
(:class:`typhoon.training.run.RunState`). A state saves itself into a resume state and comes back from one
(:meth:`PhaseState.save`, :meth:`PhaseState.restore`), so that its layout there is written in one place.

Light (torch only where a state is saved or restored): a study's module defines its callbacks at import time, and
the batch that imports it trains nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from typhoon.training.boundary import PHASE_NAMES, Boundary, Phase

if TYPE_CHECKING:
    import torch

    from typhoon.masking import MaskingStrategy
    from typhoon.training.flops import PhaseMeter
    from typhoon.training.resume import SavedState

MODEL_NAMES: dict[str, str] = {"mlm": "mlm", "ft": "classifier"}  # the name a phase's model is saved under


@dataclass
class PhaseState:
    """One phase of a run as its hooks see it. ``epoch``: the epoch in progress (in ``on_step_end``) or the one
    just done (in ``on_epoch_end``; 0 before the first); ``step``: the updates so far; ``rows``: phase 1's loss
    rows (``step, epoch, split, loss``), or fine-tuning's one row per epoch (train loss and dev metrics)."""

    phase: Phase
    model: torch.nn.Module  # the masked LM (phase 1) or the classifier (fine-tuning)
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    meter: PhaseMeter  # the phase's FLOPs, wall and CPU time
    strategy: MaskingStrategy | None  # the run's masking strategy: phase 1 teaches it, fine-tuning carries it to the
    # record (None: a fine-tuning alone, which saves no state)
    epoch: int = 0
    step: int = 0
    tokens: int = 0  # real (unpadded) training tokens so far
    rows: list[dict] = field(default_factory=list)
    task_losses: dict[int, list] = field(default_factory=dict)  # phase 1, task-loss saliency: the task model's
    # loss on each step's masked batch, by epoch
    loss: float | torch.Tensor | None = None  # the latest step's loss (phase 1: a tensor, on the device, until read)

    @property
    def boundary(self) -> Boundary:
        return Boundary(self.phase, self.epoch)

    def models(self) -> dict:
        """The state dicts of the model, the optimizer and the schedule (what a resume state keeps of them)."""
        return {MODEL_NAMES[self.phase]: self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict()}

    def progress(self) -> dict:
        """The phase's counters and rows, as the resume state's JSON keeps them."""
        return {"epoch": self.epoch, "step": self.step, "tokens": self.tokens, "rows": self.rows,
                "task_losses": self.task_losses, "meter": self.meter.state()}

    def save(self, path: Path, ctx, *, record_path: str, progress: dict | None = None) -> float:
        """Write the run's resume state at this boundary (:func:`typhoon.training.resume.save`): the phase's models
        and progress, the strategy, ``ctx``'s generators, and ``progress`` (the run's own, beside the phase's)."""
        from typhoon.training import resume

        return resume.save(path, ctx, self.boundary, strategy=self.strategy, models=self.models(),
                           progress={**(progress or {}), self.phase: self.progress()}, record_path=record_path)

    def restore(self, saved: SavedState) -> None:
        """Go on from a resume state saved at the end of an epoch of this phase: its models and its progress (the
        caller restores the strategy and the generators, before the models are built)."""
        if saved.boundary.phase != self.phase:
            raise ValueError(f"the {PHASE_NAMES[self.phase]} phase cannot go on from a state saved after "
                             f"{saved.boundary.describe()}")
        from typhoon.training import resume

        resume.restore_models(saved, **{MODEL_NAMES[self.phase]: self.model, "optimizer": self.optimizer,
                                        "scheduler": self.scheduler})
        done = saved.progress[self.phase]
        self.epoch, self.step, self.tokens, self.rows = done["epoch"], done["step"], done["tokens"], done["rows"]
        # JSON's keys are text
        self.task_losses = {int(epoch): losses for epoch, losses in done["task_losses"].items()}
        self.meter.load_state(done["meter"])


class PhaseCallback:
    """A hook into a training phase: subclass it and override what you need. Each hook gets the phase's
    :class:`PhaseState`; what the hook does with it (show a bar, write a file, save a state) is its own."""

    def on_epoch_begin(self, state: PhaseState) -> None:
        """Before each epoch's first step (its batches drawn)."""

    def on_step_end(self, state: PhaseState) -> None:
        """After each update."""

    def on_epoch_end(self, state: PhaseState) -> None:
        """After each epoch, its evaluation done (the phase's meter is stopped meanwhile: a hook's time is not
        the phase's)."""


class PhaseCallbacks(PhaseCallback):
    """Several callbacks as one, each hook called on each in turn (transformers' ``CallbackHandler``)."""

    def __init__(self, callbacks):
        self.callbacks = list(callbacks)

    def on_epoch_begin(self, state: PhaseState) -> None:
        for callback in self.callbacks:
            callback.on_epoch_begin(state)

    def on_step_end(self, state: PhaseState) -> None:
        for callback in self.callbacks:
            callback.on_step_end(state)

    def on_epoch_end(self, state: PhaseState) -> None:
        for callback in self.callbacks:
            callback.on_epoch_end(state)


class ProgressBars(PhaseCallback):
    """A bar for each epoch of a phase, as transformers' ``ProgressCallback``: its steps and its latest loss,
    read every ``loss_every`` steps (on a GPU each read waits for the device)."""

    def __init__(self, name: str, steps_per_epoch: int, loss_every: int = 1):
        self.name, self.steps_per_epoch, self.loss_every = name, steps_per_epoch, loss_every
        self.bar = None

    def on_epoch_begin(self, state: PhaseState) -> None:
        from typhoon.progress_bars import progress_bar

        self.bar = progress_bar(None, f"{self.name} epoch {state.epoch}", total=self.steps_per_epoch, leave=False)

    def on_step_end(self, state: PhaseState) -> None:
        if self.loss_every == 1 or state.step % self.loss_every == 1:
            self.bar.set_postfix(loss=f"{float(state.loss):.3f}", refresh=False)
        self.bar.update(1)

    def on_epoch_end(self, state: PhaseState) -> None:
        self.bar.close()
