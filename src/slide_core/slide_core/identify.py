"""Identification of an object's per-cell mass and friction maps from recorded pushes.

The loss: the one-step model in impulse space
---------------------------------------------
Paper 1 (Eq. 1) scores a hypothesis by simulating one step ahead from each observed state
with the measured force and comparing the predicted pose with the observed one. For slow
pushes that step is stiff: the push force nearly balances friction, so a hypothesis whose
friction is a little too high stops the object inside the step, and every such step needs
the general MLCP (measured: 80% of steps, 13 s per loss evaluation for 8 hypotheses and 5
pushes). We use the same step equation in its other form. Over a step in which the object
slides, every cell's friction acts against its velocity, so Newton-Euler about the object
origin O, in the object frame, reads

    w_push(t) = sum_i m_i Q_i(t) + sum_i c_i G_i(t),       c_i = mu_i m_i g

with, for cell i at r_i (velocity v_i and acceleration a_i from the observed poses):

    Q_i = [a_i ; (r_i x a_i + w^2/6 alpha) / rho]             inertia of the cell
    G_i = [v_i / |v_i|_e ; (r_i x v_i / |v_i|_e + k_s w s(omega)) / rho]   unit friction

where ``|v|_e = sqrt(|v|^2 + e^2)`` regularises the direction of nearly still cells,
``s(omega) = tanh(omega / omega_e)`` the sign of the spin (the simulator's spin row with
its lever ``k_s w``), and ``rho`` turns torques into forces (the cells' RMS radius).
w_push is the F/T force at the contact point (its torque about O included). The loss is
the mean squared residual over every step of the training pushes where the object moves
(still steps say nothing: static friction can be anything below its limit):

    L(m, mu) = mean_t | w_push(t) - Q(t) m - G(t) c |^2     [N^2]

Its gradient is exact and cheap: dL/dm_i = -2 mean_t r_t . (Q_i + mu_i g G_i) and
dL/dmu_i = -2 mean_t r_t . (m_i g G_i). One evaluation for K hypotheses is a few
matrix products (microseconds per hypothesis), so identification takes well under a second
and every optimiser below can be given thousands of evaluations. Because L is a convex
quadratic in (m, c) and the bounds are linear in (m, c), it has no spurious local minima
in those coordinates: what differs between models is how they split c into mass and
friction, which slow pushes only weakly observe (through inertia), as paper 2 says.

One "simulation" below is one evaluation of the loss for one hypothesis over all training
pushes (gradients come with it, as in the papers' analytic method).

Beyond the papers
-----------------
- Step control: spectral projected gradient (Barzilai-Borwein steps with a non-monotone
  Armijo backtracking on the projection arc) instead of a fixed learning rate.
- Warm start: the friction distribution c by bounded least squares (scipy ``lsq_linear``)
  at the initial masses, before the gradient steps.
- The F/T wrench's absolute scale is in the loss (not only the motion).
- The free-sliding phase after the fingertip stops is data like any other moving step.

Bounds: per-cell mass at most ``density_max`` times the cell's volume (steel by default),
friction at most ``friction_max``. Paper 2's schedule for K models: for k <= K/2 the
friction bound is 2k/K of the maximum and the mass bound the maximum; above, friction at
its maximum and mass at (2k/K - 1) of it; each model starts at half its bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import math
from pathlib import Path
import time
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import lsq_linear
from scipy.signal import savgol_filter
import yaml

from slide_core.bag import PushData
from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid, rotation
from slide_core.physics import GRAVITY, SPIN_ARM

METHODS = (
    'probabilistic',
    'analytic',
    'finite-diff',
    'cma-es',
    'nelder-mead',
    'random',
    'weighted-sampling',
    'uniform',
)
DT = 0.01  # s: identification and evaluation read pushes on 10 ms steps (the pose rate)
MIN_SPEED = 0.003  # m/s: a step counts when some cell moves at least this fast
SPEED_EPS = 0.001  # m/s: regularisation of a cell's sliding direction
SPIN_EPS = 0.02  # rad/s: regularisation of the spin's sign
DENSITY_MAX = 8000.0  # kg/m^3: steel; no cell is heavier than its volume of it
FRICTION_MAX = 1.0
MASS_FLOOR = 1e-3  # of a cell's mass bound: masses stay positive (the simulator needs it)

Progress = Callable[[int, int], None]


class IdentificationError(SlideInputError):
    """Data or settings identification cannot use."""


# -- bounds ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bounds:
    """Box bounds of the parameters: per-cell mass (n,) [kg] and friction (scalar)."""

    mass_max: FloatArray
    friction_max: float
    friction_min: float = 0.01

    @classmethod
    def from_grid(
        cls, grid: Grid, density_max: float = DENSITY_MAX, friction_max: float = FRICTION_MAX
    ) -> Bounds:
        """Each cell at most ``density_max`` times its volume; friction up to the maximum."""
        if not (density_max > 0 and friction_max > 0.01):
            raise IdentificationError('density_max must be positive and friction_max > 0.01')
        heights = grid.heights[grid.occupancy]
        if np.any(heights <= 0):
            raise IdentificationError(
                'every cell needs a positive height to bound its mass (grid heights are 0)'
            )
        return cls(density_max * grid.cell_size**2 * heights, float(friction_max))

    @property
    def mass_min(self) -> FloatArray:
        return np.asarray(MASS_FLOOR * self.mass_max, dtype=float)

    def lower(self) -> FloatArray:
        """(2n,) lower bounds of theta = (m, mu)."""
        n = self.mass_max.size
        return np.concatenate((self.mass_min, np.full(n, self.friction_min)))

    def upper(self) -> FloatArray:
        n = self.mass_max.size
        return np.concatenate((self.mass_max, np.full(n, self.friction_max)))

    def project(self, theta: FloatArray) -> FloatArray:
        return np.asarray(np.clip(theta, self.lower(), self.upper()), dtype=float)

    def middle(self) -> FloatArray:
        return (self.lower() + self.upper()) / 2


def schedule(bounds: Bounds, K: int) -> list[Bounds]:
    """Paper 2's K bound pairs: low friction bounds first, then low mass bounds."""
    if K < 1:
        raise IdentificationError(f'K must be at least 1, got {K}')
    out = []
    for k in range(1, K + 1):
        if k <= K / 2:
            mu_max, m_scale = 2 * k / K * bounds.friction_max, 1.0
        else:
            mu_max, m_scale = bounds.friction_max, 2 * k / K - 1
        mu_max = max(mu_max, 2 * bounds.friction_min)
        out.append(Bounds(bounds.mass_max * max(m_scale, 2 * MASS_FLOOR), mu_max))
    return out


