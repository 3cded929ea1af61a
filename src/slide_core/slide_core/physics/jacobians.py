"""Jacobians of one step's solution with respect to the twist, the applied impulse and the
parameters, on the solution's active set (derivation in :mod:`slide_core.physics.grad`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import FloatArray
from slide_core.physics.modes import SPIN_NEG, SPIN_POS, SPIN_SLIDING, SPIN_STUCK
from slide_core.physics.rigid import MOVING_SPEED, SPIN_ARM, RigidModel
from slide_core.physics.step import StepResult


def _structure(
    model: RigidModel,
    nu: FloatArray,
    nu_new: FloatArray,
    L: FloatArray,
    step: StepResult,
    k: int,
) -> tuple[FloatArray, NDArray[np.bool_], list[tuple[FloatArray, int]], float]:
    """Active structure of hypothesis k's step.

    Returns b (n, 3) the unit-limit impulse direction of each saturated cell (zeros
    elsewhere), moving (n,) whether b depends on nu (direction from the previous
    velocity), the equality rows [(c (3,), cell whose direction it is or -1)], and the
    spin sign s_tau (0 when the spin is held or has no friction).
    """
    n = model.grid.n
    u = model.J @ nu
    speed = np.linalg.norm(u, axis=1)
    active = L > 0
    was_moving = (speed > MOVING_SPEED) & active
    d = u / np.where(speed > 0, speed, 1.0)[:, None]
    g = np.einsum('nij,ni->nj', model.J, d)
    b = np.zeros((n, 3))
    moving = np.zeros(n, dtype=bool)
    eq: list[tuple[FloatArray, int]] = []
    e3 = np.array([0.0, 0.0, 1.0])
    if not step.general[k]:
        b[was_moving] = g[was_moving]
        moving[:] = was_moving
        # Cells breaking away from rest push on a fixed polygon vertex.
        broke = np.any(step.vertex_dirs[k] != 0.0, axis=1)
        b[broke] = np.einsum('nij,ni->nj', model.J[broke], step.vertex_dirs[k][broke])
        p = int(step.pinned[k])
        if p >= 0:
            eq += [(model.J[p][0], -1), (model.J[p][1], -1)]
        mode = int(step.spin_mode[k])
        if mode == SPIN_STUCK:
            eq.append((e3, -1))
            s_tau = 0.0
        elif mode == SPIN_SLIDING:
            s_tau = float(np.sign(nu[2]))
        elif mode == SPIN_POS:
            s_tau = 1.0
        elif mode == SPIN_NEG:
            s_tau = -1.0
        else:  # free (the spin reversed against its row): no spin friction
            s_tau = 0.0
        return b, moving, eq, s_tau
    G, E, Lg, cells, sol = step.solutions[k]
    group = np.argmax(E, axis=1)
    v_after = model.J @ nu_new
    speed_after = np.linalg.norm(v_after, axis=1)
    v_scale = 1e-9 + float(np.abs(nu_new).max()) + float(np.abs(nu).max())
    s_tau = 0.0
    for gi in range(E.shape[1]):
        rows = np.nonzero(group == gi)[0]
        cell = int(cells[rows[0]])
        impulse = G[rows].T @ sol.lam[rows]
        total = float(sol.lam[rows].sum())
        saturated = total >= Lg[gi] * (1 - 1e-7)
        unloaded = total <= Lg[gi] * 1e-9
        single = rows.size == 1  # a direction from the previous velocity
        if cell == -1:  # spin group
            if single and unloaded:
                continue  # the spin reversed: its row carries nothing
            if abs(nu_new[2]) > 1e-9 * v_scale and saturated:
                s_tau = float(np.sign(impulse[2]))
            else:
                eq.append((e3, -1))
            continue
        if cell < 0:
            continue
        if was_moving[cell]:
            if unloaded:
                continue  # moves against its previous direction: no friction on that row
            if saturated and g[cell] @ nu_new > 1e-9 * v_scale:
                b[cell] = g[cell]
                moving[cell] = True
            else:
                eq.append((g[cell], cell))
        elif speed_after[cell] > 1e-9 * v_scale and saturated:
            # Broke away from rest, sliding against a vertex of the friction polygon (one
            # loaded row: fixed direction) or along a face (two rows: the limit along one,
            # the split between them free, the velocity normal to the face).
            loaded = rows[sol.lam[rows] > 1e-9 * Lg[gi]]
            b[cell] = G[loaded[-1]]
            for r in loaded[:-1]:
                eq.append((G[r] - G[loaded[-1]], -1))
        else:
            eq += [(model.J[cell][0], -1), (model.J[cell][1], -1)]
    return b, moving, eq, s_tau


@dataclass(frozen=True)
class StepParams:
    """What a step's Jacobians depend on besides its input: the model, the mass matrices
    M (K, 3, 3), masses m and frictions mu (K, n), cell limits L (K, n), the step h [s],
    the normal loads N (K, n) [N] the limits come from (``L = mu N h``) and their
    derivatives dN/d(m, x) (K, n, n + E) with respect to the masses and E further inputs
    (a push's moment makes the loads depend on the body's yaw: :meth:`tipped`; E = 0
    without), and the loads the spin's friction limit comes from, N_spin (K, n), with theirs
    (the static loads: the simulators keep the spin limit static)."""

    model: RigidModel
    M: FloatArray
    m: FloatArray
    mu: FloatArray
    L: FloatArray
    h: float
    N: FloatArray
    dN_dm: FloatArray
    N_spin: FloatArray
    dN_spin_dm: FloatArray

    @classmethod
    def of(
        cls, model: RigidModel, M: FloatArray, m: FloatArray, mu: FloatArray, h: float
    ) -> StepParams:
        """The parameters of masses m and frictions mu (K, n) under the model's support."""
        N, dN_dm = model.support.loads_and_jacobian(m)
        return cls(model, M, m, mu, mu * N * h, h, N, dN_dm, N, dN_dm)

    def tipped(self, dN: FloatArray, dN_dx: FloatArray) -> StepParams:
        """These parameters with the cells' loads changed by dN (K, n) [N], independent of
        the masses on the static loads' contact set (a push's moment:
        :meth:`Support.tipping_basis`), and clipped at zero where a cell would lift off, as
        the simulators clip the limits; dN_dx (K, n, E) are dN's derivatives with respect
        to E further inputs. The spin keeps the static loads."""
        n_m = self.m.shape[1]
        E = dN_dx.shape[2]
        static = self.N_spin
        N = static + dN
        on = N > 0.0
        dN_dm = np.concatenate((self.dN_spin_dm[:, :, :n_m], dN_dx), axis=2)
        dN_dm = np.where(on[..., None], dN_dm, 0.0)
        dN_spin = np.concatenate(
            (self.dN_spin_dm[:, :, :n_m], np.zeros(static.shape + (E,))), axis=2
        )
        N = np.where(on, N, 0.0)
        return replace(self, L=self.mu * N * self.h, N=N, dN_dm=dN_dm, dN_spin_dm=dN_spin)


