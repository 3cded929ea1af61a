"""Balance at the edge: margins of the belief's centres of mass inside the support
polygon, the probability that the object stays, and the poses the object may pass through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
import weakref

import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import (
    FloatArray,
    Grid,
    cell_corners,
    check_pose,
    rotation,
    to_world,
)
from slide_core.model import Belief
from slide_core.planning import kernels
from slide_core.planning.config import PlannerConfig

_OUTLINES: weakref.WeakKeyDictionary[Grid, tuple[FloatArray, NDArray[np.int64]]] = (
    weakref.WeakKeyDictionary()
)
_COMS: weakref.WeakKeyDictionary[Belief, FloatArray] = weakref.WeakKeyDictionary()


def outline_of(grid: Grid) -> tuple[FloatArray, NDArray[np.int64]]:
    """The grid's outline corners and sides (:func:`kernels.outline`), computed once per
    grid: an episode's pushes, paths and goals all reuse it."""
    found = _OUTLINES.get(grid)
    if found is None:
        found = _OUTLINES[grid] = kernels.outline(grid)
    return found


def _com(belief: Belief) -> FloatArray:
    found = _COMS.get(belief)
    if found is None:
        found = _COMS[belief] = np.ascontiguousarray(belief.com(), dtype=float)
    return found


def com_margins_of(belief: Belief, X_WO: Any) -> FloatArray:
    """(K,) margins of every model at X_WO (see :func:`slide_core.geometry.com_margins`;
    compiled, :mod:`slide_core.planning.kernels`)."""
    X = check_pose(X_WO, 'X_WO')
    corners, sides = outline_of(belief.grid)
    out = np.empty(belief.K)
    kernels.support_margins(corners, sides, X[0], X[1], X[2], _com(belief), out)
    return out


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
    t = config.table
    corners, _ = outline_of(grid)  # the footprint's extremes are outline corners
    if not kernels.on_table(corners, X[0], X[1], X[2], t.depth, t.width / 2):
        return False
    if not config.obstacles:
        return True
    pts = to_world(X, np.concatenate((cell_corners(grid).reshape(-1, 2), grid.p_OC)))
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
    com = _com(belief)
    corners, sides = outline_of(belief.grid)
    out = np.empty(1)
    fall = 0.0
    for k in range(belief.K):
        X = X_K[k]
        kernels.support_margins(
            corners, sides, float(X[0]), float(X[1]), float(X[2]), com[k : k + 1], out
        )
        if out[0] < config.balance_margin:
            fall += float(belief.weight[k])
    return fall


def validity(belief: Belief, config: PlannerConfig) -> Callable[[float, float, float], bool]:
    """:func:`is_valid` as a fast closure for the sampling planner (called ~1e4 times per
    path): one compiled call per pose (:func:`kernels.pose_valid`); the balance test
    only runs for poses that reach past the edge."""
    grid = belief.grid
    corners, sides = outline_of(grid)
    com = _com(belief)
    weight = np.ascontiguousarray(belief.weight, dtype=float)
    depth, half_width = config.table.depth, config.table.width / 2
    threshold = 1.0 - config.epsilon - 1e-12
    margin = config.balance_margin
    obstacles = bool(config.obstacles)
    valid = kernels.pose_valid

    def check(x: float, y: float, theta: float) -> bool:
        if obstacles and not in_workspace(grid, np.array([x, y, theta]), config):
            return False
        return bool(
            valid(corners, sides, x, y, theta, depth, half_width, com, weight, margin, threshold)
        )

    return check