# -- the training data in regression form -----------------------------------------------------
SMOOTHING_WINDOW = 7  # samples of the Savitzky-Golay filter (70 ms at 100 Hz)


def _window(samples: int) -> int:
    window = min(SMOOTHING_WINDOW, samples - (1 - samples % 2))
    if window < 5:
        raise IdentificationError('a push needs at least 5 observed steps')
    return window


def _kinematics(X: FloatArray, dt: float) -> tuple[FloatArray, FloatArray]:
    """Velocities and accelerations (T+1, 3) of poses X (T+1, 3), by a Savitzky-Golay fit."""
    Xu = X.copy()
    Xu[:, 2] = np.unwrap(Xu[:, 2])
    window = _window(Xu.shape[0])
    V = savgol_filter(Xu, window, 2, deriv=1, delta=dt, axis=0)
    A = savgol_filter(Xu, window, 2, deriv=2, delta=dt, axis=0)
    return np.asarray(V, dtype=float), np.asarray(A, dtype=float)


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
    """

    grid: Grid
    Q: FloatArray
    G: FloatArray
    w: FloatArray
    rho: float
    pushes: int

    @property
    def steps(self) -> int:
        return int(self.w.shape[0])

    @classmethod
    def from_pushes(cls, grid: Grid, pushes: list[PushData]) -> TrainingSet:
        """Build the system from pushes read with :func:`slide_core.bag.read_pushes`."""
        if not pushes:
            raise IdentificationError('identification needs at least one training push')
        r = grid.p_OC
        w_cell = grid.cell_size
        rho = float(np.sqrt(np.mean(np.sum(r**2, axis=1)))) or w_cell
        Qs, Gs, ws = [], [], []
        for pd in pushes:
            X = pd.X_steps
            dt = pd.push.dt
            V, A = _kinematics(X, dt)
            window = _window(X.shape[0])
            T = pd.push.steps
            # Quantities at the step midpoints t + 1/2, where the step's force acts.
            Xm = (X[:-1] + X[1:]) / 2
            Vm = (V[:-1] + V[1:]) / 2
            Am = (A[:-1] + A[1:]) / 2
            R = rotation(Xm[:, 2])  # (T, 2, 2)
            v_B = np.einsum('tji,tj->ti', R, Vm[:, :2])  # R^T v_O
            a_B = np.einsum('tji,tj->ti', R, Am[:, :2])
            om, al = Vm[:, 2], Am[:, 2]
            perp = np.stack((-r[:, 1], r[:, 0]), axis=1)  # k x r_i, (n, 2)
            v_i = v_B[:, None, :] + om[:, None, None] * perp[None]  # (T, n, 2)
            a_i = a_B[:, None, :] + al[:, None, None] * perp[None] - om[:, None, None] ** 2 * r
            speed = np.linalg.norm(v_i, axis=2)
            moving = speed.max(axis=1) >= MIN_SPEED
            if not moving.any():
                continue
            d_i = v_i / np.sqrt(speed**2 + SPEED_EPS**2)[..., None]
            cross_v = r[None, :, 0] * d_i[..., 1] - r[None, :, 1] * d_i[..., 0]
            cross_a = r[None, :, 0] * a_i[..., 1] - r[None, :, 1] * a_i[..., 0]
            spin = SPIN_ARM * w_cell * np.tanh(om / SPIN_EPS)
            G = np.concatenate(
                (np.moveaxis(d_i, 2, 1), ((cross_v + spin[:, None]) / rho)[:, None, :]), axis=1
            )
            inertia = w_cell**2 / 6 * al
            Q = np.concatenate(
                (np.moveaxis(a_i, 2, 1), ((cross_a + inertia[:, None]) / rho)[:, None, :]),
                axis=1,
            )
            # The force through the same filter as the poses (the F/T sees contact chatter
            # that the smoothed accelerations do not).
            f_W = pd.push.f_W
            if T >= window:
                f_W = savgol_filter(f_W, window, 2, axis=0)
            f_B = np.einsum('tji,tj->ti', R, f_W)
            p = pd.push.p_OC
            tau = p[:, 0] * f_B[:, 1] - p[:, 1] * f_B[:, 0] + pd.push.tau
            w = np.column_stack((f_B, tau / rho))
            keep = moving[:T]
            Qs.append(Q[keep])
            Gs.append(G[keep])
            ws.append(w[keep])
        if not ws:
            raise IdentificationError(
                'the object never moves in the training pushes: nothing to identify from'
            )
        return cls(grid, np.concatenate(Qs), np.concatenate(Gs), np.concatenate(ws), rho, len(ws))

    def residual(self, m: FloatArray, mu: FloatArray) -> FloatArray:
        """(K, S, 3) residuals of K hypotheses (m, mu) (K, n)."""
        c = mu * m * GRAVITY
        return np.asarray(
            self.w[None]
            - np.einsum('sjn,kn->ksj', self.Q, m)
            - np.einsum('sjn,kn->ksj', self.G, c),
            dtype=float,
        )

    def loss(self, m: ArrayLike, mu: ArrayLike) -> FloatArray:
        """(K,) losses [N^2] of hypotheses (K, n)."""
        res = self.residual(np.atleast_2d(m), np.atleast_2d(mu))
        return np.asarray(np.mean(np.sum(res**2, axis=2), axis=1), dtype=float)

    def loss_grad(self, m: ArrayLike, mu: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Losses (K,) and their exact gradients d/dm, d/dmu (K, n)."""
        m2, mu2 = np.atleast_2d(m).astype(float), np.atleast_2d(mu).astype(float)
        res = self.residual(m2, mu2)
        S = self.steps
        loss = np.mean(np.sum(res**2, axis=2), axis=1)
        rG = np.einsum('ksj,sjn->kn', res, self.G)
        rQ = np.einsum('ksj,sjn->kn', res, self.Q)
        g_m = -2.0 / S * (rQ + GRAVITY * mu2 * rG)
        g_mu = -2.0 / S * (GRAVITY * m2 * rG)
        return np.asarray(loss), np.asarray(g_m), np.asarray(g_mu)

    def friction_at(self, m: FloatArray, bounds: Bounds) -> FloatArray:
        """Warm start: the friction map that best explains the wrenches at masses m (n,),
        by bounded linear least squares in c = mu m g."""
        n = m.size
        A = self.G.reshape(-1, n)
        b = (self.w - np.einsum('sjn,n->sj', self.Q, m)).reshape(-1)
        lo = bounds.friction_min * m * GRAVITY
        hi = bounds.friction_max * m * GRAVITY
        c = lsq_linear(A, b, bounds=(lo, hi), method='bvls').x
        return np.asarray(np.clip(c / (m * GRAVITY), bounds.friction_min, bounds.friction_max))


