"""Input and output: message conversions (one module, both ways), bags, and plots.

- :mod:`slide_core.io.messages`: every message <-> core conversion, duck-typed so that
  rosbags' and rclpy's messages decode alike.
- :mod:`slide_core.io.bag`: recorded pushes and the ground truth from a rosbag2, with what
  could not be used and why.
- :mod:`slide_core.io.series`: a bag's topics as series (usable or why not, poses and
  wrenches in the table frame, clock jumps), which :mod:`slide_core.io.bag` builds on.
- :mod:`slide_core.io.bagfile`: opening a rosbag2 in whatever state it is (cut short,
  without metadata, disagreeing with its metadata); the type store of bag writers.
- :mod:`slide_core.io.mcap`: a tolerant MCAP reader (every complete record).
- :mod:`slide_core.io.perceive`: object poses from recorded clouds (perception offline).
- :mod:`slide_core.io.plot`: pictures of objects, beliefs, pushes and episodes.
"""

from __future__ import annotations

from slide_core.io.bag import (
    REQUIRED,
    BagPushes,
    GroundTruth,
    Skipped,
    mount_rotation,
    read_ground_truth,
    read_pushes,
)
from slide_core.io.bagfile import (
    Bag,
    BagError,
    TopicInfo,
    flush_chunk,
    interfaces_typestore,
    open_bag,
    wire_layout,
)
from slide_core.io.messages import (
    MessageError,
    belief_from_msg,
    belief_to_msg,
    cloud_to_xyz,
    coverage_values,
    grid_from_msg,
    grid_to_msg,
    maps_from_msg,
    marker_from_msg,
    marker_to_msg,
    ns_to_s,
    outline_values,
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
    'Bag',
    'BagError',
    'BagPushes',
    'GroundTruth',
    'MessageError',
    'Skipped',
    'TopicInfo',
    'belief_from_msg',
    'belief_to_msg',
    'cloud_to_xyz',
    'coverage_values',
    'outline_values',
    'flush_chunk',
    'grid_from_msg',
    'grid_to_msg',
    'interfaces_typestore',
    'maps_from_msg',
    'marker_from_msg',
    'marker_to_msg',
    'mount_rotation',
    'ns_to_s',
    'open_bag',
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
    'wire_layout',
    'xyz_to_cloud',
]
