r"""Compiled inner loop of the quasi-static push model (numba, cached on disk).

:func:`push_batch` runs :func:`slide_core.physics.quasistatic.push` for B hypotheses, each
in its own start pose, step by step; the model and its algorithm are that module's.

Every one-dimensional problem of the model ("the derivative of the dissipation D along z,
minus a constant, changes sign at which a in [lo, hi]?") was solved by 22 bisections,
each a pass over the cells. Here the sign change r is found first, by Newton's method on
the derivative (its own derivative is the curvature of D along z) safeguarded by a
bracket, with the jump of the spin friction's sign at omega = 0 located in closed form,
starting from the hypothesis' answer at the last fingertip step; then the 22 bisection
steps are replayed by comparing their midpoints with r, and only a midpoint within 1e-9
of the bracket's width from r has its derivative evaluated. The answer is the
bisection's, bit for bit up to the summation order of the cells, from five or six passes
over the cells instead of 22.

The cells' friction forces enter as ``c_i = mu_i N_i`` [N] with ``N_i`` the cell's normal
load under the support model, and the torsion as ``c_tau`` [N m]: the kernel never sees
masses.
"""

from __future__ import annotations

import math

from numba import njit
import numpy as np

from slide_core.physics.kernels_outline import outline_contact

BISECTIONS = 22
"""Bisection steps of each one-dimensional problem (the model's resolution)."""
SLIP_ROUNDS = 2
"""Rounds of rotation, slip and the line search along both for a slipping contact (two
with the line search were as accurate as three, and three without it zigzagged)."""
PATTERN_REACH = 4.0
"""How far past a round's change of rotation and slip its line search looks (in rounds)."""


@njit(cache=True)
def _slope(
    c: np.ndarray,
    c_tau: float,
    rp: np.ndarray,
    bx: float,
    by: float,
    bw: float,
    zx: float,
    zy: float,
    zw: float,
    a: float,
    extra: float,
) -> tuple[float, float]:
    """Derivative of D along z at base + a z, minus ``extra``, and the derivative of its
    smooth part (the spin friction's sign term is piecewise constant)."""
    ex = bx + a * zx
    ey = by + a * zy
    ew = bw + a * zw
    g = 0.0
    h = 0.0
    for i in range(c.shape[0]):
        ux = ex + ew * rp[i, 0]
        uy = ey + ew * rp[i, 1]
        vx = zx + zw * rp[i, 0]
        vy = zy + zw * rp[i, 1]
        s = math.sqrt(ux * ux + uy * uy)
        w = c[i] / max(s, 1e-15)
        uv = ux * vx + uy * vy
        g += w * uv
        if s > 0.0:
            h += w * (vx * vx + vy * vy - uv * uv / (s * s))
    if ew > 0.0:
        g += c_tau * zw
    elif ew < 0.0:
        g -= c_tau * zw
    return g - extra, h


