"""An rclpy action server and client on slide_interfaces talk over real DDS in one process."""

from __future__ import annotations

import json

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


def test_a_domain_id_dds_cannot_use_is_said_before_dds_ends_the_process() -> None:
    # Fast DDS ended `slide doctor` on ROS_DOMAIN_ID=300 (exit 1, one coloured line on
    # stdout, no report) and `slide replay` on 'abc' with a traceback.
    import os
    import shutil
    import subprocess

    from slide_bringup.ros_check import domain_problem

    slide = shutil.which('slide')
    assert slide is not None

    assert domain_problem('') == '' and domain_problem('0') == '' and domain_problem('101') == ''
    for bad in ('300', 'abc', '-1', '1.5'):
        assert 'is no ROS domain: give a whole number from 0 to 101' in domain_problem(bad)
    env = {**os.environ, 'ROS_DOMAIN_ID': '300'}
    doctor = subprocess.run(
        [slide, 'doctor', '--json'],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    check = json.loads(doctor.stdout)['checks']['ros_action_roundtrip']
    assert (
        doctor.returncode == 3 and not check['ok'] and "'300' is no ROS domain" in check['detail']
    )
    replay = subprocess.run(
        [slide, 'replay', 'nowhere', '--json'],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (
        replay.returncode == 2 and "'300' is no ROS domain" in json.loads(replay.stdout)['error']
    )
