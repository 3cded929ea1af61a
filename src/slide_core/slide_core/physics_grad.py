"""Analytic gradients of prediction losses with respect to every cell's mass and friction.

Derivation (see also :mod:`slide_core.physics`): a step's solution satisfies, on its
active set, the linear conditions

    M (nu' - nu) - P + sum_{i saturated} L_i b_i + s_tau L_tau e_3 + C^T Lambda = 0
    C nu' = 0

where saturated cells push with their full limit ``L_i = mu_i m_i g h`` along ``b_i``
(``b_i = J_i^T d_i(nu)`` for a cell that was sliding, a vertex direction of its friction
polygon for a cell that broke away from rest), ``s_tau = +-1`` when the spin friction is
saturated, and the rows of ``C`` hold cells that static friction keeps still (``J_p``),
cells whose forward sliding just stopped (``b_i^T``), a cell breaking away along a face of
its polygon (difference of the face's two vertex directions), and the spin when it is held
at zero (``e_3^T``). Rows that carry no impulse (a cell or spin that reversed against its
previous direction) drop out. Differentiating
this square system (the paper's section V, with ``X = M^-1`` of the rigid body when ``C``
is empty) gives ``d nu' / d(nu, P, m, mu)``:

    [M  C^T] [d nu'    ]     [dE1]            dE1/dm_k  = Q_k (nu' - nu) + [k sat] mu_k g h b_k
    [C   0 ] [d Lambda ] = - [dE2],                         + [spin sat] s_tau k_s w mu_k g h e_3
                                              dE1/dmu_k = [k sat] m_k g h b_k + ...
                                              dE1/dnu   = -M + sum_i L_i db_i/dnu (+ rows of C)
                                              db_i/dnu  = J_i^T (I - d_i d_i^T) J_i / |J_i nu|

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

Sticking steps have zero sensitivity (their true derivative); switching points use the
active set the solver returned (one side's derivative); nothing is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.geometry import FloatArray, Grid, check_pose, rotation
from slide_core.physics import (
    _S,
    _SPIN_NEG,
    _SPIN_POS,
    _SPIN_SLIDING,
    _SPIN_STUCK,
    GRAVITY,
    MOVING_SPEED,
    SPIN_ARM,
    PhysicsError,
    RigidModel,
    Rollout,
    WrenchPush,
    _fast_step,
    _limits,
    _simulate,
    _StepResult,
    body_twist,
    check_params,
    com_twist,
    wrench_impulse,
)


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


def _structure(
    model: RigidModel,
    nu: FloatArray,
    nu_new: FloatArray,
    L: FloatArray,
    step: _StepResult,
    k: int,
) -> tuple[FloatArray, NDArray[np.bool_], list[tuple[FloatArray, int]], float]:
    """Active structure of hypothesis k's step.

    Returns b (n, 3) the unit-limit impulse direction of each saturated cell (zeros
    elsewhere), moving (n,) whether b depends on nu (direction from the previous
    velocity), the equality rows [(c (3,), cell whose direction it is or -1)], and the
    spin sign s_tau (0 when the spin is held or has no friction).
    """
    n = model.grid.n
    u = model.J @ nu
    speed = np.linalg.norm(u, axis=1)
    active = L > 0
    was_moving = (speed > MOVING_SPEED) & active
    d = u / np.where(speed > 0, speed, 1.0)[:, None]
    g = np.einsum('nij,ni->nj', model.J, d)
    b = np.zeros((n, 3))
    moving = np.zeros(n, dtype=bool)
    eq: list[tuple[FloatArray, int]] = []
    e3 = np.array([0.0, 0.0, 1.0])
    if not step.general[k]:
        b[was_moving] = g[was_moving]
        moving[:] = was_moving
        # Cells breaking away from rest push on a fixed polygon vertex.
        broke = np.any(step.vertex_dirs[k] != 0.0, axis=1)
        b[broke] = np.einsum('nij,ni->nj', model.J[broke], step.vertex_dirs[k][broke])
        p = int(step.pinned[k])
        if p >= 0:
            eq += [(model.J[p][0], -1), (model.J[p][1], -1)]
        mode = int(step.spin_mode[k])
        if mode == _SPIN_STUCK:
            eq.append((e3, -1))
            s_tau = 0.0
        elif mode == _SPIN_SLIDING:
            s_tau = float(np.sign(nu[2]))
        elif mode == _SPIN_POS:
            s_tau = 1.0
        elif mode == _SPIN_NEG:
            s_tau = -1.0
        else:  # free (the spin reversed against its row): no spin friction
            s_tau = 0.0
        return b, moving, eq, s_tau
    G, E, Lg, cells, sol = step.solutions[k]
    group = np.argmax(E, axis=1)
    v_after = model.J @ nu_new
    speed_after = np.linalg.norm(v_after, axis=1)
    v_scale = 1e-9 + float(np.abs(nu_new).max()) + float(np.abs(nu).max())
    s_tau = 0.0
    for gi in range(E.shape[1]):
        rows = np.nonzero(group == gi)[0]
        cell = int(cells[rows[0]])
        impulse = G[rows].T @ sol.lam[rows]
        total = float(sol.lam[rows].sum())
        saturated = total >= Lg[gi] * (1 - 1e-7)
        unloaded = total <= Lg[gi] * 1e-9
        single = rows.size == 1  # a direction from the previous velocity
        if cell == -1:  # spin group
            if single and unloaded:
                continue  # the spin reversed: its row carries nothing
            if abs(nu_new[2]) > 1e-9 * v_scale and saturated:
                s_tau = float(np.sign(impulse[2]))
            else:
                eq.append((e3, -1))
            continue
        if cell < 0:
            continue
        if was_moving[cell]:
            if unloaded:
                continue  # moves against its previous direction: no friction on that row
            if saturated and g[cell] @ nu_new > 1e-9 * v_scale:
                b[cell] = g[cell]
                moving[cell] = True
            else:
                eq.append((g[cell], cell))
        elif speed_after[cell] > 1e-9 * v_scale and saturated:
            # Broke away from rest, sliding against a vertex of the friction polygon (one
            # loaded row: fixed direction) or along a face (two rows: the limit along one,
            # the split between them free, the velocity normal to the face).
            loaded = rows[sol.lam[rows] > 1e-9 * Lg[gi]]
            b[cell] = G[loaded[-1]]
            for r in loaded[:-1]:
                eq.append((G[r] - G[loaded[-1]], -1))
        else:
            eq += [(model.J[cell][0], -1), (model.J[cell][1], -1)]
    return b, moving, eq, s_tau


def _step_jacobians(
    model: RigidModel,
    M: FloatArray,
    m: FloatArray,
    mu: FloatArray,
    L: FloatArray,
    h: float,
    nu: FloatArray,
    P: FloatArray,
    step: _StepResult,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Jacobians of nu' (K, 3) w.r.t. nu (K, 3, 3), P (K, 3, 3), mass and friction (K, 3, n).

    ``nu`` and ``P`` are the step's inputs, ``step`` its result (with general solutions).
    """
    K, n = m.shape
    w = model.grid.cell_size
    e3 = np.array([0.0, 0.0, 1.0])
    nu_new = step.nu
    d_nu = np.zeros((K, 3, 3))
    d_P = np.zeros((K, 3, 3))
    d_m = np.zeros((K, 3, n))
    d_mu = np.zeros((K, 3, n))
    # Explicit steps with every friction saturated (no pivot, spin not held): closed form.
    simple = (
        ~step.general
        & (step.pinned < 0)
        & (step.spin_mode != _SPIN_STUCK)
        & ~np.any(step.vertex_dirs != 0.0, axis=(1, 2))
        & ~step.stopped
    )
    if simple.any():
        _explicit_jacobians(model, M, m, mu, L, h, nu, step, simple, d_nu, d_P, d_m, d_mu)
    for k in np.nonzero(~simple & ~step.stopped)[0]:  # a stop's sensitivity is zero
        b, moving, eq, s_tau = _structure(model, nu[k], nu_new[k], L[k], step, int(k))
        if not moving.any() and s_tau == 0.0 and not np.any(nu_new[k]):
            continue  # held at rest: locally constant, zero sensitivity
        u = model.J @ nu[k]
        speed = np.maximum(np.linalg.norm(u, axis=1), 1e-300)
        # db_i/dnu for cells whose direction comes from the previous velocity.
        dirs = u / speed[:, None]
        proj = (np.eye(2)[None] - np.einsum('ni,nj->nij', dirs, dirs)) / speed[:, None, None]
        db = np.einsum('nai,nab,nbj->nij', model.J, proj, model.J)  # (n, 3, 3)
        q = len(eq)
        C = np.array([c for c, _ in eq]).reshape(q, 3)
        A = np.zeros((3 + q, 3 + q))
        A[:3, :3] = M[k]
        A[:3, 3:] = C.T
        A[3:, :3] = C
        fixed = L[k] @ b + s_tau * SPIN_ARM * w * L[k].sum() * e3
        dE_nu = np.zeros((3 + q, 3))
        dE_nu[:3] = -M[k] + np.einsum('i,ijk->jk', L[k] * moving, db)
        if q:
            # Impulses of the equality rows, from the momentum balance.
            lam_eq = np.linalg.lstsq(C.T, P[k] - M[k] @ (nu_new[k] - nu[k]) - fixed, rcond=None)[0]
            for r, (_, cell) in enumerate(eq):
                if cell >= 0:  # a stopped sliding cell: its row turns with nu
                    dE_nu[:3] += lam_eq[r] * db[cell]
                    dE_nu[3 + r] = nu_new[k] @ db[cell]
        dE_P = np.zeros((3 + q, 3))
        dE_P[:3] = -np.eye(3)
        spin = s_tau * SPIN_ARM * w * GRAVITY * h
        dE_m = np.zeros((3 + q, n))
        dE_m[:3] = np.einsum('nij,j->in', model.Q, nu_new[k] - nu[k])
        dE_m[:3] += (b * (mu[k] * GRAVITY * h)[:, None]).T + np.outer(e3, spin * mu[k])
        dE_mu = np.zeros((3 + q, n))
        dE_mu[:3] = (b * (m[k] * GRAVITY * h)[:, None]).T + np.outer(e3, spin * m[k])
        rhs = np.hstack((dE_nu, dE_P, dE_m, dE_mu))
        sol = -np.linalg.lstsq(A, rhs, rcond=None)[0][:3]
        d_nu[k] = sol[:, :3]
        d_P[k] = sol[:, 3:6]
        d_m[k] = sol[:, 6 : 6 + n]
        d_mu[k] = sol[:, 6 + n :]
    return d_nu, d_P, d_m, d_mu


