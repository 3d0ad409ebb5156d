"""The KL-gap study's registered design: its candidate causes (:data:`CAUSES`), each a change of the ``cpu``
profile's Typhoon cell, the :data:`HYPOTHESIS` registered before any run, and the files and folder of one state. Light
(no torch, numpy or pandas): the command line checks a cause's name with it. The runs are
:class:`typhoon.studies.kl_gap.policy.KlGapCauses`'s; the table is :mod:`typhoon.studies.kl_gap.table`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

STATE_FILE = "masking_state.npz"
RUN_FILE = "run.json"


def state_folder(name: str, task: str, seed: int) -> str:
    """A state's folder, relative to the study's: ``states/<name>/<task>/seed<k>``."""
    return f"states/{name}/{task}/seed{seed}"


def state_dir(out: Path, name: str, task: str, seed: int) -> Path:
    return Path(out) / state_folder(name, task, seed)


@dataclass(frozen=True)
class Cause:
    """One candidate cause: what it changes against the baseline, as RunConfig fields."""

    name: str
    what: str
    overrides: dict = field(default_factory=dict)


CAUSES: tuple[Cause, ...] = (
    Cause("baseline", "the cpu profile's Typhoon cell: minilm-l6 with a fresh MLM head, 1 MLM epoch, EMA rate "
          "0.8, 80/10/10 corruption, MLM learning rate 5e-5"),
    Cause("model", "the MLM-adapted backbone minilm-l6-mlm (encoder and head trained on English prose) in place "
          "of the fresh head: the saliency comes through a model that predicts masked words",
          {"backbone": "minilm-l6-mlm"}),
    Cause("epochs", "3 MLM epochs in place of 1: three times the EMA updates (the paper's epoch count is not "
          "stated)", {"mlm_epochs": 3}),
    Cause("ema_rate", "EMA rate 0.1 in place of 0.8: each type's weight averages about ten sightings instead "
          "of following the last one", {"lam": 0.1}),
    Cause("corruption", "mask-only corruption (what the published code does) in place of BERT's 80/10/10",
          {"corruption": "mask_only"}),
    Cause("mlm_lr", "MLM learning rate 5e-4 in place of 5e-5: a fresh head that learns faster in one epoch",
          {"mlm_lr": 5e-4}),
    Cause("all", "all of the above at once", {"backbone": "minilm-l6-mlm", "mlm_epochs": 3, "lam": 0.1,
                                               "corruption": "mask_only", "mlm_lr": 5e-4}),
)

HYPOTHESIS = (
    "Registered before the runs. Question: does Typhoon's masking at the paper's calibration (min-max, δ 0.4, "
    "p 0.15) move toward the paper's 7e-4 nats/token when the MLM phase models language? Prediction: the "
    "'model' cause raises the KL above the baseline's. Test, per cause: the KL of each (task, seed) state is "
    "paired with the baseline's of the same task and seed; the 95 % t interval of the mean log ratio says "
    "whether the cause raises the KL (interval above 0), lowers it (below 0) or neither. A cause 'closes the "
    "gap' when the 95 % t interval of its geometric-mean KL lies within a factor of 3 of 7e-4 (the criterion "
    "of the paper-claims table). Intervals are unadjusted, one per cause; with 6 causes a Bonferroni reading "
    "(99.2 % intervals) is reported beside them. The 'kl_definition' row reads the baseline's states with "
    "another KL, the KL of the masked-token distribution from uniform masking's, in case the paper's figure "
    "is that quantity: no training."
)


def named(causes, name: str, what: str) -> Cause:
    """The one of ``causes`` (a design's causes or rows) called ``name``; ValueError naming the choices."""
    for cause in causes:
        if cause.name == name:
            return cause
    raise ValueError(f"unknown {what} {name!r}; choose one of {[c.name for c in causes]}")


def cause_named(name: str) -> Cause:
    return named(CAUSES, name, "cause")
