"""The registry of masking strategies: each name's class, and ``get_strategy``, which builds one with
validated parameters."""

from __future__ import annotations

from typing import Any

from typhoon.masking.base import MaskingStrategy
from typhoon.masking.params import check_params, resolve_alias
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
    base, _ = resolve_alias(name)
    return STRATEGIES[base](**check_params(name, params))
