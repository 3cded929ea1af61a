"""The twin's Coulomb friction step (slide_sim.friction.implicit_velocity)."""

from __future__ import annotations

import numpy as np
import pytest

from slide_sim.friction import SMOOTHING, implicit_velocity

H = 0.002  # s
SQUARE = np.array([[x, y] for x in (-0.05, 0.05) for y in (-0.05, 0.05)], dtype=float)


def _step(u_star, mu_N, M=(1.0, 1.0, 0.005), r=SQUARE):
    c = H * np.full(len(r), mu_N / len(r))
    return implicit_velocity(np.asarray(u_star, float), np.asarray(M, float), r, c, SMOOTHING)


def test_a_slow_object_sticks_exactly() -> None:
    # Friction can take 4 N * 2 ms = 8 mN s; the object has 1 kg * 2 mm/s = 2 mN s.
    u = _step([0.002, -0.001, 0.01], mu_N=4.0)
    np.testing.assert_allclose(u, 0.0, atol=1e-6)


def test_a_sliding_object_loses_mu_N_h_of_momentum_against_its_velocity() -> None:
    u_star = np.array([0.3, 0.4, 0.0])
    u = _step(u_star, mu_N=4.0)
    expected = u_star - H * 4.0 * u_star / np.linalg.norm(u_star)
    np.testing.assert_allclose(u, expected, atol=1e-7)


def test_a_spinning_square_loses_the_torque_of_its_corners() -> None:
    u = _step([0.0, 0.0, 2.0], mu_N=4.0)
    arm = float(np.linalg.norm(SQUARE[0]))  # every corner slides tangentially
    assert u[2] == pytest.approx(2.0 - H * 4.0 * arm / 0.005, rel=1e-6)
    np.testing.assert_allclose(u[:2], 0.0, atol=1e-9)


def test_an_uneven_load_turns_a_translating_object() -> None:
    # More friction on the +y side: moving along +x, that side lags and the object turns
    # counter-clockwise (omega > 0).
    r = SQUARE
    c = H * np.where(r[:, 1] > 0, 3.0, 1.0)
    M = np.array([1.0, 1.0, 0.005])
    u = implicit_velocity(np.array([0.2, 0.0, 0.0]), M, r, c, SMOOTHING)
    assert u[2] > 0
    assert u[0] == pytest.approx(0.2 - H * 8.0, rel=1e-3)
