"""Which tokens to mask: one registry of MLM masking strategies with a shared interface.

``get_strategy(name, **params)`` builds a validated strategy; see docs/CONTRACTS.md for the
interface (``select``, ``__call__``, ``prepare``, ``update``, state). Names: ``random``,
``whole_word``, ``span``, ``typhoon`` (saliency masking, :mod:`.saliency`; calibration via
``calibration=...``, saliency source via ``saliency=...``), and the aliases ``typhoon_minmax``,
``typhoon_rank``, ``typhoon_softmax`` and ``typhoon_task`` (min-max calibration of the task-loss
saliency, :mod:`typhoon.masking.task_saliency`). Each strategy class declares its parameters (``PARAMS``);
:func:`parameters_of` lists them for a name, :func:`inactive_parameters` those that given values make
irrelevant (left out of a run's identity).

The package loads lazily: a name is imported from its module on first use, so the torch-free
declarations in :mod:`typhoon.masking.params` (the CLI's help reads them) load without the strategies
(torch); ``from typhoon.masking import get_strategy`` works as before.
"""

from __future__ import annotations

import importlib

# Each public name and the module of this package that defines it.
_HOMES = {
    **dict.fromkeys(["ALIASES", "CALIBRATIONS", "CORRUPTIONS", "SALIENCY_SOURCES", "STRATEGY_PARAMS",
                     "inactive_parameters", "parameters_of", "resolve_alias", "strategy_names"], "params"),
    **dict.fromkeys(["BudgetSolver", "ClosedFormBudget", "budget_moved", "budget_rule", "calibrate", "calibrate_budget",
                     "kl_to_uniform", "masked_distribution_kl", "preference", "realised_rate", "spread"], "calibration"),
    **dict.fromkeys(["IGNORE_INDEX", "MaskingStrategy", "Param", "corrupt", "load_state", "maskable_positions"], "base"),
    **dict.fromkeys(["SaliencyProbe", "TyphoonMasking", "batch_weight_estimate", "ema_update"], "saliency"),
    **dict.fromkeys(["STRATEGIES", "get_strategy"], "registry"),
    **dict.fromkeys(["RandomMasking", "random_token_mask"], "random"),
    **dict.fromkeys(["SpanMasking", "sample_span_lengths", "span_length_pmf", "span_mask"], "span"),
    **dict.fromkeys(["WholeWordMasking", "whole_word_mask"], "whole_word"),
}
__all__ = list(_HOMES)


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'typhoon.masking' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"typhoon.masking.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
