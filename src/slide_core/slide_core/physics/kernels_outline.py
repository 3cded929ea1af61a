"""The fingertip against an object's real outline (a polygon) instead of its cells' squares,
compiled: the simulators' contact point, normal and signed distance."""

from __future__ import annotations

import math

from numba import njit
import numpy as np


@njit(cache=True)
def outline_contact(
    px: float, py: float, outline: np.ndarray
) -> tuple[float, float, float, float, float]:
    """Closest point q on the closed polygon ``outline`` (V, 2) to p = (px, py), the unit
    normal n of the outline there pointing to the outside, and p's signed distance (< 0
    inside). Returns (qx, qy, nx, ny, signed). At the outline itself n is (1, 0)."""
    V = outline.shape[0]
    best = np.inf
    qx = outline[0, 0]
    qy = outline[0, 1]
    inside = False
    for i in range(V):
        ax = outline[i, 0]
        ay = outline[i, 1]
        bx = outline[(i + 1) % V, 0]
        by = outline[(i + 1) % V, 1]
        ex = bx - ax
        ey = by - ay
        ee = ex * ex + ey * ey
        t = 0.0
        if ee > 0.0:
            t = min(max(((px - ax) * ex + (py - ay) * ey) / ee, 0.0), 1.0)
        cx = ax + t * ex
        cy = ay + t * ey
        d2 = (px - cx) ** 2 + (py - cy) ** 2
        if d2 < best:
            best = d2
            qx = cx
            qy = cy
        if (ay > py) != (by > py):  # crossing number
            if px < ax + (py - ay) * ex / ey:
                inside = not inside
    d = math.sqrt(best)
    if d <= 0.0:
        return qx, qy, 1.0, 0.0, 0.0
    if inside:
        return qx, qy, (qx - px) / d, (qy - py) / d, -d
    return qx, qy, (px - qx) / d, (py - qy) / d, d