# -- optimisers -------------------------------------------------------------------------------
class Counter:
    """Counts simulations (hypothesis evaluations) and keeps the best-so-far trace."""

    def __init__(self, problem: TrainingSet, budget: int, progress: Progress | None) -> None:
        self.problem = problem
        self.budget = budget
        self.used = 0
        self.trace: list[tuple[int, FloatArray]] = []  # (simulations, best theta so far)
        self._best = math.inf
        self._progress = progress
        self.n = problem.grid.n

    @property
    def left(self) -> int:
        return self.budget - self.used

    def _note(self, thetas: FloatArray, losses: FloatArray) -> None:
        self.used += thetas.shape[0]
        k = int(np.argmin(losses))
        if losses[k] < self._best:
            self._best = float(losses[k])
            self.trace.append((self.used, thetas[k].copy()))
        if self._progress:
            self._progress(min(self.used, self.budget), self.budget)

    def loss(self, thetas: FloatArray) -> FloatArray:
        n = self.n
        losses = self.problem.loss(thetas[:, :n], thetas[:, n:])
        self._note(thetas, losses)
        return losses

    def loss_grad(self, thetas: FloatArray) -> tuple[FloatArray, FloatArray]:
        n = self.n
        losses, g_m, g_mu = self.problem.loss_grad(thetas[:, :n], thetas[:, n:])
        self._note(thetas, losses)
        return losses, np.concatenate((g_m, g_mu), axis=1)


