"""The quasi-static limit-surface reference on shapes whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.physics.limit_surface import LimitSurfaceObject, simulate

SQUARE = np.array([[-0.045, -0.045], [0.045, -0.045], [0.045, 0.045], [-0.045, 0.045]])
R_TIP = 0.0047


def path(start, end, steps=200):  # type: ignore[no-untyped-def]
    return np.linspace(start, end, steps)


def test_square_has_its_centre_of_pressure_at_the_middle():
    obj = LimitSurfaceObject.from_outline(SQUARE)
    assert np.allclose(obj.p_OP, 0.0, atol=1e-3)
    # Mean distance of a square's points from its centre: 0.3826 a for a side a.
    assert obj.c == pytest.approx(0.3826 * 0.09, rel=0.02)


def test_central_push_translates_without_turning():
    obj = LimitSurfaceObject.from_outline(SQUARE)
    X = simulate(obj, [0.0, 0.0, 0.0], path([-0.06, 0.0], [-0.01, 0.0]), R_TIP, 0.3)
    # The tip travels 5 cm, 1 cm of it before touching (gap 1.5 cm - radius).
    assert X[-1, 0] == pytest.approx(0.05 - (0.015 - R_TIP), abs=0.001)
    assert abs(X[-1, 1]) < 1e-6 and abs(X[-1, 2]) < 1e-6


def test_off_centre_push_turns_the_right_way_and_moving_away_does_nothing():
    obj = LimitSurfaceObject.from_outline(SQUARE)
    X = simulate(obj, [0.0, 0.0, 0.0], path([-0.06, 0.03], [-0.01, 0.03]), R_TIP, 0.3)
    assert X[-1, 2] < -0.05  # pushed +x above the centre: turns clockwise
    still = simulate(obj, [0.0, 0.0, 0.0], path([-0.06, 0.0], [-0.1, 0.0]), R_TIP, 0.3)
    assert np.allclose(still, 0.0)
    with pytest.raises(SlideInputError, match='tip path'):
        simulate(obj, [0.0, 0.0, 0.0], np.zeros((1, 2)), R_TIP, 0.3)


@pytest.mark.parametrize('clockwise', [False, True])
def test_a_push_into_a_concave_corner_moves_the_object(clockwise: bool) -> None:
    # The outward normal was taken as pointing away from the vertices' mean, which points
    # inwards on an L's inner edges: a tip pushed down into the arm passed through it.
    L = np.array([[0, 0], [0.1, 0], [0.1, 0.03], [0.03, 0.03], [0.03, 0.1], [0, 0.1]])
    L = L[::-1] if clockwise else L
    obj = LimitSurfaceObject.from_outline(L)
    tip = np.column_stack((np.full(40, 0.06), np.linspace(0.04, 0.01, 40)))
    X = simulate(obj, [0.0, 0.0, 0.0], tip, 0.005, 0.3)[-1]
    assert X[1] < -0.005  # pushed down (-y) with the tip, not passed through
