"""A bag's topics as series: decoded rows with their log times, header stamps and frames;
the checks that say whether a topic can be used, poses and wrenches in the table frame, and
clock jumps (see :mod:`slide_core.io.bag` for what is read and why)."""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Any

import numpy as np

from slide_core.geometry import FloatArray
from slide_core.io.bagfile import Bag
from slide_core.io.messages import (
    MAX_TILT,
    MessageError,
    grid_from_msg,
    marker_from_msg,
    ns_to_s,
    pose_tilt,
    pose_to_planar,
    stamp_to_s,
)

CLOUD_TOPIC = '/camera/camera/depth/color/points'
TYPES = {
    '/object/grid': 'slide_interfaces/msg/ObjectGrid',
    '/object/pose': 'geometry_msgs/msg/PoseStamped',
    '/pusher/pose': 'geometry_msgs/msg/PoseStamped',
    '/gripper/pose': 'geometry_msgs/msg/PoseStamped',
    '/ft/wrench': 'geometry_msgs/msg/WrenchStamped',
    '/netft/wrench': 'geometry_msgs/msg/WrenchStamped',
    '/push/start': 'slide_interfaces/msg/PushMarker',
    '/push/end': 'slide_interfaces/msg/PushMarker',
    '/push/primitive': 'slide_interfaces/msg/PushPrimitive',
    CLOUD_TOPIC: 'sensor_msgs/msg/PointCloud2',
    '/ground_truth': 'slide_interfaces/msg/GroundTruth',
}
"""The type each topic read here must have."""
UNSTAMPED_MARKER = 'std_msgs/msg/UInt32'
"""The push markers' type in recordings made before they were stamped: still read, placed
by when the recorder received them (:func:`marker_times`)."""
MARKERS = ('/push/start', '/push/end')
"""The topics of the push markers (each push's index, at its stroke's start and end)."""
SENSOR_FRAMES = ('ft_sensor',)
"""Frames of the F/T sensor (the driver's ``frame_id``): mounted with the tool's axes."""
JUMP_S = 5.0
"""A stamp this far [s] off its topic's usual offset to the recording clock is a jump (an
overloaded graph delivers messages seconds late, and unevenly: smaller jumps are not told
apart from that)."""
MAX_TOOL_AGE_S = 0.2
"""A sensor-frame wrench needs a fingertip orientation at most this old [s]."""


@dataclass
class Series:
    """One topic's messages: log times [s], header stamps [s] (NaN for a push marker
    without one), values (rows), frames; of a pose topic also the stamps [s] and leans
    [rad] of the poses tilted beyond ``MAX_TILT`` (the object tipped over: not rows)."""

    topic: str
    log: list[float] = field(default_factory=list)
    stamp: list[float] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    bad: int = 0
    tilted: list[tuple[float, float]] = field(default_factory=list)

    def add(self, log: float, stamp: float, row: Any, frame: str) -> None:
        self.log.append(log)
        self.stamp.append(stamp)
        self.rows.append(row)
        self.frames.append(frame)

    def jumps(self) -> tuple[np.ndarray, np.ndarray]:
        """(ok mask, offset from the usual [s]) of each message's stamp."""
        if not self.log:
            return np.zeros(0, bool), np.zeros(0)
        off = np.asarray(self.stamp) - np.asarray(self.log)
        dev = off - float(np.median(off))
        return np.abs(dev) <= JUMP_S, dev


def stamp_offset(data: Series) -> float:
    """The usual offset [s] of ``data``'s header stamps from when its messages were
    recorded (median of stamp - log time, to the microsecond; 0 without messages): about 0
    on a wall clock, the wall clock's distance from the simulation's under sim time. A push's
    window is read on the stamps' clock; what the bag knows only by log time (the grid in
    force, a clock's jump, where the recording stops) is put on that clock by this."""
    if not data.log:
        return 0.0
    return round(float(np.median(np.asarray(data.stamp) - np.asarray(data.log))), 6)


