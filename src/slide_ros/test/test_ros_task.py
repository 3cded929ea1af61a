"""The behaviour's action caller over real DDS: what a failing server returns is never taken
for an answer."""

from __future__ import annotations

import pytest

pytest.importorskip('rclpy')

from rclpy.action import ActionServer  # noqa: E402

from slide_interfaces.action import ChooseExploration  # noqa: E402
from slide_interfaces.msg import ErrorCode  # noqa: E402
from slide_ros.ros_task import Caller  # noqa: E402
from slide_ros.testing import LosesFirstAnswers, Peer  # noqa: E402

pytestmark = pytest.mark.ros


def test_a_server_that_dies_in_its_callback_is_an_internal_error_not_a_success() -> None:
    server_side, client_side = Peer('dying_server'), Peer('caller')

    def execute(_handle):  # type: ignore[no-untyped-def]
        raise RuntimeError('the solver did not settle')  # rclpy aborts with an empty result

    server = ActionServer(server_side.node, ChooseExploration, '/test/choose', execute)
    try:
        caller = Caller(client_side.node, lambda: False)
        client = caller.client(ChooseExploration, '/test/choose', ChooseExploration.Goal)
        client_side.wait(client.server_is_ready, 30, 'the server')
        result = caller.call(client, 'exploration choice', ChooseExploration.Goal(), 30.0)
        # The empty result's code reads 0 (SUCCESS) and its primitive has no direction.
        assert result.error.code == ErrorCode.INTERNAL
        assert '/test/choose aborted the goal without a result' in result.message
    finally:
        server.destroy()
        client_side.close()
        server_side.close()


def test_a_first_goal_to_a_server_that_loses_answers_runs_once_and_is_answered() -> None:
    # A server that had not yet matched the caller's response reader ran the first goal and
    # lost its acceptance: the caller waited 10 s and failed the episode, while the goal
    # (a push, in the graph) went on.
    server_side, client_side = Peer('lossy_server'), Peer('caller')
    ran: list[int] = []

    def execute(handle):  # type: ignore[no-untyped-def]
        result = ChooseExploration.Result()
        ran.append(int(handle.request.attempt))
        if handle.request.attempt == 0:  # the probe: refused as invalid
            handle.abort()
            result.error.code = ErrorCode.INVALID_GOAL
            return result
        handle.succeed()
        result.message = f'attempt {handle.request.attempt}'
        return result

    server = ActionServer(server_side.node, ChooseExploration, '/test/lossy', execute)
    lossy = LosesFirstAnswers(server._handle, 2)
    server._handle = lossy
    try:
        caller = Caller(client_side.node, lambda: False)
        client = caller.client(ChooseExploration, '/test/lossy', ChooseExploration.Goal)
        client_side.wait(client.server_is_ready, 30, 'the server')
        first = caller.call(client, 'exploration choice', ChooseExploration.Goal(attempt=7), 30.0)
        assert first.message == 'attempt 7'
        # The probe took both losses (sent again until answered); the goal ran once.
        assert lossy.lost == 2 and ran == [0, 0, 0, 7]
        second = caller.call(client, 'exploration choice', ChooseExploration.Goal(attempt=8), 30.0)
        assert second.message == 'attempt 8' and ran == [0, 0, 0, 7, 8]  # no probe again
    finally:
        server.destroy()
        client_side.close()
        server_side.close()


def test_an_abort_before_the_goal_is_accepted_still_cancels_the_goal() -> None:
    # Aborted while the goal's acceptance was on its way, the caller gave the goal up at
    # once: the push it had sent ran on, with no one to stop it or keep its record.
    import threading
    import time

    from rclpy.action import CancelResponse, GoalResponse

    from slide_core.task import Aborted

    server_side, client_side = Peer('slow_server'), Peer('caller')
    stop = threading.Event()
    ended: list[str] = []

    def accept(goal):  # type: ignore[no-untyped-def]
        if goal.attempt == 1:
            stop.set()  # the task's abort, before the acceptance is back
            time.sleep(0.3)
        return GoalResponse.ACCEPT

    def execute(handle):  # type: ignore[no-untyped-def]
        if handle.request.attempt == 0:  # the caller's probe: refused at once
            handle.abort()
            return ChooseExploration.Result()
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            if handle.is_cancel_requested:
                handle.canceled()
                ended.append('cancelled')
                return ChooseExploration.Result()
            time.sleep(0.01)
        handle.succeed()
        ended.append('ran on')
        return ChooseExploration.Result()

    server = ActionServer(
        server_side.node,
        ChooseExploration,
        '/test/slow',
        execute,
        goal_callback=accept,
        cancel_callback=lambda _r: CancelResponse.ACCEPT,
    )
    try:
        caller = Caller(client_side.node, stop.is_set)
        client = caller.client(ChooseExploration, '/test/slow', ChooseExploration.Goal)
        client_side.wait(client.server_is_ready, 30, 'the server')
        with pytest.raises(Aborted, match='aborted during push'):
            caller.call(client, 'push', ChooseExploration.Goal(attempt=1), 30.0)
        client_side.wait(lambda: bool(ended), 10, 'the goal to end')
        assert ended == ['cancelled']
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
        def refusal(self, _grid: object) -> None:
            return None  # the object fits the gripper

        def exploration(self, *_args: object) -> object:
            return RosDecider._ok(answer(ErrorCode.NOT_READY, 'not active'), 'exploration choice')

    result = Task(Camera(), Planner(), TaskSettings()).run()  # type: ignore[arg-type]
    assert result.outcome is Outcome.ERROR and result.stage.value == 'explore'
    assert result.reason == 'exploration choice: not active (code 3)'


