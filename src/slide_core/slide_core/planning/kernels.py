"""Compiled balance tests for the planner (numba, cached on disk).

The same quantities as :func:`slide_core.geometry.com_margins`, from the part of the grid
that can matter: the support polygon (the convex hull of the footprint clipped to the
table, x >= 0) has its vertices among the outline's corners on the table and the two
ends of the footprint's cut along the edge line (a corner with all four cells around it
lies inside the clipped footprint, and crossings between the two ends lie on the hull's
edge along x = 0). The hull is Andrew's monotone chain; margins are the signed distances
``-max_e n_e . (p - v_e)`` over the polygon's edges, as there.

Callers pass the outline once per grid (:func:`outline`), so a sampling planner's
validity test is one compiled call per pose.
"""

from __future__ import annotations

import math

from numba import njit
import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import FloatArray, Grid, boundary_segments

WHOLLY_ON_TABLE = 1
NO_SUPPORT = -1


def outline(grid: Grid) -> tuple[FloatArray, NDArray[np.int64]]:
    """The footprint's outline (:func:`slide_core.geometry.boundary_segments`: the grid's
    real outline when it has one, else the cell sides with no occupied neighbour across)
    as corners (U, 2) in the object frame, each once, and its sides as index pairs (E, 2)
    into them."""
    a, b = boundary_segments(grid)
    ends = np.vstack((a, b))
    # Ends that are the same corner differ by rounding at most (cell corners are sums of
    # half cells): a thousandth of a cell merges them and no two real corners.
    key = np.round(ends / (grid.cell_size * 1e-3)).astype(np.int64)
    _, first, index = np.unique(key, axis=0, return_index=True, return_inverse=True)
    sides = index.reshape(-1).astype(np.int64).reshape(2, -1).T
    return np.ascontiguousarray(ends[first], dtype=float), np.ascontiguousarray(sides)


@njit(cache=True)
def _cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))


@njit(cache=True)
def _hull(points: np.ndarray, count: int, out: np.ndarray) -> int:
    """Counter-clockwise convex hull (no collinear vertices) of points[:count] into out;
    returns the number of vertices."""
    pts = points[:count]
    order = np.argsort(pts[:, 1], kind='mergesort')
    order = order[np.argsort(pts[order, 0], kind='mergesort')]
    m = 0
    for idx in order:  # lower hull
        while m >= 2 and _cross(out[m - 2], out[m - 1], pts[idx]) <= 0.0:
            m -= 1
        out[m] = pts[idx]
        m += 1
    lower = m + 1
    for t in range(count - 2, -1, -1):  # upper hull
        idx = order[t]
        while m >= lower and _cross(out[m - 2], out[m - 1], pts[idx]) <= 0.0:
            m -= 1
        out[m] = pts[idx]
        m += 1
    return m - 1 if m > 1 else m


@njit(cache=True)
def support_margins(
    corners: np.ndarray,
    sides: np.ndarray,
    x: float,
    y: float,
    th: float,
    com: np.ndarray,
    out: np.ndarray,
) -> int:
    """Margins [m] (K,) of centres of mass com (K, 2) (object frame) inside the support
    polygon at pose (x, y, th), into out. Returns WHOLLY_ON_TABLE (margins +inf: it cannot
    tip), NO_SUPPORT (-inf: less than a sliver rests on the table) or 0."""
    U = corners.shape[0]
    cs = math.cos(th)
    sn = math.sin(th)
    pts = np.empty((U + 2, 2))
    world = np.empty((U, 2))
    n = 0
    x_min = math.inf
    for i in range(U):
        wx = x + cs * corners[i, 0] - sn * corners[i, 1]
        wy = y + sn * corners[i, 0] + cs * corners[i, 1]
        world[i, 0] = wx
        world[i, 1] = wy
        x_min = min(x_min, wx)
        if wx >= 0.0:
            pts[n, 0] = wx
            pts[n, 1] = wy
            n += 1
    if x_min >= 0.0:
        out[:] = math.inf
        return WHOLLY_ON_TABLE
    # The two ends of the cut along x = 0.
    y_lo = math.inf
    y_hi = -math.inf
    for e in range(sides.shape[0]):
        a = sides[e, 0]
        b = sides[e, 1]
        ax = world[a, 0]
        bx = world[b, 0]
        if (ax < 0.0) != (bx < 0.0):
            t = -ax / (bx - ax)
            py = world[a, 1] + t * (world[b, 1] - world[a, 1])
            y_lo = min(y_lo, py)
            y_hi = max(y_hi, py)
    if y_lo <= y_hi:
        pts[n, 0] = 0.0
        pts[n, 1] = y_lo
        n += 1
        if y_hi > y_lo:
            pts[n, 0] = 0.0
            pts[n, 1] = y_hi
            n += 1
    if n < 3:
        out[:] = -math.inf
        return NO_SUPPORT
    poly = np.empty((n + 1, 2))
    V = _hull(pts, n, poly)
    if V < 3:
        out[:] = -math.inf
        return NO_SUPPORT
    for k in range(com.shape[0]):
        px = x + cs * com[k, 0] - sn * com[k, 1]
        py = y + sn * com[k, 0] + cs * com[k, 1]
        worst = -math.inf
        for v in range(V):
            ex = poly[(v + 1) % V, 0] - poly[v, 0]
            ey = poly[(v + 1) % V, 1] - poly[v, 1]
            norm = math.sqrt(ex * ex + ey * ey)
            d = ((px - poly[v, 0]) * ey - (py - poly[v, 1]) * ex) / norm
            worst = max(worst, d)
        out[k] = -worst
    return 0


