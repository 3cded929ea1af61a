"""Planar poses X = (x, y, theta) and their algebra; the one yaw <-> quaternion convention.

A pose X_AB (..., 3) places frame B in frame A: position [m] of B's origin and rotation about
z [rad], counter-clockwise positive. Arrays of poses have shape (..., 3).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.errors import SlideInputError

FloatArray = NDArray[np.float64]


class GridError(SlideInputError):
    """An object grid or pose that cannot describe a physical object."""


def check_pose(X: ArrayLike, name: str = 'pose') -> FloatArray:
    """Return a planar pose (..., 3) as floats; raise GridError on a wrong shape or NaN."""
    a = np.asarray(X, dtype=float)
    if a.shape[-1:] != (3,):
        raise GridError(f'{name} must be (x, y, theta) with shape (..., 3), got {a.shape}')
    if not np.all(np.isfinite(a)):
        raise GridError(f'{name} contains NaN or infinite values: {a}')
    return a


def rotation(theta: ArrayLike) -> FloatArray:
    """Rotation matrices (..., 2, 2) for angles (...) [rad]."""
    t = np.asarray(theta, dtype=float)
    c, s = np.cos(t), np.sin(t)
    return np.stack((np.stack((c, -s), -1), np.stack((s, c), -1)), -2)


def wrap_angle(theta: ArrayLike) -> FloatArray:
    """Angles wrapped to [-pi, pi)."""
    t = np.asarray(theta, dtype=float)
    return np.asarray((t + np.pi) % (2.0 * np.pi) - np.pi, dtype=float)


def to_world(X_WO: FloatArray, p_O: FloatArray) -> FloatArray:
    """Points p_O (..., 2) of frame O expressed in W, with O at X_WO (3,)."""
    return np.asarray(X_WO[:2] + p_O @ rotation(float(X_WO[2])).T)


def to_frame(X_WO: FloatArray, p_W: FloatArray) -> FloatArray:
    """Points p_W (..., 2) of W expressed in O, with O at X_WO (3,) (inverse of to_world)."""
    return np.asarray((p_W - X_WO[:2]) @ rotation(float(X_WO[2])))


def se2_distance(X_a: ArrayLike, X_b: ArrayLike, rho: float) -> FloatArray:
    """sqrt(dx^2 + dy^2 + (rho dtheta)^2) [m] between poses (..., 3); rho [m] weighs turns."""
    d = np.asarray(X_a, dtype=float) - np.asarray(X_b, dtype=float)
    return np.asarray(
        np.sqrt(d[..., 0] ** 2 + d[..., 1] ** 2 + (rho * wrap_angle(d[..., 2])) ** 2)
    )


def yaw_of_quaternion(x: float, y: float, z: float, w: float) -> float:
    """Yaw [rad] of a rotation quaternion: the angle of the rotated x axis in the xy plane.

    Exact for a rotation about z; for a tilted one it is the heading of its x axis (the
    convention of ROS' tf2 ``getYaw``). The one formula every message decoder uses. The
    quaternion's length does not matter, as for tf2 (a (0, 0, 0.5, 0.5) came out 0.785 rad,
    not pi/2); the zero quaternion, no rotation at all, gives 0. A unit one is taken as it
    is, so that recorded poses decode to the same bits as they always did."""
    norm2 = x * x + y * y + z * z + w * w
    if norm2 == 0.0:
        return 0.0
    if abs(norm2 - 1.0) > 1e-9:
        k = 1.0 / math.sqrt(norm2)
        x, y, z, w = x * k, y * k, z * k, w * k
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def quaternion_of_yaw(yaw: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of the rotation by ``yaw`` [rad] about z."""
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))
