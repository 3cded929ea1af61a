"""Identification: a belief over (mass, friction) maps from training pushes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
import time

import numpy as np

from slide_core.geometry import FloatArray
from slide_core.identification.bounds import Bounds, schedule
from slide_core.identification.errors import (
    IdentificationCancelledError,
    IdentificationError,
    IdentificationFailedError,
)
from slide_core.identification.optimisers import OPTIMISERS, Counter, Progress
from slide_core.identification.spread import (
    COM_DIRECTIONS,
    EVALUATIONS_PER_RAY,
    MAX_COM_DIRECTIONS,
    com_spread,
)
from slide_core.identification.training import TrainingSet
from slide_core.model import Belief

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


def softmax_weights(loss: FloatArray, temperature: float) -> FloatArray:
    """Paper 2's probabilities: softmax of -loss / (temperature * best loss)."""
    if not temperature > 0:
        raise IdentificationError(f'temperature must be positive, got {temperature}')
    best = float(loss.min())
    z = -(loss - best) / (temperature * max(best, 1e-12))
    w = np.exp(z - z.max())
    return np.asarray(w / w.sum())


@dataclass(frozen=True, eq=False)
class Identification:
    """What an identification produced.

    Attributes:
        belief: the K models and their probabilities.
        simulations: hypothesis evaluations used; seconds: wall time.
        trace: (simulations used, best theta = (m, mu) (2n,) so far) each time the best
            loss improved, for convergence plots.
        bounds: the bounds each model was found in (the probabilistic schedule's box for
            an optimiser's model, the whole bounds for a centre-of-mass spread model), for
            a refinement to keep it there; empty when not known.
    """

    belief: Belief
    simulations: int
    seconds: float
    trace: list[tuple[int, FloatArray]] = field(default_factory=list)
    bounds: tuple[Bounds, ...] = ()


MAX_MODELS = 64
"""Most models K a belief is identified with (each costs a warm start and its evaluations;
a goal asking a million could not be cancelled)."""

DEFAULT_BUDGET = 8000
"""Simulations an identification spends unless told otherwise: the probabilistic method's
K models converge in about that many on five pushes (the twin's library objects, three
draws of pushes: the centre of mass 5.8 mm off at 2000, 3.7 at 4000, 2.6 at 8000 and 2.7 at
20000, held-out error 1.28 to 1.21 mm; 1.06 s against 0.46 at 2000)."""

MAX_BUDGET = 10**7
"""Most simulations an identification may spend (about 40 minutes at 4000 a second: a goal
asking 2^32 - 1 ran for what would have been weeks, holding the node's one goal)."""


SETTING_NAMES = {
    'method': 'method',
    'K': 'K',
    'budget': 'budget',
    'com_directions': 'com_directions',
}
"""The settings' names in :func:`check_settings`'s messages, as :func:`identify` calls
them."""


def check_settings(
    method: str,
    K: int,
    budget: int,
    com_directions: int,
    names: Mapping[str, str] = SETTING_NAMES,
) -> None:
    """Raise IdentificationError when :func:`identify` could not run with these settings,
    naming each as ``names`` says (a command line's flags, a node's parameters): an unknown
    method, K outside 1 to MAX_MODELS, a budget outside 1 to MAX_BUDGET simulations or
    (probabilistic) under one per model, com_directions outside 0 to MAX_COM_DIRECTIONS."""
    n = {**SETTING_NAMES, **names}
    if method not in METHODS:
        raise IdentificationError(
            f'unknown {n["method"]} {method!r}; choose from {", ".join(METHODS)}'
        )
    if not 1 <= K <= MAX_MODELS:
        raise IdentificationError(f'{n["K"]} must be 1 to {MAX_MODELS} models, got {K}')
    if not 1 <= budget <= MAX_BUDGET:
        raise IdentificationError(
            f'{n["budget"]} must be 1 to {MAX_BUDGET} simulations, got {budget}'
        )
    if not 0 <= com_directions <= MAX_COM_DIRECTIONS:
        # (each may add a model: 200 made a belief of 71, 1e8 took 15 s)
        raise IdentificationError(
            f'{n["com_directions"]} must be 0 to {MAX_COM_DIRECTIONS}, got {com_directions}'
        )
    if method == 'probabilistic' and budget < K:
        raise IdentificationError(
            f'a {n["budget"]} of {budget} simulations cannot evaluate each of the {K} '
            f'models ({n["K"]}) once: give at least as many simulations as models, or '
            'fewer models'
        )


