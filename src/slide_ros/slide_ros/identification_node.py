"""The identification node: a belief over (mass, friction) maps from pushes.

Action ``~/identify`` (slide_interfaces/Identify): the pushes come in the goal (push
records, as the executor returns them) or from a bag on disk (``bag``: offline
identification without a replay). Feedback: simulations used and the best loss so far.
Cancel stops the optimiser; nothing half-made is returned or published.

Publishes the latest belief on ``/belief`` (slide_interfaces/ModelBelief, latched) and
RViz markers on ``/belief/markers``: the most probable model's mass and friction maps over
the object at its latest pose (``/object/pose``, drawn again as it moves), every model's
centre of mass sized by its weight.
"""

from __future__ import annotations

from collections.abc import Callable
import math
import threading
import time
from typing import Any

from geometry_msgs.msg import PoseStamped
import numpy as np
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from visualization_msgs.msg import MarkerArray

from slide_core.errors import NoSolutionError, SlideError, SlideInputError
from slide_core.geometry import wrap_angle
from slide_core.identification import (
    COM_DIRECTIONS,
    DEFAULT_BUDGET,
    DENSITY_MAX,
    FRICTION_BOUND,
    MAX_BUDGET,
    MAX_COM_DIRECTIONS,
    MAX_MODELS,
    Bounds,
    IdentificationCancelledError,
    TrainingSet,
    calibrated_pushes,
    check_limits,
    check_settings,
    fit_problems,
    identify,
)
from slide_core.io import (
    MessageError,
    belief_to_msg,
    grid_from_msg,
    mount_rotation,
    pose_to_planar,
    read_pushes,
    record_from_msg,
)
from slide_core.model import Belief, load_workcell
from slide_core.physics import DEFAULT_SUPPORT, SUPPORT_MODELS
from slide_core.task import CONTACT_OFFSET_MODES, IdentificationSettings, TaskSettings
from slide_interfaces.action import Identify
from slide_interfaces.msg import ErrorCode, MassFrictionModel, ModelBelief
from slide_ros.lifecycle import (
    LIFECYCLE_PARAMS,
    GoalFailed,
    GoalSlot,
    SlideNode,
    answer_goal,
    run,
)
from slide_ros.markers import belief_markers
from slide_ros.params import Param, declare
from slide_ros.qos import LATCHED, RELIABLE

REDRAW_PERIOD_S = 0.2
"""How often [s] the belief's maps are looked at again, to be drawn where the object is."""
REDRAW_MOVE_M, REDRAW_TURN_RAD = 0.002, 0.02
"""How far the object moves [m], or turns [rad], before its maps are drawn again."""
PARAMS = (
    Param('workcell_file', '', 'workcell YAML (default: config/workcell.yaml)'),
    Param(
        'temperature', 0.05, 'softmax temperature, relative to the best loss', low=1e-4, high=10.0
    ),
    Param(
        'default_budget',
        DEFAULT_BUDGET,
        'simulations when the goal asks for 0',
        low=1,
        high=MAX_BUDGET,
    ),
    Param('default_models', 8, 'models when the goal asks for 0', low=1, high=MAX_MODELS),
    Param(
        'push_moment',
        True,
        "fit with the push's moment shifting the table's pressure (the fingertip's height on "
        'each cell); the belief records it for the simulators that plan with it',
    ),
    Param(
        'com_directions',
        COM_DIRECTIONS,
        'probabilistic: the belief also holds, per direction (this many), the model with the '
        'centre of mass furthest along it that the pushes allow (0: the K models alone)',
        low=0,
        high=MAX_COM_DIRECTIONS,
    ),
    Param(
        'sensor_mount',
        [0.0, 0.0, 0.0, 1.0],
        "bag goals: the F/T sensor's orientation in the fingertip tool frame, quaternion x, "
        "y, z, w (the executor's parameter), for wrenches recorded in the sensor's frame "
        '(/netft/wrench without /ft/wrench); the arm graphs set it',
    ),
    Param(
        'contact_offset',
        TaskSettings.contact_offset,
        "the fingertip's offset from the object measured on the goal's pushes (the camera's "
        "and the arm's calibrations apart), said above 1 mm: auto also takes one above 1 mm, "
        'told from three push directions or more, off the fingertip before the fit, as the '
        'task and slide identify do; check only says it',
        choices=CONTACT_OFFSET_MODES,
    ),
    Param(
        'support',
        DEFAULT_SUPPORT,
        "how the table carries the object's cells: a rigid body's linear pressure, or each "
        "cell's own weight (the papers')",
        choices=SUPPORT_MODELS,
    ),
    *LIFECYCLE_PARAMS,
)


