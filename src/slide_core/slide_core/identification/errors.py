"""Errors of identification."""

from __future__ import annotations

from slide_core.errors import NoSolutionError, SlideInputError


class IdentificationError(SlideInputError):
    """Data or settings identification cannot use (the message says which and why)."""


class IdentificationFailedError(NoSolutionError):
    """Identification ran on usable data but found no model that explains it."""


class IdentificationCancelledError(Exception):
    """The caller asked identification to stop; nothing was produced."""
