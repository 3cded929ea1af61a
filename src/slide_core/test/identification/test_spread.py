"""The belief's models for the centre of mass that the pushes leave open."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.identification import (
    Bounds,
    IdentificationCancelledError,
    TrainingSet,
    com_spread,
    identify,
    in_hull,
    shift_com,
)
from slide_core.identification.spread import EVALUATIONS_PER_RAY
from slide_core.physics import Support

GRID = Grid(0.01, np.ones((4, 8), bool), np.full((4, 8), 0.02))


def quasi_static(friction_wrenches: Callable[..., np.ndarray], noise: float = 0.05) -> TrainingSet:
    """Wrenches of friction alone (no inertia): any centre of mass whose loads can carry the
    same friction forces explains them as well, so the centre of mass is left open."""
    rng = np.random.default_rng(0)
    n, S, rho = GRID.n, 200, 0.05
    G = friction_wrenches(GRID, rng, S, rho, 0.3)
    m = np.full(n, 0.01)
    mu = np.full(n, 0.4)
    w = np.einsum('sjn,n->sj', G, mu * Support.of(GRID, 'rigid').loads(m)[0])
    return TrainingSet(GRID, np.zeros((S, 3, n)), G, w + rng.normal(0.0, noise, w.shape), rho, 1)


def test_shift_com_moves_the_centre_of_mass_and_keeps_the_total():
    rng = np.random.default_rng(2)
    m = rng.uniform(0.005, 0.02, GRID.n)
    r = GRID.p_OC
    delta = np.array([0.006, -0.004])
    moved = shift_com(m, r, delta)
    assert moved is not None
    assert moved.sum() == pytest.approx(m.sum())
    assert np.allclose(moved @ r / moved.sum(), m @ r / m.sum() + delta, atol=1e-12)
    assert shift_com(m, r, np.array([0.5, 0.0])) is None  # beyond the footprint


def test_spread_models_surround_the_centre_of_mass_within_the_loss_band(friction_wrenches):
    train = quasi_static(friction_wrenches)
    bounds = Bounds.from_grid(GRID)
    m0 = np.full(GRID.n, 0.005)
    mu0 = train.friction_at(m0, bounds)
    best = float(train.loss(m0, mu0)[0])
    masses, frictions, losses, used = com_spread(train, bounds, m0, [best], best, 0.05, 4)
    assert masses.shape == (4, GRID.n) and 0 < used <= 1 + 4 * EVALUATIONS_PER_RAY
    assert np.allclose(train.loss(masses, frictions), losses)
    assert np.all(losses <= 1.05 * best)
    com0 = m0 @ GRID.p_OC / m0.sum()
    coms = masses @ GRID.p_OC / masses.sum(axis=1, keepdims=True)
    assert in_hull(coms, com0)
    assert np.all(np.linalg.norm(coms - com0, axis=1) > 0.002)  # the band leaves millimetres
    assert np.allclose(masses.sum(axis=1), m0.sum(), rtol=1e-3)


def test_a_narrow_band_keeps_the_spread_close(friction_wrenches):
    train = quasi_static(friction_wrenches)
    bounds = Bounds.from_grid(GRID)
    m0 = np.full(GRID.n, 0.005)
    best = float(train.loss(m0, train.friction_at(m0, bounds))[0])
    wide = com_spread(train, bounds, m0, [best], best, 0.05, 4)[0]
    narrow = com_spread(train, bounds, m0, [best], best, 0.002, 4)[0]
    com0 = m0 @ GRID.p_OC / m0.sum()

    def reach(ms: np.ndarray) -> float:
        if ms.shape[0] == 0:
            return 0.0
        return float(
            np.linalg.norm(ms @ GRID.p_OC / ms.sum(1, keepdims=True) - com0, axis=1).max()
        )

    assert reach(narrow) < reach(wide)


def test_identify_adds_the_spread_within_its_budget_and_can_leave_it_out(friction_wrenches):
    train = quasi_static(friction_wrenches)
    with_spread = identify(train, 'probabilistic', K=4, budget=400)  # on by default
    alone = identify(train, 'probabilistic', K=4, budget=400, com_directions=0)
    assert alone.belief.K == 4
    assert 4 < with_spread.belief.K <= 8
    assert with_spread.simulations <= 400
    assert np.isclose(with_spread.belief.weight.sum(), 1.0)


def test_a_cancelled_spread_returns_nothing(friction_wrenches):
    train = quasi_static(friction_wrenches)
    bounds = Bounds.from_grid(GRID)
    m0 = np.full(GRID.n, 0.005)
    with pytest.raises(IdentificationCancelledError):
        com_spread(train, bounds, m0, [1.0], 1.0, 0.05, 4, should_stop=lambda: True)


def test_each_direction_keeps_the_start_that_reaches_furthest(friction_wrenches):
    train = quasi_static(friction_wrenches)
    bounds = Bounds.from_grid(GRID)
    light, heavy = np.full(GRID.n, 0.004), np.full(GRID.n, 0.007)
    own = [float(train.loss(m, train.friction_at(m, bounds))[0]) for m in (light, heavy)]
    best = min(own)
    com0 = light @ GRID.p_OC / light.sum()

    def reaches(starts: np.ndarray, losses: list[float]) -> np.ndarray:
        ms = com_spread(train, bounds, starts, losses, best, 0.05, 4)[0]
        assert ms.shape[0] == 4
        return np.linalg.norm(ms @ GRID.p_OC / ms.sum(1, keepdims=True) - com0, axis=1)

    both = reaches(np.stack((light, heavy)), own)
    alone = np.maximum(reaches(light, own[:1]), reaches(heavy, own[1:]))
    assert np.all(both >= alone - 1e-12)


def test_the_spread_compares_losses_as_its_start_was_fitted(friction_wrenches):
    # A start whose friction the optimiser left short of the least-squares map: refitting
    # the friction alone lowers a model's training loss, so a spread model whose loss came
    # from a refit would look more probable than its start without fitting better.
    train = quasi_static(friction_wrenches)
    bounds = Bounds.from_grid(GRID)
    m0 = np.full(GRID.n, 0.005)
    refit = float(train.loss(m0, train.friction_at(m0, bounds))[0])
    start = float(train.loss(m0, 1.3 * train.friction_at(m0, bounds))[0])
    assert start > 1.5 * refit
    masses, frictions, losses, _ = com_spread(train, bounds, m0, [start], start, 0.05, 4)
    assert masses.shape[0] == 4
    assert np.all(losses >= 0.99 * start) and np.all(losses <= 1.05 * start)
    assert np.allclose(losses, train.loss(masses, frictions) * start / refit)