def _explicit_jacobians(
    model: RigidModel,
    M: FloatArray,
    m: FloatArray,
    mu: FloatArray,
    L: FloatArray,
    h: float,
    nu: FloatArray,
    step: _StepResult,
    sel: NDArray[np.bool_],
    d_nu: FloatArray,
    d_P: FloatArray,
    d_m: FloatArray,
    d_mu: FloatArray,
) -> None:
    """Closed-form Jacobians (the paper's W_M, W_mu plus the direction term), in place."""
    w = model.grid.cell_size
    Mi = np.linalg.inv(M[sel])
    v0, v1 = nu[sel], step.nu[sel]
    u = np.einsum('nij,kj->kni', model.J, v0)
    speed = np.linalg.norm(u, axis=2)
    moving = (speed > MOVING_SPEED) & (L[sel] > 0)
    safe = np.where(moving, speed, 1.0)
    dirs = u / safe[..., None]
    b = np.einsum('nij,kni->knj', model.J, dirs) * moving[..., None]
    proj = (np.eye(2) - np.einsum('kni,knj->knij', dirs, dirs)) / safe[..., None, None]
    db = np.einsum('nai,knab,nbj->knij', model.J, proj, model.J)
    mode = step.spin_mode[sel]
    s_tau = np.where(
        mode == _SPIN_SLIDING,
        np.sign(v0[:, 2]),
        np.where(mode == _SPIN_POS, 1.0, np.where(mode == _SPIN_NEG, -1.0, 0.0)),
    )
    ghm = GRAVITY * h
    spin = (s_tau * SPIN_ARM * w * ghm)[:, None]
    dE_nu = -M[sel] + np.einsum('kn,knij->kij', L[sel] * moving, db)
    dE_m = np.einsum('nij,kj->kin', model.Q, v1 - v0) + np.swapaxes(
        b * (mu[sel] * ghm)[..., None], 1, 2
    )
    dE_m[:, 2, :] += spin * mu[sel]
    dE_mu = np.swapaxes(b * (m[sel] * ghm)[..., None], 1, 2)
    dE_mu[:, 2, :] += spin * m[sel]
    d_nu[sel] = -Mi @ dE_nu
    d_P[sel] = Mi
    d_m[sel] = -Mi @ dE_m
    d_mu[sel] = -Mi @ dE_mu


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
    """D (K, 3, 3): the centre of mass twist V_WC = D nu of a body-frame twist nu at G."""
    R = rotation(theta)
    D = np.zeros((theta.size, 3, 3))
    D[:, :2, :2] = R
    D[:, :2, 2] = np.einsum('kij,kj->ki', R, c_B @ _S.T)
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
    dth[:, :2] = -(nu[:, :2] + V[:, 2:3] * (c_B @ _S.T)) @ _S.T
    Rt = np.swapaxes(rotation(theta), 1, 2)
    dV = np.zeros((K, 3, 3))
    dV[:, :2, :2] = Rt
    dV[:, :2, 2] = -(c_B @ _S.T)
    dV[:, 2, 2] = 1.0
    dm = np.zeros((K, 3, dc.shape[2]))
    dm[:, :2] = -V[:, 2, None, None] * np.einsum('ij,kjn->kin', _S, dc)
    return dth, dV, dm


