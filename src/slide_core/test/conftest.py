"""Pieces shared by the core's tests."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.identification import PushData, PushSamples
from slide_core.model import APPROACH

SIDES = {'+x': (1.0, 0.0), '-x': (-1.0, 0.0), '+y': (0.0, 1.0), '-y': (0.0, -1.0)}
"""The directions a box is pushed in, by the side of it the fingertip comes from."""


@dataclass(frozen=True)
class SidePushes:
    """A 4 cm square box of 2 cm cells (no outline: the cells' squares are the object) at
    (0.4, 0), pushed through its centre by a fingertip of ``radius`` [m]."""

    radius: float = 0.008
    grid: Grid = field(
        default_factory=lambda: Grid(0.02, np.ones((2, 2), dtype=bool), np.full((2, 2), 0.02))
    )

    def samples(self, side: str, tip_offset: tuple[float, float] = (0.0, 0.0)) -> PushSamples:
        """The box pushed along SIDES[side] at 5 cm/s, touching at 0.4 s with 1.5 N until
        the stroke ends at 0.8 s, as a robot measures it every 2 ms; the fingertip recorded
        ``tip_offset`` [m] off where it was (the camera's and the arm's frames apart)."""
        d = np.array(SIDES[side])
        t = np.arange(0.0, 1.2, 0.002)
        travel = 0.05 * np.clip(t, 0.0, 0.8)
        start = np.array([0.4, 0.0]) - d * (0.02 + self.radius + APPROACH)
        p_WF = start + travel[:, None] * d + np.asarray(tip_offset)
        moved = 0.05 * np.clip(np.minimum(t, 0.8) - APPROACH / 0.05, 0.0, None)
        X = np.column_stack((0.4 + moved * d[0], moved * d[1], np.zeros_like(t)))
        touching = (t >= APPROACH / 0.05) & (t < 0.8)
        f_W = np.where(touching[:, None], 1.5 * d, 0.0)
        return PushSamples(t, X, t, p_WF, t, f_W, 0.0, 0.8)

    def data(
        self, index: int, side: str, tip_offset: tuple[float, float] = (0.0, 0.0)
    ) -> PushData:
        """:meth:`samples` on identification's step."""
        return self.samples(side, tip_offset).to_data(self.grid, index)


@pytest.fixture
def side_pushes() -> SidePushes:
    return SidePushes()
