"""The registry of masking strategies: each name's class, and ``get_strategy``, which builds one with
validated parameters."""

from __future__ import annotations

from typing import Any

from typhoon.masking.base import MaskingStrategy
from typhoon.masking.params import resolve_alias
from typhoon.masking.random import RandomMasking
from typhoon.masking.saliency import TyphoonMasking
from typhoon.masking.span import SpanMasking
from typhoon.masking.whole_word import WholeWordMasking

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
