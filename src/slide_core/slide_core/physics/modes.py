"""The explicit active sets of a step, tried before the general problem.

For each hypothesis a step's MLCP has a unique velocity solution. The usual solutions have
a simple active set: every moving cell's friction saturated along its previous direction,
at most one resting cell held by static friction (a pivot), the spin friction sliding,
free, stuck or saturated either way, and the fingertip separate, sticking or slipping
either way. :func:`enumerate_modes` solves each candidate's small equality system for all
eligible hypotheses at once and records the first candidate that meets every
complementarity condition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import FloatArray
from slide_core.physics.rigid import MOVING_SPEED, N_PYRAMID, RigidModel

# Modes of the spin friction in an explicit step. A spinning body's spin friction acts
# against the previous spin; if the spin reverses within the step that row carries no
# impulse (SPIN_FREE).
SPIN_SLIDING, SPIN_STUCK, SPIN_POS, SPIN_NEG, SPIN_FREE = 0, 1, 2, 3, 4
_SPIN_ORDER = (SPIN_SLIDING, SPIN_FREE, SPIN_STUCK, SPIN_POS, SPIN_NEG)
_TOL = 1e-12


@dataclass(frozen=True)
class Contact:
    """The fingertip's contact rows for K hypotheses, in body coordinates.

    n_out (K, 2): outward normal at the closest object point; t_dir (K, 2): tangent;
    g_n, g_t (K, 3): their generalised rows; o_n (K,): normal velocity offset (the gap
    closes at rate ``-(g_n . nu + o_n)``); vt_F (K,): the fingertip's tangential speed;
    touching (K,): the fingertip reaches the object within this step; mu: its friction.
    """

    n_out: FloatArray
    t_dir: FloatArray
    g_n: FloatArray
    g_t: FloatArray
    o_n: FloatArray
    vt_F: FloatArray
    touching: NDArray[np.bool_]
    mu: float


@dataclass
class ModeProblem:
    """One step's data for the explicit modes, and the results they fill in.

    Inputs: the model, inverse mass matrices ``M_inv`` (K, 3, 3), cell limits ``L`` (K, n),
    torsion limits ``L_tau`` (K,), twist ``nu`` (K, 3) before the step, ``spinning`` (K,),
    polygon orientations ``angles`` (K,) and directions ``polygons`` (K, N_PYRAMID, 2),
    the fingertip ``contact`` (or None). ``vertex_dirs`` (K, n, 2): the polygon vertex each
    breaking-away cell pushes on (set by the caller per breakaway round).
    Results: ``nu_new`` (K, 3), ``impulse_B`` (K, 2), ``spin_mode`` (K,), ``solved`` (K,).
    """

    model: RigidModel
    M_inv: FloatArray
    L: FloatArray
    L_tau: FloatArray
    nu: FloatArray
    spinning: NDArray[np.bool_]
    angles: FloatArray
    polygons: FloatArray
    contact: Contact | None
    vertex_dirs: FloatArray
    nu_new: FloatArray
    impulse_B: FloatArray
    spin_mode: NDArray[np.int64]
    solved: NDArray[np.bool_]


def polygon_contains(lam: FloatArray, limit: FloatArray, angle: FloatArray) -> NDArray[np.bool_]:
    """Whether impulses lam (K, 2) lie in friction polygons of radius ``limit`` (K,)
    turned by ``angle`` (K,)."""
    a = np.pi / N_PYRAMID
    phi = angle[:, None] + a + 2 * a * np.arange(N_PYRAMID)[None, :]  # facet normals
    proj = lam[:, :1] * np.cos(phi) + lam[:, 1:] * np.sin(phi)
    bound = limit * np.cos(a) * (1 + 1e-9) + 1e-15
    return np.asarray(np.all(proj <= bound[:, None], axis=1), dtype=bool)


def _spin_impulse(pb: ModeProblem, sm: int, k: NDArray[np.int64]) -> FloatArray:
    """Fixed spin impulse of mode ``sm`` (positive opposes positive spin)."""
    if sm == SPIN_SLIDING:
        return np.asarray(pb.L_tau[k] * np.sign(pb.nu[k, 2]))
    if sm == SPIN_POS:
        return np.asarray(pb.L_tau[k])
    if sm == SPIN_NEG:
        return np.asarray(-pb.L_tau[k])
    return np.zeros(k.size)


def _equalities(
    pb: ModeProblem, sm: int, cm: str, k: NDArray[np.int64], pinned: NDArray[np.int64]
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Equality constraints C nu' = b of the candidate and their impulse rows D (impulses
    -D^T Lambda): (k, q, 3), (k, q, 3), (k, q). Unused slots are all-zero rows."""
    model = pb.model
    pin = pinned[k] >= 0
    Jp = model.J[np.maximum(pinned[k], 0)] * pin[:, None, None]  # (k, 2, 3)
    C_rows: list[FloatArray] = [Jp[:, 0], Jp[:, 1]]
    D_rows: list[FloatArray] = [Jp[:, 0], Jp[:, 1]]
    b_rows: list[FloatArray] = [np.zeros(k.size), np.zeros(k.size)]
    e3 = np.tile(np.array([0.0, 0.0, 1.0]), (k.size, 1)) * (sm == SPIN_STUCK)
    C_rows.append(e3)
    D_rows.append(e3)
    b_rows.append(np.zeros(k.size))
    c = pb.contact
    if c is not None and cm == 'stick':
        C_rows += [c.g_n[k], c.g_t[k]]
        D_rows += [c.g_n[k], c.g_t[k]]
        b_rows += [-c.o_n[k], c.vt_F[k]]
    elif c is not None and cm.startswith('slide'):
        sigma = 1.0 if cm == 'slide+' else -1.0
        C_rows.append(c.g_n[k])
        D_rows.append(c.g_n[k] + sigma * c.mu * c.g_t[k])
        b_rows.append(-c.o_n[k])
    return np.stack(C_rows, axis=1), np.stack(D_rows, axis=1), np.stack(b_rows, axis=1)


