"""Where a run's saliency comes from, decided once from its config and handed to every MLM step.

- ``none``: the strategy learns from no saliency (random, whole-word, span);
- ``mlm``: the gradient of the MLM loss w.r.t. the one-hot input of each position's true token (the paper's
  Typhoon; :class:`typhoon.masking.SaliencyProbe`);
- ``task``: the gradient of a frozen, warmed-up task model's loss (:mod:`typhoon.masking.task_saliency`).

The run sets its source up once (:meth:`SaliencySource.for_run`, after warming up the task model where the kind
is ``task``); the estimate keys its calibrated MLM step costs on the same :func:`saliency_kind`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from typhoon.masking.params import uses_task_saliency

SaliencyKind = Literal["none", "mlm", "task"]


def saliency_kind(config) -> SaliencyKind:
    """Where the saliency of ``config``'s strategy comes from: its declared ``saliency`` parameter, and whether
    the strategy learns from a saliency at all. ``config`` is a :class:`typhoon.config.RunConfig` (not imported:
    config imports masking)."""
    from typhoon.masking import get_strategy

    if not get_strategy(config.strategy, **config.strategy_params()).needs_saliency:
        return "none"
    return "task" if uses_task_saliency(config.strategy, config.strategy_params()) else "mlm"


@dataclass(frozen=True)
class SaliencySource:
    """A run's saliency source: its kind and, for ``task``, the frozen task model whose loss gives it."""

    kind: SaliencyKind
    task_model: Any = None  # a torch.nn.Module in eval mode, for kind "task" only

    def __post_init__(self) -> None:
        if self.kind not in ("none", "mlm", "task"):
            raise ValueError(f"saliency source {self.kind!r}: expected none, mlm or task")
        if (self.kind == "task") != (self.task_model is not None):
            raise ValueError(f"a {self.kind!r} saliency source " + ("needs the warmed-up task model" if self.kind == "task"
                                                                    else "takes no task model"))

    @classmethod
    def for_run(cls, config, task_model: Any = None) -> SaliencySource:
        """The source of ``config``'s run; ``task_model`` is the warmed-up task model where its kind is ``task``."""
        return cls(saliency_kind(config), task_model)
