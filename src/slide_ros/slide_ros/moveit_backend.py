"""The executor's ``moveit_py`` backend: MoveIt's Python API on the robot PC.

Only the robot PC (ROS 2 Jazzy from apt, with moveit_py, the arm's MoveIt configuration and
its gripper driver) has what this imports; nothing else in slide imports this module. It
is written against the documented moveit_py API and has not run on the development
machines (no MoveIt there); everything around it is tested with the twin backend.

- Straight tool motions: each waypoint is a Pilz ``LIN`` (Cartesian straight line) plan
  of the planning group to the pose of ``end_effector_link`` that puts the tool (the
  fingertip's centre, the workcell's ``fingertip.mount`` in that link; or the gripper's
  pads' front end, the link itself) at the waypoint, with the velocity scaled to the
  waypoint's speed, then executed in a worker thread while this one watches the stop (a
  cancel, the F/T limit, shutdown): when it comes mid-segment, the trajectory execution
  manager's ``stop_execution()`` halts the controllers there, not at the segment's end.
- Gripper: a ``control_msgs/GripperCommand`` action (``gripper_action``): position = half
  the opening, max_effort; held as the gripper says it (``gripper_held``: :func:`held`).
- Tool poses: forward kinematics of the current state, stamped with the latest
  ``joint_states_topic`` message's stamp (the stream MoveIt's current state follows):
  stamped with the time they were read, a stalled stream's last pose came again and again
  as new, and identification read the fingertip as standing still while it pushed.
- The workcell's obstacles go into MoveIt's planning scene at connect (boxes on the table,
  as tall as the workcell says; one of unknown height a column ``UNKNOWN_HEIGHT`` tall,
  with a warning), so that every plan keeps the whole arm clear of them: the executor
  checks only the fingertip's own path (its strokes, and its way over or around them).

Set the parameters for the arm: Franka FR3 ``planning_group:=fr3_arm``,
``end_effector_link:=fr3_hand_tcp``; Kuka LBR iiwa 14 ``planning_group:=arm``,
``end_effector_link:=tool0`` (from the vendors' MoveIt configurations).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import math
import threading
import time
from typing import Any

from geometry_msgs.msg import Pose, PoseStamped
import numpy as np
from sensor_msgs.msg import JointState
from transforms3d import quaternions

from slide_core.geometry import FloatArray
from slide_core.io import stamp_to_s
from slide_core.model import Obstacle, Waypoint, Workcell
from slide_ros.backends import GRIPPER_WAIT_S, Motion, ToolPose, run_goal
from slide_ros.lifecycle import NotReady
from slide_ros.qos import SENSOR

STOP_WAIT_S = 2.0  # s: how long a stopped segment's execute call is given to return
SQUEEZE_M = 0.002  # m per finger inside the object's width, for grippers that hold by stalling
PILZ = 'pilz_industrial_motion_planner'


class MoveItBackend:
    """A Franka FR3 or Kuka LBR iiwa 14 through MoveIt (see the module docstring)."""

    def __init__(
        self,
        node: Any,
        params: dict[str, Any],
        cell: Workcell,
        frame: str,
        streams: Any = None,
    ) -> None:
        """``streams``: the node the joint states are taken on (``node`` by default): the
        executor's :class:`slide_ros.lifecycle.SideNode`, since its own multi-threaded
        executor took the F/T driver's 250 Hz at 61% of a core, and an arm's joint states
        come at up to 1 kHz."""
        from moveit.planning import MoveItPy  # noqa: PLC0415 - robot PC only

        self.node, self.frame, self.cell = node, frame, cell
        self.group_name = str(params['planning_group'])
        self.link = str(params['end_effector_link'])
        self.offset = np.asarray(cell.p_EF, dtype=float)  # the workcell's fingertip.mount
        self.gripper_action = str(params['gripper_action'])
        # What velocity scaling 1 means for a LIN plan: the arm's Pilz cartesian limit (the
        # 0.25 m/s once assumed here ran pushes 4 times faster than planned on a 1 m/s one).
        self.max_tool_speed = float(params['max_tool_speed'])
        self.held_by = str(params['gripper_held'])
        self.moveit = MoveItPy(node_name=f'{node.get_name()}_moveit')
        self.arm = self.moveit.get_planning_component(self.group_name)
        self._gripper: Any = None
        self._state_stamp: float | None = None  # of the latest joint states [s, ROS time]
        self._streams = node if streams is None else streams
        self._joint_states = self._streams.create_subscription(
            JointState, str(params['joint_states_topic']), self._on_joint_states, SENSOR
        )

    def _on_joint_states(self, msg: JointState) -> None:
        stamp = stamp_to_s(msg.header.stamp)
        # (a driver that leaves its stamps zero: the time they arrive)
        self._state_stamp = (
            stamp if stamp > 0.0 else self.node.get_clock().now().nanoseconds * 1e-9
        )

    def connect(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the arm's first joint states, then for the gripper's
        action server; add the workcell's obstacles to the planning scene."""
        deadline = time.monotonic() + timeout_s
        while self.tool_pose('fingertip') is None:
            if time.monotonic() > deadline:
                raise NotReady(
                    f'no robot state for {self.group_name}: no joint states on '
                    f'{self._joint_states.topic_name} within {timeout_s:g} s'
                )
            time.sleep(0.05)
        from control_msgs.action import GripperCommand  # noqa: PLC0415 - robot PC only

        from slide_ros.action_client import SafeActionClient  # noqa: PLC0415

        if self._gripper is None:  # (a retried configure connects again: one client)
            self._gripper = SafeActionClient(self.node, GripperCommand, self.gripper_action)
        remaining = max(deadline - time.monotonic(), 0.0)
        if not self._gripper.wait_for_server(timeout_sec=remaining):
            raise NotReady(f'no gripper action {self.gripper_action}')
        self._add_obstacles()

    def _add_obstacles(self) -> None:
        """The workcell's obstacles into MoveIt's planning scene (see the module docstring)."""
        from moveit_msgs.msg import CollisionObject  # noqa: PLC0415 - robot PC only
        from shape_msgs.msg import SolidPrimitive  # noqa: PLC0415 - robot PC only

        for k, ob in enumerate(self.cell.obstacles):
            if ob.height is None:
                self.node.get_logger().warning(
                    f'workcell obstacle {k} has no height: the arm is kept out of the '
                    f'{ob.top:g} m column above it (give its height to let it pass over)'
                )
        with self.moveit.get_planning_scene_monitor().read_write() as scene:
            for name, centre, size in scene_boxes(self.cell.obstacles):
                box = CollisionObject()
                box.header.frame_id = self.frame
                box.id = name
                shape = SolidPrimitive()
                shape.type = SolidPrimitive.BOX
                shape.dimensions = [float(v) for v in size]
                pose = Pose()
                pose.position.x, pose.position.y, pose.position.z = (float(v) for v in centre)
                pose.orientation.w = 1.0
                box.primitives.append(shape)
                box.primitive_poses.append(pose)
                box.operation = CollisionObject.ADD
                scene.apply_collision_object(box)
            scene.current_state.update()

    def _link_goal(self, tool: str, wp: Waypoint) -> PoseStamped:
        """The end-effector link's pose that puts ``tool`` at ``wp`` (tool pointing down)."""
        goal = PoseStamped()
        goal.header.frame_id = self.frame
        offset = self.offset if tool == 'fingertip' else np.zeros(3)
        p, q = link_pose(np.asarray(wp.p_W, dtype=float), wp.yaw, offset)
        goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = (float(v) for v in p)
        o = goal.pose.orientation
        o.x, o.y, o.z, o.w = (float(v) for v in q)
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
            # (loaded from 'pilz_lin.plan_request_params', which the arm's configuration
            # may not have: the pipeline was left '' and nothing was planned)
            request.planning_pipeline = PILZ
            request.planner_id = 'LIN'
            request.max_velocity_scaling_factor = min(1.0, wp.speed / self.max_tool_speed)
            request.max_acceleration_scaling_factor = 0.5
            plan = self.arm.plan(single_plan_parameters=request)
            if not plan:
                return Motion(False, message=f'no straight-line plan to waypoint {i}')
            done = self._execute(plan.trajectory, should_stop)
            if done is None:
                return Motion(False, True, 'stopped')
            if done:
                return Motion(False, message=f'waypoint {i}: the arm did not follow: {done}')
            end = time.monotonic() + wp.dwell_s
            while time.monotonic() < end:
                if should_stop():
                    return Motion(False, True, 'stopped')
                time.sleep(0.01)
        return Motion(True)

    def _execute(self, trajectory: Any, should_stop: Callable[[], bool]) -> str | None:
        """Execute one segment, watching ``should_stop`` while it runs: '' when the arm
        followed it, why not when the controllers did not (aborted by a reflex or a path
        tolerance, timed out), None when it was stopped (the controllers halted where the arm
        was). ``moveit.execute`` blocks for the whole segment: a cancel or an F/T limit
        mid-stroke waited for its end."""
        done = threading.Event()
        failed: list[BaseException] = []
        status: list[Any] = []

        def run() -> None:
            try:
                status.append(self.moveit.execute(trajectory, controllers=[]))
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                failed.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name='moveit-execute', daemon=True).start()
        while not done.wait(0.01):
            if should_stop():
                self._execution_manager().stop_execution()
                done.wait(STOP_WAIT_S)
                return None
        if failed:
            raise failed[0]
        return execution_failure(status[0] if status else None)

    def _execution_manager(self) -> Any:
        """The trajectory execution manager, by its name in moveit_py since 2.11 (moveit2
        #2951) or by the misspelt one before it."""
        for name in ('get_trajectory_execution_manager', 'get_trajactory_execution_manager'):
            get = getattr(self.moveit, name, None)
            if get is not None:
                return get()
        raise RuntimeError('moveit_py offers no trajectory execution manager to stop the arm')

    def gripper(
        self, width: float, max_effort: float, should_stop: Callable[[], bool]
    ) -> tuple[float, bool] | None:
        from control_msgs.action import GripperCommand  # noqa: PLC0415 - robot PC only

        goal = GripperCommand.Goal()
        squeeze = self.held_by == 'stalled' and max_effort > 0
        # A position-and-effort controller holds by stalling on the object short of its
        # goal: the goal lies SQUEEZE_M inside the object's width.
        goal.command.position = max(0.0, float(width) / 2 - (SQUEEZE_M if squeeze else 0.0))
        goal.command.max_effort = float(max_effort)
        what = f'the gripper ({self.gripper_action})'
        result = run_goal(self.node, self._gripper, goal, GRIPPER_WAIT_S, should_stop, what)
        if result is None:
            return None
        return 2.0 * float(result.position), held(result, self.held_by)

    def tool_pose(self, tool: str) -> ToolPose | None:
        """The tool's pose in the current state, stamped with the latest joint states'
        stamp; None before the first joint states."""
        stamp = self._state_stamp
        if stamp is None:
            return None
        with self.moveit.get_planning_scene_monitor().read_only() as scene:
            state = scene.current_state
            T = np.asarray(state.get_global_link_transform(self.link))
        R, p = T[:3, :3], T[:3, 3]
        if tool == 'fingertip':
            p = p + R @ self.offset
        yaw = math.atan2(R[1, 0], R[0, 0])
        return ToolPose(p, np.array([0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]), stamp)


