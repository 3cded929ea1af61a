"""Identification: the loss and its gradient, the optimisers, bounds, belief files."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from slide_core.geometry import Grid
from slide_core.identification import (
    METHODS,
    Bounds,
    IdentificationCancelledError,
    IdentificationError,
    TrainingSet,
    identify,
    schedule,
    softmax_weights,
)
from slide_core.model import Belief, BeliefError, load_belief, save_belief
from slide_core.physics import SUPPORT_MODELS, Support

GRID = Grid(0.02, np.ones((2, 3), bool), np.full((2, 3), 0.03))


EDGE_SHARE = np.array([0.6, 1.0, 1.0])
"""The share of each column of GRID's cells that the table carries on a step over its edge
(x = 0 crossing the first column)."""


def synthetic(
    seed: int = 0,
    noise: float = 0.0,
    support: str = 'rigid',
    push_height: float = 0.0,
    edge: bool = False,
    inertia: float = 0.2,
) -> tuple[TrainingSet, np.ndarray, np.ndarray]:
    """A training set whose wrenches a known model (m, mu) explains exactly under the
    support model ``support``, pushed ``push_height`` above the table (the loads shift
    with the push force, which they make: solved by fixed-point iteration); with ``edge``,
    on its second half of the steps the table carries only :data:`EDGE_SHARE` of the
    cells (the masses heavier away from the edge, so that no cell lifts off). ``inertia``:
    the spread of Q (0: quasi-static pushes)."""
    rng = np.random.default_rng(seed)
    n, S = GRID.n, 120
    Q = rng.normal(0.0, inertia, (S, 3, n))
    G = rng.normal(0.0, 1.0, (S, 3, n))
    m = rng.uniform(0.01, 0.05, n) * (np.tile([1.0, 2.0, 3.0], 2) if edge else 1.0)
    mu = rng.uniform(0.2, 0.8, n)
    supported = np.tile(GRID.area, (S, 1))
    if edge:
        supported[S // 2 :] *= np.tile(EDGE_SHARE, 2)
    loads = [Support.of(GRID, support, a) for a in supported]
    N = np.array([s.loads(m)[0] for s in loads])
    w = np.einsum('sjn,n->sj', Q, m) + np.einsum('sjn,sn->sj', G, mu * N)
    for _ in range(100 if push_height > 0 else 0):
        moments = push_height * w[:, :2]
        dN = np.array([s.tipping_loads(f[None])[0] for s, f in zip(loads, moments, strict=True)])
        w = np.einsum('sjn,n->sj', Q, m) + np.einsum('sjn,sn->sj', G, mu * (N + dN))
    w += rng.normal(0.0, noise, w.shape)
    train = TrainingSet(
        GRID, Q, G, w, 0.03, 1, support, push_height, (), supported if edge else None
    )
    return train, m, mu


@pytest.mark.parametrize(
    ('support', 'push_height', 'edge'),
    [(s, 0.0, e) for s in SUPPORT_MODELS for e in (False, True)]
    + [('rigid', 0.002, False), ('rigid', 0.002, True)],
)
def test_gradient_matches_finite_differences(support, push_height, edge):
    train, m, mu = synthetic(support=support, push_height=push_height, edge=edge)
    assert train.over_edge.any() == edge
    assert train.loss(m, mu)[0] < 1e-20  # the exact per-step loads, as the set models them
    rng = np.random.default_rng(1)
    m0 = m * rng.uniform(0.5, 1.5, m.size)
    mu0 = mu * rng.uniform(0.5, 1.5, mu.size)
    _, g_m, g_mu = train.loss_grad(m0, mu0)
    eps = 1e-7
    for i in range(GRID.n):
        d = np.zeros(GRID.n)
        d[i] = eps
        fd_m = (train.loss(m0 + d, mu0) - train.loss(m0 - d, mu0))[0] / (2 * eps)
        fd_mu = (train.loss(m0, mu0 + d) - train.loss(m0, mu0 - d))[0] / (2 * eps)
        assert g_m[0, i] == pytest.approx(fd_m, rel=1e-5, abs=1e-9)
        assert g_mu[0, i] == pytest.approx(fd_mu, rel=1e-5, abs=1e-9)
    # The compiled quadratic form gives the same losses and gradients.
    quick = train.quick_loss_grad(m0[None], mu0[None])
    for a, b in zip(quick, train.loss_grad(m0, mu0), strict=True):
        assert np.allclose(a, b, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize('support', SUPPORT_MODELS)
def test_true_model_has_zero_loss_and_the_analytic_method_finds_the_friction_forces(support):
    train, m, mu = synthetic(support=support)
    assert train.loss(m, mu)[0] == pytest.approx(0.0, abs=1e-20)
    belief = identify(train, 'analytic', budget=3000, warm_start=False).belief
    assert belief.support == support
    assert belief.loss[0] < 1e-4 * train.loss(*Bounds.from_grid(GRID).middle().reshape(2, -1))[0]
    loads = Support.of(GRID, support)
    c_true = mu * loads.loads(m)[0]
    c_found = belief.friction[0] * loads.loads(belief.mass[0])[0]
    assert np.allclose(c_found, c_true, rtol=0.05)


def test_the_push_moment_explains_what_fixed_loads_cannot():
    tipped, m, mu = synthetic(push_height=0.002)  # small: the fixed point converges
    assert tipped.tips and tipped.loss(m, mu)[0] < 1e-20
    assert tipped.quick_loss_grad(m[None], mu[None], grad=False)[0][0] < 1e-12
    fixed = TrainingSet(GRID, tipped.Q, tipped.G, tipped.w, tipped.rho, 1, 'rigid')
    assert fixed.loss(m, mu)[0] > 1e-6  # the same data without the shift
    # The warm start finds the friction map at the true masses.
    assert np.allclose(tipped.friction_at(m, Bounds.from_grid(GRID)), mu, atol=1e-6)
    with pytest.raises(IdentificationError, match='push height'):
        TrainingSet(GRID, tipped.Q, tipped.G, tipped.w, tipped.rho, 1, 'rigid', -0.01)


def test_pushes_over_the_edge_tell_the_centre_of_mass_from_the_friction_map():
    # Quasi-static pushes on the table act only through mu_i N_i: another centre of mass
    # with a friction map that keeps those products explains them exactly. Over the edge
    # the same cells' loads depend on the centre of mass otherwise, and it does not.
    support = Support.of(GRID, 'rigid')
    for edge in (False, True):
        train, m, mu = synthetic(inertia=0.0, edge=edge)
        shifted = m * np.tile([0.5, 1.0, 1.5], 2)  # the centre of mass moved along x
        N, N_shifted = support.loads(m)[0], support.loads(shifted)[0]
        assert np.all(N_shifted > 0.0)
        assert train.loss(m, mu)[0] < 1e-20
        impostor = train.loss(shifted, mu * N / N_shifted)[0]
        assert (impostor > 1e-3 * train.wrench_square) == edge
        assert edge or impostor < 1e-20
    # The warm start finds the friction map at the true masses over the edge too.
    over, m, mu = synthetic(edge=True, push_height=0.002)
    assert np.allclose(over.friction_at(m, Bounds.from_grid(GRID)), mu, atol=1e-6)


@pytest.mark.parametrize('seed', range(3))
def test_warm_start_friction_beats_the_true_map_on_ill_conditioned_pushes(seed, friction_wrenches):
    """A heavy head lifts the far end off and mostly translating steps make neighbouring
    cells' friction wrenches nearly equal (G^T G's condition above 1e16): the bounded least
    squares must still reach the minimum over the friction bounds, so at or below the loss
    of the true map, which lies inside them."""
    grid = Grid(0.01, np.ones((3, 14), bool), np.full((3, 14), 0.02))
    rng = np.random.default_rng(seed)
    n, S, rho = grid.n, 300, 0.05
    r = grid.p_OC
    G = friction_wrenches(grid, rng, S, rho, 0.05)
    Q = rng.normal(0.0, 0.05, (S, 3, n))
    m = np.where(r[:, 0] > 0.04, 0.12, 0.01)
    mu = rng.uniform(0.2, 0.8, n)
    N = Support.of(grid, 'rigid').loads(m)[0]
    assert N.min() == 0.0  # some cells lifted off
    w = np.einsum('sjn,n->sj', Q, m) + np.einsum('sjn,n->sj', G, mu * N)
    train = TrainingSet(grid, Q, G, w + rng.normal(0.0, 0.5, w.shape), rho, 1, 'rigid')
    found = train.friction_at(m, Bounds.from_grid(grid))
    assert np.all((found >= 0.01) & (found <= 1.0))
    assert train.loss(m, found)[0] <= train.loss(m, mu)[0]


@pytest.mark.parametrize('seed', range(2))
def test_the_tipped_warm_start_solves_the_whole_least_squares(seed, friction_wrenches):
    """With the push's moment, the warm start's reduced 2n-row system has the minimiser of
    the whole 3S-row bounded least squares in the coefficients."""
    grid = Grid(0.01, np.ones((3, 14), bool), np.full((3, 14), 0.02))
    rng = np.random.default_rng(seed)
    n, S, rho = grid.n, 300, 0.05
    G = friction_wrenches(grid, rng, S, rho, 0.05)
    Q = rng.normal(0.0, 0.05, (S, 3, n))
    m = rng.uniform(0.01, 0.05, n)
    w = rng.normal(0.0, 1.0, (S, 3))
    train = TrainingSet(grid, Q, G, w, rho, 1, 'rigid', 0.017)
    bounds = Bounds.from_grid(grid)
    found = train.friction_at(m, bounds)
    support = Support.of(grid, 'rigid')
    loads = support.loads(m)[0][None] + support.tipping_loads(0.017 * w[:, :2])  # (S, n)
    A = (G * loads[:, None, :]).reshape(-1, n)
    b = (w - np.einsum('sjn,n->sj', Q, m)).reshape(-1)
    whole = lsq_linear(A, b, bounds=(bounds.friction_min, bounds.friction_max), method='bvls')
    assert np.allclose(found, whole.x, atol=1e-6)
    assert train.loss(m, found)[0] == pytest.approx(train.loss(m, whole.x)[0], rel=1e-9)


@pytest.mark.parametrize('method', [m for m in METHODS if m != 'uniform'])
def test_every_method_improves_on_no_identification(method):
    train, _, _ = synthetic(noise=0.01)
    start = identify(train, 'uniform').belief.loss[0]
    found = identify(train, method, budget=1500, warm_start=False, seed=3)
    assert found.belief.loss.min() < 0.5 * start
    assert found.simulations <= 1500
    belief = found.belief
    lo, hi = Bounds.from_grid(GRID).lower(), Bounds.from_grid(GRID).upper()
    theta = np.concatenate((belief.mass, belief.friction), axis=1)
    assert np.all(theta >= lo - 1e-12) and np.all(theta <= hi + 1e-12)


def test_analytic_needs_fewer_simulations_than_finite_differences():
    train, _, _ = synthetic(noise=0.01)

    def simulations_to(method: str, target: float) -> int:
        found = identify(train, method, budget=4000, warm_start=False)
        for used, theta in found.trace:
            if train.loss(theta[: GRID.n], theta[GRID.n :])[0] <= target:
                return used
        return 10**9

    target = 2 * identify(train, 'analytic', budget=4000, warm_start=False).belief.loss[0]
    assert simulations_to('analytic', target) < simulations_to('finite-diff', target)


def test_bound_schedule_follows_paper_2():
    b = Bounds(np.full(6, 0.1), 1.0)
    boxes = schedule(b, 4)
    assert [round(x.friction_max, 3) for x in boxes] == [0.5, 1.0, 1.0, 1.0]
    assert [round(float(x.mass_max[0]), 3) for x in boxes] == [0.1, 0.1, 0.05, 0.1]
    with pytest.raises(IdentificationError):
        schedule(b, 0)


def test_probabilistic_belief_weights_and_file_round_trip(tmp_path):
    train, _, _ = synthetic(noise=0.02)
    belief = identify(train, 'probabilistic', K=4, budget=800).belief
    assert 4 < belief.K <= 8  # the K models and the centre-of-mass spread, by default
    assert belief.weight.sum() == pytest.approx(1.0)
    assert belief.best == int(np.argmin(belief.loss))
    back = load_belief(save_belief(belief, tmp_path / 'b.yaml', name='synthetic'))
    assert isinstance(back, Belief)
    assert np.allclose(back.mass, belief.mass, rtol=1e-5)
    assert np.allclose(back.weight, belief.weight)
    (tmp_path / 'bad.yaml').write_text('name: hammer\n')
    with pytest.raises(BeliefError, match='not a slide belief'):
        load_belief(tmp_path / 'bad.yaml')


def test_softmax_prefers_low_loss():
    w = softmax_weights(np.array([1.0, 1.1, 3.0]), 0.1)
    assert w[0] > w[1] > w[2] and w.sum() == pytest.approx(1.0)
    with pytest.raises(IdentificationError):
        softmax_weights(np.ones(2), 0.0)


def test_bad_requests_are_refused():
    train, _, _ = synthetic()
    with pytest.raises(IdentificationError, match='unknown method'):
        identify(train, 'gradient-descent')
    with pytest.raises(IdentificationError, match='budget'):
        identify(train, 'analytic', budget=0)
    # K models that the budget cannot even evaluate once each are not an identification.
    with pytest.raises(IdentificationError, match='budget of 7 simulations .* each of the 8'):
        identify(train, 'probabilistic', K=8, budget=7)
    with pytest.raises(IdentificationError, match='K must be 1 to 64 models, got 65'):
        identify(train, 'probabilistic', K=65, budget=10**6)
    # Each centre-of-mass direction may add a model: 200 made a belief of 71.
    with pytest.raises(IdentificationError, match='com_directions must be 0 to 32, got 200'):
        identify(train, 'probabilistic', K=8, budget=10**6, com_directions=200)
    assert identify(train, 'analytic', K=8, budget=7).belief.K == 1  # one model: K unused
    flat = Grid(0.02, np.ones((1, 2), bool), np.zeros((1, 2)))
    with pytest.raises(IdentificationError, match='height'):
        Bounds.from_grid(flat)
    with pytest.raises(IdentificationError, match='at least one'):
        TrainingSet.from_pushes(GRID, [])


def test_a_cancelled_identification_returns_nothing():
    train, _, _ = synthetic()
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(IdentificationCancelledError):
        identify(train, 'probabilistic', K=4, budget=2000, should_stop=stop)
    # A stop asked before any evaluation is seen in the warm start, before its K models.
    with pytest.raises(IdentificationCancelledError, match='in the warm start, model 0'):
        identify(train, 'probabilistic', K=64, budget=2000, should_stop=lambda: True)
    progress = []
    identify(train, 'analytic', budget=50, progress=lambda u, b, best: progress.append((u, best)))
    assert progress and progress[-1][0] <= 50
    assert all(b2 <= b1 for (_, b1), (_, b2) in zip(progress, progress[1:], strict=False))


def test_a_cell_covered_in_part_is_bounded_by_its_covered_volume():
    occ = np.ones((2, 3), bool)
    heights = np.full(occ.shape, 0.03)
    coverage = np.array([[0.5, 1.0, 1.0], [1.0, 1.0, 0.25]])
    part = Bounds.from_grid(Grid(0.02, occ, heights, coverage))
    whole = Bounds.from_grid(Grid(0.02, occ, heights))
    np.testing.assert_allclose(part.mass_max, whole.mass_max * [0.5, 1, 1, 1, 1, 0.25])


@pytest.mark.parametrize(
    ('density_max', 'friction_max', 'reason'),
    [
        (math.inf, 1.0, 'density_max must be above 0 and at most 22600 kg/m.3, got inf'),
        (0.0, 1.0, 'density_max must be above 0'),
        (8000.0, math.nan, 'friction_max must be above 0.01 and at most 2, got nan'),
        (8000.0, 0.01, 'friction_max must be above 0.01'),
        # Past what a belief holds: the whole budget was spent, then the belief refused.
        (60000.0, 1.0, 'density_max must be above 0 and at most 22600 kg/m.3, got 60000'),
        (8000.0, 5.0, 'friction_max must be above 0.01 and at most 2, got 5'),
    ],
)
def test_bounds_that_bound_nothing_are_refused(density_max, friction_max, reason):
    # An infinite density bound put every model's start at infinity: the fit then failed
    # blaming "NaN poses or forces" in the pushes.
    with pytest.raises(IdentificationError, match=reason):
        Bounds.from_grid(GRID, density_max, friction_max)


def test_a_fit_that_explains_little_of_the_wrenches_or_finds_no_mass_says_so():
    # A wrench in the wrong sign (a sensor mount taken the wrong way round) was fitted into
    # a confident belief with every cell at the mass floor, and nothing said so.
    from dataclasses import replace

    from slide_core.identification import fit_problems

    train, _, _ = synthetic()
    found = identify(train, 'analytic', budget=300, seed=1).belief
    assert fit_problems(train, found) == []
    assert train.explained(float(found.loss[0])) > 0.99
    flipped = replace(train, w=-train.w)
    wrong = identify(flipped, 'analytic', budget=300, seed=1).belief
    problems = fit_problems(flipped, wrong)
    assert any(p.startswith('100% of the cells sit at the mass floor') for p in problems)
    (explains,) = [p for p in problems if p.startswith('it explains')]
    assert 'check that the F/T wrench is in the right frame and sign' in explains
    assert flipped.explained(float(wrong.loss[0])) < 0.5
