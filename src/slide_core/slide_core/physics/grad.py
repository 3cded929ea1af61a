"""Analytic gradients of prediction losses with respect to every cell's mass and friction.

Derivation (see also :mod:`slide_core.physics`): a step's solution satisfies, on its
active set, the linear conditions

    M (nu' - nu) - P + sum_{i saturated} L_i b_i + s_tau L_tau e_3 + C^T Lambda = 0
    C nu' = 0

where saturated cells push with their full limit ``L_i = mu_i N_i h`` along ``b_i``
(``b_i = J_i^T d_i(nu)`` for a cell that was sliding, a vertex direction of its friction
polygon for a cell that broke away from rest), ``s_tau = +-1`` when the spin friction is
saturated, and the rows of ``C`` hold cells that static friction keeps still (``J_p``),
cells whose forward sliding just stopped (``b_i^T``), a cell breaking away along a face of
its polygon (difference of the face's two vertex directions), and the spin when it is held
at zero (``e_3^T``). Rows that carry no impulse (a cell or spin that reversed against its
previous direction) drop out. Differentiating
this square system (the paper's section V, with ``X = M^-1`` of the rigid body when ``C``
is empty) gives ``d nu' / d(nu, P, m, mu)``:

    [M  C^T] [d nu'    ]     [dE1]            dE1/dm_k  = Q_k (nu' - nu) + sum_i dE1/dN_i dN_i/dm_k
    [C   0 ] [d Lambda ] = - [dE2],           dE1/dN_i  = [i sat] mu_i h b_i
                                                          + [spin sat] s_tau k_s w mu_i h e_3
                                              dE1/dmu_k = [k sat] N_k h b_k + ...
                                              dE1/dnu   = -M + sum_i L_i db_i/dnu (+ rows of C)
                                              db_i/dnu  = J_i^T (I - d_i d_i^T) J_i / |J_i nu|

with ``dN/dm`` the support model's load Jacobian (``g I`` for the papers' cell-mass loads,
rank 3 for a rigid body's linear pressure: :mod:`slide_core.physics.support`).
The last line is the friction Jacobian the paper sets to zero (its one-step loss uses
observed velocities); a rollout needs it. Per step the rollout maps the state
``(p_G, theta, v_W)`` through ``nu = R^T v_W`` (body frame at the step's start), the
body-frame force ``R^T f_W``, the step, and ``v_W' = R nu'``; forward-mode sensitivities
``d state / d(m, mu)`` are propagated through all steps, vectorised over hypotheses.

Losses (squared metres), with cell positions ``p_i = p_G + R(theta) r_i``:

- rollout: ``sum_j mean_i |p_i(t_j) - p_i^obs(t_j)|^2`` over observed steps ``t_j``;
- one-step (the paper's Eq. 1, squared as its gradient implies): for every ``t``, start
  from the observed pose and velocity at ``t``, predict ``x_{t+2} = x_{t+1} + h V(x_t, v_t,
  F_t)``, and sum ``mean_i |p_i^pred - p_i^obs(t+2)|^2``. Observed velocities are the
  finite differences of the observed poses.

With the push's moment (``push_height``) each step's loads are the static ones tipped by
the measured force, ``N_t = max(0, N + h_z B (R^T f_W))`` with ``B`` the support's tipping
basis (:meth:`Support.tipping_basis`, independent of the masses on the static contact
set), as the simulators tip them; on the cells still in contact ``dN_t/dm = dN/dm``, and
``dN_t/dtheta = h_z B dR^T/dtheta f_W`` adds a yaw term to each step's ``d nu'/d theta``
(:meth:`slide_core.physics.jacobians.StepParams.tipped`). The spin's friction limit keeps
the static loads, as in the simulators.

Sticking steps have zero sensitivity (their true derivative); switching points use the
active set the solver returned (one side's derivative); nothing is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.geometry import FloatArray, Grid, check_pose, rotation
from slide_core.physics.inputs import PhysicsError, Rollout, WrenchPush, check_params
from slide_core.physics.jacobians import StepParams, step_jacobians
from slide_core.physics.rigid import (
    S90,
    RigidModel,
    body_twist,
    com_twist,
    push_heights,
    tipping,
    torsion_limits,
)
from slide_core.physics.simulate import StepRecord, run_rollout, wrench_impulse
from slide_core.physics.step import fast_step
from slide_core.physics.support import DEFAULT_SUPPORT


@dataclass(frozen=True, eq=False)
class LossGrad:
    """A loss and its gradient for K hypotheses.

    Attributes:
        loss: (K,) loss [m^2].
        d_mass: (K, n) d loss / d m_i [m^2/kg].
        d_friction: (K, n) d loss / d mu_i [m^2].
        rollout: the simulated push (rollout loss) or None (one-step loss).
    """

    loss: FloatArray
    d_mass: FloatArray
    d_friction: FloatArray
    rollout: Rollout | None


def _check_observations(
    steps: int, obs_steps: ArrayLike, X_WO_obs: ArrayLike
) -> tuple[NDArray[np.int64], FloatArray]:
    t = np.asarray(obs_steps, dtype=np.int64)
    X = check_pose(X_WO_obs, 'X_WO_obs')
    if t.ndim != 1 or X.shape != (t.size, 3):
        raise PhysicsError(
            f'obs_steps (J,) and X_WO_obs (J, 3) must match, got {t.shape} and {X.shape}'
        )
    if t.size == 0 or t.min() < 0 or t.max() > steps:
        raise PhysicsError(f'observed steps must lie in [0, {steps}], got {t.tolist()}')
    return t, X


def _cells(grid: Grid, X_WO: FloatArray) -> FloatArray:
    """World positions (n, 2) of the cells at pose X_WO (3,)."""
    R = rotation(X_WO[2])
    return np.asarray(grid.p_OC @ R.T + X_WO[:2], dtype=float)


def _com_sensitivity(model: RigidModel, m: FloatArray) -> FloatArray:
    """d c_B / d m (K, 2, n): how the centre of mass (relative to G) moves with each mass."""
    c_B = model.com(m)
    return np.asarray(
        (model.r_B.T[None, :, :] - c_B[:, :, None]) / m.sum(axis=1)[:, None, None], dtype=float
    )


def _twist_map(theta: FloatArray, c_B: FloatArray) -> FloatArray:
    """D (K, 3, 3): the centre of mass twist V_WBcm = D nu of a body-frame twist nu at G."""
    R = rotation(theta)
    D = np.zeros((theta.size, 3, 3))
    D[:, :2, :2] = R
    D[:, :2, 2] = np.einsum('kij,kj->ki', R, c_B @ S90.T)
    D[:, 2, 2] = 1.0
    return D


def _input_jacobians(
    theta: FloatArray, V: FloatArray, c_B: FloatArray, dc: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Derivatives of nu = body_twist(theta, V, c_B): d/dtheta (K, 3), d/dV (K, 3, 3),
    d/dm (K, 3, n)."""
    nu = body_twist(theta, V, c_B)
    K = theta.size
    dth = np.zeros((K, 3))
    dth[:, :2] = -(nu[:, :2] + V[:, 2:3] * (c_B @ S90.T)) @ S90.T
    Rt = np.swapaxes(rotation(theta), 1, 2)
    dV = np.zeros((K, 3, 3))
    dV[:, :2, :2] = Rt
    dV[:, :2, 2] = -(c_B @ S90.T)
    dV[:, 2, 2] = 1.0
    dm = np.zeros((K, 3, dc.shape[2]))
    dm[:, :2] = -V[:, 2, None, None] * np.einsum('ij,kjn->kin', S90, dc)
    return dth, dV, dm


