"""The registry of masking strategies: each name's class, and ``get_strategy``, which builds one with
validated parameters."""

from __future__ import annotations

import importlib
from typing import Any

from typhoon.masking import plugins
from typhoon.masking.base import MaskingStrategy
from typhoon.masking.params import BUILTINS, PLUGIN_STRATEGIES, check_params, resolve_alias


def builtin_class(home: str) -> type[MaskingStrategy]:
    """The class a built-in strategy's declaration names (``module:Class`` of this package, e.g.
    ``saliency:TyphoonMasking``: :data:`typhoon.masking.params.BUILTINS`)."""
    module, _, name = home.partition(":")
    return getattr(importlib.import_module(f"typhoon.masking.{module}"), name)


# Each built-in strategy's class, from its one declaration (typhoon.masking.params.BUILTINS).
STRATEGIES: dict[str, type[MaskingStrategy]] = {name: builtin_class(builtin.home) for name, builtin in BUILTINS.items()}


def get_strategy(name: str, **params: Any) -> MaskingStrategy:
    """Build the masking strategy ``name`` with validated parameters: a built-in name or alias, a plugin's
    ``MODULE:CLASS`` or the name of one loaded or registered as an entry point (:mod:`typhoon.masking.plugins`).

    Raises ValueError naming the bad name, parameter or value and the valid choices.
    """
    name = plugins.known(name)
    base, _ = resolve_alias(name)
    cls = STRATEGIES.get(base) or PLUGIN_STRATEGIES[base]
    return cls(**check_params(name, params))
