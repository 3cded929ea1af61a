"""The task's world and decider over the graph: perception and the executor are the world,
the planner and identification nodes decide.

Every call is an action goal; while it waits it watches the abort flag (then it cancels
the goal and raises :class:`slide_core.task.Aborted`), the server's presence (a node that
died fails the call with a reason instead of hanging) and a timeout. Before its first goal
to a server, the caller sends that server a probe it refuses at once until the answer
comes back (:func:`slide_ros.lifecycle.handshake`): a first push sent to an executor that
had not yet matched the behaviour's response reader would move the object while the
behaviour waited out its acceptance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import math
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from geometry_msgs.msg import PoseStamped, WrenchStamped
import numpy as np
from rclpy.action import ActionClient
from rclpy.node import Node

from slide_core.errors import NoSolutionError
from slide_core.geometry import FloatArray, Grid
from slide_core.identification import PushSamples
from slide_core.io import (
    MessageError,
    belief_from_msg,
    belief_to_msg,
    grid_from_msg,
    grid_to_msg,
    pose_to_planar,
    primitive_from_msg,
    primitive_to_msg,
    record_from_msg,
    record_to_msg,
    set_planar_pose,
    stamp_to_s,
)
from slide_core.model import Belief, Primitive, Workcell
from slide_core.planning import (
    Goal,
    Grasp,
    PlanningError,
    PushPlan,
    SE2Path,
    Step,
    UncertainBeliefError,
    too_tall_to_grasp,
)
from slide_core.task import Aborted, GraspReport, ObjectLost, Observation, PushFailed, WorldError
from slide_interfaces.action import ChooseExploration, Identify, PlanStep, Push, SelectGoal
from slide_interfaces.action import Grasp as GraspAction
from slide_interfaces.msg import (
    ErrorCode,
    MassFrictionModel,
    ModelBelief,
    ObjectGrid,
    PushPrimitive,
    PushRecord,
)
from slide_ros.action_client import GoalResult, SafeActionClient
from slide_ros.lifecycle import handshake
from slide_ros.qos import LATCHED, RELIABLE

TIMEOUTS = {'push': 180.0, 'grasp': 120.0, 'identify': 300.0, 'plan': 120.0}
HANDSHAKE_TIMEOUT_S = 30.0
"""How long [s] a server that is up may take to answer the caller's first probe."""

PROBES: dict[str, Callable[[], Any]] = {
    '/executor/push': Push.Goal,  # no direction
    '/executor/grasp': GraspAction.Goal,  # no height
    '/planner/choose_exploration': ChooseExploration.Goal,  # no grid
    '/planner/select_goal': SelectGoal.Goal,  # no belief
    '/planner/plan_step': PlanStep.Goal,  # no belief
    '/identification/identify': lambda: Identify.Goal(bag_pushes=[0]),  # pushes of no bag
}
"""For each action the task calls, a goal its server refuses as invalid as soon as it runs
(the caller's probe)."""


