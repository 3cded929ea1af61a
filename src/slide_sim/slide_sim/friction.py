"""Coulomb friction between the object and what carries it (the table, the floor).

Why the twin does not let MuJoCo compute this friction: MuJoCo's contact model is convex,
and in it a sliding contact's friction and normal force are solved together. Measured
on the twin with MuJoCo's friction (condim 3, elliptic cones, impratio 10; the papers'
library objects pushed through their centre of mass at 5 cm/s):

- the table's normal force chatters between 0 and 5 to 7 times the weight every few
  steps (its 50 ms means 0.96 to 1.31 weights), and
- its time-mean per-cell distribution is not the rigid body's pressure: it moves onto the
  grippier cells (the book's cloth spine carries 5 times its share), so the friction force
  of a pushed object is 9 to 53% above ``sum_i mu_i N_i`` of the rigid pressure.

No timestep, cone, impratio, solver, noslip, solref or solimp setting removed both (softer
solimp moves the distribution back and makes the chatter worse). A real object's pressure
is set by the contact's compliance, not by its friction, so the twin keeps MuJoCo's
normal contact (condim 1 on the object's cells: the pressure at rest and under a push is
the compliant table's) and adds the friction itself, per contact point, as Coulomb's law
for one rigid body:

The object's planar velocity ``u = (v_x, v_y, omega)`` at its centre of mass after a step
of length ``h`` minimises

    ``1/2 (u - u*)^T M (u - u*) + h sum_k mu_k N_k |v_k(u)|``

(``M = diag(m, m, I_z)``, ``u*`` the velocity the other forces alone would give,
``v_k = (v_x - omega r_ky, v_y + omega r_kx)`` the velocity of contact point k at ``r_k``
from the centre of mass). Its stationarity condition is the implicit Euler step with every
sliding point's friction ``mu_k N_k`` against its velocity and the sticking points'
forces inside their discs (maximum dissipation): the object sticks when friction can hold
it, with no creep and no regularising speed. The friction wrench is ``M (u - u*) / h``;
it acts at the contact plane, so it also pitches the object (moment ``z_c x F`` about
the centre of mass at height ``z_c``). ``u*`` uses the other forces' acceleration of the
previous step (the pusher's force changes little in 2 ms). Newton's method on the
problem with ``|v|`` smoothed by 1e-7 m/s converges in a few iterations (compiled).
"""

from __future__ import annotations

import math

import mujoco
import numba
import numpy as np
from numpy.typing import ArrayLike

from slide_core.geometry import FloatArray

SMOOTHING = 1e-7  # m/s: |v| ~ sqrt(|v|^2 + SMOOTHING^2) in the Newton iterations
_ITERATIONS = 100


@numba.njit(cache=True, nogil=True)
def _cost(
    x: FloatArray, u_star: FloatArray, M: FloatArray, r: FloatArray, c: FloatArray, s: float
) -> float:
    f = 0.0
    for j in range(3):
        f += 0.5 * M[j] * (x[j] - u_star[j]) ** 2
    for k in range(r.shape[0]):
        vx = x[0] - x[2] * r[k, 1]
        vy = x[1] + x[2] * r[k, 0]
        f += c[k] * math.sqrt(vx * vx + vy * vy + s * s)
    return f


@numba.njit(cache=True, nogil=True)
def implicit_velocity(
    u_star: FloatArray, M: FloatArray, r: FloatArray, c: FloatArray, smoothing: float
) -> FloatArray:
    """The planar velocity (3,) after a step with Coulomb friction (module docstring):
    u_star (3,) without friction, M (3,) the mass and inertia, r (K, 2) contact points
    from the centre of mass [m], c (K,) = h mu_k N_k [N s]."""
    x = u_star.copy()
    f = _cost(x, u_star, M, r, c, smoothing)
    g = np.empty(3)
    H = np.empty((3, 3))
    for _ in range(_ITERATIONS):
        for j in range(3):
            g[j] = M[j] * (x[j] - u_star[j])
        H[:] = 0.0
        for j in range(3):
            H[j, j] = M[j]
        for k in range(r.shape[0]):
            vx = x[0] - x[2] * r[k, 1]
            vy = x[1] + x[2] * r[k, 0]
            n = math.sqrt(vx * vx + vy * vy + smoothing * smoothing)
            dx, dy = vx / n, vy / n
            # d v_k / d x: rows (1, 0, -r_y) and (0, 1, r_x)
            g[0] += c[k] * dx
            g[1] += c[k] * dy
            g[2] += c[k] * (-r[k, 1] * dx + r[k, 0] * dy)
            a = c[k] / n
            pxx, pxy, pyy = a * (1.0 - dx * dx), -a * dx * dy, a * (1.0 - dy * dy)
            jx = (1.0, 0.0, -r[k, 1])
            jy = (0.0, 1.0, r[k, 0])
            for p in range(3):
                for q in range(3):
                    H[p, q] += (
                        jx[p] * pxx * jx[q]
                        + jx[p] * pxy * jy[q]
                        + jy[p] * pxy * jx[q]
                        + jy[p] * pyy * jy[q]
                    )
        step = np.linalg.solve(H, g)
        slope = g @ step
        t = 1.0
        while True:
            trial = x - t * step
            f_new = _cost(trial, u_star, M, r, c, smoothing)
            if f_new <= f - 1e-4 * t * slope or t < 1e-12:
                break
            t *= 0.5
        x = trial
        f = f_new
        if np.abs(t * step).max() < 1e-10:
            break
    return x


