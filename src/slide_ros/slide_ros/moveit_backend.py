"""The executor's ``moveit_py`` backend: MoveIt's Python API on the robot PC.

Only the robot PC (ROS 2 Jazzy from apt, with moveit_py, the arm's MoveIt configuration and
its gripper driver) has what this imports; nothing else in slide imports this module. It
is written against the documented moveit_py API and has not run on the development
machines (no MoveIt there); everything around it is tested with the twin backend.

- Straight tool motions: each waypoint is a Pilz ``LIN`` (Cartesian straight line) plan
  of the planning group to the pose of ``end_effector_link`` that puts the tool (the
  fingertip's centre, ``fingertip_offset`` in that link; or the gripper's pads' front end,
  the link itself) at the waypoint, with the velocity scaled to the waypoint's speed, then
  executed in a worker thread while this one watches the stop (a cancel, the F/T limit,
  shutdown): when it comes mid-segment, the trajectory execution manager's
  ``stop_execution()`` halts the controllers there, not at the segment's end.
- Gripper: a ``control_msgs/GripperCommand`` action (``gripper_action``): position = half
  the opening, max_effort; held when the gripper stalled on an object.
- Tool poses: forward kinematics of the current state.

Set the parameters for the arm: Franka FR3 ``planning_group:=fr3_arm``,
``end_effector_link:=fr3_hand_tcp``; Kuka LBR iiwa 14 ``planning_group:=arm``,
``end_effector_link:=tool0`` (from the vendors' MoveIt configurations).
"""

from __future__ import annotations

from collections.abc import Callable
import math
import threading
import time
from typing import Any

from geometry_msgs.msg import PoseStamped
import numpy as np

from slide_core.model import Waypoint, Workcell
from slide_ros.backends import GRIPPER_WAIT_S, Motion, ToolPose, run_goal
from slide_ros.lifecycle import NotReady

MAX_TOOL_SPEED = 0.25  # m/s: what velocity scaling 1.0 means for a LIN motion (Pilz default)
STOP_WAIT_S = 2.0  # s: how long a stopped segment's execute call is given to return


