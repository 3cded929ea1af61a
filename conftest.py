"""Workspace-wide pytest setup: keep DDS traffic of the tests on this machine and apart."""

from __future__ import annotations

import os

# Tests talk over real DDS; keep discovery on loopback and away from other ROS graphs
# running on the same machine (a domain of its own per test session).
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 100))
