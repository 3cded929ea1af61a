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


def test_a_planner_that_cannot_answer_ends_the_task_as_an_error_not_as_a_decision() -> None:
    # A planner not active was a failed push ('exploration choice: not active (code 3)'),
    # and a goal selection cancelled elsewhere an 'internal error: NoSolutionError'.
    from types import SimpleNamespace

    import numpy as np

    from slide_core.geometry import Grid
    from slide_core.planning import PlanningError, UncertainBeliefError
    from slide_core.task import Observation, Outcome, Task, TaskSettings, WorldError
    from slide_ros.ros_task import RosDecider

    def answer(code: int, message: str) -> SimpleNamespace:
        return SimpleNamespace(error=SimpleNamespace(code=code), message=message)

    with pytest.raises(UncertainBeliefError):
        RosDecider._ok(answer(ErrorCode.UNCERTAIN, 'explore more'), 'goal selection')
    with pytest.raises(PlanningError, match='goal selection: no goal'):
        RosDecider._ok(answer(ErrorCode.NO_SOLUTION, 'no goal'), 'goal selection')
    for code in (ErrorCode.CANCELED, ErrorCode.NOT_READY, ErrorCode.TIMEOUT, ErrorCode.INTERNAL):
        with pytest.raises(WorldError) as error:
            RosDecider._ok(answer(code, 'not active'), 'exploration choice')
        assert not isinstance(error.value, PlanningError) and not error.value.retryable
        assert str(error.value) == f'exploration choice: not active (code {code})'
    grid = Grid.from_occupancy(np.ones((2, 4)), 0.02, 0.03)

    class Camera:
        def observe(self) -> Observation:
            return Observation(grid, np.array([0.4, 0.0, 0.0]), 0.0)

    class Planner:
        def exploration(self, *_args: object) -> object:
            return RosDecider._ok(answer(ErrorCode.NOT_READY, 'not active'), 'exploration choice')

    result = Task(Camera(), Planner(), TaskSettings()).run()  # type: ignore[arg-type]
    assert result.outcome is Outcome.ERROR and result.stage.value == 'explore'
    assert result.reason == 'exploration choice: not active (code 3)'


@pytest.mark.parametrize('honours_cancel', [False, True])
def test_an_abort_keeps_a_goal_that_succeeded_before_its_cancel_reached_it(
    honours_cancel: bool,
) -> None:
    # A push that completed while its cancel was on the way was thrown away (Aborted),
    # though it had been made: it was missing from the episode's pushes.
    import threading
    import time

    from rclpy.action import CancelResponse

    from slide_core.task import Aborted

    server_side, client_side = Peer('busy_server'), Peer('caller')
    stop = threading.Event()

    def execute(handle):  # type: ignore[no-untyped-def]
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            if handle.is_cancel_requested:
                handle.canceled()
                return ChooseExploration.Result()
            time.sleep(0.01)
        handle.succeed()
        result = ChooseExploration.Result()
        result.message = 'made'
        return result

    def cancel(_request):  # type: ignore[no-untyped-def]
        return CancelResponse.ACCEPT if honours_cancel else CancelResponse.REJECT

    server = ActionServer(
        server_side.node, ChooseExploration, '/test/busy', execute, cancel_callback=cancel
    )
    try:
        caller = Caller(client_side.node, stop.is_set)
        client = caller.client(ChooseExploration, '/test/busy')
        client_side.wait(client.server_is_ready, 30, 'the server')
        threading.Timer(0.3, stop.set).start()
        if honours_cancel:
            with pytest.raises(Aborted, match='aborted during push'):
                caller.call(client, 'push', ChooseExploration.Goal(), 30.0)
        else:
            result = caller.call(client, 'push', ChooseExploration.Goal(), 30.0)
            assert result.message == 'made'
    finally:
        server.destroy()
        client_side.close()
        server_side.close()


def test_a_perception_that_sends_no_pose_is_told_from_one_that_falls_behind() -> None:
    # Perception silent for 27 s read 'falling behind: its latest pose is 27.5 s old'.
    from pathlib import Path
    import threading

    from geometry_msgs.msg import PoseStamped
    import numpy as np
    from rclpy.time import Duration

    from slide_core.geometry import Grid
    from slide_core.io import grid_to_msg, set_planar_pose
    from slide_core.model import load_workcell
    from slide_core.task import ObjectLost
    from slide_interfaces.msg import ObjectGrid
    from slide_ros.qos import LATCHED, RELIABLE
    from slide_ros.ros_task import RosWorld

    cell = load_workcell(Path(__file__).resolve().parents[3] / 'config' / 'workcell.yaml')
    perception, behaviour = Peer('perception_stand_in'), Peer('behaviour_stand_in')
    stop = threading.Event()
    try:
        grids = perception.node.create_publisher(ObjectGrid, '/object/grid', LATCHED)
        poses = perception.node.create_publisher(PoseStamped, '/object/pose', RELIABLE)
        world = RosWorld(
            behaviour.node, Caller(behaviour.node, lambda: False), cell, 0.5, lambda: 1.0
        )
        grid_msg = grid_to_msg(
            Grid.from_occupancy(np.ones((2, 4)), 0.02, 0.03), np.zeros(3), ObjectGrid()
        )
        grid_msg.header.frame_id = cell.table.frame_id
        grids.publish(grid_msg)

        def pose_2_s_old() -> PoseStamped:
            msg = PoseStamped()
            msg.header.frame_id = cell.table.frame_id
            stamp = perception.node.get_clock().now() - Duration(seconds=2.0)
            msg.header.stamp = stamp.to_msg()
            set_planar_pose(msg.pose, np.array([0.4, 0.0, 0.0]))
            return msg

        def behind() -> None:  # poses keep coming, from frames 2 s old
            while not stop.wait(0.05):
                poses.publish(pose_2_s_old())

        sender = threading.Thread(target=behind, daemon=True)
        sender.start()
        with pytest.raises(ObjectLost, match='perception is falling behind: its latest pose is 2'):
            world.observe()
        stop.set()
        sender.join()
        # Then nothing comes at all.
        with pytest.raises(ObjectLost) as lost:
            world.observe()
        assert str(lost.value).startswith(
            'no object pose from perception for 0.5 s: it is not tracking the object'
        )
    finally:
        stop.set()
        behaviour.close()
        perception.close()
