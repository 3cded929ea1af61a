"""Recorded pushes from a rosbag2 (the twin's, or the robot's ``ros2 bag record``).

Topics read (as ``slide record`` writes them): ``/object/grid``, ``/object/pose``,
``/pusher/pose``, ``/ft/wrench`` (force the fingertip applies to the object, world
axes), ``/push/start``, ``/push/end`` (optional: a push then ends 0.3 s after its stroke,
before the fingertip retracts), ``/push/primitive``. ``/ground_truth`` is read only by
:func:`read_ground_truth`, never by :func:`read_pushes`, so identification cannot see it.

Each push becomes a wrench-driven replay on a fixed time step
(:func:`slide_core.identification.build_push`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid
from slide_core.identification import SETTLE_S, STEP_S, PushData, build_push
from slide_core.io.messages import grid_from_msg, pose_to_planar, stamp_to_s

REQUIRED = ('/object/grid', '/object/pose', '/pusher/pose', '/ft/wrench', '/push/start')


def _open(path: Path) -> Any:
    from rosbags.highlevel import AnyReader

    if not path.exists():
        raise SlideInputError(f'{path}: no such bag')
    return AnyReader([path])


def read_pushes(
    path: str | Path, indices: list[int] | None = None, dt: float = STEP_S
) -> tuple[Grid, list[PushData]]:
    """The object grid and the requested pushes (all when ``indices`` is None), on replay
    steps of ``dt`` seconds."""
    path = Path(path)
    if not 0.0005 <= dt <= 0.05:
        raise SlideInputError(f'the replay step must be 0.5 to 50 ms, got {dt * 1000:g} ms')
    series: dict[str, list[tuple[float, Any]]] = {t: [] for t in (*REQUIRED, '/push/end')}
    with _open(path) as reader:
        topics = {c.topic for c in reader.connections}
        missing = [t for t in REQUIRED if t not in topics]
        if missing:
            raise SlideInputError(f'{path}: the bag lacks {", ".join(missing)}')
        conns = [c for c in reader.connections if c.topic in series]
        for conn, t_ns, raw in reader.messages(connections=conns):
            series[conn.topic].append((t_ns * 1e-9, reader.deserialize(raw, conn.msgtype)))
    grid, _ = grid_from_msg(series['/object/grid'][0][1])
    starts = [t for t, _ in series['/push/start']]
    if not starts:
        raise SlideInputError(f'{path}: no complete push (no /push/start marker)')
    wanted = list(range(len(starts))) if indices is None else indices
    bad = [i for i in wanted if not 0 <= i < len(starts)]
    if bad:
        raise SlideInputError(f'{path}: has pushes 0-{len(starts) - 1}, asked for {bad}')
    poses = np.array(
        [(stamp_to_s(m.header.stamp), *pose_to_planar(m.pose)) for _, m in series['/object/pose']]
    )
    tips = np.array(
        [
            (stamp_to_s(m.header.stamp), m.pose.position.x, m.pose.position.y)
            for _, m in series['/pusher/pose']
        ]
    )
    wrench = np.array(
        [
            (stamp_to_s(m.header.stamp), m.wrench.force.x, m.wrench.force.y)
            for _, m in series['/ft/wrench']
        ]
    )
    # A push ends SETTLE_S after its stroke (/push/end; the object comes to rest, before
    # the fingertip retracts and leaves), or at the next push when there is no end marker.
    ends = [t for t, _ in series['/push/end']]
    bounds = [*starts, np.inf]
    stops = []
    for i in range(len(starts)):
        after = [t for t in ends if bounds[i] <= t < bounds[i + 1]]
        stops.append(min(after[0] + SETTLE_S, bounds[i + 1]) if after else bounds[i + 1])
    return grid, [
        build_push(grid, i, bounds[i], stops[i], poses, tips, wrench, str(path), dt)
        for i in wanted
    ]


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """The true object of a twin bag (evaluation only)."""

    name: str
    grid: Grid
    mass: FloatArray
    friction: FloatArray


def read_ground_truth(path: str | Path) -> GroundTruth | None:
    """The bag's /ground_truth (first message), or None when it has none (a robot bag)."""
    with _open(Path(path)) as reader:
        conns = [c for c in reader.connections if c.topic == '/ground_truth']
        if not conns:
            return None
        _, _, raw = next(iter(reader.messages(connections=conns)))
        msg = reader.deserialize(raw, conns[0].msgtype)
    grid, _ = grid_from_msg(msg.grid)
    mass = grid.from_map(np.asarray(msg.model.mass).reshape(grid.shape), 'mass')
    friction = grid.from_map(np.asarray(msg.model.friction).reshape(grid.shape), 'friction')
    return GroundTruth(str(msg.name), grid, mass, friction)
