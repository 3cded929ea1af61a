"""Workspace-wide pytest setup: keep DDS traffic of the tests on this machine and apart."""

from __future__ import annotations

import gc
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


@pytest.fixture(autouse=True)
def free_dds_participants(request: pytest.FixtureRequest):
    """After a test over DDS and its fixtures, the garbage collector frees their DDS
    participants: rclpy destroys a context's participant only when the context is collected,
    not when it is shut down. Left to the collector's own pace, the endpoints of a test's
    nodes stayed in discovery after the test, and a fresh server under a name a test had
    just used went unseen: measured in one process, creating and destroying a server and a
    client 40 times under one action name, 3 fresh servers went unseen for 20 s (12 more
    matched the dead one's endpoints at once); with a collection after each, 0 of 40. The
    backend tests, whose twins shared one namespace, failed so in 5 of 8 runs, and in 1 of 5
    with this collection after each test (a test's own nodes can outlive it a moment): the
    tests that make servers give each a name of its own as well."""
    yield
    if request.node.get_closest_marker('ros') is not None:
        gc.collect()
