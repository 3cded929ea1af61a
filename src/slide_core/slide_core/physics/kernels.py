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
``L_i`` [N s] (``mu_i N_i h``, ``N_i`` the cell's normal load under the support model) and the
torsion limit, never masses and gravity, so a different support pressure changes only how
the caller computes ``L``.
"""

from __future__ import annotations

from numba import njit
import numpy as np

from slide_core.physics.kernels_pieces import (
    STATUS_ACTIVE_SET,
    STATUS_COULOMB,
    STATUS_OK,
    active_set,
    argmax_pieces,
    dot3,
    solve_small,
    working_rows,
)

__all__ = [
    'STATUS_ACTIVE_SET',
    'STATUS_COULOMB',
    'STATUS_OK',
    'solve_pieces',
    'solve_pieces_into',
    'warm_up',
]

_COULOMB_ITERATIONS = 60


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
    working_rows(nw, wg, wk, pi, A, c, gn, on, C, e)
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
    if not solve_small(S, r, nw, mu_new, work):
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
        top = dot3(A, p, vnew) + c[p]
        for k in range(gstart[g], gstart[g + 1]):
            if dot3(A, k, vnew) + c[k] > top + 1e-12 * vs:
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
    return solve_pieces_into(
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
def solve_pieces_into(
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
        pi[g] = argmax_pieces(A, c, gstart, g, v)
    status = STATUS_OK
    lam_n = 0.0
    if not has_tip:
        status = active_set(
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
                pi[tip_g] = argmax_pieces(A, c, gstart, tip_g, v)
            status = active_set(
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


def warm_up() -> None:
    """Load this module's compiled functions (from numba's disk cache, or compile them):
    a process's first call otherwise pays for it."""
    M = np.diag([0.02, 0.02, 1e-5])
    A = np.zeros((2, 3))
    A[1, 0] = 1.0
    solve_pieces(
        M, np.linalg.inv(M), np.ones(3), A, np.zeros(2), np.array([0, 2]), np.ones(1), 1,
        False, np.zeros(3), 0.0, -1, 0.0, np.ones(3), np.zeros(2),
    )  # fmt: skip
