"""The planner node over real DDS: goals in another frame, or with a belief of another
object, are refused with the reason, not planned as if they were the table's; a long goal
search reports its progress and stops on cancel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from slide_core.geometry import Grid  # noqa: E402
from slide_core.io import belief_to_msg, grid_to_msg, set_planar_pose  # noqa: E402
from slide_core.model import Belief, load_object  # noqa: E402
from slide_interfaces.action import ChooseExploration, SelectGoal  # noqa: E402
from slide_interfaces.msg import ErrorCode, MassFrictionModel, ModelBelief  # noqa: E402
from slide_ros.action_client import SafeActionClient  # noqa: E402
from slide_ros.planner_node import PlannerNode  # noqa: E402
from slide_ros.ros_task import PROBES  # noqa: E402
from slide_ros.testing import Peer, spinning  # noqa: E402

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[3]
X_BOX = np.array([0.4, 0.0, 0.3])


def belief_of(name: str) -> ModelBelief:
    spec = load_object(name)
    msg = belief_to_msg(
        Belief.create(spec.grid, spec.mass, spec.friction),
        X_BOX,
        ModelBelief(),
        MassFrictionModel,
        0.05,
    )
    msg.header.frame_id = msg.grid.header.frame_id = 'table'
    return msg


def answer(peer: Peer, client: SafeActionClient, goal: object, timeout_s: float = 120.0):  # type: ignore[no-untyped-def]
    handle = peer.result(client.send_goal_async(goal), 10)
    return peer.result(handle.get_result_async(), timeout_s)


def plan_step_client(peer: Peer) -> SafeActionClient:
    """A client of the planner's ``~/plan_step`` whose probe the server has answered: a
    goal sent before the server matched the client's response reader runs, and its
    acceptance is lost."""
    from slide_interfaces.action import PlanStep

    steps = SafeActionClient(peer.node, PlanStep, '/planner/plan_step')
    peer.handshake(steps, PROBES['/planner/plan_step']())
    return steps


def a_push():  # type: ignore[no-untyped-def]
    from slide_core.io import primitive_to_msg
    from slide_core.model import Primitive, load_workcell
    from slide_interfaces.msg import PushPrimitive

    tip = load_workcell(ROOT / 'config' / 'workcell.yaml').fingertip
    return primitive_to_msg(
        Primitive.create([-0.16, 0.0], [1.0, 0.0], 0.03, 0.05), tip, PushPrimitive()
    )


@pytest.fixture(scope='module')
def planner() -> Iterator[tuple[Peer, SafeActionClient, SafeActionClient]]:
    """The planner node, active; a peer with its goal and exploration clients (one node for
    the module's tests: in a full run, a sixth node in a row named planner was once not
    discovered for a minute)."""
    params = {'autostart': False, 'workcell_file': str(ROOT / 'config' / 'workcell.yaml')}

    def make(context: Context) -> PlannerNode:
        return PlannerNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()],
        )

    with spinning(make, threads=3) as node:
        peer = Peer('planner_test_peer')
        try:
            node.trigger_configure()
            node.trigger_activate()
            goals = SafeActionClient(peer.node, SelectGoal, '/planner/select_goal')
            explore = SafeActionClient(peer.node, ChooseExploration, '/planner/choose_exploration')
            peer.handshake(goals, PROBES['/planner/select_goal']())  # refused at once
            peer.handshake(explore, PROBES['/planner/choose_exploration']())
            yield peer, goals, explore
        finally:
            peer.close()


def test_the_behaviours_probes_are_refused_at_once(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    # The behaviour sends each server a probe before its first goal (lost answers): a probe
    # the planner took for a question would hold its one goal slot for a search.

    peer, goals, explore = planner
    steps = plan_step_client(peer)
    for client, name in (
        (goals, '/planner/select_goal'),
        (explore, '/planner/choose_exploration'),
        (steps, '/planner/plan_step'),
    ):
        refused = answer(peer, client, PROBES[name](), 10.0)
        assert refused.result.error.code == ErrorCode.INVALID_GOAL, (name, refused.result)


def test_goals_in_another_frame_or_of_another_object_are_refused(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    # Each was answered SUCCEEDED, planned as if it were in the table frame (the executor
    # refuses such poses; the planner's goal, path and grasp were silently wrong).
    peer, goals, explore = planner

    def select(object_frame: str, belief_frame: str):  # type: ignore[no-untyped-def]
        goal = SelectGoal.Goal()
        goal.belief = belief_of('box')
        goal.belief.header.frame_id = belief_frame
        goal.object_pose.header.frame_id = object_frame
        set_planar_pose(goal.object_pose.pose, X_BOX)
        return answer(peer, goals, goal)

    done = select('table', 'table')
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    for object_frame, belief_frame, what in (
        ('camera_color_optical_frame', 'table', "the object pose is in 'camera_color"),
        ('table', 'odom', "the belief is in 'odom'"),
    ):
        refused = select(object_frame, belief_frame)
        assert refused.result.error.code == ErrorCode.INVALID_GOAL
        assert refused.result.message.startswith(what)
    # A belief of the hammer for the box: its contacts lie off the box.
    goal = ChooseExploration.Goal()
    grid_to_msg(load_object('box').grid, X_BOX, goal.object)
    goal.object.header.frame_id = 'table'
    goal.belief = belief_of('hammer')
    refused = answer(peer, explore, goal)
    assert refused.result.error.code == ErrorCode.INVALID_GOAL
    assert 'the belief is of another grid' in refused.result.message
    goal.belief = belief_of('box')
    assert answer(peer, explore, goal).status == GoalStatus.STATUS_SUCCEEDED


def test_an_exploration_into_a_given_side_comes_from_that_side(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    # The task asks for one to tell a contact offset that two directions left open.
    from slide_core.geometry import rotation
    from slide_core.io import primitive_from_msg

    peer, _, explore = planner
    goal = ChooseExploration.Goal()
    grid_to_msg(load_object('box').grid, X_BOX, goal.object)
    goal.object.header.frame_id = 'table'
    goal.done = [a_push(), a_push()]
    for side in ([1.0, 0.0], [0.0, -1.0]):
        goal.side = side
        done = answer(peer, explore, goal)
        assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
        d_W = rotation(X_BOX[2]) @ primitive_from_msg(done.result.primitive).d_O
        assert float(d_W @ side) < -0.9, (side, d_W)  # the box turned 0.3 rad: cos 0.3
    goal.side = [1.0, 0.0, 0.0]
    refused = answer(peer, explore, goal)
    assert refused.result.error.code == ErrorCode.INVALID_GOAL
    assert 'side must be empty or the two components' in refused.result.message


def test_a_long_goal_search_gives_feedback_stops_on_cancel_and_runs_alone(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    # The goal search of a 70 cm square takes seconds (a failing one of a larger object,
    # tens): it published no feedback, and went on after a cancel to its end. And four of
    # them were all accepted: they took every thread, and the node answered no other goal,
    # nor a cancel, for minutes.
    peer, goals, explore = planner
    grid = Grid.from_occupancy(np.ones((35, 35)), 0.02)
    light = np.full(grid.n, 0.2 / grid.n)
    goal = SelectGoal.Goal()
    goal.belief = belief_to_msg(
        Belief.create(grid, light, light * 40), X_BOX, ModelBelief(), MassFrictionModel, 0.05
    )
    goal.belief.header.frame_id = goal.belief.grid.header.frame_id = 'table'
    goal.object_pose.header.frame_id = 'table'
    set_planar_pose(goal.object_pose.pose, np.array([0.5, 0.0, 0.0]))
    progress: list[float] = []
    handle = peer.result(
        goals.send_goal_async(goal, lambda m: progress.append(m.feedback.progress)), 10
    )
    peer.wait(lambda: bool(progress), 60, 'the first feedback')
    second = peer.result(explore.send_goal_async(ChooseExploration.Goal()), 10)
    assert not second.accepted  # one goal at a time, over the three actions
    peer.result(handle.cancel_goal_async(), 10)
    done = peer.result(handle.get_result_async(), 10)
    assert done.status == GoalStatus.STATUS_CANCELED, done.result.message
    assert done.result.error.code == ErrorCode.CANCELED
    assert 0.0 < progress[-1] < 1.0  # it stopped partway, not at its end
    # Free again once it has ended (no grid: refused, but taken).
    assert answer(peer, explore, ChooseExploration.Goal()).result.error.code == (
        ErrorCode.INVALID_GOAL
    )


def test_an_exploration_choice_gives_feedback_and_stops_on_cancel(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    # Each candidate is a rollout of every model: a 30 x 40 cm tray's choice ran for
    # minutes without feedback, a cancel unheard for 45 s. (The rollouts are quasi-static
    # now: the tray of 1 cm cells under the most models the planner takes still takes
    # seconds.)
    peer, _, explore = planner
    grid = Grid.from_occupancy(np.ones((30, 40)), 0.01, 0.02)
    m = np.full(grid.n, 0.6 / grid.n) * np.linspace(0.5, 1.5, 96)[:, None]
    goal = ChooseExploration.Goal()
    grid_to_msg(grid, X_BOX, goal.object)
    goal.object.header.frame_id = 'table'
    goal.belief = belief_to_msg(
        Belief.create(grid, m, np.full((96, grid.n), 0.4)),
        X_BOX,
        ModelBelief(),
        MassFrictionModel,
        0.05,
    )
    goal.belief.header.frame_id = goal.belief.grid.header.frame_id = 'table'
    goal.done = [a_push()]
    progress: list[float] = []
    handle = peer.result(
        explore.send_goal_async(goal, lambda msg: progress.append(msg.feedback.progress)), 10
    )
    peer.wait(lambda: bool(progress), 60, 'the first feedback')
    peer.result(handle.cancel_goal_async(), 10)
    done = peer.result(handle.get_result_async(), 60)
    assert done.status == GoalStatus.STATUS_CANCELED, done.result.message
    assert progress[-1] < 1.0


def test_poses_where_no_object_can_rest_are_invalid_goals(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    # A push was chosen for a box 2 m away, and a grasp planned for one past the edge.
    peer, _, explore = planner
    from slide_interfaces.action import PlanStep

    steps = plan_step_client(peer)
    far = np.array([-0.5, 0.0, 0.0])
    goal = ChooseExploration.Goal()
    grid_to_msg(load_object('box').grid, np.array([-2.0, 0.0, 0.0]), goal.object)
    goal.object.header.frame_id = 'table'
    refused = answer(peer, explore, goal)
    assert refused.result.error.code == ErrorCode.INVALID_GOAL
    assert "the object grid's pose: the object pose [-2.0, 0.0, 0.0] puts no part" in (
        refused.result.message
    )
    for grasp_only in (True, False):
        step = PlanStep.Goal(belief=belief_of('box'), grasp_only=grasp_only)
        step.object_pose.header.frame_id = step.goal_pose.header.frame_id = 'table'
        set_planar_pose(step.object_pose.pose, far)
        set_planar_pose(step.goal_pose.pose, np.array([0.05, 0.0, 0.0]))
        refused = answer(peer, steps, step)
        assert refused.result.error.code == ErrorCode.INVALID_GOAL, refused.result.message
        assert 'puts no part of the object over the table' in refused.result.message
    # A goal pose left unset was read as a goal at the table's corner.
    step = PlanStep.Goal(belief=belief_of('box'))
    step.object_pose.header.frame_id = 'table'
    set_planar_pose(step.object_pose.pose, X_BOX)
    refused = answer(peer, steps, step)
    assert refused.result.error.code == ErrorCode.INVALID_GOAL
    assert refused.result.message == 'the goal pose is not set (no frame, at the origin)'


def test_a_step_that_finds_the_goal_reached_clears_the_last_push_drawn(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    # The last push's arrow and predicted footprints stayed in RViz beside a reached goal.
    from visualization_msgs.msg import Marker, MarkerArray

    from slide_interfaces.action import PlanStep
    from slide_ros.qos import LATCHED

    peer, goals, _ = planner
    arrays: list[MarkerArray] = []
    peer.node.create_subscription(MarkerArray, '/plan/markers', arrays.append, LATCHED)
    goal = SelectGoal.Goal(belief=belief_of('box'))
    goal.object_pose.header.frame_id = 'table'
    set_planar_pose(goal.object_pose.pose, X_BOX)
    chosen = answer(peer, goals, goal)
    assert chosen.result.error.code == ErrorCode.SUCCESS, chosen.result.message
    steps = plan_step_client(peer)
    step = PlanStep.Goal(belief=belief_of('box'), goal_pose=chosen.result.goal_pose)
    step.object_pose = chosen.result.goal_pose  # the object where the goal is
    n = len(arrays)
    done = answer(peer, steps, step)
    assert done.result.done, done.result.message
    peer.wait(lambda: len(arrays) > n, 10, 'the markers')
    last = arrays[-1].markers
    cleared = {m.ns for m in last if m.action == Marker.DELETEALL}
    assert {'plan/push', 'plan/predicted'} <= cleared
    # The goal is drawn still (the topic keeps the last array only).
    assert any(m.ns == 'plan/goal' and m.action == Marker.ADD for m in last)


def test_a_staging_pose_is_chosen_drawn_apart_and_planned_towards_under_its_own_settings(
    planner: tuple[Peer, SafeActionClient, SafeActionClient],
) -> None:
    from visualization_msgs.msg import Marker, MarkerArray

    from slide_interfaces.action import PlanStep
    from slide_ros.planner_node import GOAL_RGBA, STAGING_RGBA
    from slide_ros.qos import LATCHED

    # One model in ten of the box is 8 times as heavy: the pads would be asked more than
    # they are trusted with for it, so no goal, but a staging pose every model keeps.
    spec = load_object('box')
    two = Belief.create(
        spec.grid,
        np.stack([spec.mass, spec.mass * 8]),
        np.stack([spec.friction] * 2),
        [0.9, 0.1],
    )
    belief = belief_to_msg(two, X_BOX, ModelBelief(), MassFrictionModel, 0.05)
    belief.header.frame_id = belief.grid.header.frame_id = 'table'
    peer, goals, _ = planner
    arrays: list[MarkerArray] = []
    peer.node.create_subscription(MarkerArray, '/plan/markers', arrays.append, LATCHED)
    goal = SelectGoal.Goal(belief=belief)
    goal.object_pose.header.frame_id = 'table'
    set_planar_pose(goal.object_pose.pose, X_BOX)
    refused = answer(peer, goals, goal)
    assert refused.result.error.code == ErrorCode.UNCERTAIN, refused.result.message
    goal.staging = True
    n = len(arrays)
    chosen = answer(peer, goals, goal)
    assert chosen.result.error.code == ErrorCode.SUCCESS, chosen.result.message
    peer.wait(lambda: len(arrays) > n, 10, 'the markers')
    drawn = [m for m in arrays[-1].markers if m.ns == 'plan/goal' and m.action == Marker.ADD]
    assert [(m.color.r, m.color.g, m.color.b) for m in drawn] == [
        pytest.approx(STAGING_RGBA[:3])
    ] and STAGING_RGBA != GOAL_RGBA
    # With the object there, a step towards it is done under the staging settings, and
    # refused under a goal's: the staging pose is no goal.
    steps = plan_step_client(peer)
    step = PlanStep.Goal(belief=belief, goal_pose=chosen.result.goal_pose, staging=True)
    step.object_pose = chosen.result.goal_pose
    done = answer(peer, steps, step)
    assert done.result.error.code == ErrorCode.SUCCESS and done.result.done
    step.staging = False
    refused_step = answer(peer, steps, step)
    assert refused_step.result.error.code != ErrorCode.SUCCESS
    assert 'would not do as a goal' in refused_step.result.message