class NodeGone(WorldError):  # noqa: N818 - a condition of the graph
    """A node the task needs is not running (it died, or never started)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class Caller:
    """Sends action goals and waits for their results (see the module docstring)."""

    def __init__(self, node: Node, should_stop: Callable[[], bool]) -> None:
        self.node, self.should_stop = node, should_stop
        self._clients: dict[int, tuple[str, Callable[[], Any]]] = {}  # its name and probe
        self._answered: set[int] = set()  # clients whose server answered a probe

    def client(self, kind: Any, name: str, probe: Callable[[], Any] | None = None) -> ActionClient:
        """An action client of ``name`` whose failures name the action (and so its node);
        ``probe`` makes the goal its server refuses at once (default: :data:`PROBES`'s)."""
        make_probe = probe if probe is not None else PROBES.get(name)
        if make_probe is None:
            raise ValueError(f'{name}: no probe goal (a goal its server refuses at once)')
        client = SafeActionClient(self.node, kind, name)
        self._clients[id(client)] = (name, make_probe)
        return client

    def call(
        self,
        client: ActionClient,
        what: str,
        goal: Any,
        timeout_s: float,
        feedback: Callable[[Any], None] | None = None,
        made: Callable[[Any], bool] | None = None,
    ) -> Any:
        """The goal's result. ``made`` says of a result whether the goal did its work
        (a push stopped after its stroke, with its record): such a result, like a success,
        is returned when an abort cancelled the goal, not lost in Aborted."""
        name, probe = self._clients[id(client)]  # (a client of :meth:`client`)
        if not client.wait_for_server(timeout_sec=3.0):
            raise NodeGone(f'{what}: {name} is not running (is its node up? see its log)')
        if id(client) not in self._answered:
            try:
                answered = handshake(client, probe(), HANDSHAKE_TIMEOUT_S, self.should_stop)
            except TimeoutError:
                raise NodeGone(
                    f'{what}: {name} runs but its answers do not arrive within '
                    f'{HANDSHAKE_TIMEOUT_S:g} s (DDS discovery not complete, or a firewall '
                    'between the processes)'
                ) from None
            if not answered:
                raise Aborted(f'aborted before {what}')
            self._answered.add(id(client))
        if self.should_stop():
            raise Aborted(f'aborted before {what}')
        future = client.send_goal_async(goal, feedback_callback=feedback)
        handle = self._wait(future, client, f'{what} ({name})', 10.0, None)
        if not handle.accepted:
            if self.should_stop():
                raise Aborted(f'aborted during {what}')
            raise WorldError(f'{what}: the goal was refused', retryable=True)
        result = GoalResult(handle)
        self._wait(result, client, f'{what} ({name})', timeout_s, handle, made)
        response = result.result()
        if response.status == GoalStatus.STATUS_ABORTED and response.result.error.code == 0:
            # A server that died inside its execute callback aborts with an empty result,
            # whose error code reads as success: never take its fields for an answer.
            response.result.error.code = ErrorCode.INTERNAL
            response.result.message = f'{name} aborted the goal without a result (see its log)'
        return response.result

    def _wait(
        self,
        future: Any,
        client: ActionClient,
        what: str,
        timeout_s: float,
        handle: Any,
        made: Callable[[Any], bool] | None = None,
    ) -> Any:
        """``future``'s result, watching the abort flag, the server and ``timeout_s``.
        While it waits for a goal's acceptance (``handle`` None) an abort waits too: the
        goal may already run (a push), and only its handle can cancel it; the wait for the
        result then cancels it at once. (Raised at once, the abort left the push to run on
        with no one to stop it or keep its record.)"""
        end = time.monotonic() + timeout_s
        last_check = time.monotonic()
        while not future.done():
            if handle is not None and self.should_stop():
                cancel = handle.cancel_goal_async()
                stop = time.monotonic() + 10.0
                while not future.done() and time.monotonic() < stop:
                    time.sleep(0.01)
                del cancel
                if future.done() and (
                    future.result().status == GoalStatus.STATUS_SUCCEEDED
                    or (made is not None and made(future.result().result))
                ):
                    # It ended before the cancel reached it, or the cancel stopped it after
                    # its work (a push after its stroke): a push that was made is kept (it
                    # was lost from the result); the task's next stage aborts.
                    return future.result()
                raise Aborted(f'aborted during {what}')
            now = time.monotonic()
            if now - last_check > 1.0:
                last_check = now
                if not client.server_is_ready():
                    raise NodeGone(f'{what}: its node stopped answering')
            if now > end:
                if handle is not None:
                    handle.cancel_goal_async()
                raise NodeGone(f'{what}: no answer within {timeout_s:g} s')
            time.sleep(0.005)
        return future.result()


def recorded(result: Any) -> bool:
    """Whether a push's result carries its record: the push was made (it succeeded, or a
    cancel, a deactivation or a failed motion stopped it after its stroke)."""
    return bool(result.record.object_poses)


class RosWorld:
    """Perception (``/object/grid``, ``/object/pose``) and the executor's actions."""

    def __init__(
        self,
        node: Node,
        caller: Caller,
        cell: Workcell,
        pose_timeout_s: float,
        max_pose_age_s: Callable[[], float] = lambda: math.inf,
    ) -> None:
        self.node, self.caller, self.cell = node, caller, cell
        self.frame = cell.table.frame_id
        self.pose_timeout_s = pose_timeout_s
        self.max_pose_age_s = max_pose_age_s  # read at each use: a parameter one may set
        self._lock = threading.Lock()
        self._grid: tuple[Grid, Any] | None = None
        self._pose: tuple[float, PoseStamped] | None = None
        self.observed: PoseStamped | None = None
        self._since = 0.0  # a pose must be stamped after this (ROS time [s]): the last motion
        node.create_subscription(ObjectGrid, '/object/grid', self._on_grid, LATCHED)
        node.create_subscription(PoseStamped, '/object/pose', self._on_pose, RELIABLE)
        self.push_client = caller.client(Push, '/executor/push')
        self.grasp_client = caller.client(GraspAction, '/executor/grasp')
        self.records: list[PushRecord] = []

    def _on_grid(self, msg: ObjectGrid) -> None:
        try:
            grid, _ = grid_from_msg(msg)
        except MessageError as exc:
            # (dropped without a word, the behaviour waited for perception to acquire the
            # object while perception said ok)
            self.node.get_logger().error(f'the object grid from perception is refused: {exc}')
            return
        with self._lock:
            self._grid = (grid, msg)

    def _on_pose(self, msg: PoseStamped) -> None:
        with self._lock:
            self._pose = (time.monotonic(), msg)

    def _now(self) -> float:
        return float(self.node.get_clock().now().nanoseconds) * 1e-9

    def ready(self) -> bool:
        """Perception has sent the grid and a pose in the last ``pose_timeout_s``."""
        with self._lock:
            grid, pose = self._grid, self._pose
        return (
            grid is not None
            and pose is not None
            and (time.monotonic() - pose[0] < self.pose_timeout_s)
        )

    def observe(self) -> Observation:
        """The object as perception sees it now: a pose received in the last
        ``pose_timeout_s``, taken after the last push or grasp ended (the object at rest
        where that motion left it) and at most ``max_pose_age_s`` old (the executor refuses
        older ones). ObjectLost when none comes within the timeout."""
        end = time.monotonic() + self.pose_timeout_s
        max_age = self.max_pose_age_s()
        age = math.nan
        while True:
            with self._lock:
                grid, pose = self._grid, self._pose
            if pose is not None:
                age = self._now() - stamp_to_s(pose[1].header.stamp)
            fresh = (
                pose is not None
                and time.monotonic() - pose[0] < self.pose_timeout_s
                and stamp_to_s(pose[1].header.stamp) >= self._since
                and -max_age <= age <= max_age  # (a clock running ahead: not fresh either)
            )
            if grid is not None and fresh:
                assert pose is not None
                try:
                    X = pose_to_planar(pose[1].pose)
                except MessageError as exc:
                    raise ObjectLost(f'perception sent a bad pose: {exc}') from None
                self.observed = pose[1]
                return Observation(grid[0], X, stamp_to_s(pose[1].header.stamp))
            if time.monotonic() > end:
                if grid is None:
                    raise ObjectLost('perception has not acquired the object')
                if pose is None or time.monotonic() - pose[0] >= self.pose_timeout_s:
                    # (first: perception silent for 27 s read 'falling behind: its latest
                    # pose is 27.5 s old'.) Not reacquired here: a new acquisition draws a
                    # new object frame, and the episode's grid and belief hold in the old.
                    raise ObjectLost(
                        f'no object pose from perception for {self.pose_timeout_s:g} s: it '
                        'is not tracking the object (its /diagnostics say why; if the object '
                        'was moved, call /perception/reacquire, then start a new episode)'
                    )
                if age > max_age:
                    raise ObjectLost(
                        f'perception is falling behind: its latest pose is {age:.1f} s old'
                        f' (at most {max_age:g} s is used)'
                    )
                if age < -max_age:
                    raise ObjectLost(
                        f"perception's poses are stamped {-age:.1f} s ahead of this clock: "
                        "are the machines' clocks apart (or one on sim time)?"
                    )
                raise ObjectLost(
                    f'no object pose from perception since the last motion ended, for '
                    f'{self.pose_timeout_s:g} s'
                )
            if self.caller.should_stop():
                raise Aborted('aborted while observing')
            time.sleep(0.02)

    def push(self, primitive: Primitive, X_WO: FloatArray) -> PushSamples:
        goal = Push.Goal()
        primitive_to_msg(primitive, self.cell.fingertip, goal.primitive)
        # Placed at the task's pose X_WO (the camera's, less any contact offset the task
        # took off), stamped with the freshest observation's time: deciding may have taken
        # a while, and the executor refuses old poses (the task checks that the object has
        # not moved since it decided).
        self.observe()
        assert self.observed is not None
        pose = PoseStamped()
        pose.header = self.observed.header
        set_planar_pose(pose.pose, X_WO, self.observed.pose.position.z)
        goal.object_pose = pose
        goal.index = len(self.records)
        result = self.caller.call(self.push_client, 'push', goal, TIMEOUTS['push'], made=recorded)
        self._since = self._now()
        made = recorded(result)
        if made:
            # A push stopped after its stroke was made: kept, and its index is not given
            # to the next push (the bag reads the last push of an index).
            self.records.append(result.record)
        if result.error.code != ErrorCode.SUCCESS and not (made and self.caller.should_stop()):
            unsafe = result.error.code in (ErrorCode.FT_LIMIT, ErrorCode.CANCELED)
            raise PushFailed(
                f'push: {result.message} (code {result.error.code})', retryable=not unsafe
            )
        try:
            return record_from_msg(result.record, self.frame)
        except MessageError as exc:
            raise PushFailed(f'push: unusable record: {exc}') from None

    def grasp(self, grasp: Grasp) -> GraspReport:
        goal = GraspAction.Goal()
        goal.grasp_pose.header.frame_id = self.frame
        set_planar_pose(goal.grasp_pose.pose, np.array([*grasp.p_WE, grasp.yaw]), grasp.z)
        goal.lift_height = 0.1
        result = self.caller.call(self.grasp_client, 'grasp', goal, TIMEOUTS['grasp'])
        self._since = self._now()
        if result.error.code not in (ErrorCode.SUCCESS, ErrorCode.NOT_HELD):
            raise WorldError(f'grasp: {result.message} (code {result.error.code})')
        return GraspReport(bool(result.holding), float(result.lifted))


class RosDecider:
    """The planner's and identification's actions as the task's decider."""

    def __init__(
        self,
        node: Node,
        caller: Caller,
        cell: Workcell,
        seed: int,
        identification: dict[str, Any],
        progress: Callable[[str], None],
    ) -> None:
        self.node, self.caller, self.cell, self.seed = node, caller, cell, int(seed)
        self.frame = cell.table.frame_id
        self.settings = identification
        self.progress = progress
        self.explore_client = caller.client(ChooseExploration, '/planner/choose_exploration')
        self.goal_client = caller.client(SelectGoal, '/planner/select_goal')
        self.step_client = caller.client(PlanStep, '/planner/plan_step')
        self.identify_client = caller.client(Identify, '/identification/identify')
        self._belief: tuple[Belief, ModelBelief] | None = None

    def refusal(self, grid: Grid) -> str | None:
        # The workcell's gripper, as the planner node's (both read the graph's workcell file).
        return too_tall_to_grasp(grid, self.cell.gripper)

    def _stamped(self, X: FloatArray) -> PoseStamped:
        m = PoseStamped()
        m.header.frame_id = self.frame
        m.header.stamp = self.node.get_clock().now().to_msg()
        set_planar_pose(m.pose, X)
        return m

    def _belief_msg(self, belief: Belief, X: FloatArray) -> ModelBelief:
        if self._belief is not None and self._belief[0] is belief:
            return self._belief[1]
        return belief_to_msg(belief, X, ModelBelief(), MassFrictionModel, 0.0)

    @staticmethod
    def _ok(result: Any, what: str) -> Any:
        """``result`` when it succeeded; the planner's answer that there is no solution as
        the core's PlanningError (UncertainBeliefError); any other failure (not active,
        cancelled by someone else, timed out, its own fault, a goal it refused) as a
        WorldError that ends the task as an error: it is no decision, and no stage may
        take it for one (a planner not active was a failed push, and a goal selection
        cancelled elsewhere an internal error)."""
        code = result.error.code
        if code == ErrorCode.UNCERTAIN:
            raise UncertainBeliefError(f'{what}: {result.message}')
        if code == ErrorCode.NO_SOLUTION:
            raise PlanningError(f'{what}: {result.message}')
        if code != ErrorCode.SUCCESS:
            raise WorldError(f'{what}: {result.message} (code {code})', retryable=False)
        return result

    def exploration(
        self,
        grid: Grid,
        X_WO: FloatArray,
        belief: Belief | None,
        done: Sequence[Primitive],
        attempt: int = 0,
        side_W: FloatArray | None = None,
    ) -> Primitive:
        goal = ChooseExploration.Goal()
        grid_to_msg(grid, X_WO, goal.object)
        if belief is not None:
            goal.belief = self._belief_msg(belief, X_WO)
        goal.done = [primitive_to_msg(p, self.cell.fingertip, PushPrimitive()) for p in done]
        goal.seed = self.seed
        goal.attempt = int(attempt)
        if side_W is not None:
            goal.side = [float(v) for v in side_W]
        result = self._ok(
            self.caller.call(self.explore_client, 'exploration choice', goal, TIMEOUTS['plan']),
            'exploration choice',
        )
        return primitive_from_msg(result.primitive)

    def identify(self, grid: Grid, pushes: Sequence[PushSamples]) -> Belief:
        goal = Identify.Goal()
        grid_to_msg(grid, np.zeros(3), goal.grid)
        records = []
        for k, samples in enumerate(pushes):
            msg = PushRecord()
            msg.index = k
            records.append(record_to_msg(samples, msg, PoseStamped, WrenchStamped, self.frame))
        goal.pushes = records
        goal.method = str(self.settings['method'])
        goal.num_models = int(self.settings['models'])
        goal.budget = int(self.settings['budget'])
        goal.seed = self.seed

        def feedback(msg: Any) -> None:
            f = msg.feedback
            self.progress(f'identification: {f.iteration}/{f.iterations_total} simulations')

        result = self.caller.call(
            self.identify_client, 'identification', goal, TIMEOUTS['identify'], feedback
        )
        if result.error.code != ErrorCode.SUCCESS:
            raise NoSolutionError(f'identification: {result.message} (code {result.error.code})')
        belief = belief_from_msg(result.belief)
        self._belief = (belief, result.belief)
        return belief

    def goal(self, belief: Belief, X_WO: FloatArray) -> Goal:
        return self._select(belief, X_WO, False)

    def staging(self, belief: Belief, X_WO: FloatArray) -> Goal:
        return self._select(belief, X_WO, True)

    def _select(self, belief: Belief, X_WO: FloatArray, staging: bool) -> Goal:
        goal = SelectGoal.Goal(
            belief=self._belief_msg(belief, X_WO),
            object_pose=self._stamped(X_WO),
            staging=staging,
        )
        what = 'staging pose selection' if staging else 'goal selection'

        def feedback(msg: Any) -> None:
            self.progress(f'{what}: {msg.feedback.progress:.0%} of the search')

        r = self._ok(
            self.caller.call(self.goal_client, what, goal, TIMEOUTS['plan'], feedback), what
        )
        X_goal = pose_to_planar(r.goal_pose.pose)
        return Goal(
            X_goal,
            float(r.stay_probability),
            float(r.margin),
            float(r.overhang),
            0.0,
            self._grasp(r.grasp_pose),
            bool(r.yaw_free),
            float(r.hold_ratio),
            staging,
        )

    def _grasp(self, pose: PoseStamped) -> Grasp:
        X = pose_to_planar(pose.pose)
        return Grasp(X[:2], float(pose.pose.position.z), float(X[2]), self.cell.gripper.min_grip)

    def _plan(
        self,
        belief: Belief,
        X_WO: FloatArray,
        goal_X: FloatArray,
        index: int,
        grasp_only: bool,
        staging: bool = False,
    ) -> Any:
        goal = PlanStep.Goal(
            belief=self._belief_msg(belief, X_WO),
            object_pose=self._stamped(X_WO),
            goal_pose=self._stamped(goal_X),
            index=int(index),
            seed=self.seed,
            grasp_only=grasp_only,
            staging=staging,
        )
        return self._ok(
            self.caller.call(self.step_client, 'planning', goal, TIMEOUTS['plan']), 'planning'
        )

    def step(self, belief: Belief, X_WO: FloatArray, goal: Goal, index: int) -> Step:
        t0 = time.perf_counter()
        r = self._plan(belief, X_WO, goal.X_WO, index, False, goal.staging)
        if r.done:
            return Step(True, None, None, None, time.perf_counter() - t0)
        waypoints = np.array([pose_to_planar(p.pose) for p in r.path.poses])
        predicted = np.array(
            [[p.position.x, p.position.y, pose_to_planar(p)[2]] for p in r.predicted.poses]
        )
        plan = PushPlan(
            primitive_from_msg(r.push),
            np.array([r.fingertip_start.x, r.fingertip_start.y]),
            predicted,
            float(r.expected_distance),
            float(r.fall_probability),
            int(r.simulations),
        )
        path = SE2Path(waypoints, 0.0, True)
        return Step(False, path, pose_to_planar(r.target.pose), plan, time.perf_counter() - t0)

    def grasp_at(self, belief: Belief, X_WO: FloatArray) -> Grasp | None:
        r = self._plan(belief, X_WO, X_WO, 0, True)
        return self._grasp(r.grasp_pose) if r.graspable else None
