"""Compiled rollouts of the fast simulator: every hypothesis and step in one call, each
step's problem solved by :func:`slide_core.physics.kernels.solve_pieces_into`."""

from __future__ import annotations

import math

from numba import njit
import numpy as np

from slide_core.physics.kernels import STATUS_OK, solve_pieces_into
from slide_core.physics.kernels_outline import outline_contact
from slide_core.physics.kernels_pieces import dot3
from slide_core.physics.rigid import MOVING_SPEED, N_PYRAMID

_TWO_PI = 2.0 * math.pi


@njit(cache=True)
def _step(
    r_B: np.ndarray,
    w: float,
    outline: np.ndarray,
    M: np.ndarray,
    Minv: np.ndarray,
    L: np.ndarray,
    L_tau: float,
    nu: np.ndarray,
    P: np.ndarray,
    has_tip: bool,
    p_BF: np.ndarray,
    v_BF: np.ndarray,
    radius: float,
    mu_F: float,
    h: float,
    A: np.ndarray,
    c: np.ndarray,
    gstart: np.ndarray,
    gw: np.ndarray,
    weights: np.ndarray,
    nu_new: np.ndarray,
    imp_B: np.ndarray,
    info: np.ndarray,
    pi: np.ndarray,
    iw: np.ndarray,
    fm: np.ndarray,
    fv: np.ndarray,
    sv: np.ndarray,
) -> int:
    """One step of one hypothesis in body coordinates (see :func:`fast_step`'s model):
    the twist after it into ``nu_new`` (3,), the pusher's impulse into ``imp_B`` (2,), the
    active-set iterations into ``info[0]`` (0: explicit, the body stayed at rest or every
    friction stayed saturated). pi, iw, fm,
    fv: :func:`solve_pieces_into`'s work space; sv (4, 3) this function's."""
    n = r_B.shape[0]
    half = w / 2.0
    touching = False
    reached = False
    nx = 1.0
    ny = 0.0
    gn = sv[0]
    gn[:] = 0.0
    on = 0.0
    vt = 0.0
    if has_tip:
        if outline.shape[0] > 0:  # the real outline: signed distance, outward normal
            qx, qy, nx, ny, best = outline_contact(p_BF[0], p_BF[1], outline)
        else:  # the cells' squares
            best = np.inf
            qx = 0.0
            qy = 0.0
            for i in range(n):
                cx = r_B[i, 0] + min(max(p_BF[0] - r_B[i, 0], -half), half)
                cy = r_B[i, 1] + min(max(p_BF[1] - r_B[i, 1], -half), half)
                dist = math.sqrt((p_BF[0] - cx) ** 2 + (p_BF[1] - cy) ** 2)
                if dist < best:
                    best = dist
                    qx = cx
                    qy = cy
            if best > 0.0:
                nx = (p_BF[0] - qx) / best
                ny = (p_BF[1] - qy) / best
        gap = best - radius
        gn[0] = nx
        gn[1] = ny
        gn[2] = -qy * nx + qx * ny
        on = -(nx * v_BF[0] + ny * v_BF[1] + gap / h)
        tx = -ny
        ty = nx
        vt = tx * v_BF[0] + ty * v_BF[1]
        touching = gap < h * math.sqrt(v_BF[0] ** 2 + v_BF[1] ** 2) + 1e-3
        reached = touching and on > 0.0
    # Resting cells' friction polygons point along the push (see polygon_angles).
    ax = P[0]
    ay = P[1]
    if touching:
        ax = -nx
        ay = -ny
    angle = math.atan2(ay, ax) if (ax != 0.0 or ay != 0.0) else 0.0
    spinning = abs(nu[2]) * w > MOVING_SPEED
    # Pieces of every friction group, and the sliding friction for the start point.
    np_ = 0
    ng = 0
    n_rest = 0
    n_active = 0
    f0 = sv[1]
    f0[:] = 0.0
    for i in range(n):
        if L[i] <= 0.0:
            continue
        n_active += 1
        rx = r_B[i, 0]
        ry = r_B[i, 1]
        ux = nu[0] - ry * nu[2]
        uy = nu[1] + rx * nu[2]
        sp = math.sqrt(ux * ux + uy * uy)
        gstart[ng] = np_
        A[np_, 0] = 0.0
        A[np_, 1] = 0.0
        A[np_, 2] = 0.0
        c[np_] = 0.0
        np_ += 1
        if sp > MOVING_SPEED:
            dx = ux / sp
            dy = uy / sp
            A[np_, 0] = dx
            A[np_, 1] = dy
            A[np_, 2] = -ry * dx + rx * dy
            c[np_] = 0.0
            f0[0] += L[i] * A[np_, 0]
            f0[1] += L[i] * A[np_, 1]
            f0[2] += L[i] * A[np_, 2]
            np_ += 1
        else:
            n_rest += 1
            for j in range(N_PYRAMID):
                phi = angle + _TWO_PI * j / N_PYRAMID
                px = math.cos(phi)
                py = math.sin(phi)
                A[np_, 0] = px
                A[np_, 1] = py
                A[np_, 2] = -ry * px + rx * py
                c[np_] = 0.0
                np_ += 1
        gw[ng] = L[i]
        ng += 1
    if L_tau > 0.0:
        gstart[ng] = np_
        A[np_, 0] = 0.0
        A[np_, 1] = 0.0
        A[np_, 2] = 0.0
        c[np_] = 0.0
        np_ += 1
        if spinning:
            s = math.copysign(1.0, nu[2])
            A[np_, 0] = 0.0
            A[np_, 1] = 0.0
            A[np_, 2] = s
            c[np_] = 0.0
            f0[2] += L_tau * s
            np_ += 1
        else:
            for s in (1.0, -1.0):
                A[np_, 0] = 0.0
                A[np_, 1] = 0.0
                A[np_, 2] = s
                c[np_] = 0.0
                np_ += 1
        gw[ng] = L_tau
        ng += 1
    tip_g = -1
    tip_p = 0
    if touching:
        tip_g = ng
        gstart[ng] = np_
        A[np_, 0] = 0.0
        A[np_, 1] = 0.0
        A[np_, 2] = 0.0
        c[np_] = 0.0
        np_ += 1
        tip_p = np_
        gt2 = -qy * (-ny) + qx * nx
        for s in (1.0, -1.0):
            A[np_, 0] = s * (-ny)
            A[np_, 1] = s * nx
            A[np_, 2] = s * gt2
            c[np_] = -s * vt
            np_ += 1
        gw[ng] = 0.0
        ng += 1
    gstart[ng] = np_
    imp_B[0] = 0.0
    imp_B[1] = 0.0
    # A body at rest with nothing acting on it stays at rest.
    if (
        n_rest == n_active
        and not spinning
        and P[0] == 0.0
        and P[1] == 0.0
        and P[2] == 0.0
        and not reached
    ):
        nu_new[:] = 0.0
        info[0] = 0
        return STATUS_OK
    a = sv[2]
    v = sv[3]
    for i in range(3):
        a[i] = nu[i] + Minv[i, 0] * P[0] + Minv[i, 1] * P[1] + Minv[i, 2] * P[2]
    for i in range(3):  # every sliding cell saturated: the usual solution
        v[i] = a[i] - (Minv[i, 0] * f0[0] + Minv[i, 1] * f0[1] + Minv[i, 2] * f0[2])
    if n_rest == 0 and not touching and (spinning or L_tau <= 0.0):
        # It is the solution when every cell and the spin keep moving forward.
        forward = True
        for g in range(ng):
            p = gstart[g] + 1
            if dot3(A, p, v) < 0.0:
                forward = False
                break
        if forward:
            nu_new[:] = v
            info[0] = 0
            return STATUS_OK
    status, lam_n, info[0] = solve_pieces_into(
        M,
        Minv,
        a,
        A,
        c,
        gstart,
        gw,
        ng,
        touching,
        gn,
        on,
        tip_g,
        mu_F,
        v,
        weights,
        pi,
        iw,
        fm,
        fv,
    )
    nu_new[:] = v
    if touching:
        lam_t = gw[tip_g] * (weights[tip_p] - weights[tip_p + 1])
        imp_B[0] = -(nx * lam_n + (-ny) * lam_t)
        imp_B[1] = -(ny * lam_n + nx * lam_t)
    return status