def identify(
    train: TrainingSet,
    method: str = 'probabilistic',
    bounds: Bounds | None = None,
    K: int = 8,
    budget: int = DEFAULT_BUDGET,
    temperature: float = 0.05,
    warm_start: bool = True,
    seed: int = 0,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    com_directions: int = COM_DIRECTIONS,
) -> Identification:
    """Identify the maps from a training set.

    Args:
        train: the training pushes (:meth:`TrainingSet.from_pushes`).
        method: one of METHODS.
        bounds: parameter bounds (default :meth:`Bounds.from_grid`).
        K: models of the probabilistic method (the others give one).
        budget: simulations (hypothesis evaluations) allowed, for all K together (at
            least K for the probabilistic method).
        temperature: softmax temperature, relative to the best loss (dimensionless: a
            model whose loss exceeds the best by ``temperature`` times the best loss has
            1/e of its weight).
        warm_start: start from the least-squares friction map (else the papers' half
            bounds).
        seed: for the randomised methods.
        progress: called with (simulations used, budget).
        should_stop: polled between evaluations; when it returns True the identification
            stops and raises :class:`IdentificationCancelledError` (nothing half-made returns).
        com_directions: the probabilistic method's belief also holds, per direction (this
            many), the model with the centre of mass furthest along it that the pushes
            allow (:mod:`slide_core.identification.spread`); 0 for the K models alone.
            Their evaluations come out of ``budget`` (at most a quarter of it).

    Raises IdentificationError on bad settings, IdentificationFailedError when no model has a
    finite loss.
    """
    check_settings(method, K, budget, com_directions)
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
            if should_stop is not None and should_stop():
                raise IdentificationCancelledError(f'cancelled in the warm start, model {k}')
            theta0[k, n:] = train.friction_at(theta0[k, :n], b)
    spreading = method == 'probabilistic' and com_directions > 0
    reserve = min(K * (1 + com_directions * EVALUATIONS_PER_RAY), budget // 4) if spreading else 0
    counter = Counter(train, budget - reserve, progress, should_stop, total=budget)
    if method == 'uniform':
        thetas = theta0
        counter.loss(thetas)
    else:
        thetas = OPTIMISERS[method](counter, boxes, theta0, rng)
    thetas = np.stack([b.project(t) for b, t in zip(boxes, thetas, strict=False)])
    losses = train.loss(thetas[:, :n], thetas[:, n:])
    if not np.all(np.isfinite(losses)):
        raise IdentificationFailedError(
            'identification found no model with a finite loss: the pushes may hold NaN '
            'poses or forces'
        )
    masses, frictions, used = thetas[:, :n].copy(), thetas[:, n:].copy(), counter.used
    if spreading and reserve > 0:
        best = float(losses.min())
        in_band = losses <= best * (1.0 + temperature)
        m_s, mu_s, loss_s, spent = com_spread(
            train,
            bounds,
            masses[in_band],
            losses[in_band],
            best,
            temperature,
            com_directions,
            reserve,
            should_stop,
        )
        masses, frictions = np.vstack((masses, m_s)), np.vstack((frictions, mu_s))
        losses, used = np.concatenate((losses, loss_s)), used + spent
        if progress:
            progress(used, budget, float(losses.min()))
    weight = softmax_weights(losses, temperature) if method == 'probabilistic' else np.ones(1)
    belief = Belief.create(
        grid, masses, frictions, weight, losses, method, train.support, train.tips
    )
    found_in = (*boxes, *[bounds] * (masses.shape[0] - len(boxes)))
    return Identification(belief, used, time.perf_counter() - t0, counter.trace, found_in)


EXPLAINED_MIN = 0.5
"""Share of the measured wrenches a fit must explain before :func:`fit_problems` says it
does not (the library's twin pushes: over 0.9)."""


def fit_problems(train: TrainingSet, belief: Belief, bounds: Bounds | None = None) -> list[str]:
    """What is wrong with the most probable model of ``belief`` fitted to ``train``, one
    line each: the bounds it presses (:meth:`Bounds.pressed`), and a fit that explains less
    than :data:`EXPLAINED_MIN` of the measured wrenches (a wrench in the wrong frame or
    sign: a sign flip explained 18% and came out as a confident belief, without a word)."""
    k = belief.best
    lines = (bounds or Bounds.from_grid(train.grid)).pressed(belief.mass[k], belief.friction[k])
    loss = float(train.loss(belief.mass[k], belief.friction[k])[0])
    share = train.explained(loss)
    if share < EXPLAINED_MIN:
        lines.append(
            f'it explains {share:.0%} of the measured push wrenches (their mean square '
            f'{train.wrench_square:.3g} N^2, {loss:.3g} N^2 left): check that the F/T wrench '
            "is in the right frame and sign (the sensor mount), and the poses are the object's"
        )
    return lines
