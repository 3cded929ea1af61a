"""ROS 2 edge of slide_core.perception."""
