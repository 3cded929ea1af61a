"""SIGTERM as an exception, so that a ``slide`` command cleans up on it as on Ctrl-C and
still says which of the two ended it (exit 143, not 130 or 0)."""

from __future__ import annotations


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it cleans up as on Ctrl-C."""


def raise_terminated(signum: int, frame: object) -> None:
    """The SIGTERM handler: raise :class:`Terminated` in the main thread."""
    raise Terminated(f'signal {signum}')
