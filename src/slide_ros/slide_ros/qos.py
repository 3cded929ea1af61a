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
# A sensor stream whose every sample a reader keeps (the executor's F/T wrenches, the
# push's record): best effort as SENSOR, but 2 s of a 500 Hz stream wait in the reader
# while its callbacks are held up. With SENSOR's depth of 5 (20 ms at 250 Hz), a node
# busy for a quarter second lost the samples sent meanwhile, and the push's record had a
# gap identification refuses (the demo's first push, twice in a row, once).
SENSOR_KEEP = QoSProfile(
    depth=1000,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)
# State that a late joiner needs (grid, belief, goal, task state, ground truth): latched.
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
# Poses and events that a recorder must not lose.
RELIABLE = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
