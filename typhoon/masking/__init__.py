"""Which tokens to mask: one registry of MLM masking strategies with a shared interface.

``get_strategy(name, **params)`` builds a validated strategy; see docs/CONTRACTS.md for the
interface (``select``, ``__call__``, ``prepare``, ``update``, state). Names: ``random``,
``whole_word``, ``span``, ``typhoon`` (saliency masking, :mod:`.saliency`; calibration via
``calibration=...``, saliency source via ``saliency=...``), and the aliases ``typhoon_minmax``,
``typhoon_rank``, ``typhoon_softmax`` and ``typhoon_task`` (min-max calibration of the task-loss
saliency, :mod:`typhoon.task_saliency`). Each strategy class declares its parameters (``PARAMS``);
:func:`parameters_of` lists them for a name, :func:`inactive_parameters` those that given values make
irrelevant (left out of a run's identity).
"""

from __future__ import annotations

from typing import Any

# Names, parameters and aliases are declared torch-free in typhoon.strategy_params (re-exported here);
# each class's PARAMS is its entry of STRATEGY_PARAMS.
from typhoon.strategy_params import (
    ALIASES,
    STRATEGY_PARAMS,
    inactive_parameters,
    parameters_of,
    resolve_alias,
    strategy_names,
)

from .base import CORRUPTIONS, IGNORE_INDEX, MaskingStrategy, Param, corrupt, load_state, maskable_positions
from .calibration import (
    CALIBRATIONS,
    BudgetSolver,
    budget_moved,
    calibrate,
    calibrate_budget,
    kl_to_uniform,
    masked_distribution_kl,
    preference,
    spread,
)
from .random import RandomMasking, random_token_mask
from .saliency import SALIENCY_SOURCES, SaliencyProbe, TyphoonMasking, batch_weight_estimate, ema_update
from .span import SpanMasking, sample_span_lengths, span_length_pmf, span_mask
from .whole_word import WholeWordMasking, whole_word_mask

STRATEGIES: dict[str, type[MaskingStrategy]] = {
    "random": RandomMasking,
    "whole_word": WholeWordMasking,
    "span": SpanMasking,
    "typhoon": TyphoonMasking,
}


def get_strategy(name: str, **params: Any) -> MaskingStrategy:
    """Build the masking strategy ``name`` with validated parameters.

    Raises ValueError naming the bad name, parameter or value and the valid choices.
    """
    base, fixed = resolve_alias(name)
    for key, value in fixed.items():
        if key in params and params[key] != value:
            raise ValueError(f"strategy {name!r} fixes {key}={value!r}, got {key}={params[key]!r}")
    valid = [param.name for param in STRATEGIES[base].PARAMS]
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"strategy {base!r} got unknown parameter(s) {unknown}; valid: {valid}")
    return STRATEGIES[base](**{**params, **fixed})


__all__ = [
    "ALIASES", "BudgetSolver", "STRATEGY_PARAMS", "CALIBRATIONS", "CORRUPTIONS", "IGNORE_INDEX", "SALIENCY_SOURCES",
    "STRATEGIES",
    "MaskingStrategy", "Param", "RandomMasking", "SaliencyProbe", "SpanMasking", "TyphoonMasking", "WholeWordMasking",
    "batch_weight_estimate", "budget_moved", "calibrate", "calibrate_budget", "corrupt", "ema_update",
    "get_strategy", "inactive_parameters", "kl_to_uniform", "load_state", "maskable_positions", "masked_distribution_kl",
    "parameters_of", "preference", "random_token_mask", "sample_span_lengths", "span_length_pmf", "span_mask", "spread",
    "strategy_names", "whole_word_mask",
]
