"""Optimisers of the identification loss: all share one budget of simulations (hypothesis
evaluations) counted by :class:`Counter`, the bounds and the warm start."""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Protocol

import numpy as np

from slide_core.geometry import FloatArray, Grid
from slide_core.identification.bounds import Bounds
from slide_core.identification.errors import IdentificationCancelledError

Progress = Callable[[int, int, float], None]
"""Called with (simulations used, budget, best loss so far [N^2]) as work proceeds."""


class LossProblem(Protocol):
    """What the optimisers minimise: a loss of K hypotheses (m, mu) (K, n) on a grid, with
    its gradients (the wrench-space :class:`TrainingSet`, the rollout refinement's windows)."""

    @property
    def grid(self) -> Grid: ...

    def quick_loss_grad(
        self, m: FloatArray, mu: FloatArray, grad: bool = True
    ) -> tuple[FloatArray, FloatArray, FloatArray]: ...


class Counter:
    """Counts simulations (hypothesis evaluations) and keeps the best-so-far trace.

    ``budget`` is what the optimisers may use; progress reports against ``total`` (the
    whole identification's budget, when later stages use the rest; ``budget`` if None)."""

    def __init__(
        self,
        problem: LossProblem,
        budget: int,
        progress: Progress | None,
        should_stop: Callable[[], bool] | None = None,
        total: int | None = None,
    ) -> None:
        self.problem = problem
        self.budget = budget
        self.total = budget if total is None else total
        self.used = 0
        self.trace: list[tuple[int, FloatArray]] = []  # (simulations, best theta so far)
        self._best = math.inf
        self._progress = progress
        self._should_stop = should_stop
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
            self._progress(min(self.used, self.budget), self.total, self._best)
        if self._should_stop is not None and self._should_stop():
            raise IdentificationCancelledError(f'cancelled after {self.used} simulations')

    def loss(self, thetas: FloatArray) -> FloatArray:
        n = self.n
        losses, _, _ = self.problem.quick_loss_grad(thetas[:, :n], thetas[:, n:], grad=False)
        self._note(thetas, losses)
        return losses

    def loss_grad(self, thetas: FloatArray) -> tuple[FloatArray, FloatArray]:
        n = self.n
        losses, g_m, g_mu = self.problem.quick_loss_grad(thetas[:, :n], thetas[:, n:])
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
            # Only the hypotheses still searching are evaluated (an accepted one has moved:
            # its x + lam d could leave the bounds).
            pending = np.nonzero(~accepted)[0]
            if counter.left < pending.size:
                break
            trial = x[pending] + lam[pending, None] * d[pending]
            f_new, g_new = counter.loss_grad(trial)
            good = f_new <= f_ref[pending] + 1e-4 * lam[pending] * slope[pending]
            if good.any():
                ok = pending[good]
                s = trial[good] - x[ok]
                y = g_new[good] * scale[ok] - g[ok]
                sy = np.sum(s / scale[ok] * y, axis=1)
                ss = np.sum((s / scale[ok]) ** 2, axis=1)
                step[ok] = np.where(sy > 0, np.clip(ss / np.maximum(sy, 1e-300), 1e-10, 1e10), 1.0)
                x[ok], f[ok], g[ok] = trial[good], f_new[good], g_new[good] * scale[ok]
                accepted[ok] = True
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
