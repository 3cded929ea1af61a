"""Errors of identification."""

from __future__ import annotations

from slide_core.errors import NoSolutionError, SlideInputError


class IdentificationError(SlideInputError):
    """Data or settings identification cannot use (the message says which and why)."""


class OffTableError(IdentificationError):
    """A push's poses put the whole object past the table's free edge (x < 0) on some
    step: they are not in the table frame, or the object had fallen. ``push``: its index."""

    def __init__(self, message: str, push: int) -> None:
        super().__init__(message)
        self.push = push


class IdentificationFailedError(NoSolutionError):
    """Identification ran on usable data but found no model that explains it."""


class IdentificationCancelledError(Exception):
    """The caller asked identification to stop; nothing was produced."""
