"""The step contact problem: known solutions, complementarity, fingertip coupling."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.physics.mlcp import Fingertip, solve_mlcp

M1 = np.diag([2.0, 2.0, 0.1])


def one_row(direction: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    G = np.array([direction + [0.0]])
    return G, np.zeros(1), np.ones((1, 1))


def test_sliding_body_loses_exactly_its_friction_impulse() -> None:
    G, o, E = one_row([1.0, 0.0])
    sol = solve_mlcp(M1, np.array([1.0, 0.0, 0.0]), G, o, E, np.array([0.5]))
    np.testing.assert_allclose(sol.v, [0.75, 0.0, 0.0], atol=1e-9)
    assert sol.lam[0] == pytest.approx(0.5)
    assert sol.beta[0] == pytest.approx(0.75, rel=1e-6)  # the paper's gamma: sliding speed


def test_friction_stops_but_never_reverses_the_motion() -> None:
    G, o, E = one_row([1.0, 0.0])
    sol = solve_mlcp(M1, np.array([0.1, 0.0, 0.0]), G, o, E, np.array([0.5]))
    np.testing.assert_allclose(sol.v, 0.0, atol=1e-7)  # the solver's precision
    assert sol.lam[0] == pytest.approx(0.2, rel=1e-6)  # M v = 0.2 < limit
    assert sol.beta[0] == pytest.approx(0.0, abs=1e-9)


def test_polygon_friction_holds_any_direction_within_its_limit() -> None:
    a = 2 * np.pi * np.arange(8) / 8
    G = np.column_stack((np.cos(a), np.sin(a), np.zeros(8)))
    E = np.ones((8, 1))
    v_star = np.array([0.1, 0.1, 0.0])  # impulse 0.28 < 0.5 at 45 degrees
    sol = solve_mlcp(M1, v_star, G, np.zeros(8), E, np.array([0.5]))
    np.testing.assert_allclose(sol.v, 0.0, atol=1e-9)
    np.testing.assert_allclose(G.T @ sol.lam, M1 @ v_star, atol=1e-9)


def test_welds_make_two_cells_move_together() -> None:
    M = np.diag([1.0, 1.0, 0.01, 3.0, 3.0, 0.03])
    J_e = np.zeros((2, 6))
    J_e[0, [0, 3]] = [1.0, -1.0]
    J_e[1, [1, 4]] = [1.0, -1.0]
    v_star = np.array([4.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    G = np.zeros((0, 6))
    sol = solve_mlcp(M, v_star, G, np.zeros(0), np.zeros((0, 0)), np.zeros(0), J_e=J_e)
    np.testing.assert_allclose(sol.v[[0, 3]], [1.0, 1.0], atol=1e-9)  # momentum 4 over mass 4


def test_fingertip_friction_is_bounded_by_mu_times_the_normal_impulse() -> None:
    # A fingertip moving diagonally into a free body: it slips, friction = mu * normal.
    G = np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]])
    v_F = np.array([1.0, 1.0])
    o = np.array([-v_F[1], v_F[1]])
    tip = Fingertip(g_n=np.array([-1.0, 0.0, 0.0]), o_n=v_F[0], group=0, mu=0.2)
    sol = solve_mlcp(M1, np.zeros(3), G, o, np.ones((2, 1)), np.array([0.0]), finger=tip)
    np.testing.assert_allclose(sol.v[0], 1.0, atol=1e-7)  # pushed along at the tip's speed
    lam_t = sol.lam[0] - sol.lam[1]
    assert abs(lam_t) == pytest.approx(0.2 * sol.lam_n, rel=1e-5)
    assert 0 < sol.v[1] < 1.0  # dragged sideways, slipping


def test_a_fingertip_fixed_point_that_iteration_misses_is_found_by_bisection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same slipping fingertip, with no pass of the fixed-point iteration (as if it
    # cycled widely near a stick/slip switch): bisection on the normal impulse gives
    # Coulomb's friction at the impulse it produces, as the iteration does when it settles.
    G = np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0], [0.3, 0.2, 1.0]])
    v_F = np.array([1.0, 1.0])
    o = np.array([-v_F[1], v_F[1], 0.0])
    E = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    L = np.array([0.0, 0.05])
    tip = Fingertip(g_n=np.array([-1.0, 0.0, 0.0]), o_n=v_F[0], group=0, mu=0.4)
    settled = solve_mlcp(M1, np.zeros(3), G, o, E, L, finger=tip)
    monkeypatch.setattr('slide_core.physics.mlcp._COULOMB_ITERATIONS', 0)
    bisected = solve_mlcp(M1, np.zeros(3), G, o, E, L, finger=tip)
    assert abs(bisected.lam[0] - bisected.lam[1]) == pytest.approx(0.4 * bisected.lam_n, rel=1e-6)
    assert bisected.lam_n == pytest.approx(settled.lam_n, rel=1e-6)
    np.testing.assert_allclose(bisected.v, settled.v, atol=1e-7)
