"""The identification node over real DDS, on a bag the twin recorded: one identification
at a time, and defaults that cannot identify are refused at start-up."""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import itertools
from pathlib import Path
import re

import pytest

pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from slide_core.errors import SlideInputError  # noqa: E402
from slide_core.model import load_object, load_workcell  # noqa: E402
from slide_interfaces.action import Identify  # noqa: E402
from slide_interfaces.msg import ErrorCode  # noqa: E402
from slide_ros.action_client import SafeActionClient  # noqa: E402
from slide_ros.identification_node import IdentificationNode  # noqa: E402
from slide_ros.ros_task import PROBES  # noqa: E402
from slide_ros.testing import Peer, spinning  # noqa: E402
from slide_sim.record import record  # noqa: E402

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[3]
WORKCELL = str(ROOT / 'config' / 'workcell.yaml')


@pytest.fixture(scope='module')
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp('identify') / 'box'
    record(load_object('box'), load_workcell(WORKCELL), 2, 0, out)
    return out


def node_with(context: Context, namespace: str = '', **params: object) -> IdentificationNode:
    values = {'autostart': False, 'workcell_file': WORKCELL, **params}
    return IdentificationNode(
        context=context,
        namespace=namespace,
        parameter_overrides=[Parameter(k, value=v) for k, v in values.items()],
    )


SERIAL = itertools.count()


@contextlib.contextmanager
def serving(**params: object) -> Iterator[tuple[IdentificationNode, Peer, SafeActionClient]]:
    """An active identification node with ``params``, and a peer with its action client."""
    # Each node under a namespace of its own: the action names of one test's node are never
    # those of another's (a CI run once waited 60 s for a fresh server, as the executor's did).
    ns = f'/identification_test_{next(SERIAL)}'
    with spinning(lambda context: node_with(context, ns, **params)) as node:
        peer = Peer('identification_test_peer')
        try:
            node.trigger_configure()
            node.trigger_activate()
            client = SafeActionClient(peer.node, Identify, f'{ns}/identification/identify')
            peer.handshake(client, PROBES['/identification/identify']())  # refused at once
            yield node, peer, client
        finally:
            peer.close()


@pytest.fixture
def served() -> Iterator[tuple[Peer, SafeActionClient]]:
    with serving() as (_node, peer, client):
        yield peer, client


def test_a_second_identification_while_one_runs_is_refused(
    bag: Path, served: tuple[Peer, SafeActionClient]
) -> None:
    # Both ran, and the latched /belief ended with the older goal's, which finished last.
    peer, client = served
    long = Identify.Goal(bag=str(bag), method='finite-diff', budget=10**6)
    first = peer.result(client.send_goal_async(long), 10)
    assert first.accepted
    second = peer.result(client.send_goal_async(Identify.Goal(bag=str(bag))), 10)
    assert not second.accepted
    peer.result(first.cancel_goal_async(), 10)
    answer = peer.result(first.get_result_async(), 30)
    assert answer.status == GoalStatus.STATUS_CANCELED
    assert answer.result.error.code == ErrorCode.CANCELED  # the client's own cancel
    # Free again once the first has ended.
    third = peer.result(client.send_goal_async(Identify.Goal(bag=str(bag))), 10)
    assert third.accepted
    done = peer.result(third.get_result_async(), 120)
    assert done.result.error.code == ErrorCode.SUCCESS, done.result.message


def test_defaults_that_cannot_identify_are_refused_at_start_up() -> None:
    # A budget below the models was taken, and every goal of zeros then refused.
    context = Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(SlideInputError, match='budget of 4 simulations'):
            node_with(context, default_budget=4, default_models=8)
    finally:
        context.try_shutdown()


def test_the_belief_is_drawn_where_the_object_is_now() -> None:
    # Drawn once, at the pose it was identified at, the maps stayed there while the object
    # was pushed away.
    from geometry_msgs.msg import PoseStamped
    import numpy as np

    from slide_core.geometry import Grid, cell_positions
    from slide_core.io import set_planar_pose
    from slide_core.model import Belief

    context = Context()
    rclpy.init(context=context)
    try:
        node = node_with(context)
        grid = Grid(0.02, np.ones((2, 3), bool), np.full((2, 3), 0.02))
        belief = Belief.create(grid, np.full(grid.n, 0.01), np.full(grid.n, 0.3))
        assert node._redraw() is None  # nothing identified yet
        node._drawn = (belief, np.array([0.4, 0.0, 0.0]))
        pose = PoseStamped()
        X = np.array([0.401, 0.0, 0.005])  # moved 1 mm: not drawn again
        set_planar_pose(pose.pose, X)
        node._pose = pose
        assert node._redraw() is None
        X = np.array([0.3, 0.05, 0.6])
        set_planar_pose(pose.pose, X)
        markers = node._redraw()
        assert markers is not None
        (mass,) = [m for m in markers.markers if m.ns == 'belief/mass']
        drawn = np.array([[p.x, p.y] for p in mass.points])
        np.testing.assert_allclose(drawn, cell_positions(grid, X), atol=1e-9)
        assert node._redraw() is None  # drawn there already
        # A pose in another frame was drawn in the table's at camera coordinates.
        camera = PoseStamped()
        camera.header.frame_id = 'camera_color_optical_frame'
        set_planar_pose(camera.pose, np.array([0.02, -0.05, 0.0]))
        node._on_pose(camera)
        assert node._redraw() is None
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_goals_whose_fields_contradict_or_ask_too_much_are_invalid(
    bag: Path, served: tuple[Peer, SafeActionClient]
) -> None:
    # A bag with pushes beside it identified from the bag alone, bag_pushes without a bag
    # were ignored, the same push sent 4 times was weighed 4 times, and a budget of
    # 2^32 - 1 ran for what would have been weeks, holding the node's one goal.
    from slide_interfaces.msg import PushRecord

    peer, client = served
    for goal, reason in (
        (Identify.Goal(bag=str(bag), pushes=[PushRecord()]), 'both a bag and 1 pushes'),
        (Identify.Goal(bag_pushes=[0, 1]), 'the goal gives none'),
        (Identify.Goal(pushes=[PushRecord(), PushRecord()]), 'given more than once: [0, 0]'),
        (Identify.Goal(bag=str(bag), budget=2**32 - 1), 'budget must be 1 to 10000000'),
    ):
        _handle, future = peer.send(client, goal, 30.0)
        answer = peer.result(future, 30.0)
        assert answer.status == GoalStatus.STATUS_ABORTED
        assert answer.result.error.code == ErrorCode.INVALID_GOAL, answer.result.message
        assert reason in answer.result.message


