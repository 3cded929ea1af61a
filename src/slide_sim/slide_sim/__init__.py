"""slide_sim: the MuJoCo digital twin of the slide workcell (no ROS in this package core)."""

from __future__ import annotations

__version__ = '0.1.0'
