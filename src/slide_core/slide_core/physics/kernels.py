r"""Compiled inner loops of the fast simulator (numba, cached on disk).

The step problem of the rigid body
----------------------------------
With the welds eliminated, a step of the fast simulator is the strictly convex problem in
the body twist ``v`` (3,) (see :mod:`slide_core.physics.mlcp`)

    min_v  1/2 (v - v*)^T M (v - v*) + sum_g L_g max_{p in g} (A_p . v + c_p)
    s.t.   g_n . v + o_n <= 0                                  (fingertip, when touching)

Every friction group g is a maximum of affine *pieces*: the zero piece (the group carries
nothing) and one piece per friction row (``A_p = G_r``, ``c_p = o_r``): a sliding cell has
one row, a resting cell one per vertex of its friction polygon, the spin one or two, the
fingertip's tangential friction two. The objective is piecewise quadratic with the same
Hessian M on every piece, in three unknowns.

:func:`solve_pieces` solves it exactly with a primal active-set method on the pieces'
kinks. The iterate ``v`` keeps, per group, the piece that is largest at ``v`` (``pi``)
and a working set of at most three equalities: *kinks* (group g held where its piece pi_g
ties with piece k: a sliding cell whose forward motion just stopped, a resting cell held
still (two kinks) or sliding along a face of its polygon, a spin held at zero, a stuck
fingertip) and the fingertip's normal constraint. Each iteration solves the equality
problem (a 3 + m linear system, m <= 3), walks towards its solution until another piece
overtakes (that kink joins the working set), and at the equality solution reads the
multipliers: a kink's multiplier is minus the impulse its group puts on piece k, which
must lie in [0, L_g] together with the rest on pi_g; a wrong sign releases the kink or
moves the group onto piece k. The first point where every multiplier is admissible is the
solution (the velocity is unique; impulses on a degenerate kink may split differently from
the QP solver's, with the same velocity). The fingertip's Coulomb friction couples the
tangential group's limit to the normal impulse; as in :mod:`slide_core.physics.mlcp` it is
the fixed point of Tresca problems (limit frozen at ``mu_F lambda_n``), each solved warm
from the last.

A problem the active set does not settle within its iteration limit reports a status; the
caller then solves that step with the general QP (:func:`slide_core.physics.mlcp.solve_mlcp`).

Normal loads enter only through the friction limits: the kernels take per-cell limits
``L_i`` [N s] (``mu_i N_i h``, ``N_i`` the cell's normal load; today ``m_i g``) and the
torsion limit, never masses and gravity, so a different support pressure changes only how
the caller computes ``L``.
"""

from __future__ import annotations

import math

from numba import njit
import numpy as np

from slide_core.physics.rigid import MOVING_SPEED, N_PYRAMID

STATUS_OK = 0
STATUS_ACTIVE_SET = 1  # the active set did not settle within its iterations
STATUS_COULOMB = 2  # the fingertip friction fixed point did not settle

_MAX_ITERATIONS = 400
_COULOMB_ITERATIONS = 60
_TWO_PI = 2.0 * math.pi


@njit(cache=True)
def _dot3(A: np.ndarray, p: int, x: np.ndarray) -> float:
    return float(A[p, 0] * x[0] + A[p, 1] * x[1] + A[p, 2] * x[2])


@njit(cache=True)
def _solve_small(S: np.ndarray, r: np.ndarray, m: int, out: np.ndarray, a: np.ndarray) -> bool:
    """Solve S[:m, :m] x = r[:m] (Gaussian elimination, partial pivoting) into out, using a
    (3, 4) as work space."""
    for i in range(m):
        for j in range(m):
            a[i, j] = S[i, j]
        a[i, m] = r[i]
    for col in range(m):
        piv = col
        for i in range(col + 1, m):
            if abs(a[i, col]) > abs(a[piv, col]):
                piv = i
        if a[piv, col] == 0.0:
            return False
        if piv != col:
            for j in range(m + 1):
                tmp = a[col, j]
                a[col, j] = a[piv, j]
                a[piv, j] = tmp
        for i in range(col + 1, m):
            f = a[i, col] / a[col, col]
            for j in range(col, m + 1):
                a[i, j] -= f * a[col, j]
    for i in range(m - 1, -1, -1):
        s = a[i, m]
        for j in range(i + 1, m):
            s -= a[i, j] * out[j]
        out[i] = s / a[i, i]
    return True


