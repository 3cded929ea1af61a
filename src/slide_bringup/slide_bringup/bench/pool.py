"""How many processes a benchmark suite runs its jobs in."""

from __future__ import annotations

import os

from slide_core.errors import SlideInputError


def processes(workers: int | None) -> int:
    """``workers``, or one per core when None (``--jobs`` not given); SlideInputError when it
    is under 1."""
    if workers is None:
        return max(1, os.cpu_count() or 1)
    if workers < 1:
        raise SlideInputError(f'--jobs must be at least 1 process, got {workers}')
    return workers
