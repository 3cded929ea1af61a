"""QoS profiles of slide's topics, in one place (RViz displays must match them)."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

# Sensor streams (camera clouds, wrenches): best effort, keep the latest.
SENSOR = qos_profile_sensor_data
# State that a late joiner needs (grid, belief, goal, task state, ground truth): latched.
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
# Poses and events that a recorder must not lose.
RELIABLE = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