@njit(cache=True)
def _argmax_pieces(A: np.ndarray, c: np.ndarray, gstart: np.ndarray, g: int, v: np.ndarray) -> int:
    best = -np.inf
    arg = int(gstart[g])
    for p in range(gstart[g], gstart[g + 1]):
        val = _dot3(A, p, v) + c[p]
        if val > best:
            best = val
            arg = p
    return arg


@njit(cache=True)
def _active_set(
    Minv: np.ndarray,
    a: np.ndarray,
    A: np.ndarray,
    c: np.ndarray,
    gstart: np.ndarray,
    gw: np.ndarray,
    ng: int,
    has_n: bool,
    gn: np.ndarray,
    on: float,
    v: np.ndarray,
    pi: np.ndarray,
    wg: np.ndarray,
    wk: np.ndarray,
    nw_box: np.ndarray,
    mu: np.ndarray,
    tol: float,
    fm: np.ndarray,
    fv: np.ndarray,
) -> int:
    """One convex (Tresca) problem from the feasible point v with pieces pi and working set
    (wg, wk)[:nw] (wg -1: the normal constraint); all updated in place. Returns a status;
    ``mu`` holds the working set's multipliers at the solution. fm (4, 3, 4) and fv (8, 3)
    are work space."""
    C = fm[0]
    S = fm[1]
    MCt = fm[2]
    work = fm[3]
    e = fv[0]
    r = fv[1]
    f = fv[2]
    vfree = fv[3]
    vstar = fv[4]
    d = fv[5]
    nw = nw_box[0]
    for _ in range(_MAX_ITERATIONS):
        nw_box[1] += 1
        # The equality problem: M (v - a) + f_pi + C^T mu = 0, C v = e.
        f[:] = 0.0
        for g in range(ng):
            L = gw[g]
            if L > 0.0:
                p = pi[g]
                f[0] += L * A[p, 0]
                f[1] += L * A[p, 1]
                f[2] += L * A[p, 2]
        for i in range(3):
            vfree[i] = a[i] - (Minv[i, 0] * f[0] + Minv[i, 1] * f[1] + Minv[i, 2] * f[2])
        for j in range(nw):
            if wg[j] < 0:
                for i in range(3):
                    C[j, i] = gn[i]
                e[j] = -on
            else:
                p = pi[wg[j]]
                k = wk[j]
                for i in range(3):
                    C[j, i] = A[p, i] - A[k, i]
                e[j] = c[k] - c[p]
        for j in range(nw):
            for i in range(3):
                MCt[i, j] = Minv[i, 0] * C[j, 0] + Minv[i, 1] * C[j, 1] + Minv[i, 2] * C[j, 2]
        for i in range(nw):
            for j in range(nw):
                S[i, j] = C[i, 0] * MCt[0, j] + C[i, 1] * MCt[1, j] + C[i, 2] * MCt[2, j]
            r[i] = C[i, 0] * vfree[0] + C[i, 1] * vfree[1] + C[i, 2] * vfree[2] - e[i]
        if nw > 0 and not _solve_small(S, r, nw, mu, work):
            return STATUS_ACTIVE_SET
        for i in range(3):
            s = vfree[i]
            for j in range(nw):
                s -= MCt[i, j] * mu[j]
            vstar[i] = s
        dn = 0.0
        vs = 1e-300
        for i in range(3):
            d[i] = vstar[i] - v[i]
            dn = max(dn, abs(d[i]))
            vs = max(vs, abs(vstar[i]), abs(v[i]), abs(vfree[i]))
        if nw < 3 and dn > 1e-15 * vs:
            # Walk towards vstar until another piece overtakes a group's current one.
            tmin = 1.0
            bg = -2
            bk = -1
            for g in range(ng):
                if gw[g] <= 0.0:
                    continue
                p = pi[g]
                Apd = _dot3(A, p, d)
                Apv = _dot3(A, p, v) + c[p]
                ap = abs(A[p, 0]) + abs(A[p, 1]) + abs(A[p, 2])
                for k in range(gstart[g], gstart[g + 1]):
                    if k == p:
                        continue
                    held = False
                    for j in range(nw):
                        if wg[j] == g and wk[j] == k:
                            held = True
                    if held:
                        continue
                    slope = _dot3(A, k, d) - Apd
                    ak = abs(A[k, 0]) + abs(A[k, 1]) + abs(A[k, 2])
                    # Slopes at round-off level (of the velocities, not of the step: a piece
                    # tied with a kink in the working set has slope zero) do not block.
                    if slope <= 1e-12 * vs * (ak + ap):
                        continue
                    t = (Apv - _dot3(A, k, v) - c[k]) / slope
                    if t < 0.0:
                        t = 0.0
                    if t < tmin:
                        tmin = t
                        bg = g
                        bk = k
            if has_n:
                held = False
                for j in range(nw):
                    if wg[j] < 0:
                        held = True
                if not held:
                    slope = gn[0] * d[0] + gn[1] * d[1] + gn[2] * d[2]
                    if slope > 1e-12 * vs * (abs(gn[0]) + abs(gn[1]) + abs(gn[2])):
                        t = -(gn[0] * v[0] + gn[1] * v[1] + gn[2] * v[2] + on) / slope
                        if t < 0.0:
                            t = 0.0
                        if t < tmin:
                            tmin = t
                            bg = -1
                            bk = -1
            for i in range(3):
                v[i] += tmin * d[i]
            if bg != -2:
                wg[nw] = bg
                wk[nw] = bk
                nw += 1
                continue
        # At the equality solution: are the multipliers admissible?
        worst = tol
        act = -1
        pivot = False
        for j in range(nw):
            viol = -mu[j] if wg[j] < 0 else mu[j]
            if viol > worst:
                worst = viol
                act = j
                pivot = False
        for j in range(nw):
            g = wg[j]
            if g < 0:
                continue
            first = True
            for jj in range(j):
                if wg[jj] == g:
                    first = False
            if not first:
                continue
            s = gw[g]
            best_j = j
            for jj in range(j, nw):
                if wg[jj] == g:
                    s += mu[jj]
                    if mu[jj] < mu[best_j]:
                        best_j = jj
            if -s > worst:
                worst = -s
                act = best_j
                pivot = True
        if act < 0:
            nw_box[0] = nw
            return STATUS_OK
        if pivot:
            pi[wg[act]] = wk[act]
        for j in range(act, nw - 1):
            wg[j] = wg[j + 1]
            wk[j] = wk[j + 1]
            mu[j] = mu[j + 1]
        nw -= 1
    nw_box[0] = nw
    return STATUS_ACTIVE_SET


