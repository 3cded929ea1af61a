"""The rigid reduction of the welded cells: constants, the body model and its twists.

The body frame B has its origin at the cells' centroid G and the axes of the object frame
O; cell offsets from G are constant. The state carried between steps is the position and
twist of the centre of mass Bcm (see the package docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from slide_core.geometry import FloatArray, Grid, check_pose, rotation
from slide_core.physics.inputs import PhysicsError
from slide_core.physics.kernels_outline import outline_contact
from slide_core.physics.support import DEFAULT_SUPPORT, Support

SPIN_ARM = 0.0
"""Lever of each cell's own spin friction, as a fraction of its edge: 0, the cells are
points. The papers' per-cell rotation row with a uniformly loaded square's lever
(``(sqrt(2) + ln(1 + sqrt(2))) / 6 ~ 0.383``), merged into one torsion of the welded body,
resists every rotation as if each cell spun about its own centre; a cell does so only near
the centre of rotation, so the merged torsion errs by O(w) on every cell where point cells
err by O(w^2 / d) at distance d from the centre of rotation. Measured (``slide bench
physics``, the twin's pushes predicted with the true maps, 8 objects x 5 pushes): lever
0.383 w 3.07 mm, 0 1.76 mm (a half and a quarter of it: 1.90 and 1.45 mm; no fitted value
is used). The rows stay in the kernels: a positive lever turns them back on."""

N_PYRAMID = 8
"""Directions of the polygonal friction cone of a cell at rest."""

MOVING_SPEED = 1e-6
"""Below this speed [m/s] a cell counts as at rest (its friction direction is undefined)."""

S90 = np.array([[0.0, -1.0], [1.0, 0.0]])
"""The 90 degree rotation: ``S90 @ r`` is z x r."""


# -- the rigid body -------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class RigidModel:
    """Constant per-grid quantities of the rigid reduction (body frame B at centroid G).

    Attributes:
        p_OG: (2,) centroid of the cells in the object frame.
        r_B: (n, 2) cell centres relative to G.
        J: (n, 2, 3) cell velocity Jacobians ``u_i = J_i nu``.
        Q: (n, 3, 3) per-unit-mass inertia contributions, ``M_B = sum m_i Q_i``.
        support: how the table carries the cells (:mod:`slide_core.physics.support`).
        outline_B: (V, 2) the object's real outline about G, a polygon the fingertip
            touches instead of the cells' squares; (0, 2) when there is none.
    """

    grid: Grid
    p_OG: FloatArray
    r_B: FloatArray
    J: FloatArray
    Q: FloatArray
    support: Support
    outline_B: FloatArray = field(default_factory=lambda: np.zeros((0, 2)))

    @classmethod
    def of(
        cls,
        grid: Grid,
        support: str = DEFAULT_SUPPORT,
        area: ArrayLike | None = None,
        outline: ArrayLike | None = None,
    ) -> RigidModel:
        """The model of ``grid`` under ``support``, with each cell's covered ``area``
        fraction and the fingertip against ``outline`` (V, 2), a simple polygon in the
        object frame: the grid's own (:attr:`Grid.outline`) when omitted, and the cells'
        squares when the grid has none."""
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
        if outline is None:
            outline = grid.outline
        if outline is None:
            outline_B = np.zeros((0, 2))
        else:
            poly = np.asarray(outline, dtype=float)
            if poly.ndim != 2 or poly.shape[1] != 2 or poly.shape[0] < 3:
                raise PhysicsError(f'an outline is a (V >= 3, 2) polygon, got {poly.shape}')
            if not np.all(np.isfinite(poly)):
                raise PhysicsError('the outline has non-finite vertices')
            outline_B = np.ascontiguousarray(poly - p_OG)
        return cls(grid, p_OG, r, J, Q, Support.of(grid, support, area), outline_B)

    def loads(self, mass: FloatArray) -> FloatArray:
        """Normal loads (K, n) [N] of the cells for masses (K, n)."""
        return self.support.loads(mass)

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
        """Closest object points (K, 2) to fingertip centres p_BF (K, 2), and distances
        (0 for a centre inside the object)."""
        if self.outline_B.shape[0]:
            q, _, signed = self.contact(p_BF)
            return q, np.maximum(signed, 0.0)
        half = self.grid.cell_size / 2.0
        d = p_BF[:, None, :] - self.r_B[None, :, :]
        q = self.r_B[None, :, :] + np.clip(d, -half, half)
        dist = np.linalg.norm(p_BF[:, None, :] - q, axis=2)
        k = np.argmin(dist, axis=1)
        idx = np.arange(p_BF.shape[0])
        return q[idx, k], dist[idx, k]

    def contact(self, p_BF: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The fingertip contact for centres p_BF (K, 2): the object's closest points q
        (K, 2), the outward normals there (K, 2), and the signed distances (K,) (negative
        inside the outline; 0 inside the cells' squares, whose normal is then +x)."""
        if not self.outline_B.shape[0]:
            q, dist = self.closest_point(p_BF)
            n_out = (p_BF - q) / np.where(dist > 0, dist, 1.0)[:, None]
            n_out[dist <= 0] = np.array([1.0, 0.0])
            return q, n_out, dist
        K = p_BF.shape[0]
        q, n_out, signed = np.zeros((K, 2)), np.zeros((K, 2)), np.zeros(K)
        for k in range(K):
            qx, qy, nx, ny, s = outline_contact(
                float(p_BF[k, 0]), float(p_BF[k, 1]), self.outline_B
            )
            q[k], n_out[k], signed[k] = (qx, qy), (nx, ny), s
        return q, n_out, signed


def friction_limits(
    model: RigidModel, mass: FloatArray, friction: FloatArray, h: float
) -> tuple[FloatArray, FloatArray]:
    """Per-cell friction impulse limits (K, n) ``mu_i N_i h`` with the normal loads of the
    model's support, and merged torsion limits (K,)."""
    L = friction * model.loads(mass) * h
    return L, torsion_limits(model.grid, L)


def push_heights(model: RigidModel, push_height: ArrayLike) -> FloatArray:
    """Per-cell push heights (n,) [m] from one height or (n,); size 0 when all are 0 (the
    push has no moment). PhysicsError on a negative or non-finite height."""
    hp = np.broadcast_to(np.asarray(push_height, dtype=float), (model.support.n,))
    if not np.all(np.isfinite(hp)) or np.any(hp < 0.0):
        raise PhysicsError('push heights must be finite and >= 0 m')
    return np.ascontiguousarray(hp) if np.any(hp > 0.0) else np.zeros(0)


def tipping_limits(
    model: RigidModel, m: FloatArray, mu: FloatArray, h: float, h_push: FloatArray
) -> FloatArray:
    """How a push's moment changes the cells' friction impulse limits over a step h [s]:
    (K, 2, n) [s/m], per unit table-plane moment (a body-frame push force [N] times its
    height [m]) along x and y, ``mu_i h dN_i`` with dN from :meth:`Support.tipping_basis`
    of the masses m (K, n); zeros when the push has no moment (h_push of
    :func:`push_heights` of size 0). With h = 1 s: the friction forces' change [1/m]."""
    if h_push.shape[0] == 0:
        return np.zeros((m.shape[0], 2, model.support.n))
    return np.ascontiguousarray(mu[:, None, :] * model.support.tipping_basis(m) * h)


def tipping(h_z: ArrayLike, f_B: FloatArray, per_moment: FloatArray) -> FloatArray:
    """The change (K, n) a push's moment makes to per-cell quantities: body-frame push
    forces f_B (K, 2) [N] acting at heights h_z (K,) or one [m] (the height of the cell
    nearest each contact), through ``per_moment`` (K, 2, n), their change per unit
    table-plane moment along x and y (:meth:`Support.tipping_basis` for the loads,
    :func:`tipping_limits` for the friction limits)."""
    h = np.reshape(np.asarray(h_z, dtype=float), (-1, 1))
    return np.asarray(h * np.einsum('kj,kjn->kn', f_B, per_moment), dtype=float)


def torsion_limits(grid: Grid, L: FloatArray) -> FloatArray:
    """The merged torsion limits (K,) of cell limits L (K, n): each cell's spin lever
    ``SPIN_ARM w`` times its limit, summed."""
    return np.asarray(SPIN_ARM * grid.cell_size * L.sum(axis=1), dtype=float)


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


# -- the fast simulator -----------------------------------------------------------------------
def start_state(
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
    p_OBcm_W = np.einsum('kij,kj->ki', R, model.p_OG[None, :] + c_B)
    p_WBcm = X[:, :2] + p_OBcm_W
    v_WBcm = V[:, :2] + V[:, 2:3] * (p_OBcm_W @ S90.T)
    return p_WBcm, X[:, 2].copy(), np.column_stack((v_WBcm, V[:, 2]))


def body_twist(theta: FloatArray, V_WBcm: FloatArray, c_B: FloatArray) -> FloatArray:
    """Body-frame twist at G (K, 3) from the centre of mass twist V_WBcm (K, 3)."""
    c, s = np.cos(theta), np.sin(theta)
    v = V_WBcm[:, :2]
    v_B = np.column_stack((c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1]))
    return np.column_stack((v_B - V_WBcm[:, 2:3] * (c_B @ S90.T), V_WBcm[:, 2]))


def com_twist(theta: FloatArray, nu: FloatArray, c_B: FloatArray) -> FloatArray:
    """World twist of the centre of mass (K, 3) from the body-frame twist at G (K, 3)."""
    v_B = nu[:, :2] + nu[:, 2:3] * (c_B @ S90.T)
    c, s = np.cos(theta), np.sin(theta)
    return np.column_stack(
        (c * v_B[:, 0] - s * v_B[:, 1], s * v_B[:, 0] + c * v_B[:, 1], nu[:, 2])
    )
