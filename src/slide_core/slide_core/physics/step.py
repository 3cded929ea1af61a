"""One step of the fast simulator for K hypotheses, in body coordinates.

The step problem (see the package docstring) is solved by trying its likely active sets
explicitly (:mod:`slide_core.physics.modes`), then the breakaway of resting cells against
their friction polygons' vertices, then a body that comes to rest within the step; what
none of these covers goes to the general solver (:func:`slide_core.physics.mlcp.solve_rigid`:
the compiled active set, the QP when that does not settle). This is the path of rollouts
with gradients; rollouts without run in :func:`slide_core.physics.kernels_rollout.rollout`.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import lsq_linear

from slide_core.geometry import FloatArray
from slide_core.physics.mlcp import Fingertip, MlcpSolution, solve_rigid
from slide_core.physics.modes import (
    SPIN_FREE,
    SPIN_STUCK,
    Contact,
    ModeProblem,
    enumerate_modes,
)
from slide_core.physics.rigid import (
    MOVING_SPEED,
    N_PYRAMID,
    S90,
    RigidModel,
    polygon_angles,
    polygon_directions,
)


@dataclass(frozen=True)
class FingertipStep:
    """The kinematic fingertip during one step, in body coordinates: centre p_BF (K, 2) at
    the step's start, velocity v_BF (K, 2) [m/s], radius [m], friction mu [-], step h [s]."""

    p_BF: FloatArray
    v_BF: FloatArray
    radius: float
    mu: float
    h: float


@dataclass(frozen=True)
class StepResult:
    """One step for K hypotheses.

    nu: (K, 3) body twist after the step. impulse_B: (K, 2) pusher impulse on the object
    in the body frame [N s]. general: (K,) True where the general problem was solved (no
    explicit mode held). qp: (K,) True where that needed the QP (the compiled active set
    did not settle).
    pinned: (K,) the cell held at zero velocity by static friction, or -1.
    spin_mode: (K,) one of the SPIN_* modes of :mod:`slide_core.physics.modes`.
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
    qp: NDArray[np.bool_]


def general_rows(
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


def stops(
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


def fingertip_contact(model: RigidModel, finger: FingertipStep) -> Contact:
    """The fingertip's contact rows against the closest point of the object (its outline,
    or its cells' squares)."""
    q, n_out, signed = model.contact(finger.p_BF)
    gap = signed - finger.radius
    t_dir = n_out @ S90.T
    Jq = model.point_jacobian(q)
    v_BF = finger.v_BF
    return Contact(
        n_out=n_out,
        t_dir=t_dir,
        g_n=np.einsum('kij,ki->kj', Jq, n_out),
        g_t=np.einsum('kij,ki->kj', Jq, t_dir),
        o_n=-(np.einsum('ki,ki->k', n_out, v_BF) + gap / finger.h),
        vt_F=np.einsum('ki,ki->k', t_dir, v_BF),
        touching=gap < finger.h * np.linalg.norm(v_BF, axis=1) + 1e-3,
        mu=finger.mu,
    )


def _breakaway(
    pb: ModeProblem,
    M_inv: FloatArray,
    P: FloatArray,
    g: FloatArray,
    active: NDArray[np.bool_],
    resting: NDArray[np.bool_],
    breaking: NDArray[np.bool_],
    guess: FloatArray,
) -> FloatArray:
    """Resting cells (not held) slide against the polygon vertex that their velocity
    selects; guess it from the motion without them, then from each attempt. Returns the
    vertex directions (K, n, 2) of the hypotheses this solved."""
    K, n = resting.shape
    model, nu = pb.model, pb.nu
    vertex_out = np.zeros((K, n, 2))
    for _ in range(4):
        if not breaking.any():
            break
        u_g = np.einsum('nij,kj->kni', model.J, guess)
        pick = np.argmax(np.einsum('kni,kji->knj', u_g, pb.polygons), axis=2)  # (K, n)
        pb.vertex_dirs[:] = (
            np.take_along_axis(pb.polygons[:, None, :, :], pick[..., None, None], 2)[:, :, 0]
            * resting[..., None]
        )
        g_b = np.where(resting[..., None], np.einsum('nij,kni->knj', model.J, pb.vertex_dirs), g)
        nu_0b = nu + np.einsum(
            'kij,kj->ki', M_inv, P - np.einsum('kn,knj->kj', pb.L * active, g_b)
        )
        before = pb.solved.copy()
        first = enumerate_modes(pb, breaking, nu_0b, g_b, active, np.full(K, -1), resting)
        newly = pb.solved & ~before
        vertex_out[newly] = pb.vertex_dirs[newly]
        breaking = breaking & ~pb.solved
        guess = np.where(np.isnan(first), guess, first)
    return vertex_out


