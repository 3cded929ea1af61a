"""Models for what the pushes leave open: the centre of mass.

Slow pushes see the mass map almost only through the friction forces ``mu_i N_i``, and a
shifted centre of mass with a compensating friction map gives nearly the same forces
(:mod:`slide_core.physics.support`). Measured on the twin's library (5 training pushes each,
the friction refitted at every centre of mass, the push's moment in the loss): the
wrench-space loss stays within 5% of the best over 4 to 48 mm around the most probable
model's centre of mass, and its minimum lies 1 to 8 mm from the truth (8 to 19 mm before the
push's moment entered the loss). The optimisers' models, which all start from the same
volume-proportional masses, mostly cluster within a few millimetres, and a belief made of
them alone can be sure of a centre of mass the data never fixed: a goal at the table edge
chosen from it can tip the object.

So the belief also carries, for each of D directions (the footprint's principal axes first),
the model whose centre of mass lies furthest along it while the loss stays within
``1 + temperature`` of the best, i.e. whose weight is at least 1/e of the best's. The search
starts from every model already within that band (they differ in total mass and friction
level, and reach differently far; on the hammer the furthest came from another model than
the best): its mass map is tilted linearly, ``m_i' = m_i (1 + a . (r_i - c))``, which moves
the centre of mass by ``S a / M`` (S the mass map's second moment about c) and keeps the
total mass, in steps that double and then bisect to the band's edge; the friction is the
bounded least-squares map at the new masses. Refitting the friction alone lowers a model's
training loss (the optimisers' models by 1 to 9% on the library) without predicting better
(refitting every model's friction took the held-out error from 1.06 to 1.29 mm), so a moved
model's loss is scaled by its start's loss over the start's own with the friction
refitted: the band measures what moving the centre of mass costs, and a moved model is not
the most probable for its refit alone (it was on the wrench, 11.7 mm from the truth, before
this scaling). These models are as consistent with the pushes as the temperature allows,
and the balance test then asks a goal to hold for them too. Measured on the library's twin
pushes, the true centre of mass then lies in the models' hull on 8 of 8 objects (0 of 8
without); on novel objects with a heavy end it lay beyond the band (before the push's
moment: the loss at the truth was up to 1.1 times the best), so the hull is what the pushes
support, not a guarantee.

It is on by default (4 directions). What it buys (twin, this stop): no pre-grasp of a rod
with a heavy end fell (20 of 20 seeds), where the K models alone let 3 of 20 fall (on one,
traced, their centres of mass lay 0.8 to 2.3 cm towards the middle); of the table-edge
poses the belief calls stable, 68 of 68 stayed (76 of 76 for the K models alone); 16 of 16
library pre-grasps. What it costs: identification 0.36 s instead of 0.10, planning with 12
models instead of 8, and a belief that disagrees where the object would stick out finds no
goal where it might have found a risky one (a uniform ring: no goal on 4 of 4 seeds). So
the task explores once more and identifies again while the goal search finds the belief
too uncertain (:class:`slide_core.planning.UncertainBeliefError`,
``TaskSettings.extra_exploration``): the ring then found its goal on 4 of 4 seeds after 1
or 2 extra pushes, and 23 of 28 novel episodes succeeded, as with the K models alone.
``com_directions`` 0 gives the K models alone.
"""

from __future__ import annotations

from collections.abc import Callable
import math

import numpy as np
from numpy.typing import ArrayLike

from slide_core.geometry import FloatArray
from slide_core.identification.bounds import Bounds
from slide_core.identification.errors import IdentificationCancelledError
from slide_core.identification.training import TrainingSet

COM_DIRECTIONS = 4
"""Directions the centre of mass is moved along by default: the principal axes, both ways
(0: none; see the module docstring for what the spread buys and costs)."""
MAX_COM_DIRECTIONS = 32
"""The most directions (each may add a model to the belief: 200 gave 71 models past the
64 fitted ones allowed, 1e8 took 15 s)."""

FIRST_SHIFT_M = 0.004
"""The first step [m] along a direction; steps double, then bisect."""

MAX_SHIFT_M = 0.1
"""No centre of mass is moved further than this [m]."""

BISECTIONS = 5
EVALUATIONS_PER_RAY = 10
"""Loss evaluations one start model needs at most along one direction (steps of 4, 8, 16,
32 and 64 mm, then the bisections)."""


class _BudgetSpentError(Exception):
    """The spread's evaluations are used up."""


def shift_com(m: FloatArray, r: FloatArray, delta: FloatArray) -> FloatArray | None:
    """The mass map m (n,) [kg] tilted linearly so that its centre of mass moves by delta
    (2,) [m] with the same total mass, for cell centres r (n, 2) [m]; None when the tilt
    would make a cell's mass zero or negative (the shift is out of the map's reach)."""
    M = float(m.sum())
    c = m @ r / M
    d = r - c
    S = (m[:, None] * d).T @ d
    try:
        a = M * np.linalg.solve(S, delta)
    except np.linalg.LinAlgError:
        return None  # cells on a line: no tilt across it
    factor = 1.0 + d @ a
    if factor.min() <= 0.0:
        return None
    return np.asarray(m * factor, dtype=float)


