"""The fingertip's contact with a polygon outline (slide_core.physics.kernels_outline)."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.physics import RigidModel
from slide_core.physics.kernels_outline import outline_contact

SQUARE = np.array([[-0.05, -0.05], [0.05, -0.05], [0.05, 0.05], [-0.05, 0.05]])


@pytest.mark.parametrize('outline', [SQUARE, SQUARE[::-1]], ids=['ccw', 'cw'])
def test_outside_inside_and_corner(outline: np.ndarray) -> None:
    qx, qy, nx, ny, d = outline_contact(0.08, 0.01, outline)  # right of the right edge
    assert (qx, qy, nx, ny) == pytest.approx((0.05, 0.01, 1.0, 0.0))
    assert d == pytest.approx(0.03)
    qx, qy, nx, ny, d = outline_contact(0.0, 0.04, outline)  # inside, 1 cm below the top
    assert (qx, qy, nx, ny) == pytest.approx((0.0, 0.05, 0.0, 1.0))
    assert d == pytest.approx(-0.01)
    qx, qy, nx, ny, d = outline_contact(0.06, 0.06, outline)  # off the corner
    assert (qx, qy) == pytest.approx((0.05, 0.05))
    assert (nx, ny) == pytest.approx((np.sqrt(0.5), np.sqrt(0.5)))
    assert d == pytest.approx(np.sqrt(2) * 0.01)


def test_the_rigid_model_reports_the_outline_in_its_body_frame() -> None:
    # A 5 x 5 grid of 2 cm cells is the square above; its cells' centroid G is the origin,
    # so the body and object frames agree, and outline and squares give the same contact.
    grid = Grid.from_occupancy(np.ones((5, 5)), 0.02)
    model = RigidModel.of(grid, outline=SQUARE)
    squares = RigidModel.of(grid)
    p = np.array([[0.08, 0.01], [0.0, -0.09]])
    q, n, d = model.contact(p)
    q_s, n_s, d_s = squares.contact(p)
    np.testing.assert_allclose(q, q_s, atol=1e-12)
    np.testing.assert_allclose(n, n_s, atol=1e-12)
    np.testing.assert_allclose(d, d_s, atol=1e-12)
    # Inside the outline the distance is signed; the squares report zero.
    _, n_in, d_in = model.contact(np.array([[0.0, 0.04]]))
    assert d_in[0] == pytest.approx(-0.01)
    np.testing.assert_allclose(n_in[0], [0.0, 1.0], atol=1e-12)
    assert model.closest_point(np.array([[0.0, 0.04]]))[1][0] == 0.0
