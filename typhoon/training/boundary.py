"""Where a run's resume state was saved: a :class:`Boundary`, the end of one epoch of one phase.

A whole run (:func:`typhoon.training.run.train_and_evaluate`) saves one at the end of its MLM phase (``mlm``, its
last epoch) and after each fine-tuning epoch (``ft``); a study that follows a long MLM phase after each MLM
epoch. The resume state holds it as a small dict (:meth:`Boundary.saved`), and what reads it back gets the typed
value (:meth:`Boundary.from_saved`): nothing parses a name. Light (no torch): the batch and the estimate read a
state's boundary before anything is trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Phase = Literal["mlm", "ft"]
PHASE_NAMES: dict[str, str] = {"mlm": "MLM", "ft": "fine-tuning"}


@dataclass(frozen=True)
class Boundary:
    """The end of epoch ``epoch`` of ``phase`` (``mlm``: phase 1, ``ft``: fine-tuning); epoch 0 of ``mlm`` is the
    end of a phase 1 of no epochs (a run with ``mlm_epochs = 0`` saves its state there too)."""

    phase: Phase
    epoch: int

    def __post_init__(self) -> None:
        if self.phase not in PHASE_NAMES:
            raise ValueError(f"a boundary's phase is mlm or ft, got {self.phase!r}")
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or self.epoch < 0:
            raise ValueError(f"a boundary's epoch is a whole number >= 0, got {self.epoch!r}")

    def describe(self) -> str:
        """The boundary in words, as messages and the status table say it: ``MLM epoch 3``."""
        return f"{PHASE_NAMES[self.phase]} epoch {self.epoch}"

    @property
    def label(self) -> str:
        """A short name (``mlm1``, ``ft2``) for the fault-injection stage ``state_saved:<label>`` (typhoon._faults);
        never read back."""
        return f"{self.phase}{self.epoch}"

    def saved(self) -> dict:
        """What a resume state holds (``torch.load(weights_only=True)`` reads it back)."""
        return {"phase": self.phase, "epoch": self.epoch}

    @classmethod
    def from_saved(cls, value) -> Boundary:
        """The boundary a resume state holds. A state of the earlier format named it by a string (``mlm``,
        ``mlm<e>``, ``ft<e>``): refused, naming it, since such a state is never resumed (its format differs)."""
        if isinstance(value, str):
            raise ValueError(f"the boundary {value!r} is of an earlier resume-state format")
        if not isinstance(value, dict) or set(value) != {"phase", "epoch"}:
            raise ValueError(f"a boundary is saved as {{'phase': ..., 'epoch': ...}}, got {value!r}")
        return cls(value["phase"], value["epoch"])
