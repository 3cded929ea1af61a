"""Balance at the edge: margins of the belief's centres of mass inside the support
polygon, the probability that the object stays, and the poses the object may pass through."""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any

import numpy as np

from slide_core.geometry import (
    FloatArray,
    Grid,
    cell_corners,
    check_pose,
    com_margins,
    rotation,
    to_world,
)
from slide_core.model import Belief
from slide_core.planning.config import PlannerConfig


def com_margins_of(belief: Belief, X_WO: Any) -> FloatArray:
    """(K,) margins of every model at X_WO (see :func:`com_margins`)."""
    return com_margins(belief.grid, belief.com(), X_WO)


def stay_probability(belief: Belief, X_WO: Any, margin: float = 0.0) -> float:
    """Probability that the object stays at X_WO: the weight of the belief whose centre
    of mass is at least ``margin`` metres inside the support polygon."""
    return float(belief.weight @ (com_margins_of(belief, X_WO) >= margin))


def margin_quantile(belief: Belief, margins: FloatArray, epsilon: float) -> float:
    """The margin [m] that belief of probability 1 - epsilon at least have."""
    order = np.argsort(margins)
    cum = np.cumsum(belief.weight[order])
    k = int(np.searchsorted(cum, epsilon, side='right'))
    return float(margins[order][min(k, len(order) - 1)])


def in_workspace(grid: Grid, X_WO: Any, config: PlannerConfig) -> bool:
    """True when no cell leaves the table except over the free edge and none overlaps an
    obstacle (cell squares tested by their corners and centres)."""
    X = check_pose(X_WO, 'X_WO')
    pts = to_world(X, np.concatenate((cell_corners(grid).reshape(-1, 2), grid.p_OC)))
    t = config.table
    if pts[:, 0].max() > t.depth or np.abs(pts[:, 1]).max() > t.width / 2:
        return False
    for ob in config.obstacles:
        inside = np.all(np.abs(pts - np.asarray(ob.centre)) <= np.asarray(ob.half_size), axis=1)
        if inside.any():
            return False
        # A thin obstacle between sample points: test its corners against the cells.
        c = np.asarray(ob.centre) + np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * ob.half_size
        c_O = (c - X[:2]) @ rotation(float(X[2]))
        if np.any(np.all(np.abs(c_O[:, None] - grid.p_OC[None]) <= grid.cell_size / 2, axis=2)):
            return False
    return True


def is_valid(belief: Belief, X_WO: Any, config: PlannerConfig) -> bool:
    """A pose the object may pass through: on the table, clear of obstacles, balanced with
    probability at least 1 - epsilon (with the safety margin)."""
    return (
        in_workspace(belief.grid, X_WO, config)
        and stay_probability(belief, X_WO, config.balance_margin) >= 1.0 - config.epsilon - 1e-12
    )


def fall_probability(belief: Belief, X_K: FloatArray, config: PlannerConfig) -> float:
    """Weight of the belief that would not stay balanced (with the safety margin) at their
    own predicted poses X_K (K, 3)."""
    com = belief.com()
    fall = 0.0
    for k in range(belief.K):
        if com_margins(belief.grid, com[k : k + 1], X_K[k])[0] < config.balance_margin:
            fall += float(belief.weight[k])
    return fall


def validity(belief: Belief, config: PlannerConfig) -> Callable[[float, float, float], bool]:
    """:func:`is_valid` as a fast closure for the sampling planner (called ~1e5 times):
    the expensive balance test only runs for poses that reach past the edge."""
    grid = belief.grid
    pts = np.concatenate((cell_corners(grid).reshape(-1, 2), grid.p_OC))
    depth, half_width = config.table.depth, config.table.width / 2
    threshold = 1.0 - config.epsilon - 1e-12

    def check(x: float, y: float, theta: float) -> bool:
        c, s = math.cos(theta), math.sin(theta)
        px = x + c * pts[:, 0] - s * pts[:, 1]
        if px.max() > depth:
            return False
        py = y + s * pts[:, 0] + c * pts[:, 1]
        if np.abs(py).max() > half_width:
            return False
        X = np.array([x, y, theta])
        if config.obstacles and not in_workspace(grid, X, config):
            return False
        if px.min() >= 0.0:
            return True
        return stay_probability(belief, X, config.balance_margin) >= threshold

    return check
