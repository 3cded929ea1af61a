"""The behaviour's action caller over real DDS: what a failing server returns is never taken
for an answer."""

from __future__ import annotations

import pytest

pytest.importorskip('rclpy')

from rclpy.action import ActionServer  # noqa: E402

from slide_interfaces.action import ChooseExploration  # noqa: E402
from slide_interfaces.msg import ErrorCode  # noqa: E402
from slide_ros.ros_task import Caller  # noqa: E402
from slide_ros.testing import Peer  # noqa: E402

pytestmark = pytest.mark.ros


def test_a_server_that_dies_in_its_callback_is_an_internal_error_not_a_success() -> None:
    server_side, client_side = Peer('dying_server'), Peer('caller')

    def execute(_handle):  # type: ignore[no-untyped-def]
        raise RuntimeError('the solver did not settle')  # rclpy aborts with an empty result

    server = ActionServer(server_side.node, ChooseExploration, '/test/choose', execute)
    try:
        caller = Caller(client_side.node, lambda: False)
        client = caller.client(ChooseExploration, '/test/choose')
        client_side.wait(client.server_is_ready, 30, 'the server')
        result = caller.call(client, 'exploration choice', ChooseExploration.Goal(), 30.0)
        # The empty result's code reads 0 (SUCCESS) and its primitive has no direction.
        assert result.error.code == ErrorCode.INTERNAL
        assert '/test/choose aborted the goal without a result' in result.message
    finally:
        server.destroy()
        client_side.close()
        server_side.close()
