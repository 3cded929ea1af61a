"""The planner's compiled balance tests agree with the geometry's definitions."""

from __future__ import annotations

import numpy as np

from slide_core.geometry import (
    Grid,
    boundary_rings,
    cell_corners,
    com_margins,
    grid_radius,
    outline_grid,
)
from slide_core.model import Belief, load_workcell
from slide_core.planning import com_margins_of, in_workspace, is_valid, planner_config
from slide_core.planning.balance import validity
from slide_core.planning.kernels import outline


def with_outline(outline: np.ndarray, w: float) -> Grid:
    """The cells a polygon (V, 2) touches, each with the share it covers, and the polygon
    as the grid's outline."""
    return outline_grid(outline, w, 0.02)


ANGLES = np.linspace(0.0, 2 * np.pi, 40, endpoint=False)
SHAPES = [
    Grid.from_occupancy(np.ones((3, 5)), 0.02),
    Grid.from_occupancy([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 0]], 0.02),
    Grid.from_occupancy([[1, 0, 0, 1], [1, 1, 1, 1], [1, 0, 0, 1]], 0.02),  # concave: an H
    with_outline(0.045 * np.column_stack((np.cos(ANGLES), np.sin(ANGLES))), 0.02),  # a disc
    # A slanted concave outline: a boomerang.
    with_outline(np.array([[0.0, 0.0], [0.09, 0.01], [0.03, 0.025], [0.01, 0.07]]), 0.02),
]


def beliefs(rng: np.random.Generator) -> list[Belief]:
    out = []
    for grid in SHAPES:
        mass = rng.uniform(0.005, 0.03, (5, grid.n)) * grid.area
        out.append(Belief.create(grid, mass, np.full((5, grid.n), 0.4), np.full(5, 0.2)))
    return out


def test_the_outline_holds_every_corner_of_the_footprint_boundary() -> None:
    block = SHAPES[0]  # 3 x 5 cells: 24 corners, 8 of them inside
    assert len(outline(block)[0]) == 16
    grid = SHAPES[2]
    corners, sides = outline(grid)
    every = np.unique(np.round(cell_corners(grid).reshape(-1, 2), 9), axis=0)
    # The extremes of the footprint in any direction are outline corners.
    for angle in np.linspace(0, 2 * np.pi, 13):
        d = np.array([np.cos(angle), np.sin(angle)])
        assert np.isclose((corners @ d).max(), (every @ d).max())
    # Every side joins two corners one cell apart.
    lengths = np.linalg.norm(corners[sides[:, 0]] - corners[sides[:, 1]], axis=1)
    np.testing.assert_allclose(lengths, grid.cell_size)


def test_margins_equal_the_support_polygon_definition_at_random_poses() -> None:
    rng = np.random.default_rng(0)
    for belief in beliefs(rng):
        rho = grid_radius(belief.grid)
        for _ in range(200):
            X = np.array([rng.uniform(-rho, rho), rng.uniform(-0.1, 0.1), rng.uniform(-4, 4)])
            expected = com_margins(belief.grid, belief.com(), X)
            got = com_margins_of(belief, X)
            finite = np.isfinite(expected)
            np.testing.assert_array_equal(np.isfinite(got), finite)
            np.testing.assert_array_equal(got[~finite], expected[~finite])
            np.testing.assert_allclose(got[finite], expected[finite], atol=1e-12)


def test_the_validity_closure_agrees_with_is_valid() -> None:
    rng = np.random.default_rng(1)
    config = planner_config(load_workcell())
    for belief in beliefs(rng):
        check = validity(belief, config)
        rho = grid_radius(belief.grid)
        for _ in range(200):
            X = np.array(
                [
                    rng.uniform(-rho, config.table.depth + rho),
                    rng.uniform(-config.table.width / 2 - rho, config.table.width / 2 + rho),
                    rng.uniform(-np.pi, np.pi),
                ]
            )
            assert check(*X) == is_valid(belief, X, config)
            on_table = in_workspace(belief.grid, X, config)
            corners = boundary_rings(belief.grid).reshape(-1, 2)
            c, s = np.cos(X[2]), np.sin(X[2])
            world = corners @ np.array([[c, s], [-s, c]]) + X[:2]
            assert on_table == bool(
                world[:, 0].max() <= config.table.depth
                and np.abs(world[:, 1]).max() <= config.table.width / 2
            )
