"""The reference simulator: the paper's per-cell formulation, solved step by step.

Every cell keeps its own 3-DOF state ``(x, y, theta)`` and velocity; adjacent cells are
welded by the constraint Jacobian ``J_e``; each cell has its own support friction rows
built from its previous velocity; each step's complementarity problem (Fig. 2) is solved
with :func:`slide_core.mlcp.solve_mlcp`. The discrete model, and where it departs from
the paper's equations to make them consistent, is described in :mod:`slide_core.physics`.

This simulator exists to check the fast one: it is slow (one QP of about ``3n`` velocities
and ``3(n-1)`` weld rows per step) and is not used by identification or planning.

Positions: after each step every cell moves by ``h`` times its own velocity (the paper's
Euler step); the welded velocities are rigid but their Euler step is not exactly, so the
cell poses are then projected back onto the rigid shape (common orientation, centre of
mass kept) to stop the cells from drifting apart over a long push, and the cell velocities
are re-expressed from the body's momentum and spin at the projected poses (each cell's
velocity vector turns with the body, as a material point's does).
"""

from __future__ import annotations

from collections import deque
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.geometry import FloatArray, Grid, rotation
from slide_core.physics.inputs import (
    FingertipPush,
    PhysicsError,
    Push,
    Rollout,
    WrenchPush,
    check_params,
)
from slide_core.physics.kernels_outline import outline_contact
from slide_core.physics.mlcp import Fingertip, solve_mlcp
from slide_core.physics.rigid import (
    MOVING_SPEED,
    S90,
    SPIN_ARM,
    RigidModel,
    friction_limits,
    polygon_angles,
    polygon_directions,
    start_state,
)
from slide_core.physics.simulate import check_fingertip_start
from slide_core.physics.support import DEFAULT_SUPPORT


def weld_tree(grid: Grid) -> NDArray[np.int64]:
    """(n-1, 2) adjacent cell pairs forming a spanning tree of the grid (breadth first).

    Raises ValueError if the cells are not 4-connected (no rigid object).
    """
    pairs = grid.adjacent_pairs()
    neighbours: list[list[int]] = [[] for _ in range(grid.n)]
    for a, b in pairs:
        neighbours[a].append(int(b))
        neighbours[b].append(int(a))
    seen = np.zeros(grid.n, dtype=bool)
    seen[0] = True
    queue = deque([0])
    tree: list[tuple[int, int]] = []
    while queue:
        a = queue.popleft()
        for b in neighbours[a]:
            if not seen[b]:
                seen[b] = True
                tree.append((a, b))
                queue.append(b)
    if not seen.all():
        # (the fast simulator takes such a footprint as one rigid body: an arch on two feet)
        raise PhysicsError(
            'the reference simulator welds 4-connected cells only, and these are in '
            'several pieces: use simulate() for a footprint in pieces'
        )
    return np.array(tree, dtype=np.int64).reshape(-1, 2)


def _weld_jacobian(p: FloatArray, th: FloatArray, tree: NDArray[np.int64]) -> FloatArray:
    """J_e (3(n-1), 3n): equal spin and equal velocity of each pair's shared edge midpoint."""
    n = p.shape[0]
    J = np.zeros((3 * tree.shape[0], 3 * n))
    for k, (a, b) in enumerate(tree):
        m = 0.5 * (p[a] + p[b])  # midpoint of the shared edge (cells are squares)
        for cell, sign in ((a, 1.0), (b, -1.0)):
            r = m - p[cell]
            J[3 * k : 3 * k + 2, 3 * cell : 3 * cell + 2] = sign * np.eye(2)
            J[3 * k : 3 * k + 2, 3 * cell + 2] = sign * (S90 @ r)
            J[3 * k + 2, 3 * cell + 2] = sign
    return J