def scene_boxes(obstacles: Sequence[Obstacle]) -> list[tuple[str, FloatArray, FloatArray]]:
    """The planning scene's boxes for the workcell's obstacles: (id, centre (3,), size (3,))
    [m] in the table frame, standing on its top, as tall as :attr:`Obstacle.top`."""
    return [
        (
            f'slide_obstacle_{k}',
            np.array([*ob.centre, ob.top / 2]),
            np.array([2 * ob.half_size[0], 2 * ob.half_size[1], ob.top]),
        )
        for k, ob in enumerate(obstacles)
    ]


def execution_failure(status: Any) -> str:
    """Why ``MoveItPy.execute`` did not run a trajectory to its end ('' when it did), from
    the ``ExecutionStatus`` it returns (true when it succeeded; its ``status`` names the
    outcome: ABORTED, PREEMPTED, TIMED_OUT, ...). Older bindings returned nothing, or a bool.
    It had been taken for success whatever it said."""
    if status is None or bool(status):
        return ''
    detail = getattr(status, 'status', None)
    return str(detail) if detail else 'the controllers did not finish it'


def held(result: Any, held_by: str) -> bool:
    """Whether a ``control_msgs/GripperCommand`` result says the object is between the
    fingers. Grippers say it differently: franka_gripper's action grasps, and its
    ``reached_goal`` is the grasp's success (the object's width within its tolerance of the
    goal's), ``stalled`` never set; a position-and-effort controller (ros2_control's
    GripperActionController) ``stalled`` on the object short of a goal inside it. Taking
    ``stalled and not reached_goal`` for every gripper read every Franka grasp as empty."""
    if held_by == 'reached_goal':
        return bool(result.reached_goal)
    return bool(result.stalled and not result.reached_goal)


def link_pose(p_WT: FloatArray, yaw: float, p_LT_L: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The position p_WL (3,) and orientation (x, y, z, w) of the end-effector link L that
    puts the tool point T at p_WT (3,) [m] with the tool pointing down (L's z axis at the
    table) and L's x axis along ``yaw`` [rad]; T is p_LT_L (3,) in L. (The hand-written
    quaternion divided by zero at a yaw of pi: every such pose is a half turn.)"""
    c, s = math.cos(yaw), math.sin(yaw)
    R_WL = np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])
    w, x, y, z = quaternions.mat2quat(R_WL)
    return p_WT - R_WL @ p_LT_L, np.array([x, y, z, w])
