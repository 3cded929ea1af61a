"""The behaviour node keeps what an episode left: its result with every planned push as it
was decided, and its last belief, to plan from again offline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('rclpy')

import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from slide_core.geometry import Grid  # noqa: E402
from slide_core.model import Belief, load_belief, load_provenance  # noqa: E402
from slide_core.task import Outcome, Stage, TaskResult, TaskState  # noqa: E402
from slide_ros.behaviour_node import BehaviourNode  # noqa: E402

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[3]


def ended_episode() -> TaskResult:
    grid = Grid.from_occupancy(np.ones((2, 5)), 0.02)
    belief = Belief.create(
        grid,
        np.stack([np.full(grid.n, 0.02), np.linspace(0.01, 0.03, grid.n)]),
        np.stack([np.full(grid.n, 0.4), np.full(grid.n, 0.3)]),
        [0.7, 0.3],
    )
    state = TaskState(grid=grid, belief=belief, planned=1, belief_pushes=6)
    # The push was decided under the belief of 5 pushes; the last one is of 6.
    earlier = Belief.create(grid, np.full(grid.n, 0.025), np.full(grid.n, 0.35))
    state.beliefs = {5: earlier}
    push = {'X_WO': [0.3, 0.1, 0.2], 'p_WF0': [0.35, 0.1], 'direction_W': [-1.0, 0.0]}
    push |= {'travel': 0.04, 'target': [0.1, 0.1, 0.0], 'path': [[0.3, 0.1, 0.2]] * 40}
    push |= {'goal': [0.05, 0.1, 0.0], 'index': 0, 'belief_pushes': 5}
    state.trace['pushes'].append(push)
    reason = 'no grasp at the final pose (every candidate push risks a fall)'
    return TaskResult(Outcome.NO_GRASP, Stage.GRASP, reason, 5, 1, False, {}, 60.0, state)


def node_writing(files: dict[str, str]) -> tuple[BehaviourNode, Context]:
    context = Context()
    rclpy.init(context=context)
    params = {'autostart': False, 'workcell_file': str(ROOT / 'config' / 'workcell.yaml')}
    params |= files
    node = BehaviourNode(
        context=context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
    )
    return node, context


def test_an_ended_episode_leaves_its_result_and_its_last_belief(tmp_path: Path) -> None:
    result = ended_episode()
    files = {'result_file': str(tmp_path / 'r.json'), 'belief_file': str(tmp_path / 'b.yaml')}
    node, context = node_writing(files)
    try:
        node.save(result)
    finally:
        node.destroy_node()
        context.try_shutdown()
    written = json.loads((tmp_path / 'r.json').read_text())
    assert written['outcome'] == 'no_grasp' and written['pushes'] == 1
    # The executor numbers pushes over the node's life: where this episode's began.
    assert written['first_push_index'] == 0
    # The push as it was decided, without its path's waypoints.
    assert written['planned'] == [
        {k: v for k, v in result.state.trace['pushes'][0].items() if k != 'path'}
    ]
    belief = load_belief(tmp_path / 'b.yaml')
    assert result.state.belief is not None
    # The file keeps 6 significant digits.
    np.testing.assert_allclose(belief.mass, result.state.belief.mass, rtol=1e-5)
    np.testing.assert_allclose(belief.friction, result.state.belief.friction, rtol=1e-5)
    np.testing.assert_allclose(belief.weight, result.state.belief.weight, rtol=1e-5)
    provenance = load_provenance(tmp_path / 'b.yaml')
    assert provenance['outcome'] == 'no_grasp' and provenance['pushes'] == 1
    # The belief the planned push was decided under, beside the last one: only the last
    # was kept, so no planned push could be decided again offline.
    assert written['planned'][0]['belief_pushes'] == 5
    decided = load_belief(tmp_path / 'b.5.yaml')
    np.testing.assert_allclose(decided.mass, result.state.beliefs[5].mass, rtol=1e-8)


def test_a_file_that_cannot_be_written_leaves_the_others(tmp_path: Path) -> None:
    files = {
        'result_file': str(tmp_path / 'r.json'),
        'belief_file': str(tmp_path / 'a_file' / 'b.yaml'),
    }
    node, context = node_writing(files)
    (tmp_path / 'a_file').write_text('')  # since start-up: the belief's folder cannot be made
    try:
        node.save(ended_episode())
    finally:
        node.destroy_node()
        context.try_shutdown()
    assert json.loads((tmp_path / 'r.json').read_text())['outcome'] == 'no_grasp'
    assert not (tmp_path / 'a_file' / 'b.yaml').exists()


def test_an_episode_stopped_with_the_node_leaves_what_it_had(tmp_path: Path) -> None:
    # Ctrl-C, SIGTERM or the demo's timeout: the files were written only when the tree
    # finished, so an interrupted episode left none, though it had a belief.
    from slide_core.task import Task, TaskSettings

    files = {'result_file': str(tmp_path / 'r.json'), 'belief_file': str(tmp_path / 'b.yaml')}
    node, context = node_writing(files)
    try:
        node.task = Task(node.world, node.decider, TaskSettings())  # begun, not finished
        node.task.state = ended_episode().state
    finally:
        node.destroy_node()
        context.try_shutdown()
    written = json.loads((tmp_path / 'r.json').read_text())
    assert written['outcome'] == 'aborted'
    assert 'stopped mid-episode' in written['reason']
    assert load_belief(tmp_path / 'b.yaml').K == 2


@pytest.mark.parametrize(
    ('override', 'reason'),
    [
        ({'identification_method': 'bogus'}, 'identification_method must be one of'),
        ({'models': 8, 'budget': 7}, 'budget of 7 simulations cannot evaluate each of the 8'),
        ({'belief_file': '/dev/null/belief.yaml'}, 'cannot write in /dev/null'),
        ({'png': 'episode.jpg'}, 'png must name a .png file'),
    ],
)
def test_settings_an_episode_would_fail_on_are_refused_at_start_up(
    override: dict[str, object], reason: str
) -> None:
    # They were accepted, and failed at the first identification after the exploratory
    # pushes, or (the files) were a warning once the episode had ended.
    context = Context()
    rclpy.init(context=context)
    params = {'autostart': False, 'workcell_file': str(ROOT / 'config' / 'workcell.yaml')}
    params |= override
    try:
        with pytest.raises(ValueError, match=reason):
            BehaviourNode(
                context=context,
                parameter_overrides=[Parameter(k, value=v) for k, v in params.items()],
            )
    finally:
        context.try_shutdown()


def test_deactivated_and_at_once_activated_it_runs_one_episode_at_a_time() -> None:
    # The new episode cleared the abort the old one's push was still to see: the old push
    # ran on and completed beside the new one's.
    import threading
    import time

    from rclpy.executors import MultiThreadedExecutor

    from slide_core.model import load_object
    from slide_core.task import Aborted, Observation

    box = load_object('box')
    pushes: list[tuple[int, str]] = []  # (episode, how the push ended)

    class Arm:
        """Stands in for the graph's world: a push takes a second and sees the abort as
        the graph's action caller does (every 5 ms)."""

        records: list[object] = []  # the executor's push records (none completes here)

        def observe(self) -> Observation:
            return Observation(box.grid, np.array([0.45, 0.0, 0.0]), time.time())

        def push(self, primitive: object, X_WO: np.ndarray) -> object:
            episode = episodes[0]
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                if node._abort_flag.is_set():
                    pushes.append((episode, 'aborted'))
                    raise Aborted('aborted during the push')
                time.sleep(0.005)
            pushes.append((episode, 'completed'))
            raise Aborted('enough')

    class Decider:
        def refusal(self, _grid: object) -> None:
            return None  # the object fits the gripper

        def exploration(self, *_args: object) -> object:
            from slide_core.model import Primitive

            return Primitive.create([-0.09, 0.0], [1.0, 0.0], 0.03, 0.05)

    episodes = [0]
    node, context = node_writing({'start_on_activate': True})  # type: ignore[dict-item]
    node.configure = lambda: None  # type: ignore[method-assign]  # no peers to wait for
    node.world, node.decider = Arm(), Decider()  # type: ignore[assignment]
    begin = node._begin

    def counted() -> None:
        episodes[0] += 1
        begin()

    node._begin = counted  # type: ignore[method-assign]
    executor = MultiThreadedExecutor(num_threads=3, context=context)
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    try:
        node.trigger_configure()
        node.trigger_activate()
        deadline = time.monotonic() + 10
        while node.task is None or not node.task.state.stage.value == 'explore':
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.3)  # the first push under way
        node.trigger_deactivate()
        node.trigger_activate()
        deadline = time.monotonic() + 10
        while len(pushes) < 2:
            assert time.monotonic() < deadline, pushes
            time.sleep(0.01)
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
        spin.join(timeout=5.0)
    # The first episode's push saw the abort; the second began after it had ended.
    assert pushes[:2] == [(1, 'aborted'), (2, 'completed')]


