"""The topics of an episode, in one list: what the recorder node records, what
``ros2 bag record`` records on the robot PC (``pregrasp.launch.py record:=PATH``), and
what ``slide replay`` plays back.

Frames are honest: every stamped message names the frame it is expressed in; the bag reader
(:func:`slide_core.io.read_pushes`) turns wrenches into the table frame itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """A topic of the episode: name, message type, whether its publisher latches it, and
    whether its messages carry a header stamp (the push primitive does not: a bag places it
    by when it was sent)."""

    name: str
    type: str
    latched: bool = False
    twin_only: bool = False
    stamped: bool = True


EPISODE_TOPICS: tuple[Topic, ...] = (
    Topic('/object/grid', 'slide_interfaces/msg/ObjectGrid', latched=True),
    Topic('/object/pose', 'geometry_msgs/msg/PoseStamped'),
    Topic('/object/cloud', 'sensor_msgs/msg/PointCloud2'),
    Topic('/camera/camera/depth/color/points', 'sensor_msgs/msg/PointCloud2'),
    Topic('/pusher/pose', 'geometry_msgs/msg/PoseStamped'),
    Topic('/gripper/pose', 'geometry_msgs/msg/PoseStamped'),
    Topic('/ft/wrench', 'geometry_msgs/msg/WrenchStamped'),
    Topic('/netft/wrench', 'geometry_msgs/msg/WrenchStamped'),
    Topic('/push/primitive', 'slide_interfaces/msg/PushPrimitive', stamped=False),
    Topic('/push/start', 'slide_interfaces/msg/PushMarker'),
    Topic('/push/end', 'slide_interfaces/msg/PushMarker'),
    Topic('/belief', 'slide_interfaces/msg/ModelBelief', latched=True),
    Topic('/behaviour/state', 'slide_interfaces/msg/TaskState', latched=True),
    Topic('/ground_truth', 'slide_interfaces/msg/GroundTruth', latched=True, twin_only=True),
)
