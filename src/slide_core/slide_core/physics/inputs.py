"""What the simulators take and give: pushes, rollouts, and validated parameters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid


class PhysicsError(SlideInputError):
    """Bad input to the simulators (the message says which argument and why)."""


# -- inputs ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class WrenchPush:
    """An external force applied at a material point of the object (mode a).

    Attributes:
        p_OA: (T, 2) application point A during each step, object frame [m] (a fingertip's
            contact point may move along the object's edge); each on an occupied cell.
        f_W: (T, 2) force on the object in the world frame during each step [N].
        tau: (T,) extra torque about z during each step [N m] (zeros when not given).
        dt: step length [s].
    """

    p_OA: FloatArray
    f_W: FloatArray
    tau: FloatArray
    dt: float

    @classmethod
    def at_cell(
        cls, grid: Grid, cell: int, f_W: ArrayLike, dt: float, tau: ArrayLike | None = None
    ) -> WrenchPush:
        """A force applied at the centre of cell number ``cell``."""
        i = grid.check_cell(cell)
        return cls.create(grid, grid.p_OC[i], f_W, dt, tau)

    @classmethod
    def create(
        cls,
        grid: Grid,
        p_OA: ArrayLike,
        f_W: ArrayLike,
        dt: float,
        tau: ArrayLike | None = None,
    ) -> WrenchPush:
        """Validate and build a wrench push (raises PhysicsError on bad input).

        ``p_OA`` is one point (2,) for the whole push or one per step (T, 2).
        """
        f = np.asarray(f_W, dtype=float)
        if f.ndim != 2 or f.shape[1] != 2 or f.shape[0] < 1:
            raise PhysicsError(f'f_W must have shape (T>=1, 2), got {f.shape}')
        p = np.asarray(p_OA, dtype=float)
        if p.shape == (2,):
            p = np.tile(p, (f.shape[0], 1))
        if p.shape != (f.shape[0], 2) or not np.all(np.isfinite(p)):
            raise PhysicsError(
                f'p_OA must be a finite point (2,) or one per step ({f.shape[0]}, 2), '
                f'got {p.shape}'
            )
        for point in np.unique(p, axis=0):
            if contact_cell(grid, point) < 0:
                raise PhysicsError(
                    f'the force is applied at {point.tolist()} (object frame), which is on no '
                    'cell of the object: give a point on an occupied cell'
                )
        if not np.all(np.isfinite(f)):
            raise PhysicsError('f_W contains NaN or infinite values')
        t = np.zeros(f.shape[0]) if tau is None else np.asarray(tau, dtype=float)
        if t.shape != (f.shape[0],) or not np.all(np.isfinite(t)):
            raise PhysicsError(f'tau must be finite with shape ({f.shape[0]},)')
        return cls(p, f, t, check_dt(dt))

    @property
    def steps(self) -> int:
        return int(self.f_W.shape[0])


@dataclass(frozen=True, eq=False)
class FingertipPush:
    """A kinematic fingertip (a disc) whose centre follows a path (mode b).

    Attributes:
        p_WF: (T+1, 2) fingertip centre at the start of each step and at the end [m].
        radius: fingertip radius [m].
        mu: Coulomb friction between fingertip and object [-].
        dt: step length [s].
    """

    p_WF: FloatArray
    radius: float
    mu: float
    dt: float

    @classmethod
    def create(cls, p_WF: ArrayLike, radius: float, mu: float, dt: float) -> FingertipPush:
        p = np.asarray(p_WF, dtype=float)
        if p.ndim != 2 or p.shape[1] != 2 or p.shape[0] < 2:
            raise PhysicsError(f'p_WF must have shape (T+1>=2, 2), got {p.shape}')
        if not np.all(np.isfinite(p)):
            raise PhysicsError('p_WF contains NaN or infinite values')
        if not (np.isfinite(radius) and radius > 0):
            raise PhysicsError(f'fingertip radius must be positive [m], got {radius}')
        if not (np.isfinite(mu) and mu >= 0):
            raise PhysicsError(f'fingertip friction must be >= 0, got {mu}')
        return cls(p, float(radius), float(mu), check_dt(dt))

    @classmethod
    def straight(
        cls,
        p_WF0: ArrayLike,
        direction_W: ArrayLike,
        travel: float,
        speed: float,
        dt: float,
        radius: float,
        mu: float,
        dwell: float = 0.0,
    ) -> FingertipPush:
        """A straight push from ``p_WF0`` along ``direction_W`` for ``travel`` metres at
        ``speed`` m/s, then ``dwell`` seconds standing still (the object may slide on)."""
        d = np.asarray(direction_W, dtype=float)
        norm = float(np.linalg.norm(d))
        if d.shape != (2,) or not np.isfinite(norm) or norm == 0:
            raise PhysicsError(f'direction_W must be a non-zero (2,) vector, got {d}')
        if not (travel > 0 and speed > 0 and dwell >= 0):
            raise PhysicsError('travel and speed must be positive, dwell non-negative')
        dt = check_dt(dt)
        n_move = max(1, int(round(travel / speed / dt)))
        n_dwell = int(round(dwell / dt))
        s = np.concatenate((np.linspace(0.0, travel, n_move + 1), np.full(n_dwell, travel)))
        p = np.asarray(p_WF0, dtype=float)[None, :] + s[:, None] * (d / norm)[None, :]
        return cls.create(p, radius, mu, dt)

    @property
    def steps(self) -> int:
        return int(self.p_WF.shape[0] - 1)


Push = WrenchPush | FingertipPush


@dataclass(frozen=True, eq=False)
class Rollout:
    """A simulated push for a batch of K hypotheses.

    Attributes:
        X_WO: (K, T+1, 3) object poses at the step boundaries.
        V_WBcm: (K, T+1, 3) twist of the body: velocity of its centre of mass Bcm in the world
            frame [m/s] and spin [rad/s].
        f_push_W: (K, T, 2) mean force the pusher applied on the object during each step
            [N] (the force an F/T sensor at the pusher measures, with opposite sign).
        general_steps: number of (hypothesis, step) pairs that needed the general QP
            (:func:`slide_core.physics.mlcp.solve_mlcp`): the compiled active set of
            :mod:`slide_core.physics.kernels` did not settle them (the reference simulator
            counts every step).
    """

    X_WO: FloatArray
    V_WBcm: FloatArray
    f_push_W: FloatArray
    general_steps: int


# -- validation -----------------------------------------------------------------------------
def check_dt(dt: float) -> float:
    if not (np.isfinite(dt) and 0 < dt <= 0.1):
        raise PhysicsError(f'dt must be a time step in (0, 0.1] s, got {dt}')
    return float(dt)


def check_params(
    grid: Grid, mass: ArrayLike, friction: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Validate per-cell masses and frictions; return them as (K, n) arrays.

    Accepts (n,) for one hypothesis or (K, n) for a batch. Raises PhysicsError on a shape
    mismatch, NaN, a negative value, or a hypothesis whose total mass is zero.
    """
    m = np.asarray(mass, dtype=float)
    mu = np.asarray(friction, dtype=float)
    for name, a in (('mass', m), ('friction', mu)):
        if a.ndim not in (1, 2) or a.shape[-1] != grid.n:
            raise PhysicsError(
                f'{name} must have shape (n,) or (K, n) with n = {grid.n} cells, got {a.shape}'
            )
        if not np.all(np.isfinite(a)):
            raise PhysicsError(f'{name} contains NaN or infinite values')
        if np.any(a < 0):
            raise PhysicsError(f'{name} must be non-negative, got min {a.min():.3g}')
    m2, mu2 = np.atleast_2d(m), np.atleast_2d(mu)
    if m2.shape[0] != mu2.shape[0]:
        if 1 not in (m2.shape[0], mu2.shape[0]):  # (a raw numpy broadcast error)
            raise PhysicsError(
                f'{m2.shape[0]} mass maps and {mu2.shape[0]} friction maps: give as many of '
                'each, or one of either'
            )
        m2, mu2 = np.broadcast_arrays(m2, mu2)
    if np.any(m2.sum(axis=1) <= 0):
        raise PhysicsError('every hypothesis needs a positive total mass')
    return np.ascontiguousarray(m2, dtype=float), np.ascontiguousarray(mu2, dtype=float)


def contact_cell(grid: Grid, p_OA: FloatArray) -> int:
    """Number of the cell whose square contains the point ``p_OA`` (object frame), or -1."""
    half = grid.cell_size / 2.0 * (1.0 + 1e-9)
    inside = np.all(np.abs(grid.p_OC - p_OA[None, :]) <= half, axis=1)
    hits = np.nonzero(inside)[0]
    return int(hits[0]) if hits.size else -1