def _output_mass_term(theta: FloatArray, omega: FloatArray, dc: FloatArray) -> FloatArray:
    """Explicit d V_WBcm / d m (K, 3, n) of com_twist at fixed nu: R omega S dc."""
    out = np.zeros((theta.size, 3, dc.shape[2]))
    out[:, :2] = omega[:, None, None] * np.einsum('kij,jl,kln->kin', rotation(theta), S90, dc)
    return out


class _Tracker:
    """Forward-mode sensitivities of the rollout state (p_WBcm, theta, V_WBcm) and the loss."""

    keep_solutions = True

    def __init__(
        self,
        model: RigidModel,
        m: FloatArray,
        mu: FloatArray,
        push: WrenchPush,
        obs: dict[int, FloatArray],
        X_WO0: FloatArray,
        V_WO0: FloatArray,
        h_push: FloatArray,
    ) -> None:
        self.model, self.m, self.mu, self.h = model, m, mu, push.dt
        self.r_c = push.p_OA - model.p_OG
        K, n = m.shape
        self.M = model.mass_matrix(m)
        self.params = StepParams.of(model, self.M, m, mu, push.dt)
        # The push's moment (push_heights, size 0: none): each step's loads tip by the
        # height of the cell nearest the contact times the body-frame force, which turns
        # with the body: the loads depend on the yaw too.
        self.h_z = h_push[model.grid.nearest_cells(push.p_OA)] if h_push.shape[0] else np.zeros(0)
        self.basis = model.support.tipping_basis(m) if h_push.shape[0] else None
        self.c_B = model.com(m)
        self.dc = _com_sensitivity(model, m)
        # The initial centre of mass state depends on the masses through c_B.
        R0 = rotation(X_WO0[2])
        self.S = np.zeros((K, 6, 2 * n))  # d (p_WBcm, theta, V_WBcm) / d (m, mu)
        self.S[:, :2, :n] = np.einsum('ij,kjn->kin', R0, self.dc)
        self.S[:, 3:5, :n] = V_WO0[2] * np.einsum('ij,jl,kln->kin', S90, R0, self.dc)
        self.obs = obs
        self.loss = np.zeros(K)
        self.grad = np.zeros((K, 2 * n))

    def state(self, t: int, p_WBcm: FloatArray, theta: FloatArray) -> None:
        if t not in self.obs:
            return
        n = self.model.grid.n
        R = rotation(theta)
        r_W = np.einsum('kij,knj->kni', R, self.model.r_B[None] - self.c_B[:, None])
        err = p_WBcm[:, None, :] + r_W - self.obs[t][None]  # (K, n, 2)
        self.loss += np.einsum('kni,kni->k', err, err) / n
        e_sum = 2.0 * err.sum(axis=1) / n  # (K, 2)
        dl_dth = 2.0 * np.einsum('kni,kni->k', err, r_W @ S90.T) / n
        self.grad += np.einsum('ki,kij->kj', e_sum, self.S[:, :2])
        self.grad += dl_dth[:, None] * self.S[:, 2]
        # Direct dependence of the cells on c_B: p_i = p_WBcm + R (r_i - c_B).
        self.grad[:, :n] -= np.einsum('ki,kij,kjn->kn', e_sum, R, self.dc)

    def step(self, record: StepRecord) -> None:
        t, theta, nu, P, f_B = record.t, record.theta, record.nu, record.P, record.f_B
        result = record.result
        h, n = self.h, self.model.grid.n
        V = com_twist(theta, nu, self.c_B)
        dnu_dth, dnu_dV, dnu_dm = _input_jacobians(theta, V, self.c_B, self.dc)
        # The applied impulse turns with the body: f_B = R^T f_W.
        df_dth = -f_B @ S90.T
        params = self.params
        if self.basis is not None:
            dN = tipping(self.h_z[t], f_B, self.basis)
            dN_dth = tipping(self.h_z[t], df_dth, self.basis)
            params = params.tipped(dN, dN_dth[:, :, None])
        J_nu, J_P, J_mx, J_mu = step_jacobians(params, nu, P, result)
        J_m = J_mx[:, :, :n]
        r_c = self.r_c[t]
        dP_dth = np.column_stack((h * df_dth, h * (r_c[0] * df_dth[:, 1] - r_c[1] * df_dth[:, 0])))
        dnu1_dth = np.einsum('kij,kj->ki', J_nu, dnu_dth) + np.einsum('kij,kj->ki', J_P, dP_dth)
        if J_mx.shape[2] > n:  # the loads' yaw dependence
            dnu1_dth += J_mx[:, :, n]
        dnu1_dV = J_nu @ dnu_dV
        dnu1_dpi = np.concatenate((J_m + J_nu @ dnu_dm, J_mu), axis=2)
        D = _twist_map(theta, self.c_B)
        V1 = com_twist(theta, result.nu, self.c_B)
        dV1_dth = np.einsum('kij,kj->ki', D, dnu1_dth)
        dV1_dth[:, :2] += V1[:, :2] @ S90.T
        dV1_dV = D @ dnu1_dV
        dV1_dpi = D @ dnu1_dpi
        dV1_dpi[:, :, :n] += _output_mass_term(theta, V1[:, 2], self.dc)
        S = self.S
        Sv = dV1_dth[:, :, None] * S[:, 2:3, :] + dV1_dV @ S[:, 3:6] + dV1_dpi
        S_new = np.empty_like(S)
        S_new[:, 3:6] = Sv
        S_new[:, :3] = S[:, :3] + h * Sv
        self.S = S_new