class Optimiser(Protocol):
    """Minimises the loss of K hypotheses within their bounds; returns thetas (K, 2n)."""

    def __call__(
        self, counter: Counter, bounds: list[Bounds], theta0: FloatArray, rng: np.random.Generator
    ) -> FloatArray: ...


def spg(
    counter: Counter, bounds: list[Bounds], theta0: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """Spectral projected gradient, all K hypotheses in one batch (analytic gradients)."""
    lo = np.stack([b.lower() for b in bounds])
    hi = np.stack([b.upper() for b in bounds])
    scale = hi - lo  # work in units of each parameter's range
    x = np.clip(theta0, lo, hi)
    f, g = counter.loss_grad(x)
    g = g * scale
    step = np.full(x.shape[0], 1.0 / max(float(np.abs(g).max()), 1e-12))
    history = [f.copy()]
    per_iter = x.shape[0]
    while counter.left >= 2 * per_iter:
        d = np.clip(x - step[:, None] * g * scale, lo, hi) - x  # projected direction
        slope = np.sum(g * d / scale, axis=1)
        if np.all(np.abs(d) / scale < 1e-12):
            break
        f_ref = np.max(np.stack(history[-5:]), axis=0)  # non-monotone reference
        lam = np.ones(x.shape[0])
        accepted = np.zeros(x.shape[0], dtype=bool)
        for _ in range(12):
            trial = x + lam[:, None] * d
            if counter.left < per_iter:
                break
            f_new, g_new = counter.loss_grad(trial)
            ok = ~accepted & (f_new <= f_ref + 1e-4 * lam * slope)
            if ok.any():
                s = trial[ok] - x[ok]
                y = g_new[ok] * scale[ok] - g[ok]
                sy = np.sum(s / scale[ok] * y, axis=1)
                ss = np.sum((s / scale[ok]) ** 2, axis=1)
                step[ok] = np.where(sy > 0, np.clip(ss / np.maximum(sy, 1e-300), 1e-10, 1e10), 1.0)
                x[ok], f[ok], g[ok] = trial[ok], f_new[ok], g_new[ok] * scale[ok]
                accepted |= ok
            if accepted.all():
                break
            lam = np.where(accepted, lam, lam / 2)
        if not accepted.any():
            break
        history.append(f.copy())
    return x


def finite_diff(
    counter: Counter, bounds: list[Bounds], theta0: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """Coordinate descent with finite-difference probes: every coordinate is tried one
    step up and down (all 4n probes in one batch), the best probe per coordinate that
    lowers the loss is taken; steps halve after a sweep without progress."""
    b = bounds[0]
    lo, hi = b.lower(), b.upper()
    x = np.clip(theta0[0], lo, hi)
    f = counter.loss(x[None])[0]
    step = 0.25 * (hi - lo)
    dim = x.size
    while counter.left >= 2 * dim and step.max() > 1e-6 * (hi - lo).max():
        probes = np.repeat(x[None], 2 * dim, axis=0)
        idx = np.arange(dim)
        probes[idx, idx] += step
        probes[dim + idx, idx] -= step
        probes = np.clip(probes, lo, hi)
        losses = counter.loss(probes)
        gain = f - np.minimum(losses[:dim], losses[dim:])
        if gain.max() <= 0:
            step /= 2
            continue
        better = gain > 0
        up = losses[:dim] <= losses[dim:]
        new = x.copy()
        new[better & up] = probes[idx[better & up], idx[better & up]]
        down = better & ~up
        new[down] = probes[dim + idx[down], idx[down]]
        f_new = counter.loss(new[None])[0]
        if f_new < f:
            x, f = new, f_new
        else:  # the coordinates do not add up: take the single best one
            j = int(np.argmax(gain))
            x = probes[j if up[j] else dim + j].copy()
            f = f - gain[j]
    return np.asarray(x[None], dtype=float)


def cma_es(
    counter: Counter, bounds: list[Bounds], theta0: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """CMA-ES (the ``cma`` package) in the normalised box."""
    import cma

    b = bounds[0]
    lo, hi = b.lower(), b.upper()
    x0 = (np.clip(theta0[0], lo, hi) - lo) / (hi - lo)
    es = cma.CMAEvolutionStrategy(
        x0,
        0.25,
        {
            'bounds': [0.0, 1.0],
            'seed': int(rng.integers(1, 2**31)),
            'verbose': -9,
            'maxfevals': counter.budget,
        },
    )
    best, f_best = x0, math.inf
    while not es.stop() and counter.left >= es.popsize:
        z = np.asarray(es.ask())
        losses = counter.loss(lo + z * (hi - lo))
        es.tell(list(z), losses.tolist())
        k = int(np.argmin(losses))
        if losses[k] < f_best:
            best, f_best = z[k], float(losses[k])
    return np.asarray(lo + best * (hi - lo))[None]


def nelder_mead(
    counter: Counter, bounds: list[Bounds], theta0: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """scipy's bounded Nelder-Mead in the normalised box."""
    from scipy.optimize import minimize

    b = bounds[0]
    lo, hi = b.lower(), b.upper()
    x0 = (np.clip(theta0[0], lo, hi) - lo) / (hi - lo)

    def f(z: FloatArray) -> float:
        return float(counter.loss((lo + z * (hi - lo))[None])[0])

    res = minimize(
        f,
        x0,
        method='Nelder-Mead',
        bounds=[(0.0, 1.0)] * x0.size,
        options={'maxfev': max(1, counter.left), 'xatol': 1e-8, 'fatol': 1e-12},
    )
    return np.asarray(lo + res.x * (hi - lo))[None]


def random_search(
    counter: Counter, bounds: list[Bounds], theta0: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """Uniform samples in the box, the best one kept."""
    b = bounds[0]
    lo, hi = b.lower(), b.upper()
    best, f_best = theta0[0], float(counter.loss(theta0[:1])[0])
    while counter.left > 0:
        z = lo + rng.random((min(64, counter.left), lo.size)) * (hi - lo)
        losses = counter.loss(z)
        k = int(np.argmin(losses))
        if losses[k] < f_best:
            best, f_best = z[k], float(losses[k])
    return np.asarray(best)[None]


def weighted_sampling(
    counter: Counter, bounds: list[Bounds], theta0: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """Iterated weighted sampling: samples around the current estimate, which becomes the
    loss-softmax-weighted mean of the samples; the spread shrinks as it settles."""
    b = bounds[0]
    lo, hi = b.lower(), b.upper()
    mean = np.clip(theta0[0], lo, hi)
    sigma = 0.3 * (hi - lo)
    while counter.left > 0:
        z = np.clip(mean + sigma * rng.standard_normal((min(64, counter.left), lo.size)), lo, hi)
        losses = counter.loss(z)
        weights = np.exp(
            -(losses - losses.min()) / max(float(np.median(losses) - losses.min()), 1e-300)
        )
        weights /= weights.sum()
        mean = weights @ z
        sigma *= 0.85
    return np.asarray(mean[None], dtype=float)


OPTIMISERS: dict[str, Optimiser] = {
    'analytic': spg,
    'probabilistic': spg,
    'finite-diff': finite_diff,
    'cma-es': cma_es,
    'nelder-mead': nelder_mead,
    'random': random_search,
    'weighted-sampling': weighted_sampling,
}


# -- the result -----------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Belief:
    """K models of the object with their probabilities.

    Attributes:
        grid: the object's cells.
        mass, friction: (K, n) maps of the models [kg], [-].
        loss: (K,) training losses [N^2]; weight: (K,) probabilities (sum 1).
        method: how they were found; simulations: hypothesis evaluations used;
        seconds: wall time of the identification; trace: (simulations used, best
        theta = (m, mu) (2n,) so far) each time the best loss improved, for convergence
        plots.
    """

    grid: Grid
    mass: FloatArray
    friction: FloatArray
    loss: FloatArray
    weight: FloatArray
    method: str
    simulations: int = 0
    seconds: float = 0.0
    trace: list[tuple[int, FloatArray]] = field(default_factory=list)

    @property
    def K(self) -> int:
        return int(self.mass.shape[0])

    @property
    def best(self) -> int:
        """Index of the most probable model."""
        return int(np.argmax(self.weight))

    def com(self) -> FloatArray:
        """(K, 2) centres of mass in the object frame [m]."""
        return np.asarray(self.mass @ self.grid.p_OC / self.mass.sum(axis=1, keepdims=True))


BELIEF_KIND = 'slide/belief'


def save_belief(belief: Belief, path: str | Path, name: str = '') -> Path:
    """Write a belief as YAML: the grid, then each model's maps, weight and loss."""
    g = belief.grid

    def rows(values: FloatArray) -> list[list[float]]:
        return [[float(round(v, 7)) for v in row] for row in g.to_map(values, fill=0.0)]

    doc = {
        'kind': BELIEF_KIND,
        'name': name,
        'method': belief.method,
        'simulations': int(belief.simulations),
        'seconds': float(round(belief.seconds, 4)),
        'cell_size': float(g.cell_size),
        'occupancy': g.occupancy.astype(int).tolist(),
        'heights': [[float(round(v, 5)) for v in row] for row in g.heights],
        'models': [
            {
                'weight': float(belief.weight[k]),
                'loss': float(belief.loss[k]),
                'mass': rows(belief.mass[k]),
                'friction': rows(belief.friction[k]),
            }
            for k in range(belief.K)
        ],
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        '# slide belief: K models (per-cell mass [kg] and friction maps) and probabilities\n'
        + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    )
    return p


def load_belief(path: str | Path) -> Belief:
    """Read a belief written by :func:`save_belief` (raises IdentificationError)."""
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise IdentificationError(f'{p}: cannot read ({exc.strerror})') from None
    except yaml.YAMLError as exc:
        raise IdentificationError(f'{p}: not valid YAML ({str(exc).splitlines()[0]})') from None
    if not isinstance(doc, dict) or doc.get('kind') != BELIEF_KIND:
        raise IdentificationError(
            f'{p}: not a slide belief (kind: {BELIEF_KIND}); write one with slide identify'
        )
    try:
        grid = Grid(
            float(doc['cell_size']),
            np.asarray(doc['occupancy'], dtype=bool),
            np.asarray(doc['heights'], dtype=float),
        )
        models = doc['models']
        mass = np.stack([grid.from_map(np.asarray(m['mass'], float), 'mass') for m in models])
        friction = np.stack(
            [grid.from_map(np.asarray(m['friction'], float), 'friction') for m in models]
        )
        weight = np.asarray([float(m['weight']) for m in models])
        loss = np.asarray([float(m['loss']) for m in models])
    except (KeyError, TypeError, ValueError) as exc:
        raise IdentificationError(f'{p}: malformed belief ({exc})') from None
    if not models or np.any(mass <= 0) or np.any(friction < 0) or abs(weight.sum() - 1) > 1e-6:
        raise IdentificationError(
            f'{p}: a belief needs models with positive masses, non-negative friction and '
            'weights that sum to 1'
        )
    return Belief(
        grid,
        mass,
        friction,
        loss,
        weight,
        str(doc.get('method', '')),
        int(doc.get('simulations', 0)),
        float(doc.get('seconds', 0.0)),
    )


def softmax_weights(loss: FloatArray, temperature: float) -> FloatArray:
    """Paper 2's probabilities: softmax of -loss / (temperature * best loss)."""
    if not temperature > 0:
        raise IdentificationError(f'temperature must be positive, got {temperature}')
    best = float(loss.min())
    z = -(loss - best) / (temperature * max(best, 1e-12))
    w = np.exp(z - z.max())
    return np.asarray(w / w.sum())


def identify(
    train: TrainingSet,
    method: str = 'probabilistic',
    bounds: Bounds | None = None,
    K: int = 8,
    budget: int = 2000,
    temperature: float = 0.05,
    warm_start: bool = True,
    seed: int = 0,
    progress: Progress | None = None,
) -> Belief:
    """Identify the maps from a training set.

    Args:
        train: the training pushes (:meth:`TrainingSet.from_pushes`).
        method: one of METHODS.
        bounds: parameter bounds (default :meth:`Bounds.from_grid`).
        K: models of the probabilistic method (the others give one).
        budget: simulations (hypothesis evaluations) allowed, for all K together.
        temperature: softmax temperature, relative to the best loss.
        warm_start: start from the least-squares friction map (else the papers' half
            bounds).
        seed: for the randomised methods.
    """
    if method not in METHODS:
        raise IdentificationError(f'unknown method {method!r}; choose from {", ".join(METHODS)}')
    if budget < 1:
        raise IdentificationError(f'budget must be at least 1 simulation, got {budget}')
    grid = train.grid
    n = grid.n
    bounds = bounds or Bounds.from_grid(grid)
    if bounds.mass_max.shape != (n,):
        raise IdentificationError(f'mass bounds for {bounds.mass_max.size} cells, grid has {n}')
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    boxes = schedule(bounds, K) if method == 'probabilistic' else [bounds]
    theta0 = np.stack([b.middle() for b in boxes])
    if warm_start and method != 'uniform':
        for k, b in enumerate(boxes):
            theta0[k, n:] = train.friction_at(theta0[k, :n], b)
    counter = Counter(train, budget, progress)
    if method == 'uniform':
        thetas = theta0
        counter.loss(thetas)
    else:
        thetas = OPTIMISERS[method](counter, boxes, theta0, rng)
    thetas = np.stack([b.project(t) for b, t in zip(boxes, thetas, strict=False)])
    losses = train.loss(thetas[:, :n], thetas[:, n:])
    weight = softmax_weights(losses, temperature) if method == 'probabilistic' else np.ones(1)
    return Belief(
        grid,
        thetas[:, :n].copy(),
        thetas[:, n:].copy(),
        losses,
        weight,
        method,
        counter.used,
        time.perf_counter() - t0,
        counter.trace,
    )


__all__ = [
    'METHODS',
    'Belief',
    'Bounds',
    'IdentificationError',
    'TrainingSet',
    'identify',
    'load_belief',
    'save_belief',
    'schedule',
    'softmax_weights',
]
