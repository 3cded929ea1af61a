"""A push primitive and the fingertip motion that executes it.

A primitive is what the planner (or the exploration policy) asks of the arm: a contact
point A on the object's outline and a direction, both in the object frame O, a travel
after contact and a speed. It is resolved at the object's observed pose into fingertip
waypoints (:func:`push_waypoints`): above the start, down to the push height, the
stroke, a pause while the object comes to rest, a retract along the push, and up. The
twin's arm and the robot's arm both execute these waypoints; nothing else computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse.csgraph import shortest_path

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid, check_pose, distance_to_footprint, rotation
from slide_core.model.workcell import Fingertip, Obstacle

APPROACH = 0.02
"""Gap [m] between the fingertip and the contact point where the stroke starts."""
RETRACT = 0.02
"""How far [m] the fingertip pulls back along the push before it lifts."""
SETTLE_PAUSE_S = 0.3
"""Seconds the fingertip stands still after the stroke while the object comes to rest."""
TRAVEL_SPEED = 0.3
"""Speed [m/s] of moves through the air above the table."""
LOWER_SPEED = 0.1
"""Speed [m/s] of lowering to and lifting from the push height."""
LIFT = 0.12
"""Height [m] of the fingertip's centre above the table between pushes."""
RETRACT_SPEED = 0.05
"""Speed [m/s] of pulling back from the object after a stop."""
MIN_PUSH_SPEED = 0.001
"""Slowest stroke [m/s]: the longest push takes 500 s at it (a speed of 1e-300 m/s was
taken, and its motion's timeout came out at 8e298 s)."""


class PrimitiveError(SlideInputError):
    """A push primitive that cannot be executed (the message says why)."""


@dataclass(frozen=True)
class Primitive:
    """A straight fingertip push.

    Attributes:
        p_OA: (2,) contact point on the object's outline, object frame [m].
        d_O: (2,) unit push direction, object frame.
        travel: fingertip travel after contact [m]; speed: along the push [m/s].
    """

    p_OA: FloatArray
    d_O: FloatArray
    travel: float
    speed: float

    @classmethod
    def create(cls, p_OA: ArrayLike, d_O: ArrayLike, travel: float, speed: float) -> Primitive:
        """Validate and build (the direction is normalised); raises PrimitiveError."""
        p = np.array(p_OA, dtype=float)  # a copy: the caller's buffer may be reused
        d = np.asarray(d_O, dtype=float)
        if (
            p.shape != (2,)
            or d.shape != (2,)
            or not (np.isfinite(p).all() and np.isfinite(d).all())
        ):
            raise PrimitiveError('contact point and direction must be finite 2-vectors')
        norm = float(np.linalg.norm(d))
        if norm < 1e-9:
            raise PrimitiveError('the push direction is zero')
        if not (math.isfinite(travel) and 0.0 < travel <= 0.5):
            raise PrimitiveError(f'travel must lie in (0, 0.5] m, got {travel}')
        if not (math.isfinite(speed) and MIN_PUSH_SPEED <= speed <= 0.5):
            raise PrimitiveError(f'speed must lie in [{MIN_PUSH_SPEED:g}, 0.5] m/s, got {speed}')
        return cls(p, d / norm, float(travel), float(speed))

    def stroke_W(self, X_WO: ArrayLike, fingertip: Fingertip) -> tuple[FloatArray, FloatArray]:
        """Fingertip centre (2,) at the stroke's start (APPROACH short of touching) and end,
        table frame, with the object at X_WO."""
        X = check_pose(X_WO, 'X_WO')
        R = rotation(float(X[2]))
        p_WA = X[:2] + R @ self.p_OA
        d_W = R @ self.d_O
        start = p_WA - d_W * (APPROACH + fingertip.radius)
        return start, start + d_W * (APPROACH + self.travel)

    def back_W(self, X_WO: ArrayLike) -> FloatArray:
        """RETRACT [m] back along the stroke (2,), table frame, with the object at X_WO:
        where a push stopped part-way pulls back before it lifts (the executor's and the
        in-process twin's stops alike)."""
        X = check_pose(X_WO, 'X_WO')
        return np.asarray(-(rotation(float(X[2])) @ self.d_O) * RETRACT, dtype=float)

    def to_dict(self) -> dict[str, Any]:
        return {
            'p_OA': [float(v) for v in self.p_OA],
            'd_O': [float(v) for v in self.d_O],
            'travel_m': self.travel,
            'speed_mps': self.speed,
        }


APPROACH_CLEARANCE = 0.003
"""Least gap [m] between the fingertip coming down at the approach point and the object."""


def approach_clear(grid: Grid, p_OA: FloatArray, d_O: FloatArray, fingertip: Fingertip) -> bool:
    """Whether the fingertip, coming down APPROACH short of the contact point p_OA before a
    push along d_O (object frame), clears the object (its real outline when the grid has
    one, else every cell) by APPROACH_CLEARANCE (a concave outline can put the approach
    point over another part of the object)."""
    start_O = np.asarray(p_OA, dtype=float) - np.asarray(d_O, dtype=float) * (
        APPROACH + fingertip.radius
    )
    return distance_to_footprint(grid, start_O) >= fingertip.radius + APPROACH_CLEARANCE


