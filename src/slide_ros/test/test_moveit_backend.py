"""The moveit_py backend's segment execution stops mid-segment when told, a segment
the controllers did not finish is not taken for done, and its tool poses carry the joint
states' stamps.

MoveIt is not on the development machines (the backend runs on the robot PC): a stand-in
for MoveItPy takes its place, with the calls the backend makes of it: ``execute``
(blocking for the segment), the trajectory execution manager's ``stop_execution``, and the
planning scene monitor's current state (its link transform).
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import math
import sys
import threading
import time
import types
from typing import Any

import numpy as np
import pytest
from transforms3d import quaternions

pytest.importorskip('rclpy')

from slide_ros.lifecycle import NotReady  # noqa: E402
from slide_ros.moveit_backend import MoveItBackend, execution_failure, held, link_pose  # noqa: E402


class Status:
    """moveit_py's ExecutionStatus: true when it succeeded, ``status`` names the outcome."""

    def __init__(self, status: str) -> None:
        self.status = status

    def __bool__(self) -> bool:
        return self.status == 'SUCCEEDED'


class StandInMoveIt:
    """A MoveItPy whose segments last ``segment_s`` unless stopped, and end with
    ``outcome``."""

    def __init__(self, segment_s: float, fail: bool = False, outcome: str = 'SUCCEEDED') -> None:
        self.segment_s, self.fail, self.outcome = segment_s, fail, outcome
        self.stopped = threading.Event()

    def execute(self, trajectory: object, controllers: list[str]) -> Status:
        if self.fail:
            raise RuntimeError('controller failed')
        self.stopped.wait(self.segment_s)
        return Status(self.outcome)

    def get_trajectory_execution_manager(self) -> StandInMoveIt:  # moveit_py 2.11 and later
        return self

    def stop_execution(self) -> None:
        self.stopped.set()


class OlderMoveIt(StandInMoveIt):
    """moveit_py before 2.11: the manager under its misspelt name, execute returns None."""

    get_trajectory_execution_manager = None  # type: ignore[assignment]

    def get_trajactory_execution_manager(self) -> StandInMoveIt:  # sic
        return self

    def execute(self, trajectory: object, controllers: list[str]) -> None:  # type: ignore[override]
        super().execute(trajectory, controllers)


def backend(moveit: StandInMoveIt) -> MoveItBackend:
    b = MoveItBackend.__new__(MoveItBackend)  # its constructor connects to MoveIt
    b.moveit = moveit
    return b


@pytest.mark.parametrize('kind', [StandInMoveIt, OlderMoveIt])
def test_a_stop_mid_segment_halts_the_controllers_there(kind: type[StandInMoveIt]) -> None:
    # moveit.execute blocked for the whole segment: a cancel or the F/T limit mid-stroke
    # waited for its end (here 30 s). The manager's name was the misspelt one only, which
    # moveit_py 2.11 renamed: the stop raised AttributeError and the arm went on.
    moveit = kind(segment_s=30.0)
    t0 = time.monotonic()
    assert backend(moveit)._execute(object(), lambda: time.monotonic() - t0 > 0.2) is None
    assert moveit.stopped.is_set() and time.monotonic() - t0 < 2.0


def test_a_segment_runs_to_its_end_and_a_failure_is_raised() -> None:
    for kind in (StandInMoveIt, OlderMoveIt):
        moveit = kind(segment_s=0.1)
        assert backend(moveit)._execute(object(), lambda: False) == ''
        assert not moveit.stopped.is_set()
    with pytest.raises(RuntimeError, match='controller failed'):
        backend(StandInMoveIt(0.0, fail=True))._execute(object(), lambda: False)


def test_a_segment_the_controllers_aborted_is_not_taken_for_done() -> None:
    # execute's ExecutionStatus was ignored: a reflex or a path tolerance that aborted the
    # stroke was a completed push.
    moveit = StandInMoveIt(segment_s=0.0, outcome='ABORTED')
    assert backend(moveit)._execute(object(), lambda: False) == 'ABORTED'
    assert execution_failure(Status('TIMED_OUT')) == 'TIMED_OUT'
    assert execution_failure(Status('SUCCEEDED')) == execution_failure(None) == ''
    assert execution_failure(True) == ''
    assert execution_failure(False) == 'the controllers did not finish it'


@pytest.mark.parametrize('yaw', [0.0, 0.7, -2.0, math.pi, -math.pi, 3.0 * math.pi])
def test_the_link_pose_points_the_tool_down_at_every_yaw(yaw: float) -> None:
    # At a yaw of pi the hand-written quaternion divided by zero: (0, inf, nan, 0).
    p_WT = np.array([0.3, -0.1, 0.05])
    p_LT_L = np.array([0.0, 0.0, 0.1])
    p_WL, (x, y, z, w) = link_pose(p_WT, yaw, p_LT_L)
    R = quaternions.quat2mat([w, x, y, z])
    assert np.isfinite([x, y, z, w]).all() and math.isclose(x * x + y * y + z * z + w * w, 1.0)
    np.testing.assert_allclose(R[:, 2], [0.0, 0.0, -1.0], atol=1e-12)  # the tool points down
    np.testing.assert_allclose(R[:, 0], [math.cos(yaw), math.sin(yaw), 0.0], atol=1e-12)
    np.testing.assert_allclose(p_WL + R @ p_LT_L, p_WT, atol=1e-12)


