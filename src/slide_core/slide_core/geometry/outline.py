"""An object's real outline: a simple polygon in the object frame, where the fingertip
touches the object and what the table supports, instead of the cells' staircase.

A grid's square cells misplace a curved or slanted outline by up to half a cell (a cell on
it is partly the object's, :attr:`slide_core.geometry.Grid.coverage`); the outline puts
the boundary back where the camera saw it. Perception traces it from its fine footprint
image (:func:`trace_outline`), clipped to the grid's occupied cells, so that the fingertip
and the support never reach a part of the object without a cell's mass and friction.
"""

from __future__ import annotations

import contourpy
import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.geometry.se2 import FloatArray, GridError


def signed_area(vertices: FloatArray) -> float:
    """Signed area [m^2] of the polygon (V, 2): positive when counter-clockwise."""
    x, y = vertices[:, 0], vertices[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def _self_intersects(v: FloatArray) -> bool:
    """True when two non-adjacent sides of the closed polygon v (V, 2) meet."""
    a, b = v, np.roll(v, -1, axis=0)
    V = v.shape[0]

    def orient(p: FloatArray, q: FloatArray, r: FloatArray) -> FloatArray:
        return np.asarray(
            np.sign(
                (q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1])
                - (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0])
            )
        )

    i, j = np.triu_indices(V, k=2)
    keep = ~((i == 0) & (j == V - 1))  # the last side touches the first
    i, j = i[keep], j[keep]
    o1 = orient(a[i], b[i], a[j])
    o2 = orient(a[i], b[i], b[j])
    o3 = orient(a[j], b[j], a[i])
    o4 = orient(a[j], b[j], b[i])
    proper = (o1 * o2 < 0) & (o3 * o4 < 0)
    return bool(proper.any())


def check_outline(vertices: ArrayLike, name: str = 'outline') -> FloatArray:
    """A validated copy (V, 2) of a simple polygon, counter-clockwise, repeated closing
    vertex dropped; raises GridError saying what is wrong."""
    v = np.array(vertices, dtype=float)
    if v.ndim != 2 or v.shape[1] != 2:
        raise GridError(f'{name} must be (V, 2) polygon vertices [m], got shape {v.shape}')
    if not np.all(np.isfinite(v)):
        raise GridError(f'{name} has non-finite vertices')
    if v.shape[0] > 1 and np.array_equal(v[0], v[-1]):
        v = v[:-1]
    if v.shape[0] < 3:
        raise GridError(f'{name} needs at least 3 vertices, got {v.shape[0]}')
    if _self_intersects(v):
        raise GridError(f'{name} crosses itself: give a simple polygon (one closed boundary)')
    area = signed_area(v)
    if abs(area) <= 0.0:
        raise GridError(f'{name} encloses no area: its vertices are collinear')
    if area < 0.0:
        v = v[::-1].copy()
    v.setflags(write=False)
    return v


def simplify(ring: FloatArray, tolerance: float) -> FloatArray:
    """The closed polygon ring (V, 2) with the vertices dropped that lie within
    ``tolerance`` [m] of the chord between the vertices kept either side
    (Douglas-Peucker, split at the ring's two farthest-apart vertices)."""
    V = ring.shape[0]
    if V <= 4:
        return ring
    start = 0
    far = int(np.argmax(np.linalg.norm(ring - ring[start], axis=1)))
    keep = np.zeros(V, dtype=bool)
    keep[[start, far]] = True
    stack = [(start, far), (far, V)]
    while stack:
        i, j = stack.pop()
        if j - i < 2:
            continue
        p, q = ring[i], ring[j % V]
        inner = ring[i + 1 : j]
        d = q - p
        length = float(np.hypot(d[0], d[1]))
        if length > 0.0:
            dist = np.abs(d[0] * (inner[:, 1] - p[1]) - d[1] * (inner[:, 0] - p[0])) / length
        else:
            dist = np.linalg.norm(inner - p, axis=1)
        k = int(np.argmax(dist))
        if dist[k] > tolerance:
            m = i + 1 + k
            keep[m] = True
            stack.extend(((i, m), (m, j)))
    return np.asarray(ring[keep], dtype=float)


def trace_outline(
    image: NDArray[np.bool_], origin: FloatArray, pitch: float, tolerance: float
) -> FloatArray:
    """The boundary of the largest region of a footprint image, as a simple polygon.

    Args:
        image: (rows, cols) True where the object covers the pixel; row 0 at +y.
        origin: (2,) the lower-left corner of the image's bottom-left pixel [m].
        pitch: a pixel's edge [m].
        tolerance: how far [m] the polygon may leave the pixels' boundary when vertices
            are dropped (:func:`simplify`).

    Returns:
        (V, 2) counter-clockwise vertices [m] in the image's frame. The boundary runs
        along the pixels' sides, with a convex pixel corner cut by half a pixel.

    Raises:
        GridError: the image covers no pixel.
    """
    if not image.any():
        raise GridError('the footprint image covers no pixel: there is no outline to trace')
    z = np.pad(np.flipud(image).astype(float), 1)  # row 0 at -y; an empty border closes it
    x = origin[0] + (np.arange(z.shape[1]) - 0.5) * pitch
    y = origin[1] + (np.arange(z.shape[0]) - 0.5) * pitch
    lines = contourpy.contour_generator(x, y, z, line_type=contourpy.LineType.Separate).lines(0.5)
    rings = [np.asarray(r, dtype=float)[:-1] for r in lines if len(r) >= 4]
    ring = max(rings, key=lambda r: abs(signed_area(r)))
    if signed_area(ring) < 0.0:
        ring = ring[::-1]
    return check_outline(simplify(ring, tolerance), 'the traced outline')