def side_met(grid: Grid, p_OA: ArrayLike, fingertip: Fingertip) -> bool:
    """Whether the fingertip, at its push height, meets the object's side at the contact
    point p_OA (object frame): the cell there stands higher than the fingertip's bottom
    (a cell of unknown height, 0, counts as tall enough). A part lower than that the
    fingertip passes over, and the push moves nothing."""
    i = int(grid.nearest_cells(np.asarray(p_OA, dtype=float)[None])[0])
    h = float(grid.heights[grid.occupancy][i])
    return h == 0.0 or h > fingertip.clearance


SWEEP_STEP = 0.002
"""Spacing [m] of the points a fingertip's stroke is checked at against obstacles."""


def stroke_clear(
    primitive: Primitive,
    X_WO: ArrayLike,
    fingertip: Fingertip,
    obstacles: Sequence[Obstacle],
) -> bool:
    """Whether the fingertip, from where it comes down to the end of the stroke of
    ``primitive`` at the object's pose X_WO, keeps APPROACH_CLEARANCE beyond its radius
    from every obstacle (the retract goes back along the stroke; the move through the air
    to the push: :func:`over_obstacles`)."""
    if not obstacles:
        return True
    start, end = primitive.stroke_W(X_WO, fingertip)
    p_W = _points(start, end)
    least = fingertip.radius + APPROACH_CLEARANCE
    return all(float(ob.distance(p_W).min()) >= least for ob in obstacles)


@dataclass(frozen=True)
class Waypoint:
    """A tool set point: the tool's point p_W (3,) [m] in the table frame (the fingertip's
    centre, or the gripper pads' front end E; z above the table top) and its yaw [rad]
    (the gripper's approach direction), reached in a straight line at ``speed`` [m/s],
    then held ``dwell_s`` seconds. ``phase`` names the motion (approach, lower, stroke,
    retract, lift; pre_grasp, reach, lift)."""

    p_W: FloatArray
    speed: float
    dwell_s: float
    phase: str
    yaw: float = 0.0


def push_waypoints(primitive: Primitive, X_WO: ArrayLike, fingertip: Fingertip) -> list[Waypoint]:
    """The fingertip motion of one push at the observed pose X_WO (see the module
    docstring): approach, lower, stroke (the third), settle (the pause, in place), retract,
    lift."""
    start, end = primitive.stroke_W(X_WO, fingertip)
    d_W = (end - start) / np.linalg.norm(end - start)
    back = end - d_W * RETRACT
    z, up = fingertip.height, LIFT
    return [
        Waypoint(np.array([*start, up]), TRAVEL_SPEED, 0.0, 'approach'),
        Waypoint(np.array([*start, z]), LOWER_SPEED, 0.05, 'lower'),
        Waypoint(np.array([*end, z]), primitive.speed, 0.0, 'stroke'),
        Waypoint(np.array([*end, z]), primitive.speed, SETTLE_PAUSE_S, 'settle'),
        Waypoint(np.array([*back, z]), primitive.speed, 0.0, 'retract'),
        Waypoint(np.array([*back, up]), LOWER_SPEED, 0.0, 'lift'),
    ]


def check_position(p_W: ArrayLike) -> FloatArray:
    """A tool's position p_W (3,) [m] as a new float array; SlideInputError unless it is
    three finite numbers."""
    p = np.array(p_W, dtype=float)
    if p.shape != (3,) or not np.isfinite(p).all():
        raise SlideInputError(f'p_W must be a finite (3,) position, got {p!r}')
    return p


def retract_waypoints(
    p_W: ArrayLike, yaw: float, back_W: ArrayLike | None = None, up: float = LIFT
) -> list[Waypoint]:
    """A tool's way out of a motion stopped part-way (a cancel, a force limit, a fault),
    from where it is, p_W (3,): back by ``back_W`` (2,) [m] at the table's height (None:
    not; a push's stroke begun pulls back along it), then up to ``up`` [m] (never down).
    The executor's and the in-process twin's stops both retract by it."""
    p = check_position(p_W)
    waypoints = []
    if back_W is not None:
        p[:2] += np.asarray(back_W, dtype=float)
        waypoints.append(Waypoint(p.copy(), RETRACT_SPEED, 0.0, 'retract', yaw))
    top = np.array([p[0], p[1], max(up, p[2])])
    waypoints.append(Waypoint(top, LOWER_SPEED, 0.0, 'lift', yaw))
    return waypoints


HOP_CLEARANCE = 0.03
"""Height [m] a tool keeps above an obstacle's top when it moves over it."""
MAX_HOP = 0.6
"""Highest [m] above the table a tool is sent to pass over an obstacle; one taller, or
of unknown height, it goes around."""
ROUTE_MARGIN = 0.002
"""[m] a way around an obstacle keeps beyond the tool's least distance from it."""


