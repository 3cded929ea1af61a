"""The fast simulator: a push for K hypotheses at once, step by step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from slide_core.geometry import FloatArray, Grid, rotation
from slide_core.physics import kernels_rollout
from slide_core.physics.inputs import (
    FingertipPush,
    PhysicsError,
    Push,
    Rollout,
    WrenchPush,
    check_params,
)
from slide_core.physics.rigid import (
    RigidModel,
    body_twist,
    com_twist,
    friction_limits,
    push_heights,
    start_state,
    tipping,
    tipping_limits,
)
from slide_core.physics.step import FingertipStep, StepResult, fast_step
from slide_core.physics.support import DEFAULT_SUPPORT


def simulate(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    push: Push,
    X_WO0: ArrayLike,
    V_WO0: ArrayLike | None = None,
    support: str = DEFAULT_SUPPORT,
    area: ArrayLike | None = None,
    outline: ArrayLike | None = None,
    push_height: ArrayLike = 0.0,
) -> Rollout:
    """Simulate a push with the fast rigid-body simulator, for K hypotheses at once.

    Args:
        grid: the object's cells.
        mass, friction: (n,) or (K, n) per-cell mass [kg] and friction [-].
        push: a :class:`WrenchPush` or :class:`FingertipPush`.
        X_WO0: (3,) initial object pose in the world (table) frame, or (K, 3): one per
            hypothesis.
        V_WO0: (3,) or (K, 3) initial twist of O (velocity of the origin [m/s], spin [rad/s]);
            at rest when omitted.
        support: how the table carries the cells, ``'rigid'`` or ``'cell-mass'``
            (:mod:`slide_core.physics.support`).
        area: (n,) the fraction of each cell the object covers (a cell on a curved
            outline is partly outside it; see :func:`slide_core.geometry.polygon_coverage`):
            its share of the support pressure; the grid's own when omitted
            (:attr:`Grid.area`).
        outline: (V, 2) the object's real outline in the object frame (a simple polygon):
            a fingertip touches it instead of the cells' squares.
        push_height: the push force's height above the table [m], one for every cell or
            (n,) per cell (where it acts on that cell's side:
            :meth:`slide_core.model.Fingertip.force_heights`): its moment tips the table's
            pressure towards the push, step by step (:func:`tipping_limits`); 0: no moment.
    """
    m, mu = check_params(grid, mass, friction)
    model = RigidModel.of(grid, support, area, outline)
    return run_rollout(model, m, mu, push, X_WO0, V_WO0, push_height=push_height)


@dataclass(frozen=True)
class StepRecord:
    """Step ``t`` of a rollout: orientation ``theta`` (K,) and body twist ``nu`` (K, 3)
    before it, applied impulse ``P`` (K, 3) and body-frame force ``f_B`` (K, 2), and what
    the step solved (``result``)."""

    t: int
    theta: FloatArray
    nu: FloatArray
    P: FloatArray
    f_B: FloatArray
    result: StepResult


class StepObserver(Protocol):
    """Watches a rollout step by step (the gradient tracker is one)."""

    keep_solutions: bool

    def state(self, t: int, p_WBcm: FloatArray, theta: FloatArray) -> None:
        """The state at step boundary t (after t steps)."""

    def step(self, record: StepRecord) -> None:
        """Step ``record.t``, as it was solved."""


def wrench_impulse(
    model: RigidModel, push: WrenchPush, t: int, theta: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Body-frame impulse P (K, 3) of step t of a wrench push at orientations theta (K,),
    and the body-frame force f_B (K, 2)."""
    c, s = np.cos(theta), np.sin(theta)
    f = push.f_W[t]
    f_B = np.column_stack((c * f[0] + s * f[1], -s * f[0] + c * f[1]))
    r_c = push.p_OA[t] - model.p_OG
    h = push.dt
    P = np.column_stack((h * f_B, h * (r_c[0] * f_B[:, 1] - r_c[1] * f_B[:, 0] + push.tau[t])))
    return P, f_B


