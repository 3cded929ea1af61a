"""Training pushes in regression form: the wrench balance w = Q m + G c on every moving step
(derivation in :mod:`slide_core.identification`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import lsq_linear
from scipy.signal import savgol_filter

from slide_core.geometry import FloatArray, Grid, edge_support, rotation
from slide_core.identification import kernels
from slide_core.identification.bounds import Bounds
from slide_core.identification.errors import IdentificationError, OffTableError
from slide_core.identification.pushes import PushData
from slide_core.physics import (
    DEFAULT_SUPPORT,
    GRAVITY,
    SPIN_ARM,
    Support,
    check_support,
    moment_loads,
)

MIN_SPEED = 0.003  # m/s: a step counts when some cell moves at least this fast
SPEED_EPS = 0.001  # m/s: regularisation of a cell's sliding direction
SPIN_EPS = 0.02  # rad/s: regularisation of the spin's sign
SMOOTHING_WINDOW = 7  # samples of the Savitzky-Golay filter (70 ms at 100 Hz)
SLOW_TIP = 0.25
"""The stroke's end: once the fingertip that the F/T feels has slowed for good below this
share of its median speed over the push's felt steps (or below MIN_SPEED), its steps are
not fitted: the object is coming to rest against it (:meth:`TrainingSet.from_pushes`)."""


def _window(samples: int) -> int:
    window = min(SMOOTHING_WINDOW, samples - (1 - samples % 2))
    if window < 5:
        raise IdentificationError('a push needs at least 5 observed steps')
    return window


def _step_accelerations(X: FloatArray, dt: float) -> FloatArray:
    """Accelerations (T, c) at the T step midpoints of positions X (T+1, c) at the step
    boundaries: their Savitzky-Golay second derivative, each step's two ends averaged. The
    one filter of both sides of the wrench balance (:func:`_as_accelerations`)."""
    A = savgol_filter(X, _window(X.shape[0]), 2, deriv=2, delta=dt, axis=0)
    return np.asarray((A[:-1] + A[1:]) / 2, dtype=float)


def _kinematics(X: FloatArray, dt: float) -> tuple[FloatArray, FloatArray]:
    """Velocities (T+1, 3) of poses X (T+1, 3) at the step boundaries, by a Savitzky-Golay
    fit, and accelerations (T, 3) at the step midpoints (:func:`_step_accelerations`)."""
    Xu = X.copy()
    Xu[:, 2] = np.unwrap(Xu[:, 2])
    V = savgol_filter(Xu, _window(Xu.shape[0]), 2, deriv=1, delta=dt, axis=0)
    return np.asarray(V, dtype=float), _step_accelerations(Xu, dt)


def _as_accelerations(values: FloatArray, dt: float) -> FloatArray:
    """Per-step values (T, c) (forces, friction wrenches) through the filter the step
    accelerations pass (:func:`_step_accelerations`): taken as the accelerations of a unit
    mass, integrated twice to its positions at the T + 1 step boundaries, and
    differentiated back as the poses are. A value held for the whole window comes back
    unchanged.

    Both sides of the wrench balance must pass the same filter: with the forces smoothed
    less than the accelerations (a Savitzky-Golay smoothing, which keeps far more of a
    sharp change than its second derivative does), least squares takes a share of the
    force's peaks for inertia that the smoothed accelerations lack, and the mass comes out
    heavy (:mod:`slide_core.identification` has the figures)."""
    T, c = values.shape
    V = np.zeros((T + 1, c))
    V[1:] = np.cumsum(values, axis=0) * dt
    X = np.zeros((T + 1, c))
    X[1:] = np.cumsum(V[:-1] * dt + values * (dt * dt / 2), axis=0)
    return _step_accelerations(X, dt)


def checked_heights(value: ArrayLike, count: int, per: str) -> FloatArray:
    """Push heights [m] (count,) from one number or one per ``per`` (a step, a cell);
    IdentificationError when they are neither, or not finite and >= 0."""
    try:
        heights = np.broadcast_to(np.asarray(value, dtype=float), (count,))
    except ValueError:
        raise IdentificationError(
            f'push heights must be one number or one per {per} ({count})'
        ) from None
    if not (np.all(np.isfinite(heights)) and np.all(heights >= 0.0)):
        raise IdentificationError('push heights must be finite and >= 0 m')
    return np.array(heights)


def _short_of(supported: FloatArray, grid: Grid) -> NDArray[np.bool_]:
    """(S,) the steps whose carried areas (S, n) fall short of the whole object's."""
    return np.asarray(np.any(supported < grid.area[None] - 1e-12, axis=1))


