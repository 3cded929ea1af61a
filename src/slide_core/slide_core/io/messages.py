"""Every message <-> core conversion, in one module, paired both ways.

Duck-typed: decoders read any object with the messages' field names, so rosbags'
deserialised messages and rclpy's decode alike; encoders fill a message object the caller
made (rclpy messages are default-constructible; nested list elements come from a factory
the caller passes). Nothing here imports ROS.

Messages: ``builtin_interfaces/Time``, ``geometry_msgs/Pose`` (planar: yaw about z, the one
convention of :func:`slide_core.geometry.yaw_of_quaternion`), ``sensor_msgs/PointCloud2``,
``slide_interfaces/ObjectGrid``, ``ModelBelief``, ``PushPrimitive``, ``PushRecord``,
``PushMarker`` (and the ``std_msgs/UInt32`` markers of older recordings), ``GroundTruth``.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from slide_core.errors import SlideInputError
from slide_core.geometry import (
    FloatArray,
    Grid,
    GridError,
    check_object_cells,
    quaternion_of_yaw,
    yaw_of_quaternion,
)
from slide_core.identification import PushSamples
from slide_core.model import Belief, BeliefError, Fingertip, Primitive, PrimitiveError
from slide_core.physics import DEFAULT_SUPPORT


class MessageError(SlideInputError):
    """A message whose fields cannot describe what it claims (the reason says which)."""


# -- time and poses -------------------------------------------------------------------------
def stamp_to_s(stamp: Any) -> float:
    """Seconds of a ``builtin_interfaces/Time``."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def ns_to_s(t_ns: int) -> float:
    """Seconds of a time in integer nanoseconds (a bag's log time), converted as
    :func:`stamp_to_s` converts a stamp: a message logged at its stamp gets the same float
    (``t_ns * 1e-9`` can differ in the last bit, 0.2 us at wall-clock times)."""
    return float(t_ns // 10**9) + 1e-9 * float(t_ns % 10**9)


def set_stamp(stamp: Any, seconds: float) -> Any:
    """Write ``seconds`` (>= 0) into a ``builtin_interfaces/Time`` (whole seconds apart:
    seconds * 1e9 of a wall-clock time is past a float's integers)."""
    sec = math.floor(seconds)
    ns = int(round((seconds - sec) * 1e9))
    stamp.sec, stamp.nanosec = int(sec) + ns // 10**9, ns % 10**9
    return stamp


MAX_TILT = math.radians(10.0)
"""The most [rad] a pose's z axis may lean from its frame's for :func:`pose_to_planar`: an
object lying flat on the table leans only by the estimator's noise; beyond, it has tipped
over, lies on something, or its pose is in a frame other than the table's."""


def pose_tilt(pose: Any) -> float:
    """The angle [rad] between a ``geometry_msgs/Pose``'s z axis and its frame's (0 for NaN,
    which :func:`pose_to_planar` refuses on its own); MessageError on the zero quaternion,
    which is no rotation."""
    q = pose.orientation
    norm2 = float(q.x) ** 2 + float(q.y) ** 2 + float(q.z) ** 2 + float(q.w) ** 2
    if norm2 < 1e-12:
        raise MessageError('the pose orientation is the zero quaternion: not a rotation')
    cos_tilt = 1.0 - 2.0 * (float(q.x) ** 2 + float(q.y) ** 2) / norm2  # R_zz
    if not math.isfinite(cos_tilt):
        return 0.0
    return math.acos(max(-1.0, min(1.0, cos_tilt)))


def pose_to_planar(pose: Any) -> FloatArray:
    """(x, y, yaw) of a ``geometry_msgs/Pose`` (raises MessageError on NaN, on the zero
    quaternion, which is no rotation, and on a pose tilted more than ``MAX_TILT``: its
    yaw alone would plan for a tipped object as if it lay flat)."""
    q = pose.orientation
    tilt = pose_tilt(pose)
    if tilt > MAX_TILT:
        raise MessageError(
            f"the pose is tilted {math.degrees(tilt):.1f} degrees from its frame's plane (at most "
            f'{math.degrees(MAX_TILT):.0f}): the planar model needs the object lying flat '
            'on the table; check that the pose is in the table frame, or whether the '
            'object has tipped over'
        )
    X = np.array(
        [
            float(pose.position.x),
            float(pose.position.y),
            yaw_of_quaternion(float(q.x), float(q.y), float(q.z), float(q.w)),
        ]
    )
    if not np.all(np.isfinite(X)):
        raise MessageError(f'the pose holds NaN or infinite values: {X.tolist()}')
    return X


def set_planar_pose(pose: Any, X: FloatArray, z: float = 0.0) -> Any:
    """Write a planar pose (x, y, yaw) into a ``geometry_msgs/Pose`` at height ``z``."""
    pose.position.x, pose.position.y, pose.position.z = float(X[0]), float(X[1]), float(z)
    q = quaternion_of_yaw(float(X[2]))
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = q
    return pose


# -- the object grid --------------------------------------------------------------------------
def grid_from_msg(msg: Any) -> tuple[Grid, FloatArray]:
    """The core grid and the pose X_WO (3,) of a ``slide_interfaces/ObjectGrid``."""
    rows, cols = int(msg.rows), int(msg.cols)
    occupancy = np.asarray(msg.occupancy, dtype=np.uint8)
    heights = np.asarray(msg.heights, dtype=float)
    if rows * cols == 0 or occupancy.size != rows * cols or heights.size != rows * cols:
        raise MessageError(
            f'the object grid is {rows} x {cols} but has {occupancy.size} occupancy and '
            f'{heights.size} height values'
        )
    # Bags recorded before the field existed decode without it: whole cells.
    coverage = np.asarray(getattr(msg, 'coverage', ()), dtype=float)
    if coverage.size not in (0, rows * cols):
        raise MessageError(
            f'the object grid is {rows} x {cols} but has {coverage.size} coverage values '
            '(none, or one per cell)'
        )
    outline = np.asarray(getattr(msg, 'outline', ()), dtype=float)  # absent before it was
    if outline.size % 2 or 0 < outline.size < 6:
        raise MessageError(
            f'the object grid has {outline.size} outline values: none, or x, y pairs of '
            'at least 3 vertices'
        )
    try:
        # What an object on the table can be, as a belief file's grid is held to: a belief
        # of 0.5 m cells (a 4.5 m box) kept the planner's goal search busy past a minute.
        check_object_cells(float(msg.cell_size), rows, cols)
        grid = Grid(
            float(msg.cell_size),
            occupancy.reshape(rows, cols) > 0,
            heights.reshape(rows, cols),
            coverage.reshape(rows, cols) if coverage.size else None,
            outline.reshape(-1, 2) if outline.size else None,
        )
    except GridError as exc:
        raise MessageError(f'the object grid is not a grid: {exc}') from None
    return grid, pose_to_planar(msg.pose)


def coverage_values(grid: Grid) -> NDArray[np.float32]:
    """``ObjectGrid.coverage`` of a grid: rows * cols covered shares, row-major (0 where
    empty), or none when every occupied cell is whole."""
    if grid.whole:
        return np.zeros(0, dtype=np.float32)
    return grid.to_map(grid.area, fill=0.0).astype(np.float32).ravel()


def outline_values(grid: Grid) -> FloatArray:
    """``ObjectGrid.outline`` of a grid: its outline's x, y pairs [m], object frame, or none
    when the cells' squares are its outline."""
    if grid.outline is None:
        return np.zeros(0)
    return np.asarray(grid.outline, dtype=float).ravel()


def grid_to_msg(grid: Grid, X_WO: FloatArray, msg: Any) -> Any:
    """Fill a ``slide_interfaces/ObjectGrid`` (header set by the caller)."""
    msg.cell_size = float(grid.cell_size)
    msg.rows, msg.cols = (int(v) for v in grid.shape)
    msg.occupancy = grid.occupancy.astype(np.uint8).ravel().tolist()
    msg.heights = grid.heights.astype(np.float32).ravel().tolist()
    msg.coverage = coverage_values(grid).tolist()
    msg.outline = outline_values(grid).tolist()
    set_planar_pose(msg.pose, X_WO)
    return msg


# -- beliefs ---------------------------------------------------------------------------------
def belief_from_msg(msg: Any) -> Belief:
    """The belief of a ``slide_interfaces/ModelBelief`` (its grid included)."""
    grid, _ = grid_from_msg(msg.grid)
    if not msg.models:
        raise MessageError('the belief has no models')
    maps = [maps_from_msg(grid, m) for m in msg.models]
    mass = np.stack([m for m, _ in maps])
    friction = np.stack([f for _, f in maps])
    loss = np.array([float(m.loss) for m in msg.models])
    weight = np.asarray(msg.probabilities, dtype=float)
    if weight.size == len(msg.models) and not abs(float(weight.sum()) - 1.0) <= 1e-6:
        # (as the message says they do; [5, 5] or [0, 0, 1e-320] were made into
        # probabilities without a word)
        raise MessageError(f"the belief's probabilities sum to {float(weight.sum()):.6g}, not 1")
    try:
        return Belief.create(
            grid,
            mass,
            friction,
            list(msg.probabilities),
            loss,
            str(msg.method),
            str(msg.support) or DEFAULT_SUPPORT,
            bool(msg.push_moment),
        )
    except BeliefError as exc:
        raise MessageError(f'the belief is not valid: {exc}') from None


def belief_to_msg(
    belief: Belief, X_WO: FloatArray, msg: Any, new_model: Callable[[], Any], temperature: float
) -> Any:
    """Fill a ``slide_interfaces/ModelBelief`` (header set by the caller); ``new_model``
    makes a ``MassFrictionModel``; ``temperature`` is identification's (relative)."""
    g = belief.grid
    grid_to_msg(g, X_WO, msg.grid)
    models = []
    for k in range(belief.K):
        m = new_model()
        m.mass = g.to_map(belief.mass[k], fill=0.0).ravel().tolist()
        m.friction = g.to_map(belief.friction[k], fill=0.0).ravel().tolist()
        m.loss = float(belief.loss[k])
        models.append(m)
    msg.models = models
    msg.probabilities = [float(w) for w in belief.weight]
    msg.temperature = float(temperature)
    msg.method = belief.method
    msg.support = belief.support
    msg.push_moment = belief.push_moment
    return msg


def maps_from_msg(grid: Grid, model: Any) -> tuple[FloatArray, FloatArray]:
    """Per-cell (mass, friction) (n,) of a ``MassFrictionModel`` on ``grid``."""
    try:
        mass = grid.from_map(np.reshape(np.asarray(model.mass, float), grid.shape), 'mass')
        friction = grid.from_map(
            np.reshape(np.asarray(model.friction, float), grid.shape), 'friction'
        )
    except (ValueError, GridError) as exc:
        raise MessageError(f"the belief's maps do not fit its grid: {exc}") from None
    return mass, friction


# -- pushes -------------------------------------------------------------------------------
def primitive_to_msg(primitive: Primitive, fingertip: Fingertip, msg: Any) -> Any:
    """Fill a ``slide_interfaces/PushPrimitive``."""
    msg.contact.x, msg.contact.y, msg.contact.z = (
        float(primitive.p_OA[0]),
        float(primitive.p_OA[1]),
        0.0,
    )
    msg.direction.x, msg.direction.y = float(primitive.d_O[0]), float(primitive.d_O[1])
    msg.direction.z = 0.0
    msg.travel, msg.speed = float(primitive.travel), float(primitive.speed)
    msg.fingertip_radius, msg.height = float(fingertip.radius), float(fingertip.height)
    return msg


def primitive_from_msg(msg: Any) -> Primitive:
    """The primitive of a ``slide_interfaces/PushPrimitive`` (MessageError when it cannot be
    executed)."""
    try:
        return Primitive.create(
            [msg.contact.x, msg.contact.y],
            [msg.direction.x, msg.direction.y],
            float(msg.travel),
            float(msg.speed),
        )
    except PrimitiveError as exc:
        raise MessageError(f'the push primitive: {exc}') from None


def marker_to_msg(index: int, seconds: float, msg: Any) -> Any:
    """Fill a ``slide_interfaces/PushMarker``: push ``index`` (>= 0) at ``seconds``."""
    if index < 0:
        raise MessageError(f'a push index must not be negative, got {index}')
    msg.index = int(index)
    msg.header.frame_id = ''
    set_stamp(msg.header.stamp, seconds)
    return msg


def marker_from_msg(msg: Any) -> tuple[int, float | None]:
    """(push index, stamp [s]) of a push marker: a ``slide_interfaces/PushMarker``, or the
    ``std_msgs/UInt32`` of recordings made before the markers were stamped. None for a
    marker without a time of its own (UInt32, or a zero stamp: its publisher did not set
    it): the caller knows only when it was received."""
    if not hasattr(msg, 'header'):
        return int(msg.data), None
    t = stamp_to_s(msg.header.stamp)
    return int(msg.index), (t if t > 0.0 else None)


def record_to_msg(
    samples: PushSamples,
    msg: Any,
    new_pose: Callable[[], Any],
    new_wrench: Callable[[], Any],
    frame: str,
) -> Any:
    """Fill a ``slide_interfaces/PushRecord``'s series and times (header, index and
    primitive set by the caller); every pose and wrench in ``frame`` (the table's)."""
    set_stamp(msg.start, samples.t_start)
    set_stamp(msg.end, samples.t_end)

    def poses(t: FloatArray, xy: FloatArray, yaw: FloatArray | None) -> list[Any]:
        out = []
        for k in range(len(t)):
            m = new_pose()
            m.header.frame_id = frame
            set_stamp(m.header.stamp, float(t[k]))
            set_planar_pose(m.pose, np.array([xy[k, 0], xy[k, 1], 0.0 if yaw is None else yaw[k]]))
            out.append(m)
        return out

    msg.object_poses = poses(samples.t_X, samples.X_WO[:, :2], samples.X_WO[:, 2])
    msg.pusher_poses = poses(samples.t_F, samples.p_WF, None)
    wrenches = []
    for k in range(len(samples.t_f)):
        w = new_wrench()
        w.header.frame_id = frame
        set_stamp(w.header.stamp, float(samples.t_f[k]))
        w.wrench.force.x, w.wrench.force.y = float(samples.f_W[k, 0]), float(samples.f_W[k, 1])
        wrenches.append(w)
    msg.wrenches = wrenches
    return msg


def record_from_msg(msg: Any, frame: str) -> PushSamples:
    """The samples of a ``slide_interfaces/PushRecord`` (MessageError when a series is in
    another frame than ``frame``, empty, or not finite)."""
    for name in ('object_poses', 'pusher_poses', 'wrenches'):
        series = getattr(msg, name)
        if not series:
            raise MessageError(f'the push record has no {name}')
        frames = {m.header.frame_id for m in series}
        if frames - {frame, ''}:
            raise MessageError(f"the push record's {name} are in {sorted(frames)}, not {frame}")
    X = np.empty((len(msg.object_poses), 4))
    for k, m in enumerate(msg.object_poses):
        try:
            X[k] = [stamp_to_s(m.header.stamp), *pose_to_planar(m.pose)]
        except MessageError as exc:  # (it did not say which sample)
            raise MessageError(f'object_poses[{k}]: {exc}') from None
    F = np.array(
        [
            [stamp_to_s(m.header.stamp), m.pose.position.x, m.pose.position.y]
            for m in msg.pusher_poses
        ]
    )
    f = np.array(
        [[stamp_to_s(m.header.stamp), m.wrench.force.x, m.wrench.force.y] for m in msg.wrenches]
    )
    for name, rows in (('object_poses', X), ('pusher_poses', F), ('wrenches', f)):
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
        if len(bad):
            raise MessageError(
                f'{name}[{bad[0]}] holds NaN or infinite values ({len(bad)} of its '
                f'{len(rows)} samples do)'
            )
    return PushSamples(
        X[:, 0],
        X[:, 1:],
        F[:, 0],
        F[:, 1:],
        f[:, 0],
        f[:, 1:],
        stamp_to_s(msg.start),
        stamp_to_s(msg.end),
    )


# -- point clouds ---------------------------------------------------------------------------
# sensor_msgs/PointField datatypes
_DTYPES = {1: 'i1', 2: 'u1', 3: 'i2', 4: 'u2', 5: 'i4', 6: 'u4', 7: 'f4', 8: 'f8'}
FLOAT32 = 7


def cloud_to_xyz(msg: Any) -> FloatArray:
    """(N, 3) float64 x, y, z of a ``sensor_msgs/PointCloud2`` (organised or not; NaN
    points kept as NaN).

    Raises MessageError, saying what is wrong, when the cloud lacks x, y, z fields, a field
    lies (partly) outside a point, a datatype is unknown, or the buffer is shorter than the
    points it declares."""
    fields = {f.name: f for f in msg.fields}
    if not {'x', 'y', 'z'} <= set(fields):
        raise MessageError(f'the PointCloud2 has fields {sorted(fields)}; x, y and z are needed')
    width, height = int(msg.width), int(msg.height)
    step, row_step = int(msg.point_step), int(msg.row_step)
    if width < 0 or height < 0 or step <= 0 or row_step < width * step:
        raise MessageError(
            f'the PointCloud2 layout is impossible: {width} x {height} points of {step} '
            f'bytes in rows of {row_step} bytes'
        )
    n = width * height
    data = msg.data if isinstance(msg.data, bytes | bytearray | memoryview) else bytes(msg.data)
    if len(data) < row_step * height:
        raise MessageError(
            f'the PointCloud2 declares {n} points of {step} bytes (rows of {row_step}) but '
            f'holds {len(data)} bytes'
        )
    order = '>' if msg.is_bigendian else '<'
    formats, offsets = [], []
    for name in ('x', 'y', 'z'):
        f = fields[name]
        if int(f.datatype) not in _DTYPES:
            raise MessageError(f'PointCloud2 field {name} has unknown datatype {f.datatype}')
        size = np.dtype(_DTYPES[int(f.datatype)]).itemsize
        if int(f.offset) < 0 or int(f.offset) + size > step:
            raise MessageError(
                f'PointCloud2 field {name} at offset {f.offset} ({size} bytes) lies outside '
                f'the {step}-byte point'
            )
        formats.append(order + _DTYPES[int(f.datatype)])
        offsets.append(int(f.offset))
    dtype = np.dtype(
        {'names': ['x', 'y', 'z'], 'formats': formats, 'offsets': offsets, 'itemsize': step}
    )
    if height > 1 and row_step != width * step:
        rows = np.frombuffer(data, np.uint8, count=row_step * height).reshape(height, row_step)
        packed = np.ascontiguousarray(rows[:, : width * step]).tobytes()
        points = np.frombuffer(packed, dtype=dtype, count=n)
    else:
        points = np.frombuffer(data, dtype=dtype, count=n)
    out = np.empty((n, 3))
    out[:, 0], out[:, 1], out[:, 2] = points['x'], points['y'], points['z']
    return out


def xyz_to_cloud(points: FloatArray, msg: Any, new_field: Callable[..., Any]) -> Any:
    """Fill a ``sensor_msgs/PointCloud2`` (header set by the caller) with points (N, 3) as
    float32 x, y, z; ``new_field(name=, offset=, datatype=, count=)`` makes a PointField.

    Raises MessageError unless ``points`` is (N, 3)."""
    a = np.asarray(points)
    if a.ndim != 2 or a.shape[1] != 3:
        raise MessageError(f'points must have shape (N, 3), got {a.shape}')
    p = np.ascontiguousarray(a, dtype=np.float32)
    msg.height = 1
    msg.width = p.shape[0]
    msg.fields = [
        new_field(name=c, offset=4 * i, datatype=FLOAT32, count=1) for i, c in enumerate('xyz')
    ]
    msg.is_bigendian = False
    msg.point_step = 12
    msg.row_step = 12 * p.shape[0]
    msg.is_dense = bool(np.isfinite(p).all())
    msg.data = p.tobytes()
    return msg


def finite(value: float, what: str) -> float:
    """``value`` as a float, or MessageError naming ``what`` when it is NaN or infinite."""
    v = float(value)
    if not math.isfinite(v):
        raise MessageError(f'{what} is {v}')
    return v
