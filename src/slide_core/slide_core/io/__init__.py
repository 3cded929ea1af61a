"""Input and output: message conversions (one module, both ways), bags, and plots.

- :mod:`slide_core.io.messages`: every message <-> core conversion, duck-typed so that
  rosbags' and rclpy's messages decode alike.
- :mod:`slide_core.io.bag`: recorded pushes and the ground truth from a rosbag2.
- :mod:`slide_core.io.plot`: pictures of objects, beliefs, pushes and episodes.
"""

from __future__ import annotations

from slide_core.io.bag import REQUIRED, GroundTruth, read_ground_truth, read_pushes
from slide_core.io.messages import (
    MessageError,
    belief_from_msg,
    belief_to_msg,
    cloud_to_xyz,
    grid_from_msg,
    grid_to_msg,
    maps_from_msg,
    pose_to_planar,
    primitive_from_msg,
    primitive_to_msg,
    record_from_msg,
    record_to_msg,
    set_planar_pose,
    set_stamp,
    stamp_to_s,
    xyz_to_cloud,
)

__all__ = [
    'REQUIRED',
    'GroundTruth',
    'MessageError',
    'belief_from_msg',
    'belief_to_msg',
    'cloud_to_xyz',
    'grid_from_msg',
    'grid_to_msg',
    'maps_from_msg',
    'pose_to_planar',
    'primitive_from_msg',
    'primitive_to_msg',
    'read_ground_truth',
    'read_pushes',
    'record_from_msg',
    'record_to_msg',
    'set_planar_pose',
    'set_stamp',
    'stamp_to_s',
    'xyz_to_cloud',
]