def over_obstacles(
    p_W: ArrayLike,
    waypoints: Sequence[Waypoint],
    obstacles: Sequence[Obstacle],
    radius: float,
) -> list[Waypoint]:
    """``waypoints`` for a tool of ``radius`` [m] now at p_W (3,), with its move through
    the air to the first one kept clear of the workcell's obstacles (the tool's least
    distance from a box: its radius plus APPROACH_CLEARANCE; the moves after the first go
    down to the object and back up where the planner keeps them clear: :func:`stroke_clear`).

    Around the obstacles it may not pass over (of unknown height, or taller than MAX_HOP
    allows): the shortest way between their corners; over the others it passes on the way
    at their top plus HOP_CLEARANCE, going up first and down at the end. Waypoints so
    added have phase 'transit'. PrimitiveError when no way around is left (the tool, or
    the first waypoint, too near one of them)."""
    if not waypoints or not obstacles:
        return list(waypoints)
    a = check_position(p_W)
    first = waypoints[0]
    b = np.asarray(first.p_W, dtype=float)
    near = radius + APPROACH_CLEARANCE
    walls = [ob for ob in obstacles if ob.height is None or ob.top + HOP_CLEARANCE > MAX_HOP]
    route = _route(a[:2], b[:2], walls, near, first.phase)
    legs = list(zip(route[:-1], route[1:], strict=True))
    xy = np.vstack([_points(p, q) for p, q in legs])
    if len(route) == 2:  # straight: at the heights along it
        z = a[2] + np.linspace(0.0, 1.0, len(xy)) * (b[2] - a[2])
    else:  # around: at the higher end's height
        z = np.full(len(xy), max(a[2], b[2]))
    need = -np.inf
    for ob in obstacles:
        if ob in walls:
            continue
        over = ob.distance(xy) < near
        if over.any() and float(z[over].min()) < ob.top + HOP_CLEARANCE:
            need = max(need, ob.top + HOP_CLEARANCE)
    if len(route) == 2 and not np.isfinite(need):
        return list(waypoints)
    height = max(need, float(a[2]), float(b[2]))
    added = []
    if height > a[2]:
        added.append(
            Waypoint(np.array([*route[0], height]), LOWER_SPEED, 0.0, 'transit', first.yaw)
        )
    for p in [*route[1:-1], *([route[-1]] if height > b[2] else [])]:
        added.append(Waypoint(np.array([*p, height]), TRAVEL_SPEED, 0.0, 'transit', first.yaw))
    return [*added, *waypoints]


def _points(p: FloatArray, q: FloatArray) -> FloatArray:
    """Points (k, 2) along the segment p-q (2,), SWEEP_STEP apart or nearer, both ends."""
    k = max(2, math.ceil(float(np.linalg.norm(q - p)) / SWEEP_STEP) + 1)
    return np.asarray(p + np.linspace(0.0, 1.0, k)[:, None] * (q - p), dtype=float)


def _route(
    a: FloatArray, b: FloatArray, walls: Sequence[Obstacle], near: float, phase: str
) -> list[FloatArray]:
    """The shortest polyline [a, ..., b] (2,) points in the table plane that keeps
    ``near`` [m] from every box of ``walls``, through the corners of the boxes grown by it
    (a visibility graph); PrimitiveError when there is none."""

    def clear(p: FloatArray, q: FloatArray) -> bool:
        points = _points(p, q)
        return all(float(ob.distance(points).min()) >= near - 1e-9 for ob in walls)

    if clear(a, b):
        return [a, b]
    for point, what in ((a, 'the tool'), (b, f'the {phase} point')):
        for ob in walls:
            if float(ob.distance(point)[0]) < near - 1e-9:
                raise PrimitiveError(
                    f'{what} is within {near * 1000:.0f} mm of a workcell obstacle it may not '
                    f'pass over (centre {list(ob.centre)}, half size {list(ob.half_size)}, '
                    f'height {"not given" if ob.height is None else ob.height}): no way '
                    'around it'
                )
    grown = [
        (
            np.asarray(ob.centre) - np.asarray(ob.half_size) - near,
            np.asarray(ob.centre) + np.asarray(ob.half_size) + near,
        )
        for ob in walls
    ]
    m = ROUTE_MARGIN
    corners = [
        np.array([x, y])
        for lo, hi in grown
        for x in (lo[0] - m, hi[0] + m)
        for y in (lo[1] - m, hi[1] + m)
    ]
    nodes = [a, b, *corners]
    n = len(nodes)
    cost = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            if clear(nodes[i], nodes[j]):
                cost[i, j] = cost[j, i] = max(float(np.linalg.norm(nodes[j] - nodes[i])), 1e-12)
    dist, before = shortest_path(cost, directed=False, indices=0, return_predecessors=True)
    if not np.isfinite(dist[1]):
        raise PrimitiveError(
            f'no way through the air to the {phase} point around the workcell obstacles the '
            'tool may not pass over (of unknown height, or taller than '
            f'{MAX_HOP - HOP_CLEARANCE:g} m): give their heights, or move them'
        )
    path = [1]
    while path[-1] != 0:
        path.append(int(before[path[-1]]))
    return [nodes[i] for i in reversed(path)]