def run_rollout(
    model: RigidModel,
    m: FloatArray,
    mu: FloatArray,
    push: Push,
    X_WO0: ArrayLike,
    V_WO0: ArrayLike | None,
    observer: StepObserver | None = None,
    push_height: ArrayLike = 0.0,
) -> Rollout:
    K = m.shape[0]
    h = push.dt
    T = push.steps
    M = model.mass_matrix(m)
    M_inv = np.asarray(np.linalg.inv(M), dtype=float)
    L, L_tau = friction_limits(model, m, mu, h)
    h_push = push_heights(model, push_height)
    L_tip = tipping_limits(model, m, mu, h, h_push)
    c_B = model.com(m)
    p, th, v = start_state(model, X_WO0, V_WO0, c_B)
    if isinstance(push, FingertipPush):
        p_WG = p - np.einsum('kij,kj->ki', rotation(th), c_B)
        check_fingertip_start(model, push.p_WF[0], push.radius, p_WG, th)
    X = np.zeros((K, T + 1, 3))
    V = np.zeros((K, T + 1, 3))
    F = np.zeros((K, T, 2))
    if observer is None:
        general = _compiled_rollout(
            model, M, M_inv, L, L_tau, L_tip, h_push, c_B, push, p, th, v, X, V, F
        )
        return Rollout(X, V, F, general)
    general_steps = 0
    keep = observer.keep_solutions

    def record(t: int) -> None:
        R = rotation(th)
        X[:, t, :2] = p - np.einsum('kij,kj->ki', R, model.p_OG[None, :] + c_B)
        X[:, t, 2] = th
        V[:, t] = v
        if observer is not None:
            observer.state(t, p, th)

    record(0)
    for t in range(T):
        nu = body_twist(th, v, c_B)
        finger = None
        if isinstance(push, WrenchPush):
            P, f_B = wrench_impulse(model, push, t, th)
            q = np.broadcast_to(push.p_OA[t] - model.p_OG, (K, 2))
        else:
            P, f_B = np.zeros((K, 3)), np.zeros((K, 2))
            R = rotation(th)
            Rt = np.swapaxes(R, 1, 2)
            p_WG = p - np.einsum('kij,kj->ki', R, c_B)
            p_BF = np.einsum('kij,kj->ki', Rt, push.p_WF[t][None, :] - p_WG)
            v_BF = np.einsum('kij,j->ki', Rt, (push.p_WF[t + 1] - push.p_WF[t]) / h)
            finger = FingertipStep(p_BF, v_BF, push.radius, push.mu, h)
            q = p_BF
        f_tip = f_B if finger is None or t == 0 else np.einsum('kji,kj->ki', R, F[:, t - 1])
        L_t = tipped(model, L, L_tip, h_push, f_tip, q)
        step = fast_step(model, M, M_inv, L_t, L_tau, nu, P, finger, keep_solutions=keep)
        if observer is not None:
            observer.step(StepRecord(t, th, nu, P, f_B, step))
        general_steps += int(step.qp.sum())
        if isinstance(push, WrenchPush):
            F[:, t] = push.f_W[t]
        else:
            F[:, t] = np.einsum('kij,kj->ki', rotation(th), step.impulse_B) / h
        v = com_twist(th, step.nu, c_B)
        p = p + h * v[:, :2]
        th = th + h * v[:, 2]
        record(t + 1)
    return Rollout(X, V, F, general_steps)