def step_jacobians(
    params: StepParams, nu: FloatArray, P: FloatArray, step: StepResult
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Jacobians of nu' (K, 3) w.r.t. nu (K, 3, 3), P (K, 3, 3), the masses and the further
    inputs the loads depend on (K, 3, n + E; :class:`StepParams`) and the frictions
    (K, 3, n).

    ``nu`` and ``P`` are the step's inputs, ``step`` its result (with general solutions).
    """
    model, M, m, mu, L, h = params.model, params.M, params.m, params.mu, params.L, params.h
    K, n = m.shape
    n_x = params.dN_dm.shape[2]  # masses, then the further inputs the loads depend on
    w = model.grid.cell_size
    e3 = np.array([0.0, 0.0, 1.0])
    nu_new = step.nu
    L_spin = mu * params.N_spin * h
    d_nu = np.zeros((K, 3, 3))
    d_P = np.zeros((K, 3, 3))
    d_m = np.zeros((K, 3, n_x))
    d_mu = np.zeros((K, 3, n))
    # Explicit steps with every friction saturated (no pivot, spin not held): closed form.
    simple = (
        ~step.general
        & (step.pinned < 0)
        & (step.spin_mode != SPIN_STUCK)
        & ~np.any(step.vertex_dirs != 0.0, axis=(1, 2))
        & ~step.stopped
    )
    if simple.any():
        _explicit_jacobians(params, nu, step, simple, d_nu, d_P, d_m, d_mu)
    for k in np.nonzero(~simple & ~step.stopped)[0]:  # a stop's sensitivity is zero
        b, moving, eq, s_tau = _structure(model, nu[k], nu_new[k], L[k], step, int(k))
        if not moving.any() and s_tau == 0.0 and not np.any(nu_new[k]):
            continue  # held at rest: locally constant, zero sensitivity
        u = model.J @ nu[k]
        speed = np.linalg.norm(u, axis=1)
        # db_i/dnu for cells whose direction comes from the previous velocity (zero for
        # resting cells: their polygon directions are fixed).
        speed = np.where(speed > MOVING_SPEED, speed, np.inf)
        dirs = np.where(np.isfinite(speed)[:, None], u / np.minimum(speed, 1e300)[:, None], 0.0)
        proj = (np.eye(2)[None] - np.einsum('ni,nj->nij', dirs, dirs)) / speed[:, None, None]
        db = np.einsum('nai,nab,nbj->nij', model.J, proj, model.J)  # (n, 3, 3)
        q = len(eq)
        C = np.array([c for c, _ in eq]).reshape(q, 3)
        A = np.zeros((3 + q, 3 + q))
        A[:3, :3] = M[k]
        A[:3, 3:] = C.T
        A[3:, :3] = C
        fixed = L[k] @ b + s_tau * SPIN_ARM * w * L_spin[k].sum() * e3
        dE_nu = np.zeros((3 + q, 3))
        dE_nu[:3] = -M[k] + np.einsum('i,ijk->jk', L[k] * moving, db)
        if q:
            # Impulses of the equality rows, from the momentum balance.
            lam_eq = np.linalg.lstsq(C.T, P[k] - M[k] @ (nu_new[k] - nu[k]) - fixed, rcond=None)[0]
            for r, (_, cell) in enumerate(eq):
                if cell >= 0:  # a stopped sliding cell: its row turns with nu
                    dE_nu[:3] += lam_eq[r] * db[cell]
                    dE_nu[3 + r] = nu_new[k] @ db[cell]
        dE_P = np.zeros((3 + q, 3))
        dE_P[:3] = -np.eye(3)
        spin = s_tau * SPIN_ARM * w * h
        # The limits L_i = mu_i N_i h; the loads N depend on the masses through the support
        # (and, tipped by a push, on the further inputs); the spin's on the static loads.
        dE_m = np.zeros((3 + q, n_x))
        dE_m[:3, :n] = np.einsum('nij,j->in', model.Q, nu_new[k] - nu[k])
        dE_m[:3] += (b * (mu[k] * h)[:, None]).T @ params.dN_dm[k]
        dE_m[:3] += np.outer(e3, spin * mu[k] @ params.dN_spin_dm[k])
        dE_mu = np.zeros((3 + q, n))
        dE_mu[:3] = (b * (params.N[k] * h)[:, None]).T + np.outer(e3, spin * params.N_spin[k])
        rhs = np.hstack((dE_nu, dE_P, dE_m, dE_mu))
        sol = -np.linalg.lstsq(A, rhs, rcond=None)[0][:3]
        d_nu[k] = sol[:, :3]
        d_P[k] = sol[:, 3:6]
        d_m[k] = sol[:, 6 : 6 + n_x]
        d_mu[k] = sol[:, 6 + n_x :]
    return d_nu, d_P, d_m, d_mu


def _explicit_jacobians(
    params: StepParams,
    nu: FloatArray,
    step: StepResult,
    sel: NDArray[np.bool_],
    d_nu: FloatArray,
    d_P: FloatArray,
    d_m: FloatArray,
    d_mu: FloatArray,
) -> None:
    """Closed-form Jacobians (the paper's W_M, W_mu plus the direction term), in place."""
    model, M, mu, L, h = params.model, params.M, params.mu, params.L, params.h
    w = model.grid.cell_size
    Mi = np.linalg.inv(M[sel])
    v0, v1 = nu[sel], step.nu[sel]
    u = np.einsum('nij,kj->kni', model.J, v0)
    speed = np.linalg.norm(u, axis=2)
    moving = (speed > MOVING_SPEED) & (L[sel] > 0)
    safe = np.where(moving, speed, 1.0)
    dirs = u / safe[..., None]
    b = np.einsum('nij,kni->knj', model.J, dirs) * moving[..., None]
    proj = (np.eye(2) - np.einsum('kni,knj->knij', dirs, dirs)) / safe[..., None, None]
    db = np.einsum('nai,knab,nbj->knij', model.J, proj, model.J)
    mode = step.spin_mode[sel]
    s_tau = np.where(
        mode == SPIN_SLIDING,
        np.sign(v0[:, 2]),
        np.where(mode == SPIN_POS, 1.0, np.where(mode == SPIN_NEG, -1.0, 0.0)),
    )
    spin = (s_tau * SPIN_ARM * w * h)[:, None]
    dE_nu = -M[sel] + np.einsum('kn,knij->kij', L[sel] * moving, db)
    # Through the limits L_i = mu_i N_i h, with the loads' derivatives dN/d(m, x) (the
    # spin's limit from the static loads).
    n = mu.shape[1]
    dE_N = np.swapaxes(b * (mu[sel] * h)[..., None], 1, 2)  # (k, 3, n)
    dE_m = dE_N @ params.dN_dm[sel]
    dE_m[:, :, :n] += np.einsum('nij,kj->kin', model.Q, v1 - v0)
    dE_m[:, 2, :] += np.einsum('kn,knx->kx', spin * mu[sel], params.dN_spin_dm[sel])
    dE_mu = np.swapaxes(b * (params.N[sel] * h)[..., None], 1, 2)
    dE_mu[:, 2, :] += spin * params.N_spin[sel]
    d_nu[sel] = -Mi @ dE_nu
    d_P[sel] = Mi
    d_m[sel] = -Mi @ dE_m
    d_mu[sel] = -Mi @ dE_mu
