"""The rollout refinement: models refined on the simulator's own pose error."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import Grid, cell_positions
from slide_core.identification import (
    Bounds,
    IdentificationError,
    PushData,
    TrainingSet,
    identify,
    refine,
    schedule,
)
from slide_core.identification.refine import RolloutProblem
from slide_core.physics import WrenchPush, simulate

GRID = Grid.from_occupancy(np.ones((2, 3)), 0.02, 0.03)
DT = 0.004


def pushes_by_the_core(
    m: np.ndarray, mu: np.ndarray, noise_n: float = 0.0, push_height: np.ndarray | float = 0.0
) -> list[PushData]:
    """Pushes whose poses the core itself predicts from their forces (no model error), the
    forces recorded with white noise of ``noise_n`` [N], acting ``push_height`` [m] up. The
    core's table has no edge: their training sets are built with ``table_edge=False``."""
    rng = np.random.default_rng(7)
    out = []
    for i, (cell, force) in enumerate([(0, (1.6, 0.3)), (5, (0.2, -1.5)), (2, (-1.4, 0.6))]):
        f = np.tile(force, (150, 1))
        push = WrenchPush.at_cell(GRID, cell, f, DT)
        X = simulate(GRID, m, mu, push, [0.3, 0.0, 0.1], push_height=push_height).X_WO[0]
        if noise_n > 0.0:
            push = WrenchPush.at_cell(GRID, cell, f + rng.normal(0.0, noise_n, f.shape), DT)
        steps = np.arange(X.shape[0])
        # A fingertip that stays on the pushed point.
        p_WF = cell_positions(GRID, X)[:, cell]
        out.append(PushData(i, push, X[0], steps, X, p_WF, X))
    return out


def test_refinement_lowers_the_pose_error_within_the_bounds():
    rng = np.random.default_rng(0)
    m = rng.uniform(0.01, 0.04, GRID.n)
    mu = rng.uniform(0.2, 0.6, GRID.n)
    pushes = pushes_by_the_core(m, mu)
    train = TrainingSet.from_pushes(GRID, pushes, table_edge=False)
    found = identify(train, 'probabilistic', K=2, budget=4, warm_start=False)
    problem = RolloutProblem(GRID, pushes, found.belief.support, 0.1)
    before = problem.quick_loss_grad(found.belief.mass, found.belief.friction, grad=False)[0]
    # The losses alone (compiled rollouts) are the gradient path's (tracked step by step).
    with_grad = problem.quick_loss_grad(found.belief.mass, found.belief.friction)[0]
    np.testing.assert_allclose(before, with_grad, rtol=1e-9)
    # The true maps leave only the windows' start-velocity estimate (a backward difference
    # of the origin's poses, 0.2 mm RMS here).
    truth = problem.quick_loss_grad(m[None], mu[None], grad=False)[0][0]
    assert truth < 1e-7 and truth < 0.05 * before.min()
    better = refine(found, train, pushes, budget=40)
    b = better.belief
    after = problem.quick_loss_grad(b.mass, b.friction, grad=False)[0]
    assert np.all(after <= before) and after.min() < 0.5 * before.min()
    assert b.method == 'probabilistic+rollout' and b.support == found.belief.support
    assert better.simulations > found.simulations and better.seconds > found.seconds
    bounds = Bounds.from_grid(GRID)
    assert np.all(b.mass >= bounds.mass_min - 1e-15) and np.all(b.mass <= bounds.mass_max)
    assert np.allclose(b.loss, train.loss(b.mass, b.friction))


def test_refinement_says_when_nothing_moves():
    m, mu = np.full(GRID.n, 0.02), np.full(GRID.n, 0.5)
    still = WrenchPush.at_cell(GRID, 0, np.zeros((50, 2)), DT)
    X = np.tile([0.3, 0.0, 0.0], (51, 1))
    pd = PushData(0, still, X[0], np.arange(51), X, np.zeros((51, 2)), X)
    with pytest.raises(IdentificationError, match='no window'):
        RolloutProblem(GRID, [pd], 'rigid', 0.1)
    assert m.shape == mu.shape


