"""Exploration strategies pick pushes by their rule."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.errors import NoSolutionError, SlideInputError
from slide_core.geometry import Grid, distance_to_cells, distance_to_footprint, outline_grid
from slide_core.identification import (
    candidates,
    choose,
    grid_candidates,
    on_table,
    outline_point,
    random_push,
    side_push,
)
from slide_core.model import APPROACH, Belief, Fingertip, Workcell, load_object

GRID = Grid(0.02, np.ones((2, 4), bool), np.full((2, 4), 0.03))
X = np.array([0.3, 0.0, 0.0])
TIP = Fingertip(radius=0.008, length=0.03, mu=0.3, height=0.017)


def belief(mass_a: np.ndarray, mass_b: np.ndarray) -> Belief:
    mu = np.full((2, GRID.n), 0.5)
    return Belief.create(GRID, np.stack((mass_a, mass_b)), mu, method='test')


def test_candidates_cover_the_outline_pointing_inwards():
    cands = candidates(belief(np.full(8, 0.02), np.full(8, 0.02)), TIP)
    assert len(cands) == 12  # 2 x 4 cells: 4 + 4 long sides, 2 + 2 short sides
    for c in cands:
        assert np.linalg.norm(c.direction_O) == pytest.approx(1.0)
        assert c.p_OF @ c.direction_O < 0  # starts outside, pushes towards the middle


def test_candidates_on_a_round_object_push_its_rim_along_its_normals_too():
    r = 0.05
    a = np.linspace(0.0, 2 * np.pi, 96, endpoint=False)
    disc = outline_grid(r * np.column_stack((np.cos(a), np.sin(a))), 0.02, 0.02)
    b = Belief.create(disc, np.full((1, disc.n), 0.02), np.full((1, disc.n), 0.5))
    cands = candidates(b, TIP)
    squares = Grid(disc.cell_size, disc.occupancy, disc.heights)
    on_cells = candidates(Belief.create(squares, b.mass, b.friction), TIP)
    assert len(cands) == len(on_cells) + 16  # and its circumference in pieces of 2 cm
    for c, d in zip(cands[: len(on_cells)], on_cells, strict=True):  # the cells' sides first
        assert np.array_equal(c.p_OA, d.p_OA) and np.array_equal(c.direction_O, d.direction_O)
    for c in cands[len(on_cells) :]:
        assert np.linalg.norm(c.p_OA) == pytest.approx(r, abs=1e-4)
        assert -c.direction_O @ c.p_OA / r == pytest.approx(1.0, abs=1e-4)  # radial, inward
        assert distance_to_footprint(disc, c.p_OF) >= TIP.radius
    rng = np.random.default_rng(0)
    on_rim = 0
    for _ in range(20):
        p, n_in = outline_point(disc, rng)
        if abs(np.linalg.norm(p) - r) < 2e-3 and -n_in @ p / np.linalg.norm(p) > 0.97:
            on_rim += 1  # on a piece of the rim, within its sagitta, along its normal
        else:  # on a cell's free side
            assert distance_to_cells(disc, p - 1e-4 * n_in) > 0.0
            assert distance_to_cells(disc, p + 1e-4 * n_in) == 0.0
    assert on_rim >= 5


def test_most_distinctive_is_where_the_models_disagree():
    left = np.where(GRID.p_OC[:, 0] < 0, 0.05, 0.005)
    right = left[::-1].copy()
    rng = np.random.default_rng(0)
    same, same_scores = choose(belief(left, left), X, 'most-distinctive', rng, TIP)
    assert same_scores.max() < 1e-6
    diff, scores = choose(belief(left, right), X, 'most-distinctive', rng, TIP, max_candidates=12)
    assert scores.max() > 1e-3
    # A push along the object's long axis moves it straight whatever the mass; a push on a
    # long side off the middle turns it one way or the other: that is the informative one.
    assert abs(diff.direction_O[1]) == pytest.approx(1.0)


def test_most_different_avoids_what_was_done_and_random_is_reproducible():
    b = belief(np.full(8, 0.02), np.full(8, 0.02))
    pool = candidates(b, TIP)
    first, _ = choose(
        b, X, 'most-different', np.random.default_rng(1), TIP, done=[pool[0]], pool=pool
    )
    assert first is not pool[0]
    a, _ = choose(b, X, 'random', np.random.default_rng(5), TIP)
    c, _ = choose(b, X, 'random', np.random.default_rng(5), TIP)
    assert np.allclose(a.p_OF, c.p_OF)
    with pytest.raises(SlideInputError, match='strategy'):
        choose(b, X, 'greedy', np.random.default_rng(0), TIP)


def test_outline_points_lie_on_the_outline_with_inward_normals():
    spec = load_object('crimp')
    rng = np.random.default_rng(0)
    half = spec.grid.cell_size / 2
    for _ in range(50):
        p, n_in = outline_point(spec.grid, rng)
        inside = p + n_in * 1e-4
        outside = p - n_in * 1e-4
        in_cell = np.any(np.all(np.abs(spec.grid.p_OC - inside) <= half, axis=1))
        out_cell = np.any(np.all(np.abs(spec.grid.p_OC - outside) <= half, axis=1))
        assert in_cell and not out_cell


def test_random_exploratory_pushes_start_clear_of_the_object_and_stay_on_the_table(workcell):
    spec = load_object('hammer')
    rng = np.random.default_rng(3)
    X = np.array([0.4, 0.0, 0.7])
    for _ in range(30):
        p = random_push(spec.grid, X, workcell.table, workcell.fingertip, rng)
        assert 0.03 <= p.travel <= 0.07 and 0.03 <= p.speed <= 0.06
        start_O = p.p_OA - p.d_O * (APPROACH + workcell.fingertip.radius)
        assert distance_to_cells(spec.grid, start_O) >= workcell.fingertip.radius


def test_a_push_into_the_side_facing_a_direction_comes_from_that_side(workcell: Workcell) -> None:
    # What the task asks for when two push directions left a contact offset open.
    from slide_core.geometry import rotation

    spec = load_object('box')
    table, tip = workcell.table, workcell.fingertip
    for yaw in (0.0, 0.9, -2.0):
        X = np.array([0.4, 0.0, yaw])
        R = rotation(yaw)
        pool = on_table(grid_candidates(spec.grid, tip), spec.grid, X, table)
        best = max(float(-(R @ c.direction_O) @ [0.6, -0.8]) for c in pool)
        for n_W in ([1.0, 0.0], [0.0, -2.0], [-0.6, 0.8], [0.6, -0.8]):
            n = np.array(n_W) / np.linalg.norm(n_W)
            p = side_push(spec.grid, X, np.array(n_W), table, tip, 0.04)
            d_W = R @ p.d_O
            # Into the object, from the side that faces n_W: its contact lies on that side.
            assert float(d_W @ n) < -0.5, (yaw, n_W)
            assert float((R @ (p.p_OA - spec.grid.p_OC.mean(axis=0))) @ n) > 0.0
            assert p.speed == 0.04 and p.travel == pytest.approx(0.04)
        # No candidate faces the direction better.
        assert float(-d_W @ n) == pytest.approx(best, abs=1e-6)
    # Of a side's cells, the push nearest the middle (straightest) first, then the next.
    X = np.array([0.4, 0.0, 0.0])
    ranked = [
        side_push(spec.grid, X, np.array([1.0, 0.0]), table, tip, 0.04, rank=k) for k in range(3)
    ]
    middle = spec.grid.p_OC.mean(axis=0)[1]
    off = [abs(float(p.p_OA[1] - middle)) for p in ranked]
    for p in ranked:
        np.testing.assert_allclose(p.d_O, [-1.0, 0.0])
    assert off[0] == min(off) and off[0] < off[2], off
    # Near the free edge every push into the side facing away from it carries the object
    # out of the middle of the table: none.
    with pytest.raises(NoSolutionError, match='no side of the object facing'):
        side_push(spec.grid, np.array([0.06, 0.0, 0.0]), np.array([1.0, 0.0]), table, tip, 0.04)
    with pytest.raises(SlideInputError, match='non-zero 2-vector'):
        side_push(spec.grid, X, np.zeros(2), table, tip, 0.04)
    with pytest.raises(SlideInputError, match='rank must not be negative'):
        side_push(spec.grid, X, np.array([1.0, 0.0]), table, tip, 0.04, rank=-1)


def test_a_random_push_from_near_the_edge_carries_the_object_back_towards_the_middle(
    workcell: Workcell,
) -> None:
    # When no draw kept the object in the middle, the 50th (rejected) draw was returned:
    # from 6 cm off the free edge, pushes towards the edge came back.
    from slide_core.geometry import rotation

    spec = load_object('box')
    X = np.array([0.06, 0.0, 0.0])
    for seed in range(20):
        p = random_push(
            spec.grid, X, workcell.table, workcell.fingertip, np.random.default_rng(seed)
        )
        moved = X[:2] + p.travel * (rotation(X[2]) @ p.d_O)
        assert moved[0] > X[0] + 0.02, (seed, moved)
    with pytest.raises(SlideInputError, match='finite pose'):
        random_push(
            spec.grid,
            np.array([np.nan, 0.0, 0.0]),
            workcell.table,
            workcell.fingertip,
            np.random.default_rng(0),
        )


def test_exploratory_pushes_keep_the_fingertip_and_the_object_clear_of_obstacles(
    workcell: Workcell,
) -> None:
    # The fingertip came down in a box 1 cm beside the object on 16 of 40 draws: the
    # obstacles were never asked.
    from slide_core.geometry import rotation
    from slide_core.identification import avoids_obstacles
    from slide_core.model import Obstacle, stroke_clear

    bar = Grid.from_occupancy(np.ones((3, 10)), 0.02)  # 20 x 6 cm, along y at this pose
    X_WO = np.array([0.4, 0.0, np.pi / 2])
    box = Obstacle((0.54, 0.0), (0.1, 0.25))  # its near side 1 cm from the bar's
    tip = workcell.fingertip
    pool = candidates(Belief.create(bar, np.full(bar.n, 0.01), np.full(bar.n, 0.4)), tip)
    free = on_table(pool, bar, X_WO, workcell.table)
    kept = on_table(pool, bar, X_WO, workcell.table, tip, (box,))
    assert 0 < len(kept) < len(free)
    R = rotation(X_WO[2])
    for seed in range(40):
        p = random_push(bar, X_WO, workcell.table, tip, np.random.default_rng(seed), (box,))
        assert stroke_clear(p, X_WO, tip, (box,))
        # Nor is the object carried any nearer the box than its 1 cm.
        moved = X_WO[:2] + p.travel * (R @ p.d_O) + bar.p_OC @ R.T
        assert float(box.distance(moved).min()) >= 0.02 - 1e-9
    for c in kept:
        assert avoids_obstacles(bar, X_WO, c.p_OA, c.direction_O, c.travel, tip, (box,))
    # Walled in on every side, 1 cm off: no push, and the reason.
    walls = (
        Obstacle((0.4, 0.13), (0.1, 0.02)),
        Obstacle((0.4, -0.13), (0.1, 0.02)),
        Obstacle((0.35, 0.0), (0.02, 0.15)),
        Obstacle((0.45, 0.0), (0.02, 0.15)),
    )
    with pytest.raises(NoSolutionError, match='clear of the obstacles'):
        random_push(bar, X_WO, workcell.table, tip, np.random.default_rng(0), walls)


def test_no_push_is_made_where_the_fingertip_would_pass_over_the_object(
    workcell: Workcell,
) -> None:
    # A fingertip 10 cm up swept the air above the object; the episode ended much later,
    # as "the object never moves in the training pushes".
    from slide_core.model import side_met

    tip = workcell.fingertip  # its bottom 2 mm above the table
    heights = np.full((3, 10), 0.03)
    heights[:, 5:] = 0.0015  # a flat blade, lower than the fingertip's bottom
    blade = Grid(0.02, np.ones((3, 10), bool), heights)
    X_WO = np.array([0.4, 0.0, 0.0])
    for seed in range(20):
        p = random_push(blade, X_WO, workcell.table, tip, np.random.default_rng(seed))
        assert p.p_OA[0] < 0.0 and side_met(blade, p.p_OA, tip)  # on the tall half
    pool = candidates(Belief.create(blade, np.full(blade.n, 0.01), np.full(blade.n, 0.4)), tip)
    assert pool and all(c.p_OA[0] < 0.0 for c in pool)
    flat = Grid(0.02, np.ones((3, 10), bool), np.full((3, 10), 0.0015))
    with pytest.raises(NoSolutionError, match='the fingertip would pass over it'):
        random_push(flat, X_WO, workcell.table, tip, np.random.default_rng(0))
    # A grid of unknown heights (0) is pushed anywhere.
    unknown = Grid(0.02, np.ones((3, 10), bool), np.zeros((3, 10)))
    assert side_met(unknown, [0.1, 0.0], tip)


@pytest.mark.parametrize('name', ['hammer', 'crimp', 'spray_gun'])
def test_candidates_of_concave_outlines_start_clear_and_simulate(
    name: str, workcell: Workcell
) -> None:
    """At a concave corner the middle of a free side can lie next to another cell: such a
    start is left out (the most distinctive push once raised 'starts inside the object')."""
    spec = load_object(name)
    b = Belief.create(spec.grid, spec.mass[None], spec.friction[None], method='test')
    pool = candidates(b, workcell.fingertip)
    assert len(pool) >= 4
    for c in pool:
        assert distance_to_cells(spec.grid, c.p_OF) >= workcell.fingertip.radius
        start_O = c.p_OA - c.direction_O * (APPROACH + workcell.fingertip.radius)
        assert distance_to_cells(spec.grid, start_O) >= workcell.fingertip.radius
    X_WO = np.array([0.4, 0.0, 0.3])
    on = on_table(pool, spec.grid, X_WO, workcell.table)
    best, scores = choose(
        b, X_WO, 'most-distinctive', np.random.default_rng(0), workcell.fingertip, pool=on
    )
    assert any(best is c for c in on) and np.all(np.isfinite(scores))
