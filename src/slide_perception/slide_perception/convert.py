"""Message conversion, once, at the node's edge: PointCloud2 <-> (N, 3) arrays and the
core's grid <-> slide_interfaces/ObjectGrid. Works on any object with the messages'
fields, so tests can feed rclpy messages or rosbags ones alike."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from slide_core.bag import read_grid
from slide_core.errors import SlideInputError
from slide_core.geometry import Grid

FloatArray = NDArray[np.float64]

# sensor_msgs/PointField datatypes
_DTYPES = {1: 'i1', 2: 'u1', 3: 'i2', 4: 'u2', 5: 'i4', 6: 'u4', 7: 'f4', 8: 'f8'}
FLOAT32 = 7


def cloud_to_xyz(msg: Any) -> FloatArray:
    """(N, 3) float64 x, y, z of a PointCloud2 (organised or not; NaN points kept as NaN).

    Raises SlideInputError if the cloud has no x, y, z fields or its buffer is short."""
    fields = {f.name: f for f in msg.fields}
    if not {'x', 'y', 'z'} <= set(fields):
        raise SlideInputError(
            f'the PointCloud2 has fields {sorted(fields)}; x, y and z are needed'
        )
    n = int(msg.width) * int(msg.height)
    step = int(msg.point_step)
    data = (
        bytes(msg.data) if not isinstance(msg.data, (bytes, bytearray, memoryview)) else msg.data
    )
    if len(data) < n * step or int(msg.row_step) * int(msg.height) > len(data):
        raise SlideInputError(
            f'the PointCloud2 declares {n} points of {step} bytes but holds {len(data)} bytes'
        )
    order = '>' if msg.is_bigendian else '<'
    names, formats, offsets = [], [], []
    for name in ('x', 'y', 'z'):
        f = fields[name]
        if f.datatype not in _DTYPES:
            raise SlideInputError(f'PointCloud2 field {name} has unknown datatype {f.datatype}')
        names.append(name)
        formats.append(order + _DTYPES[f.datatype])
        offsets.append(int(f.offset))
    dtype = np.dtype({'names': names, 'formats': formats, 'offsets': offsets, 'itemsize': step})
    if int(msg.height) > 1 and int(msg.row_step) != int(msg.width) * step:
        rows = np.frombuffer(data, np.uint8).reshape(int(msg.height), int(msg.row_step))
        packed = np.ascontiguousarray(rows[:, : int(msg.width) * step]).tobytes()
        points = np.frombuffer(packed, dtype=dtype, count=n)
    else:
        points = np.frombuffer(data, dtype=dtype, count=n)
    out = np.empty((n, 3))
    out[:, 0], out[:, 1], out[:, 2] = points['x'], points['y'], points['z']
    return out


def xyz_to_cloud(points: FloatArray, msg: Any, field_type: type) -> Any:
    """Fill a PointCloud2 ``msg`` (header set by the caller) with points (N, 3) as float32
    x, y, z; ``field_type`` is sensor_msgs.msg.PointField."""
    p = np.ascontiguousarray(np.asarray(points, dtype=np.float32).reshape(-1, 3))
    msg.height = 1
    msg.width = p.shape[0]
    msg.fields = [
        field_type(name=n, offset=4 * i, datatype=FLOAT32, count=1) for i, n in enumerate('xyz')
    ]
    msg.is_bigendian = False
    msg.point_step = 12
    msg.row_step = 12 * p.shape[0]
    msg.is_dense = bool(np.isfinite(p).all())
    msg.data = p.tobytes()
    return msg


def grid_to_msg(grid: Grid, X_WO: FloatArray, msg: Any) -> Any:
    """Fill a slide_interfaces/ObjectGrid ``msg`` (header set by the caller)."""
    msg.cell_size = float(grid.cell_size)
    msg.rows, msg.cols = (int(v) for v in grid.occupancy.shape)
    msg.occupancy = grid.occupancy.astype(np.uint8).ravel().tolist()
    msg.heights = grid.heights.astype(np.float32).ravel().tolist()
    set_pose(msg.pose, X_WO)
    return msg


def msg_to_grid(msg: Any) -> tuple[Grid, FloatArray]:
    """The core grid and the planar pose X_WO (3,) of an ObjectGrid message."""
    return read_grid(msg), pose_to_planar(msg.pose)


def set_pose(pose: Any, X: FloatArray) -> None:
    """Write a planar pose (x, y, yaw) into a geometry_msgs/Pose (z = 0)."""
    pose.position.x, pose.position.y, pose.position.z = float(X[0]), float(X[1]), 0.0
    pose.orientation.x = pose.orientation.y = 0.0
    pose.orientation.z = math.sin(float(X[2]) / 2)
    pose.orientation.w = math.cos(float(X[2]) / 2)


def pose_to_planar(pose: Any) -> FloatArray:
    """(x, y, yaw) of a geometry_msgs/Pose whose rotation is about z."""
    q = pose.orientation
    yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
    return np.array([pose.position.x, pose.position.y, yaw])
