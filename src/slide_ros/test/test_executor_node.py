"""The executor node over real DDS: a retried configure reuses its backend; a fault of the
arm, a deactivation mid-push and two goals at once leave the arm retracted and answered."""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import itertools
from pathlib import Path
import re
import threading
import time
from typing import Any

import numpy as np
import pytest

pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from geometry_msgs.msg import PoseStamped, WrenchStamped  # noqa: E402
import rclpy  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from slide_core.io import (  # noqa: E402
    grid_to_msg,
    primitive_to_msg,
    set_planar_pose,
    set_stamp,
    stamp_to_s,
)
from slide_core.model import (  # noqa: E402
    APPROACH_CLEARANCE,
    LIFT,
    Obstacle,
    Primitive,
    Workcell,
    load_object,
    load_workcell,
)
from slide_core.planning import PRE_GRASP_HEIGHT  # noqa: E402
from slide_core.task import exploration_push  # noqa: E402
from slide_interfaces.action import Grasp as GraspAction  # noqa: E402
from slide_interfaces.action import Push  # noqa: E402
from slide_interfaces.msg import ErrorCode, ObjectGrid  # noqa: E402
from slide_ros.action_client import SafeActionClient  # noqa: E402
from slide_ros.backends import Motion, ToolPose  # noqa: E402
from slide_ros.executor_node import ExecutorNode  # noqa: E402
from slide_ros.lifecycle import NotReady  # noqa: E402
from slide_ros.ros_task import PROBES  # noqa: E402
from slide_ros.testing import Peer, spinning  # noqa: E402

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[3]


def test_a_retried_configure_connects_the_same_backend_again() -> None:
    context = Context()
    rclpy.init(context=context)
    params = {
        'autostart': False,
        'workcell_file': str(ROOT / 'config' / 'workcell.yaml'),
        'twin_namespace': '/nobody_runs_here',
        'connect_timeout_s': 0.2,
    }
    node = ExecutorNode(
        context=context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
    )
    try:
        with pytest.raises(NotReady, match='/nobody_runs_here/follow_path'):
            node.configure()
        subscriptions = len(list(node.subscriptions))
        waitables = len(list(node.waitables))
        for _ in range(3):
            with pytest.raises(NotReady, match='is the twin running'):
                node.configure()
        assert node.backend is None
        assert len(list(node.subscriptions)) == subscriptions
        assert len(list(node.waitables)) == waitables
    finally:
        node.destroy_node()
        context.try_shutdown()


class StubArm:
    """A stand-in for the robot's arm (MoveIt is not on this machine), as the executor's
    backend protocol sees it: each waypoint takes ``dt`` seconds; ``fault`` (an exception)
    is raised when the waypoint ``fault_at`` begins, as a controller's error comes out of
    moveit_py's execute."""

    def __init__(self, dt: float, fault_at: int | None = None, fault: Exception | None = None):
        self.dt, self.fault_at, self.fault = dt, fault_at, fault
        self.motions: list[tuple[str, list[str], str]] = []  # tool, phases, how it ended
        self.sent: list[list[np.ndarray]] = []  # each motion's set points
        self.p = np.array([0.3, 0.0, 0.15])

    def connect(self, timeout_s: float) -> None:
        pass

    def follow(self, tool, waypoints, on_waypoint, should_stop):  # type: ignore[no-untyped-def]
        phases = [w.phase for w in waypoints]
        self.sent.append([np.asarray(w.p_W, dtype=float) for w in waypoints])
        for i, wp in enumerate(waypoints):
            on_waypoint(i, None)
            if i == self.fault_at and self.fault is not None:
                fault, self.fault = self.fault, None
                self.motions.append((tool, phases, f'fault at {wp.phase}'))
                raise fault
            end = time.monotonic() + self.dt
            while time.monotonic() < end:
                if should_stop():
                    self.motions.append((tool, phases, f'stopped at {wp.phase}'))
                    return Motion(False, True, 'stopped')
                time.sleep(0.005)
            self.p = np.asarray(wp.p_W, dtype=float)
        self.motions.append((tool, phases, 'completed'))
        return Motion(True)

    def gripper(self, width, max_effort, should_stop):  # type: ignore[no-untyped-def]
        return float(width), True

    def tool_pose(self, tool: str) -> ToolPose:
        return ToolPose(self.p.copy(), np.array([0.0, 0.0, 0.0, 1.0]), time.time())


