"""Quasi-static pushing of a grid of cells: the planner's batched push model.

The dynamic core (:mod:`slide_core.physics`) solves one complementarity problem per step;
where cells near the instantaneous centre of rotation keep reversing, its explicit active
sets fail and every step falls back to the general solver (seconds per push and model).
The planner simulates hundreds of candidate pushes for every model of the belief, so it
uses the quasi-static limit of the same model instead: at pushing speeds (5 cm/s) the
object's kinetic energy is negligible next to what friction dissipates, and the motion
of each small fingertip displacement is the one that minimises the dissipated power
(the maximum-dissipation principle behind limit surfaces, Goyal et al. 1991, here exact
for the cells' point supports rather than an ellipsoid fit):

    D(nu) = sum_i c_i |J_i nu| + c_tau |omega|,   c_i = mu_i m_i g,
    c_tau = SPIN_ARM w sum_i c_i  (each cell's own torsional friction, as in the core)

where ``nu = (dx, dy, dtheta)`` is a body displacement at the cell centroid G and
``J_i`` the cell's velocity Jacobian. Per step (``step`` metres of fingertip travel):

- No contact (the fingertip does not reach the object within the step): it stays.
- Sticking contact at the object point q: the contact point follows the fingertip
  (tangentially) and is pushed out of penetration (normally), ``J_q nu = dc``; one degree
  of freedom is left (a rotation about q), found by bisection on the convex D.
- The contact force is the gradient of D with respect to dc. If it leaves the friction
  cone ``|f_t| <= mu_tip f_n``, the contact slides: nu keeps the normal constraint, the
  tangential slip beta and the rotation alpha minimise ``D - sigma mu_tip f_n beta`` (the
  friction force does work on the cone's edge), with f_n updated from the solution a few
  times (a fixed point; each inner problem is convex, solved by coordinate bisection).

Only the products c_i = mu_i m_i g matter for the motion (quasi-statically, mass
distribution acts through friction alone); the centre of mass matters for balance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid, check_pose, rotation
from slide_core.physics.rigid import GRAVITY, S90, SPIN_ARM, RigidModel

_BISECTIONS = 22
_SLIP_ROUNDS = 3


@dataclass(frozen=True, eq=False)
class QuasiStaticRollout:
    """Poses X_WO (B, S+1, 3) after each fingertip step; touching and slipping (B, S)."""

    X_WO: FloatArray
    touching: np.ndarray
    slipping: np.ndarray


def _bisect(
    grad: Callable[[FloatArray], FloatArray], lo: FloatArray, hi: FloatArray
) -> FloatArray:
    """Root of the non-decreasing derivative ``grad(s)`` (B,) within [lo, hi] per row."""
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        up = grad(mid) > 0.0
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    return np.asarray(0.5 * (lo + hi))


@dataclass(frozen=True, eq=False)
class _Support:
    """Friction forces of B hypotheses: cells c (B, n) [N] at r (n, 2) about G, torsion
    c_tau (B,) [N m]."""

    c: FloatArray
    c_tau: FloatArray
    r: FloatArray
    r_perp: FloatArray  # (n, 2): z x r

    def take(self, rows: NDArray[np.int64]) -> _Support:
        return _Support(self.c[rows], self.c_tau[rows], self.r, self.r_perp)

    def gradient(self, nu: FloatArray) -> FloatArray:
        """Gradient (B, 3) of the dissipation D at body displacements nu (B, 3)."""
        u = nu[:, None, :2] + nu[:, None, 2:3] * self.r_perp[None]
        s = np.sqrt(np.einsum('bni,bni->bn', u, u))
        w = self.c / np.maximum(s, 1e-15)
        g_xy = np.einsum('bn,bni->bi', w, u)
        g_w = np.einsum('bn,bni,ni->b', w, u, self.r_perp) + self.c_tau * np.sign(nu[:, 2])
        return np.column_stack((g_xy, g_w))


def _along(
    sup: _Support, base: FloatArray, z: FloatArray, extra: FloatArray | None = None
) -> Callable[[FloatArray], FloatArray]:
    """Derivative of D along z at base + a z, as a function of a (B,) (minus ``extra``)."""

    def grad(a: FloatArray) -> FloatArray:
        g = np.asarray(np.einsum('bi,bi->b', sup.gradient(base + a[:, None] * z), z))
        return g if extra is None else g - extra

    return grad


def _contact_step(
    sup: _Support,
    q: FloatArray,
    n_in: FloatArray,
    dF: FloatArray,
    pen: FloatArray,
    mu_tip: float,
    ds: float,
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Body displacements (B, 3) of touching hypotheses and whether each slips.

    q: (B, 2) contact points about G; n_in: (B, 2) inward normals; dF: (B, 2) fingertip
    displacement; pen: (B,) penetration to remove; all in the body frame.
    """
    B = len(q)
    t = np.column_stack((-n_in[:, 1], n_in[:, 0]))
    # Sticking: the contact point moves with the fingertip tangentially and out of the
    # penetration normally; the rotation about it minimises D.
    dc = t * np.einsum('bi,bi->b', t, dF)[:, None] + n_in * pen[:, None]
    base = np.column_stack((dc, np.zeros(B)))
    z1 = np.column_stack((q[:, 1], -q[:, 0], np.ones(B)))  # rotation about q
    lim = np.full(B, 0.5)
    alpha = _bisect(_along(sup, base, z1), -lim, lim)
    nu = base + alpha[:, None] * z1
    f = sup.gradient(nu)[:, :2]  # force on the object at the contact
    f_n = np.einsum('bi,bi->b', f, n_in)
    f_t = np.einsum('bi,bi->b', f, t)
    slip = np.abs(f_t) > mu_tip * np.maximum(f_n, 0.0) + 1e-12
    if not slip.any():
        return nu, slip
    j = np.nonzero(slip)[0]
    sj = sup.take(j)
    sigma = np.sign(f_t[j])  # the fingertip's friction on the object acts along sigma t
    z1j = z1[j]
    z2 = np.column_stack((t[j], np.zeros(len(j))))  # tangential slip of the contact point
    fn = np.maximum(f_n[j], 0.0)
    a, beta = alpha[j], np.zeros(len(j))
    lim_a, lim_b = np.full(len(j), 0.5), 3 * ds + pen[j]
    for _ in range(_SLIP_ROUNDS):
        a = _bisect(_along(sj, base[j] + beta[:, None] * z2, z1j), -lim_a, lim_a)
        beta = _bisect(
            _along(sj, base[j] + a[:, None] * z1j, z2, sigma * mu_tip * fn), -lim_b, lim_b
        )
        g = sj.gradient(base[j] + a[:, None] * z1j + beta[:, None] * z2)
        fn = np.maximum(np.einsum('bi,bi->b', g[:, :2], n_in[j]), 0.0)
    nu[j] = base[j] + a[:, None] * z1j + beta[:, None] * z2
    return nu, slip