@njit(cache=True)
def rollout(
    r_B: np.ndarray,
    p_OG: np.ndarray,
    w: float,
    outline: np.ndarray,
    M: np.ndarray,
    Minv: np.ndarray,
    L: np.ndarray,
    L_tau: np.ndarray,
    L_tip: np.ndarray,
    h_push: np.ndarray,
    c_B: np.ndarray,
    h: float,
    fingertip: bool,
    f_W: np.ndarray,
    r_c: np.ndarray,
    tau: np.ndarray,
    p_WF: np.ndarray,
    radius: float,
    mu_F: float,
    p: np.ndarray,
    th: np.ndarray,
    v: np.ndarray,
    X: np.ndarray,
    V: np.ndarray,
    F: np.ndarray,
    k0: int,
    t0: int,
) -> tuple[int, int]:
    """Simulate hypotheses k0.. of a push from step t0 (of hypothesis k0), in place.

    Per hypothesis: M, Minv (K, 3, 3), cell limits L (K, n) [N s], torsion limit L_tau (K,),
    the limits' change per unit table-plane moment along x and y L_tip (K, 2, n) [s/m]
    (:func:`tipping_limits`) and the push force's height over each cell h_push (n,) [m]
    (zero size: the push has no moment), centre of mass c_B (K, 2) about G; r_B (n, 2)
    cells about G, p_OG (2,), cell size w, step h. Wrench push: f_W (T, 2) [N], r_c (T, 2)
    application point about G, tau (T,); fingertip push: p_WF (T+1, 2), radius, mu_F, the
    fingertip against the polygon outline (V, 2) about G (V = 0: against the cells'
    squares). State (updated): centre of mass p (K, 2), yaw th (K,), its twist v (K, 3).
    Outputs X, V (K, T+1, 3) and F (K, T, 2) as in :class:`Rollout`. Returns (k, t) of a
    step the active set did not settle (the caller solves it and resumes at (k, t + 1)), or
    (-1, -1) when done.
    """
    K = M.shape[0]
    n = r_B.shape[0]
    T = F.shape[1]
    n_pieces = (N_PYRAMID + 1) * n + 6
    A = np.zeros((n_pieces, 3))
    c = np.zeros(n_pieces)
    gstart = np.zeros(n + 3, dtype=np.int64)
    gw = np.zeros(n + 2)
    weights = np.zeros(n_pieces)
    nu = np.zeros(3)
    P = np.zeros(3)
    nu_new = np.zeros(3)
    imp = np.zeros(2)
    info = np.zeros(1, dtype=np.int64)
    pi = np.zeros(n + 2, dtype=np.int64)
    iw = np.zeros(10, dtype=np.int64)
    fm = np.zeros((4, 3, 4))
    fv = np.zeros((8, 3))
    sv = np.zeros((4, 3))
    p_BF = np.zeros(2)
    v_BF = np.zeros(2)
    tipping = h_push.shape[0] > 0
    L_t = np.zeros(n)
    for k in range(k0, K):
        start = t0 if k == k0 else 0
        cx = c_B[k, 0]
        cy = c_B[k, 1]
        if start == 0:
            _record(p_OG, c_B, p, th, v, X, V, k, 0)
        for t in range(start, T):
            cs = math.cos(th[k])
            sn = math.sin(th[k])
            om = v[k, 2]
            nu[0] = cs * v[k, 0] + sn * v[k, 1] + om * cy
            nu[1] = -sn * v[k, 0] + cs * v[k, 1] - om * cx
            nu[2] = om
            fbx = 0.0
            fby = 0.0
            if not fingertip:
                fx = f_W[t, 0]
                fy = f_W[t, 1]
                fbx = cs * fx + sn * fy
                fby = -sn * fx + cs * fy
                P[0] = h * fbx
                P[1] = h * fby
                P[2] = h * (r_c[t, 0] * fby - r_c[t, 1] * fbx + tau[t])
            else:
                P[:] = 0.0
                gx = p[k, 0] - (cs * cx - sn * cy)
                gy = p[k, 1] - (sn * cx + cs * cy)
                dx = p_WF[t, 0] - gx
                dy = p_WF[t, 1] - gy
                p_BF[0] = cs * dx + sn * dy
                p_BF[1] = -sn * dx + cs * dy
                vx = (p_WF[t + 1, 0] - p_WF[t, 0]) / h
                vy = (p_WF[t + 1, 1] - p_WF[t, 1]) / h
                v_BF[0] = cs * vx + sn * vy
                v_BF[1] = -sn * vx + cs * vy
            if tipping:
                # The push force of this step (a fingertip's: of the step before, in this
                # step's body frame), at the height of the cell nearest where it acts, tips
                # the table's pressure towards it.
                if fingertip:
                    fx = F[k, t - 1, 0] if t > 0 else 0.0
                    fy = F[k, t - 1, 1] if t > 0 else 0.0
                    fbx = cs * fx + sn * fy
                    fby = -sn * fx + cs * fy
                    qx, qy = p_BF[0], p_BF[1]
                else:
                    qx, qy = r_c[t, 0], r_c[t, 1]
                hz = h_push[_nearest(r_B, qx, qy)]
                for i in range(n):
                    L_t[i] = max(0.0, L[k, i] + hz * (fbx * L_tip[k, 0, i] + fby * L_tip[k, 1, i]))
            else:
                L_t[:] = L[k]
            status = _step(
                r_B,
                w,
                outline,
                M[k],
                Minv[k],
                L_t,
                L_tau[k],
                nu,
                P,
                fingertip,
                p_BF,
                v_BF,
                radius,
                mu_F,
                h,
                A,
                c,
                gstart,
                gw,
                weights,
                nu_new,
                imp,
                info,
                pi,
                iw,
                fm,
                fv,
                sv,
            )
            if status != STATUS_OK:
                return k, t
            if fingertip:
                F[k, t, 0] = (cs * imp[0] - sn * imp[1]) / h
                F[k, t, 1] = (sn * imp[0] + cs * imp[1]) / h
            else:
                F[k, t, 0] = f_W[t, 0]
                F[k, t, 1] = f_W[t, 1]
            om = nu_new[2]
            vbx = nu_new[0] - om * cy
            vby = nu_new[1] + om * cx
            v[k, 0] = cs * vbx - sn * vby
            v[k, 1] = sn * vbx + cs * vby
            v[k, 2] = om
            p[k, 0] += h * v[k, 0]
            p[k, 1] += h * v[k, 1]
            th[k] += h * om
            _record(p_OG, c_B, p, th, v, X, V, k, t + 1)
    return -1, -1