def test_each_gripper_says_held_in_its_own_field() -> None:
    # franka_gripper grasps: reached_goal is the grasp's success and stalled is never set,
    # so 'stalled and not reached_goal' read every Franka grasp as empty.
    class Result:
        def __init__(self, stalled: bool, reached_goal: bool) -> None:
            self.stalled, self.reached_goal = stalled, reached_goal

    assert held(Result(False, True), 'reached_goal')
    assert not held(Result(False, False), 'reached_goal')
    assert held(Result(True, False), 'stalled')
    assert not held(Result(False, True), 'stalled')


def test_the_workcells_obstacles_are_planning_scene_boxes_standing_on_the_table() -> None:
    from slide_core.model import UNKNOWN_HEIGHT, Obstacle
    from slide_ros.moveit_backend import scene_boxes

    known, unknown = scene_boxes(
        (Obstacle((0.3, 0.2), (0.05, 0.1), 0.25), Obstacle((0.5, -0.2), (0.02, 0.03)))
    )
    assert known[0] == 'slide_obstacle_0' and unknown[0] == 'slide_obstacle_1'
    np.testing.assert_allclose(known[1], [0.3, 0.2, 0.125])
    np.testing.assert_allclose(known[2], [0.1, 0.2, 0.25])
    # Of unknown height: a column the arm does not pass over.
    np.testing.assert_allclose(unknown[1], [0.5, -0.2, UNKNOWN_HEIGHT / 2])
    np.testing.assert_allclose(unknown[2], [0.04, 0.06, UNKNOWN_HEIGHT])


class SceneMoveIt(StandInMoveIt):
    """A MoveItPy whose planning scene monitor's current state puts the end-effector link
    at ``p`` (tool pointing down), and whose planning component is never used here."""

    def __init__(self, node_name: str) -> None:
        super().__init__(segment_s=0.0)
        self.p = np.array([0.4, 0.1, 0.3])

    def get_planning_component(self, group: str) -> object:
        return object()

    def get_planning_scene_monitor(self) -> SceneMoveIt:
        return self

    @contextlib.contextmanager
    def read_only(self) -> Iterator[Any]:
        T = np.eye(4)
        T[:3, :3] = np.diag([1.0, -1.0, -1.0])  # the tool's z down
        T[:3, 3] = self.p
        yield types.SimpleNamespace(
            current_state=types.SimpleNamespace(get_global_link_transform=lambda link: T)
        )


def test_tool_poses_carry_the_joint_states_stamp_and_stall_with_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Stamped with the time they were read, a stalled joint state stream's last pose came
    # again and again as new: the executor recorded the fingertip standing still while it
    # pushed. Each pose carries the stamp of the joint states it follows, over real DDS.
    from sensor_msgs.msg import JointState

    from slide_core.io import set_stamp
    from slide_core.model import load_workcell
    from slide_ros.executor_node import PARAMS
    from slide_ros.testing import Peer

    planning = types.ModuleType('moveit.planning')
    planning.MoveItPy = SceneMoveIt  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, 'moveit', types.ModuleType('moveit'))
    monkeypatch.setitem(sys.modules, 'moveit.planning', planning)
    params = {p.name: p.default for p in PARAMS}
    params['joint_states_topic'] = '/moveit_backend_test/joint_states'
    arm, robot = Peer('moveit_backend_test'), Peer('moveit_backend_test_robot')
    try:
        backend = MoveItBackend(arm.node, params, load_workcell(), 'table')
        assert backend.tool_pose('fingertip') is None  # no joint states yet
        with pytest.raises(NotReady, match='no joint states on /moveit_backend_test/joint'):
            backend.connect(0.2)
        sender = robot.node.create_publisher(JointState, params['joint_states_topic'], 10)
        robot.wait(lambda: sender.get_subscription_count() > 0, 30, 'the subscription')
        for stamp in (1000.25, 1000.5):
            msg = JointState()
            set_stamp(msg.header.stamp, stamp)

            def sent_and_seen(s: float = stamp, m: JointState = msg) -> bool:
                sender.publish(m)  # (again until seen: the subscription is best effort)
                return getattr(backend.tool_pose('fingertip'), 'stamp', 0.0) == s

            arm.wait(sent_and_seen, 10, f'the pose of the joint states stamped {stamp}')
        pose = backend.tool_pose('fingertip')
        assert pose is not None
        np.testing.assert_allclose(pose.p_W, SceneMoveIt('').p + backend.offset * [1, -1, -1])
        time.sleep(0.3)  # the stream stalls: so do the poses' stamps
        assert backend.tool_pose('fingertip').stamp == 1000.5  # type: ignore[union-attr]
    finally:
        robot.close()
        arm.close()
