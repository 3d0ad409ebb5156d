"""The registry of masking strategies: each name's class, and ``get_strategy``, which builds one with
validated parameters."""

from __future__ import annotations

from typing import Any

from typhoon.masking import plugins
from typhoon.masking.base import MaskingStrategy
from typhoon.masking.params import PLUGIN_STRATEGIES, check_params, resolve_alias
from typhoon.masking.random import RandomMasking
from typhoon.masking.saliency import TyphoonMasking
from typhoon.masking.span import SpanMasking
from typhoon.masking.whole_word import WholeWordMasking

# Each built-in strategy's class, under the name its parameters are declared by (typhoon.masking.params, which
# the command line reads without torch), in the order declared there (tests/test_masking.py checks both).
STRATEGIES: dict[str, type[MaskingStrategy]] = {"random": RandomMasking, "whole_word": WholeWordMasking,
                                                "typhoon": TyphoonMasking, "span": SpanMasking}


def get_strategy(name: str, **params: Any) -> MaskingStrategy:
    """Build the masking strategy ``name`` with validated parameters: a built-in name or alias, a plugin's
    ``MODULE:CLASS`` or the name of one loaded or registered as an entry point (:mod:`typhoon.masking.plugins`).

    Raises ValueError naming the bad name, parameter or value and the valid choices.
    """
    name = plugins.known(name)
    base, _ = resolve_alias(name)
    cls = STRATEGIES.get(base) or PLUGIN_STRATEGIES[base]
    return cls(**check_params(name, params))
