"""The quasi-static ellipsoidal limit-surface model of planar pushing (the classic reference).

Uniform pressure over the object's footprint; the friction wrenches it can resist form an
ellipsoid ``(f_x / f_max)^2 + (f_y / f_max)^2 + (m / m_max)^2 = 1`` (Howe and Cutkosky
1996), so the object's twist about its centre of pressure is parallel to
``(f_x, f_y, m / c^2)`` with ``c = m_max / f_max``, the mean distance of the footprint's
points from that centre. A point pusher with Coulomb friction ``mu_tip`` either sticks
(its velocity lies in the motion cone spanned by the friction cone's edges) or slides
along the edge it violates (Lynch, Maekawa and Tanie 1992). The support friction
coefficient cancels: quasi-static motion does not depend on it, and nothing coasts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.errors import SlideInputError
from slide_core.geometry import Grid, signed_area

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class LimitSurfaceObject:
    """A footprint for the limit-surface model.

    Attributes:
        outline_O: (M, 2) polygon of the footprint in the object frame [m].
        p_OP: (2,) centre of pressure (the area centroid) in the object frame [m].
        c: ratio m_max / f_max [m].
    """

    outline_O: FloatArray
    p_OP: FloatArray
    c: float

    @classmethod
    def from_outline(cls, outline_O: ArrayLike, resolution: float = 0.001) -> LimitSurfaceObject:
        """Uniform pressure over the polygon, integrated on a fine grid of ``resolution``."""
        outline = np.asarray(outline_O, dtype=float)
        grid = Grid.from_polygon(outline, resolution)
        lo, hi = outline.min(axis=0), outline.max(axis=0)
        points = grid.p_OC + (lo + hi) / 2  # back to the outline's own frame
        centre = points.mean(axis=0)
        c = float(np.linalg.norm(points - centre, axis=1).mean())
        return cls(outline, centre, c)


def closest_on_outline(outline: FloatArray, p: FloatArray) -> tuple[FloatArray, float, FloatArray]:
    """Closest outline point to ``p`` (2,), the signed distance (negative inside) and the
    outward normal there."""
    a = outline
    b = np.roll(outline, -1, axis=0)
    ab = b - a
    t = np.clip(np.einsum('ij,ij->i', p - a, ab) / np.einsum('ij,ij->i', ab, ab), 0.0, 1.0)
    q = a + t[:, None] * ab
    d = np.linalg.norm(p - q, axis=1)
    k = int(np.argmin(d))
    edge = ab[k]
    n_out = np.array([edge[1], -edge[0]])  # outward for a counter-clockwise outline
    n_out /= np.linalg.norm(n_out)
    # (Taken as pointing away from the vertices' mean, it pointed inwards on a concave
    # part's edges, and a push there read as moving away: the tip passed through an L.)
    if signed_area(outline) < 0:
        n_out = -n_out
    inside = _inside(outline, p)
    return q[k], (-d[k] if inside else d[k]), n_out


def _inside(poly: FloatArray, p: FloatArray) -> bool:
    x, y = p
    inside = False
    n = len(poly)
    for i in range(n):
        x1, y1 = poly[i]
        x2, y2 = poly[(i + 1) % n]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def twist(
    obj: LimitSurfaceObject, r_c: FloatArray, n_in: FloatArray, v_p: FloatArray, mu_tip: float
) -> FloatArray:
    """Object twist (v_x, v_y, omega) at the centre of pressure, object frame, for a pusher
    at ``r_c`` (relative to the centre of pressure) moving at ``v_p`` with inward contact
    normal ``n_in``."""
    if float(np.dot(v_p, n_in)) <= 0.0:
        return np.zeros(3)  # moving away: no push
    t_hat = np.array([-n_in[1], n_in[0]])
    c2 = obj.c**2

    def contact_velocity(f: FloatArray) -> tuple[FloatArray, FloatArray]:
        omega = (r_c[0] * f[1] - r_c[1] * f[0]) / c2
        V = np.array([f[0], f[1], omega])
        return V, f + omega * np.array([-r_c[1], r_c[0]])

    # Sticking: the contact velocity is linear in f: v_c = A f.
    A = np.column_stack(
        [contact_velocity(e)[1] for e in (np.array([1.0, 0.0]), np.array([0.0, 1.0]))]
    )
    f = np.asarray(np.linalg.solve(A, v_p), dtype=float)
    alpha, beta = float(f @ n_in), float(f @ t_hat)
    if alpha > 0 and abs(beta) <= mu_tip * alpha:
        return contact_velocity(f)[0]
    # Sliding along the cone edge on the side of the violation.
    edge = n_in + np.sign(beta) * mu_tip * t_hat
    V_e, v_e = contact_velocity(edge)
    scale = float(np.dot(v_p, n_in) / np.dot(v_e, n_in))
    return np.asarray(V_e * max(scale, 0.0), dtype=float)


def simulate(
    obj: LimitSurfaceObject,
    X_WO0: ArrayLike,
    p_WT: ArrayLike,
    tip_radius: float,
    mu_tip: float,
) -> FloatArray:
    """Object poses (T, 3) for a tip path p_WT (T, 2), open loop from X_WO0 (3,).

    Each step moves the tip; where the moved tip would overlap the object, the object moves
    with the twist the model gives for that tip velocity.
    """
    path = np.asarray(p_WT, dtype=float)
    X = np.asarray(X_WO0, dtype=float).copy()
    if path.ndim != 2 or path.shape[1] != 2 or len(path) < 2:
        raise SlideInputError(f'the tip path must have shape (T>=2, 2), got {path.shape}')
    out = [X.copy()]
    for k in range(1, len(path)):
        c, s = np.cos(X[2]), np.sin(X[2])
        R = np.array([[c, -s], [s, c]])
        tip_O = R.T @ (path[k] - X[:2])
        q, dist, n_out = closest_on_outline(obj.outline_O, tip_O)
        penetration = tip_radius - dist
        if penetration > 0:
            v_p = R.T @ (path[k] - path[k - 1])  # a displacement: the model is rate-free
            n_in = -n_out
            # Move only as much as the overlap requires along the normal.
            v_n = float(np.dot(v_p, n_in))
            if v_n > 0:
                v_p = v_p * min(1.0, penetration / v_n)
            V = twist(obj, q - obj.p_OP, n_in, v_p, mu_tip)
            # Rotate about the centre of pressure, then express in the world.
            p_WP = X[:2] + R @ obj.p_OP
            theta = X[2] + V[2]
            p_WP = p_WP + R @ V[:2]
            c2, s2 = np.cos(theta), np.sin(theta)
            X = np.array([*(p_WP - np.array([[c2, -s2], [s2, c2]]) @ obj.p_OP), theta])
        out.append(X.copy())
    return np.array(out)