def _fingertip_contact(
    push: FingertipPush,
    t: int,
    p: FloatArray,
    Rc: FloatArray,
    w: float,
    h: float,
    outline_B: FloatArray,
) -> tuple[int, FloatArray, FloatArray, float, FloatArray] | None:
    """The fingertip's contact at step t, when it touches (or will within the step):
    (cell, closest point q (world), outward normal, gap [m], fingertip velocity). The
    object is its cells' squares, or its real outline ``outline_B`` (V, 2) about the
    cells' centroid G (V > 0), touched through the cell nearest the contact."""
    p_F = push.p_WF[t]
    v_F = (push.p_WF[t + 1] - p_F) / h
    if outline_B.shape[0]:
        p_G = p.mean(axis=0)  # the welded cells' centroid
        local_B = (p_F - p_G) @ Rc
        qx, qy, nx, ny, signed = outline_contact(float(local_B[0]), float(local_B[1]), outline_B)
        gap = signed - push.radius
        if gap >= h * float(np.linalg.norm(v_F)) + 1e-3:
            return None
        q = p_G + Rc @ np.array([qx, qy])
        c = int(np.argmin(np.max(np.abs((p - q) @ Rc), axis=1)))  # the cell holding q
        return c, q, np.asarray(Rc @ np.array([nx, ny]), dtype=float), gap, v_F
    local = (p_F - p) @ Rc  # fingertip in each cell's frame
    q_local = np.clip(local, -w / 2.0, w / 2.0)
    dist = np.linalg.norm(local - q_local, axis=1)
    c = int(np.argmin(dist))
    gap = float(dist[c]) - push.radius
    if gap >= h * float(np.linalg.norm(v_F)) + 1e-3:
        return None
    q = p[c] + Rc @ q_local[c]
    n_out = (p_F - q) / dist[c] if dist[c] > 0 else Rc @ np.array([1.0, 0.0])
    return c, q, np.asarray(n_out, dtype=float), gap, v_F