def _output_mass_term(theta: FloatArray, omega: FloatArray, dc: FloatArray) -> FloatArray:
    """Explicit d V_WC / d m (K, 3, n) of com_twist at fixed nu: R omega S dc."""
    out = np.zeros((theta.size, 3, dc.shape[2]))
    out[:, :2] = omega[:, None, None] * np.einsum('kij,jl,kln->kin', rotation(theta), _S, dc)
    return out


class _Tracker:
    """Forward-mode sensitivities of the rollout state (p_WC, theta, V_WC) and the loss."""

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
    ) -> None:
        self.model, self.m, self.mu, self.h = model, m, mu, push.dt
        self.r_c = push.p_OC - model.p_OG
        K, n = m.shape
        self.M = model.mass_matrix(m)
        self.L, _ = _limits(model.grid, m, mu, push.dt)
        self.c_B = model.com(m)
        self.dc = _com_sensitivity(model, m)
        # The initial centre of mass state depends on the masses through c_B.
        R0 = rotation(X_WO0[2])
        self.S = np.zeros((K, 6, 2 * n))  # d (p_WC, theta, V_WC) / d (m, mu)
        self.S[:, :2, :n] = np.einsum('ij,kjn->kin', R0, self.dc)
        self.S[:, 3:5, :n] = V_WO0[2] * np.einsum('ij,jl,kln->kin', _S, R0, self.dc)
        self.obs = obs
        self.loss = np.zeros(K)
        self.grad = np.zeros((K, 2 * n))

    def state(self, t: int, p_WC: FloatArray, theta: FloatArray) -> None:
        if t not in self.obs:
            return
        n = self.model.grid.n
        R = rotation(theta)
        r_W = np.einsum('kij,knj->kni', R, self.model.r_B[None] - self.c_B[:, None])
        err = p_WC[:, None, :] + r_W - self.obs[t][None]  # (K, n, 2)
        self.loss += np.einsum('kni,kni->k', err, err) / n
        e_sum = 2.0 * err.sum(axis=1) / n  # (K, 2)
        dl_dth = 2.0 * np.einsum('kni,kni->k', err, r_W @ _S.T) / n
        self.grad += np.einsum('ki,kij->kj', e_sum, self.S[:, :2])
        self.grad += dl_dth[:, None] * self.S[:, 2]
        # Direct dependence of the cells on c_B: p_i = p_WC + R (r_i - c_B).
        self.grad[:, :n] -= np.einsum('ki,kij,kjn->kn', e_sum, R, self.dc)

    def step(
        self,
        t: int,
        theta: FloatArray,
        nu: FloatArray,
        P: FloatArray,
        f_B: FloatArray,
        result: _StepResult,
    ) -> None:
        h, n = self.h, self.model.grid.n
        J_nu, J_P, J_m, J_mu = _step_jacobians(
            self.model, self.M, self.m, self.mu, self.L, h, nu, P, result
        )
        V = com_twist(theta, nu, self.c_B)
        dnu_dth, dnu_dV, dnu_dm = _input_jacobians(theta, V, self.c_B, self.dc)
        # The applied impulse turns with the body: f_B = R^T f_W.
        df_dth = -f_B @ _S.T
        r_c = self.r_c[t]
        dP_dth = np.column_stack((h * df_dth, h * (r_c[0] * df_dth[:, 1] - r_c[1] * df_dth[:, 0])))
        dnu1_dth = np.einsum('kij,kj->ki', J_nu, dnu_dth) + np.einsum('kij,kj->ki', J_P, dP_dth)
        dnu1_dV = J_nu @ dnu_dV
        dnu1_dpi = np.concatenate((J_m + J_nu @ dnu_dm, J_mu), axis=2)
        D = _twist_map(theta, self.c_B)
        V1 = com_twist(theta, result.nu, self.c_B)
        dV1_dth = np.einsum('kij,kj->ki', D, dnu1_dth)
        dV1_dth[:, :2] += V1[:, :2] @ _S.T
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
) -> LossGrad:
    """Multi-step rollout loss and its exact gradient, for K hypotheses at once.

    Simulates ``push`` from ``X_WO0`` (and ``V_WO0``) and compares the cell positions at the
    observed steps ``obs_steps`` (J,) with those of the observed poses ``X_WO_obs`` (J, 3).
    """
    if not isinstance(push, WrenchPush):
        raise PhysicsError('gradients need a wrench-driven push (WrenchPush)')
    m, mu = check_params(grid, mass, friction)
    t_obs, X_obs = _check_observations(push.steps, obs_steps, X_WO_obs)
    X0 = check_pose(X_WO0, 'X_WO0')
    V0 = np.zeros(3) if V_WO0 is None else check_pose(V_WO0, 'V_WO0')
    model = RigidModel.of(grid)
    obs = {int(t): _cells(grid, X) for t, X in zip(t_obs, X_obs, strict=True)}
    tracker = _Tracker(model, m, mu, push, obs, X0, V0)
    rollout = _simulate(model, m, mu, push, X0, V0, observer=tracker)
    n = grid.n
    return LossGrad(tracker.loss, tracker.grad[:, :n], tracker.grad[:, n:], rollout)