X_BOX = np.array([0.45, 0.0, 0.3])
SERIAL = itertools.count()


@contextlib.contextmanager
def executor_on(
    arm: StubArm,
    tares: list[float] | None = None,
    tare_s: float = 0.0,
    wrench_lag_s: list[float] | None = None,
    workcell_file: Path = ROOT / 'config' / 'workcell.yaml',
) -> Iterator[tuple[ExecutorNode, Peer, Any, Any]]:
    """The executor node, active on ``arm``, fed the box's grid, its pose and a wrench
    stream as perception and the F/T driver would; a peer with its push and grasp
    clients. With ``tares``, the peer serves the driver's bias service too, noting the
    fingertip's height at each tare there, and answering after ``tare_s`` seconds. The
    wrenches are stamped ``wrench_lag_s[0]`` behind the node's clock (read at each one)."""
    lag = wrench_lag_s or [0.0]
    params = {
        'autostart': False,
        'workcell_file': str(workcell_file),
        'tare': tares is not None,
        'measurement_wait_s': 0.3,
    }

    # Each executor under a namespace of its own: the action names of one test's node are
    # never those of another's (CI once saw a fresh grasp server stay unready for 60 s).
    ns = f'/executor_test_{next(SERIAL)}'

    def make(context: Context) -> ExecutorNode:
        node = ExecutorNode(
            context=context,
            namespace=ns,
            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()],
        )
        node._made = arm
        node._on_grid(grid_to_msg(load_object('box').grid, X_BOX, ObjectGrid()))
        return node

    with spinning(make) as node:
        feeding = threading.Event()

        def feed() -> None:
            while not feeding.is_set():
                w = WrenchStamped()
                set_stamp(w.header.stamp, node.get_clock().now().nanoseconds * 1e-9 - lag[0])
                node._on_wrench(w)
                node._on_pose(pose_msg(node, X_BOX))
                time.sleep(0.02)

        threading.Thread(target=feed, daemon=True).start()
        time.sleep(0.1)
        peer = Peer('executor_test_peer')
        if tares is not None:

            def tare(_request: Trigger.Request, response: Trigger.Response) -> Any:
                tares.append(float(arm.p[2]))
                time.sleep(tare_s)
                response.success = True
                return response

            peer.node.create_service(
                Trigger, f'{ns}/ft_bias', tare, callback_group=ReentrantCallbackGroup()
            )
        try:
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            node.trigger_activate()
            push = SafeActionClient(peer.node, Push, f'{ns}/executor/push')
            grasp = SafeActionClient(peer.node, GraspAction, f'{ns}/executor/grasp')
            peer.handshake(push, PROBES['/executor/push']())  # refused as soon as it runs
            peer.handshake(grasp, PROBES['/executor/grasp']())
            yield node, peer, push, grasp
        finally:
            feeding.set()
            peer.close()


def pose_msg(node: ExecutorNode, X: np.ndarray) -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = 'table'
    msg.header.stamp = node.get_clock().now().to_msg()
    set_planar_pose(msg.pose, X)
    return msg


def push_goal(node: ExecutorNode) -> Push.Goal:
    cell = load_workcell(ROOT / 'config' / 'workcell.yaml')
    goal = Push.Goal()
    primitive_to_msg(box_push(cell), cell.fingertip, goal.primitive)
    goal.object_pose = pose_msg(node, X_BOX)
    return goal


def box_push(cell: Workcell) -> Primitive:
    """The tests' push of the box at X_BOX."""
    return exploration_push(load_object('box').grid, X_BOX, None, 0, 'random', 1, cell, 0.05)


def grasp_goal(node: ExecutorNode) -> GraspAction.Goal:
    goal = GraspAction.Goal()
    goal.grasp_pose = pose_msg(node, np.array([-0.01, 0.0, 0.0]))
    goal.grasp_pose.pose.position.z = 0.02
    goal.lift_height = 0.1
    return goal