def rollout_loss(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    push: WrenchPush,
    X_WO0: ArrayLike,
    obs_steps: ArrayLike,
    X_WO_obs: ArrayLike,
    V_WO0: ArrayLike | None = None,
    support: str = DEFAULT_SUPPORT,
    push_height: ArrayLike = 0.0,
) -> LossGrad:
    """Multi-step rollout loss and its exact gradient, for K hypotheses at once.

    Simulates ``push`` from ``X_WO0`` (and ``V_WO0``) and compares the cell positions at the
    observed steps ``obs_steps`` (J,) with those of the observed poses ``X_WO_obs`` (J, 3).
    ``push_height`` [m], one or (n,), tips each step's loads by the push's moment as
    :func:`slide_core.physics.simulate` does (0: none); the gradient follows the tipped
    loads, clipped where a cell lifts off, and their turning with the body.
    """
    if not isinstance(push, WrenchPush):
        raise PhysicsError('gradients need a wrench-driven push (WrenchPush)')
    m, mu = check_params(grid, mass, friction)
    t_obs, X_obs = _check_observations(push.steps, obs_steps, X_WO_obs)
    X0 = check_pose(X_WO0, 'X_WO0')
    V0 = np.zeros(3) if V_WO0 is None else check_pose(V_WO0, 'V_WO0')
    model = RigidModel.of(grid, support)
    obs = {int(t): _cells(grid, X) for t, X in zip(t_obs, X_obs, strict=True)}
    h_push = push_heights(model, push_height)
    tracker = _Tracker(model, m, mu, push, obs, X0, V0, h_push)
    rollout = run_rollout(model, m, mu, push, X0, V0, observer=tracker, push_height=push_height)
    n = grid.n
    return LossGrad(tracker.loss, tracker.grad[:, :n], tracker.grad[:, n:], rollout)