class IdentificationNode(SlideNode):
    """Identification as an action (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('identification', **kwargs)
        self.p = declare(self, PARAMS)
        self.cell = load_workcell(self.p['workcell_file'] or None)
        self.frame = self.cell.table.frame_id
        # The defaults a goal of zeros gets must make an identification (a budget below
        # the models was taken at start-up, and every such goal then refused).
        check_settings(
            'probabilistic',
            int(self.p['default_models']),
            int(self.p['default_budget']),
            int(self.p['com_directions']),
            {'K': 'default_models', 'budget': 'default_budget'},
        )
        try:
            mount_rotation(self.p['sensor_mount'])
        except SlideInputError as exc:
            raise SlideInputError(f'sensor_mount: {exc}') from None
        self.sensor_mount = [float(v) for v in self.p['sensor_mount']]
        self._lock = threading.Lock()
        # One identification at a time: two ran at once, and the latched /belief ended with
        # whichever finished last, the older goal's.
        self._slot = GoalSlot()
        self._pose: Any = None
        self._drawn: tuple[Belief, np.ndarray] | None = None  # the belief's maps, where drawn
        self.pub_belief = self.create_publisher(ModelBelief, '/belief', LATCHED)
        self.pub_markers = self.create_publisher(MarkerArray, '/belief/markers', LATCHED)
        self.create_subscription(PoseStamped, '/object/pose', self._on_pose, RELIABLE)
        self.create_timer(REDRAW_PERIOD_S, self._redraw)
        self.server = ActionServer(
            self,
            Identify,
            '~/identify',
            execute_callback=self._execute,
            goal_callback=self._slot.accept,
            cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup(),
        )
        self.start_up(self.p)

    def _on_pose(self, msg: PoseStamped) -> None:
        frame = msg.header.frame_id
        if frame not in ('', self.frame):  # the belief was drawn at camera coordinates
            self.get_logger().warning(
                f'an object pose in {frame!r} is ignored: the belief is drawn in {self.frame!r}',
                throttle_duration_sec=5.0,
            )
            return
        self._pose = msg

    def idle(self) -> bool:
        return self._slot.free()

    def _pushes(
        self, goal: Any, should_stop: Callable[[], bool]
    ) -> tuple[Any, list[Any], str, list[str]]:
        """The grid and the pushes on identification's step, from the goal or its bag, what
        they are, and what was wrong with them that left data to use (a bag's warnings and
        skipped pushes: the result said '2 pushes' of 4 asked for, and nothing of why).
        IdentificationCancelledError when ``should_stop`` says so between two pushes (each
        takes up to half a second: a cancel waited 8 s for 40)."""
        if goal.bag:
            wanted = [int(i) for i in goal.bag_pushes] or None
            read = read_pushes(goal.bag, wanted, sensor_mount=self.sensor_mount)
            return (
                read.grid,
                read.pushes,
                f'{len(read.pushes)} pushes of {goal.bag}',
                read.report(),
            )
        grid, _ = grid_from_msg(goal.grid)
        pushes = []
        for r in goal.pushes:
            if should_stop():
                raise IdentificationCancelledError(
                    f'cancelled while reading the pushes ({len(pushes)} of {len(goal.pushes)})'
                )
            try:
                pushes.append(record_from_msg(r, self.frame).to_data(grid, int(r.index)))
            except MessageError as exc:  # (it did not say which push)
                raise MessageError(f'push {r.index}: {exc}') from None
        return grid, pushes, f'{len(pushes)} pushes', []

    @staticmethod
    def _check_fields(goal: Any) -> None:
        """SlideInputError when the goal's fields contradict each other (a bag and pushes
        both given: the pushes were ignored; bag_pushes without a bag: ignored too)."""
        if goal.bag and goal.pushes:
            raise SlideInputError(
                f'the goal gives both a bag and {len(goal.pushes)} pushes: give one of them'
            )
        if goal.bag_pushes and not goal.bag:
            raise SlideInputError('bag_pushes selects pushes of a bag, and the goal gives none')
        indices = [int(r.index) for r in goal.pushes]
        if len(set(indices)) < len(indices):
            # (the same push sent 4 times was weighed 4 times)
            raise SlideInputError(f'pushes: an index is given more than once: {indices}')

    def _settings(self, goal: Any) -> tuple[IdentificationSettings, float, float]:
        """The goal's method, K and budget, and its density and friction bounds (0: the
        defaults); SlideInputError naming the field when they cannot make an identification
        (checked before any data is read, so that the answer is INVALID_GOAL, not
        BAD_DATA)."""
        method = goal.method or 'probabilistic'
        K = int(goal.num_models) or int(self.p['default_models'])
        budget = int(goal.budget) or int(self.p['default_budget'])
        com_directions = int(self.get_parameter('com_directions').value)
        check_settings(method, K, budget, com_directions, {'K': 'num_models'})
        settings = IdentificationSettings(method=method, K=K, budget=budget)
        density_max = float(goal.density_max) or DENSITY_MAX
        friction_max = float(goal.friction_max) or FRICTION_BOUND
        check_limits(density_max, friction_max)
        return settings, density_max, friction_max

    def _execute(self, handle: Any) -> Identify.Result:
        result = Identify.Result()
        return answer_goal(
            self,
            handle,
            result,
            lambda: self._identify(handle, result),
            slot=self._slot,
            who='identification node',
            codes=(
                ((MessageError, SlideInputError), ErrorCode.BAD_DATA),
                ((NoSolutionError, SlideError), ErrorCode.NO_SOLUTION),
            ),
            stopped=IdentificationCancelledError,
        )

    def _identify(self, handle: Any, result: Identify.Result) -> None:
        """Identify from the goal's pushes and fill ``result`` (raises as
        :func:`answer_goal` maps: a goal's bad field is INVALID_GOAL, bad data BAD_DATA)."""
        goal = handle.request
        try:
            self._check_fields(goal)
            settings, density_max, friction_max = self._settings(goal)
        except SlideInputError as exc:
            raise GoalFailed(ErrorCode.INVALID_GOAL, str(exc)) from None
        t0 = time.perf_counter()
        feedback = Identify.Feedback()
        last = [0.0]

        def progress(used: int, total: int, best: float) -> None:
            now = time.monotonic()
            if now - last[0] > 0.1 or used >= total:
                last[0] = now
                feedback.iteration, feedback.iterations_total = used, total
                feedback.best_loss = best if math.isfinite(best) else float('nan')
                handle.publish_feedback(feedback)

        def stop() -> bool:
            # Deactivated: stopped as on a cancel (it published its belief on an inactive
            # node).
            return bool(handle.is_cancel_requested or self.stopping.is_set() or not self.active)

        progress(0, settings.budget, math.inf)  # (the first came seconds after the goal)
        grid, pushes, what, read_problems = self._pushes(goal, stop)
        for line in read_problems:
            self.get_logger().warning(f'{goal.bag}: {line}')
        # The camera's and the arm's calibrations, checked on where the fingertip touched
        # (and an offset above a millimetre taken off, as the task and slide identify do).
        take_off = str(self.get_parameter('contact_offset').value) == 'auto'
        calibrated = calibrated_pushes(grid, pushes, self.cell.fingertip.radius, take_off)
        pushes = calibrated.pushes
        for line in calibrated.problems():
            self.get_logger().warning(line)
            read_problems.append(line)
        bounds = Bounds.from_grid(grid, density_max, friction_max)
        tips = bool(self.get_parameter('push_moment').value)
        height = self.cell.fingertip.push_heights(grid, tips)
        train = TrainingSet.from_pushes(grid, pushes, str(self.p['support']), height)
        found = identify(
            train,
            settings.method,
            bounds=bounds,
            K=settings.K,
            budget=settings.budget,
            temperature=float(self.get_parameter('temperature').value),
            com_directions=int(self.get_parameter('com_directions').value),
            seed=int(goal.seed),
            progress=progress,
            should_stop=stop,
        )
        belief = found.belief
        X = self._object_pose(goal)
        msg = belief_to_msg(
            belief,
            X,
            ModelBelief(),
            MassFrictionModel,
            float(self.get_parameter('temperature').value),
        )
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.frame
        msg.grid.header = msg.header
        self.pub_belief.publish(msg)
        with self._lock:
            self.pub_markers.publish(belief_markers(belief, X, self.frame, msg.header.stamp))
            self._drawn = (belief, X)
        result.message = (
            f'{belief.K} model(s) from {what} in {time.perf_counter() - t0:.2f} s '
            f'({found.simulations} simulations)'
        )
        if train.still:
            read_problems.append(
                f'the object did not move in push(es) {list(train.still)}: they add nothing '
                'to the fit'
            )
        if read_problems:
            result.message += '; ' + '; '.join(read_problems)
        pressed = fit_problems(train, belief, bounds)
        for line in pressed:
            self.get_logger().warning(f'the most probable model: {line}')
        if pressed:
            result.message += '; the most probable model: ' + '; '.join(pressed)
        result.belief = msg
        result.simulations = found.simulations
        result.seconds = found.seconds
        self.get_logger().info(result.message)

    def _redraw(self) -> MarkerArray | None:
        """The belief's maps drawn again where the object is now, when it has moved since
        (they stayed at the pose it was identified at while the object was pushed away);
        the markers published, or None."""
        pose = self._pose
        with self._lock:
            if self._drawn is None or pose is None:
                return None
            belief, X_drawn = self._drawn
            try:
                X = pose_to_planar(pose.pose)
            except MessageError:
                return None
            turn = abs(float(wrap_angle(X[2] - X_drawn[2])))
            if np.linalg.norm(X[:2] - X_drawn[:2]) < REDRAW_MOVE_M and turn < REDRAW_TURN_RAD:
                return None
            markers = belief_markers(belief, X, self.frame, self.get_clock().now().to_msg())
            self.pub_markers.publish(markers)
            self._drawn = (belief, X)
            return markers

    def _object_pose(self, goal: Any) -> np.ndarray:
        """The object's pose to draw the belief at: the latest observed, else the grid's."""
        pose = self._pose
        if pose is not None:
            try:
                return pose_to_planar(pose.pose)
            except MessageError:
                pass
        try:
            return pose_to_planar(goal.grid.pose)
        except MessageError:
            return np.zeros(3)


def main() -> int:
    return run(IdentificationNode, 'identification_node')


if __name__ == '__main__':
    raise SystemExit(main())