@pytest.mark.parametrize('fault', [RuntimeError('controller aborted'), ValueError('a bug')])
def test_a_fault_of_the_arm_mid_stroke_pulls_the_fingertip_up_and_says_so(
    fault: Exception,
) -> None:
    # A RuntimeError left the fingertip against the object (no retract), and any other type
    # escaped: the goal aborted with an empty result, whose code reads as success.
    arm = StubArm(0.05, fault_at=2, fault=fault)
    with executor_on(arm) as (node, peer, push, _):
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.status == GoalStatus.STATUS_ABORTED
    assert answer.result.error.code == ErrorCode.INTERNAL
    assert str(fault) in answer.result.message
    assert arm.motions[0][2] == 'fault at stroke'
    assert arm.motions[1][1][-1] == 'lift' and arm.motions[1][2] == 'completed'


def test_a_push_in_flight_stops_when_the_executor_is_deactivated() -> None:
    # It ran to its end and SUCCEEDED on an inactive executor.
    arm = StubArm(0.5)
    with executor_on(arm) as (node, peer, push, _):
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        peer.wait(lambda: bool(arm.motions) or arm.p[2] < 0.1, 10, 'the fingertip lowered')
        node.trigger_deactivate()
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.status == GoalStatus.STATUS_ABORTED
    assert answer.result.error.code == ErrorCode.CANCELED
    assert 'deactivated' in answer.result.message
    assert arm.motions[0][2].startswith('stopped')
    assert arm.motions[1][1][-1] == 'lift' and arm.motions[1][2] == 'completed'


def test_a_push_and_a_grasp_sent_together_are_never_both_taken() -> None:
    # The slot was taken in the execute callback: both were accepted (15 of 15 tries), and
    # the grasp ran after the push had moved the object.
    arm = StubArm(0.02)
    with executor_on(arm) as (node, peer, push, grasp):
        for _ in range(5):
            sent = (push.send_goal_async(push_goal(node)), grasp.send_goal_async(grasp_goal(node)))
            handles = [peer.result(f, 10) for f in sent]
            assert sum(h.accepted for h in handles) == 1
            for h in handles:
                if h.accepted:
                    peer.result(h.get_result_async(), 30)


