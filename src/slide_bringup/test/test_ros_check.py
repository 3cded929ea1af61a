"""An rclpy action server and client on slide_interfaces talk over real DDS in one process."""

from __future__ import annotations

import pytest

pytest.importorskip('rclpy')
from slide_bringup.ros_check import action_roundtrip  # noqa: E402


@pytest.mark.ros
def test_push_action_goal_feedback_result_over_dds() -> None:
    rt = action_roundtrip(travel_m=0.07, timeout_s=20.0)
    assert rt.accepted
    assert rt.feedback_received == 3
    assert rt.result_success
    assert rt.result_message == ''
    # The server echoed the goal's travel back through the result record.
    assert rt.travel_echoed_m == pytest.approx(0.07)


@pytest.mark.ros
def test_round_trip_can_run_twice_in_one_process() -> None:
    # Each call owns its rclpy context; a second call must not trip on the first.
    assert action_roundtrip(travel_m=0.01).travel_echoed_m == pytest.approx(0.01)