@pytest.mark.parametrize('answer', ['rejects the cancel', 'honours it', 'stops after its work'])
def test_an_abort_keeps_a_goal_that_succeeded_before_its_cancel_reached_it(answer: str) -> None:
    # A push that completed while its cancel was on the way was thrown away (Aborted),
    # though it had been made: it was missing from the episode's pushes. So was one the
    # cancel stopped after its stroke, with its record (the server's 'made' result).
    import threading
    import time

    from rclpy.action import CancelResponse

    from slide_core.task import Aborted

    server_side, client_side = Peer('busy_server'), Peer('caller')
    stop = threading.Event()
    PROBE = 99  # noqa: N806

    def execute(handle):  # type: ignore[no-untyped-def]
        if handle.request.attempt == PROBE:  # the caller's probe: refused at once
            handle.abort()
            return ChooseExploration.Result()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            if handle.is_cancel_requested:
                handle.canceled()
                result = ChooseExploration.Result()
                result.message = 'made' if answer == 'stops after its work' else ''
                return result
            time.sleep(0.01)
        handle.succeed()
        result = ChooseExploration.Result()
        result.message = 'made'
        return result

    def cancel(_request):  # type: ignore[no-untyped-def]
        return CancelResponse.REJECT if answer == 'rejects the cancel' else CancelResponse.ACCEPT

    server = ActionServer(
        server_side.node, ChooseExploration, '/test/busy', execute, cancel_callback=cancel
    )
    try:
        caller = Caller(client_side.node, stop.is_set)
        client = caller.client(
            ChooseExploration, '/test/busy', lambda: ChooseExploration.Goal(attempt=PROBE)
        )
        client_side.wait(client.server_is_ready, 30, 'the server')
        threading.Timer(0.3, stop.set).start()
        goal = ChooseExploration.Goal()
        if answer == 'honours it':
            with pytest.raises(Aborted, match='aborted during push'):
                caller.call(client, 'push', goal, 30.0, made=lambda r: r.message == 'made')
        else:
            result = caller.call(client, 'push', goal, 30.0, made=lambda r: r.message == 'made')
            assert result.message == 'made'
    finally:
        server.destroy()
        client_side.close()
        server_side.close()


def test_a_perception_that_sends_no_pose_is_told_from_one_that_falls_behind() -> None:
    # Perception silent for 27 s read 'falling behind: its latest pose is 27.5 s old'.
    from pathlib import Path
    import threading
    import time

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
        # Then nothing comes at all. (Its last pose, delivered late on a loaded machine, came
        # within the 0.5 s wait and was judged by its stamp: let it land first.)
        time.sleep(0.3)
        with pytest.raises(ObjectLost) as lost:
            world.observe()
        assert str(lost.value).startswith(
            'no object pose from perception for 0.5 s: it is not tracking the object'
        )
    finally:
        stop.set()
        behaviour.close()
        perception.close()