@njit(cache=True)
def _bisect(
    c: np.ndarray,
    c_tau: float,
    rp: np.ndarray,
    bx: float,
    by: float,
    bw: float,
    zx: float,
    zy: float,
    zw: float,
    extra: float,
    lo: float,
    hi: float,
    guess: float,
) -> float:
    """The result of BISECTIONS bisection steps on [lo, hi] for the sign change of the
    derivative of D along z (minus ``extra``), computed from the located sign change;
    ``guess`` (inside the bracket, or NaN) starts the search (the last step's answer)."""
    width = hi - lo
    tol = 1e-11 * width
    a_lo = lo
    a_hi = hi
    r = math.nan  # the sign change (the derivative is non-decreasing: D is convex)
    if zw != 0.0 and c_tau > 0.0:
        # The spin friction's sign jumps where omega = bw + a zw = 0.
        a_j = -bw / zw
        if a_lo < a_j < a_hi:
            g_j, _ = _slope(c, 0.0, rp, bx, by, bw, zx, zy, zw, a_j, extra)
            jump = c_tau * abs(zw)
            if g_j - jump <= 0.0 < g_j + jump:
                r = a_j
            elif g_j + jump <= 0.0:
                a_lo = a_j
            else:
                a_hi = a_j
    if math.isnan(r):
        # Newton steps inside the bracket; a bisection where a step would leave it or
        # does not at least halve the one before (Newton can cycle about an inflection
        # of the derivative). A tiny step is confirmed by the derivative's sign just
        # beyond it. A step out through an end of [lo, hi] tests that end once: no sign
        # change inside means every bisection step keeps one half.
        a = guess if a_lo < guess < a_hi else 0.5 * (a_lo + a_hi)
        step_old = a_hi - a_lo
        lo_tested = False
        hi_tested = False
        g, h = _slope(c, c_tau, rp, bx, by, bw, zx, zy, zw, a, extra)
        for _ in range(200):
            if g <= 0.0:
                a_lo = a
            else:
                a_hi = a
            if a_hi - a_lo <= 2.0 * tol:
                break
            newton = h > 0.0 and abs(2.0 * g) <= abs(step_old * h)
            new = a - g / h if newton else 0.5 * (a_lo + a_hi)
            if newton and new >= a_hi and a_hi == hi and not hi_tested:
                hi_tested = True
                g_e, _ = _slope(c, c_tau, rp, bx, by, bw, zx, zy, zw, hi, extra)
                if g_e <= 0.0:
                    r = math.inf
                    break
            if newton and new <= a_lo and a_lo == lo and not lo_tested:
                lo_tested = True
                g_e, _ = _slope(c, c_tau, rp, bx, by, bw, zx, zy, zw, lo, extra)
                if g_e > 0.0:
                    r = -math.inf
                    break
            if not (a_lo < new < a_hi):
                new = 0.5 * (a_lo + a_hi)
            elif abs(new - a) <= tol:
                probe = min(new + tol, a_hi) if g <= 0.0 else max(new - tol, a_lo)
                g_p, _ = _slope(c, c_tau, rp, bx, by, bw, zx, zy, zw, probe, extra)
                if g_p <= 0.0:
                    a_lo = max(a_lo, probe)
                else:
                    a_hi = min(a_hi, probe)
                if a_hi - a_lo <= 2.0 * tol:
                    break
                new = 0.5 * (a_lo + a_hi)
            step_old = abs(new - a)
            a = new
            g, h = _slope(c, c_tau, rp, bx, by, bw, zx, zy, zw, a, extra)
        if math.isnan(r):
            r = 0.5 * (a_lo + a_hi)
    near = 1e-9 * width
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        if abs(mid - r) <= near:
            g, _ = _slope(c, c_tau, rp, bx, by, bw, zx, zy, zw, mid, extra)
            up = g > 0.0
        else:
            up = mid > r
        if up:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


@njit(cache=True)
def _force(
    c: np.ndarray, c_tau: float, rp: np.ndarray, nx: float, ny: float, nw: float
) -> tuple[float, float]:
    """The force part (gx, gy) of the gradient of D at the displacement (nx, ny, nw)."""
    gx = 0.0
    gy = 0.0
    for i in range(c.shape[0]):
        ux = nx + nw * rp[i, 0]
        uy = ny + nw * rp[i, 1]
        s = math.sqrt(ux * ux + uy * uy)
        w = c[i] / max(s, 1e-15)
        gx += w * ux
        gy += w * uy
    return gx, gy


