"""Workspace-wide pytest setup: keep DDS traffic of the tests on this machine and apart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests talk over real DDS; keep discovery on loopback and away from other ROS graphs
# running on the same machine (a domain of its own per test session).
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 100))


@pytest.fixture(scope='session')
def workcell():
    """The repository's workcell (config/workcell.yaml), as every component reads it."""
    from slide_core.model import load_workcell

    return load_workcell(Path(__file__).parent / 'config' / 'workcell.yaml')
