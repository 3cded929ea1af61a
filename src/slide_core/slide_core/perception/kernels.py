"""Compiled per-frame loops of perception (numba, cached on disk).

A 640x480 frame is 300 000 points: mapping them to the table frame, finding the image's
bounds, cropping them to the tracked object's neighbourhood and measuring its sampling
step were most of a tracked frame's time in numpy (whole-array temporaries, BLAS threads
on a loaded machine, a k-d tree; the bounds 27 ms of 33). Each is one pass here,
single-threaded, with the same results; the registration's residuals (the distance field
interpolated as ``scipy.ndimage.map_coordinates(order=1, mode='nearest')`` does) are one
pass over the outline points.
"""

from __future__ import annotations

import math

from numba import njit
import numpy as np


@njit(cache=True)
def to_table_frame(p_K: np.ndarray, R_WK: np.ndarray, p_WK: np.ndarray) -> np.ndarray:
    """Finite points with positive depth of p_K (N, 3), mapped to the table frame (M, 3)."""
    n = p_K.shape[0]
    out = np.empty((n, 3))
    j = 0
    for i in range(n):
        x = p_K[i, 0]
        y = p_K[i, 1]
        z = p_K[i, 2]
        if z > 0.0 and math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
            out[j, 0] = R_WK[0, 0] * x + R_WK[0, 1] * y + R_WK[0, 2] * z + p_WK[0]
            out[j, 1] = R_WK[1, 0] * x + R_WK[1, 1] * y + R_WK[1, 2] * z + p_WK[1]
            out[j, 2] = R_WK[2, 0] * x + R_WK[2, 1] * y + R_WK[2, 2] * z + p_WK[2]
            j += 1
    out = out[:j]
    return out


@njit(cache=True)
def image_bounds(p_K: np.ndarray) -> np.ndarray:
    """[least x / z, least y / z, largest x / z, largest y / z] over the points of p_K
    (N, 3) that :func:`to_table_frame` keeps (all NaN when there is none)."""
    out = np.array([np.inf, np.inf, -np.inf, -np.inf])
    for i in range(p_K.shape[0]):
        x = p_K[i, 0]
        y = p_K[i, 1]
        z = p_K[i, 2]
        if z > 0.0 and math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
            u = x / z
            v = y / z
            out[0] = min(out[0], u)
            out[1] = min(out[1], v)
            out[2] = max(out[2], u)
            out[3] = max(out[3], v)
    if out[0] > out[2]:
        out[:] = np.nan
    return out


@njit(cache=True)
def crop(
    p_W: np.ndarray,
    cx: float,
    cy: float,
    reach: float,
    normal: np.ndarray,
    offset: float,
    min_height: float,
    keep_out: np.ndarray,
) -> np.ndarray:
    """Indices of the points p_W (N, 3) within ``reach`` of (cx, cy) in the plane, at least
    ``min_height`` above the table plane (normal, offset) and outside every keep-out
    cylinder (rows of keep_out: x, y, z, radius, half height)."""
    n = p_W.shape[0]
    idx = np.empty(n, dtype=np.int64)
    count = 0
    r2 = reach * reach
    for i in range(n):
        x = p_W[i, 0]
        y = p_W[i, 1]
        z = p_W[i, 2]
        if (x - cx) ** 2 + (y - cy) ** 2 > r2:
            continue
        h = x * normal[0] + y * normal[1] + z * normal[2] + offset
        if not (h >= min_height and math.isfinite(h)):
            continue
        inside = False
        for b in range(keep_out.shape[0]):
            d2 = (x - keep_out[b, 0]) ** 2 + (y - keep_out[b, 1]) ** 2
            if d2 <= keep_out[b, 3] ** 2 and abs(z - keep_out[b, 2]) <= keep_out[b, 4]:
                inside = True
                break
        if inside:
            continue
        idx[count] = i
        count += 1
    return idx[:count]