@njit(cache=True)
def push_batch(
    c: np.ndarray,
    c_tau: np.ndarray,
    r: np.ndarray,
    p_OG: np.ndarray,
    half: float,
    X0: np.ndarray,
    p0: np.ndarray,
    d: np.ndarray,
    ds: float,
    S: int,
    radius: float,
    mu_tip: float,
    X: np.ndarray,
    touching: np.ndarray,
    slipping: np.ndarray,
    c_tip: np.ndarray,
    h_push: np.ndarray,
    outline: np.ndarray,
) -> None:
    """B hypotheses pushed S fingertip steps of ``ds`` [m] along the unit direction d (2,)
    from p0 (2,), each from its pose X0 (B, 3): poses into X (B, S+1, 3), touching and
    slipping into (B, S). c (B, n) cell friction forces [N], c_tau (B,) [N m]; r (n, 2)
    cells about their centroid G, p_OG (2,) G in the object frame, half: half a cell [m].
    The push's moment: c_tip (B, 2, n) [1/m] the friction forces' change per unit
    table-plane moment along body x and y, h_push (n,) [m] the push's height on each cell
    (size 0: no moment); each step's loads tip with the force of the step before, at the
    touched cell's height. outline (V, 2): the object's real outline about G, which the
    fingertip touches instead of the cells' squares (V = 0: the squares).
    """
    B = c.shape[0]
    n = r.shape[0]
    rp = np.empty((n, 2))
    for i in range(n):
        rp[i, 0] = -r[i, 1]
        rp[i, 1] = r[i, 0]
    tipping = h_push.shape[0] > 0
    cb = np.empty(n)
    for b in range(B):
        cb[:] = c[b]
        ct = c_tau[b]
        fpx = 0.0  # the pusher's force at the last step, body frame [N]
        fpy = 0.0
        th = X0[b, 2]
        cs = math.cos(th)
        sn = math.sin(th)
        gx = X0[b, 0] + (cs * p_OG[0] - sn * p_OG[1])
        gy = X0[b, 1] + (sn * p_OG[0] + cs * p_OG[1])
        X[b, 0, 0] = X0[b, 0]
        X[b, 0, 1] = X0[b, 1]
        X[b, 0, 2] = th
        last_alpha = math.nan  # the last step's answers start the next step's searches
        last_a = math.nan
        last_beta = math.nan
        for k in range(S):
            fx = p0[0] + d[0] * ds * (k + 1)
            fy = p0[1] + d[1] * ds * (k + 1)
            cs = math.cos(th)
            sn = math.sin(th)
            # The fingertip after the step, in the body frame.
            px = cs * (fx - gx) + sn * (fy - gy)
            py = -sn * (fx - gx) + cs * (fy - gy)
            best = math.inf
            qx = 0.0
            qy = 0.0
            touched = 0
            if outline.shape[0] > 0:
                qx, qy, ox, oy, signed = outline_contact(px, py, outline)
                pen = radius - signed
                if tipping and pen > 0.0:  # the push's height: the cell under q
                    for i in range(n):
                        dist = (qx - r[i, 0]) ** 2 + (qy - r[i, 1]) ** 2
                        if dist < best:
                            best = dist
                            touched = i
            else:
                inside = False
                for i in range(n):
                    dx = px - r[i, 0]
                    dy = py - r[i, 1]
                    if abs(dx) < half and abs(dy) < half:
                        inside = True
                    cx = r[i, 0] + min(max(dx, -half), half)
                    cy = r[i, 1] + min(max(dy, -half), half)
                    dist = math.sqrt((px - cx) ** 2 + (py - cy) ** 2)
                    if dist < best:
                        best = dist
                        qx = cx
                        qy = cy
                        touched = i
                m = max(best, 1e-12)
                ox = (px - qx) / m
                oy = (py - qy) / m
                if inside:
                    ox = -ox
                    oy = -oy
                pen = best + radius if inside else radius - best
            if not pen > 0.0:
                X[b, k + 1, 0] = X[b, k, 0]
                X[b, k + 1, 1] = X[b, k, 1]
                X[b, k + 1, 2] = X[b, k, 2]
                fpx = 0.0
                fpy = 0.0
                continue
            touching[b, k] = True
            if tipping:
                hz = h_push[touched]
                for i in range(n):
                    cb[i] = max(0.0, c[b, i] + hz * (fpx * c_tip[b, 0, i] + fpy * c_tip[b, 1, i]))
            # Fingertip displacement, inward normal and tangent in the body frame.
            ddx = d[0] * ds
            ddy = d[1] * ds
            dFx = cs * ddx + sn * ddy
            dFy = -sn * ddx + cs * ddy
            inx = -ox
            iny = -oy
            tx = -iny
            ty = inx
            # Sticking: the contact point follows the fingertip; rotation about it.
            tdF = tx * dFx + ty * dFy
            bx = tx * tdF + inx * pen
            by = ty * tdF + iny * pen
            z1x = qy
            z1y = -qx
            alpha = _bisect(cb, ct, rp, bx, by, 0.0, z1x, z1y, 1.0, 0.0, -0.5, 0.5, last_alpha)
            last_alpha = alpha
            nx = bx + alpha * z1x
            ny = by + alpha * z1y
            nw = alpha
            fgx, fgy = _force(cb, ct, rp, nx, ny, nw)
            f_n = fgx * inx + fgy * iny
            f_t = fgx * tx + fgy * ty
            if abs(f_t) > mu_tip * max(f_n, 0.0) + 1e-12:
                slipping[b, k] = True
                sigma = 1.0 if f_t > 0.0 else -1.0
                fn = max(f_n, 0.0)
                a = alpha
                beta = 0.0
                lim_b = 3.0 * ds + pen
                for rnd in range(SLIP_ROUNDS):
                    a_was = a
                    beta_was = beta
                    a = _bisect(
                        cb, ct, rp, bx + beta * tx, by + beta * ty, 0.0, z1x, z1y, 1.0, 0.0,
                        -0.5, 0.5, last_a if rnd == 0 else a,
                    )  # fmt: skip
                    beta = _bisect(
                        cb, ct, rp, bx + a * z1x, by + a * z1y, a, tx, ty, 0.0,
                        sigma * mu_tip * fn, -lim_b, lim_b, last_beta if rnd == 0 else beta,
                    )  # fmt: skip
                    # Along the round's own change: where rotation and slip are coupled
                    # (a curved outline) the two searches zigzag towards the minimum.
                    da = a - a_was
                    db = beta - beta_was
                    if da != 0.0 or db != 0.0:
                        s_lo = -1.0
                        s_hi = PATTERN_REACH
                        if db != 0.0:  # keep beta within +-lim_b
                            e1 = (-lim_b - beta) / db
                            e2 = (lim_b - beta) / db
                            s_lo = max(s_lo, min(e1, e2))
                            s_hi = min(s_hi, max(e1, e2))
                        if da != 0.0:  # and a within +-0.5
                            e1 = (-0.5 - a) / da
                            e2 = (0.5 - a) / da
                            s_lo = max(s_lo, min(e1, e2))
                            s_hi = min(s_hi, max(e1, e2))
                        if s_lo < 0.0 < s_hi:
                            sp = _bisect(
                                cb, ct, rp, bx + a * z1x + beta * tx, by + a * z1y + beta * ty,
                                a, da * z1x + db * tx, da * z1y + db * ty, da,
                                sigma * mu_tip * fn * db, s_lo, s_hi, 0.0,
                            )  # fmt: skip
                            a += sp * da
                            beta += sp * db
                    fgx, fgy = _force(
                        cb, ct, rp, bx + a * z1x + beta * tx, by + a * z1y + beta * ty, a
                    )
                    fn = max(fgx * inx + fgy * iny, 0.0)
                nx = bx + a * z1x + beta * tx
                ny = by + a * z1y + beta * ty
                nw = a
                last_a = a
                last_beta = beta
            fpx = fgx
            fpy = fgy
            # Apply the body displacement (first order, rotation about G).
            gx += cs * nx - sn * ny
            gy += sn * nx + cs * ny
            th += nw
            cs = math.cos(th)
            sn = math.sin(th)
            X[b, k + 1, 2] = th
            X[b, k + 1, 0] = gx - (cs * p_OG[0] - sn * p_OG[1])
            X[b, k + 1, 1] = gy - (sn * p_OG[0] + cs * p_OG[1])


def warm_up() -> None:
    """Load the compiled push (numba's disk cache): a process's first call pays for it."""
    X = np.zeros((1, 3, 3))
    push_batch(
        np.full((1, 2), 0.1), np.full(1, 1e-3), np.array([[-0.01, 0.0], [0.01, 0.0]]),
        np.zeros(2), 0.01, np.zeros((1, 3)), np.array([-0.03, 0.0]), np.array([1.0, 0.0]),
        0.005, 2, 0.008, 0.3, X, np.zeros((1, 2), dtype=np.bool_),
        np.zeros((1, 2), dtype=np.bool_), np.zeros((1, 2, 2)), np.full(2, 0.01),
        np.zeros((0, 2)),
    )  # fmt: skip