@dataclass(frozen=True, eq=False)
class TrainingSet:
    """Training pushes as the linear system w = Q m + G c (one row block per moving step).

    Attributes:
        grid: the object.
        Q: (S, 3, n) inertial wrench of each cell per unit mass, per step.
        G: (S, 3, n) friction wrench of each cell per unit friction force, per step.
        w: (S, 3) measured push wrench (force, torque / rho) in the object frame.
        rho: torque-to-force length [m].
        pushes: how many pushes the steps come from.
        support: the support model that turns masses into the cells' normal loads N, so
            that the friction forces are c = mu N (:mod:`slide_core.physics.support`).
        push_height: (S,) height [m] above the table at which each step's push force acts
            (one number: the same for every step); its moment shifts the loads of step t by
            ``dN_t`` (:meth:`Support.tipping_loads`), so the friction forces are
            mu (N + dN_t). 0: no shift (the papers').
        still: the indices of the pushes given in which the object never moved: they add
            nothing (a push that missed, or one that could not move it).
        supported: (S, n) the area fraction of each cell the table carries at each step
            (:func:`slide_core.geometry.edge_support` times :attr:`Grid.area`), for pushes
            with the object partly over the table's edge; None: every cell on the table
            (:attr:`Grid.area`) at every step. On a step over the edge the rigid support's
            loads are :func:`slide_core.physics.moment_loads` of the step's areas, linear in
            the weight's moments (no lift-off, like the push's moment's): the friction term
            is ``sum_k b_k G_t diag(L_t[:, k]) mu`` with ``b = g (M, M c)``, so the loss
            stays a quadratic form, now in (m, mu N, b_k mu, mu). There the centre of mass
            moves the loads of the same cells whose friction the pushes on the table saw,
            which separates it from the friction map (on the table alone only mu_i N_i
            acts: :mod:`slide_core.physics.support`).
        p_OC_carried: (S, n, 2) where the table carries each cell on each step [m, object
            frame]: the centroid of the cell's part on the table
            (:func:`slide_core.geometry.edge_support`); None: the cells' centres.
    """

    grid: Grid
    Q: FloatArray
    G: FloatArray
    w: FloatArray
    rho: float
    pushes: int
    support: str = DEFAULT_SUPPORT
    push_height: FloatArray | float = 0.0
    still: tuple[int, ...] = ()
    supported: FloatArray | None = None
    p_OC_carried: FloatArray | None = None

    def __post_init__(self) -> None:
        arm = checked_heights(self.push_height, self.steps, 'step')
        object.__setattr__(self, 'push_height', arm)
        if self.supported is not None:
            a = np.asarray(self.supported, dtype=float)
            if a.shape != (self.steps, self.grid.n):
                raise IdentificationError(
                    f'supported areas must be (steps, cells) = ({self.steps}, '
                    f'{self.grid.n}), got {a.shape}'
                )
            if not np.all(np.isfinite(a)) or np.any(a < 0.0) or np.any(a.sum(axis=1) <= 0.0):
                raise IdentificationError(
                    'supported areas must be finite and >= 0, and some cell must be carried '
                    'on every step'
                )
            object.__setattr__(self, 'supported', a)
        if self.p_OC_carried is not None:
            p = np.asarray(self.p_OC_carried, dtype=float)
            if p.shape != (self.steps, self.grid.n, 2) or not np.all(np.isfinite(p)):
                raise IdentificationError(
                    f'carried cell positions must be finite and (steps, cells, 2) = '
                    f'({self.steps}, {self.grid.n}, 2), got {p.shape}'
                )
            object.__setattr__(self, 'p_OC_carried', p)

    @cached_property
    def loads(self) -> Support:
        """The cells' normal loads as a function of the masses."""
        return Support.of(self.grid, self.support)

    @property
    def steps(self) -> int:
        return int(self.w.shape[0])

    @classmethod
    def from_pushes(
        cls,
        grid: Grid,
        pushes: list[PushData],
        support: str = DEFAULT_SUPPORT,
        push_height: ArrayLike = 0.0,
        table_edge: bool = True,
    ) -> TrainingSet:
        """Build the system from pushes read with :func:`slide_core.io.read_pushes`, for
        the support model ``support`` and pushes acting ``push_height`` [m] above the table,
        one number or (n,) per cell (:meth:`slide_core.model.Fingertip.force_heights`):
        each step's force acts at the height of the cell nearest its contact point.

        ``table_edge``: the poses are in the table frame W, whose free edge x = 0 carries
        only the part of each cell at x >= 0 (:attr:`supported`, from the midpoint poses of
        the steps); False: the table carries the whole object on every step (poses in some
        other frame). OffTableError (an IdentificationError) when a step has the object
        wholly off the table (its poses are not in the table frame: pass
        ``table_edge=False``)."""
        if not pushes:
            raise IdentificationError('identification needs at least one training push')
        h_cell = checked_heights(push_height, grid.n, 'cell')
        r = grid.p_OC
        w_cell = grid.cell_size
        rho = float(np.sqrt(np.mean(np.sum(r**2, axis=1)))) or w_cell
        Qs, Gs, ws, arms, carried, carried_at = [], [], [], [], [], []
        still: list[int] = []
        for pd in pushes:
            X = pd.X_steps
            dt = pd.push.dt
            V, Am = _kinematics(X, dt)
            T = pd.push.steps
            # Quantities at the step midpoints t + 1/2, where the step's force acts.
            Xm = (X[:-1] + X[1:]) / 2
            Vm = (V[:-1] + V[1:]) / 2
            R = rotation(Xm[:, 2])  # (T, 2, 2)
            v_B = np.einsum('tji,tj->ti', R, Vm[:, :2])  # R^T v_O
            a_B = np.einsum('tji,tj->ti', R, Am[:, :2])
            om, al = Vm[:, 2], Am[:, 2]
            perp = np.stack((-r[:, 1], r[:, 0]), axis=1)  # k x r_i, (n, 2)
            v_i = v_B[:, None, :] + om[:, None, None] * perp[None]  # (T, n, 2)
            a_i = a_B[:, None, :] + al[:, None, None] * perp[None] - om[:, None, None] ** 2 * r
            speed = np.linalg.norm(v_i, axis=2)
            moving = speed.max(axis=1) >= MIN_SPEED
            # The object rests until the fingertip touches it, and the step in which the
            # touch comes slides for only part of its length: neither is a step of sliding
            # friction, but the smoothed velocities carry the motion that follows back into
            # them (the Savitzky-Golay window). Fitted as sliding, against a force of about
            # nothing, they held 71 to 90% of the loss of the true maps on the twin's
            # library pushes (the steps before the touch alone: 55 to 76%).
            touch = pd.touch_step
            if touch is not None:
                moving[: touch + 1] = False
            # Nor once the fingertip, still pressing, has slowed for good below SLOW_TIP of its
            # pressing speed (the stroke's end), or while it stands: the object slows to rest
            # with it, and tracked poses smoothed through the stop leave a speed of a few mm/s
            # in random directions, which passed for sliding. On the twin's library pushes
            # tracked at 30 Hz, 1% of the moving steps (those with the fingertip standing)
            # held half the true maps' loss; on the graph's (10 Hz), the slowing ones too.
            felt = pd.felt
            if felt.any():
                tip = pd.fingertip_speed
                fast = felt & (tip >= max(MIN_SPEED, SLOW_TIP * float(np.median(tip[felt]))))
                ending = np.arange(T) > (np.flatnonzero(fast)[-1] if fast.any() else -1)
                moving &= ~(felt & (ending | (tip < MIN_SPEED)))
            if not moving.any():
                still.append(pd.index)
                continue
            d_i = v_i / np.sqrt(speed**2 + SPEED_EPS**2)[..., None]
            cross_v = r[None, :, 0] * d_i[..., 1] - r[None, :, 1] * d_i[..., 0]
            cross_a = r[None, :, 0] * a_i[..., 1] - r[None, :, 1] * a_i[..., 0]
            spin = SPIN_ARM * w_cell * np.tanh(om / SPIN_EPS)
            G = np.concatenate(
                (np.moveaxis(d_i, 2, 1), ((cross_v + spin[:, None]) / rho)[:, None, :]), axis=1
            )
            # The friction wrenches through the accelerations' filter, as the forces below:
            # none before the touch (the object rests, and the smoothed velocities' motion
            # carried back into those steps is not sliding), and in the touch step only
            # for its share after the first force felt.
            if touch is not None:
                G[:touch] = 0.0
                G[touch] *= pd.touch_share
            G = _as_accelerations(G.reshape(T, -1), dt).reshape(G.shape)
            inertia = w_cell**2 / 6 * al
            Q = np.concatenate(
                (np.moveaxis(a_i, 2, 1), ((cross_a + inertia[:, None]) / rho)[:, None, :]),
                axis=1,
            )
            # The measured wrench through the accelerations' filter (which also smooths the
            # contact chatter the F/T sees).
            f_B = np.einsum('tji,tj->ti', R, pd.push.f_W)
            p = pd.push.p_OA
            tau = p[:, 0] * f_B[:, 1] - p[:, 1] * f_B[:, 0] + pd.push.tau
            w = _as_accelerations(np.column_stack((f_B, tau / rho)), dt)
            keep = moving[:T]
            Qs.append(Q[keep])
            Gs.append(G[keep])
            ws.append(w[keep])
            arms.append(h_cell[grid.nearest_cells(p)][keep])
            if table_edge:
                share, p_carried = edge_support(grid, Xm[keep])
                if np.any(share.sum(axis=1) <= 0.0):
                    raise OffTableError(
                        f'push {pd.index} has the object wholly off the table (x < 0) on some '
                        'step: are its poses in the table frame? (table_edge=False when not)',
                        pd.index,
                    )
                carried.append(share * grid.area[None])
                carried_at.append(p_carried)
        if not ws:
            raise IdentificationError(
                'the object never moves in the training pushes: nothing to identify from '
                '(did they touch it, and can they move it? see that the object poses follow '
                'it)'
            )
        supported = np.concatenate(carried) if carried else np.zeros((0, grid.n))
        over = bool(_short_of(supported, grid).any())
        return cls(
            grid,
            np.concatenate(Qs),
            np.concatenate(Gs),
            np.concatenate(ws),
            rho,
            len(ws),
            check_support(support),
            np.concatenate(arms),
            tuple(still),
            supported if over else None,
            np.concatenate(carried_at) if over else None,
        )

    @cached_property
    def over_edge(self) -> NDArray[np.bool_]:
        """(S,) the steps on which the table carries less than the whole object."""
        if self.supported is None:
            return np.zeros(self.steps, dtype=bool)
        return _short_of(self.supported, self.grid)

    @cached_property
    def _edge_loads(self) -> FloatArray:
        """(S_e, n, 3) :func:`moment_loads` of the steps over the edge (rigid support)."""
        if self.supported is None or not self.over_edge.any():
            return np.zeros((0, self.grid.n, 3))
        edge = self.over_edge
        at = self.grid.p_OC if self.p_OC_carried is None else self.p_OC_carried[edge]
        return moment_loads(at, self.supported[edge])

    @cached_property
    def _edge_rigid(self) -> bool:
        """Whether some step's loads are the linear moments' ones (rigid, over the edge)."""
        return bool(self.over_edge.any()) and self.support != 'cell-mass'

    @cached_property
    def _matrices(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Q and G_c, the friction wrench per unit friction force c = mu N of the whole
        object's loads, as (3S, n) matrices and w as (3S,). G_c is G on the steps on the
        table; over the edge it is G on the carried cells under the cell-mass support and
        zero under the rigid one (those steps' friction acts through :attr:`_blocks`)."""
        n = self.grid.n
        G = self.G
        if self.over_edge.any():
            G = G.copy()
            edge = self.over_edge
            if self._edge_rigid:
                G[edge] = 0.0
            else:
                assert self.supported is not None
                G[edge] *= (self.supported[edge] > 0.0)[:, None, :]
        return (
            np.ascontiguousarray(self.Q.reshape(-1, n)),
            np.ascontiguousarray(G.reshape(-1, n)),
            np.ascontiguousarray(self.w.reshape(-1)),
        )

    @cached_property
    def tips(self) -> bool:
        """Whether the push's moment shifts the loads (a positive push height)."""
        return bool(np.any(np.asarray(self.push_height) > 0.0)) and self.support != 'cell-mass'

    @cached_property
    def _blocks(self) -> FloatArray:
        """(3S, B n) the friction columns besides G_c, each per unit friction coefficient:
        over the edge (rigid) G_t diag(L_t[:, k]) for the weight's moments k = 0, 1, 2 (they
        multiply b_k mu); when the push tips the loads, G_t diag(dN_t) with dN_t from the
        measured force (they multiply mu). B = 0 to 4."""
        S, n = self.steps, self.grid.n
        blocks: list[FloatArray] = []
        edge = self.over_edge
        L = self._edge_loads
        if self._edge_rigid:
            for k in range(3):
                Gk = np.zeros_like(self.G)
                Gk[edge] = self.G[edge] * L[:, None, :, k]
                blocks.append(Gk.reshape(-1, n))
        if self.tips:
            arm = np.asarray(self.push_height)
            moment = arm[:, None] * self.w[:, :2]
            dN = self.loads.tipping_loads(moment)  # (S, n)
            if self._edge_rigid:
                dN[edge] = np.einsum('snj,sj->sn', L[:, :, 1:], moment[edge])
            blocks.append((self.G * dN[:, None, :]).reshape(-1, n))
        if not blocks:
            return np.zeros((3 * S, 0))
        return np.ascontiguousarray(np.hstack(blocks))

    def _weights(self, m: FloatArray) -> FloatArray:
        """(K, B, n) what each of :attr:`_blocks`'s blocks multiplies mu by, for masses
        m (K, n): the weight's moments b_k = g F_k . m, then 1."""
        K, n = m.shape
        out: list[FloatArray] = []
        if self._edge_rigid:
            b = GRAVITY * m @ self._moment_rows.T  # (K, 3)
            out += [np.repeat(b[:, k, None], n, axis=1) for k in range(3)]
        if self.tips:
            out.append(np.ones((K, n)))
        return np.stack(out, axis=1) if out else np.zeros((K, 0, n))

    @cached_property
    def _moment_rows(self) -> FloatArray:
        """(3, n) F^T: the rows (1, r_x, r_y) whose products with m are M and M c."""
        return np.vstack((np.ones(self.grid.n), self.grid.p_OC.T))

    def _chain(
        self,
        m: FloatArray,
        mu: FloatArray,
        N: FloatArray,
        dN: FloatArray,
        W: FloatArray,
        g: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """d loss / d(m, mu) (K, n) each from d loss / dx (K, (2 + B) n), x = (m, mu N,
        W * mu), W = :meth:`_weights` of m."""
        n = m.shape[1]
        g_c = g[:, n : 2 * n]
        g_B = g[:, 2 * n :].reshape(m.shape[0], -1, n)
        g_m = g[:, :n] + np.einsum('ki,kij->kj', g_c * mu, dN)
        g_mu = g_c * N + np.einsum('kbi,kbi->ki', g_B, W)
        if self._edge_rigid:
            moments = np.einsum('kbi,ki->kb', g_B[:, :3], mu)  # d loss / d b_k
            g_m = g_m + GRAVITY * moments @ self._moment_rows
        return g_m, g_mu

    def residual(self, m: FloatArray, mu: FloatArray) -> FloatArray:
        """(K, S, 3) residuals of K hypotheses (m, mu) (K, n)."""
        return self._residual(m, mu, self.loads.loads(m), self._weights(m))

    def _residual(self, m: FloatArray, mu: FloatArray, N: FloatArray, W: FloatArray) -> FloatArray:
        """:meth:`residual` with the normal loads N (K, n) and :meth:`_weights` W of m
        given."""
        Q2, G2, w2 = self._matrices
        res = w2[None] - m @ Q2.T - (mu * N) @ G2.T
        if self._blocks.shape[1]:
            res -= (W * mu[:, None, :]).reshape(m.shape[0], -1) @ self._blocks.T
        return np.asarray(res.reshape(-1, self.steps, 3), dtype=float)

    @property
    def wrench_square(self) -> float:
        """The measured wrenches' mean square [N^2]: the loss of a model that predicts no
        wrench at all."""
        return float(np.mean(np.sum(self.w**2, axis=1))) if self.steps else 0.0

    def explained(self, loss: float) -> float:
        """The share [0, 1] of :attr:`wrench_square` a model of ``loss`` [N^2] explains
        (1 when no wrench was measured)."""
        ww = self.wrench_square
        return 1.0 if ww <= 0.0 else max(0.0, 1.0 - float(loss) / ww)

    def loss(self, m: ArrayLike, mu: ArrayLike) -> FloatArray:
        """(K,) losses [N^2] of hypotheses (K, n)."""
        res = self.residual(np.atleast_2d(m), np.atleast_2d(mu))
        return np.asarray(np.mean(np.sum(res**2, axis=2), axis=1), dtype=float)

    def loss_grad(self, m: ArrayLike, mu: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Losses (K,) and their exact gradients d/dm, d/dmu (K, n)."""
        m2, mu2 = np.atleast_2d(m).astype(float), np.atleast_2d(mu).astype(float)
        Q2, G2, _ = self._matrices
        N, dN = self.loads.loads_and_jacobian(m2)
        W = self._weights(m2)
        res = self._residual(m2, mu2, N, W)
        S = self.steps
        loss = np.mean(np.sum(res**2, axis=2), axis=1)
        flat = res.reshape(res.shape[0], -1)
        g = -2.0 / S * np.hstack((flat @ Q2, flat @ G2, flat @ self._blocks))  # d loss / dx
        g_m, g_mu = self._chain(m2, mu2, N, dN, W, g)
        return np.asarray(loss), np.asarray(g_m), np.asarray(g_mu)

    @cached_property
    def _normal_equations(self) -> tuple[FloatArray, FloatArray, float]:
        """H = [Q G]^T [Q G] (2n, 2n), b = [Q G]^T w (2n,) and w.w of the loss's quadratic
        form (:mod:`slide_core.identification.kernels`)."""
        Q2, G2, w2 = self._matrices
        return kernels.gram(np.ascontiguousarray(np.hstack((Q2, G2))), w2)

    def quick_loss_grad(
        self, m: FloatArray, mu: FloatArray, grad: bool = True
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:meth:`loss_grad` (or only the losses, with zero gradients) from the loss's
        quadratic form: cost independent of the steps, for the optimisers' many
        evaluations; absolute round-off about 1e-15 of the wrenches' squared norm."""
        if self._blocks.shape[1]:
            return self._blocks_loss_grad(m, mu, grad)
        H, b, ww = self._normal_equations
        m2 = np.ascontiguousarray(np.atleast_2d(m), dtype=float)
        mu2 = np.ascontiguousarray(np.atleast_2d(mu), dtype=float)
        K, n = m2.shape
        loss, g_m, g_c = np.zeros(K), np.zeros((K, n)), np.zeros((K, n))
        if not grad:
            N = self.loads.loads(m2)
            kernels.quadratic_loss_grad(H, b, ww, self.steps, m2, N, mu2, loss, g_m, g_c, grad)
            return loss, g_m, g_c
        N, dN = self.loads.loads_and_jacobian(m2)
        kernels.quadratic_loss_grad(H, b, ww, self.steps, m2, N, mu2, loss, g_m, g_c, grad)
        g_m += np.einsum('ki,kij->kj', g_c * mu2, dN)
        return loss, g_m, g_c * N

    @cached_property
    def _blocks_equations(self) -> tuple[FloatArray, FloatArray, float]:
        """H ((2 + B) n square), b, w.w of the loss's quadratic form in x = (m, mu N,
        weights * mu) when the push's moment or the edge adds :attr:`_blocks`:
        |w - Q m - G_c c - sum_B G_B (W_B mu)|^2."""
        Q2, G2, w2 = self._matrices
        return kernels.gram(np.ascontiguousarray(np.hstack((Q2, G2, self._blocks))), w2)

    def _blocks_loss_grad(
        self, m: FloatArray, mu: FloatArray, grad: bool
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:meth:`quick_loss_grad` from the quadratic form of :meth:`_blocks_equations`."""
        H, b, ww = self._blocks_equations
        m2, mu2 = np.atleast_2d(m).astype(float), np.atleast_2d(mu).astype(float)
        if grad:
            N, dN = self.loads.loads_and_jacobian(m2)
        else:
            N = self.loads.loads(m2)
        K = m2.shape[0]
        W = self._weights(m2)
        x = np.hstack((m2, mu2 * N, (W * mu2[:, None, :]).reshape(K, -1)))
        Hx = x @ H  # H is symmetric
        loss = (ww - 2.0 * x @ b + np.sum(x * Hx, axis=1)) / self.steps
        if not grad:
            return loss, np.zeros_like(m2), np.zeros_like(m2)
        g_m, g_mu = self._chain(m2, mu2, N, dN, W, 2.0 * (Hx - b) / self.steps)
        return loss, g_m, g_mu

    @cached_property
    def _friction_system(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The warm start's least squares |G c - (w - Q m)| in n unknowns: with
        G^T G = R^T R (Cholesky), |R c - R^-T (G^T w - G^T Q m)| has the same minimiser.
        Returns R, R^-T G^T w and R^-T G^T Q (from a thin QR of G = U R instead, U^T w
        and U^T Q, when G^T G is singular or badly conditioned)."""
        n = self.grid.n
        H, b, _ = self._normal_equations
        try:
            R = np.linalg.cholesky(H[n:, n:]).T
            d = np.abs(np.diag(R))
            well_posed = bool(d.min() > 1e-6 * d.max())  # else the squared condition bites
        except np.linalg.LinAlgError:
            well_posed = False
        if not well_posed:
            Q2, G2, w2 = self._matrices
            U, R = np.linalg.qr(G2, mode='reduced')
            return np.asarray(R, dtype=float), U.T @ w2, U.T @ Q2
        Rt_inv = np.linalg.inv(R.T)
        return np.asarray(R, dtype=float), Rt_inv @ b[n:], Rt_inv @ H[n:, :n]

    @cached_property
    def _blocks_friction_system(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The warm start's least squares when :attr:`_blocks` act, |G_c diag(N) mu +
        sum_B G_B diag(W_B) mu - (w - Q m)| = |[G_c G_B..] [diag(N); diag(W_B)..] mu - ...|,
        reduced from 3S to (1 + B) n rows by a thin QR [G_c G_B..] = U R: the same
        minimiser for every N and W. Returns R, U^T w, U^T Q."""
        Q2, G2, w2 = self._matrices
        U, R = np.linalg.qr(np.hstack((G2, self._blocks)), mode='reduced')
        return np.asarray(R, dtype=float), U.T @ w2, U.T @ Q2

    def friction_at(self, m: FloatArray, bounds: Bounds) -> FloatArray:
        """Warm start: the friction map that best explains the wrenches at masses m (n,),
        by bounded linear least squares on a reduced n x n system (also when the push's
        moment or the edge adds :attr:`_blocks`, which every coefficient then acts
        through). The unknowns are the loaded cells' coefficients mu, not their forces
        c = mu N: with loads from 0.01 to 0.3 N and G^T G's condition near 1e15, bounded
        least squares in c stopped far from the minimum (the hammer's true masses: a loss
        1.6 times the one in mu). A cell that carries no load keeps the middle of the
        friction bounds (nothing tells it)."""
        N = self.loads.loads(m)[0]
        middle = 0.5 * (bounds.friction_min + bounds.friction_max)
        mu = np.full(N.shape, middle)
        if self._blocks.shape[1]:  # every coefficient acts through the shifted loads
            n = self.grid.n
            R, Rw, RQ = self._blocks_friction_system
            W = self._weights(m[None])[0].reshape(-1)
            blocks = (R[:, n:] * W[None]).reshape(R.shape[0], -1, n).sum(axis=1)
            # (1 + B) n rows reduced to n by a thin QR (the same minimiser): the bounded
            # solver's cost grows with the rows, and this is called for every model the
            # centre-of-mass spread moves (measured: 14 s of an 18 s identification with
            # pushes over the edge, B = 4, went to the solver).
            U, R_mu = np.linalg.qr(R[:, :n] * N[None] + blocks, mode='reduced')
            fit = lsq_linear(
                R_mu,
                U.T @ (Rw - RQ @ m),
                bounds=(bounds.friction_min, bounds.friction_max),
                method='bvls',
            )
            return np.asarray(np.clip(fit.x, bounds.friction_min, bounds.friction_max))
        R, Rw, RQ = self._friction_system
        loaded = N > 1e-9 * max(float(N.max()), 1e-300)
        fit = lsq_linear(
            R[:, loaded] * N[loaded],
            Rw - RQ @ m,
            bounds=(bounds.friction_min, bounds.friction_max),
            method='bvls',
        )
        mu[loaded] = fit.x
        return np.asarray(np.clip(mu, bounds.friction_min, bounds.friction_max))