def principal_directions(r: FloatArray, count: int) -> FloatArray:
    """``count`` unit vectors (count, 2) evenly spread in angle, the first along the major
    principal axis of the cell centres r (n, 2)."""
    centred = r - r.mean(axis=0)
    evals, evecs = np.linalg.eigh(centred.T @ centred)
    major = evecs[:, int(np.argmax(evals))]
    start = math.atan2(major[1], major[0])
    angles = start + 2.0 * math.pi * np.arange(count) / count
    return np.column_stack((np.cos(angles), np.sin(angles)))


def com_spread(
    train: TrainingSet,
    bounds: Bounds,
    starts: FloatArray,
    start_losses: ArrayLike,
    best_loss: float,
    temperature: float,
    directions: int = COM_DIRECTIONS,
    max_evaluations: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, int]:
    """Per direction, the model furthest along it that stays within ``best_loss * (1 +
    temperature)``: each start mass map (S, n) (the belief's models within that band, whose
    total masses differ), of loss ``start_losses`` (S,), has its centre of mass moved along
    the direction as far as the loss allows, and the one that gets furthest is kept. A moved
    model's friction is refitted (:meth:`TrainingSet.friction_at`), and its loss is scaled
    by its start's loss over the start's own with the friction refitted: it counts what the
    move costs, not what refitting the friction gains (see the module docstring).

    Returns masses (D, n), frictions (D, n), losses (D,) and the loss evaluations used
    (at most ``max_evaluations``, by default ``S * (1 + directions *
    EVALUATIONS_PER_RAY)``: one refit per start, then the rays); a
    direction in which no start moves inside the band and the bounds, or that the
    evaluations left do not reach, gives no model. Raises IdentificationCancelledError
    when ``should_stop`` says so.
    """
    starts = np.atleast_2d(starts)
    n = starts.shape[1]
    if max_evaluations is None:
        max_evaluations = starts.shape[0] * (1 + directions * EVALUATIONS_PER_RAY)
    r = train.grid.p_OC
    limit = best_loss * (1.0 + temperature)
    used = 0

    def refitted(m: FloatArray) -> tuple[FloatArray, float]:
        nonlocal used
        if used >= max_evaluations:
            raise _BudgetSpentError
        used += 1
        mu = train.friction_at(m, bounds)
        return mu, float(train.loss(m, mu)[0])

    def fit(
        mass: FloatArray, delta: FloatArray, scale: float
    ) -> tuple[FloatArray, FloatArray, float] | None:
        m = shift_com(mass, r, delta)
        if m is None or np.any(m > bounds.mass_max):
            return None  # out of the tilt's or the bounds' reach
        m = np.maximum(m, bounds.mass_min)  # a cell at the floor stays there
        mu, loss = refitted(m)
        loss *= scale
        return (m, mu, loss) if loss <= limit else None

    def ray(
        mass: FloatArray, d: FloatArray, scale: float
    ) -> tuple[FloatArray, FloatArray, float] | None:
        """The furthest model along d from mass (bisected to the band's edge)."""
        inside: tuple[float, tuple[FloatArray, FloatArray, float]] | None = None
        outside, s = None, FIRST_SHIFT_M
        while s <= MAX_SHIFT_M:
            found = fit(mass, s * d, scale)
            if found is None:
                outside = s
                break
            inside = (s, found)
            s *= 2.0
        if outside is not None:  # bisect to the band's edge (from 0 if the first step left it)
            lo, hi = (0.0 if inside is None else inside[0]), outside
            for _ in range(BISECTIONS):
                mid = 0.5 * (lo + hi)
                found = fit(mass, mid * d, scale)
                if found is None:
                    hi = mid
                else:
                    lo, inside = mid, (mid, found)
        return None if inside is None else inside[1]

    masses, frictions, losses = [], [], []
    try:
        own = np.broadcast_to(np.asarray(start_losses, dtype=float), (starts.shape[0],))
        scales = []
        for mass, loss in zip(starts, own, strict=True):
            refit = refitted(mass)[1]
            scales.append(float(loss) / refit if refit > 0.0 else 1.0)
        for d in principal_directions(r, directions):
            furthest: tuple[FloatArray, FloatArray, float] | None = None
            reach = -math.inf
            for mass, scale in zip(starts, scales, strict=True):
                if should_stop is not None and should_stop():
                    raise IdentificationCancelledError(
                        'cancelled while spreading the centre of mass'
                    )
                found = ray(mass, d, scale)
                if found is None:
                    continue
                along = float(found[0] @ r @ d / found[0].sum())
                if along > reach:
                    furthest, reach = found, along
            if furthest is not None:
                masses.append(furthest[0])
                frictions.append(furthest[1])
                losses.append(furthest[2])
    except _BudgetSpentError:
        pass  # the directions finished so far are kept; none half-searched
    if not masses:
        return np.empty((0, n)), np.empty((0, n)), np.empty(0), used
    return np.stack(masses), np.stack(frictions), np.asarray(losses), used