def _compiled_rollout(
    model: RigidModel,
    M: FloatArray,
    M_inv: FloatArray,
    L: FloatArray,
    L_tau: FloatArray,
    L_tip: FloatArray,
    h_push: FloatArray,
    c_B: FloatArray,
    push: Push,
    p: FloatArray,
    th: FloatArray,
    v: FloatArray,
    X: FloatArray,
    V: FloatArray,
    F: FloatArray,
) -> int:
    """The rollout by :func:`kernels_rollout.rollout`, filling X, V, F; a step the compiled active
    set does not settle is solved here by :func:`fast_step` (explicit modes, then the
    general QP). Returns how many steps needed the general QP."""
    h = push.dt
    wrench = isinstance(push, WrenchPush)
    empty = np.zeros((1, 2))
    if isinstance(push, WrenchPush):
        f_W, r_c, tau, p_WF, radius, mu_F = (
            push.f_W,
            push.p_OA - model.p_OG,
            push.tau,
            empty,
            1.0,
            0.0,
        )
    else:
        f_W, r_c, tau = np.zeros((push.steps, 2)), np.zeros((push.steps, 2)), np.zeros(push.steps)
        p_WF, radius, mu_F = push.p_WF, push.radius, push.mu
    p, th, v = np.ascontiguousarray(p), np.ascontiguousarray(th), np.ascontiguousarray(v)
    k, t = 0, 0
    general = 0
    while True:
        k, t = kernels_rollout.rollout(
            model.r_B, model.p_OG, model.grid.cell_size, model.outline_B, M, M_inv, L, L_tau,
            L_tip, h_push, c_B, h, not wrench, f_W, r_c, tau, p_WF, radius, mu_F, p, th, v,
            X, V, F, k, t,
        )  # fmt: skip
        if k < 0:
            return general
        # The general QP for this one step of hypothesis k, then on with the kernel.
        s = slice(k, k + 1)
        nu = body_twist(th[s], v[s], c_B[s])
        finger = None
        if isinstance(push, WrenchPush):
            P, f_B = wrench_impulse(model, push, t, th[s])
            q = np.atleast_2d(push.p_OA[t] - model.p_OG)
        else:
            P = np.zeros((1, 3))
            R = rotation(th[s])
            Rt = np.swapaxes(R, 1, 2)
            p_WG = p[s] - np.einsum('kij,kj->ki', R, c_B[s])
            p_BF = np.einsum('kij,kj->ki', Rt, push.p_WF[t][None, :] - p_WG)
            v_BF = np.einsum('kij,j->ki', Rt, (push.p_WF[t + 1] - push.p_WF[t]) / h)
            finger = FingertipStep(p_BF, v_BF, push.radius, push.mu, h)
            f_B = (Rt[0] @ F[k, t - 1] if t > 0 else np.zeros(2))[None]
            q = p_BF
        L_t = tipped(model, L[s], L_tip[s], h_push, f_B, q)
        step = fast_step(model, M[s], M_inv[s], L_t, L_tau[s], nu, P, finger)
        general += int(step.qp.sum())
        if isinstance(push, WrenchPush):
            F[k, t] = push.f_W[t]
        else:
            F[k, t] = rotation(th[s])[0] @ step.impulse_B[0] / h
        v[s] = com_twist(th[s], step.nu, c_B[s])
        p[s] = p[s] + h * v[s, :2]
        th[s] = th[s] + h * v[s, 2]
        R = rotation(th[s])[0]
        X[k, t + 1, :2] = p[k] - R @ (model.p_OG + c_B[k])
        X[k, t + 1, 2] = th[k]
        V[k, t + 1] = v[k]
        t += 1
        if t == push.steps:
            k, t = k + 1, 0
            if k == X.shape[0]:
                return general


def tipped(
    model: RigidModel,
    L: FloatArray,
    L_tip: FloatArray,
    h_push: FloatArray,
    f_B: FloatArray,
    q_B: FloatArray,
) -> FloatArray:
    """Cell limits (K, n) under body-frame push forces f_B (K, 2) [N] acting at q_B (K, 2)
    about G: L (K, n) changed by the moment of the force at the height ``h_push`` of the
    cell nearest q_B (L_tip of :func:`tipping_limits`; h_push of size 0: unchanged),
    clipped at 0 where the moment would lift a cell off."""
    if h_push.shape[0] == 0:
        return L
    hz = h_push[model.grid.nearest_cells(np.atleast_2d(q_B) + model.p_OG)]
    return np.asarray(np.maximum(L + tipping(hz, f_B, L_tip), 0.0), dtype=float)


def check_fingertip_start(
    model: RigidModel, p_WF0: FloatArray, radius: float, p_WG: FloatArray, th: FloatArray
) -> None:
    """PhysicsError when a fingertip of ``radius`` [m] centred at p_WF0 (2,) overlaps the
    object of any hypothesis (its B origin at p_WG (K, 2), turned by th (K,))."""
    Rt = np.swapaxes(rotation(th), 1, 2)
    p_BF = np.einsum('kij,kj->ki', Rt, np.asarray(p_WF0, dtype=float)[None, :] - p_WG)
    _, dist = model.closest_point(p_BF)
    if np.any(dist < radius - 1e-6):
        raise PhysicsError(
            'the fingertip path starts inside the object '
            f'(penetration {1e3 * (radius - dist.min()):.2f} mm): start it outside'
        )