def one_step_loss(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    push: WrenchPush,
    X_WO_obs: ArrayLike,
    steps: ArrayLike | None = None,
    support: str = DEFAULT_SUPPORT,
    push_height: ArrayLike = 0.0,
) -> LossGrad:
    """The paper's one-step-ahead loss (Eq. 1) and its exact gradient.

    ``X_WO_obs`` (T+1, 3) are the observed poses at every step boundary of ``push``. For
    each t in 1..T-1 the state at boundary t (observed pose; velocity of the hypothesis'
    centre of mass and spin from the poses at t-1 and t) and the force of step t predict
    the pose at t+1 (the indexing of this simulator's semi-implicit step); the loss sums
    the mean squared cell position errors of these predictions. All predictions run as
    one batch. ``steps`` restricts the sum to some t (default: all of 1..T-1).
    ``push_height`` [m], one or (n,), tips each step's loads by the push's moment as
    :func:`rollout_loss` does (the yaw is observed here, not predicted).
    """
    if not isinstance(push, WrenchPush):
        raise PhysicsError('gradients need a wrench-driven push (WrenchPush)')
    m, mu = check_params(grid, mass, friction)
    X = check_pose(X_WO_obs, 'X_WO_obs')
    T = push.steps
    if X.shape != (T + 1, 3):
        raise PhysicsError(f'X_WO_obs must have shape ({T + 1}, 3), got {X.shape}')
    if T < 2:
        raise PhysicsError('the one-step loss needs a push of at least 2 steps')
    model = RigidModel.of(grid, support)
    K, n = m.shape
    h = push.dt
    if steps is None:
        steps = np.arange(1, T)
    else:
        steps = np.unique(np.asarray(steps, dtype=np.int64))
        if steps.size == 0 or steps[0] < 1 or steps[-1] > T - 1:
            raise PhysicsError(f'steps must be a non-empty subset of 1..{T - 1}')
    S = steps.size
    rep = np.repeat(np.arange(K), S)  # hypothesis of each batch row
    t_of = np.tile(steps, K)  # step of each batch row
    mb, mub = m[rep], mu[rep]
    c_B = model.com(mb)
    dc = _com_sensitivity(model, mb)
    R_all = rotation(X[:, 2])  # (T+1, 2, 2)
    anchor = model.p_OG[None, :] + c_B  # O to C in the body frame, per row
    p_C_now = X[t_of, :2] + np.einsum('kij,kj->ki', R_all[t_of], anchor)
    p_C_before = X[t_of - 1, :2] + np.einsum('kij,kj->ki', R_all[t_of - 1], anchor)
    th = X[t_of, 2]
    V = np.column_stack(((p_C_now - p_C_before) / h, (X[t_of, 2] - X[t_of - 1, 2]) / h))
    nu = body_twist(th, V, c_B)
    P = np.zeros((K * S, 3))
    f_B = np.zeros((K * S, 2))
    for t in steps:
        rows = t_of == t
        P[rows], f_B[rows] = wrench_impulse(model, push, int(t), th[rows])
    M = model.mass_matrix(mb)
    M_inv = np.asarray(np.linalg.inv(M), dtype=float)
    params = StepParams.of(model, M, mb, mub, h)
    L_tau = torsion_limits(grid, params.L)  # the spin's limit stays static, as simulated
    h_push = push_heights(model, push_height)
    if h_push.shape[0]:
        h_z = h_push[model.grid.nearest_cells(push.p_OA[t_of])]
        dN = tipping(h_z, f_B, model.support.tipping_basis(mb))
        params = params.tipped(dN, np.zeros((K * S, n, 0)))
    L = params.L
    result = fast_step(model, M, M_inv, L, L_tau, nu, P, None, keep_solutions=True)
    J_nu, _, J_m, J_mu = step_jacobians(params, nu, P, result)
    V1 = com_twist(th, result.nu, c_B)
    p_pred = p_C_now + h * V1[:, :2]
    th_pred = th + h * V1[:, 2]
    R_pred = rotation(th_pred)
    r_W = np.einsum('kij,knj->kni', R_pred, model.r_B[None] - c_B[:, None])
    target = np.stack([_cells(grid, X[t + 1]) for t in steps])[np.tile(np.arange(S), K)]
    err = p_pred[:, None, :] + r_W - target
    loss = np.einsum('kni,kni->k', err, err) / n
    e_sum = 2.0 * err.sum(axis=1) / n
    dl_dth = 2.0 * np.einsum('kni,kni->k', err, r_W @ S90.T) / n
    # Through the predicted twist V1 = D nu1 (+ its explicit c_B term).
    dl_dV1 = np.column_stack((h * e_sum, h * dl_dth))
    D = _twist_map(th, c_B)
    dl_dnu1 = np.einsum('ki,kij->kj', dl_dV1, D)
    _, dnu_dV, dnu_dm = _input_jacobians(th, V, c_B, dc)
    # The observed input twist depends on c_B too: dV/dm = ((R_t - R_t-1) dc / h, 0).
    dV_dm = np.zeros((K * S, 3, n))
    dV_dm[:, :2] = np.einsum('kij,kjn->kin', R_all[t_of] - R_all[t_of - 1], dc) / h
    dnu_dm_total = dnu_dm + dnu_dV @ dV_dm
    g_m = np.einsum('ki,kin->kn', dl_dnu1, J_m + J_nu @ dnu_dm_total)
    g_m += np.einsum('ki,kin->kn', dl_dV1, _output_mass_term(th, V1[:, 2], dc))
    # Direct: p_C_now (R_t dc) and the cells (-R_pred dc).
    g_m += np.einsum('ki,kij,kjn->kn', e_sum, R_all[t_of] - R_pred, dc)
    g_mu = np.einsum('ki,kin->kn', dl_dnu1, J_mu)
    return LossGrad(
        loss.reshape(K, S).sum(axis=1),
        g_m.reshape(K, S, n).sum(axis=1),
        g_mu.reshape(K, S, n).sum(axis=1),
        None,
    )