def test_each_step_pushes_at_its_cells_height_and_tipped_maps_refine_with_the_moment():
    rng = np.random.default_rng(1)
    m = rng.uniform(0.01, 0.04, GRID.n)
    mu = rng.uniform(0.2, 0.6, GRID.n)
    heights = 0.01 + 0.001 * np.arange(GRID.n)  # one per cell
    pushes = pushes_by_the_core(m, mu, push_height=heights)
    train = TrainingSet.from_pushes(GRID, pushes, push_height=heights, table_edge=False)
    flat = TrainingSet.from_pushes(GRID, pushes, table_edge=False)
    assert train.tips and not flat.tips and train.steps == flat.steps
    # Pushes 0, 1 and 2 act on cells 0, 5 and 2: each step at its cell's height.
    rows = [TrainingSet.from_pushes(GRID, [p], table_edge=False).steps for p in pushes]
    per_push = np.split(train.push_height, np.cumsum(rows)[:2])
    for cell, arm in zip((0, 5, 2), per_push, strict=True):
        assert np.all(arm == heights[cell])
    with pytest.raises(IdentificationError, match='one per cell'):
        TrainingSet.from_pushes(GRID, pushes, push_height=heights[:3], table_edge=False)
    found = identify(train, 'probabilistic', K=2, budget=4, warm_start=False)
    flat_found = identify(flat, 'analytic')
    assert found.belief.push_moment and not flat_found.belief.push_moment
    with pytest.raises(IdentificationError, match='pass push_height'):
        refine(found, train, pushes, budget=4)
    with pytest.raises(IdentificationError, match='without push_height'):
        refine(flat_found, flat, pushes, budget=4, push_height=heights)
    with pytest.raises(IdentificationError, match='one per cell'):
        refine(found, train, pushes, budget=4, push_height=heights[:2])
    # The pushes were made with the moment: with it the true maps leave only the windows'
    # start-velocity estimate (1e-7 m^2 against 2e-5 without it), and refinement lowers the
    # pose error as without it.
    tipped = RolloutProblem(GRID, pushes, 'rigid', 0.1, heights)
    untipped = RolloutProblem(GRID, pushes, 'rigid', 0.1)
    truth = tipped.quick_loss_grad(m[None], mu[None], grad=False)[0][0]
    assert truth < 0.01 * untipped.quick_loss_grad(m[None], mu[None], grad=False)[0][0]
    b0 = found.belief
    before = tipped.quick_loss_grad(b0.mass, b0.friction, grad=False)[0]
    np.testing.assert_allclose(before, tipped.quick_loss_grad(b0.mass, b0.friction)[0], 1e-9)
    better = refine(found, train, pushes, budget=40, push_height=heights)
    assert better.belief.push_moment
    after = tipped.quick_loss_grad(better.belief.mass, better.belief.friction, grad=False)[0]
    assert np.all(after <= before) and after.min() < 0.5 * before.min()


def test_refinement_keeps_each_model_in_the_bounds_it_was_found_in():
    rng = np.random.default_rng(2)
    m = rng.uniform(0.01, 0.04, GRID.n)
    mu = rng.uniform(0.2, 0.6, GRID.n)
    pushes = pushes_by_the_core(m, mu, noise_n=0.3)  # a loss band the spread can move in
    train = TrainingSet.from_pushes(GRID, pushes, table_edge=False)
    found = identify(train, 'probabilistic', K=2, budget=400, com_directions=2)
    K, n = found.belief.K, GRID.n
    base = Bounds.from_grid(GRID)
    assert K > 2 and len(found.bounds) == K
    # The optimisers' models in their schedule boxes, the spread's in the whole bounds.
    assert [b.friction_max for b in found.bounds] == [
        *(b.friction_max for b in schedule(base, 2)),
        *[base.friction_max] * (K - 2),
    ]
    theta = np.concatenate((found.belief.mass, found.belief.friction), axis=1)
    for box, t in zip(found.bounds, theta, strict=True):
        np.testing.assert_array_equal(box.project(t), t)
    # Not a schedule of K boxes, what refinement used to split the bounds into.
    assert [b.friction_max for b in schedule(base, K)] != [b.friction_max for b in found.bounds]
    refined = refine(found, train, pushes, budget=2 * K)
    assert refined.bounds == found.bounds
    r = np.concatenate((refined.belief.mass, refined.belief.friction), axis=1)
    for box, t in zip(found.bounds, r, strict=True):
        np.testing.assert_allclose(box.project(t), t, atol=1e-15)
    assert r.shape == (K, 2 * n)
