"""ati_netft: ATI Net F/T force/torque sensor driver, sensor emulator and ROS 2 node.

``protocol`` (bytes), ``client`` (sockets), ``emulator`` and ``filters`` import no ROS;
``node`` is the rclpy wrapper.
"""

from __future__ import annotations

__version__ = '0.1.0'