def test_a_start_with_a_node_of_the_graph_missing_is_refused_before_anything_moves() -> None:
    # It was accepted with the identification node gone: the arm made an exploratory push,
    # and the episode failed on it 10 s later.
    from std_srvs.srv import Trigger

    from slide_ros.testing import spinning

    def make(context: Context) -> BehaviourNode:
        params = {'autostart': False, 'workcell_file': str(ROOT / 'config' / 'workcell.yaml')}
        return BehaviourNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()],
        )

    with spinning(make) as node:
        node.configure = lambda: None  # brought up without its peers
        node.trigger_configure()
        node.trigger_activate()
        assert node.active
        res = node._start(Trigger.Request(), Trigger.Response())
        assert not res.success and node.task is None
        assert res.message == (
            'not started: waiting for executor push, executor grasp, planner, identification'
        )


def test_the_history_ends_with_how_the_episode_ended() -> None:
    # It ended at the last event ('[explore] exploratory push 1: 6.8 cm'), whatever the end.
    node, context = node_writing({})
    try:
        node._event(Stage.GRASP, 'grasping at [0.0, 0.1]')
        node._finish(ended_episode())
        assert node.history[-2:] == [
            '[grasp] grasping at [0.0, 0.1]',
            '[grasp] no_grasp: no grasp at the final pose (every candidate push risks a fall)',
        ]
    finally:
        node.destroy_node()
        context.try_shutdown()