def _spin_holds(
    pb: ModeProblem, sm: int, k: NDArray[np.int64], cand: FloatArray, Lam: FloatArray
) -> NDArray[np.bool_]:
    om = cand[:, 2]
    if sm == SPIN_SLIDING:
        return np.asarray(np.sign(pb.nu[k, 2]) * om >= -_TOL)
    if sm == SPIN_FREE:
        return np.asarray(np.sign(pb.nu[k, 2]) * om <= _TOL)
    if sm == SPIN_STUCK:
        lam_tau = Lam[:, 2]
        # Spinning: the single row against the previous spin can only slow it.
        signed = np.where(pb.spinning[k], np.sign(pb.nu[k, 2]) * lam_tau, np.abs(lam_tau))
        return np.asarray((signed >= -1e-15) & (signed <= pb.L_tau[k] * (1 + 1e-9) + 1e-15))
    if sm == SPIN_POS:
        return np.asarray(om >= -_TOL)
    return np.asarray(om <= _TOL)


def _contact_holds(
    pb: ModeProblem, cm: str, k: NDArray[np.int64], cand: FloatArray, Lam: FloatArray
) -> tuple[NDArray[np.bool_], FloatArray]:
    """Whether the fingertip's complementarity holds, and its impulse on the object (k, 2)."""
    c = pb.contact
    ok = np.ones(k.size, dtype=bool)
    imp = np.zeros((k.size, 2))
    if c is None:
        return ok, imp
    if cm == 'none':
        gap_rate = -(np.einsum('ki,ki->k', c.g_n[k], cand) + c.o_n[k])
        return np.asarray(~c.touching[k] | (gap_rate >= -_TOL)), imp
    ln = Lam[:, 3]
    ok &= ln >= -_TOL
    if cm == 'stick':
        lt = Lam[:, 4]
        ok &= np.abs(lt) <= c.mu * ln + _TOL
    else:
        sigma = 1.0 if cm == 'slide+' else -1.0
        lt = sigma * c.mu * ln
        slip = np.einsum('ki,ki->k', c.g_t[k], cand) - c.vt_F[k]
        ok &= sigma * slip >= -_TOL
    imp = -(c.n_out[k] * ln[:, None] + c.t_dir[k] * lt[:, None])
    return ok, imp


