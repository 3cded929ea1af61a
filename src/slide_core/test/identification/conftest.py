"""Shared pieces of the identification tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from slide_core.geometry import Grid

FrictionWrenches = Callable[[Grid, np.random.Generator, int, float, float], np.ndarray]


def _friction_wrenches(
    grid: Grid, rng: np.random.Generator, steps: int, rho: float, spin: float
) -> np.ndarray:
    """G (steps, 3, n): each cell's unit friction wrench (force; torque / rho about O) for
    random body twists of 2 cm/s in x and y and ``spin`` rad/s, as training rows hold them."""
    r = grid.p_OC
    twist = rng.normal(0.0, 1.0, (steps, 3)) * np.array([0.02, 0.02, spin])
    v = twist[:, None, :2] + twist[:, None, 2:] * np.stack((-r[:, 1], r[:, 0]), axis=1)
    f = -v / np.linalg.norm(v, axis=2, keepdims=True)
    torque = (r[:, 0] * f[..., 1] - r[:, 1] * f[..., 0]) / rho
    return np.stack((f[..., 0], f[..., 1], torque), axis=1)


@pytest.fixture
def friction_wrenches() -> FrictionWrenches:
    return _friction_wrenches
