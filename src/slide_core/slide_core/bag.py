"""Recorded pushes from a rosbag2 (the twin's, or the robot's ``ros2 bag record``).

Topics read (as ``slide record`` writes them): ``/object/grid``, ``/object/pose``,
``/pusher/pose``, ``/ft/wrench`` (force the fingertip applies to the object, world
axes), ``/push/start``, ``/push/end`` (optional: a push then ends 0.3 s after its stroke,
before the fingertip retracts), ``/push/primitive``. ``/ground_truth`` is read only by
:func:`read_ground_truth`, never by :func:`read_pushes`, so identification cannot see it.

Each push becomes a wrench-driven replay on a fixed time step: the force of each step is
the mean of the F/T samples in it, applied where the fingertip touches the object (the
point of the object's cells closest to the fingertip's centre, at the object pose of that
instant); the observed object poses are the targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid, rotation
from slide_core.physics import RigidModel, WrenchPush

DT = 0.004  # s, the replay's time step
SETTLE_S = 0.3  # s after the stroke's end that still belong to the push (free sliding)
CONTACT_FORCE_N = 0.05  # below this the fingertip is taken as not touching

REQUIRED = ('/object/grid', '/object/pose', '/pusher/pose', '/ft/wrench', '/push/start')


@dataclass(frozen=True, eq=False)
class PushData:
    """One recorded push as the physics core replays it.

    Attributes:
        index: the push's index in the bag.
        push: forces and contact points per step.
        X_WO0: (3,) observed pose at the first step.
        obs_steps: (J,) steps at which the pose was observed; X_obs: (J, 3) those poses.
        p_WF: (T+1, 2) the fingertip centre at the step boundaries (for kinematic replays).
        X_steps: (T+1, 3) the observed poses interpolated to the step boundaries.
    """

    index: int
    push: WrenchPush
    X_WO0: FloatArray
    obs_steps: NDArray[np.int64]
    X_obs: FloatArray
    p_WF: FloatArray
    X_steps: FloatArray


def parse_range(text: str) -> list[int]:
    """'0-4' or '0,2,5-7' -> push indices."""
    out: list[int] = []
    try:
        for part in text.split(','):
            if '-' in part:
                a, b = (int(v) for v in part.split('-'))
                if b < a:
                    raise ValueError
                out.extend(range(a, b + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise SlideInputError(f'push range {text!r} is not like 0-4 or 0,2,5-7') from None
    return out


def _open(path: Path) -> Any:
    from rosbags.highlevel import AnyReader

    if not path.exists():
        raise SlideInputError(f'{path}: no such bag')
    return AnyReader([path])


def _yaw(q: Any) -> float:
    return float(2.0 * np.arctan2(q.z, q.w))


def _stamp(msg: Any) -> float:
    return float(msg.header.stamp.sec) + 1e-9 * float(msg.header.stamp.nanosec)


def read_grid(msg: Any) -> Grid:
    rows, cols = int(msg.rows), int(msg.cols)
    occupancy = np.asarray(msg.occupancy, dtype=np.uint8)
    heights = np.asarray(msg.heights, dtype=float)
    if occupancy.size != rows * cols or heights.size != rows * cols:
        raise SlideInputError(
            f'the object grid is {rows} x {cols} but has {occupancy.size} occupancy and '
            f'{heights.size} height values'
        )
    return Grid(
        float(msg.cell_size), occupancy.reshape(rows, cols) > 0, heights.reshape(rows, cols)
    )


def read_pushes(
    path: str | Path, indices: list[int] | None = None, dt: float = DT
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
    grid = read_grid(series['/object/grid'][0][1])
    starts = [t for t, _ in series['/push/start']]
    if not starts:
        raise SlideInputError(f'{path}: no complete push (no /push/start marker)')
    wanted = list(range(len(starts))) if indices is None else indices
    bad = [i for i in wanted if not 0 <= i < len(starts)]
    if bad:
        raise SlideInputError(f'{path}: has pushes 0-{len(starts) - 1}, asked for {bad}')
    poses = np.array(
        [
            (_stamp(m), m.pose.position.x, m.pose.position.y, _yaw(m.pose.orientation))
            for _, m in series['/object/pose']
        ]
    )
    tips = np.array(
        [(_stamp(m), m.pose.position.x, m.pose.position.y) for _, m in series['/pusher/pose']]
    )
    wrench = np.array(
        [(_stamp(m), m.wrench.force.x, m.wrench.force.y) for _, m in series['/ft/wrench']]
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
        _push(grid, i, bounds[i], stops[i], poses, tips, wrench, path, dt) for i in wanted
    ]


def push_from_samples(
    grid: Grid,
    index: int,
    t: ArrayLike,
    X_WO: ArrayLike,
    p_WF: ArrayLike,
    f_W: ArrayLike,
    t_start: float,
    t_end: float,
    dt: float = DT,
) -> PushData:
    """A push from time series sampled in memory, as :func:`read_pushes` makes it from a bag.

    t: (N,) times [s]; X_WO: (N, 3) object poses; p_WF: (N, >=2) fingertip centres;
    f_W: (N, >=2) force the fingertip applies [N]; the push runs from ``t_start`` to
    ``t_end`` (the stroke's end) plus SETTLE_S.
    """
    tt = np.asarray(t, dtype=float)
    X, p, f = (np.asarray(a, dtype=float) for a in (X_WO, p_WF, f_W))
    if tt.ndim != 1 or X.shape != (len(tt), 3) or p.shape[0] != len(tt) or f.shape[0] != len(tt):
        raise SlideInputError('t (N,), X_WO (N, 3), p_WF and f_W (N, 2+) must agree in length')
    return _push(
        grid,
        index,
        t_start,
        t_end + SETTLE_S,
        np.column_stack((tt, X)),
        np.column_stack((tt, p[:, :2])),
        np.column_stack((tt, f[:, :2])),
        Path(f'<push {index}>'),
        dt,
    )


def _push(
    grid: Grid,
    index: int,
    t_start: float,
    t_next: float,
    poses: FloatArray,
    tips: FloatArray,
    wrench: FloatArray,
    path: Path,
    dt: float,
) -> PushData:
    sel = (poses[:, 0] >= t_start - 1e-9) & (poses[:, 0] < t_next)
    P = poses[sel]
    if len(P) < 3:
        raise SlideInputError(
            f'{path}: push {index} has {len(P)} object poses: not a complete push'
        )
    tip_sel = (tips[:, 0] >= P[0, 0] - 0.05) & (tips[:, 0] <= P[-1, 0] + 0.05)
    W = wrench[(wrench[:, 0] >= P[0, 0]) & (wrench[:, 0] < P[-1, 0])]
    if tip_sel.sum() < 2 or len(W) == 0:
        raise SlideInputError(
            f'{path}: push {index}: pusher poses or wrenches do not overlap the object '
            'poses in time'
        )
    Tp = tips[tip_sel]
    steps = int(np.floor((P[-1, 0] - P[0, 0]) / dt))
    if steps < 2:
        raise SlideInputError(f'{path}: push {index} lasts less than two steps')
    t = P[0, 0] + dt * np.arange(steps + 1)
    yaw = np.unwrap(P[:, 3])
    X = np.column_stack(
        [
            np.interp(t, P[:, 0], P[:, 1]),
            np.interp(t, P[:, 0], P[:, 2]),
            np.interp(t, P[:, 0], yaw),
        ]
    )
    mid = t[:-1] + dt / 2
    tip = np.column_stack([np.interp(mid, Tp[:, 0], Tp[:, 1]), np.interp(mid, Tp[:, 0], Tp[:, 2])])
    k = np.clip(((W[:, 0] - t[0]) // dt).astype(int), 0, steps - 1)
    counts = np.bincount(k, minlength=steps)
    sums = np.column_stack([np.bincount(k, W[:, c], minlength=steps) for c in (1, 2)])
    f = np.asarray(sums / np.maximum(counts, 1)[:, None], dtype=float)
    f[counts == 0] = 0.0
    X_mid = (X[:-1] + X[1:]) / 2
    contact = np.zeros((steps, 2))
    last = grid.p_OC[0]
    model = RigidModel.of(grid)
    for s in range(steps):
        if np.linalg.norm(f[s]) < CONTACT_FORCE_N:
            f[s] = 0.0
            contact[s] = last
            continue
        p_O = rotation(X_mid[s, 2]).T @ (tip[s] - X_mid[s, :2])
        # The point of the object's cells closest to the fingertip (RigidModel works at G).
        q_B, _ = model.closest_point((p_O - model.p_OG)[None, :])
        contact[s] = last = q_B[0] + model.p_OG
    push = WrenchPush.create(grid, contact, f, dt)
    obs_steps = np.clip(np.round((P[:, 0] - t[0]) / dt).astype(np.int64), 0, steps)
    X_obs = np.column_stack((P[:, 1:3], yaw))
    p_WF = np.column_stack([np.interp(t, Tp[:, 0], Tp[:, c]) for c in (1, 2)])
    return PushData(index, push, X[0], obs_steps, X_obs, p_WF, X)


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
    grid = read_grid(msg.grid)
    mass = grid.from_map(np.asarray(msg.model.mass).reshape(grid.shape), 'mass')
    friction = grid.from_map(np.asarray(msg.model.friction).reshape(grid.shape), 'friction')
    return GroundTruth(str(msg.name), grid, mass, friction)