@njit(cache=True)
def _nearest(r_B: np.ndarray, x: float, y: float) -> int:
    """Index of the cell centre r_B (n, 2) nearest (x, y)."""
    best, j = np.inf, 0
    for i in range(r_B.shape[0]):
        d = (r_B[i, 0] - x) ** 2 + (r_B[i, 1] - y) ** 2
        if d < best:
            best, j = d, i
    return j


@njit(cache=True)
def _record(
    p_OG: np.ndarray,
    c_B: np.ndarray,
    p: np.ndarray,
    th: np.ndarray,
    v: np.ndarray,
    X: np.ndarray,
    V: np.ndarray,
    k: int,
    t: int,
) -> None:
    cs = math.cos(th[k])
    sn = math.sin(th[k])
    ox = p_OG[0] + c_B[k, 0]
    oy = p_OG[1] + c_B[k, 1]
    X[k, t, 0] = p[k, 0] - (cs * ox - sn * oy)
    X[k, t, 1] = p[k, 1] - (sn * ox + cs * oy)
    X[k, t, 2] = th[k]
    V[k, t, 0] = v[k, 0]
    V[k, t, 1] = v[k, 1]
    V[k, t, 2] = v[k, 2]


def warm_up() -> None:
    """Load this module's compiled functions (from numba's disk cache, or compile them):
    a process's first call otherwise pays for it (a second or more)."""
    r_B = np.array([[-0.01, 0.0], [0.01, 0.0]])
    M = np.tile(np.diag([0.02, 0.02, 1e-5]), (1, 1, 1))
    X = np.zeros((1, 3, 3))
    outline = np.zeros((0, 2))
    for fingertip in (False, True):
        rollout(
            r_B, np.zeros(2), 0.02, outline, M, np.linalg.inv(M), np.full((1, 2), 1e-4),
            np.full(1, 1e-6), np.zeros((1, 2, 2)), np.full(2, 0.01), np.zeros((1, 2)), 0.01,
            fingertip, np.ones((2, 2)), np.zeros((2, 2)), np.zeros(2),
            np.array([[-0.03, 0.0], [-0.02, 0.0], [-0.01, 0.0]]), 0.008, 0.3, np.zeros((1, 2)),
            np.zeros(1), np.zeros((1, 3)), X.copy(), X.copy(), np.zeros((1, 2, 2)), 0, 0,
        )  # fmt: skip
