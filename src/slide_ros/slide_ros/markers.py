"""RViz markers of slide's data: the belief's maps and centres of mass, footprints, pushes,
the fingertip's force and the workcell's obstacles.

All markers are in the table frame. The belief's most probable model is drawn as two
CUBE_LISTs over the object (mass: green shades, at the cells' tops; friction: orange
shades, just above the table), every model's centre of mass as a sphere whose size grows
with its probability.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from typing import Any

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point
import numpy as np
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from slide_core.geometry import FloatArray, boundary_segments, cell_positions, rotation, to_world
from slide_core.model import Belief, Obstacle


def _colour(r: float, g: float, b: float, a: float = 1.0) -> ColorRGBA:
    return ColorRGBA(r=float(r), g=float(g), b=float(b), a=float(a))


def _marker(ns: str, mid: int, kind: int, frame: str, stamp: Any) -> Marker:
    m = Marker()
    m.header.frame_id, m.header.stamp = frame, stamp
    m.ns, m.id, m.type, m.action = ns, mid, kind, Marker.ADD
    m.pose.orientation.w = 1.0
    m.lifetime = Duration(sec=0)
    return m


def belief_markers(belief: Belief, X_WO: FloatArray, frame: str, stamp: Any) -> MarkerArray:
    """The most probable model's mass and friction maps and every model's centre of mass,
    over the object at X_WO."""
    g = belief.grid
    k = belief.best
    out = MarkerArray()
    p_W = cell_positions(g, X_WO)
    heights = g.heights[g.occupancy]
    for mid, (name, values, base) in enumerate(
        (
            ('mass', belief.mass[k], (0.1, 0.7, 0.2)),
            ('friction', belief.friction[k], (1.0, 0.5, 0.0)),
        )
    ):
        m = _marker(f'belief/{name}', mid, Marker.CUBE_LIST, frame, stamp)
        m.scale.x = m.scale.y = g.cell_size * 0.95
        m.scale.z = 0.002
        lo, hi = float(values.min()), float(values.max())
        shade = (values - lo) / (hi - lo) if hi > lo else np.full(values.shape, 0.5)
        for (x, y), h, s in zip(p_W, heights, shade, strict=True):
            z = float(h) + 0.002 if name == 'mass' else 0.001
            m.points.append(Point(x=float(x), y=float(y), z=z))
            m.colors.append(_colour(*(0.2 + 0.8 * s * np.asarray(base)), 0.9))
        out.markers.append(m)
    coms = belief.com() @ rotation(float(X_WO[2])).T + X_WO[:2]
    top = float(heights.max())
    # (a belief of fewer models left the last one's extra spheres standing)
    out.markers.append(clear('belief/com', frame, stamp))
    for i, (c, w) in enumerate(zip(coms, belief.weight, strict=True)):
        m = _marker('belief/com', i, Marker.SPHERE, frame, stamp)
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (
            float(c[0]),
            float(c[1]),
            top + 0.01,
        )
        m.scale.x = m.scale.y = m.scale.z = 0.006 + 0.02 * math.sqrt(float(w))
        m.color = _colour(0.9, 0.1, 0.1, 0.4 + 0.6 * float(w))
        out.markers.append(m)
    return out


def footprint(
    belief: Belief,
    X_WO: FloatArray,
    ns: str,
    mid: int,
    rgba: Sequence[float],
    frame: str,
    stamp: Any,
) -> Marker:
    """The object's outline at X_WO as a LINE_LIST: its real outline, or its cells' outer
    sides (:func:`slide_core.geometry.boundary_segments`)."""
    m = _marker(ns, mid, Marker.LINE_LIST, frame, stamp)
    m.scale.x = 0.002
    m.color = _colour(*rgba)
    starts, stops = boundary_segments(belief.grid)
    ends = to_world(np.asarray(X_WO, dtype=float), np.concatenate((starts, stops)))
    n = len(starts)
    for a, b in zip(ends[:n], ends[n:], strict=True):
        m.points.append(Point(x=float(a[0]), y=float(a[1]), z=0.001))
        m.points.append(Point(x=float(b[0]), y=float(b[1]), z=0.001))
    return m


def arrow(
    p_W: FloatArray, d_W: FloatArray, length: float, ns: str, frame: str, stamp: Any
) -> Marker:
    """An arrow from p_W along d_W (the fingertip's stroke)."""
    m = _marker(ns, 0, Marker.ARROW, frame, stamp)
    m.scale.x, m.scale.y, m.scale.z = 0.004, 0.008, 0.01
    m.color = _colour(0.85, 0.1, 0.1)
    end = np.asarray(p_W) + np.asarray(d_W) * length
    m.points = [
        Point(x=float(p_W[0]), y=float(p_W[1]), z=0.02),
        Point(x=float(end[0]), y=float(end[1]), z=0.02),
    ]
    return m


FORCE_SCALE = 0.02
"""Length [m] of the force arrow per newton."""
FORCE_LIFETIME_S = 0.5
"""How long [s] a force arrow stays without a newer one: a stream that stops leaves none."""


def force_arrow(p_WF: FloatArray, f_W: FloatArray, frame: str, stamp: Any) -> Marker:
    """The force the fingertip applies to the object, an arrow from the fingertip's centre
    p_WF (3,) [m] along f_W (3,) [N], ``FORCE_SCALE`` metres per newton (a WrenchStamped
    in the table frame is drawn at the table's origin, far from the push)."""
    m = _marker('force', 0, Marker.ARROW, frame, stamp)
    m.scale.x, m.scale.y, m.scale.z = 0.003, 0.007, 0.01
    m.color = _colour(1.0, 0.8, 0.1)
    m.lifetime = Duration(sec=0, nanosec=int(FORCE_LIFETIME_S * 1e9))
    p = np.asarray(p_WF, dtype=float)
    end = p + np.asarray(f_W, dtype=float) * FORCE_SCALE
    m.points = [
        Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
        Point(x=float(end[0]), y=float(end[1]), z=float(end[2])),
    ]
    return m


OBSTACLE_HEIGHT = 0.01
"""How tall [m] an obstacle of unknown height is drawn: its footprint."""


def obstacle_markers(obstacles: Sequence[Obstacle], frame: str, stamp: Any) -> MarkerArray:
    """The workcell's obstacles, each a translucent box over its footprint on the table
    (as tall as the workcell says, or flat), after a DELETEALL of their namespace."""
    out = MarkerArray()
    out.markers = [clear('obstacles', frame, stamp)]
    for k, ob in enumerate(obstacles):
        m = _marker('obstacles', k, Marker.CUBE, frame, stamp)
        height = OBSTACLE_HEIGHT if ob.height is None else ob.height
        m.pose.position.x, m.pose.position.y = (float(v) for v in ob.centre)
        m.pose.position.z = height / 2
        m.scale.x, m.scale.y = (2 * float(v) for v in ob.half_size)
        m.scale.z = height
        m.color = _colour(0.8, 0.2, 0.6, 0.6)
        out.markers.append(m)
    return out


CLEAR_ID = -1
"""The id of a namespace's DELETEALL marker: none that it clears has it (RViz flags two
markers of one namespace and id in one array as an error: the plan's first predicted
footprint is id 0)."""


def clear(ns: str, frame: str, stamp: Any) -> Marker:
    """A DELETEALL of ``ns``: before a namespace's new markers in the same array."""
    m = _marker(ns, CLEAR_ID, Marker.DELETEALL, frame, stamp)
    m.action = Marker.DELETEALL
    return m
