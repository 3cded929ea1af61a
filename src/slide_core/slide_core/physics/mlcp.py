"""The per-step contact problem of the grid physics (Fig. 2 of the paper), and its solver.

Both simulators (the per-cell reference and the rigid fast one) pose each time step as the
mixed complementarity problem

    M (v - v_star) - J_e^T lambda_e + G^T lambda + g_n lambda_n = 0
    J_e v = 0                                                      (welds)
    w_r  = -(G_r v + o_r) + beta_g(r)  >= 0  _|_  lambda_r >= 0    (friction rows)
    xi_g = L_g - sum_{r in g} lambda_r >= 0  _|_  beta_g   >= 0    (friction limits)
    c_n  = -(g_n v + o_n)              >= 0  _|_  lambda_n >= 0    (fingertip, optional)

``G`` (rows x dof) holds the generalised direction of each friction row (the row pushes on
the object with the impulse ``-G_r^T lambda_r``), ``o`` a velocity offset (the fingertip's
velocity for fingertip friction rows), rows belong to groups with one Coulomb limit ``L_g``
each. ``beta_g`` is the paper's ``gamma``: the sliding speed of the group. Without the
fingertip this MLCP is exactly the KKT system of the strictly convex QP

    min_{v, s}  1/2 (v - v*)^T M (v - v*) + sum_g L_g s_g
    s.t.        s_g >= G_r v + o_r (r in g),  s_g >= 0,  J_e v = 0,  -(g_n v + o_n) >= 0

with ``lambda`` the multipliers of the row constraints and ``beta = s``. We solve that QP
with quadprog (Goldfarb-Idnani dual active set: exact up to round-off; no maintained
LCP solver installs from PyPI). quadprog needs a definite Hessian and ``s`` has none, so
``s`` gets a proximal term around the previous iterate; at the fixed point, reached in
a few solves, that term vanishes and the solution is exact.

Fingertip friction couples a group's limit to the normal impulse (``L = mu_F lambda_n``),
which no QP expresses. It is solved as a fixed point (Coulomb as the limit of Tresca
problems): solve with the limit ``mu_F lambda_n`` frozen, update ``lambda_n`` from the
solution, repeat until it settles. At the fixed point every condition above holds.
The welds are eliminated first by the null-space method (``v = Z y`` with ``Z`` spanning
the null space of ``J_e``), which leaves a QP in the body's few free velocities. The
complementarity residual is checked after every solve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
import quadprog
from scipy.linalg import null_space

FloatArray = NDArray[np.float64]

_PROX_WEIGHT = 0.01
_PROX_ITERATIONS = 200
_COULOMB_ITERATIONS = 60


class MlcpError(RuntimeError):
    """The contact problem could not be solved (should not happen for valid inputs)."""


@dataclass(frozen=True)
class MlcpSolution:
    """Solution of one step's contact problem.

    Attributes:
        v: (dof,) velocities after the step.
        lam: (rows,) friction row impulses [N s].
        beta: (groups,) sliding speeds of the friction groups (the paper's gamma).
        lam_n: fingertip normal impulse [N s] (0 without a fingertip).
        residual: largest violation of feasibility or complementarity, relative.
    """

    v: FloatArray
    lam: FloatArray
    beta: FloatArray
    lam_n: float
    residual: float


@dataclass(frozen=True)
class Fingertip:
    """A fingertip contact in the step problem.

    Attributes:
        g_n: (dof,) generalised normal direction (impulse on the object: -g_n lambda_n).
        o_n: normal velocity offset (fingertip velocity and gap stabilisation).
        group: index of the friction group of the fingertip's tangential rows.
        mu: fingertip friction coefficient.
    """

    g_n: FloatArray
    o_n: float
    group: int
    mu: float


def solve_mlcp(
    M: FloatArray,
    v_star: FloatArray,
    G: FloatArray,
    o: FloatArray,
    E: FloatArray,
    L: FloatArray,
    J_e: FloatArray | None = None,
    finger: Fingertip | None = None,
) -> MlcpSolution:
    """Solve the step problem of the module docstring.

    Shapes: M (d, d), v_star (d,), G (r, d), o (r,), E (r, g) 0/1 group membership,
    L (g,), J_e (e, d) or None. With ``finger``, the limit ``L[finger.group]`` is replaced
    by ``finger.mu * lambda_n``.
    """
    if J_e is not None and J_e.shape[0]:
        # Null-space method: velocities that satisfy the welds are v = Z y (Z spans the
        # null space of J_e), which removes v's equality constraints and lambda_e.
        Z = null_space(J_e)
        M_r = Z.T @ M @ Z
        v_star_r = np.asarray(np.linalg.solve(M_r, Z.T @ M @ v_star), dtype=float)
        tip = None
        if finger is not None:
            tip = Fingertip(Z.T @ finger.g_n, finger.o_n, finger.group, finger.mu)
        sol = solve_mlcp(M_r, v_star_r, G @ Z, o, E, L, None, tip)
        return MlcpSolution(Z @ sol.v, sol.lam, sol.beta, sol.lam_n, sol.residual)
    if finger is None:
        return _solve_qp(M, v_star, G, o, E, L, None, check=True)
    L = L.astype(float).copy()
    lam_n = 0.0
    scale = 1e-12 + float(np.abs(M).max()) * (1.0 + float(np.abs(v_star).max()))
    for it in range(_COULOMB_ITERATIONS):
        L[finger.group] = finger.mu * lam_n
        sol = _solve_qp(M, v_star, G, o, E, L, finger, check=False)
        if abs(sol.lam_n - lam_n) <= 1e-12 * scale + 1e-7 * abs(lam_n):
            return _solve_qp(M, v_star, G, o, E, L, finger, check=True)
        # Plain iteration converges when the fingertip friction barely changes the normal
        # impulse; relax later iterations to damp oscillation near the solver's precision.
        lam_n = sol.lam_n if it < 10 else 0.5 * (lam_n + sol.lam_n)
    # Near a stick/slip switch the iteration can cycle between two close normal impulses;
    # their mean is the step's answer to within the cycle's width (1% at most).
    L[finger.group] = finger.mu * lam_n
    sol = _solve_qp(M, v_star, G, o, E, L, finger, check=False)
    if abs(sol.lam_n - lam_n) <= 1e-12 * scale + 1e-2 * abs(lam_n):
        return sol
    return _bisect_coulomb(M, v_star, G, o, E, L, finger, max(lam_n, sol.lam_n), scale)


def _bisect_coulomb(
    M: FloatArray,
    v_star: FloatArray,
    G: FloatArray,
    o: FloatArray,
    E: FloatArray,
    L: FloatArray,
    finger: Fingertip,
    guess: float,
    scale: float,
) -> MlcpSolution:
    """The fingertip's Coulomb fixed point by bisection, where iterating cycles widely.

    With the friction limit frozen at ``mu lambda``, the Tresca problem's normal impulse is
    a continuous function phi(lambda) with phi(0) >= 0 that stays bounded, so
    phi(lambda) - lambda changes sign on [0, hi] for a large enough hi: bisection finds a
    fixed point (Coulomb's friction at the normal impulse it produces)."""

    def phi(lam: float) -> MlcpSolution:
        L[finger.group] = finger.mu * lam
        return _solve_qp(M, v_star, G, o, E, L, finger, check=False)

    lo, hi = 0.0, max(guess, 1e-12 * scale)
    for _ in range(60):
        if phi(hi).lam_n <= hi:
            break
        lo, hi = hi, 2.0 * hi
    else:
        raise MlcpError('the fingertip friction problem did not settle')
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if phi(mid).lam_n > mid:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * scale + 1e-9 * hi:
            break
    return phi(hi)


def _solve_qp(
    M: FloatArray,
    v_star: FloatArray,
    G: FloatArray,
    o: FloatArray,
    E: FloatArray,
    L: FloatArray,
    finger: Fingertip | None,
    check: bool,
) -> MlcpSolution:
    d, r, g = M.shape[0], G.shape[0], E.shape[1]
    if r == 0 and finger is None:  # nothing to hold the body back
        return MlcpSolution(v_star.copy(), np.zeros(0), np.zeros(g), 0.0, 0.0)
    group = np.argmax(E, axis=1) if E.size else np.zeros(r, dtype=np.int64)
    N = d + g
    H = np.zeros((N, N))
    H[:d, :d] = M
    # s enters the objective linearly, so H is only semi-definite; quadprog needs it
    # definite. Proximal point iterations add 1/2 eps |s - s_k|^2 around the previous
    # solution: each QP is well conditioned (eps 1% of M's smallest eigenvalue), and at
    # the fixed point (a few iterations) the added term vanishes, leaving the exact
    # solution of the original problem.
    eps = _PROX_WEIGHT * float(np.linalg.eigvalsh(M).min())
    H[d:, d:] = np.eye(g) * eps
    cons: list[FloatArray] = []
    rhs: list[FloatArray] = []
    # s_g - G_r v >= o_r
    rows = np.hstack((-G, np.zeros((r, g))))
    rows[np.arange(r), d + group] = 1.0
    cons.append(rows)
    rhs.append(o.astype(float))
    # s >= 0
    cons.append(np.hstack((np.zeros((g, d)), np.eye(g))))
    rhs.append(np.zeros(g))
    if finger is not None:
        cons.append(np.concatenate((-finger.g_n, np.zeros(g)))[None, :])
        rhs.append(np.array([finger.o_n]))
    C = np.vstack(cons)
    b = np.concatenate(rhs)
    s_prev = np.zeros(g)
    for _ in range(_PROX_ITERATIONS):
        a = np.concatenate((M @ v_star, -L + eps * s_prev))
        try:
            x, _, _, _, lagr, _ = quadprog.solve_qp(H, a, C.T, b, 0)
        except ValueError as exc:
            raise MlcpError(f'the step contact problem was not solved: {exc}') from exc
        s_new = np.asarray(x[d:], dtype=float)
        settled = np.abs(s_new - s_prev).max(initial=0.0) <= 1e-12 * (
            1.0 + np.abs(s_new).max(initial=0.0)
        )
        s_prev = s_new
        if settled:
            break
    v = np.asarray(x[:d], dtype=float)
    beta = np.maximum(s_prev, 0.0)
    lam = np.maximum(np.asarray(lagr[:r], dtype=float), 0.0)
    lam_n = float(max(lagr[-1], 0.0)) if finger is not None else 0.0
    parts = residuals(v_star, G, o, E, L, v, lam, beta, lam_n)
    residual = max(parts)
    if check and not residual <= 1e-5:
        raise MlcpError(
            'the step contact problem was solved inaccurately: relative residuals '
            f'(row feasibility, slip of loaded rows, limit of sliding groups) = {parts}'
        )
    return MlcpSolution(v=v, lam=lam, beta=beta, lam_n=lam_n, residual=residual)


def residuals(
    v_star: FloatArray,
    G: FloatArray,
    o: FloatArray,
    E: FloatArray,
    L: FloatArray,
    v: FloatArray,
    lam: FloatArray,
    beta: FloatArray,
    lam_n: float,
) -> tuple[float, float, float]:
    """Fig. 2's conditions at a solution, each relative to the problem's velocity or impulse
    scale: feasibility of the rows, zero slip on rows that carry impulse, limits reached by
    groups that slide (``L`` with the fingertip group's limit as solved)."""
    group = np.argmax(E, axis=1) if E.size else np.zeros(G.shape[0], dtype=np.int64)
    w = -(G @ v + o) + beta[group]
    xi = L - E.T @ lam
    v_scale = 1e-6 + float(np.abs(v_star).max()) + float(np.abs(v).max())
    l_scale = 1e-12 + float(np.max(np.abs(L), initial=0.0)) + lam_n
    return (
        float(np.max(-w, initial=0.0)) / v_scale,
        float(np.max(np.abs(w[lam > 1e-9 * l_scale]), initial=0.0)) / v_scale,
        float(np.max(np.abs(xi[beta > 1e-6 * v_scale]), initial=0.0)) / l_scale,
    )


def solve_rigid(
    M: FloatArray,
    v_star: FloatArray,
    G: FloatArray,
    o: FloatArray,
    E: FloatArray,
    L: FloatArray,
    finger: Fingertip | None = None,
) -> tuple[MlcpSolution, bool]:
    """The step problem of one rigid body (three velocities, no welds): the compiled
    active set of :mod:`slide_core.physics.kernels`, exact, in microseconds; the QP
    (:func:`solve_mlcp`) when that does not settle or misses the conditions by more than
    1e-9. Returns the solution and whether the QP was needed. Shapes as in
    :func:`solve_mlcp` with d = 3."""
    from slide_core.physics import kernels  # compiled on first use

    r, g = G.shape[0], E.shape[1]
    group = np.argmax(E, axis=1) if r else np.zeros(0, dtype=np.int64)
    gstart = np.zeros(g + 1, dtype=np.int64)
    A = np.zeros((r + g, 3))
    c = np.zeros(r + g)
    piece = np.zeros(r, dtype=np.int64)
    k = 0
    for gi in range(g):
        gstart[gi] = k
        k += 1  # the zero piece
        for row in np.nonzero(group == gi)[0]:
            A[k], c[k], piece[row] = G[row], o[row], k
            k += 1
    gstart[g] = k
    gw = np.asarray(L, dtype=float).copy()
    tip = finger is not None
    g_n = finger.g_n if finger is not None else np.zeros(3)
    o_n = finger.o_n if finger is not None else 0.0
    weights = np.zeros(r + g)
    v = np.asarray(v_star, dtype=float).copy()
    Minv = np.linalg.inv(M)
    status, lam_n, _ = kernels.solve_pieces(
        np.ascontiguousarray(M, dtype=float),
        Minv,
        np.asarray(v_star, dtype=float),
        A,
        c,
        gstart,
        gw,
        g,
        tip,
        np.asarray(g_n, dtype=float),
        float(o_n),
        finger.group if finger is not None else -1,
        finger.mu if finger is not None else 0.0,
        v,
        weights,
    )
    if status == kernels.STATUS_OK:
        lam = gw[group] * weights[piece] if r else np.zeros(0)
        beta = np.array(
            [
                max(0.0, float(np.max(G[group == j] @ v + o[group == j], initial=0.0)))
                for j in range(g)
            ]
        )
        parts = residuals(v_star, G, o, E, gw, v, lam, beta, lam_n)
        if max(parts) <= 1e-9:
            return MlcpSolution(v, lam, beta, lam_n, max(parts)), False
    return solve_mlcp(M, v_star, G, o, E, L, finger=finger), True
