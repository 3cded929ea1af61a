"""The planner node: the task's decisions about pushes and goals, as actions.

- ``~/choose_exploration`` (ChooseExploration): the next exploratory push: random before
  any belief, else the most distinctive one under it (paper 2)
  (:func:`slide_core.task.exploration_push`, the same draws as ``slide episode``).
- ``~/select_goal`` (SelectGoal): the goal at the edge (:func:`slide_core.planning.select_goal`),
  or with ``staging`` a staging pose for a belief too uncertain for a goal
  (:func:`slide_core.planning.select_staging`; its footprint drawn orange, a goal's green).
- ``~/plan_step`` (PlanStep): the closed loop's next decision (done, or the path, the
  waypoint aimed at and the push, with each model's predicted pose), or the grasp at the
  observed pose (``grasp_only``); towards a staging pose (``staging``) under
  :func:`slide_core.planning.staging_config`.

One goal at a time over the three (a second is refused at once). Every action honours
cancel (between its stages, the goal search between the yaws it tries, the exploration
choice and the push stage between their candidates, with their progress as feedback; a
cancelled goal returns nothing). Markers:
``/plan/markers`` (goal footprint, the chosen push, the predicted outcomes), the path on
``/plan/path`` (nav_msgs/Path, latched) and the goal on ``/plan/goal`` (latched); the
workcell's obstacles on ``/workcell/obstacles`` (latched, once).
"""

from __future__ import annotations

import math
import time
from typing import Any

from geometry_msgs.msg import Point, Pose, PoseStamped
from nav_msgs.msg import Path
import numpy as np
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from visualization_msgs.msg import MarkerArray

from slide_core.errors import NoSolutionError, SlideInputError
from slide_core.geometry import FloatArray, rotation
from slide_core.identification import MAX_COM_DIRECTIONS, MAX_MODELS
from slide_core.io import (
    MessageError,
    belief_from_msg,
    grid_from_msg,
    pose_to_planar,
    primitive_from_msg,
    primitive_to_msg,
    set_planar_pose,
)
from slide_core.model import Belief, load_workcell
from slide_core.planning import (
    Grasp,
    PlanningError,
    UncertainBeliefError,
    check_on_table,
    final_grasp,
    next_step,
    planner_config,
    select_goal,
    select_staging,
    step_seed,
)
from slide_core.task import EXPLORATION, exploration_push
from slide_interfaces.action import ChooseExploration, PlanStep, SelectGoal
from slide_interfaces.msg import ErrorCode
from slide_ros.lifecycle import LIFECYCLE_PARAMS, GoalSlot, SlideNode, answer_goal, run
from slide_ros.markers import arrow, clear, footprint, obstacle_markers
from slide_ros.params import Param, declare
from slide_ros.qos import LATCHED

GOAL_RGBA = (0.1, 0.7, 0.1, 1.0)
STAGING_RGBA = (1.0, 0.6, 0.0, 1.0)
"""The goal's footprint in RViz: green for a goal, orange for a staging pose."""

PARAMS = (
    Param('workcell_file', '', 'workcell YAML (default: config/workcell.yaml)'),
    Param(
        'exploration',
        'most-distinctive',
        'exploratory pushes after the first',
        choices=EXPLORATION,
    ),
    Param(
        'overhang_weight',
        0.0,
        'goal preference for overhang (0: what the grasp needs)',
        low=0.0,
        high=100.0,
    ),
    *LIFECYCLE_PARAMS,
)


MAX_BELIEF_MODELS = MAX_MODELS + MAX_COM_DIRECTIONS
"""The most models a goal's belief may have: what identification can make."""


def _unset(pose: Any) -> bool:
    """Whether a geometry_msgs/Pose is as built: at the origin, not turned (or a zero
    quaternion)."""
    p, q = pose.position, pose.orientation
    return not any((p.x, p.y, p.z, q.x, q.y, q.z)) and q.w in (0.0, 1.0)


FEEDBACK_PERIOD_S = 0.1
"""Least time [s] between two feedback messages of the goal search."""


class Cancelled(Exception):  # noqa: N818 - the caller asked; not a fault
    pass


