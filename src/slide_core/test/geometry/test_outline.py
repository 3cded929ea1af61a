"""The object's real outline (slide_core.geometry.outline) and a grid that carries one."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import (
    Grid,
    GridError,
    check_outline,
    com_margins,
    outline_grid,
    signed_area,
    simplify,
    trace_outline,
)

SQUARE = np.array([[-0.03, -0.03], [0.03, -0.03], [0.03, 0.03], [-0.03, 0.03]])


def disc_grid(radius: float, w: float, vertices: int = 96) -> Grid:
    """A disc: every cell it touches, each with the share it covers, and its outline."""
    a = np.linspace(0.0, 2 * np.pi, vertices, endpoint=False)
    return outline_grid(radius * np.column_stack((np.cos(a), np.sin(a))), w, 0.02)


def test_an_outline_is_made_counter_clockwise_and_its_closing_vertex_dropped() -> None:
    closed_cw = np.vstack((SQUARE[::-1], SQUARE[-1:]))
    v = check_outline(closed_cw)
    assert v.shape == (4, 2)
    assert signed_area(v) == pytest.approx(0.0036)


@pytest.mark.parametrize(
    ('vertices', 'says'),
    [
        (SQUARE[:2], 'at least 3'),
        (np.array([[0.0, 0.0], [0.01, 0.0], [0.02, 0.0]]), 'no area'),
        (SQUARE[[0, 2, 1, 3]], 'crosses itself'),  # a bow tie
        (np.array([[0.0, 0.0], [np.nan, 0.0], [0.0, 1.0]]), 'non-finite'),
        (np.zeros((3, 3)), '(V, 2)'),
    ],
)
def test_a_bad_outline_is_refused_saying_why(vertices: np.ndarray, says: str) -> None:
    with pytest.raises(GridError, match=says.replace('(', r'\(').replace(')', r'\)')):
        check_outline(vertices)


def test_simplify_keeps_corners_and_drops_what_lies_on_the_sides() -> None:
    t = np.linspace(0.0, 1.0, 11)[:-1, None]
    ring = np.vstack(
        [a + t * (b - a) for a, b in zip(SQUARE, np.roll(SQUARE, -1, 0), strict=True)]
    )
    ring = ring + np.random.default_rng(0).uniform(-1e-4, 1e-4, ring.shape)
    kept = simplify(ring, 5e-4)
    assert len(kept) == 4
    assert np.abs(np.sort(np.abs(kept), axis=0) - 0.03).max() < 2e-4


def test_a_traced_disc_is_within_a_pixel_of_its_circle() -> None:
    pitch, radius = 0.001, 0.045
    c = (np.arange(100) + 0.5) * pitch - 0.05
    X, Y = np.meshgrid(c, c[::-1])  # row 0 at +y
    image = X**2 + Y**2 <= radius**2
    v = trace_outline(image, np.array([-0.05, -0.05]), pitch, pitch / 2)
    mid = (v + np.roll(v, -1, axis=0)) / 2
    r = np.linalg.norm(np.vstack((v, mid)), axis=1)
    assert np.abs(r - radius).max() < pitch
    assert 16 < len(v) < 80  # simplified, not a vertex per pixel
    assert signed_area(v) == pytest.approx(np.pi * radius**2, rel=0.02)
    with pytest.raises(GridError, match='no pixel'):
        trace_outline(np.zeros((4, 4), dtype=bool), np.zeros(2), pitch, pitch)


def test_a_grid_keeps_its_outline_and_refuses_one_off_its_cells() -> None:
    grid = disc_grid(0.05, 0.02)
    assert grid.outline is not None and grid.outline.shape == (96, 2)
    # The cells the disc covers some of (all 25), each with its share.
    assert grid.n == 25
    assert grid.area.sum() * 0.02**2 == pytest.approx(signed_area(grid.outline), rel=0.01)
    with pytest.raises(GridError, match='finite vertices'):
        outline_grid(SQUARE[:2], 0.02)
    assert not grid.outline.flags.writeable
    with pytest.raises(GridError, match='lies on no occupied cell'):
        Grid(grid.cell_size, grid.occupancy, grid.heights, grid.coverage, grid.outline * 1.5)


def test_the_support_at_the_edge_is_the_outlines_not_the_squares() -> None:
    # A disc of 5 cm radius, its centre 3 cm onto the table: the support is the disc's
    # segment on the table. A centre of mass 3 cm off the disc's centre, at 45 degrees,
    # lies 2 cm from the arc (5 cm from the edge). The cells' squares (the disc touches
    # all 25) reach past the arc and put it 2.9 cm inside.
    disc = disc_grid(0.05, 0.02)
    squares = Grid(disc.cell_size, disc.occupancy, disc.heights, disc.coverage)
    X = np.array([0.03, 0.0, 0.0])
    centre = 0.03 * np.sqrt([[0.5, 0.5]])
    real = float(com_margins(disc, centre, X)[0])
    assert real == pytest.approx(0.02, abs=2e-4)  # the 96-gon's sides lie inside the arc
    assert float(com_margins(squares, centre, X)[0]) > real + 0.005
