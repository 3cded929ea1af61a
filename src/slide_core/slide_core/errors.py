"""The error every slide_core function raises on bad input.

It derives from ValueError; its message says what was wrong and what to do. Command-line
tools print it as a one-line reason.
"""

from __future__ import annotations


class SlideInputError(ValueError):
    """Input that cannot describe a physical object, push or measurement."""