def marker_times(s: Series, data: Series) -> tuple[list[float], str]:
    """When each push marker of ``s`` was sent [s], on the clock of ``data`` (the fingertip
    poses, which the executor stamps as it stamps the markers), and what could not be
    taken as it came ('' if nothing).

    A marker's stamp where it has one. A marker without one (the ``std_msgs/UInt32`` of
    older recordings, or a zero stamp: its publisher did not set it), or stamped more than
    JUMP_S away from the data's clock (another clock, or one that jumped), is placed by when
    it was recorded, on the data's usual offset (to the microsecond)."""
    stamp, log = np.asarray(s.stamp, dtype=float), np.asarray(s.log, dtype=float)
    offset = stamp_offset(data)
    stamped = np.isfinite(stamp)
    apart = stamped & (np.abs(np.where(stamped, stamp, 0.0) - log - offset) > JUMP_S)
    times = np.where(stamped & ~apart, stamp, log + offset)
    problems = []
    if (~stamped).any():
        problems.append(
            f'{int((~stamped).sum())} marker(s) without a stamp ({UNSTAMPED_MARKER} of an '
            'older recording, or a zero stamp)'
        )
    if apart.any():
        problems.append(
            f'{int(apart.sum())} marker(s) stamped more than {JUMP_S:g} s off the clock of '
            f'{data.topic} (another clock, or one that jumped)'
        )
    why = ''
    if problems:
        why = (
            ' and '.join(problems) + ': placed by when they were recorded, which can be '
            'late under load'
        )
    return [float(t) for t in times], why


def usable(bag: Bag, topic: str) -> str:
    """'' when the bag has messages of ``topic`` that can be decoded, else why not."""
    info = bag.topics.get(topic)
    if info is None:
        return 'not recorded'
    if info.count == 0:
        return 'has no messages'
    if topic in bag.unknown:
        return bag.unknown[topic]
    want = TYPES.get(topic)
    if topic in MARKERS and info.type == UNSTAMPED_MARKER:
        return ''
    if want is not None and info.type != want:
        return f'its type is {info.type}, not {want}'
    return ''


def read_series(bag: Bag, topics: list[str]) -> dict[str, Series]:
    """Decoded series of ``topics`` (grids as (log, Grid, frame) rows; push primitives as
    the fingertip's (radius, height) [m] they were made with, no stamp)."""
    out = {t: Series(t) for t in topics}
    for topic, t_ns, raw in bag.messages(topics):
        msg = bag.decode(topic, raw)
        if msg is None:
            continue
        s = out[topic]
        log = ns_to_s(t_ns)
        try:
            if topic in MARKERS:
                index, stamp = marker_from_msg(msg)
                s.add(log, math.nan if stamp is None else stamp, index, '')
            elif topic == '/push/primitive':
                tip = (float(msg.fingertip_radius), float(msg.height))
                if not (math.isfinite(tip[0]) and math.isfinite(tip[1])):
                    raise MessageError('not finite')
                s.add(log, math.nan, tip, '')
            elif topic == '/object/grid':
                grid, _ = grid_from_msg(msg)
                s.add(log, stamp_to_s(msg.header.stamp), (log, grid, msg.header.frame_id), '')
            elif topic.endswith('/wrench'):
                f, tau = msg.wrench.force, msg.wrench.torque
                row = np.array([f.x, f.y, f.z, tau.x, tau.y, tau.z], dtype=float)
                if not np.isfinite(row).all():
                    raise MessageError('not finite')
                s.add(log, stamp_to_s(msg.header.stamp), row, str(msg.header.frame_id))
            else:  # poses: (x, y, yaw, z, qx, qy, qz, qw)
                tilt = pose_tilt(msg.pose) if topic == '/object/pose' else 0.0
                if tilt > MAX_TILT:
                    s.tilted.append((stamp_to_s(msg.header.stamp), tilt))
                    continue
                q = msg.pose.orientation
                row = np.array(
                    [*pose_to_planar(msg.pose), msg.pose.position.z, q.x, q.y, q.z, q.w],
                    dtype=float,
                )
                if not np.isfinite(row).all():
                    raise MessageError('not finite')
                s.add(log, stamp_to_s(msg.header.stamp), row, str(msg.header.frame_id))
        except (MessageError, AttributeError, TypeError, ValueError):
            s.bad += 1
    return out


def planar_rows(s: Series, table: str) -> tuple[FloatArray, np.ndarray, str, bool]:
    """Rows (t, x, y, yaw) of a pose series in the table frame, the log times of messages
    whose clock jumped, a problem ('' if none), and whether it leaves nothing to use."""
    ok, _ = s.jumps()
    frames = np.array(s.frames, dtype=object)
    in_table = np.array([f in (table, '') for f in s.frames], dtype=bool)
    problem, fatal = '', False
    if len(frames) and not in_table.all():
        other = ', '.join(map(repr, sorted(set(frames[~in_table]))))
        fatal = not in_table.any()
        problem = (
            f'every pose is in frame {other}, not the table frame {table!r}'
            if fatal
            else f'{int((~in_table).sum())} pose(s) in frame {other}, not the table frame '
            f'{table!r}, are not used'
        )
    rows = np.array([r[:3] for r in s.rows], dtype=float).reshape(-1, 3)
    data = np.column_stack((np.asarray(s.stamp, dtype=float), rows))[ok & in_table]
    order = np.argsort(data[:, 0], kind='stable')
    return data[order], np.asarray(s.log, dtype=float)[~ok], problem, fatal