def _general(
    model: RigidModel,
    M: FloatArray,
    M_inv: FloatArray,
    pb: ModeProblem,
    P: FloatArray,
    j: int,
) -> tuple[
    FloatArray,
    FloatArray,
    tuple[FloatArray, FloatArray, FloatArray, NDArray[np.int64], MlcpSolution],
    bool,
]:
    """Hypothesis j by the general solver: twist, pusher impulse, the solution, and whether
    the QP was needed (:func:`slide_core.physics.mlcp.solve_rigid`)."""
    G, E, Lg, cells = general_rows(model, pb.nu[j], pb.L[j], float(pb.L_tau[j]), pb.angles[j])
    o = np.zeros(G.shape[0])
    tip = None
    c = pb.contact
    impulse = np.zeros(2)
    if c is not None and c.touching[j]:
        r0, g0 = G.shape[0], E.shape[1]
        G = np.vstack((G, c.g_t[j], -c.g_t[j]))
        o = np.concatenate((o, [-c.vt_F[j], c.vt_F[j]]))
        E = np.pad(E, ((0, 2), (0, 1)))
        E[r0:, g0] = 1.0
        Lg = np.concatenate((Lg, [0.0]))
        tip = Fingertip(g_n=c.g_n[j], o_n=float(c.o_n[j]), group=g0, mu=c.mu)
        cells = np.concatenate((cells, [-2, -2]))
    sol, qp = solve_rigid(M[j], pb.nu[j] + M_inv[j] @ P[j], G, o, E, Lg, finger=tip)
    if tip is not None and c is not None:
        r0 = G.shape[0] - 2
        lam_t = sol.lam[r0] - sol.lam[r0 + 1]
        impulse = -(c.n_out[j] * sol.lam_n + c.t_dir[j] * lam_t)
    return sol.v, impulse, (G, E, Lg, cells, sol), qp


def fast_step(
    model: RigidModel,
    M: FloatArray,
    M_inv: FloatArray,
    L: FloatArray,
    L_tau: FloatArray,
    nu: FloatArray,
    P: FloatArray,
    finger: FingertipStep | None,
    keep_solutions: bool = False,
) -> StepResult:
    """One step for K hypotheses in body coordinates.

    nu (K, 3) twist before the step, P (K, 3) applied generalised impulse (wrench mode),
    finger: the kinematic fingertip during the step, or None. M, M_inv (K, 3, 3) mass
    matrices and inverses; L (K, n), L_tau (K,) friction impulse limits.

    Hypotheses whose solution none of the explicit cases gives go to the general solver
    (the problem's velocity solution is unique, so the first case that meets all
    complementarity conditions is the solution).
    """
    K = nu.shape[0]
    n = model.grid.n
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
    spinning = np.abs(nu[:, 2]) * model.grid.cell_size > MOVING_SPEED
    contact = fingertip_contact(model, finger) if finger is not None else None
    touching = contact.touching if contact is not None else np.zeros(K, dtype=bool)
    # Polygon orientation per hypothesis: along the fingertip's push, else the force.
    along = P[:, :2].copy()
    if contact is not None:
        along[touching] = -contact.n_out[touching]
    angles = polygon_angles(along)
    phi = angles[:, None] + 2.0 * np.pi * np.arange(N_PYRAMID)[None, :] / N_PYRAMID
    pb = ModeProblem(
        model=model,
        M_inv=M_inv,
        L=L,
        L_tau=L_tau,
        nu=nu,
        spinning=spinning,
        angles=angles,
        polygons=np.stack((np.cos(phi), np.sin(phi)), axis=2),  # (K, N_PYRAMID, 2)
        contact=contact,
        vertex_dirs=np.zeros((K, n, 2)),
        nu_new=np.zeros((K, 3)),
        impulse_B=np.zeros((K, 2)),
        spin_mode=np.full(K, -1, dtype=np.int64),
        solved=np.zeros(K, dtype=bool),
    )
    # A body at rest with nothing acting on it (no applied impulse, a fingertip that does
    # not reach it during this step) stays at rest.
    reached = touching & (contact.o_n > 0.0) if contact is not None else touching
    idle = (n_rest == active.sum(axis=1)) & ~spinning & np.all(P == 0.0, axis=1) & ~reached
    pb.solved |= idle
    pb.spin_mode[idle] = SPIN_STUCK

    no_vertex = np.zeros((K, n), dtype=bool)
    enumerate_modes(pb, (n_rest <= 1) & ~pb.solved, nu_0, g, sliding, pinned, no_vertex)
    breaking = ~pb.solved & (n_rest >= 1)
    vertex_out = _breakaway(pb, M_inv, P, g, active, resting, breaking, nu_0.copy())
    pinned = np.where(np.any(vertex_out != 0.0, axis=(1, 2)), -1, pinned)

    # Coming to rest: with every cell sliding (one friction row each, impulse in [0, L_i])
    # and no fingertip, the body stops within the step if friction impulses within their
    # limits can absorb its momentum. Any such impulses satisfy every complementarity
    # condition with v' = 0, and the velocity solution is unique: a bounded least-squares
    # feasibility check decides it.
    stopped = np.zeros(K, dtype=bool)
    for j in np.nonzero(~pb.solved & (n_rest == 0) & ~touching)[0]:
        if stops(model, M[j], nu[j], P[j], g[j], L[j] * sliding[j], float(L_tau[j]), nu[j, 2]):
            pb.nu_new[j] = 0.0
            pb.impulse_B[j] = 0.0
            pb.spin_mode[j] = SPIN_STUCK if not spinning[j] else SPIN_FREE
            pb.solved[j] = True
            stopped[j] = True

    general = ~pb.solved
    qp = np.zeros(K, dtype=bool)
    solutions = {}
    for j in np.nonzero(general)[0]:
        pb.nu_new[j], pb.impulse_B[j], solution, qp[j] = _general(model, M, M_inv, pb, P, int(j))
        if keep_solutions:
            solutions[int(j)] = solution
    return StepResult(
        pb.nu_new, pb.impulse_B, general, pinned, pb.spin_mode, solutions, vertex_out, stopped, qp
    )