def enumerate_modes(
    pb: ModeProblem,
    eligible: NDArray[np.bool_],
    nu_0: FloatArray,
    g: FloatArray,
    sliding: NDArray[np.bool_],
    pinned: NDArray[np.int64],
    vertex: NDArray[np.bool_],
) -> FloatArray:
    """Try the active sets on the eligible, unsolved hypotheses; record the first that
    holds in ``pb``'s results.

    nu_0 (K, 3): the twist with the saturated friction of the ``sliding`` cells (rows g
    (K, n, 3)) applied; pinned (K,): a resting cell held still, or -1; vertex (K, n): cells
    breaking away against ``pb.vertex_dirs``. Returns the candidate twist of the first spin
    mode tried for each hypothesis (a guess for the next breakaway round).
    """
    K = pb.nu.shape[0]
    model = pb.model
    c = pb.contact
    contact_modes = ['none', 'stick', 'slide+', 'slide-'] if c is not None else ['none']
    first = np.full((K, 3), np.nan)
    for sm in _SPIN_ORDER:
        for cm in contact_modes:
            todo = eligible & ~pb.solved
            if sm in (SPIN_SLIDING, SPIN_FREE):
                todo &= pb.spinning
            elif sm != SPIN_STUCK:
                todo &= ~pb.spinning
            if c is not None and cm != 'none':
                todo &= c.touching
            if not todo.any():
                continue
            k = np.nonzero(todo)[0]
            M_inv = pb.M_inv[k]
            nu_f = nu_0[k] - M_inv[:, :, 2] * _spin_impulse(pb, sm, k)[:, None]
            Cm, Dm, bm = _equalities(pb, sm, cm, k, pinned)
            A = np.einsum('kqi,kij,kpj->kqp', Cm, M_inv, Dm)
            # Unused constraint slots are all-zero rows: make them identity equations.
            unused = np.all(Cm == 0.0, axis=2)
            A = A + np.einsum('kq,qp->kqp', unused.astype(float), np.eye(A.shape[1]))
            rhs = np.einsum('kqi,ki->kq', Cm, nu_f) - bm
            regular = np.abs(np.linalg.det(A)) > 1e-30
            A[~regular] = np.eye(A.shape[1])
            Lam = np.linalg.solve(A, rhs[..., None])[..., 0]
            cand = nu_f - np.einsum('kij,kqj,kq->ki', M_inv, Dm, Lam)
            unset = np.isnan(first[k, 0])
            first[k[unset]] = cand[unset]
            ok = regular.copy()
            # Sliding cells keep moving forward along their previous direction...
            fwd = np.einsum('knj,kj->kn', g[k], cand)
            ok &= np.all((fwd >= -_TOL) | ~sliding[k] | vertex[k], axis=1)
            # ... cells breaking away slide against the polygon vertex they push on.
            if vertex[k].any():
                u1 = np.einsum('nij,kj->kni', model.J, cand)
                dots = np.einsum('kni,kji->knj', u1, pb.polygons[k])
                own = np.einsum('kni,kni->kn', u1, pb.vertex_dirs[k])
                speed1 = np.linalg.norm(u1, axis=2)
                holds = (own >= dots.max(axis=2) - 1e-9 * speed1) & (speed1 > MOVING_SPEED)
                ok &= np.all(holds | ~vertex[k], axis=1)
            # A pinned cell's static friction stays inside its polygon.
            ok &= ~(pinned[k] >= 0) | polygon_contains(
                Lam[:, :2], pb.L[k, np.maximum(pinned[k], 0)], pb.angles[k]
            )
            ok &= _spin_holds(pb, sm, k, cand, Lam)
            holds_c, imp = _contact_holds(pb, cm, k, cand, Lam)
            ok &= holds_c
            good = k[ok]
            pb.nu_new[good] = cand[ok]
            pb.impulse_B[good] = imp[ok]
            pb.spin_mode[good] = sm
            pb.solved[good] = True
    return first