@njit(cache=True)
def _coulomb(
    Minv: np.ndarray,
    a: np.ndarray,
    A: np.ndarray,
    c: np.ndarray,
    gstart: np.ndarray,
    gw: np.ndarray,
    ng: int,
    gn: np.ndarray,
    on: float,
    tip_g: int,
    mu_F: float,
    v: np.ndarray,
    pi: np.ndarray,
    wg: np.ndarray,
    wk: np.ndarray,
    nw: int,
    mu: np.ndarray,
    tol: float,
    fm: np.ndarray,
    fv: np.ndarray,
) -> float:
    """The exact Coulomb solution on the active set (pi, working set) of a Tresca fixed
    point: the fingertip group's limit ``mu_F lambda_n`` moves into the normal row's
    column, which leaves a linear (non-symmetric) system. When its solution meets every
    condition (normal impulse >= 0, kink shares in [0, 1], no other piece overtaking, the
    normal constraint) v, mu and the fingertip group's limit take it and the normal
    impulse is returned; else -1 and nothing changes."""
    jn = -1
    for j in range(nw):
        if wg[j] < 0:
            jn = j
    if jn < 0:
        return -1.0  # no contact force: nothing to polish
    C = fm[0]
    S = fm[1]
    MCt = fm[2]
    work = fm[3]
    e = fv[0]
    r = fv[1]
    f = fv[2]
    vfree = fv[3]
    vnew = fv[4]
    mu_new = fv[5]
    f[:] = 0.0
    for g in range(ng):
        if g != tip_g and gw[g] > 0.0:
            p = pi[g]
            f[0] += gw[g] * A[p, 0]
            f[1] += gw[g] * A[p, 1]
            f[2] += gw[g] * A[p, 2]
    for i in range(3):
        vfree[i] = a[i] - (Minv[i, 0] * f[0] + Minv[i, 1] * f[1] + Minv[i, 2] * f[2])
    pt = pi[tip_g]
    for j in range(nw):
        if wg[j] < 0:
            for i in range(3):
                C[j, i] = gn[i]
            e[j] = -on
        else:
            p = pi[wg[j]]
            k = wk[j]
            for i in range(3):
                C[j, i] = A[p, i] - A[k, i]
            e[j] = c[k] - c[p]
    for j in range(nw):
        # Columns: the normal row's carries the fingertip friction mu_F A_pt too.
        c0 = C[j, 0] + (mu_F * A[pt, 0] if j == jn else 0.0)
        c1 = C[j, 1] + (mu_F * A[pt, 1] if j == jn else 0.0)
        c2 = C[j, 2] + (mu_F * A[pt, 2] if j == jn else 0.0)
        for i in range(3):
            MCt[i, j] = Minv[i, 0] * c0 + Minv[i, 1] * c1 + Minv[i, 2] * c2
    for i in range(nw):
        for j in range(nw):
            S[i, j] = C[i, 0] * MCt[0, j] + C[i, 1] * MCt[1, j] + C[i, 2] * MCt[2, j]
        r[i] = C[i, 0] * vfree[0] + C[i, 1] * vfree[1] + C[i, 2] * vfree[2] - e[i]
    if not _solve_small(S, r, nw, mu_new, work):
        return -1.0
    for i in range(3):
        s = vfree[i]
        for j in range(nw):
            s -= MCt[i, j] * mu_new[j]
        vnew[i] = s
    lam_n = mu_new[jn]
    if lam_n < -tol:
        return -1.0
    L_t = mu_F * max(lam_n, 0.0)
    # Kink shares in [0, 1] for every group held at a kink.
    for j in range(nw):
        g = wg[j]
        if g < 0:
            continue
        L = L_t if g == tip_g else gw[g]
        if mu_new[j] > tol:
            return -1.0
        s = L
        for jj in range(nw):
            if wg[jj] == g:
                s += mu_new[jj]
        if s < -tol:
            return -1.0
    # Every group's piece still the largest at the new velocity (within round-off).
    vs = 1e-300
    for i in range(3):
        vs = max(vs, abs(vnew[i]), abs(vfree[i]))
    for g in range(ng):
        if g != tip_g and gw[g] <= 0.0:
            continue
        p = pi[g]
        top = _dot3(A, p, vnew) + c[p]
        for k in range(gstart[g], gstart[g + 1]):
            if _dot3(A, k, vnew) + c[k] > top + 1e-12 * vs:
                return -1.0
    v[:] = vnew
    for j in range(nw):
        mu[j] = mu_new[j]
    gw[tip_g] = L_t
    return float(max(lam_n, 0.0))