class TableFriction:
    """Applies Coulomb friction between the object body and the support geoms, step by
    step (the module docstring says why and how).

    Args:
        model: the MuJoCo model; its object cells must have condim 1 against the supports.
        body: the object's body id; cells: its geom ids (n,), with friction coefficients
            mu (n,); supports: geom ids of the surfaces that carry it (table, floor).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        body: int,
        cells: ArrayLike,
        mu: ArrayLike,
        supports: list[int],
    ) -> None:
        self._model = model
        self._body = body
        ids = np.asarray(cells, dtype=int)
        self._first = int(ids[0])
        self._n = int(ids.size)
        if not np.array_equal(ids, self._first + np.arange(self._n)):
            raise ValueError('the object cell geoms must have consecutive ids')
        self._mu = np.asarray(mu, dtype=float)
        self._supports = np.asarray(supports)
        self._dof = int(model.body_dofadr[body])
        self._u_start = np.zeros(3)  # velocity when the last friction was set
        self._u_end: FloatArray | None = None  # velocity after that step
        self._F = np.zeros(3)  # the friction wrench set for it
        self._M = np.array([float(model.body_mass[body])] * 2 + [1.0])
        self._a_other = np.zeros(3)  # the other forces' acceleration in the last step

    def _support_contacts(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the contacts between an object cell and a support, and the cell of
        each (relative to the first cell)."""
        ncon = data.ncon
        if ncon == 0:
            return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        geom = data.contact.geom[:ncon]
        g1, g2 = geom[:, 0], geom[:, 1]
        s1, s2 = np.isin(g1, self._supports), np.isin(g2, self._supports)
        other = np.where(s1, g2, g1) - self._first
        active = data.contact.efc_address[:ncon] >= 0  # a contact can be left out of the solve
        keep = (s1 | s2) & (other >= 0) & (other < self._n) & active
        return np.nonzero(keep)[0], other[keep]

    def normal_forces(self, data: mujoco.MjData) -> FloatArray:
        """Normal force (n,) [N] of the supports on each cell, from the last step's
        constraint solution."""
        idx, cell = self._support_contacts(data)
        N = data.efc_force[data.contact.efc_address[idx]] if idx.size else np.zeros(0)
        return np.bincount(cell, weights=N, minlength=self._n).astype(float)

    def _planar_velocity(self, data: mujoco.MjData) -> FloatArray:
        """(v_x, v_y, omega_z) at the centre of mass, world frame."""
        b = self._body
        q = self._dof
        R = data.xmat[b].reshape(3, 3)
        w = R @ data.qvel[q + 3 : q + 6]  # a free joint's angular velocity is in the body frame
        v = data.qvel[q : q + 3] + np.cross(w, data.xipos[b] - data.xpos[b])
        return np.array([v[0], v[1], w[2]])

    def apply(self, data: mujoco.MjData) -> None:
        """Set the object's applied wrench to this step's friction; call before mj_step."""
        b = self._body
        u = self._planar_velocity(data)
        idx, cell = self._support_contacts(data)
        data.xfrc_applied[b] = 0.0
        if self._u_end is None or not np.allclose(u, self._u_end, rtol=0.0, atol=1e-12):
            self._a_other = np.zeros(3)  # first step, or the state was set from outside
        self._u_end = None
        self._u_start, self._F = u, np.zeros(3)
        if idx.size == 0:
            return
        N = data.efc_force[data.contact.efc_address[idx]]
        p = data.contact.pos[idx]
        c = data.xipos[b]
        m = self._model
        R_i = data.ximat[b].reshape(3, 3)
        I_zz = float(R_i[2] @ (m.body_inertia[b] * R_i[2]))
        M = np.array([m.body_mass[b], m.body_mass[b], I_zz])
        self._M = M
        h = m.opt.timestep
        u_star = u + h * self._a_other
        weight = h * self._mu[cell] * np.maximum(N, 0.0)
        r = np.ascontiguousarray((p - c)[:, :2])
        x = implicit_velocity(u_star, M, r, weight, SMOOTHING)
        F = M * (x - u_star) / h
        z_c = float(c[2] - np.average(p[:, 2], weights=np.maximum(N, 1e-12)))
        data.xfrc_applied[b, :2] = F[:2]
        data.xfrc_applied[b, 3] = z_c * F[1]
        data.xfrc_applied[b, 4] = -z_c * F[0]
        data.xfrc_applied[b, 5] = F[2]
        self._F = F

    def stepped(self, data: mujoco.MjData) -> None:
        """Note the step's outcome; call after mj_step (the other forces' acceleration
        feeds the next step's friction)."""
        u = self._planar_velocity(data)
        h = self._model.opt.timestep
        self._a_other = (u - self._u_start) / h - self._F / self._M
        self._u_end = u
