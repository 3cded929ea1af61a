"""Where a push can start on the footprint, and how far a point is from it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slide_core.geometry import (
    Grid,
    GridError,
    distance_to_cells,
    distance_to_footprint,
    edge_support,
    outline_grid,
    outline_pieces,
    polygon_coverage,
    push_sides,
    rotation,
    signed_area,
    turn_sweep,
)

W = 0.02


def squares(grid: Grid) -> Grid:
    """The same cells without the outline."""
    return Grid(grid.cell_size, grid.occupancy, grid.heights)


def rounded(m: np.ndarray, n: np.ndarray) -> list[tuple[float, ...]]:
    return sorted(map(tuple, np.round(np.hstack((m, n)), 9)))


def disc(r: float) -> Grid:
    a = np.linspace(0.0, 2 * math.pi, 96, endpoint=False)
    return outline_grid(r * np.column_stack((np.cos(a), np.sin(a))), W, 0.02)


def test_a_rectangle_outline_is_pushed_where_its_cells_sides_are() -> None:
    g = outline_grid(np.array([[-0.08, -0.03], [0.08, -0.03], [0.08, 0.03], [-0.08, 0.03]]), W)
    mid, n_out, half, cells = push_sides(g)
    cells_mid, cells_n, cells_half, cells_of = push_sides(squares(g))
    assert len(mid) == 22  # 8 + 8 long sides, 3 + 3 short ones: nothing added
    assert np.array_equal(mid, cells_mid) and np.array_equal(n_out, cells_n)
    assert np.array_equal(half, cells_half) and np.array_equal(cells, cells_of)
    p_mid, p_n, p_half = outline_pieces(g.outline, W)
    assert rounded(p_mid, p_n) == rounded(mid, n_out) and np.allclose(p_half, W / 2)


def test_an_outline_grid_of_cells_no_object_has_is_refused() -> None:
    triangle = [[0, 0], [0.1, 0], [0.1, 0.05]]
    # 0 m cells overflowed; 1e-5 m cells made 50 million of them, for minutes.
    for cell in (0.0, 1e-5, float('nan')):
        with pytest.raises(GridError, match='cell_size'):
            outline_grid(triangle, cell)
    with pytest.raises(GridError, match='fits the workcell'):
        outline_grid([[0, 0], [3.0, 0], [3.0, 0.05]], 0.01)


def test_a_curved_rim_is_pushed_along_its_own_normals_as_well() -> None:
    r = 0.05
    g = disc(r)
    mid, n_out, half = outline_pieces(g.outline, W)
    radial = mid / np.linalg.norm(mid, axis=1)[:, None]
    assert np.linalg.norm(mid, axis=1) == pytest.approx(r, abs=1e-4)  # on the rim
    assert np.degrees(np.arccos(np.clip(np.sum(n_out * radial, axis=1), -1, 1))).max() < 1.0
    assert len(mid) == 16 and np.all(2 * half <= W)
    assert 2 * half.sum() == pytest.approx(2 * math.pi * r, rel=0.01)  # all the way round
    # The cells' sides push along the grid's axes; the rim's pieces follow them.
    all_mid, all_n, _, cells = push_sides(g)
    cells_mid, cells_n, _, _ = push_sides(squares(g))
    k = len(cells_mid)
    assert set(map(tuple, np.round(np.abs(cells_n), 9))) == {(0.0, 1.0), (1.0, 0.0)}
    assert np.array_equal(all_mid[:k], cells_mid) and np.all(cells[:k] >= 0)
    assert np.array_equal(all_mid[k:], mid) and np.array_equal(all_n[k:], n_out)
    assert np.all(cells[k:] == -1)


def test_a_bevelled_corner_is_not_pushed_and_a_concave_one_points_out() -> None:
    bevel = np.array([[-0.08, -0.03], [0.078, -0.03], [0.08, -0.028], [0.08, 0.03], [-0.08, 0.03]])
    _, n_out, _ = outline_pieces(bevel, W)
    assert np.all(np.abs(n_out).min(axis=1) < 1e-9)  # no piece across the corner
    # A side a hair longer than a cell stays one piece.
    assert (
        len(outline_pieces(np.array([[0, 0], [0.0201, 0], [0.0201, 0.02], [0, 0.02]]), W)[0]) == 4
    )
    # A repeated vertex is a side of no length, not a corner.
    again = np.array([[0, 0], [0.0201, 0], [0.0201, 0], [0.0201, 0.02], [0, 0.02]])
    assert len(outline_pieces(again, W)[0]) == 4
    with pytest.raises(GridError, match='crosses itself'):
        outline_pieces(np.array([[0, 0], [0.1, 0.1], [0.1, 0], [0, 0.1]]), W)
    with pytest.raises(GridError, match='positive length'):
        outline_pieces(bevel, 0.0)
    ell = np.array([[0, 0], [0.1, 0], [0.1, 0.04], [0.04, 0.04], [0.04, 0.1], [0, 0.1]])
    g = outline_grid(ell, W)
    mid, n_out, _ = outline_pieces(g.outline, W)
    assert len(mid) == len(push_sides(g)[0]) == 20  # the cells' sides
    inner = np.isclose(mid[:, 0], 0.04 - 0.05) & (mid[:, 1] > 0.04 - 0.05)  # frame: box centre
    assert inner.sum() == 3 and np.allclose(n_out[inner], [1.0, 0.0])


def test_the_distance_to_the_footprint_is_to_the_outline_when_there_is_one() -> None:
    r = 0.05
    g = disc(r)
    assert distance_to_footprint(g, np.array([0.01, -0.02])) == 0.0
    corner = np.array([0.045, 0.045])  # on a corner cell's square, off the disc
    assert distance_to_cells(g, corner) == 0.0
    assert distance_to_footprint(g, corner) == pytest.approx(np.hypot(0.045, 0.045) - r, 1e-3)
    p = np.array([0.07, 0.01])
    assert distance_to_footprint(squares(g), p) == distance_to_cells(g, p)


def test_a_turn_sweeps_a_round_outline_by_its_noise_alone() -> None:
    a = np.linspace(0.0, 2 * math.pi, 96, endpoint=False)
    ring = np.column_stack((np.cos(a), np.sin(a)))
    # A disc, exact and with the rim of a perceived one (0.5 mm of radial noise): a turn
    # moves its outline by no more than that noise, whichever the turn.
    assert turn_sweep(disc(0.08)) < 1e-4
    rough = 0.08 + np.random.default_rng(3).normal(0.0, 0.0005, len(a))
    assert 1e-4 < turn_sweep(outline_grid(rough[:, None] * ring, W)) < 0.001
    # Nearly round but not: an ellipse of 8 x 7.5 cm, its largest turn a quarter.
    assert 0.003 < turn_sweep(outline_grid(ring * [0.08, 0.075], W)) < 0.005
    # A square's quarter turn sweeps nothing; its eighth turn does. With or without an
    # outline, and a disc's staircase of cells alone is no disc to a camera either.
    box = outline_grid(np.array([[-0.05, -0.05], [0.05, -0.05], [0.05, 0.05], [-0.05, 0.05]]), W)
    assert turn_sweep(box) > 0.01 and turn_sweep(squares(box)) > 0.01
    assert turn_sweep(box, turns=2) < 1e-9
    assert turn_sweep(squares(disc(0.08))) > 0.005


def test_a_known_outline_with_a_thin_tab_keeps_every_cell_it_touches() -> None:
    # A plate with a tab 12 mm wide and 12 mm long: the tab's corner reaches a cell by a
    # sliver that sampling the cell's square misses, and the outline still bounds cells.
    t = np.linspace(0.0, 2 * math.pi, 192, endpoint=False)
    tab = np.abs(np.arctan2(np.sin(t), np.cos(t))) < 0.006 / 0.08
    r = 0.08 + np.where(tab, 0.012, 0.0)
    ring = r[:, None] * np.column_stack((np.cos(t), np.sin(t)))
    g = outline_grid(ring, W)
    assert g.area.sum() * W**2 == pytest.approx(signed_area(ring), rel=1e-9)


def test_edge_support_is_the_share_and_centroid_of_each_square_behind_the_edge() -> None:
    g = Grid.from_occupancy(np.ones((3, 4)), W)
    rng = np.random.default_rng(3)
    table = np.array([[0.0, -1.0], [1.0, -1.0], [1.0, 1.0], [0.0, 1.0]])  # x >= 0
    poses = np.column_stack(
        (rng.uniform(-0.03, 0.05, 12), rng.uniform(-0.1, 0.1, 12), rng.uniform(-4, 4, 12))
    )
    poses[:3, 2] = [0.0, math.pi / 2, math.pi / 4]  # sides along the edge, and a diamond
    shares, centroids = edge_support(g, poses)
    assert shares.shape == (12, g.n) and centroids.shape == (12, g.n, 2)
    u = (np.arange(100) + 0.5) / 100 * W - W / 2  # a fine lattice over one square
    lattice = np.stack(np.meshgrid(u, u), axis=-1).reshape(-1, 2)
    for X, share, centroid in zip(poses, shares, centroids, strict=True):
        corners_O = (table - X[:2]) @ rotation(X[2])  # the table in the object frame
        assert np.allclose(share, polygon_coverage(g, corners_O), atol=1e-12)
        for i in np.flatnonzero(share > 0.05):
            p_O = g.p_OC[i] + lattice
            behind = p_O[X[0] + p_O @ rotation(X[2])[0] >= 0.0]
            assert np.allclose(centroid[i], behind.mean(axis=0), atol=W / 100)  # the pitch
    one = edge_support(g, poses[0])
    assert np.array_equal(one[0], shares[0]) and np.array_equal(one[1], centroids[0])
    assert np.all(edge_support(g, [0.5, 0.0, 1.0])[0] == 1.0)
    off, at = edge_support(g, [-0.5, 0.0, 1.0])
    assert np.all(off == 0.0) and np.array_equal(at, g.p_OC)