@njit(cache=True)
def solve_pieces(
    M: np.ndarray,
    Minv: np.ndarray,
    a: np.ndarray,
    A: np.ndarray,
    c: np.ndarray,
    gstart: np.ndarray,
    gw: np.ndarray,
    ng: int,
    has_tip: bool,
    gn: np.ndarray,
    on: float,
    tip_g: int,
    mu_F: float,
    v: np.ndarray,
    weights: np.ndarray,
) -> tuple[int, float, int]:
    """Solve the step problem of the module docstring from the start point ``v`` (3,).

    Pieces: A (P, 3), c (P,); group g owns pieces gstart[g]..gstart[g+1]-1, the first of
    them the zero piece; gw (ng,) the groups' limits [N s] (the fingertip group's is set
    here, ``mu_F`` times the normal impulse). With ``has_tip``, the normal constraint
    g_n . v + o_n <= 0 and the tangential group ``tip_g``.

    Returns (status, normal impulse, active-set iterations); ``v`` becomes the solution and
    ``weights`` (P,) the share of its group's limit that each piece carries (the row
    impulses are gw * weights).
    """
    pi = np.empty(ng, dtype=np.int64)
    iw = np.zeros(10, dtype=np.int64)
    fm = np.zeros((4, 3, 4))
    fv = np.zeros((8, 3))
    return _solve_pieces(
        M,
        Minv,
        a,
        A,
        c,
        gstart,
        gw,
        ng,
        has_tip,
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


@njit(cache=True)
def _solve_pieces(
    M: np.ndarray,
    Minv: np.ndarray,
    a: np.ndarray,
    A: np.ndarray,
    c: np.ndarray,
    gstart: np.ndarray,
    gw: np.ndarray,
    ng: int,
    has_tip: bool,
    gn: np.ndarray,
    on: float,
    tip_g: int,
    mu_F: float,
    v: np.ndarray,
    weights: np.ndarray,
    pi: np.ndarray,
    iw: np.ndarray,
    fm: np.ndarray,
    fv: np.ndarray,
) -> tuple[int, float, int]:
    """:func:`solve_pieces` with work space: pi (>= ng,), iw (10,), fm (4, 3, 4), fv (8, 3)."""
    wg = iw[0:4]
    wk = iw[4:8]
    nw_box = iw[8:10]
    wg[:] = -2
    wk[:] = -1
    nw_box[:] = 0
    mu = fv[6]
    imp = 0.0
    for i in range(3):
        imp = max(imp, abs(M[i, 0] * a[0] + M[i, 1] * a[1] + M[i, 2] * a[2]))
    for g in range(ng):
        imp = max(imp, gw[g])
    tol = 1e-11 * (imp + 1e-300)
    if has_tip:
        gw[tip_g] = 0.0
        s = gn[0] * v[0] + gn[1] * v[1] + gn[2] * v[2] + on
        if s > 0.0:  # start on the normal constraint
            mg = fv[7]
            for i in range(3):
                mg[i] = Minv[i, 0] * gn[0] + Minv[i, 1] * gn[1] + Minv[i, 2] * gn[2]
            den = gn[0] * mg[0] + gn[1] * mg[1] + gn[2] * mg[2]
            for i in range(3):
                v[i] -= mg[i] * s / den
            wg[0] = -1
            nw_box[0] = 1
    for g in range(ng):
        pi[g] = _argmax_pieces(A, c, gstart, g, v)
    status = STATUS_OK
    lam_n = 0.0
    if not has_tip:
        status = _active_set(
            Minv, a, A, c, gstart, gw, ng, False, gn, on, v, pi, wg, wk, nw_box, mu, tol, fm, fv
        )
    else:
        scale = 1e-12 + np.abs(M).max() * (1.0 + np.abs(a).max())
        guess = 0.0
        new = 0.0
        for it in range(_COULOMB_ITERATIONS + 1):
            if it == _COULOMB_ITERATIONS:
                # Near a stick/slip switch the iteration can cycle between two close normal
                # impulses; their mean is the answer to within the cycle's width (1%).
                if abs(new - guess) > 1e-12 * scale + 1e-2 * abs(guess):
                    return STATUS_COULOMB, 0.0, nw_box[1]
            gw[tip_g] = mu_F * guess
            # The fingertip group's weight changed: drop its kinks when it carries nothing,
            # else make its current piece the largest at v.
            nw = nw_box[0]
            j = 0
            while j < nw:
                if wg[j] == tip_g and gw[tip_g] <= 0.0:
                    for jj in range(j, nw - 1):
                        wg[jj] = wg[jj + 1]
                        wk[jj] = wk[jj + 1]
                    nw -= 1
                else:
                    j += 1
            nw_box[0] = nw
            in_w = False
            for j in range(nw):
                if wg[j] == tip_g:
                    in_w = True
            if not in_w:
                pi[tip_g] = _argmax_pieces(A, c, gstart, tip_g, v)
            status = _active_set(
                Minv, a, A, c, gstart, gw, ng, True, gn, on, v, pi, wg, wk, nw_box, mu, tol, fm, fv
            )
            if status != STATUS_OK:
                return status, 0.0, nw_box[1]
            new = 0.0
            for j in range(nw_box[0]):
                if wg[j] < 0:
                    new = max(mu[j], 0.0)
            if it == _COULOMB_ITERATIONS:
                break
            if abs(new - guess) <= 1e-12 * scale + 1e-7 * abs(guess):
                break
            guess = new if it < 10 else 0.5 * (guess + new)
        lam_n = new
        # The fixed point is within 1e-7 of the Coulomb solution; on its active set the
        # Coulomb conditions are linear: solve them exactly when that set holds.
        polished = _coulomb(
            Minv, a, A, c, gstart, gw, ng, gn, on, tip_g, mu_F, v, pi, wg, wk, nw_box[0],
            mu, tol, fm, fv,
        )  # fmt: skip
        if polished >= 0.0:
            lam_n = polished
    # Piece weights from the working set's multipliers.
    weights[: gstart[ng]] = 0.0
    nw = nw_box[0]
    for g in range(ng):
        if gw[g] > 0.0:
            weights[pi[g]] = 1.0
    for j in range(nw):
        g = wg[j]
        if g >= 0 and gw[g] > 0.0:
            share = -mu[j] / gw[g]
            weights[wk[j]] += share
            weights[pi[g]] -= share
    return status, lam_n, nw_box[1]


@njit(cache=True)
def _step(
    r_B: np.ndarray,
    w: float,
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
    fv: :func:`_solve_pieces`'s work space; sv (4, 3) this function's."""
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
            if _dot3(A, p, v) < 0.0:
                forward = False
                break
        if forward:
            nu_new[:] = v
            info[0] = 0
            return STATUS_OK
    status, lam_n, info[0] = _solve_pieces(
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
    M: np.ndarray,
    Minv: np.ndarray,
    L: np.ndarray,
    L_tau: np.ndarray,
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
    centre of mass c_B (K, 2) about G; r_B (n, 2) cells about G, p_OG (2,), cell size w,
    step h. Wrench push: f_W (T, 2) [N], r_c (T, 2) application point about G, tau (T,);
    fingertip push: p_WF (T+1, 2), radius, mu_F. State (updated): centre of mass p (K, 2),
    yaw th (K,), its twist v (K, 3). Outputs X, V (K, T+1, 3) and F (K, T, 2) as in
    :class:`Rollout`. Returns (k, t) of a step the active set did not settle (the caller
    solves it and resumes at (k, t + 1)), or (-1, -1) when done.
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
            status = _step(
                r_B,
                w,
                M[k],
                Minv[k],
                L[k],
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
    for fingertip in (False, True):
        rollout(
            r_B, np.zeros(2), 0.02, M, np.linalg.inv(M), np.full((1, 2), 1e-4), np.full(1, 1e-6),
            np.zeros((1, 2)), 0.01, fingertip, np.ones((2, 2)), np.zeros((2, 2)), np.zeros(2),
            np.array([[-0.03, 0.0], [-0.02, 0.0], [-0.01, 0.0]]), 0.008, 0.3, np.zeros((1, 2)),
            np.zeros(1), np.zeros((1, 3)), X.copy(), X.copy(), np.zeros((1, 2, 2)), 0, 0,
        )  # fmt: skip
    A = np.zeros((2, 3))
    A[1, 0] = 1.0
    solve_pieces(
        M[0], np.linalg.inv(M[0]), np.ones(3), A, np.zeros(2), np.array([0, 2]), np.ones(1), 1,
        False, np.zeros(3), 0.0, -1, 0.0, np.ones(3), np.zeros(2),
    )  # fmt: skip