def one_step_loss(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    push: WrenchPush,
    X_WO_obs: ArrayLike,
    steps: ArrayLike | None = None,
) -> LossGrad:
    """The paper's one-step-ahead loss (Eq. 1) and its exact gradient.

    ``X_WO_obs`` (T+1, 3) are the observed poses at every step boundary of ``push``. For
    each t in 1..T-1 the state at boundary t (observed pose; velocity of the hypothesis'
    centre of mass and spin from the poses at t-1 and t) and the force of step t predict
    the pose at t+1 (the indexing of this simulator's semi-implicit step); the loss sums
    the mean squared cell position errors of these predictions. All predictions run as
    one batch. ``steps`` restricts the sum to some t (default: all of 1..T-1).
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
    model = RigidModel.of(grid)
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
    for t in steps:
        rows = t_of == t
        P[rows], _ = wrench_impulse(model, push, int(t), th[rows])
    M = model.mass_matrix(mb)
    M_inv = np.asarray(np.linalg.inv(M), dtype=float)
    L, L_tau = _limits(grid, mb, mub, h)
    result = _fast_step(model, M, M_inv, L, L_tau, nu, P, None, keep_solutions=True)
    J_nu, _, J_m, J_mu = _step_jacobians(model, M, mb, mub, L, h, nu, P, result)
    V1 = com_twist(th, result.nu, c_B)
    p_pred = p_C_now + h * V1[:, :2]
    th_pred = th + h * V1[:, 2]
    R_pred = rotation(th_pred)
    r_W = np.einsum('kij,knj->kni', R_pred, model.r_B[None] - c_B[:, None])
    target = np.stack([_cells(grid, X[t + 1]) for t in steps])[np.tile(np.arange(S), K)]
    err = p_pred[:, None, :] + r_W - target
    loss = np.einsum('kni,kni->k', err, err) / n
    e_sum = 2.0 * err.sum(axis=1) / n
    dl_dth = 2.0 * np.einsum('kni,kni->k', err, r_W @ _S.T) / n
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
