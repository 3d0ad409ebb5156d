"""The values a setting may take, declared once next to the setting and checked without torch.

A masking parameter (:class:`typhoon.masking.params.Param`) and a :class:`typhoon.config.RunConfig`
field each carry one of these; the strategy classes, the run configuration and the command line's
checks before any import of torch all ask it. Every refusal is a ValueError naming the setting, what is
allowed and the value given.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any


def as_real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must be a real number, got nan")
    return value


def check_in_interval(name: str, value: Any, low: float, high: float, *, low_open: bool,
                      high_open: bool) -> float:
    """``value`` as a float if it lies in the interval, else ValueError naming both."""
    x = as_real(name, value)
    above = x > low if low_open else x >= low
    below = x < high if high_open else x <= high
    if not (above and below):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")
    return x


def check_positive(name: str, value: Any) -> float:
    x = as_real(name, value)
    if not (0 < x < math.inf):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return x


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_int_at_least(name: str, value: Any, low: int) -> int:
    # Integral, not int: a numpy integer is one too (numpy registers it), and numpy is not imported here
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_positive_int(name: str, value: Any) -> int:
    return check_int_at_least(name, value, 1)


@dataclass(frozen=True)
class Interval:
    """A real number in [low, high], either end open."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def check(self, name: str, value: Any) -> float:
        return check_in_interval(name, value, self.low, self.high, low_open=self.low_open, high_open=self.high_open)


@dataclass(frozen=True)
class Positive:
    """A finite real number > 0."""

    def check(self, name: str, value: Any) -> float:
        return check_positive(name, value)


@dataclass(frozen=True)
class IntAtLeast:
    """An integer >= low; with ``none_ok``, also None (e.g. "the whole split")."""

    low: int
    none_ok: bool = False

    def check(self, name: str, value: Any) -> int | None:
        if value is None and self.none_ok:
            return None
        return check_int_at_least(name, value, self.low)


@dataclass(frozen=True)
class OneOf:
    """One of a list of names."""

    choices: tuple[str, ...]

    def check(self, name: str, value: Any) -> str:
        return check_choice(name, value, self.choices)


@dataclass(frozen=True)
class Matching:
    """A name matching ``pattern`` in full (``cuda:N``: any N); ``shown``, the allowed values as a refusal names them."""

    pattern: str
    shown: tuple[str, ...]

    def check(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or re.fullmatch(self.pattern, value) is None:
            raise ValueError(f"{name} must be one of {list(self.shown)}, got {value!r}")
        return value


Allowed = Interval | Positive | IntAtLeast | OneOf | Matching