def push(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    X_WO0: ArrayLike,
    p_WF0: ArrayLike,
    direction_W: ArrayLike,
    travel: float,
    radius: float,
    mu_tip: float,
    step: float = 0.002,
) -> QuasiStaticRollout:
    """Push B hypotheses with a fingertip disc moving straight from ``p_WF0`` along
    ``direction_W`` for ``travel`` metres, in steps of ``step`` metres.

    Args:
        grid: the object's cells.
        mass, friction: (B, n) or (n,) per-cell maps [kg], [-].
        X_WO0: (3,) or (B, 3) start poses, table frame.
        p_WF0: (2,) fingertip centre at the start, outside the object [m].
        direction_W: (2,) push direction (normalised here).
        travel: push length [m]; radius: fingertip radius [m]; mu_tip: its friction.
    """
    m = np.atleast_2d(np.asarray(mass, dtype=float))
    mu = np.atleast_2d(np.asarray(friction, dtype=float))
    if m.shape[-1] != grid.n or mu.shape[-1] != grid.n:
        raise SlideInputError(f'mass and friction must have {grid.n} values per hypothesis')
    m, mu = np.broadcast_arrays(m, mu)
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(mu))) or np.any(m < 0) or np.any(mu < 0):
        raise SlideInputError('mass and friction must be finite and non-negative')
    B = m.shape[0]
    X0 = check_pose(X_WO0, 'X_WO0')
    if X0.shape not in ((3,), (B, 3)):
        raise SlideInputError(f'X_WO0 must be (3,) or ({B}, 3), got {X0.shape}')
    d = np.asarray(direction_W, dtype=float)
    p0 = np.asarray(p_WF0, dtype=float)
    if d.shape != (2,) or p0.shape != (2,) or not np.all(np.isfinite(np.r_[d, p0])):
        raise SlideInputError('p_WF0 and direction_W must be finite 2-vectors')
    if np.linalg.norm(d) == 0 or not (travel > 0 and step > 0 and radius > 0 and mu_tip >= 0):
        raise SlideInputError('direction non-zero; travel, step, radius > 0; mu_tip >= 0')
    d = d / np.linalg.norm(d)
    model = RigidModel.of(grid)
    c = mu * m * GRAVITY  # (B, n) friction force of each cell [N]
    r = model.r_B  # (n, 2) cells about G
    sup = _Support(c, SPIN_ARM * grid.cell_size * c.sum(axis=1), r, r @ S90.T)
    S = max(1, int(np.ceil(travel / step)))
    ds = travel / S
    X = np.zeros((B, S + 1, 3))
    X[:, 0] = np.broadcast_to(X0, (B, 3))
    touching = np.zeros((B, S), dtype=bool)
    slipping = np.zeros((B, S), dtype=bool)
    # Position of G and orientation.
    th = X[:, 0, 2].copy()
    p_G = X[:, 0, :2] + np.einsum('bij,j->bi', rotation(th), model.p_OG)
    for k in range(S):
        F_end = p0 + d * ds * (k + 1)
        R = rotation(th)
        Rt = np.swapaxes(R, 1, 2)
        p_BF = np.einsum('bij,bj->bi', Rt, F_end[None, :] - p_G)  # fingertip after the step
        q, dist = model.closest_point(p_BF)
        n_out = (p_BF - q) / np.maximum(dist, 1e-12)[:, None]
        inside = np.all(np.abs(p_BF[:, None, :] - r[None]) < grid.cell_size / 2, axis=2).any(1)
        n_out[inside] = -n_out[inside]
        pen = np.where(inside, dist + radius, radius - dist)  # penetration after the step
        hit = pen > 0.0
        touching[:, k] = hit
        if not hit.any():
            X[:, k + 1] = X[:, k]
            continue
        b = np.nonzero(hit)[0]
        dF = np.einsum('bji,j->bi', R[b], d * ds)  # fingertip displacement, body frame
        nu, slip = _contact_step(sup.take(b), q[b], -n_out[b], dF, pen[b], mu_tip, ds)
        slipping[b, k] = slip
        # Apply the body displacement (small: first order, rotation about G).
        full = np.zeros((B, 3))
        full[b] = nu
        p_G = p_G + np.einsum('bij,bj->bi', R, full[:, :2])
        th = th + full[:, 2]
        X[:, k + 1, 2] = th
        X[:, k + 1, :2] = p_G - np.einsum('bij,j->bi', rotation(th), model.p_OG)
    return QuasiStaticRollout(X, touching, slipping)
