"""The compiled step solver and rollout: the same solutions as the QP and as the step-by-step
path, without the QP."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.physics import FingertipPush, WrenchPush, simulate
from slide_core.physics.inputs import check_params
from slide_core.physics.mlcp import Fingertip, residuals, solve_mlcp, solve_rigid
from slide_core.physics.rigid import RigidModel
from slide_core.physics.simulate import StepRecord, run_rollout

DT = 0.01
HANDLE = Grid.from_occupancy(np.ones((1, 8)), 0.02)  # a hammer's handle, 16 cm
BLOCK = Grid.from_occupancy(np.ones((4, 6)), 0.02)


Problem = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, Fingertip | None
]


def random_problem(rng: np.random.Generator, with_tip: bool) -> Problem:
    """A step problem like the simulator's: single rows (sliding cells), polygons (resting
    cells), a two-sided spin group, and optionally a fingertip."""
    A = rng.normal(size=(3, 3))
    M = A @ A.T + 0.5 * np.eye(3)
    rows, group, o = [], [], []
    n_groups = int(rng.integers(1, 12))
    for g in range(n_groups):
        kind = int(rng.integers(0, 3))
        if kind == 0:
            rows.append(rng.normal(size=3))
            group.append(g)
            o.append(0.0)
        elif kind == 1:
            base = rng.normal(size=(3, 3))
            for j in range(8):
                phi = 2 * np.pi * j / 8
                rows.append(base @ np.array([np.cos(phi), np.sin(phi), 0.0]))
                group.append(g)
                o.append(0.0)
        else:
            rows += [np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, -1.0])]
            group += [g, g]
            o += [0.0, 0.0]
    L = rng.uniform(0.0, 1.0, n_groups)
    finger = None
    if with_tip:
        g_t, v_t = rng.normal(size=3), float(rng.normal())
        rows += [g_t, -g_t]
        o += [-v_t, v_t]
        group += [n_groups, n_groups]
        L = np.append(L, 0.0)
        finger = Fingertip(rng.normal(size=3), float(rng.normal()), n_groups, rng.uniform(0, 0.8))
        n_groups += 1
    G = np.array(rows)
    E = np.zeros((len(rows), n_groups))
    E[np.arange(len(rows)), group] = 1.0
    return M, rng.normal(size=3), G, np.array(o), E, L, finger


@pytest.mark.parametrize('with_tip', [False, True])
def test_the_active_set_solves_random_step_problems_without_the_qp(with_tip: bool) -> None:
    rng = np.random.default_rng(7 + with_tip)
    for _ in range(60):
        M, v_star, G, o, E, L, finger = random_problem(rng, with_tip)
        sol, used_qp = solve_rigid(M, v_star, G, o, E, L, finger)
        assert not used_qp
        limits = L.copy()
        if finger is not None:
            limits[finger.group] = finger.mu * sol.lam_n
            lam_t = sol.lam[-2] - sol.lam[-1]  # the fingertip's two tangential rows
            assert abs(lam_t) <= finger.mu * sol.lam_n * (1 + 1e-9) + 1e-12  # in the cone
            assert -(finger.g_n @ sol.v + finger.o_n) >= -1e-9 * (1 + np.abs(sol.v).max())
        assert max(residuals(v_star, G, o, E, limits, sol.v, sol.lam, sol.beta, sol.lam_n)) < 1e-9
        ref = solve_mlcp(M, v_star, G, o, E, L, finger=finger)
        # The QP's fingertip fixed point stops within 1e-7 of the normal impulse (1% where
        # it cycles); without a fingertip both are exact.
        tol = 2e-2 if finger is not None else 1e-7
        np.testing.assert_allclose(sol.v, ref.v, atol=tol * (1e-9 + np.abs(ref.v).max()))


class _Steps:
    """Counts the steps that needed the general problem in the step-by-step path."""

    keep_solutions = False

    def __init__(self) -> None:
        self.general = 0

    def state(self, t: int, p_WBcm: np.ndarray, theta: np.ndarray) -> None:
        pass

    def step(self, record: StepRecord) -> None:
        self.general += int(record.result.general.sum())


def step_by_step(grid: Grid, m: np.ndarray, mu: np.ndarray, push, X0, push_height=0.0) -> tuple:  # type: ignore[no-untyped-def]
    watch = _Steps()
    mm, mmu = check_params(grid, m, mu)
    model = RigidModel.of(grid)
    rollout = run_rollout(model, mm, mmu, push, X0, None, watch, push_height)
    return rollout, watch


def test_pushing_a_handle_sideways_near_its_end_needs_no_qp() -> None:
    # Cells near the instantaneous centre of rotation turn back step after step: the
    # explicit modes miss most steps (the general QP took seconds per push there).
    rng = np.random.default_rng(1)
    m, mu = rng.uniform(0.005, 0.02, HANDLE.n), rng.uniform(0.2, 0.8, HANDLE.n)
    push = FingertipPush.straight(
        [0.03, -0.025], [0.0, 1.0], 0.03, 0.02, DT, radius=0.008, mu=0.3, dwell=0.2
    )
    fast = simulate(HANDLE, m, mu, push, [0, 0, 0])
    slow, watch = step_by_step(HANDLE, m, mu, push, [0, 0, 0])
    assert watch.general > push.steps // 2  # the case the active set is for
    assert fast.general_steps == 0 and slow.general_steps == 0
    np.testing.assert_allclose(fast.X_WO, slow.X_WO, atol=1e-12)
    np.testing.assert_allclose(fast.f_push_W, slow.f_push_W, atol=1e-9)
    assert abs(fast.X_WO[0, -1, 2]) > 0.1  # it turned


@pytest.mark.parametrize(
    ('start', 'direction', 'height'),
    [
        ([-0.07, 0.035], [1.0, 0.0], 0.0),
        ([-0.07, 0.03], [1.0, -0.3], 0.0),
        ([-0.07, 0.03], [1.0, -0.3], 0.02),  # the push's moment tips the loads
    ],
)
def test_compiled_rollouts_equal_the_step_by_step_path(start, direction, height) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(5)
    m = rng.uniform(0.005, 0.02, (3, BLOCK.n))
    mu = rng.uniform(0.2, 0.8, (3, BLOCK.n))
    heights = np.linspace(0.5, 1.5, BLOCK.n) * height  # one per cell
    push = FingertipPush.straight(
        start, direction, 0.04, 0.03, DT, radius=0.008, mu=0.3, dwell=0.3
    )
    fast = simulate(BLOCK, m, mu, push, [0, 0, 0], push_height=heights)
    slow, _ = step_by_step(BLOCK, m, mu, push, [0, 0, 0], heights)
    np.testing.assert_allclose(fast.X_WO, slow.X_WO, atol=1e-12)
    np.testing.assert_allclose(fast.V_WBcm, slow.V_WBcm, atol=1e-10)
    if height:
        flat = simulate(BLOCK, m, mu, push, [0, 0, 0]).X_WO[:, -1]
        assert np.abs(flat[:, 2] - fast.X_WO[:, -1, 2]).max() > 0.01  # the moment matters
    # A wrench push: breakaway from rest, sliding, stopping.
    f = np.zeros((120, 2))
    f[:50] = [1.5, 0.7]
    wrench = WrenchPush.create(BLOCK, BLOCK.p_OC[3], f, 0.004)
    fast = simulate(BLOCK, m, mu, wrench, [0.1, 0.0, 0.4], push_height=heights)
    slow, _ = step_by_step(BLOCK, m, mu, wrench, [0.1, 0.0, 0.4], heights)
    assert fast.general_steps == 0
    np.testing.assert_allclose(fast.X_WO, slow.X_WO, atol=1e-12)
