"""The support models: a rigid body's linear table pressure, and the papers' m_i g."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.physics import (
    GRAVITY,
    FingertipPush,
    PhysicsError,
    Support,
    WrenchPush,
    moment_loads,
    rollout_loss,
    simulate,
    simulate_reference,
)

L_SHAPE = Grid.from_occupancy([[1, 1, 1, 1], [1, 0, 0, 0], [1, 0, 0, 0]], 0.02, 0.03)


def balance(support: Support, N: np.ndarray, m: np.ndarray) -> tuple[float, np.ndarray]:
    """Force and moment residuals of loads N (n,) holding masses m (n,)."""
    M = m.sum()
    force = N.sum() - M * GRAVITY
    moment = N @ support.r - GRAVITY * m @ support.r
    return float(force), moment


def test_rigid_loads_balance_the_body_and_are_linear_across_the_footprint():
    rng = np.random.default_rng(0)
    grid = Grid.from_occupancy(np.ones((4, 6)), 0.02)
    support = Support.of(grid, 'rigid')
    m = rng.uniform(0.005, 0.03, grid.n)
    N = support.loads(m)[0]
    force, moment = balance(support, N, m)
    assert abs(force) < 1e-12 and np.abs(moment).max() < 1e-12
    assert np.all(N > 0)
    # Linear in the cell position: a plane fits the loads exactly.
    A = np.column_stack((np.ones(grid.n), grid.p_OC))
    coef = np.linalg.lstsq(A, N, rcond=None)[0]
    assert np.allclose(A @ coef, N, atol=1e-12)
    # Only the total mass and the centre of mass matter: moving mass between cells with
    # the same total and centre changes nothing.
    shift = np.zeros(grid.n)
    shift[[0, 5, 18, 23]] = [1e-3, -1e-3, -1e-3, 1e-3]  # corners: same sum, same centre
    assert np.allclose(support.loads(m + shift), N, atol=1e-12)
    # ... while the papers' model loads each cell with its own weight.
    assert np.allclose(Support.of(grid, 'cell-mass').loads(m)[0], m * GRAVITY)


def test_a_cell_the_object_covers_in_part_carries_its_share_of_the_pressure():
    # A bar whose last cell the object covers a quarter of: by default the support is the
    # grid's covered area, so a uniform density presses every cell with the same pressure
    # (the load a cell's covered area times it), and moving the centre of mass to the
    # covered area's centroid is what a uniform object does.
    coverage = np.array([[1.0, 1.0, 1.0, 0.25]])
    grid = Grid(0.02, np.ones((1, 4), bool), np.full((1, 4), 0.03), coverage)
    m = 0.01 * grid.area
    N = Support.of(grid, 'rigid').loads(m)[0]
    np.testing.assert_allclose(N, m * GRAVITY, rtol=1e-12)
    force, moment = balance(Support.of(grid, 'rigid'), N, m)
    assert abs(force) < 1e-12 and np.abs(moment).max() < 1e-12
    # Whole cells under the same masses would press unevenly (the plane has to tilt).
    N_whole = Support.of(grid, 'rigid', np.ones(4)).loads(m)[0]
    assert not np.allclose(N_whole, m * GRAVITY, rtol=1e-3)


def test_a_heavy_end_lifts_the_far_cells_off_and_the_rest_still_balance():
    grid = Grid.from_occupancy(np.ones((1, 10)), 0.02)
    support = Support.of(grid, 'rigid')
    m = np.full(grid.n, 0.001)
    m[-1] = 0.2  # the centre of mass near the last cell
    N = support.loads(m)[0]
    force, moment = balance(support, N, m)
    assert abs(force) < 1e-9 and np.abs(moment).max() < 1e-9
    assert np.all(N >= 0) and N[0] == 0.0  # no tension: the light end lifts off
    loaded = N > 0
    # Linear where it touches, rising towards the heavy end.
    x = grid.p_OC[loaded, 0]
    assert np.allclose(np.polyval(np.polyfit(x, N[loaded], 1), x), N[loaded], atol=1e-9)
    assert np.all(np.diff(N[loaded]) > 0)


@pytest.mark.parametrize('kind', ['rigid', 'cell-mass'])
def test_load_jacobian_matches_finite_differences(kind):
    rng = np.random.default_rng(1)
    support = Support.of(L_SHAPE, kind)
    for m in (rng.uniform(0.01, 0.03, L_SHAPE.n), np.r_[0.5, rng.uniform(1e-3, 2e-3, 5)]):
        J = support.load_jacobian(m)[0]
        eps = 1e-7
        for j in range(L_SHAPE.n):
            d = np.zeros(L_SHAPE.n)
            d[j] = eps
            fd = (support.loads(m + d)[0] - support.loads(m - d)[0]) / (2 * eps)
            assert np.allclose(J[:, j], fd, atol=1e-6)


def test_unsupported_cells_carry_nothing_and_an_unbalanced_object_is_refused():
    grid = Grid.from_occupancy(np.ones((1, 5)), 0.02)
    area = np.array([0.0, 0.0, 1.0, 1.0, 1.0])  # two cells over the edge
    support = Support.of(grid, 'rigid', area)
    m = np.full(grid.n, 0.01)  # centre of mass over cell 2: on the supported part
    N = support.loads(m)[0]
    assert N[0] == N[1] == 0.0 and N.sum() == pytest.approx(m.sum() * GRAVITY)
    m_out = np.array([0.1, 0.1, 0.001, 0.001, 0.001])  # centre of mass over the edge
    with pytest.raises(PhysicsError, match='tip'):
        support.loads(m_out)
    with pytest.raises(PhysicsError, match='unknown support model'):
        Support.of(grid, 'springs')


def test_fast_and_reference_simulators_agree_under_both_supports():
    rng = np.random.default_rng(2)
    m = rng.uniform(0.005, 0.03, L_SHAPE.n)
    mu = rng.uniform(0.2, 0.8, L_SHAPE.n)
    push = WrenchPush.at_cell(L_SHAPE, 3, np.tile([1.2, 0.4], (150, 1)), 0.004)
    finals = {}
    for kind in ('rigid', 'cell-mass'):
        a = simulate(L_SHAPE, m, mu, push, [0.1, 0.0, 0.3], support=kind).X_WO[0]
        b = simulate_reference(L_SHAPE, m, mu, push, [0.1, 0.0, 0.3], support=kind).X_WO[0]
        assert np.abs(a - b).max() < 1e-4
        finals[kind] = a[-1]
    # The heavy corner cell presses less under a rigid body: the motions differ.
    assert np.abs(finals['rigid'] - finals['cell-mass']).max() > 1e-3


def test_rollout_gradient_through_the_rigid_loads_matches_finite_differences():
    rng = np.random.default_rng(3)
    m = rng.uniform(0.005, 0.03, L_SHAPE.n)
    mu = rng.uniform(0.2, 0.8, L_SHAPE.n)
    f = np.tile([2.0, 1.0], (40, 1))
    push = WrenchPush.at_cell(L_SHAPE, 0, f, 0.004)
    X0, V0 = np.array([0.0, 0.0, 0.1]), np.array([0.3, 0.1, 0.5])
    truth = simulate(L_SHAPE, m, mu, push, X0, V0)
    steps = np.arange(10, 41, 10)
    guess_m, guess_mu = m * 1.2, mu * 0.9
    r = rollout_loss(L_SHAPE, guess_m, guess_mu, push, X0, steps, truth.X_WO[0, steps], V0)
    eps = 1e-7

    def loss(mm: np.ndarray, mumu: np.ndarray) -> float:
        return float(
            rollout_loss(L_SHAPE, mm, mumu, push, X0, steps, truth.X_WO[0, steps], V0).loss[0]
        )

    numeric_m = np.zeros(L_SHAPE.n)
    numeric_mu = np.zeros(L_SHAPE.n)
    for i in range(L_SHAPE.n):
        d = np.zeros(L_SHAPE.n)
        d[i] = eps * guess_m[i]
        numeric_m[i] = (loss(guess_m + d, guess_mu) - loss(guess_m - d, guess_mu)) / (2 * d[i])
        d[i] = eps * guess_mu[i]
        numeric_mu[i] = (loss(guess_m, guess_mu + d) - loss(guess_m, guess_mu - d)) / (2 * d[i])
    scale = max(np.abs(numeric_m).max(), np.abs(numeric_mu).max())
    assert np.abs(r.d_mass[0] - numeric_m).max() < 1e-4 * scale
    assert np.abs(r.d_friction[0] - numeric_mu).max() < 1e-4 * scale


def test_a_fingertip_push_sees_the_support_model():
    grid = Grid.from_occupancy(np.ones((3, 3)), 0.02, 0.03)
    m = np.full(grid.n, 0.01)
    m[2] = 0.1  # a heavy corner
    mu = np.full(grid.n, 0.4)
    path = np.column_stack((np.linspace(-0.045, 0.0, 200), np.full(200, -0.015)))
    tip = FingertipPush.create(path, 0.008, 0.3, 0.004)
    # Uniform friction puts the centre of friction at the centre of mass under both models;
    # pushed off it, the object turns against the loads' spread, which differs.
    rigid = simulate(grid, m, mu, tip, [0, 0, 0], support='rigid').X_WO[0, -1]
    cells = simulate(grid, m, mu, tip, [0, 0, 0], support='cell-mass').X_WO[0, -1]
    assert np.all(np.isfinite(rigid)) and abs(rigid[2] - cells[2]) > 1e-3


def test_trial_masses_outside_the_physical_range_get_the_linear_loads():
    # Optimisers may evaluate points past their bounds: no balance exists for a centre of
    # mass outside the footprint, and the loads stay the smooth linear extension.
    grid = Grid.from_occupancy(np.ones((2, 4)), 0.02)
    support = Support.of(grid, 'rigid')
    m = np.full(grid.n, 0.01)
    m[0] = -0.03
    N = support.loads(m)[0]
    A = np.column_stack((np.ones(grid.n), grid.p_OC))
    assert np.allclose(A @ np.linalg.lstsq(A, N, rcond=None)[0], N, atol=1e-12)
    assert np.allclose(support.load_jacobian(m)[0] @ m, N, atol=1e-12)


def test_a_push_moment_shifts_the_pressure_towards_the_push_and_keeps_the_weight():
    grid = Grid.from_occupancy(np.ones((3, 8)), 0.02)
    support = Support.of(grid, 'rigid')
    h, F = 0.017, np.array([[2.0, -0.5], [0.0, 1.0]])  # N, in the object frame
    dN = support.tipping_loads(h * F)
    assert dN.shape == (2, grid.n)
    assert np.allclose(dN.sum(axis=1), 0.0, atol=1e-12)  # the weight is unchanged
    # The pressure's first moment about the table grows by h F: the centre of pressure
    # moves towards the push.
    assert np.allclose(dN @ support.r, h * F, atol=1e-12)
    front = support.r[:, 0] > 0
    assert dN[0, front].sum() > 0 > dN[0, ~front].sum()
    assert not Support.of(grid, 'cell-mass').tipping_loads(h * F).any()
    with pytest.raises(PhysicsError, match=r'\(S, 2\)'):
        support.tipping_loads(np.zeros((2, 3)))


def test_the_tipping_basis_balances_a_unit_moment_on_the_cells_that_touch():
    grid = Grid.from_occupancy(np.ones((1, 10)), 0.02)
    support = Support.of(grid, 'rigid')
    even = np.full(grid.n, 0.02)
    heavy_end = np.full(grid.n, 0.001)
    heavy_end[-1] = 0.2  # its static loads lift the far cells off
    basis = support.tipping_basis(np.stack((even, heavy_end)))
    assert basis.shape == (2, 2, grid.n)
    lifted = support.loads(heavy_end)[0] == 0.0
    assert lifted.any() and not basis[1][:, lifted].any()  # a lifted cell stays off
    for k in range(2):
        assert np.allclose(basis[k].sum(axis=1), 0.0, atol=1e-12)  # the weight is unchanged
        # Each row's first moment is its unit moment (along the only axis a row can tip).
        assert basis[k, 0] @ support.r[:, 0] == pytest.approx(1.0)
    # Without lift-off it is the linear change of tipping_loads.
    assert np.allclose(basis[0], support.tipping_loads(np.eye(2)), atol=1e-12)
    assert not Support.of(grid, 'cell-mass').tipping_basis(even).any()


def test_a_push_above_the_table_loads_the_leading_cells():
    # Pushed through its centre with 1 N, a block whose leading half has the higher friction
    # sticks when the push's moment moves its pressure forward (0.4 m g = 0.94 N of friction
    # without it); with the friction the other way round it slides further.
    grid = Grid.from_occupancy(np.ones((4, 6)), 0.02)
    m = np.full(grid.n, 0.01)
    front = grid.p_OC[:, 0] > 0
    f = np.zeros((150, 2))
    f[:60] = [1.0, 0.0]
    push = WrenchPush.create(grid, np.array([-0.06, 0.0]), f, 0.004)
    travel = {}
    for name, mu in (('front', np.where(front, 0.6, 0.2)), ('back', np.where(front, 0.2, 0.6))):
        for h in (0.0, 0.02):
            travel[name, h] = simulate(grid, m, mu, push, [0, 0, 0], push_height=h).X_WO[0, -1, 0]
    assert travel['front', 0.0] == pytest.approx(travel['back', 0.0], abs=1e-9)
    assert travel['front', 0.0] > 0.005
    assert travel['front', 0.02] < 1e-6
    assert travel['back', 0.02] > 2 * travel['back', 0.0]
    with pytest.raises(PhysicsError, match='push heights'):
        simulate(grid, m, np.full(grid.n, 0.4), push, [0, 0, 0], push_height=-0.01)


def test_moment_loads_are_the_supports_loads_for_every_set_of_carried_areas():
    rng = np.random.default_rng(4)
    grid = L_SHAPE
    areas = grid.area[None] * np.array([[1.0] * 6, [0.0, 0.5, 1, 1, 1, 1], [1, 1, 1, 1, 0.2, 0.0]])
    L = moment_loads(grid.p_OC, areas)
    assert L.shape == (3, grid.n, 3)
    m = rng.uniform(0.01, 0.03, grid.n)
    b = GRAVITY * np.concatenate(([m.sum()], m @ grid.p_OC))
    moment = np.array([0.004, -0.002])
    for a, L_a in zip(areas, L, strict=True):
        support = Support.of(grid, 'rigid', a)
        assert np.allclose(L_a @ b, support.loads(m)[0], atol=1e-12)
        assert np.allclose(L_a[:, 1:] @ moment, support.tipping_loads(moment[None])[0])
    # Carried elsewhere than at their centres (a cell's part on the table), the loads
    # still hold the weight and its moment, now about the points that carry them.
    at = np.repeat(grid.p_OC[None], 3, axis=0)
    at[1, 1] += [0.004, 0.0]  # the half of cell 1 on the table
    N = moment_loads(at, areas) @ b
    assert np.allclose(N.sum(axis=1), GRAVITY * m.sum())
    assert np.allclose(np.einsum('sn,snj->sj', N, at), GRAVITY * m @ grid.p_OC)
    assert not np.allclose(N[1], L[1] @ b)
    with pytest.raises(PhysicsError, match='not all zero'):
        moment_loads(grid.p_OC, np.zeros((1, grid.n)))
    with pytest.raises(PhysicsError, match=r'\(S, n, 2\)'):
        moment_loads(grid.p_OC, np.ones((2, grid.n + 1)))
