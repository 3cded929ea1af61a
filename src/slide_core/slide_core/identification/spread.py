"""Models for what the pushes leave open: the centre of mass.

Slow pushes see the mass map almost only through the friction forces ``mu_i N_i``, and a
shifted centre of mass with a compensating friction map gives nearly the same forces
(:mod:`slide_core.physics.support`). Measured on the twin's library (5 training pushes each,
the friction refitted at every centre of mass): the wrench-space loss stays within 5% of the
best over 6 to 48 mm around the most probable model's centre of mass, and its minimum lies
8 to 19 mm from the truth. The optimisers' models, which all start from the same volume-
proportional masses, then cluster within a few millimetres, and a belief made of them alone
is sure of a centre of mass the data never fixed: a goal at the table edge chosen from it
can tip the object.

So the belief also carries the most probable model with its centre of mass moved along D
directions (the footprint's principal axes first), each as far as the loss with the
friction refitted stays within ``1 + temperature`` of the best, i.e. until the model's
weight would fall below 1/e of the best's. The mass map is tilted linearly,
``m_i' = m_i (1 + a . (r_i - c))``, which moves the centre of mass by ``S a / M`` (S the
mass map's second moment about c) and keeps the total mass; the friction is the bounded
least-squares map at the new masses. These models are as consistent with the pushes as the
temperature allows, and the planner's balance test then asks a goal to hold for them too.
"""

from __future__ import annotations

from collections.abc import Callable
import math

import numpy as np

from slide_core.geometry import FloatArray
from slide_core.identification.bounds import Bounds
from slide_core.identification.errors import IdentificationCancelledError
from slide_core.identification.training import TrainingSet

COM_DIRECTIONS = 4
"""Directions the centre of mass is moved along by default (the principal axes, both ways)."""

FIRST_SHIFT_M = 0.002
"""The first step [m] along a direction; steps grow by half each time, then bisect."""

MAX_SHIFT_M = 0.1
"""No centre of mass is moved further than this [m]."""

BISECTIONS = 5
EVALUATIONS_PER_DIRECTION = 16
"""Loss evaluations a direction needs at most (growing steps, then bisections)."""


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
    mass: FloatArray,
    best_loss: float,
    temperature: float,
    directions: int = COM_DIRECTIONS,
    max_evaluations: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, int]:
    """Models whose centre of mass is moved from that of ``mass`` (n,) along ``directions``
    directions as far as the loss stays within ``best_loss * (1 + temperature)``.

    Returns masses (D, n), frictions (D, n), losses (D,) and the loss evaluations used
    (at most ``max_evaluations``, by default ``directions * EVALUATIONS_PER_DIRECTION``);
    a direction in which even the first step leaves the band or the bounds, or that the
    evaluations left do not reach, gives no model. Raises IdentificationCancelledError
    when ``should_stop`` says so.
    """
    cap = directions * EVALUATIONS_PER_DIRECTION if max_evaluations is None else max_evaluations
    n = mass.size
    r = train.grid.p_OC
    limit = best_loss * (1.0 + temperature)
    used = 0

    def fit(delta: FloatArray) -> tuple[FloatArray, FloatArray, float] | None:
        nonlocal used
        m = shift_com(mass, r, delta)
        if m is None or np.any(m > bounds.mass_max):
            return None  # out of the tilt's or the bounds' reach
        m = np.maximum(m, bounds.mass_min)  # a cell at the floor stays there
        if used >= cap:
            raise _BudgetSpentError
        used += 1
        mu = train.friction_at(m, bounds)
        loss = float(train.loss(m, mu)[0])
        return (m, mu, loss) if loss <= limit else None

    masses, frictions, losses = [], [], []
    for d in principal_directions(r, directions):
        if should_stop is not None and should_stop():
            raise IdentificationCancelledError('cancelled while spreading the centre of mass')
        inside: tuple[float, tuple[FloatArray, FloatArray, float]] | None = None
        outside, s = None, FIRST_SHIFT_M
        try:
            while s <= MAX_SHIFT_M:
                found = fit(s * d)
                if found is None:
                    outside = s
                    break
                inside = (s, found)
                s *= 1.5
            if inside is not None and outside is not None:
                lo, hi = inside[0], outside
                for _ in range(BISECTIONS):
                    mid = 0.5 * (lo + hi)
                    found = fit(mid * d)
                    if found is None:
                        hi = mid
                    else:
                        lo, inside = mid, (mid, found)
        except _BudgetSpentError:
            break  # keeps no half-searched direction
        if inside is None:
            continue
        m, mu, loss = inside[1]
        masses.append(m)
        frictions.append(mu)
        losses.append(loss)
    if not masses:
        return np.empty((0, n)), np.empty((0, n)), np.empty(0), used
    return np.stack(masses), np.stack(frictions), np.asarray(losses), used