def wrench_rows(
    s: Series, tool: Series, table: str, R_TS: FloatArray | None = None
) -> tuple[FloatArray, np.ndarray, str, str]:
    """Rows (t, fx, fy) of the force on the object in the table frame, the log times of
    messages whose clock jumped, why the series cannot be used ('' when it can), and where
    it came from. Wrenches in the sensor's frame are turned by the fingertip's orientation
    (on ``tool``) and the sensor's in the fingertip's, R_TS (3, 3) (None: the same), as the
    executor turns them (its ``sensor_mount``)."""
    ok, _ = s.jumps()
    jumped = np.asarray(s.log, dtype=float)[~ok]
    frames = sorted(set(s.frames))
    where = f'{s.topic} (frame {", ".join(map(repr, frames))})'
    bad = [f for f in frames if f not in (table, '', *SENSOR_FRAMES)]
    if bad:
        why = (
            f'wrenches in frame {", ".join(map(repr, bad))}, neither the table frame '
            f'{table!r} nor the F/T sensor frame {SENSOR_FRAMES[0]!r}: they cannot be turned '
            'into the table frame'
        )
        return np.zeros((0, 3)), jumped, why, where
    stamps = np.asarray(s.stamp, dtype=float)
    F = np.array(s.rows, dtype=float).reshape(-1, 6)
    f_W = F[:, :3].copy()
    sensor = np.array([f in SENSOR_FRAMES for f in s.frames], dtype=bool)
    if sensor.any():
        # The sensor keeps the fingertip's axes: its orientation is the tool's, on
        # /pusher/pose, the latest at the wrench's stamp (as the executor turns it).
        t_tool = np.asarray(tool.stamp, dtype=float)
        if len(t_tool) == 0:
            why = (
                f'wrenches in the sensor frame {SENSOR_FRAMES[0]!r} and no fingertip '
                'orientation (/pusher/pose) to turn them into the table frame'
            )
            return np.zeros((0, 3)), jumped, why, where
        order = np.argsort(t_tool, kind='stable')
        t_tool = t_tool[order]
        R_all = np.array([quaternion_matrix(r[4:8]) for r in tool.rows])[order]
        if R_TS is not None:  # the sensor turned on the fingertip (the executor's mount)
            R_all = R_all @ np.asarray(R_TS, dtype=float)
        t_s = stamps[sensor]
        k = np.clip(np.searchsorted(t_tool, t_s, side='right') - 1, 0, len(t_tool) - 1)
        f_W[sensor] = np.einsum('nij,nj->ni', R_all[k], F[sensor, :3])
        stale = np.zeros(len(stamps), dtype=bool)
        stale[np.flatnonzero(sensor)[np.abs(t_s - t_tool[k]) > MAX_TOOL_AGE_S]] = True
        ok = ok & ~stale
        where += ', turned into the table frame with the /pusher/pose orientation' + (
            ' and the sensor mount'
            if R_TS is not None
            else ' (the sensor taken as mounted square on the fingertip: give its mount when '
            'it is turned)'
        )
    data = np.column_stack((stamps, f_W[:, :2]))[ok]
    order = np.argsort(data[:, 0], kind='stable')
    return data[order], jumped, '', where


def quaternion_matrix(q: FloatArray) -> FloatArray:
    """Rotation (3, 3) of a quaternion (x, y, z, w) (normalised here)."""
    n = float(np.linalg.norm(q))
    x, y, z, w = (float(v) / n for v in q) if n > 0 else (0.0, 0.0, 0.0, 1.0)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def clock_jump(
    series: dict[str, Series], jumps: dict[str, np.ndarray], t0: float, t1: float
) -> str:
    """Why the push [t0, t1] (log times) cannot be used because a clock jumped, or ''."""
    for topic, times in jumps.items():
        inside = (times >= t0) & (times <= t1)
        if inside.any() and topic in series:
            s = series[topic]
            ok, dev = s.jumps()
            k = int(np.flatnonzero(np.asarray(s.log) == times[inside][0])[0])
            return (
                f'the clock of {topic} jumps during it (stamps {dev[k]:+.2f} s off the '
                'recording clock)'
            )
        if inside.any():
            return f'the clock of {topic} jumps during it'
    return ''
