r"""Planar grid-of-cells physics: a pushed object sliding on a table, with mass and friction
gradients.

The object is a grid of ``n`` square cells (:class:`slide_core.geometry.Grid`) rigidly attached
to each other; cell ``i`` has mass ``m_i`` [kg] and Coulomb friction ``mu_i`` [-] against
the table. Two simulators share one discrete model (below): the *reference* one
(:mod:`slide_core.physics_reference`) keeps the paper's per-cell 3-DOF state and weld
constraints; the *fast* one here reduces the welded cells to one rigid body in SE(2),
vectorised over a batch of (mass, friction) hypotheses.

The discrete model (a consistent version of Song & Boularias 2020, Fig. 2)
-------------------------------------------------------------------------
Time step ``h`` [s]; semi-implicit Euler: velocities ``v+`` from the contact problem, then
positions ``x+ = x + h v+``. Per step:

1. **Impulses, not forces.** The paper bounds the friction magnitudes ``lambda_f`` (an
   impulse, N s) by ``mu diag(M)`` (kg, or kg m^2 for the rotational entries): the units
   do not match and the bound lacks gravity and the step. Here a cell's support friction
   impulse is bounded by ``L_i = mu_i m_i g h`` (flat table, normal force ``m_i g``).
2. **Rotation rows.** The paper gives each cell a friction row on its own rotation, bounded
   like the translational one. We keep that row, with the limit a uniformly loaded square
   patch of edge ``w`` really has against spinning about its centre:
   ``L_tau,i = k_s w mu_i m_i g h`` with ``k_s = (sqrt(2) + ln(1 + sqrt(2))) / 6 ~ 0.383``
   (the mean distance of the square's points from its centre, over ``w``). The support
   friction of a cell is then its centre-point Coulomb force plus this torsion: exact for
   pure spin of a cell and pure translation, an approximation when both combine that
   vanishes as cells get smaller. Cell inertia is ``I_i = m_i w^2 / 6`` as in the paper.
3. **Welds.** The paper's ``J_e`` has two rows per adjacent pair, which pins the pair like
   a hinge (a 2x2 block of cells would then be a four-bar linkage, not rigid). We weld each
   pair with three rows (equal spin, equal velocity of the shared edge's midpoint) over a
   spanning tree of the adjacency graph: exactly ``3(n-1)`` independent rows, so the cells
   move as one rigid body and ``J_e M^-1 J_e^T`` is invertible. Loop-closing pairs are
   implied by the tree and left out.
4. **Friction directions (J_f from the previous velocity).** As in the paper, a sliding
   cell's friction acts along ``-d_i`` with ``d_i`` the direction of its velocity at the
   start of the step, magnitude ``lambda_i in [0, L_i]``, complementary to the cell still
   moving forward along ``d_i`` (Fig. 2: it can stop the cell along ``d_i`` but never push
   it backwards). The paper leaves ``d_i`` undefined for a cell at rest. A cell whose speed
   is below ``MOVING_SPEED`` gets the polygonal Coulomb cone of Stewart and Trinkle instead:
   ``N_PYRAMID`` directions fixed to the cell, the sum of their magnitudes bounded by
   ``L_i``. Static friction (sticking) is thereby exact up to the polygon, which is what a
   push below the friction limit needs. Rotation rows likewise: one row against the
   previous spin, or +-1 when not spinning.
5. **Complementarity** as in Fig. 2, generalised to groups (see :mod:`slide_core.mlcp`).
   The problem is the KKT system of
   ``min_v 1/2 |v - v*|_M^2 + sum_groups L_g max(0, max_r g_r . v)`` subject to the
   welds, whose solution velocity is unique.
6. **Pushing.** (a) A given external force ``f_W`` (and optional torque) at a material point
   of the object (the F/T-measured push the identification uses), added to ``v*``.
   (b) A kinematic fingertip: a disc of radius ``r_F`` whose centre follows a given path;
   unilateral contact with the object's nearest cell square (position-stabilised so the
   gap after the step is non-negative) with Coulomb friction ``mu_F`` (two tangential
   rows, limit ``mu_F lambda_n``).

Sign conventions: frames and angles as in :mod:`slide_core.geometry` (z up, counter-clockwise
positive). Generalised coordinates per cell and for the rigid body are ``(x, y, theta)``
(the paper lists the mass diagonal as ``(I, M, M)`` but the state as ``(x, y, theta)``;
we use ``(x, y, theta)`` for both).

The rigid reduction
-------------------
Welded cells move with one twist; with the body frame B at the cells' (unweighted)
centroid G with the object's orientation, cell offsets ``r_i`` are constant and the mass
matrix in B is ``M_B = sum_i m_i (J_i^T J_i + e_3 e_3^T w^2/6)`` with
``J_i = [[1, 0, -r_iy], [0, 1, r_ix]]``; the torsion rows of all cells share one direction
and merge into one group. A step is solved in B at the orientation at the start of the
step, so nothing in it depends on the orientation except the applied force. When every
cell and the spin were moving and all friction stays saturated (the usual case while
sliding), the solution is explicit:
``v+ = v + M_B^-1 (P - sum_i L_i J_i^T d_i - L_tau s e_3)``, checked against the
complementarity conditions; otherwise (breakaway, stopping, a fingertip contact that
sticks or slips in a way the explicit modes do not cover) the same MLCP as the reference
is solved. Positions are integrated at the centre of mass C, and the twist carried from one
step to the next is that of C (linear momentum), so a body sliding freely keeps its
momentum exactly whatever it spins; the reference simulator's re-projection onto the
rigid shape keeps the same two quantities (mass-weighted mean position and momentum),
which makes the two simulators agree to round-off.

Gradients
---------
For wrench-driven pushes the loss gradients with respect to every ``m_i`` and ``mu_i`` come
from the optimality conditions of each step's MLCP (the paper's section V), generalised:
on the active set of the solution (rows with ``lambda > 0``, groups at their limit) the
KKT conditions are linear equations, and differentiating them gives the step's Jacobians
with respect to the parameters and to the state entering the step. In the explicit case
this is the paper's ``W_M``/``W_mu`` formula with ``X = M^-1`` of the rigid body. Unlike
the paper (which keeps ``J_f`` constant because it uses observed states), a rollout loss
also differentiates the friction directions: ``d d_i / d v = (I - d_i d_i^T) / |u_i|``.
Forward-mode sensitivities are propagated through the rollout.

Where the model is not differentiable the gradient is one-sided, never NaN:
a cell at exactly zero friction or mass differentiates as if it were infinitesimally
positive; a step whose solution sits on a switching point (a row with zero impulse and zero
velocity, a group exactly at its limit with zero slip) uses the active set the solver
returned (an element of the generalised Jacobian); a sticking step (velocity zero with
friction inside its limits) has zero sensitivity, which is its true derivative; a cell or
spin below the moving threshold uses the fixed pyramid directions (derivative of the
directions zero).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import lsq_linear

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid, check_pose, rotation
from slide_core.mlcp import Fingertip, MlcpSolution, solve_mlcp

GRAVITY = 9.81
"""Standard gravity [m/s^2]."""

SPIN_ARM = (math.sqrt(2.0) + math.log(1.0 + math.sqrt(2.0))) / 6.0
"""Spin friction lever of a uniformly loaded square, as a fraction of its edge (~0.3826)."""

N_PYRAMID = 8
"""Directions of the polygonal friction cone of a cell at rest."""

MOVING_SPEED = 1e-6
"""Below this speed [m/s] a cell counts as at rest (its friction direction is undefined)."""

_S = np.array([[0.0, -1.0], [1.0, 0.0]])  # 90 degree rotation: S @ r = z x r


class PhysicsError(SlideInputError):
    """Bad input to the simulators (the message says which argument and why)."""


# -- inputs ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class WrenchPush:
    """An external force applied at a material point of the object (mode a).

    Attributes:
        p_OC: (T, 2) application point during each step, object frame [m] (a fingertip's
            contact point may move along the object's edge); each on an occupied cell.
        f_W: (T, 2) force on the object in the world frame during each step [N].
        tau: (T,) extra torque about z during each step [N m] (zeros when not given).
        dt: step length [s].
    """

    p_OC: FloatArray
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
        p_OC: ArrayLike,
        f_W: ArrayLike,
        dt: float,
        tau: ArrayLike | None = None,
    ) -> WrenchPush:
        """Validate and build a wrench push (raises PhysicsError on bad input).

        ``p_OC`` is one point (2,) for the whole push or one per step (T, 2).
        """
        f = np.asarray(f_W, dtype=float)
        if f.ndim != 2 or f.shape[1] != 2 or f.shape[0] < 1:
            raise PhysicsError(f'f_W must have shape (T>=1, 2), got {f.shape}')
        p = np.asarray(p_OC, dtype=float)
        if p.shape == (2,):
            p = np.tile(p, (f.shape[0], 1))
        if p.shape != (f.shape[0], 2) or not np.all(np.isfinite(p)):
            raise PhysicsError(
                f'p_OC must be a finite point (2,) or one per step ({f.shape[0]}, 2), '
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
        return cls(p, f, t, _check_dt(dt))

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
        return cls(p, float(radius), float(mu), _check_dt(dt))

    @classmethod
    def straight(
        cls,
        p_WF0: ArrayLike,
        direction_W: ArrayLike,
        travel: float,
        speed: float,
        dt: float,
        radius: float = 0.008,
        mu: float = 0.3,
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
        dt = _check_dt(dt)
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
        V_WC: (K, T+1, 3) twist of the body: velocity of its centre of mass C in the world
            frame [m/s] and spin [rad/s].
        f_push_W: (K, T, 2) mean force the pusher applied on the object during each step
            [N] (the force an F/T sensor at the pusher measures, with opposite sign).
        general_steps: number of (hypothesis, step) pairs that needed the general MLCP.
    """

    X_WO: FloatArray
    V_WC: FloatArray
    f_push_W: FloatArray
    general_steps: int


# -- validation -----------------------------------------------------------------------------
def _check_dt(dt: float) -> float:
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
        m2, mu2 = np.broadcast_arrays(m2, mu2)
    if np.any(m2.sum(axis=1) <= 0):
        raise PhysicsError('every hypothesis needs a positive total mass')
    return np.ascontiguousarray(m2, dtype=float), np.ascontiguousarray(mu2, dtype=float)


def contact_cell(grid: Grid, p_OC: FloatArray) -> int:
    """Number of the cell whose square contains ``p_OC`` (object frame), or -1."""
    half = grid.cell_size / 2.0 * (1.0 + 1e-9)
    inside = np.all(np.abs(grid.p_OC - p_OC[None, :]) <= half, axis=1)
    hits = np.nonzero(inside)[0]
    return int(hits[0]) if hits.size else -1


# -- the rigid body -------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class RigidModel:
    """Constant per-grid quantities of the rigid reduction (body frame B at centroid G).

    Attributes:
        p_OG: (2,) centroid of the cells in the object frame.
        r_B: (n, 2) cell centres relative to G.
        J: (n, 2, 3) cell velocity Jacobians ``u_i = J_i nu``.
        Q: (n, 3, 3) per-unit-mass inertia contributions, ``M_B = sum m_i Q_i``.
    """

    grid: Grid
    p_OG: FloatArray
    r_B: FloatArray
    J: FloatArray
    Q: FloatArray

    @classmethod
    def of(cls, grid: Grid) -> RigidModel:
        p_OG = grid.p_OC.mean(axis=0)
        r = grid.p_OC - p_OG
        n = grid.n
        J = np.zeros((n, 2, 3))
        J[:, 0, 0] = 1.0
        J[:, 1, 1] = 1.0
        J[:, 0, 2] = -r[:, 1]
        J[:, 1, 2] = r[:, 0]
        Q = np.einsum('nai,naj->nij', J, J)
        Q[:, 2, 2] += grid.cell_size**2 / 6.0
        return cls(grid, p_OG, r, J, Q)

    def com(self, mass: FloatArray) -> FloatArray:
        """(K, 2) centres of mass relative to G (body frame) for masses (K, n)."""
        return np.asarray(mass @ self.r_B / mass.sum(axis=1, keepdims=True), dtype=float)

    def mass_matrix(self, mass: FloatArray) -> FloatArray:
        """(K, 3, 3) body-frame mass matrices for masses (K, n)."""
        return np.asarray(np.einsum('kn,nij->kij', mass, self.Q), dtype=float)

    def point_jacobian(self, p_B: FloatArray) -> FloatArray:
        """(..., 2, 3) velocity Jacobian of body points p_B (..., 2) (relative to G)."""
        J = np.zeros(p_B.shape[:-1] + (2, 3))
        J[..., 0, 0] = 1.0
        J[..., 1, 1] = 1.0
        J[..., 0, 2] = -p_B[..., 1]
        J[..., 1, 2] = p_B[..., 0]
        return J

    def closest_point(self, p_BF: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Closest object points (K, 2) to fingertip centres p_BF (K, 2), and distances."""
        half = self.grid.cell_size / 2.0
        d = p_BF[:, None, :] - self.r_B[None, :, :]
        q = self.r_B[None, :, :] + np.clip(d, -half, half)
        dist = np.linalg.norm(p_BF[:, None, :] - q, axis=2)
        k = np.argmin(dist, axis=1)
        idx = np.arange(p_BF.shape[0])
        return q[idx, k], dist[idx, k]


def _limits(
    grid: Grid, mass: FloatArray, friction: FloatArray, h: float
) -> tuple[FloatArray, FloatArray]:
    """Per-cell friction impulse limits (K, n) and merged torsion limits (K,)."""
    L = friction * mass * GRAVITY * h
    L_tau = SPIN_ARM * grid.cell_size * L.sum(axis=1)
    return L, L_tau


# Modes of the spin friction in an explicit step.
# (A spinning body's spin friction acts against the previous spin; if the spin reverses
# within the step that row carries no impulse: _SPIN_FREE.)
_SPIN_SLIDING, _SPIN_STUCK, _SPIN_POS, _SPIN_NEG, _SPIN_FREE = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class _StepResult:
    """One step for K hypotheses.

    nu: (K, 3) body twist after the step. impulse_B: (K, 2) pusher impulse on the object
    in the body frame [N s]. general: (K,) True where the general problem was solved.
    pinned: (K,) the cell held at zero velocity by static friction, or -1.
    spin_mode: (K,) one of the _SPIN_* modes (explicit steps).
    solutions: general solutions by hypothesis: (rows G, groups E, limits, cell of each
    row (-1: spin, -2: fingertip), solution), kept when asked for (gradients).
    vertex_dirs: (K, n, 2) for cells that broke away from rest in an explicit step, the
    polygon vertex their friction pushes against (zeros for other cells).
    stopped: (K,) the body came to rest within the step (friction absorbed its momentum).
    """

    nu: FloatArray
    impulse_B: FloatArray
    general: NDArray[np.bool_]
    pinned: NDArray[np.int64]
    spin_mode: NDArray[np.int64]
    solutions: dict[
        int, tuple[FloatArray, FloatArray, FloatArray, NDArray[np.int64], MlcpSolution]
    ]
    vertex_dirs: FloatArray
    stopped: NDArray[np.bool_]


def polygon_directions(angle: float) -> FloatArray:
    """(N_PYRAMID, 2) unit directions of a resting cell's friction polygon, the first at
    ``angle`` [rad]."""
    a = angle + 2.0 * np.pi * np.arange(N_PYRAMID) / N_PYRAMID
    return np.column_stack((np.cos(a), np.sin(a)))


def polygon_angles(along: FloatArray) -> FloatArray:
    """Orientations (K,) of resting cells' friction polygons from directions (K, 2).

    The caller passes, per hypothesis, the fingertip's push direction when it touches the
    object, else the applied force. A vertex points along it (0 where it is zero: the
    frame's x axis): along that direction the polygon's limit equals the Coulomb limit
    exactly, so a straight push below the friction limit sticks and one above it breaks
    away, as with a true cone.
    """
    return np.asarray(
        np.where(np.any(along != 0.0, axis=1), np.arctan2(along[:, 1], along[:, 0]), 0.0),
        dtype=float,
    )


def _general_rows(
    model: RigidModel,
    nu: FloatArray,
    L: FloatArray,
    L_tau: float,
    angle: float,
) -> tuple[FloatArray, FloatArray, FloatArray, NDArray[np.int64]]:
    """Support friction rows of one hypothesis at body twist ``nu`` (3,).

    Returns G (r, 3), E (r, g), L_g (g,) and the cell (or -1 for torsion) of each row.
    """
    u = model.J @ nu
    speed = np.linalg.norm(u, axis=1)
    rows: list[FloatArray] = []
    group: list[int] = []
    cell: list[int] = []
    limits: list[float] = []
    for i in range(model.grid.n):
        if L[i] <= 0.0:
            continue
        g_id = len(limits)
        limits.append(float(L[i]))
        if speed[i] > MOVING_SPEED:
            dirs = (u[i] / speed[i])[None, :]
        else:
            dirs = polygon_directions(angle)
        for d in dirs:
            rows.append(model.J[i].T @ d)
            group.append(g_id)
            cell.append(i)
    if L_tau > 0.0:
        g_id = len(limits)
        limits.append(float(L_tau))
        spin_moving = abs(nu[2]) * model.grid.cell_size > MOVING_SPEED
        for s in [math.copysign(1.0, nu[2])] if spin_moving else [1.0, -1.0]:
            rows.append(np.array([0.0, 0.0, s]))
            group.append(g_id)
            cell.append(-1)
    G = np.array(rows).reshape(-1, 3)
    E = np.zeros((G.shape[0], len(limits)))
    E[np.arange(G.shape[0]), group] = 1.0
    return G, E, np.array(limits), np.array(cell, dtype=np.int64)


def _stops(
    model: RigidModel,
    M: FloatArray,
    nu: FloatArray,
    P: FloatArray,
    g: FloatArray,
    L: FloatArray,
    L_tau: float,
    omega: float,
) -> bool:
    """Whether friction rows g (n, 3) with impulses in [0, L] and the spin row can absorb
    the momentum M nu + P exactly (then the body stops within the step)."""
    cols = [g[i] for i in range(len(L)) if L[i] > 0.0]
    lo = [0.0] * len(cols)
    hi = [float(v) for v in L if v > 0.0]
    if L_tau > 0.0:
        cols.append(np.array([0.0, 0.0, 1.0]))
        spinning = abs(omega) * model.grid.cell_size > MOVING_SPEED
        if spinning:  # one row against the previous spin
            lo.append(min(0.0, math.copysign(L_tau, omega)))
            hi.append(max(0.0, math.copysign(L_tau, omega)))
        else:
            lo.append(-L_tau)
            hi.append(L_tau)
    if not cols:
        return False
    A = np.array(cols).T  # (3, m)
    b = M @ nu + P
    sol = lsq_linear(A, b, bounds=(np.array(lo), np.array(hi)), method='bvls')
    scale = 1e-12 + float(np.abs(b).max())
    return bool(np.abs(A @ sol.x - b).max() <= 1e-9 * scale)


def _polygon_contains(lam: FloatArray, limit: FloatArray, angle: FloatArray) -> NDArray[np.bool_]:
    """Whether impulses lam (K, 2) lie in friction polygons of radius ``limit`` (K,)
    turned by ``angle`` (K,)."""
    a = np.pi / N_PYRAMID
    phi = angle[:, None] + a + 2 * a * np.arange(N_PYRAMID)[None, :]  # facet normals
    proj = lam[:, :1] * np.cos(phi) + lam[:, 1:] * np.sin(phi)
    bound = limit * math.cos(a) * (1 + 1e-9) + 1e-15
    return np.asarray(np.all(proj <= bound[:, None], axis=1), dtype=bool)


def _fast_step(
    model: RigidModel,
    M: FloatArray,
    M_inv: FloatArray,
    L: FloatArray,
    L_tau: FloatArray,
    nu: FloatArray,
    P: FloatArray,
    finger: tuple[FloatArray, FloatArray, float, float, float] | None,
    keep_solutions: bool = False,
) -> _StepResult:
    """One step for K hypotheses in body coordinates.

    nu (K, 3) twist before the step, P (K, 3) applied generalised impulse (wrench mode);
    finger: (p_BF (K, 2) fingertip centre at the step start, v_BF (K, 2) its velocity,
    radius, mu_F, h) in body coordinates, or None.

    The step problem is solved by trying its likely active sets explicitly: every moving
    cell's friction saturated along its previous direction, at most one resting cell
    held by static friction (a pivot), the spin friction sliding, stuck or saturated, the
    fingertip separate, sticking or slipping either way. The first candidate that meets
    all complementarity conditions is the solution (the problem's velocity solution is
    unique); hypotheses with none go to the general solver.
    """
    K = nu.shape[0]
    w = model.grid.cell_size
    tol = 1e-12
    u = np.einsum('nij,kj->kni', model.J, nu)  # (K, n, 2)
    speed = np.linalg.norm(u, axis=2)
    active = L > 0.0
    resting = (speed <= MOVING_SPEED) & active
    n_rest = resting.sum(axis=1)
    pinned = np.where(n_rest == 1, np.argmax(resting, axis=1), -1)
    d = u / np.where(speed > 0.0, speed, 1.0)[..., None]
    g = np.einsum('nij,kni->knj', model.J, d)  # (K, n, 3) rows J_i^T d_i
    sliding = active & ~resting
    nu_0 = nu + np.einsum('kij,kj->ki', M_inv, P - np.einsum('kn,knj->kj', L * sliding, g))
    spinning = np.abs(nu[:, 2]) * w > MOVING_SPEED

    nu_new = np.zeros((K, 3))
    impulse_B = np.zeros((K, 2))
    spin_mode = np.full(K, -1, dtype=np.int64)
    solved = np.zeros(K, dtype=bool)

    touching = np.zeros(K, dtype=bool)
    if finger is not None:
        p_BF, v_BF, radius, mu_F, h = finger
        q, dist = model.closest_point(p_BF)
        gap = dist - radius
        n_out = (p_BF - q) / np.where(dist > 0, dist, 1.0)[:, None]
        n_out[dist <= 0] = np.array([1.0, 0.0])
        t_dir = n_out @ _S.T
        Jq = model.point_jacobian(q)
        g_n = np.einsum('kij,ki->kj', Jq, n_out)
        g_t = np.einsum('kij,ki->kj', Jq, t_dir)
        o_n = -(np.einsum('ki,ki->k', n_out, v_BF) + gap / h)
        vt_F = np.einsum('ki,ki->k', t_dir, v_BF)
        touching = gap < h * np.linalg.norm(v_BF, axis=1) + 1e-3
    # Polygon orientation per hypothesis: along the fingertip's push, else the force.
    along = P[:, :2].copy()
    if finger is not None:
        along[touching] = -n_out[touching]
    angles = polygon_angles(along)
    # A body at rest with nothing acting on it (no applied impulse, a fingertip that does
    # not reach it during this step) stays at rest.
    reached = touching & (o_n > 0.0) if finger is not None else touching
    idle = (n_rest == active.sum(axis=1)) & ~spinning & np.all(P == 0.0, axis=1) & ~reached
    solved |= idle
    spin_mode[idle] = _SPIN_STUCK

    spin_modes = [_SPIN_SLIDING, _SPIN_FREE, _SPIN_STUCK, _SPIN_POS, _SPIN_NEG]
    contact_modes = ['none', 'stick', 'slide+', 'slide-'] if finger is not None else ['none']
    phi = angles[:, None] + 2.0 * np.pi * np.arange(N_PYRAMID)[None, :] / N_PYRAMID
    polygons = np.stack((np.cos(phi), np.sin(phi)), axis=2)  # (K, N_PYRAMID, 2)
    vertex_dirs = np.zeros((K, model.grid.n, 2))

    def enumerate_modes(
        eligible: NDArray[np.bool_],
        nu_0: FloatArray,
        g: FloatArray,
        sliding: NDArray[np.bool_],
        pinned: NDArray[np.int64],
        vertex: NDArray[np.bool_],
    ) -> FloatArray:
        """Try the active sets on the eligible hypotheses; record the first that holds.

        Returns the candidate twist of the first spin mode tried for each hypothesis
        (a guess for the next breakaway round).
        """
        first = np.full((K, 3), np.nan)
        for sm in spin_modes:
            for cm in contact_modes:
                todo = eligible & ~solved
                if sm in (_SPIN_SLIDING, _SPIN_FREE):
                    todo &= spinning
                elif sm != _SPIN_STUCK:
                    todo &= ~spinning
                if cm != 'none':
                    todo &= touching
                if not todo.any():
                    continue
                k = np.nonzero(todo)[0]
                # Fixed spin impulse (positive lam_tau opposes positive spin).
                if sm == _SPIN_SLIDING:
                    lam_tau = L_tau[k] * np.sign(nu[k, 2])
                elif sm == _SPIN_POS:
                    lam_tau = L_tau[k]
                elif sm == _SPIN_NEG:
                    lam_tau = -L_tau[k]
                else:
                    lam_tau = np.zeros(k.size)
                nu_f = nu_0[k] - M_inv[k][:, :, 2] * lam_tau[:, None]
                # Equality constraints C nu' = b with impulses -D^T Lambda.
                C_rows: list[FloatArray] = []
                D_rows: list[FloatArray] = []
                b_rows: list[FloatArray] = []
                pin = pinned[k] >= 0
                Jp = model.J[np.maximum(pinned[k], 0)] * pin[:, None, None]  # (k, 2, 3)
                C_rows += [Jp[:, 0], Jp[:, 1]]
                D_rows += [Jp[:, 0], Jp[:, 1]]
                b_rows += [np.zeros(k.size), np.zeros(k.size)]
                e3 = np.tile(np.array([0.0, 0.0, 1.0]), (k.size, 1)) * (sm == _SPIN_STUCK)
                C_rows.append(e3)
                D_rows.append(e3)
                b_rows.append(np.zeros(k.size))
                if cm == 'stick':
                    C_rows += [g_n[k], g_t[k]]
                    D_rows += [g_n[k], g_t[k]]
                    b_rows += [-o_n[k], vt_F[k]]
                elif cm.startswith('slide'):
                    sigma = 1.0 if cm == 'slide+' else -1.0
                    C_rows.append(g_n[k])
                    D_rows.append(g_n[k] + sigma * finger[3] * g_t[k])  # type: ignore[index]
                    b_rows.append(-o_n[k])
                Cm = np.stack(C_rows, axis=1)  # (k, q, 3)
                Dm = np.stack(D_rows, axis=1)
                bm = np.stack(b_rows, axis=1)
                A = np.einsum('kqi,kij,kpj->kqp', Cm, M_inv[k], Dm)
                # Unused constraint slots are all-zero rows: make them identity equations.
                unused = np.all(Cm == 0.0, axis=2)
                A = A + np.einsum('kq,qp->kqp', unused.astype(float), np.eye(A.shape[1]))
                rhs = np.einsum('kqi,ki->kq', Cm, nu_f) - bm
                regular = np.abs(np.linalg.det(A)) > 1e-30
                A[~regular] = np.eye(A.shape[1])
                Lam = np.linalg.solve(A, rhs[..., None])[..., 0]
                cand = nu_f - np.einsum('kij,kqj,kq->ki', M_inv[k], Dm, Lam)
                unset = np.isnan(first[k, 0])
                first[k[unset]] = cand[unset]
                ok = regular.copy()
                # Sliding cells keep moving forward along their previous direction...
                fwd = np.einsum('knj,kj->kn', g[k], cand)
                ok &= np.all((fwd >= -tol) | ~sliding[k] | vertex[k], axis=1)
                # ... cells breaking away slide against the polygon vertex they push on.
                if vertex[k].any():
                    u1 = np.einsum('nij,kj->kni', model.J, cand)
                    dots = np.einsum('kni,kji->knj', u1, polygons[k])
                    own = np.einsum('kni,kni->kn', u1, vertex_dirs[k])
                    speed1 = np.linalg.norm(u1, axis=2)
                    holds = (own >= dots.max(axis=2) - 1e-9 * speed1) & (speed1 > MOVING_SPEED)
                    ok &= np.all(holds | ~vertex[k], axis=1)
                # A pinned cell's static friction stays inside its polygon.
                ok &= ~pin | _polygon_contains(
                    Lam[:, :2], L[k, np.maximum(pinned[k], 0)], angles[k]
                )
                om = cand[:, 2]
                if sm == _SPIN_SLIDING:
                    ok &= np.sign(nu[k, 2]) * om >= -tol
                elif sm == _SPIN_FREE:
                    ok &= np.sign(nu[k, 2]) * om <= tol
                elif sm == _SPIN_STUCK:
                    lam_tau = Lam[:, 2]
                    # Spinning: the single row against the previous spin can only slow it.
                    signed = np.where(spinning[k], np.sign(nu[k, 2]) * lam_tau, np.abs(lam_tau))
                    ok &= (signed >= -1e-15) & (signed <= L_tau[k] * (1 + 1e-9) + 1e-15)
                elif sm == _SPIN_POS:
                    ok &= om >= -tol
                else:
                    ok &= om <= tol
                imp = np.zeros((k.size, 2))
                if finger is not None:
                    if cm == 'none':
                        gap_rate = -(np.einsum('ki,ki->k', g_n[k], cand) + o_n[k])
                        ok &= ~touching[k] | (gap_rate >= -tol)
                    else:
                        ln = Lam[:, 3]
                        ok &= ln >= -tol
                        if cm == 'stick':
                            lt = Lam[:, 4]
                            ok &= np.abs(lt) <= finger[3] * ln + tol
                        else:
                            lt = sigma * finger[3] * ln
                            slip = np.einsum('ki,ki->k', g_t[k], cand) - vt_F[k]
                            ok &= sigma * slip >= -tol
                        imp = -(n_out[k] * ln[:, None] + t_dir[k] * lt[:, None])
                good = k[ok]
                nu_new[good] = cand[ok]
                impulse_B[good] = imp[ok]
                spin_mode[good] = sm
                solved[good] = True
        return first

    no_vertex = np.zeros((K, model.grid.n), dtype=bool)
    enumerate_modes((n_rest <= 1) & ~solved, nu_0, g, sliding, pinned, no_vertex)
    # Breakaway: resting cells (not held) slide against the polygon vertex that their
    # velocity selects; guess it from the motion without them (with a fingertip and no
    # applied force, the first vertex: along the push), then from each attempt.
    breaking = ~solved & (n_rest >= 1)
    guess = nu_0.copy()
    vertex_out = np.zeros((K, model.grid.n, 2))
    stopped = np.zeros(K, dtype=bool)
    for _ in range(4):
        if not breaking.any():
            break
        u_g = np.einsum('nij,kj->kni', model.J, guess)
        pick = np.argmax(np.einsum('kni,kji->knj', u_g, polygons), axis=2)  # (K, n)
        vertex_dirs[:] = (
            np.take_along_axis(polygons[:, None, :, :], pick[..., None, None], 2)[:, :, 0]
            * resting[..., None]
        )
        g_b = np.where(resting[..., None], np.einsum('nij,kni->knj', model.J, vertex_dirs), g)
        nu_0b = nu + np.einsum('kij,kj->ki', M_inv, P - np.einsum('kn,knj->kj', L * active, g_b))
        before = solved.copy()
        first = enumerate_modes(breaking, nu_0b, g_b, active, np.full(K, -1), resting)
        newly = solved & ~before
        vertex_out[newly] = vertex_dirs[newly]
        breaking &= ~solved
        guess = np.where(np.isnan(first), guess, first)
    pinned = np.where(np.any(vertex_out != 0.0, axis=(1, 2)), -1, pinned)

    # Coming to rest: with every cell sliding (one friction row each, impulse in [0, L_i])
    # and no fingertip, the body stops within the step if friction impulses within their
    # limits can absorb its momentum. Any such impulses satisfy every complementarity
    # condition with v' = 0, and the velocity solution is unique: a bounded least-squares
    # feasibility check decides it.
    for j in np.nonzero(~solved & (n_rest == 0) & ~touching)[0]:
        stop = _stops(model, M[j], nu[j], P[j], g[j], L[j] * sliding[j], float(L_tau[j]), nu[j, 2])
        if stop:
            nu_new[j] = 0.0
            impulse_B[j] = 0.0
            spin_mode[j] = _SPIN_STUCK if not spinning[j] else _SPIN_FREE
            solved[j] = True
            stopped[j] = True

    general = ~solved
    solutions = {}
    for j in np.nonzero(general)[0]:
        G, E, Lg, cells = _general_rows(model, nu[j], L[j], float(L_tau[j]), angles[j])
        o = np.zeros(G.shape[0])
        tip = None
        if finger is not None and touching[j]:
            r0, g0 = G.shape[0], E.shape[1]
            G = np.vstack((G, g_t[j], -g_t[j]))
            o = np.concatenate((o, [-vt_F[j], vt_F[j]]))
            E = np.pad(E, ((0, 2), (0, 1)))
            E[r0:, g0] = 1.0
            Lg = np.concatenate((Lg, [0.0]))
            tip = Fingertip(g_n=g_n[j], o_n=float(o_n[j]), group=g0, mu=float(finger[3]))
            cells = np.concatenate((cells, [-2, -2]))
        sol = solve_mlcp(M[j], nu[j] + M_inv[j] @ P[j], G, o, E, Lg, finger=tip)
        nu_new[j] = sol.v
        if tip is not None:
            r0 = G.shape[0] - 2
            lam_t_k = sol.lam[r0] - sol.lam[r0 + 1]
            impulse_B[j] = -(n_out[j] * sol.lam_n + t_dir[j] * lam_t_k)
        if keep_solutions:
            solutions[int(j)] = (G, E, Lg, cells, sol)
    return _StepResult(
        nu_new, impulse_B, general, pinned, spin_mode, solutions, vertex_out, stopped
    )


# -- the fast simulator -----------------------------------------------------------------------
def _start_state(
    model: RigidModel, X_WO0: ArrayLike, V_WO0: ArrayLike | None, c_B: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Initial centre of mass positions (K, 2), orientations (K,) and twists (K, 3).

    ``X_WO0`` and ``V_WO0`` are one pose / twist (3,) for every hypothesis or one per
    hypothesis (K, 3) (the planner batches candidate pushes this way)."""
    K = c_B.shape[0]
    X = check_pose(X_WO0, 'X_WO0')
    if X.shape not in ((3,), (K, 3)):
        raise PhysicsError(
            f'X_WO0 must be one pose (3,) or one per hypothesis ({K}, 3), got {X.shape}'
        )
    V = np.zeros(3) if V_WO0 is None else check_pose(V_WO0, 'V_WO0')
    if V.shape not in ((3,), (K, 3)):
        raise PhysicsError(
            f'V_WO0 must be one twist (3,) or one per hypothesis ({K}, 3), got {V.shape}'
        )
    X = np.broadcast_to(X, (K, 3))
    V = np.broadcast_to(V, (K, 3))
    R = rotation(X[:, 2])
    p_OC = np.einsum('kij,kj->ki', R, model.p_OG[None, :] + c_B)  # O to C, world frame
    p_WC = X[:, :2] + p_OC
    v_WC = V[:, :2] + V[:, 2:3] * (p_OC @ _S.T)
    return p_WC, X[:, 2].copy(), np.column_stack((v_WC, V[:, 2]))


def body_twist(theta: FloatArray, V_WC: FloatArray, c_B: FloatArray) -> FloatArray:
    """Body-frame twist at G (K, 3) from the centre of mass twist V_WC (K, 3)."""
    c, s = np.cos(theta), np.sin(theta)
    v = V_WC[:, :2]
    v_B = np.column_stack((c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1]))
    return np.column_stack((v_B - V_WC[:, 2:3] * (c_B @ _S.T), V_WC[:, 2]))


def com_twist(theta: FloatArray, nu: FloatArray, c_B: FloatArray) -> FloatArray:
    """World twist of the centre of mass (K, 3) from the body-frame twist at G (K, 3)."""
    v_B = nu[:, :2] + nu[:, 2:3] * (c_B @ _S.T)
    c, s = np.cos(theta), np.sin(theta)
    return np.column_stack(
        (c * v_B[:, 0] - s * v_B[:, 1], s * v_B[:, 0] + c * v_B[:, 1], nu[:, 2])
    )


def simulate(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    push: Push,
    X_WO0: ArrayLike,
    V_WO0: ArrayLike | None = None,
) -> Rollout:
    """Simulate a push with the fast rigid-body simulator, for K hypotheses at once.

    Args:
        grid: the object's cells.
        mass, friction: (n,) or (K, n) per-cell mass [kg] and friction [-].
        push: a :class:`WrenchPush` or :class:`FingertipPush`.
        X_WO0: (3,) initial object pose in the world (table) frame, or (K, 3): one per
            hypothesis.
        V_WO0: (3,) or (K, 3) initial twist of O (velocity of the origin [m/s], spin [rad/s]);
            at rest when omitted.
    """
    m, mu = check_params(grid, mass, friction)
    return _simulate(RigidModel.of(grid), m, mu, push, X_WO0, V_WO0)


class StepObserver(Protocol):
    """Watches a rollout step by step (the gradient tracker is one)."""

    keep_solutions: bool

    def state(self, t: int, p_WG: FloatArray, theta: FloatArray) -> None:
        """The state at step boundary t (after t steps)."""

    def step(
        self,
        t: int,
        theta: FloatArray,
        nu: FloatArray,
        P: FloatArray,
        f_B: FloatArray,
        result: _StepResult,
    ) -> None:
        """Step t: orientation and body twist before it, applied impulse, its result."""


def wrench_impulse(
    model: RigidModel, push: WrenchPush, t: int, theta: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Body-frame impulse P (K, 3) of step t of a wrench push at orientations theta (K,),
    and the body-frame force f_B (K, 2)."""
    c, s = np.cos(theta), np.sin(theta)
    f = push.f_W[t]
    f_B = np.column_stack((c * f[0] + s * f[1], -s * f[0] + c * f[1]))
    r_c = push.p_OC[t] - model.p_OG
    h = push.dt
    P = np.column_stack((h * f_B, h * (r_c[0] * f_B[:, 1] - r_c[1] * f_B[:, 0] + push.tau[t])))
    return P, f_B


def _simulate(
    model: RigidModel,
    m: FloatArray,
    mu: FloatArray,
    push: Push,
    X_WO0: ArrayLike,
    V_WO0: ArrayLike | None,
    observer: StepObserver | None = None,
) -> Rollout:
    K = m.shape[0]
    h = push.dt
    T = push.steps
    M = model.mass_matrix(m)
    M_inv = np.asarray(np.linalg.inv(M), dtype=float)
    L, L_tau = _limits(model.grid, m, mu, h)
    c_B = model.com(m)
    p, th, v = _start_state(model, X_WO0, V_WO0, c_B)
    if isinstance(push, FingertipPush):
        _check_fingertip_start(model, push, p - np.einsum('kij,kj->ki', rotation(th), c_B), th)
    X = np.zeros((K, T + 1, 3))
    V = np.zeros((K, T + 1, 3))
    F = np.zeros((K, T, 2))
    general_steps = 0
    keep = observer is not None and observer.keep_solutions

    def record(t: int) -> None:
        R = rotation(th)
        X[:, t, :2] = p - np.einsum('kij,kj->ki', R, model.p_OG[None, :] + c_B)
        X[:, t, 2] = th
        V[:, t] = v
        if observer is not None:
            observer.state(t, p, th)

    record(0)
    for t in range(T):
        nu = body_twist(th, v, c_B)
        finger = None
        if isinstance(push, WrenchPush):
            P, f_B = wrench_impulse(model, push, t, th)
        else:
            P, f_B = np.zeros((K, 3)), np.zeros((K, 2))
            R = rotation(th)
            Rt = np.swapaxes(R, 1, 2)
            p_WG = p - np.einsum('kij,kj->ki', R, c_B)
            p_BF = np.einsum('kij,kj->ki', Rt, push.p_WF[t][None, :] - p_WG)
            v_BF = np.einsum('kij,j->ki', Rt, (push.p_WF[t + 1] - push.p_WF[t]) / h)
            finger = (p_BF, v_BF, push.radius, push.mu, h)
        step = _fast_step(model, M, M_inv, L, L_tau, nu, P, finger, keep_solutions=keep)
        if observer is not None:
            observer.step(t, th, nu, P, f_B, step)
        general_steps += int(step.general.sum())
        if isinstance(push, WrenchPush):
            F[:, t] = push.f_W[t]
        else:
            F[:, t] = np.einsum('kij,kj->ki', rotation(th), step.impulse_B) / h
        v = com_twist(th, step.nu, c_B)
        p = p + h * v[:, :2]
        th = th + h * v[:, 2]
        record(t + 1)
    return Rollout(X, V, F, general_steps)


def _check_fingertip_start(
    model: RigidModel, push: FingertipPush, p_WG: FloatArray, th: FloatArray
) -> None:
    Rt = np.swapaxes(rotation(th), 1, 2)
    p_BF = np.einsum('kij,kj->ki', Rt, push.p_WF[0][None, :] - p_WG)
    _, dist = model.closest_point(p_BF)
    if np.any(dist < push.radius - 1e-6):
        raise PhysicsError(
            'the fingertip path starts inside the object '
            f'(penetration {1e3 * (push.radius - dist.min()):.2f} mm): start it outside'
        )
