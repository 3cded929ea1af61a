"""Compiled building blocks of the step problem's active set: small dense solves and the
active-set iteration on the friction groups' pieces (the method is described in
:mod:`slide_core.physics.kernels`)."""

from __future__ import annotations

from numba import njit
import numpy as np

STATUS_OK = 0
STATUS_ACTIVE_SET = 1  # the active set did not settle within its iterations
STATUS_COULOMB = 2  # the fingertip friction fixed point did not settle
MAX_ITERATIONS = 400
BLAND_AFTER = 100
"""Iterations after which the active set leaves a degenerate vertex by Bland's rule."""


@njit(cache=True)
def dot3(A: np.ndarray, p: int, x: np.ndarray) -> float:
    return float(A[p, 0] * x[0] + A[p, 1] * x[1] + A[p, 2] * x[2])


@njit(cache=True)
def solve_small(S: np.ndarray, r: np.ndarray, m: int, out: np.ndarray, a: np.ndarray) -> bool:
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
def argmax_pieces(A: np.ndarray, c: np.ndarray, gstart: np.ndarray, g: int, v: np.ndarray) -> int:
    best = -np.inf
    arg = int(gstart[g])
    for p in range(gstart[g], gstart[g + 1]):
        val = dot3(A, p, v) + c[p]
        if val > best:
            best = val
            arg = p
    return arg


@njit(cache=True)
def working_rows(
    nw: int,
    wg: np.ndarray,
    wk: np.ndarray,
    pi: np.ndarray,
    A: np.ndarray,
    c: np.ndarray,
    gn: np.ndarray,
    on: float,
    C: np.ndarray,
    e: np.ndarray,
) -> None:
    """Rows C[:nw] (3 each) and right sides e[:nw] of the working set's equalities
    C v = e: the fingertip's normal constraint (wg < 0), or a kink where group wg's piece
    pi[wg] ties with piece wk."""
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


@njit(cache=True)
def _row_key(wg: np.ndarray, wk: np.ndarray, j: int) -> int:
    """A fixed number of working-set row j for Bland's rule: the normal constraint first,
    then the kinks by piece."""
    return -1 if wg[j] < 0 else int(wk[j])


@njit(cache=True)
def active_set(
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
    for it in range(MAX_ITERATIONS):
        nw_box[1] += 1
        # Past BLAND_AFTER iterations the method is cycling on a degenerate vertex: leave
        # by Bland's rule (of the admissibility violations, the lowest-numbered row goes).
        bland = it >= BLAND_AFTER
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
        working_rows(nw, wg, wk, pi, A, c, gn, on, C, e)
        for j in range(nw):
            for i in range(3):
                MCt[i, j] = Minv[i, 0] * C[j, 0] + Minv[i, 1] * C[j, 1] + Minv[i, 2] * C[j, 2]
        for i in range(nw):
            for j in range(nw):
                S[i, j] = C[i, 0] * MCt[0, j] + C[i, 1] * MCt[1, j] + C[i, 2] * MCt[2, j]
            r[i] = C[i, 0] * vfree[0] + C[i, 1] * vfree[1] + C[i, 2] * vfree[2] - e[i]
        if nw > 0 and not solve_small(S, r, nw, mu, work):
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
                Apd = dot3(A, p, d)
                Apv = dot3(A, p, v) + c[p]
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
                    slope = dot3(A, k, d) - Apd
                    ak = abs(A[k, 0]) + abs(A[k, 1]) + abs(A[k, 2])
                    # Slopes at round-off level (of the velocities, not of the step: a piece
                    # tied with a kink in the working set has slope zero) do not block.
                    if slope <= 1e-12 * vs * (ak + ap):
                        continue
                    t = (Apv - dot3(A, k, v) - c[k]) / slope
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
        key = 1 << 62
        pivot = False
        for j in range(nw):
            viol = -mu[j] if wg[j] < 0 else mu[j]
            if bland:
                if viol > tol and _row_key(wg, wk, j) < key:
                    key = _row_key(wg, wk, j)
                    act = j
                    pivot = False
            elif viol > worst:
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
            if bland:
                if -s > tol and _row_key(wg, wk, best_j) < key:
                    key = _row_key(wg, wk, best_j)
                    act = best_j
                    pivot = True
            elif -s > worst:
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