class MoveItBackend:
    """A Franka FR3 or Kuka LBR iiwa 14 through MoveIt (see the module docstring)."""

    def __init__(self, node: Any, params: dict[str, Any], cell: Workcell, frame: str) -> None:
        from moveit.planning import MoveItPy  # noqa: PLC0415 - robot PC only

        self.node, self.frame, self.cell = node, frame, cell
        self.group_name = str(params['planning_group'])
        self.link = str(params['end_effector_link'])
        self.offset = np.asarray(params['fingertip_offset'], dtype=float)
        self.gripper_action = str(params['gripper_action'])
        self.moveit = MoveItPy(node_name=f'{node.get_name()}_moveit')
        self.arm = self.moveit.get_planning_component(self.group_name)
        self._gripper: Any = None

    def connect(self, timeout_s: float) -> None:
        from control_msgs.action import GripperCommand  # noqa: PLC0415 - robot PC only

        from slide_ros.action_client import SafeActionClient  # noqa: PLC0415

        self._gripper = SafeActionClient(self.node, GripperCommand, self.gripper_action)
        if not self._gripper.wait_for_server(timeout_sec=timeout_s):
            raise NotReady(f'no gripper action {self.gripper_action}')
        if self.tool_pose('fingertip') is None:
            raise NotReady(f'no robot state for {self.group_name}')

    def _link_goal(self, tool: str, wp: Waypoint) -> PoseStamped:
        """The end-effector link's pose that puts ``tool`` at ``wp`` (tool pointing down)."""
        goal = PoseStamped()
        goal.header.frame_id = self.frame
        c, s = math.cos(wp.yaw), math.sin(wp.yaw)
        # Tool z down (a fingertip pointing at the table), x along the yaw.
        R = np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])
        offset = self.offset if tool == 'fingertip' else np.zeros(3)
        p = np.asarray(wp.p_W, dtype=float) - R @ offset
        goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = (float(v) for v in p)
        w = math.sqrt(max(0.0, 1 + R[0, 0] + R[1, 1] + R[2, 2])) / 2
        if w > 1e-6:
            q = (
                (R[2, 1] - R[1, 2]) / (4 * w),
                (R[0, 2] - R[2, 0]) / (4 * w),
                (R[1, 0] - R[0, 1]) / (4 * w),
                w,
            )
        else:  # a half turn: the largest diagonal entry picks the axis
            x = math.sqrt(max(0.0, 1 + R[0, 0] - R[1, 1] - R[2, 2])) / 2
            q = (x, (R[0, 1] + R[1, 0]) / (4 * x), (R[0, 2] + R[2, 0]) / (4 * x), 0.0)
        o = goal.pose.orientation
        o.x, o.y, o.z, o.w = q
        return goal

    def follow(
        self,
        tool: str,
        waypoints: list[Waypoint],
        on_waypoint: Callable[[int, float | None], None],
        should_stop: Callable[[], bool],
    ) -> Motion:
        from moveit.planning import PlanRequestParameters  # noqa: PLC0415 - robot PC only

        for i, wp in enumerate(waypoints):
            if should_stop():
                return Motion(False, True, 'stopped')
            on_waypoint(i, None)  # the move starts now
            self.arm.set_start_state_to_current_state()
            self.arm.set_goal_state(
                pose_stamped_msg=self._link_goal(tool, wp), pose_link=self.link
            )
            request = PlanRequestParameters(self.moveit, 'pilz_lin')
            request.planner_id = 'LIN'
            request.max_velocity_scaling_factor = min(1.0, wp.speed / MAX_TOOL_SPEED)
            request.max_acceleration_scaling_factor = 0.5
            plan = self.arm.plan(single_plan_parameters=request)
            if not plan:
                return Motion(False, message=f'no straight-line plan to waypoint {i}')
            if not self._execute(plan.trajectory, should_stop):
                return Motion(False, True, 'stopped')
            end = time.monotonic() + wp.dwell_s
            while time.monotonic() < end:
                if should_stop():
                    return Motion(False, True, 'stopped')
                time.sleep(0.01)
        return Motion(True)

    def _execute(self, trajectory: Any, should_stop: Callable[[], bool]) -> bool:
        """Execute one segment, watching ``should_stop`` while it runs; False when it was
        stopped (the controllers halted where the arm was). ``moveit.execute`` blocks for
        the whole segment: a cancel or an F/T limit mid-stroke waited for its end."""
        done = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            try:
                self.moveit.execute(trajectory, controllers=[])
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                failed.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name='moveit-execute', daemon=True).start()
        while not done.wait(0.01):
            if should_stop():
                self.moveit.get_trajactory_execution_manager().stop_execution()  # sic: its name
                done.wait(STOP_WAIT_S)
                return False
        if failed:
            raise failed[0]
        return True

    def gripper(
        self, width: float, max_effort: float, should_stop: Callable[[], bool]
    ) -> tuple[float, bool] | None:
        from control_msgs.action import GripperCommand  # noqa: PLC0415 - robot PC only

        goal = GripperCommand.Goal()
        goal.command.position = float(width) / 2
        goal.command.max_effort = float(max_effort)
        what = f'the gripper ({self.gripper_action})'
        result = run_goal(self.node, self._gripper, goal, GRIPPER_WAIT_S, should_stop, what)
        if result is None:
            return None
        return 2.0 * float(result.position), bool(result.stalled and not result.reached_goal)

    def tool_pose(self, tool: str) -> ToolPose | None:
        with self.moveit.get_planning_scene_monitor().read_only() as scene:
            state = scene.current_state
            T = np.asarray(state.get_global_link_transform(self.link))
        R, p = T[:3, :3], T[:3, 3]
        if tool == 'fingertip':
            p = p + R @ self.offset
        yaw = math.atan2(R[1, 0], R[0, 0])
        return ToolPose(p, np.array([0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]), time.time())
