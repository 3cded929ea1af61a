"""slide_core: the algorithms of the slide pre-grasp sliding stack, free of ROS.

Everything a slide node does is a function here; nodes only convert messages at their
edge. Nothing in this package imports rclpy or any ROS message package, so it runs and is
tested on any machine with numpy and scipy.
"""

from __future__ import annotations

__version__ = '0.1.0'

__all__ = ['__version__']