def test_a_bag_goal_says_which_pushes_it_could_not_use(
    bag: Path, tmp_path: Path, served: tuple[Peer, SafeActionClient]
) -> None:
    # 'from 1 pushes' of 2 asked for, with nothing of why (slide identify says it).
    import shutil

    cut = tmp_path / 'cut'
    shutil.copytree(bag, cut)
    mcap = next(cut.glob('*.mcap'))
    with mcap.open('r+b') as f:  # the recording ended by a crash during push 1
        f.truncate(int(mcap.stat().st_size * 0.75))
    peer, client = served
    _handle, future = peer.send(client, Identify.Goal(bag=str(cut), bag_pushes=[0, 1]), 30.0)
    answer = peer.result(future, 120.0)
    assert answer.result.error.code == ErrorCode.SUCCESS, answer.result.message
    assert 'from 1 pushes of' in answer.result.message
    assert 'push 1 skipped' in answer.result.message


def test_bag_goals_are_read_with_the_nodes_sensor_mount(bag: Path) -> None:
    # The node had no sensor_mount: a bag of /netft/wrench from a turned sensor was fitted
    # as if square on the fingertip (0.097 kg for a 1.03 kg object), with a warning that
    # named a setting it did not have.
    context = Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(SlideInputError, match='sensor_mount: a sensor mount is a unit'):
            node_with(context, sensor_mount=[0.0, 0.0, 0.0, 0.0])
    finally:
        context.try_shutdown()

    with serving(sensor_mount=[1.0, 0.0, 0.0, 0.0]) as (_node, peer, client):
        _handle, future = peer.send(client, Identify.Goal(bag=str(bag), budget=200), 60.0)
        answer = peer.result(future, 120.0)
    # The twin's bag holds the executor's /ft/wrench, in the table frame: the mount is
    # read, found unused, and said.
    assert answer.result.error.code == ErrorCode.SUCCESS, answer.result.message
    assert 'the sensor mount was not used' in answer.result.message


def test_a_deactivation_mid_goal_is_said_as_such_not_as_the_clients_cancel(bag: Path) -> None:
    # It answered CANCELED 'cancelled after 893 simulations', as if the client had asked.
    with serving() as (node, peer, client):
        progress: list[int] = []
        goal = Identify.Goal(bag=str(bag), method='finite-diff', budget=10**6)
        _handle, future = peer.send(
            client, goal, 60.0, lambda m: progress.append(m.feedback.iteration)
        )
        peer.wait(lambda: any(i > 0 for i in progress), 60, 'the optimiser to run')
        node.trigger_deactivate()
        answer = peer.result(future, 30.0)
    assert answer.status == GoalStatus.STATUS_ABORTED
    assert answer.result.error.code == ErrorCode.NOT_READY
    assert answer.result.message.endswith(': the identification node is deactivated')


def test_a_bag_whose_camera_was_off_is_identified_without_it_and_says_so(
    tmp_path: Path, served: tuple[Peer, SafeActionClient]
) -> None:
    # The camera 2 mm off in x and -1 mm in y, the fingertip where it was commanded.
    from slide_sim.tracker import Tracking

    cell = load_workcell(WORKCELL)
    peer, client = served
    answers = {}
    for name, offset in (('off', (2.0, -1.0)), ('true', (0.0, 0.0))):
        out = tmp_path / name
        record(load_object('box'), cell, 5, 1, out, tracking=Tracking.of(100.0, 0, 0, offset))
        goal = Identify.Goal(bag=str(out), bag_pushes=list(range(5)), budget=200)
        _handle, future = peer.send(client, goal, 60.0)
        answers[name] = peer.result(future, 120.0).result
        assert answers[name].error.code == ErrorCode.SUCCESS, answers[name].message
    message = answers['off'].message
    said = re.search(r'recorded contacts sit \(([-+.\d]+), ([-+.\d]+)\) mm', message)
    assert said is not None and 'camera extrinsics' in message
    assert 'taken off the fingertip before the fit' in message  # (the default: auto)
    assert [float(v) for v in said.groups()] == pytest.approx([-2.0, 1.0], abs=0.3)
    assert 'camera extrinsics' not in answers['true'].message