def simulate_reference(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    push: Push,
    X_WO0: ArrayLike,
    V_WO0: ArrayLike | None = None,
    support: str = DEFAULT_SUPPORT,
) -> Rollout:
    """Simulate a push with the per-cell reference model (one hypothesis).

    Arguments as :func:`slide_core.physics.simulate`; ``mass`` must be positive in every
    cell (the per-cell mass matrix is inverted). Returns a Rollout with K = 1.
    """
    m2, mu2 = check_params(grid, mass, friction)
    if m2.shape[0] != 1:
        raise ValueError('the reference simulator takes one hypothesis: mass and friction (n,)')
    m = m2[0]
    if np.any(m <= 0):
        raise ValueError('the reference simulator needs a positive mass in every cell')
    model = RigidModel.of(grid, support)
    tree = weld_tree(grid)
    n, w, h, T = grid.n, grid.cell_size, push.dt, push.steps
    L, _ = friction_limits(model, m2, mu2, h)
    L_cell = L[0]
    L_spin = SPIN_ARM * w * L_cell  # per-cell torsion limits
    Mdiag = np.repeat(m, 3)
    Mdiag[2::3] = m * w**2 / 6.0
    M = np.diag(Mdiag)
    M_inv = np.diag(1.0 / Mdiag)

    c_B = model.com(m2)
    p_C, th_arr, v_C = start_state(model, X_WO0, V_WO0, c_B)
    th = float(th_arr[0])
    r_C = model.r_B - c_B[0]  # cell centres relative to the centre of mass, body frame
    if isinstance(push, FingertipPush):
        p_WG = p_C - rotation(th) @ c_B[0]
        check_fingertip_start(model, push.p_WF[0], push.radius, p_WG, th_arr)
    r_W = r_C @ rotation(th).T
    p = p_C[0] + r_W  # (n, 2) cell positions
    vel = np.zeros((n, 3))
    vel[:, :2] = v_C[0, :2] + v_C[0, 2] * (r_W @ S90.T)
    vel[:, 2] = v_C[0, 2]
    cells_th = np.full(n, th)

    X = np.zeros((1, T + 1, 3))
    V = np.zeros((1, T + 1, 3))
    F = np.zeros((1, T, 2))

    def record(t: int) -> None:
        c = m @ p / m.sum()
        X[0, t, :2] = c - rotation(cells_th[0]) @ (model.p_OG + c_B[0])
        X[0, t, 2] = cells_th[0]
        V[0, t] = [*(m @ vel[:, :2] / m.sum()), vel[0, 2]]

    record(0)
    for t in range(T):
        P = np.zeros(3 * n)
        rows: list[FloatArray] = []
        offsets: list[float] = []
        groups: list[int] = []
        limits: list[float] = []
        finger = None
        Rc = rotation(cells_th[0])
        contact = None
        if isinstance(push, FingertipPush):
            contact = _fingertip_contact(push, t, p, Rc, w, h, model.outline_B)
        # Friction polygons of resting cells: turned like the fast simulator's (a vertex
        # along the fingertip's push or the applied force, else the body's x axis).
        if contact is not None:
            along = -contact[2]
        elif isinstance(push, WrenchPush):
            along = push.f_W[t]
        else:
            along = np.zeros(2)
        angle = float(polygon_angles(along[None])[0]) if np.any(along) else cells_th[0]
        polygon = polygon_directions(angle)
        # Support friction: per cell, translation and spin.
        for i in range(n):
            if L_cell[i] <= 0:
                continue
            u = vel[i, :2]
            s = float(np.linalg.norm(u))
            dirs = (u / s)[None, :] if s > MOVING_SPEED else polygon
            gid = len(limits)
            limits.append(float(L_cell[i]))
            for dvec in dirs:
                row = np.zeros(3 * n)
                row[3 * i : 3 * i + 2] = dvec
                rows.append(row)
                offsets.append(0.0)
                groups.append(gid)
            gid = len(limits)
            limits.append(float(L_spin[i]))
            spinning = abs(vel[i, 2]) * w > MOVING_SPEED
            for sgn in [math.copysign(1.0, vel[i, 2])] if spinning else [1.0, -1.0]:
                row = np.zeros(3 * n)
                row[3 * i + 2] = sgn
                rows.append(row)
                offsets.append(0.0)
                groups.append(gid)
        if isinstance(push, WrenchPush):
            p_C = p.mean(axis=0) + Rc @ (push.p_OA[t] - model.p_OG)  # p.mean() is G
            c = int(np.argmin(np.max(np.abs((p - p_C) @ Rc), axis=1)))
            f = push.f_W[t]
            r = p_C - p[c]
            P[3 * c : 3 * c + 2] = h * f
            P[3 * c + 2] = h * (r[0] * f[1] - r[1] * f[0] + push.tau[t])
        elif contact is not None:
            c, q, n_out, gap, v_F = contact
            t_dir = S90 @ n_out
            r = q - p[c]
            g_n = np.zeros(3 * n)
            g_n[3 * c : 3 * c + 2] = n_out
            g_n[3 * c + 2] = r[0] * n_out[1] - r[1] * n_out[0]
            g_t = np.zeros(3 * n)
            g_t[3 * c : 3 * c + 2] = t_dir
            g_t[3 * c + 2] = r[0] * t_dir[1] - r[1] * t_dir[0]
            gid = len(limits)
            limits.append(0.0)
            vt = float(t_dir @ v_F)
            rows += [g_t, -g_t]
            offsets += [-vt, vt]
            groups += [gid, gid]
            finger = (g_n, -(float(n_out @ v_F) + gap / h), gid, n_out, t_dir)
        G = np.array(rows).reshape(-1, 3 * n)
        E = np.zeros((G.shape[0], len(limits)))
        E[np.arange(G.shape[0]), groups] = 1.0
        J_e = _weld_jacobian(p, cells_th, tree)
        tip = None
        if finger is not None:
            tip = Fingertip(g_n=finger[0], o_n=finger[1], group=finger[2], mu=push.mu)  # type: ignore[union-attr]
        sol = solve_mlcp(
            M, vel.ravel() + M_inv @ P, G, np.array(offsets), E, np.array(limits), J_e, tip
        )
        vel = sol.v.reshape(n, 3)
        if isinstance(push, WrenchPush):
            F[0, t] = push.f_W[t]
        elif finger is not None:
            r0 = G.shape[0] - 2
            lam_t = sol.lam[r0] - sol.lam[r0 + 1]
            F[0, t] = -(finger[3] * sol.lam_n + finger[4] * lam_t) / h
        # The paper's per-cell Euler step, then back onto the rigid shape keeping the
        # centre of mass, and the cell velocities re-expressed from the body's momentum and
        # spin at the projected poses (each turns with the body, as a material point's does).
        p = p + h * vel[:, :2]
        cells_th = cells_th + h * vel[:, 2]
        th_new = float(np.mean(cells_th))
        centre = m @ p / m.sum()
        v_C_new = m @ vel[:, :2] / m.sum()
        omega = float(np.mean(vel[:, 2]))
        r_W = r_C @ rotation(th_new).T
        p = centre + r_W
        cells_th = np.full(n, th_new)
        vel[:, :2] = v_C_new + omega * (r_W @ S90.T)
        vel[:, 2] = omega
        record(t + 1)
    return Rollout(X, V, F, general_steps=T)