@njit(cache=True)
def stay_weight(
    corners: np.ndarray,
    sides: np.ndarray,
    x: float,
    y: float,
    th: float,
    com: np.ndarray,
    weight: np.ndarray,
    need: np.ndarray,
) -> float:
    """Weight of the models whose centre of mass is at least its ``need`` (K,) [m] inside
    the support polygon at (x, y, th) (the belief's stay probability)."""
    out = np.empty(com.shape[0])
    support_margins(corners, sides, x, y, th, com, out)
    p = 0.0
    for k in range(com.shape[0]):
        if out[k] >= need[k]:
            p += weight[k]
    return min(1.0, p)  # (a sum of weights that make 1 can come to 1.0000000000000002)


@njit(cache=True)
def on_table(
    corners: np.ndarray, x: float, y: float, th: float, depth: float, half_width: float
) -> bool:
    """No outline corner beyond the table's far side (x > depth) or its sides."""
    cs = math.cos(th)
    sn = math.sin(th)
    for i in range(corners.shape[0]):
        wx = x + cs * corners[i, 0] - sn * corners[i, 1]
        wy = y + sn * corners[i, 0] + cs * corners[i, 1]
        if wx > depth or abs(wy) > half_width:
            return False
    return True


@njit(cache=True)
def pose_valid(
    corners: np.ndarray,
    sides: np.ndarray,
    x: float,
    y: float,
    th: float,
    depth: float,
    half_width: float,
    com: np.ndarray,
    weight: np.ndarray,
    need: np.ndarray,
    threshold: float,
) -> bool:
    """On the table (no corner beyond its far side or its sides) and, when it reaches past
    the edge, balanced for at least ``threshold`` of the belief, each model with its
    ``need`` (K,) [m] of margin."""
    cs = math.cos(th)
    sn = math.sin(th)
    x_min = math.inf
    for i in range(corners.shape[0]):
        wx = x + cs * corners[i, 0] - sn * corners[i, 1]
        wy = y + sn * corners[i, 0] + cs * corners[i, 1]
        if wx > depth or abs(wy) > half_width:
            return False
        x_min = min(x_min, wx)
    if x_min >= 0.0:
        return True
    return stay_weight(corners, sides, x, y, th, com, weight, need) >= threshold


@njit(cache=True)
def motion_valid(
    corners: np.ndarray,
    sides: np.ndarray,
    x1: float,
    y1: float,
    th1: float,
    x2: float,
    y2: float,
    th2: float,
    nd: int,
    depth: float,
    half_width: float,
    com: np.ndarray,
    weight: np.ndarray,
    need: np.ndarray,
    threshold: float,
) -> bool:
    """OMPL's discrete motion check from pose 1 to pose 2 (yaws in [-pi, pi]): pose 2
    and the ``nd - 1`` poses at j / nd between (SE(2) interpolation as OMPL's: linear in
    x, y, the shorter way round in yaw) all :func:`pose_valid` (pose 1 is valid already)."""
    if not pose_valid(
        corners, sides, x2, y2, th2, depth, half_width, com, weight, need, threshold
    ):
        return False
    pi = math.pi
    diff = th2 - th1
    for j in range(1, nd):
        t = float(j) / float(nd)
        x = x1 + (x2 - x1) * t
        y = y1 + (y2 - y1) * t
        if abs(diff) <= pi:
            th = th1 + diff * t
        else:
            d = 2.0 * pi - diff if diff > 0.0 else -2.0 * pi - diff
            th = th1 - d * t
            if th > pi:
                th -= 2.0 * pi
            elif th < -pi:
                th += 2.0 * pi
        if not pose_valid(
            corners, sides, x, y, th, depth, half_width, com, weight, need, threshold
        ):
            return False
    return True


def warm_up() -> None:
    """Load the compiled balance tests (numba's disk cache): a first call pays for it."""
    corners = np.array([[-0.01, -0.01], [0.01, -0.01], [0.01, 0.01], [-0.01, 0.01]])
    sides = np.array([[0, 1], [1, 2], [2, 3], [3, 0]], dtype=np.int64)
    com = np.zeros((1, 2))
    support_margins(corners, sides, 0.0, 0.0, 0.1, com, np.zeros(1))
    one, need = np.ones(1), np.zeros(1)
    stay_weight(corners, sides, 0.0, 0.0, 0.1, com, one, need)
    pose_valid(corners, sides, 0.0, 0.0, 0.1, 1.0, 1.0, com, one, need, 0.5)
    on_table(corners, 0.5, 0.0, 0.1, 1.0, 1.0)
    motion_valid(corners, sides, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 3, 1.0, 1.0, com, one, need, 0.5)