def test_a_pose_stamped_ahead_of_the_executors_clock_is_refused() -> None:
    # The age was signed: a perception PC whose clock runs an hour ahead passed every check.
    arm = StubArm(0.02)
    with executor_on(arm) as (node, peer, push, _):
        goal = push_goal(node)
        set_stamp(goal.object_pose.header.stamp, node.get_clock().now().nanoseconds * 1e-9 + 3600)
        handle = peer.result(push.send_goal_async(goal), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.STALE_POSE
    assert 'ahead of this node' in answer.result.message
    assert arm.motions == []


def test_the_behaviours_probes_are_refused_at_once_and_move_nothing() -> None:
    # The behaviour sends each server a probe before its first goal (lost answers); a probe
    # the executor took for a push would move the arm.
    arm = StubArm(0.02)
    with executor_on(arm) as (_node, peer, push, grasp):
        for client, name in ((push, '/executor/push'), (grasp, '/executor/grasp')):
            handle = peer.result(client.send_goal_async(PROBES[name]()), 10)
            answer = peer.result(handle.get_result_async(), 10)
            assert answer.result.error.code == ErrorCode.INVALID_GOAL, name
    assert arm.motions == []


def test_a_push_planned_for_another_fingertip_is_refused() -> None:
    # The message's fingertip was dropped: a planner with another workcell file went
    # unnoticed, its contacts and depths off by the difference.
    arm = StubArm(0.02)
    with executor_on(arm) as (node, peer, push, _):
        goal = push_goal(node)
        goal.primitive.fingertip_radius = 0.012
        handle = peer.result(push.send_goal_async(goal), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.INVALID_GOAL
    assert 'fingertip radius of 0.012 m' in answer.result.message
    assert arm.motions == []


def test_a_push_whose_stroke_meets_a_workcell_obstacle_is_refused(tmp_path: Path) -> None:
    # Only the planner and the twin knew the obstacles: a push planned without them (another
    # workcell file, or a sender of its own) was driven through one.
    import shutil

    config = ROOT / 'config'
    cell = load_workcell(config / 'workcell.yaml')
    start, end = box_push(cell).stroke_W(X_BOX, cell.fingertip)
    middle = (start + end) / 2
    shutil.copy(config / 'twin_camera.yaml', tmp_path / 'twin_camera.yaml')
    text = (config / 'workcell.yaml').read_text()
    assert 'obstacles: []' in text
    text = text.replace(
        'obstacles: []',
        f'obstacles: [{{centre: [{middle[0]:.4f}, {middle[1]:.4f}], half_size: [0.005, 0.005]}}]',
    )
    (tmp_path / 'workcell.yaml').write_text(text)
    arm = StubArm(0.02)
    with executor_on(arm, workcell_file=tmp_path / 'workcell.yaml') as (node, peer, push, _):
        goal = push_goal(node)
        handle = peer.result(push.send_goal_async(goal), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.INVALID_GOAL
    assert 'within 11 mm of obstacle 0 of the workcell' in answer.result.message
    assert arm.motions == []


def test_wrenches_sent_while_the_executor_is_busy_wait_for_it_and_are_kept() -> None:
    # With the sensor-data depth of 5 (20 ms of a 250 Hz stream), a quarter second in which
    # the node's callbacks were held up lost the wrenches sent meanwhile, and the push's
    # record had a gap that identification refuses (the demo's first push, once).
    from slide_ros.qos import SENSOR

    arm = StubArm(0.01)
    with executor_on(arm) as (node, peer, _push, _grasp):
        topic = node.resolve_topic_name('ft_wrench')
        sender = peer.node.create_publisher(WrenchStamped, topic, SENSOR)
        peer.wait(lambda: sender.get_subscription_count() > 0, 10, 'the executor to subscribe')
        t0 = 1000.0  # stamps of their own, told apart from the fixture's stream
        sent = 250

        def send() -> None:
            for k in range(sent):
                w = WrenchStamped()
                set_stamp(w.header.stamp, t0 + 0.004 * k)
                w.wrench.force.x = 1.0
                sender.publish(w)
                time.sleep(0.004)

        streaming = threading.Thread(target=send)
        streaming.start()
        time.sleep(0.3)
        with node._lock:  # the node's callbacks held up for 0.4 s
            time.sleep(0.4)
        streaming.join()
        time.sleep(0.5)
        with node._lock:
            stamps = np.array([t for t, _ in node._wrenches if t0 <= t < t0 + 2.0])
    assert len(stamps) >= sent - 5  # (best effort: a few may be lost on the way)
    assert np.diff(np.sort(stamps)).max() < 0.05


def test_a_push_record_waits_for_the_wrenches_still_queued_behind_its_end() -> None:
    # On a busy machine the executor's F/T queue fell behind the driver (1.6 s measured,
    # 3.7 s once): the record was built as soon as the arm stopped, without the wrenches
    # still queued, and a push read 'too few measurements (0 wrenches)'.
    arm = StubArm(0.02)
    with executor_on(arm, wrench_lag_s=[0.2]) as (node, peer, push, _):
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.SUCCESS, answer.result.message
    record = answer.result.record
    last = max(stamp_to_s(w.header.stamp) for w in record.wrenches)
    assert last >= stamp_to_s(record.end)


def _workcell_with(tmp_path: Path, obstacles: str) -> Path:
    """The shipped workcell file with ``obstacles`` (YAML flow list) in tmp_path."""
    import shutil

    config = ROOT / 'config'
    shutil.copy(config / 'twin_camera.yaml', tmp_path / 'twin_camera.yaml')
    text = (config / 'workcell.yaml').read_text()
    assert 'obstacles: []' in text
    (tmp_path / 'workcell.yaml').write_text(
        text.replace('obstacles: []', f'obstacles: {obstacles}')
    )
    return tmp_path / 'workcell.yaml'


@pytest.mark.parametrize('height', [0.2, None])
def test_the_fingertip_goes_over_or_around_an_obstacle_on_its_way_to_a_push(
    tmp_path: Path, height: float | None
) -> None:
    # It flew straight from where it was to above the push at 12 cm, whatever stood between.
    cell = load_workcell(ROOT / 'config' / 'workcell.yaml')
    arm = StubArm(0.01)
    start, _ = box_push(cell).stroke_W(X_BOX, cell.fingertip)
    middle = (arm.p[:2] + start) / 2
    assert np.linalg.norm(start - arm.p[:2]) > 0.06  # room for a 1 cm box between
    tall = '' if height is None else f', height: {height}'
    box = f'[{{centre: [{middle[0]:.4f}, {middle[1]:.4f}], half_size: [0.005, 0.005]{tall}}}]'
    obstacle = Obstacle((float(middle[0]), float(middle[1])), (0.005, 0.005), height)
    with executor_on(arm, workcell_file=_workcell_with(tmp_path, box)) as (node, peer, push, _):
        was = arm.p.copy()
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.SUCCESS, answer.result.message
    (tool, phases, ended), *_ = arm.motions
    before = phases[: phases.index('approach')]
    assert before and set(before) == {'transit'}  # up and over, or around its corners
    assert ended == 'completed'
    # The path the arm was sent along keeps clear: over the box, or beside it.
    path = [was, *arm.sent[0]]
    points = np.vstack(
        [
            p + np.linspace(0.0, 1.0, 100)[:, None] * (q - p)
            for p, q in zip(path, path[1:], strict=False)
        ]
    )
    above = obstacle.distance(points[:, :2]) < cell.fingertip.radius + APPROACH_CLEARANCE
    if height is None:
        assert not above.any()
    else:
        assert above.any() and points[above, 2].min() >= height


def test_a_push_the_fingertip_cannot_reach_around_an_obstacle_is_refused(
    tmp_path: Path,
) -> None:
    # Of unknown height, against the fingertip where it stands: no way around it.
    arm = StubArm(0.01)
    near = f'[{{centre: [{arm.p[0]:.3f}, {arm.p[1] + 0.015:.3f}], half_size: [0.01, 0.005]}}]'
    with executor_on(arm, workcell_file=_workcell_with(tmp_path, near)) as (node, peer, push, _):
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.INVALID_GOAL
    assert answer.result.message.startswith('the tool is within 11 mm of a workcell obstacle')
    assert 'height not given' in answer.result.message
    assert arm.motions == []


class SilentArm(StubArm):
    """An arm that stops answering once the grasp's first path is sent (the twin's process
    died): every motion from then on fails as the twin backend reports it."""

    def follow(self, tool, waypoints, on_waypoint, should_stop):  # type: ignore[no-untyped-def]
        self.motions.append((tool, [w.phase for w in waypoints], 'silent'))
        return Motion(False, message='the arm stopped answering: no gripper pose for 3.0 s')


def test_a_retract_that_did_not_happen_is_not_reported_as_done() -> None:
    # The retract's own failure was ignored: the goal read as if the gripper had been
    # raised (or, after a fault, "pulled up") while the arm answered nothing.
    arm = SilentArm(0.02)
    with executor_on(arm) as (node, peer, _, grasp):
        handle = peer.result(grasp.send_goal_async(grasp_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.status == GoalStatus.STATUS_ABORTED
    assert answer.result.error.code == ErrorCode.MOTION_FAILED
    assert answer.result.message == (
        'the gripper was not pulled clear: the arm stopped answering: no gripper pose for 3.0 s'
    )
    assert [m[0] for m in arm.motions] == ['gripper', 'gripper']  # the approach, the retract


def test_a_fingertip_left_low_is_lifted_before_the_tare() -> None:
    # A retract the arm did not complete (MOTION_FAILED, which the behaviour retries) left
    # the fingertip against the object, and the next push tared there: the contact force
    # became the zero, and a 25 N limit let 45 N through.
    arm = StubArm(0.02)
    arm.p = np.array([0.4, 0.0, 0.03])  # pressed against the box's side
    tares: list[float] = []
    with executor_on(arm, tares) as (node, peer, push, _):
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.status == GoalStatus.STATUS_SUCCEEDED, answer.result.message
    assert tares and tares[0] >= LIFT - 0.01, tares
    assert arm.motions[0] == ('fingertip', ['lift'], 'completed')


class GripperArm(StubArm):
    """A stub arm whose gripper commands take ``grip_s[k]`` seconds each (a stop in that
    time cancels the command: None), and whose command ``grip_fault_at`` fails as a
    gripper's error does."""

    def __init__(self, dt: float, grip_s: tuple[float, ...], grip_fault_at: int | None = None):
        super().__init__(dt)
        self.grip_s, self.grip_fault_at = grip_s, grip_fault_at
        self.grips: list[tuple[float, str]] = []  # width, how it ended

    def gripper(self, width, max_effort, should_stop):  # type: ignore[no-untyped-def]
        k = len(self.grips)
        if k == self.grip_fault_at:
            self.grips.append((width, 'fault'))
            raise RuntimeError('the gripper failed: error 5')
        end = time.monotonic() + (self.grip_s[k] if k < len(self.grip_s) else 0.0)
        while time.monotonic() < end:
            if should_stop():
                self.grips.append((width, 'stopped'))
                return None
            time.sleep(0.005)
        self.grips.append((width, 'done'))
        return float(width), True


def run_grasp(arm: GripperArm, cancel_when: Any = None) -> Any:
    """Send the test grasp; cancel it once ``cancel_when()`` comes true. Its answer."""
    with executor_on(arm) as (node, peer, _, grasp):
        handle = peer.result(grasp.send_goal_async(grasp_goal(node)), 10)
        if cancel_when is not None:
            peer.wait(cancel_when, 10, 'the moment to cancel')
            peer.result(handle.cancel_goal_async(), 10)
        return peer.result(handle.get_result_async(), 30)


def test_a_grasp_cancelled_before_the_arm_moved_moves_nothing() -> None:
    # It lifted the gripper 10 cm, and 10 cm more on every cancel after.
    arm = GripperArm(0.02, grip_s=(3.0,))
    start = arm.p.copy()
    answer = run_grasp(arm, lambda: True)
    assert answer.status == GoalStatus.STATUS_CANCELED
    assert answer.result.message == 'cancelled while opening: the arm did not move'
    assert arm.motions == [] and arm.grips[0][1] == 'stopped'
    assert arm.p == pytest.approx(start)


@pytest.mark.parametrize('cancelled', [True, False])
def test_a_grasp_stopped_while_closing_opens_and_leaves_the_way_it_came(
    cancelled: bool,
) -> None:
    # A cancel lifted the half-closed fingers straight up (the twin closes them fully on
    # a cancelled close: the object went up with them); a gripper's fault lifted twice.
    arm = GripperArm(0.02, grip_s=(0.0, 3.0), grip_fault_at=None if cancelled else 1)
    answer = run_grasp(arm, (lambda: len(arm.motions) == 1) if cancelled else None)
    if cancelled:
        assert answer.status == GoalStatus.STATUS_CANCELED
        assert answer.result.message.startswith('cancelled while closing: ')
    else:
        assert answer.result.error.code == ErrorCode.INTERNAL
        assert 'the gripper failed: error 5' in answer.result.message
    assert answer.result.message.endswith('opened, withdrawn along the approach and raised')
    cell = load_workcell(ROOT / 'config' / 'workcell.yaml')
    assert [g for g, _ in arm.grips] == [cell.gripper.max_opening, 0.04, cell.gripper.max_opening]
    assert [phases for _, phases, _ in arm.motions] == [
        ['pre_grasp', 'lower', 'reach'],
        ['withdraw', 'raise'],
    ]
    assert arm.p[2] == pytest.approx(PRE_GRASP_HEIGHT)  # once, not 10 cm per retract


def test_object_poses_in_another_frame_are_not_recorded_as_the_tables() -> None:
    # Perception publishing in the camera's frame: the push succeeded, and its record gave
    # identification camera coordinates labelled table.
    arm = StubArm(0.02)
    with executor_on(arm) as (node, _peer, _push, _grasp):
        msg = pose_msg(node, np.array([0.02, -0.05, 0.0]))
        msg.header.frame_id = 'camera_color_optical_frame'
        bad = node.bad_messages
        with node._lock:
            node._poses.clear()
        node._on_pose(msg)
        with node._lock:
            kept = [X for _, X in node._poses if abs(X[0] - 0.02) < 1e-9]
    assert kept == [] and node.bad_messages == bad + 1


@pytest.mark.parametrize('when', ['waiting for the object grid', 'during the tare'])
def test_a_push_cancelled_before_it_began_is_answered_at_once_and_never_moves(
    when: str,
) -> None:
    # The grid's wait heard only a shutdown: the cancel was answered NOT_READY 5 s later;
    # during the tare (here a driver that does not answer) the push still went to the arm.
    arm = StubArm(0.02)
    slow = [] if when == 'during the tare' else None  # a driver slow to tare: 1 s
    with executor_on(arm, slow, tare_s=1.0) as (node, peer, push, _):
        goal = push_goal(node)
        if when.startswith('waiting'):
            node._grid = None
        handle = peer.result(push.send_goal_async(goal), 10)
        time.sleep(0.3)
        peer.result(handle.cancel_goal_async(), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.status == GoalStatus.STATUS_CANCELED
    assert answer.result.message == f'cancelled {when}: no push'
    assert arm.motions == []


def test_wrenches_stamped_off_the_nodes_clock_stop_the_push_before_it_moves() -> None:
    # The silence check went by arrival: the push ran, then its record, keeping wrenches by
    # their stamps, had none, and blamed a driver that was streaming.
    arm = StubArm(0.02)
    lag = [0.0]
    with executor_on(arm, wrench_lag_s=lag) as (node, peer, push, _):
        lag[0] = 30.0  # the driver's machine's clock set back 30 s
        time.sleep(0.1)
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.TIMEOUT
    assert 'stamped 30' in answer.result.message and 'behind' in answer.result.message
    assert arm.motions == []


def test_a_push_waits_for_an_f_t_queue_that_fell_behind_to_catch_up() -> None:
    # The executor's F/T queue 3.7 s behind the driver on a busy machine: the push was
    # refused at once, as if the clocks were apart, and the episode ended.
    arm = StubArm(0.02)
    lag = [0.0]
    with executor_on(arm, wrench_lag_s=lag) as (node, peer, push, _):
        lag[0] = 4.0
        time.sleep(0.1)
        threading.Timer(0.15, lambda: lag.__setitem__(0, 0.0)).start()
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.SUCCESS, answer.result.message
    assert arm.motions and arm.motions[0][2] == 'completed'


def test_a_push_at_an_object_pose_off_the_table_is_refused() -> None:
    # The arm went 40 m out for it, and the push succeeded.
    arm = StubArm(0.02)
    with executor_on(arm) as (node, peer, push, _):
        goal = push_goal(node)
        goal.object_pose = pose_msg(node, np.array([40.0, -25.0, 0.0]))
        handle = peer.result(push.send_goal_async(goal), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.result.error.code == ErrorCode.INVALID_GOAL
    assert 'puts no part of the object over the table' in answer.result.message
    assert arm.motions == []


class PhaseArm(StubArm):
    """A StubArm that tells which waypoint's phase it is moving through."""

    phase = ''

    def follow(self, tool, waypoints, on_waypoint, should_stop):  # type: ignore[no-untyped-def]
        def told(i: int, stamp: float | None) -> None:
            self.phase = waypoints[i].phase
            on_waypoint(i, stamp)

        return super().follow(tool, waypoints, told, should_stop)


def test_a_push_cancelled_after_its_stroke_keeps_its_record() -> None:
    # The record was thrown away with the cancel, though the object had been pushed: the
    # push's index came again for the next push, which shadowed it in the bag.
    arm = PhaseArm(0.3)
    with executor_on(arm) as (node, peer, push, _):
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        peer.wait(lambda: arm.phase == 'settle', 20, 'the stroke ended')
        peer.result(handle.cancel_goal_async(), 10)
        answer = peer.result(handle.get_result_async(), 30)
    assert answer.status == GoalStatus.STATUS_CANCELED
    assert answer.result.message == (
        'cancelled: stopped and retracted after the stroke; the push is recorded'
    )
    assert len(answer.result.record.object_poses) >= 2 and answer.result.record.wrenches
    assert arm.motions[0][2] == 'stopped at settle'


class StalledArm(PhaseArm):
    """A PhaseArm whose state stream stalls through the stroke: its tool poses keep the
    stamp they had when the stroke began, as moveit_py's current state does when the
    joint states stop coming (or with ``stall`` False, none stalls)."""

    def __init__(self, dt: float, stall: bool) -> None:
        super().__init__(dt)
        self.stall, self.frozen = stall, None

    def tool_pose(self, tool: str) -> ToolPose:
        pose = super().tool_pose(tool)
        if not (self.stall and self.phase == 'stroke'):
            return pose
        if self.frozen is None:
            self.frozen = pose.stamp
        return ToolPose(pose.p_W, pose.q_W, self.frozen)


@pytest.mark.parametrize('stall', [True, False])
def test_a_fingertip_pose_stream_that_stalls_in_the_stroke_fails_the_push(stall: bool) -> None:
    # moveit_py's tool poses were stamped when read: joint states that stalled gave the
    # same pose again and again as new, and the record showed the fingertip standing still
    # while the wrenches said it pushed. A pose no newer than the last is not sent again,
    # and a stroke with none for longer than max_tip_gap_s (0.5 s) is not used.
    arm = StalledArm(1.0, stall)
    with executor_on(arm) as (node, peer, push, _):
        handle = peer.result(push.send_goal_async(push_goal(node)), 10)
        answer = peer.result(handle.get_result_async(), 30)
        with node._lock:
            stamps = [t for t, _ in node._tips]
    assert np.all(np.diff(stamps) > 0.0)
    if not stall:
        assert answer.result.error.code == ErrorCode.SUCCESS, answer.result.message
        record = answer.result.record
        t0, t1 = stamp_to_s(record.start), stamp_to_s(record.end)
        inside = [stamp_to_s(p.header.stamp) for p in record.pusher_poses]
        # (every gap within max_tip_gap_s; 33 ms apart on an idle machine)
        assert np.diff([t0, *(t for t in inside if t0 < t < t1), t1]).max() <= 0.5
        return
    assert answer.result.error.code == ErrorCode.TIMEOUT
    said = re.search(r'no fingertip pose for (\d\.\d\d) s of the stroke', answer.result.message)
    assert said and float(said[1]) > 0.5, answer.result.message  # (most of the 1 s stroke)
    assert "arm's state stream" in answer.result.message
    assert arm.motions[0][2] == 'completed'  # (the retract is the push's own)


class ClockArm(StubArm):
    """A StubArm whose tool poses carry the stamp ``stamp`` [s], set by the test."""

    stamp = 100.0

    def tool_pose(self, tool: str) -> ToolPose:
        return ToolPose(self.p.copy(), np.array([0.0, 0.0, 0.0, 1.0]), self.stamp)


def test_a_tool_pose_stamped_behind_the_last_is_sent_only_after_a_clock_jump() -> None:
    # The same stamp again is a stalled state (not sent); a stamp a second and more behind
    # is a clock that went back (a restarted twin), whose poses must not be dropped for good.
    arm = ClockArm(0.02)
    with executor_on(arm) as (node, peer, _push, _grasp):

        def stamps() -> list[float]:
            with node._lock:
                return [t for t, _ in node._tips]

        peer.wait(lambda: 100.0 in stamps(), 10, 'the first pose')
        arm.stamp = 99.5  # behind, but no jump: a stale state
        time.sleep(0.3)
        assert stamps() == [100.0]
        arm.stamp = 50.0
        peer.wait(lambda: 50.0 in stamps(), 10, 'the pose after the jump')
    assert stamps() == [100.0, 50.0]
