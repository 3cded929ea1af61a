"""Checks of the numbers read from YAML files (object, workcell and belief files)."""

from __future__ import annotations

import math


def finite_number(value: object) -> bool:
    """Whether ``value`` is an int or float (not a bool) that a float holds finitely: YAML
    reads ``.nan``, ``.inf`` and integers of any length (one of 400 digits overflows a
    float, and ``math.isfinite`` raises OverflowError on it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def shown(value: object, width: int = 40) -> str:
    """``repr(value)`` cut to ``width`` characters, for a one-line message."""
    text = repr(value)
    return text if len(text) <= width else f'{text[: width - 3]}...'
