"""The errors of slide_core: one root with two branches.

- :class:`SlideInputError` (also a ``ValueError``): the input cannot describe a physical
  object, push, measurement or setting. The message says what was wrong and what to do.
  The command line exits with code 2.
- :class:`NoSolutionError`: the input was fine, but what was asked has no solution: no goal
  at the edge is graspable and balanced, no path or push exists, identification found no
  model. The command line exits with its own code (3) and the message says why.

And :class:`OutputError` (also an ``OSError``): the machine refused to write an output the
request was fine to ask for (a path that passed the checks and then could not be written,
a full disk). The command line exits with code 1.

Every subpackage derives its own errors from one of the two (``GridError``,
``PlanningError``, ...), so callers can catch a whole branch.
"""

from __future__ import annotations


class SlideError(Exception):
    """Root of every error slide_core raises on purpose."""


class SlideInputError(SlideError, ValueError):
    """Input that cannot describe a physical object, push, measurement or setting."""


class NoSolutionError(SlideError):
    """A well-posed request without a solution (no goal, no path, no model)."""


class OutputError(SlideError, OSError):
    """An output that could not be written where asked (errno, reason, the output's path):
    the machine's refusal, not the request's. Never a FileNotFoundError, which the command
    line takes for a missing input."""