@njit(cache=True)
def nearest_distances(xy: np.ndarray) -> np.ndarray:
    """Distance from each point of xy (M, 2), M >= 2, to its nearest other point (a
    coincident one counts, at 0): bucketed on a grid, searched ring by ring until no
    nearer point can lie further out."""
    m = xy.shape[0]
    x0 = xy[:, 0].min()
    y0 = xy[:, 1].min()
    wx = xy[:, 0].max() - x0
    wy = xy[:, 1].max() - y0
    # About two points a cell; points on a line (no area) get cells along it, never a
    # vanishing cell size (a billion cells for two points).
    h = max(math.sqrt(wx * wy / m) * 1.5, max(wx, wy) / m, 1e-9)
    nx = int(wx / h) + 1
    ny = int(wy / h) + 1
    cell = np.empty(m, dtype=np.int64)
    count = np.zeros(nx * ny + 1, dtype=np.int64)
    for i in range(m):
        cxi = min(int((xy[i, 0] - x0) / h), nx - 1)
        cyi = min(int((xy[i, 1] - y0) / h), ny - 1)
        cell[i] = cxi * ny + cyi
        count[cell[i] + 1] += 1
    for c in range(nx * ny):
        count[c + 1] += count[c]
    order = np.empty(m, dtype=np.int64)
    fill = count[:-1].copy()
    for i in range(m):
        order[fill[cell[i]]] = i
        fill[cell[i]] += 1
    out = np.empty(m)
    for i in range(m):
        px = xy[i, 0]
        py = xy[i, 1]
        cxi = cell[i] // ny
        cyi = cell[i] % ny
        best = math.inf
        ring = 0
        while True:
            for a in range(cxi - ring, cxi + ring + 1):
                if a < 0 or a >= nx:
                    continue
                for b in range(cyi - ring, cyi + ring + 1):
                    if b < 0 or b >= ny:
                        continue
                    if max(abs(a - cxi), abs(b - cyi)) != ring:
                        continue  # inner cells were searched already
                    c = a * ny + b
                    for k in range(count[c], count[c + 1]):
                        j = order[k]
                        if j == i:
                            continue
                        d = math.sqrt((xy[j, 0] - px) ** 2 + (xy[j, 1] - py) ** 2)
                        if d < best:
                            best = d
            # Every point within ring * h of p lies in the cells searched so far.
            if best <= ring * h or (ring > nx and ring > ny):
                break
            ring += 1
        out[i] = best
    return out


@njit(cache=True)
def _bilinear(field: np.ndarray, u: float, v: float) -> float:
    """map_coordinates(order=1, mode='nearest') of field at (row u, col v)."""
    rows, cols = field.shape
    u = min(max(u, 0.0), rows - 1.0)  # beyond the border the edge value continues
    v = min(max(v, 0.0), cols - 1.0)
    i = min(int(math.floor(u)), rows - 2) if rows > 1 else 0
    j = min(int(math.floor(v)), cols - 2) if cols > 1 else 0
    a = u - i
    b = v - j
    i1 = min(i + 1, rows - 1)
    j1 = min(j + 1, cols - 1)
    return float(
        (1 - a) * (1 - b) * field[i, j]
        + (1 - a) * b * field[i, j1]
        + a * (1 - b) * field[i1, j]
        + a * b * field[i1, j1]
    )


@njit(cache=True)
def register(
    outline: np.ndarray,
    X: np.ndarray,
    field: np.ndarray,
    lo: np.ndarray,
    pitch: float,
    residuals: np.ndarray,
) -> None:
    """Distances (K,) of the outline points (K, 2) (table frame) from the acquired outline
    with the object at pose X (3,), into ``residuals``: the points in the object frame,
    looked up in the distance field (row 0 at y = lo[1], pixel centres at
    lo + (k + 0.5) pitch)."""
    c = math.cos(X[2])
    s = math.sin(X[2])
    for k in range(outline.shape[0]):
        dx = outline[k, 0] - X[0]
        dy = outline[k, 1] - X[1]
        ox = c * dx + s * dy  # R(yaw)^T (p - X_xy)
        oy = -s * dx + c * dy
        residuals[k] = _bilinear(field, (oy - lo[1]) / pitch - 0.5, (ox - lo[0]) / pitch - 0.5)


def warm_up() -> None:
    """Load the compiled functions (numba's disk cache): a first call pays for it."""
    p = np.array([[0.0, 0.0, 1.0], [0.1, 0.0, 1.0], [np.nan, 0.0, 1.0]])
    to_table_frame(p, np.eye(3), np.zeros(3))
    image_bounds(p)
    crop(p, 0.0, 0.0, 1.0, np.array([0.0, 0.0, 1.0]), 0.0, 0.0, np.zeros((1, 5)))
    nearest_distances(p[:2, :2].copy())
    field = np.zeros((3, 3))
    register(np.zeros((1, 2)), np.zeros(3), field, np.zeros(2), 0.001, np.zeros(1))
