"""The MLM phase's hooks (typhoon.training.callbacks): a callback handed to ``run.phase_one`` -- the one way into the
phase -- sees one typed state before each epoch, after each update and after each epoch's dev loss, in the order
and with the counts worked out here by hand; a state comes back only into the phase it was saved in."""

from __future__ import annotations

import pytest
import torch

from typhoon.profiles import resolve
from typhoon.training import Boundary, PhaseCallback, PhaseState
from typhoon.training.resume import SavedState


class Recording(PhaseCallback):
    """Each hook's call, with what the state says at that moment."""

    def __init__(self):
        self.calls = []

    def on_epoch_begin(self, state: PhaseState) -> None:
        self.calls.append(("begin", state.epoch, state.step))

    def on_step_end(self, state: PhaseState) -> None:
        self.calls.append(("step", state.epoch, state.step, state.rows[-1]["step"]))

    def on_epoch_end(self, state: PhaseState) -> None:
        self.calls.append(("end", state.boundary, len(state.rows), state.rows[-1]["split"]))


@pytest.mark.slow  # trains the tiny backbone for six steps
def test_a_callback_sees_every_step_and_epoch_of_the_phase():
    from typhoon.training import run as training_run

    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "typhoon", "seed": 0},
                     {"mlm_epochs": 2, "max_train_examples": 48, "max_eval_examples": 16, "num_threads": 1})
    assert config.batch_size == 16  # by hand: 48 examples, 3 updates an epoch, each epoch 3 train rows and a dev row
    recording = Recording()
    one = training_run.phase_one(training_run.set_up(config, progress=False), callbacks=[recording])
    assert recording.calls == [
        ("begin", 1, 0), ("step", 1, 1, 1), ("step", 1, 2, 2), ("step", 1, 3, 3), ("end", Boundary("mlm", 1), 4, "dev"),
        ("begin", 2, 3), ("step", 2, 4, 4), ("step", 2, 5, 5), ("step", 2, 6, 6), ("end", Boundary("mlm", 2), 8, "dev"),
    ]
    assert one.full_mask_loss is not None and one.timing["mlm_steps"] == 6

    # a call that stops after an epoch (a KL curve's cell): that epoch's hooks, and no full-mask loss (not the end)
    recording = Recording()
    one = training_run.phase_one(training_run.set_up(config, progress=False), callbacks=[recording], until_epoch=1)
    assert [call[0] for call in recording.calls] == ["begin", "step", "step", "step", "end"]
    assert one.full_mask_loss is None and one.timing["mlm_steps"] == 3


def test_a_phase_goes_on_only_from_a_state_of_its_own_phase():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    state = PhaseState("mlm", model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
                       meter=None, strategy=None)
    after_fine_tuning = SavedState(Boundary("ft", 1), rng={}, strategy={}, models={}, progress={})
    with pytest.raises(ValueError, match="the MLM phase cannot go on from a state saved after fine-tuning epoch 1"):
        state.restore(after_fine_tuning)
