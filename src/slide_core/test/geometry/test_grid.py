"""Object grids: construction, conventions, queries and errors."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import (
    Grid,
    GridError,
    cell_positions,
    check_pose,
    polygon_coverage,
    rotation,
    wrap_angle,
)

L_SHAPE = [[1, 0, 0], [1, 1, 1]]
# A 3 mm U whose bounding box centre lies in its notch.
U_SHAPE_MM = np.array([[0, 0], [3, 0], [3, 3], [2, 3], [2, 1], [1, 1], [1, 3], [0, 3]], float)


def test_cell_centres_follow_the_documented_convention() -> None:
    g = Grid.from_occupancy(L_SHAPE, 0.02)
    assert g.n == 4
    assert g.shape == (2, 3)
    # Row 0 is the +y edge, column 0 the -x edge, origin at the bounding box centre.
    np.testing.assert_allclose(g.p_OC[0], [-0.02, 0.01])
    np.testing.assert_allclose(g.p_OC[1:], [[-0.02, -0.01], [0.0, -0.01], [0.02, -0.01]])
    assert g.index_of(1, 2) == 3


def test_polygon_rasterisation_keeps_cells_whose_centre_is_inside() -> None:
    square = [[0, 0], [0.1, 0], [0.1, 0.06], [0, 0.06]]
    g = Grid.from_polygon(square, 0.02, height=0.03)
    assert g.shape == (3, 5)
    assert g.n == 15
    assert np.all(g.heights == 0.03)
    tri = Grid.from_polygon([[0, 0], [0.1, 0], [0, 0.1]], 0.02)
    assert 0 < tri.n < 25
    # The hypotenuse corner is empty, the right-angle corner full.
    assert tri.occupancy[-1, 0] and not tri.occupancy[0, -1]


def test_outer_cells_and_adjacency() -> None:
    g = Grid.from_occupancy(np.ones((3, 3)), 0.01)
    outer = g.outer_cells()
    assert outer.sum() == 8 and not outer[g.index_of(1, 1)]
    assert g.adjacent_pairs().shape == (12, 2)
    assert g.is_connected()
    assert not Grid.from_occupancy([[1, 0, 1]], 0.01).is_connected()


def test_nearest_cells_are_the_closest_occupied_centres() -> None:
    g = Grid.from_occupancy(L_SHAPE, 0.02)  # centres (-2, 1), (-2, -1), (0, -1), (2, -1) cm
    # Each centre moved 4 mm away stays its own; a point in the empty cell (0, 1) at
    # (0.3, 1.2) cm is nearest the cell below it; one past the right end, the last cell.
    near = g.p_OC + np.array([0.004, 0.0])
    assert np.array_equal(g.nearest_cells(near), np.arange(g.n))
    assert g.nearest_cells([[0.003, 0.012], [0.05, -0.01]]).tolist() == [2, 3]


def test_outline_sides_lie_on_the_outline_with_outward_normals() -> None:
    g = Grid.from_occupancy(L_SHAPE, 0.02)
    cells, mid, n_out = g.outline_sides()
    assert len(cells) == 10  # the L of 4 cells has a perimeter of 10 cell sides
    # Each midpoint is half a cell from its cell's centre along the normal, and the point a
    # little outside it is on no cell.
    np.testing.assert_allclose(np.linalg.norm(mid - g.p_OC[cells], axis=1), 0.01)
    outside = mid + 0.001 * n_out
    assert not np.any(np.all(np.abs(outside[:, None] - g.p_OC[None]) < 0.01, axis=2))


def test_maps_round_trip() -> None:
    g = Grid.from_occupancy(L_SHAPE, 0.02)
    values = np.array([1.0, 2.0, 3.0, 4.0])
    image = g.to_map(values)
    assert np.isnan(image[0, 1])
    np.testing.assert_array_equal(g.from_map(image), values)
    with pytest.raises(GridError, match='expected 4 per-cell values'):
        g.to_map([1.0, 2.0])


def test_cell_positions_rotate_with_the_pose() -> None:
    g = Grid.from_occupancy([[1, 1]], 0.02)
    p = cell_positions(g, [1.0, 2.0, np.pi / 2])
    np.testing.assert_allclose(p, [[1.0, 1.99], [1.0, 2.01]], atol=1e-12)
    batch = cell_positions(g, np.zeros((4, 3)))
    assert batch.shape == (4, 2, 2)
    np.testing.assert_allclose(rotation(np.pi / 2) @ [1.0, 0.0], [0.0, 1.0], atol=1e-12)
    assert wrap_angle(3 * np.pi / 2) == pytest.approx(-np.pi / 2)


@pytest.mark.parametrize(
    ('build', 'message'),
    [
        (lambda: Grid.from_occupancy(np.zeros((2, 2)), 0.02), 'no occupied cell'),
        (lambda: Grid.from_occupancy([[1]], 0.0), 'cell_size must be a positive'),
        (lambda: Grid.from_occupancy([1, 1], 0.02), '2-D array'),
        (lambda: Grid.from_occupancy([[1]], 0.02, heights=-1.0), 'non-negative'),
        (lambda: Grid.from_polygon([[0, 0], [1, 1]], 0.02), 'k>=3'),
        (lambda: Grid.from_polygon(U_SHAPE_MM * 1e-3, 0.02), 'smaller than one'),
        (lambda: Grid(0.02, np.ones((1, 2)), np.zeros((1, 2)), np.ones(2)), 'coverage has'),
        (lambda: Grid(0.02, np.ones((1, 2)), np.zeros((1, 2)), [[1.0, 1.5]]), 'fraction'),
        (lambda: Grid(0.02, np.ones((1, 2)), np.zeros((1, 2)), [[1.0, np.nan]]), 'fraction'),
        (lambda: Grid(0.02, np.ones((1, 2)), np.zeros((1, 2)), [[1.0, 0.0]]), 'leave it out'),
    ],
)
def test_bad_grids_are_rejected_with_a_reason(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GridError, match=message):
        build()


def test_bad_poses_and_cells_are_rejected() -> None:
    g = Grid.from_occupancy(L_SHAPE, 0.02)
    with pytest.raises(GridError, match='NaN'):
        check_pose([0.0, np.nan, 0.0])
    with pytest.raises(GridError, match=r'\(x, y, theta\)'):
        check_pose([0.0, 1.0])
    with pytest.raises(GridError, match='not an occupied cell'):
        g.index_of(0, 1)
    with pytest.raises(GridError, match='does not exist'):
        g.check_cell(4)


def test_polygon_coverage_is_the_covered_share_of_each_cell():
    # A right triangle over a 2 x 2 grid of 1 cm cells: the diagonal halves two cells.
    triangle = np.array([[-0.01, -0.01], [0.01, -0.01], [-0.01, 0.01]])
    grid = Grid.from_occupancy(np.ones((2, 2)), 0.01)
    frac = polygon_coverage(grid, triangle)
    # Row 0 is +y: cells (0,0) top-left, (0,1) top-right, (1,0) bottom-left, (1,1).
    np.testing.assert_allclose(frac, [0.5, 0.0, 1.0, 0.5], atol=1e-12)
    with pytest.raises(ValueError, match='vertices'):
        polygon_coverage(grid, triangle[:2])


def test_polygon_coverage_is_exact_for_thin_and_concave_parts() -> None:
    # A U whose two prongs pass through one cell, and a spike whose tip is a sliver of the
    # next cell: every piece counts, and the shares add up to the polygon's area.
    u = np.array(
        [[-0.02, -0.02], [0.02, -0.02], [0.02, 0.02], [0.012, 0.02], [0.012, -0.01],
         [-0.012, -0.01], [-0.012, 0.02], [-0.02, 0.02]]
    )  # fmt: skip
    grid = Grid.from_occupancy(np.ones((2, 2)), 0.02)
    frac = polygon_coverage(grid, u)
    # The top cells each hold one prong 8 mm wide above y = -0.01 (less the notch).
    np.testing.assert_allclose(frac, [0.4, 0.4, 0.7, 0.7], atol=1e-12)
    spike = np.array([[-0.02, -0.01], [0.0001, 0.0], [-0.02, 0.01]])  # tip 0.1 mm over
    frac = polygon_coverage(Grid.from_occupancy(np.ones((1, 2)), 0.02), spike)
    assert frac[1] == pytest.approx(0.5 * 1e-4 * 0.02 / 201 / 4e-4, rel=1e-6)
    assert frac.sum() * 4e-4 == pytest.approx(0.5 * 0.0201 * 0.02, rel=1e-9)


def test_a_grid_carries_the_covered_share_of_each_cell() -> None:
    occ = np.array([[1, 1, 0], [1, 1, 1]], bool)
    whole = Grid(0.02, occ, np.zeros(occ.shape))
    np.testing.assert_array_equal(whole.area, np.ones(5))
    assert whole.whole
    coverage = np.array([[0.5, 1.0, 0.3], [1.0, 0.25, 1.0]])
    part = Grid(0.02, occ, np.zeros(occ.shape), coverage)
    # Per cell in the cells' order; an empty cell's value is dropped.
    np.testing.assert_array_equal(part.area, [0.5, 1.0, 1.0, 0.25, 1.0])
    assert part.coverage is not None and part.coverage[0, 2] == 0.0
    assert not part.whole