def test_a_push_an_abort_stopped_after_its_stroke_is_kept_with_its_index() -> None:
    # The executor's record of a push a cancel stopped after its stroke was lost: the
    # episode's pushes missed it, and its index went to the next push, which shadowed it in
    # the bag (the bag reads the last push of an index).
    from pathlib import Path
    import threading
    import time

    from geometry_msgs.msg import PoseStamped, WrenchStamped
    import numpy as np
    from rclpy.action import CancelResponse

    from slide_core.geometry import Grid
    from slide_core.identification import PushSamples
    from slide_core.io import grid_to_msg, pose_to_planar, record_to_msg, set_planar_pose
    from slide_core.model import Primitive, load_workcell
    from slide_core.task import PushFailed
    from slide_interfaces.action import Push
    from slide_interfaces.msg import ObjectGrid
    from slide_ros.qos import LATCHED, RELIABLE
    from slide_ros.ros_task import RosWorld

    cell = load_workcell(Path(__file__).resolve().parents[3] / 'config' / 'workcell.yaml')
    frame = cell.table.frame_id
    stand_in, behaviour = Peer('executor_stand_in'), Peer('behaviour_stand_in')
    aborting, stop = threading.Event(), threading.Event()
    indices: list[int] = []
    placed: list[np.ndarray] = []

    def execute(handle):  # type: ignore[no-untyped-def]
        result = Push.Result()
        if handle.request.primitive.travel == 0:  # the caller's probe: refused at once,
            result.error.code = ErrorCode.INVALID_GOAL  # as the executor refuses it
            handle.abort()
            return result
        indices.append(int(handle.request.index))
        placed.append(pose_to_planar(handle.request.object_pose.pose))
        if indices == [0, 1]:
            aborting.set()  # the task's abort, mid-push (a timer once came before the goal)
        end = time.monotonic() + 5.0
        while indices != [0] and time.monotonic() < end and not handle.is_cancel_requested:
            time.sleep(0.01)
        t = np.linspace(0.0, 1.0, 5)
        xy = np.column_stack((0.4 + 0.01 * t, 0.0 * t))
        samples = PushSamples(
            t, np.column_stack((xy, 0.0 * t)), t, xy - [0.05, 0.0], t, 0.0 * xy + 1.0, 0.2, 0.8
        )
        record_to_msg(samples, result.record, PoseStamped, WrenchStamped, frame)
        if indices == [0]:  # the retract failed: MOTION_FAILED, after the stroke, recorded
            result.error.code = ErrorCode.MOTION_FAILED
            result.message = 'the arm stopped after the stroke; the push is recorded'
            handle.abort()
        else:  # stopped by the cancel after its stroke, recorded
            result.error.code = ErrorCode.CANCELED
            result.message = (
                'cancelled: stopped and retracted after the stroke; the push is recorded'
            )
            handle.canceled()
        return result

    server = ActionServer(
        stand_in.node,
        Push,
        '/executor/push',
        execute,
        cancel_callback=lambda _r: CancelResponse.ACCEPT,
    )
    try:
        grids = stand_in.node.create_publisher(ObjectGrid, '/object/grid', LATCHED)
        poses = stand_in.node.create_publisher(PoseStamped, '/object/pose', RELIABLE)
        grid_msg = grid_to_msg(
            Grid.from_occupancy(np.ones((2, 4)), 0.02, 0.03), np.zeros(3), ObjectGrid()
        )
        grid_msg.header.frame_id = frame
        grids.publish(grid_msg)

        def perceive() -> None:
            while not stop.wait(0.05):
                msg = PoseStamped()
                msg.header.frame_id = frame
                msg.header.stamp = stand_in.node.get_clock().now().to_msg()
                set_planar_pose(msg.pose, np.array([0.4, 0.0, 0.0]))
                poses.publish(msg)

        threading.Thread(target=perceive, daemon=True).start()
        world = RosWorld(behaviour.node, Caller(behaviour.node, aborting.is_set), cell, 2.0)
        primitive = Primitive.create([-0.04, 0.0], [1.0, 0.0], 0.02, 0.05)
        behaviour.wait(world.push_client.server_is_ready, 30, 'the executor stand-in')
        # Failed after its stroke: a failed push to make again, but a made one, kept.
        with pytest.raises(PushFailed, match='after the stroke') as failed:
            world.push(primitive, np.array([0.4, 0.0, 0.0]))
        assert failed.value.retryable and len(world.records) == 1
        # Cancelled by the task's own abort: the push is the world's answer. It is placed at
        # the task's pose (here 3 mm from perception's: a contact offset the task took off),
        # not at perception's.
        samples = world.push(primitive, np.array([0.403, -0.001, 0.0]))
        assert samples.X_WO[-1, 0] == pytest.approx(0.41)
        assert indices == [0, 1] and len(world.records) == 2
        np.testing.assert_allclose(placed[0], [0.4, 0.0, 0.0], atol=1e-9)
        np.testing.assert_allclose(placed[1], [0.403, -0.001, 0.0], atol=1e-9)
    finally:
        stop.set()
        server.destroy()
        behaviour.close()
        stand_in.close()