class PlannerNode(SlideNode):
    """The planner's actions (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('planner', **kwargs)
        self.p = declare(self, PARAMS)
        self.cell = load_workcell(self.p['workcell_file'] or None)
        self.config = planner_config(self.cell, overhang_weight=float(self.p['overhang_weight']))
        self.frame = self.cell.table.frame_id
        self.pub_markers = self.create_publisher(MarkerArray, '/plan/markers', LATCHED)
        # The boxes the plans keep clear of, drawn once (latched): they were nowhere in RViz.
        obstacles = self.create_publisher(MarkerArray, '/workcell/obstacles', LATCHED)
        stamp = self.get_clock().now().to_msg()
        obstacles.publish(obstacle_markers(self.cell.obstacles, self.frame, stamp))
        self.pub_path = self.create_publisher(Path, '/plan/path', LATCHED)
        self.pub_goal = self.create_publisher(PoseStamped, '/plan/goal', LATCHED)
        self._goal_marker: Any = None  # the last goal's footprint, drawn with every plan
        group = ReentrantCallbackGroup()
        # One goal at a time, over the three: four long goal searches took every executor
        # thread, and the node answered no goal and no cancel for minutes.
        self._slot = GoalSlot()
        for action, name, execute in (
            (ChooseExploration, '~/choose_exploration', self._exploration),
            (SelectGoal, '~/select_goal', self._goal),
            (PlanStep, '~/plan_step', self._step),
        ):
            ActionServer(
                self,
                action,
                name,
                execute_callback=self._guard(action, execute),
                goal_callback=self._slot.accept,
                cancel_callback=lambda _g: CancelResponse.ACCEPT,
                callback_group=group,
            )
        self.start_up(self.p)

    def _guard(self, action: Any, execute: Any) -> Any:
        """Run ``execute(handle, result)``; failures become error codes, never tracebacks."""

        def wrapped(handle: Any) -> Any:
            out = action.Result()
            return answer_goal(
                self,
                handle,
                out,
                lambda: execute(handle, out),
                slot=self._slot,
                who='planner',
                codes=(
                    ((MessageError, SlideInputError), ErrorCode.INVALID_GOAL),
                    (UncertainBeliefError, ErrorCode.UNCERTAIN),
                    ((PlanningError, NoSolutionError), ErrorCode.NO_SOLUTION),
                ),
                stopped=Cancelled,
            )

        return wrapped

    def idle(self) -> bool:
        return self._slot.free()

    def _check(self, handle: Any) -> None:
        if handle.is_cancel_requested or self.stopping.is_set() or not self.active:
            raise Cancelled

    def _in_frame(self, what: str, header: Any) -> None:
        """SlideInputError (INVALID_GOAL) unless ``header`` names the table frame, or none:
        a pose, grid or belief in another frame was planned with as if it were in it."""
        if header.frame_id not in ('', self.frame):
            raise SlideInputError(f'{what} is in {header.frame_id!r}, not {self.frame}')

    def _belief(self, msg: Any) -> Belief | None:
        return self._read_belief(msg) if msg.models else None

    def _read_belief(self, msg: Any) -> Belief:
        """The belief of a goal, in the table frame, of at most MAX_BELIEF_MODELS models
        (200 were taken: each decision then took seconds a model, and a cancel as long)."""
        self._in_frame('the belief', msg.header)
        self._in_frame("the belief's grid", msg.grid.header)
        if len(msg.models) > MAX_BELIEF_MODELS:
            raise SlideInputError(
                f'the belief has {len(msg.models)} models; identification makes at most '
                f'{MAX_BELIEF_MODELS} (its models and those bounding the centre of mass)'
            )
        return belief_from_msg(msg)

    def _on_table(self, grid: Any, X: FloatArray, what: str = 'the object pose') -> None:
        """SlideInputError (INVALID_GOAL) when X puts no part of the object over the table
        (planned from, with a push 'chosen' for a box 2 m away, and a grasp beside it)."""
        try:
            check_on_table(grid, X, self.config.table)
        except PlanningError as exc:
            raise SlideInputError(f'{what}: {exc}') from None

    def _stamped(self, X: FloatArray, z: float = 0.0) -> PoseStamped:
        m = PoseStamped()
        m.header.frame_id = self.frame
        m.header.stamp = self.get_clock().now().to_msg()
        set_planar_pose(m.pose, X, z)
        return m

    # -- actions ------------------------------------------------------------------------------
    def _exploration(self, handle: Any, out: Any) -> None:
        goal = handle.request
        self._in_frame('the object grid', goal.object.header)
        grid, X = grid_from_msg(goal.object)
        self._on_table(grid, X, "the object grid's pose")
        belief = self._belief(goal.belief)
        if belief is not None:
            if not belief.grid.same_cells(grid):
                # The contact came off the belief's cells, off this object (the executor's
                # outline check was all that stopped it).
                raise SlideInputError(
                    f'the belief is of another grid ({belief.grid.shape} cells of '
                    f'{belief.grid.cell_size} m) than the object ({grid.shape} of '
                    f'{grid.cell_size} m)'
                )
        done = [primitive_from_msg(p) for p in goal.done]
        side = np.asarray(goal.side, dtype=float)
        if side.shape not in ((0,), (2,)):
            raise SlideInputError(
                f'side must be empty or the two components of a direction, got {side.size}'
            )
        self._check(handle)
        feedback = ChooseExploration.Feedback()

        def on_progress(fraction: float) -> None:
            # Each candidate is a rollout of every model: seconds on a large object (a
            # cancel went unheard for 45 s, and no feedback came).
            self._check(handle)
            feedback.progress = float(fraction)
            handle.publish_feedback(feedback)

        primitive = exploration_push(
            grid,
            X,
            belief,
            len(done),
            str(self.get_parameter('exploration').value),
            int(goal.seed),
            self.cell,
            self.config.push_speed,
            int(goal.attempt),
            on_progress,
            side if side.size else None,
        )
        self._check(handle)
        primitive_to_msg(primitive, self.cell.fingertip, out.primitive)

    def _goal(self, handle: Any, out: Any) -> None:
        goal = handle.request
        self._in_frame('the object pose', goal.object_pose.header)
        belief = self._read_belief(goal.belief)
        X = pose_to_planar(goal.object_pose.pose)
        self._on_table(belief.grid, X)
        self._check(handle)
        # What the last plan drew is no plan for this goal (it stayed, beside a goal chosen
        # for another object; or, the search failing, a goal that is not there).
        stamp = self.get_clock().now().to_msg()
        self._clear_plan(stamp, ('plan/goal', 'plan/push', 'plan/predicted'))
        feedback = SelectGoal.Feedback()
        last = [-math.inf]

        def on_progress(fraction: float) -> None:
            # A failing search of a large object takes tens of seconds: it stops on cancel
            # at its next yaw, and says how far it is at most 10 times a second.
            self._check(handle)
            now = time.monotonic()
            if fraction >= 1.0 or now - last[0] >= FEEDBACK_PERIOD_S:
                last[0] = now
                feedback.progress = float(fraction)
                handle.publish_feedback(feedback)

        choose = select_staging if goal.staging else select_goal
        chosen = choose(belief, X, self.config, on_progress)
        self._check(handle)
        out.goal_pose = self._stamped(chosen.X_WO)
        out.stay_probability = chosen.stay_probability
        out.margin, out.overhang = chosen.margin, chosen.overhang
        out.grasp_pose = self._grasp_pose(chosen.grasp)
        out.yaw_free = chosen.yaw_free
        out.hold_ratio = chosen.hold
        self.pub_goal.publish(out.goal_pose)
        markers = MarkerArray()
        stamp = out.goal_pose.header.stamp
        colour = STAGING_RGBA if chosen.staging else GOAL_RGBA
        self._goal_marker = footprint(
            belief, chosen.X_WO, 'plan/goal', 0, colour, self.frame, stamp
        )
        markers.markers = [clear('plan/predicted', self.frame, stamp), self._goal_marker]
        self.pub_markers.publish(markers)

    def _clear_plan(self, stamp: Any, namespaces: tuple[str, ...]) -> None:
        """Clear the plan's markers in ``namespaces`` (and its path): a step that found the
        goal reached, or no plan, left the last push's arrow and predictions drawn."""
        if 'plan/goal' in namespaces:
            self._goal_marker = None
        markers = MarkerArray()
        markers.markers = [clear(ns, self.frame, stamp) for ns in namespaces]
        if self._goal_marker is not None:
            markers.markers.append(self._goal_marker)  # (latched: one array, so again)
        self.pub_markers.publish(markers)
        path = Path()
        path.header.frame_id, path.header.stamp = self.frame, stamp
        self.pub_path.publish(path)

    def _grasp_pose(self, grasp: Grasp) -> PoseStamped:
        return self._stamped(np.array([*grasp.p_WE, grasp.yaw]), grasp.z)

    def _step(self, handle: Any, out: Any) -> None:
        goal = handle.request
        self._in_frame('the object pose', goal.object_pose.header)
        belief = self._read_belief(goal.belief)
        X = pose_to_planar(goal.object_pose.pose)
        self._on_table(belief.grid, X)
        if goal.grasp_only:
            self._grasp(belief, X, out)
            return
        self._in_frame('the goal pose', goal.goal_pose.header)
        if not goal.goal_pose.header.frame_id and _unset(goal.goal_pose.pose):
            # (read as a goal at the table's corner, 'too little of the belief stays')
            raise SlideInputError('the goal pose is not set (no frame, at the origin)')
        feedback = PlanStep.Feedback()

        def on_stage(stage: str) -> None:
            self._check(handle)
            feedback.stage = stage
            handle.publish_feedback(feedback)

        try:
            step = next_step(
                belief,
                X,
                pose_to_planar(goal.goal_pose.pose),
                self.config,
                seed=step_seed(int(goal.seed), int(goal.index)),
                on_stage=on_stage,
                staging=bool(goal.staging),
            )
        except PlanningError:
            self._clear_plan(self.get_clock().now().to_msg(), ('plan/push', 'plan/predicted'))
            raise
        self._check(handle)
        if step.done:
            out.done = True
            self._grasp(belief, X, out)
            self._clear_plan(self.get_clock().now().to_msg(), ('plan/push', 'plan/predicted'))
            return
        assert step.path is not None and step.push is not None and step.target is not None
        push = step.push
        stamp = self.get_clock().now().to_msg()
        out.path.header.frame_id, out.path.header.stamp = self.frame, stamp
        out.path.poses = [self._stamped(w) for w in step.path.waypoints]
        out.target = self._stamped(step.target)
        primitive_to_msg(push.primitive, self.cell.fingertip, out.push)
        out.fingertip_start = Point(x=float(push.p_WF0[0]), y=float(push.p_WF0[1]), z=0.0)
        out.predicted.header.frame_id, out.predicted.header.stamp = self.frame, stamp
        for Xk in push.predicted_X_WO:
            pose = Pose()
            set_planar_pose(pose, Xk)
            out.predicted.poses.append(pose)
        out.expected_distance = push.expected_distance
        out.fall_probability = push.fall_probability
        out.simulations = push.simulations
        self.pub_path.publish(out.path)
        d_W = rotation(float(X[2])) @ push.primitive.d_O
        markers = MarkerArray()
        markers.markers = [
            clear('plan/predicted', self.frame, stamp),
            arrow(push.p_WF0, d_W, push.primitive.travel, 'plan/push', self.frame, stamp),
        ]
        if self._goal_marker is not None:
            # The topic is latched and keeps one array: a viewer that joined after a step
            # saw no goal.
            markers.markers.append(self._goal_marker)
        for k, Xk in enumerate(push.predicted_X_WO):
            alpha = 0.2 + 0.8 * float(belief.weight[k])
            markers.markers.append(
                footprint(
                    belief, Xk, 'plan/predicted', k, (0.2, 0.4, 1.0, alpha), self.frame, stamp
                )
            )
        self.pub_markers.publish(markers)

    def _grasp(self, belief: Belief, X: FloatArray, out: Any) -> None:
        grasp = final_grasp(belief, X, self.config)
        out.graspable = grasp is not None
        if grasp is not None:
            out.grasp_pose = self._grasp_pose(grasp)


def main() -> int:
    return run(PlannerNode, 'planner_node')


if __name__ == '__main__':
    raise SystemExit(main())
