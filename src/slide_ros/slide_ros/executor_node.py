"""The executor node: pushes and grasps on the arm, with what identification needs recorded.

Actions ``~/push`` (slide_interfaces/Push) and ``~/grasp`` (slide_interfaces/Grasp). One code
path turns a push primitive, resolved at the observed object pose, into fingertip
waypoints (:func:`slide_core.model.push_waypoints`: approach above, lower, stroke, settle,
retract, lift) and a grasp into gripper waypoints
(:func:`slide_core.planning.grasp_waypoints`); the ``backend`` parameter says who moves the
arm: ``twin`` (the twin node's motion actions) or ``moveit_py`` (MoveIt on the robot PC,
:mod:`slide_ros.moveit_backend`).

While it runs it publishes, on the topics ``slide_core.io.read_pushes`` reads as they are:
``/pusher/pose`` and ``/gripper/pose`` (the tools, table frame; perception cuts them out
of the cloud), ``/ft/wrench`` (the driver's wrench turned into the table frame through the
tool's pose and the sensor's mounting, header frame the table's), ``/push/primitive``,
``/push/start`` and ``/push/end`` (the push's index, stamped with the stroke's start and
end: the record's ``start`` and ``end``), and for RViz ``/ft/marker`` (the force as an
arrow at the fingertip). A push's result carries its record (object poses
from perception, fingertip poses, wrenches), also when a cancel, a deactivation or a failed
motion stopped it after its stroke (its message says so). Before each push it tares the F/T sensor
through the driver's bias service (``ft_bias``; parameter ``tare``), with the fingertip
retracted in free air (lifted first when it is lower), so that the driver's force limit and
``/ft/wrench`` read the push alone.

Refusals and failures say why in the result's error code: a stale object pose
(``max_pose_age_s``), a contact point off the object's outline (``contact_tolerance_m``),
a stroke whose fingertip would come within its radius and 3 mm of one of the workcell's
obstacles (INVALID_GOAL, naming it: the planner keeps its pushes clear of them, so the
sender planned with another workcell file, or none), a move through the air to the push
with no way over or around the obstacles (:func:`slide_core.model.over_obstacles`; the
fingertip goes over one of known height and around one of unknown height),
cancel (the fingertip stops, pulls back and lifts), an F/T limit event from the driver
(``ft_limit`` topic: the same), an F/T wrench stream that falls silent before or during the
push (``max_wrench_gap_s``: the driver's force limit and the push's record both need it; the
push does not start, or stops, as on a limit), fingertip poses that stop coming during the
stroke (``max_tip_gap_s``: an arm state stream that stalled; the record would show the
fingertip standing, so it is not used; a tool pose no newer than the last is never sent
again), a tare the driver refused or did not answer
(the push does not start), a failed motion, the node deactivated mid-motion (it stops as
on a cancel), a fault of the arm or of this code (INTERNAL, with the reason). Every failure
retracts the tool. A grasp that ends before its lift opens the fingers and leaves the way it
came in, back along its approach and up (straight up, the lower pad under the overhang
caught it); a cancel before the gripper came down moves nothing, and after the lift the
gripper holds the object where it stopped. A retract the arm does not complete (an arm, or
a twin, that stopped answering: the twin backend notices within 3 s) is MOTION_FAILED
saying so. One goal at a time: a push or grasp sent while another is taken is refused when
it arrives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
import math
import threading
import time
import traceback
from typing import Any

from geometry_msgs.msg import PoseStamped, WrenchStamped
import numpy as np
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker

from slide_core.geometry import FloatArray, distance_to_cells
from slide_core.identification import MAX_TIP_GAP_S, PushSamples, longest_gap
from slide_core.io import (
    MessageError,
    grid_from_msg,
    marker_to_msg,
    pose_to_planar,
    primitive_from_msg,
    primitive_to_msg,
    record_to_msg,
    set_stamp,
    stamp_to_s,
)
from slide_core.model import (
    APPROACH_CLEARANCE,
    LIFT,
    Primitive,
    PrimitiveError,
    Waypoint,
    approach_clear,
    load_workcell,
    over_obstacles,
    push_waypoints,
    retract_waypoints,
    stroke_clear,
)
from slide_core.planning import (
    PRE_GRASP_HEIGHT,
    Grasp,
    PlanningError,
    check_on_table,
    grasp_waypoints,
    grasp_withdrawal,
)
from slide_interfaces.action import Grasp as GraspAction
from slide_interfaces.action import Push
from slide_interfaces.msg import ErrorCode, ObjectGrid, PushMarker, PushPrimitive
from slide_ros.backends import Backend, Motion, TwinBackend
from slide_ros.lifecycle import (
    LIFECYCLE_PARAMS,
    GoalSlot,
    NotReady,
    SideNode,
    SlideNode,
    call_idempotent,
    end_stopped,
    run,
)
from slide_ros.markers import force_arrow
from slide_ros.params import MAX_POSE_AGE, Param, declare
from slide_ros.qos import LATCHED, RELIABLE, SENSOR_KEEP

CLOCK_JUMP_S = 1.0
"""A tool pose stamped this far [s] behind the last one is of a clock that went back (a
restarted twin), not a stale one."""

PARAMS = (
    Param('backend', 'twin', 'who moves the arm', choices=('twin', 'moveit_py')),
    Param('workcell_file', '', 'workcell YAML (default: config/workcell.yaml)'),
    Param('twin_namespace', '/twin', 'twin backend: the twin node'),
    MAX_POSE_AGE,
    Param(
        'contact_tolerance_m',
        0.004,
        'how far the contact point may be from the cells [m]',
        read_only=False,
        low=0.0,
        high=0.05,
    ),
    Param(
        'sensor_mount',
        [0.0, 0.0, 0.0, 1.0],
        'F/T sensor orientation in the fingertip tool frame (z up, x along the tool yaw), '
        'quaternion x, y, z, w; a sensor square on an arm flange whose z points at the '
        'table is 1, 0, 0, 0 (the arm graphs set it)',
    ),
    Param(
        'tare',
        True,
        'tare the F/T sensor (the bias service of the driver, on ft_bias) before each push, '
        'with the fingertip in free air: the force limit of the driver and /ft/wrench then '
        'read the push alone',
        read_only=False,
    ),
    Param(
        'max_wrench_gap_s',
        0.5,
        'the longest the F/T wrench stream may fall silent before or during a push [s]: '
        'a push then does not start, or stops and retracts (no force limit acts on a '
        'silent sensor, and its record would lack the forces)',
        read_only=False,
        low=0.01,
        high=10.0,
    ),
    Param(
        'max_tip_gap_s',
        MAX_TIP_GAP_S,
        "the longest the fingertip's poses may stop coming during a push's stroke [s]: its "
        'record would show the fingertip standing still or jumping there (an arm state '
        'stream that stalled), so the push fails (TIMEOUT) and its record is not used',
        read_only=False,
        low=0.01,
        high=10.0,
    ),
    Param('connect_timeout_s', 10.0, 'configure: wait this long for the arm', low=0.1, high=600.0),
    Param(
        'measurement_wait_s',
        5.0,
        'wait this long at most for object poses and wrenches that cover a push, and before '
        'one for a lagging F/T queue to catch up [s]',
        read_only=False,
        low=0.0,
        high=60.0,
    ),
    Param('tool_rate_hz', 30.0, 'tool pose messages per second', low=1.0, high=200.0),
    Param('planning_group', 'fr3_arm', 'moveit_py: planning group'),
    Param('end_effector_link', 'fr3_hand_tcp', 'moveit_py: link the tool offsets refer to'),
    Param(
        'gripper_action',
        '/fr3_gripper/gripper_action',
        'moveit_py: control_msgs/GripperCommand action of the gripper',
    ),
    Param(
        'gripper_held',
        'reached_goal',
        'moveit_py: the GripperCommand result field that says the object is held: '
        "reached_goal (franka_gripper's grasp) or stalled (a position-and-effort controller)",
        choices=('reached_goal', 'stalled'),
    ),
    Param(
        'joint_states_topic',
        '/joint_states',
        "moveit_py: the arm's sensor_msgs/JointState stream MoveIt's current state follows; "
        "its stamps stamp the tool poses (a stream that stalls stalls the tool's poses, "
        'instead of the same pose coming again as new)',
    ),
    Param(
        'max_tool_speed',
        1.0,
        "moveit_py: the arm's Pilz cartesian_limits.max_trans_vel [m/s], what a LIN plan's "
        "velocity scaling 1 means (a value below the arm's runs pushes faster than planned)",
        low=0.01,
        high=5.0,
    ),
    *LIFECYCLE_PARAMS,
)

GRID_WAIT_S = 5.0
"""How long a push waits for the object grid perception latches [s] before refusing."""
TARE_TIMEOUT_S = 2.0
"""How long a push waits for the F/T driver to take a tare [s] before it fails."""
TARE_HEIGHT_SLACK = 0.01
"""How far [m] under ``LIFT`` the fingertip may be and still count as lifted for a tare."""
FORCE_MARKER_RATE_HZ = 20.0
"""How often [Hz] the force arrow at the fingertip (``/ft/marker``) is drawn at most."""


def quaternion_matrix(q: FloatArray) -> FloatArray:
    """Rotation matrix (3, 3) of a unit quaternion (x, y, z, w)."""
    x, y, z, w = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


class Failure(Exception):  # noqa: N818 - carries an error code for the result
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class RetractFailed(RuntimeError):  # noqa: N818 - the arm did not pull the tool clear
    """A retract's motion did not complete: where the tool is, is not known (an arm that
    stopped answering, or a controller's error)."""


class ExecutorNode(SlideNode):
    """Pushes and grasps (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('executor', **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        self.cell = load_workcell(p['workcell_file'] or None)
        self.frame = self.cell.table.frame_id
        mount = np.asarray(p['sensor_mount'], dtype=float)
        if mount.shape != (4,) or not np.isfinite(mount).all() or np.linalg.norm(mount) < 0.5:
            raise ValueError(f'sensor_mount must be a unit quaternion x, y, z, w, got {mount}')
        self.R_TS = quaternion_matrix(mount / np.linalg.norm(mount))  # sensor in the tool
        self.backend: Backend | None = None  # once connected
        self._made: Backend | None = None
        self._group = ReentrantCallbackGroup()
        self._slot = GoalSlot()  # one push or grasp at a time
        self._lock = threading.Lock()
        self._grid: Any = None
        self._poses: deque[tuple[float, FloatArray]] = deque(maxlen=2000)
        self._tips: deque[tuple[float, FloatArray]] = deque(maxlen=5000)
        self._tool_stamps: dict[str, float] = {}  # of the last pose published per tool
        self._wrenches: deque[tuple[float, FloatArray]] = deque(maxlen=20000)
        self._limit = threading.Event()
        self._wrench_seen = -math.inf  # time.monotonic() of the last usable wrench
        self.bad_messages = 0
        self.pub_pusher = self.create_publisher(PoseStamped, '/pusher/pose', RELIABLE)
        self.pub_gripper = self.create_publisher(PoseStamped, '/gripper/pose', RELIABLE)
        self.pub_wrench = self.create_publisher(WrenchStamped, '/ft/wrench', RELIABLE)
        self.pub_force = self.create_publisher(Marker, '/ft/marker', RELIABLE)
        self._force_drawn = 0.0  # when the force arrow was last sent (monotonic [s])
        self.pub_start = self.create_publisher(PushMarker, '/push/start', RELIABLE)
        self.pub_end = self.create_publisher(PushMarker, '/push/end', RELIABLE)
        self.pub_primitive = self.create_publisher(PushPrimitive, '/push/primitive', RELIABLE)
        self.create_subscription(ObjectGrid, '/object/grid', self._on_grid, LATCHED)
        # The streams (the F/T driver's 250 Hz, perception's poses) on a node of their own
        # with a single-threaded executor (SideNode: this node's multi-threaded one took them
        # at 61% of a core and fell up to 3.7 s behind the driver).
        self._sensors = SideNode(self, 'executor_sensors')
        self._sensors.node.create_subscription(
            PoseStamped, '/object/pose', self._on_pose, RELIABLE
        )
        self._sensors.node.create_subscription(
            WrenchStamped, self.resolve_topic_name('ft_wrench'), self._on_wrench, SENSOR_KEEP
        )
        self.create_subscription(WrenchStamped, 'ft_limit', self._on_limit, 10)
        # A group of its own: the push's execute callback waits for the answer.
        self.tare_client = self.create_client(
            Trigger, 'ft_bias', callback_group=MutuallyExclusiveCallbackGroup()
        )
        self.push_server = ActionServer(
            self,
            Push,
            '~/push',
            execute_callback=self._push,
            goal_callback=self._slot.accept,
            cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=self._group,
        )
        self.grasp_server = ActionServer(
            self,
            GraspAction,
            '~/grasp',
            execute_callback=self._grasp,
            goal_callback=self._slot.accept,
            cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=self._group,
        )
        self.create_timer(1.0 / float(p['tool_rate_hz']), self._publish_tools)
        self.start_up(p)

    def destroy_node(self) -> None:
        self._sensors.destroy()
        super().destroy_node()

    # -- lifecycle ---------------------------------------------------------------------------
    def configure(self) -> None:
        # The backend is made once: a retried start-up (the arm or the F/T not there yet)
        # connects the same one again instead of adding clients, subscriptions and, for
        # moveit_py, a second MoveItPy node with every retry.
        if self._made is None:
            if self.p['backend'] == 'twin':
                self._made = TwinBackend(self, self.p['twin_namespace'], self.frame, self._group)
            else:
                from slide_ros.moveit_backend import MoveItBackend

                self._made = MoveItBackend(
                    self, self.p, self.cell, self.frame, streams=self._sensors.node
                )
        self._made.connect(float(self.p['connect_timeout_s']))
        self.backend = self._made
        with self._lock:
            latest = self._wrenches[-1][0] if self._wrenches else -math.inf
        if self._now() - latest > 1.0:
            raise NotReady('no wrench from the F/T driver on ft_wrench in the last second')
        if self.get_parameter('tare').value and not self.tare_client.wait_for_service(
            timeout_sec=float(self.p['connect_timeout_s'])
        ):
            raise NotReady(
                f'no F/T bias service on {self.tare_client.srv_name}: is the driver running? '
                '(or set tare false)'
            )

    def idle(self) -> bool:
        return self._slot.free()

    # -- inputs (store and return) ------------------------------------------------------------
    def _on_grid(self, msg: ObjectGrid) -> None:
        try:
            grid, _ = grid_from_msg(msg)
        except MessageError as exc:
            self.bad_messages += 1
            self.get_logger().warning(f'ignored an object grid: {exc}')
            return
        self._grid = grid

    def _on_pose(self, msg: PoseStamped) -> None:
        frame = msg.header.frame_id
        if frame not in ('', self.frame):
            # Recorded as table-frame poses, a push's record gave identification camera
            # coordinates, and the push succeeded.
            self.bad_messages += 1
            self.get_logger().warning(
                f'an object pose in {frame!r} is ignored: perception must publish it in '
                f'{self.frame!r}',
                throttle_duration_sec=5.0,
            )
            return
        try:
            X = pose_to_planar(msg.pose)
        except MessageError:
            self.bad_messages += 1
            return
        with self._lock:
            self._poses.append((stamp_to_s(msg.header.stamp), X))

    def _on_wrench(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        t = msg.wrench.torque
        f_S = np.array([f.x, f.y, f.z])
        if not (np.isfinite(f_S).all() and math.isfinite(t.x + t.y + t.z)):
            self.bad_messages += 1
            return
        tool = self.backend.tool_pose('fingertip') if self.backend is not None else None
        R_WT = quaternion_matrix(tool.q_W) if tool is not None else np.eye(3)
        R_WS = R_WT @ self.R_TS
        f_W = R_WS @ f_S
        tau_W = R_WS @ np.array([t.x, t.y, t.z])
        stamp = stamp_to_s(msg.header.stamp)
        with self._lock:
            self._wrenches.append((stamp, f_W[:2].copy()))
            self._wrench_seen = time.monotonic()
        out = WrenchStamped()
        out.header.stamp = msg.header.stamp
        out.header.frame_id = self.frame
        out.wrench.force.x, out.wrench.force.y, out.wrench.force.z = (float(v) for v in f_W)
        out.wrench.torque.x, out.wrench.torque.y, out.wrench.torque.z = (float(v) for v in tau_W)
        self.pub_wrench.publish(out)
        now = time.monotonic()
        if tool is not None and now - self._force_drawn >= 1.0 / FORCE_MARKER_RATE_HZ:
            self._force_drawn = now
            self.pub_force.publish(force_arrow(tool.p_W, f_W, self.frame, msg.header.stamp))

    def _on_limit(self, _msg: WrenchStamped) -> None:
        self._limit.set()

    def _publish_tools(self) -> None:
        if self.backend is None:
            return
        for tool, pub in (('fingertip', self.pub_pusher), ('gripper', self.pub_gripper)):
            pose = self.backend.tool_pose(tool)
            # A pose no newer than the last is not one more: sent again, a stalled arm state
            # read as the tool standing still at every tick, on the topic and in the record.
            # (One a second and more behind it is a clock that went back: a restarted twin.)
            if pose is None:
                continue
            last = self._tool_stamps.get(tool, -math.inf)
            if last - CLOCK_JUMP_S < pose.stamp <= last:
                continue
            self._tool_stamps[tool] = pose.stamp
            msg = PoseStamped()
            set_stamp(msg.header.stamp, pose.stamp)  # as the push markers are stamped
            msg.header.frame_id = self.frame
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (
                float(v) for v in pose.p_W
            )
            o = msg.pose.orientation
            o.x, o.y, o.z, o.w = (float(v) for v in pose.q_W)
            pub.publish(msg)
            if tool == 'fingertip':
                with self._lock:
                    self._tips.append((pose.stamp, pose.p_W[:2].copy()))

    # -- push ---------------------------------------------------------------------------------
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _check_push(self, handle: Any) -> tuple[Primitive, FloatArray]:
        goal = handle.request
        if not self.active or self.backend is None:
            raise Failure(ErrorCode.NOT_READY, 'the executor is not active')
        try:
            primitive = primitive_from_msg(goal.primitive)
            X = pose_to_planar(goal.object_pose.pose)
        except MessageError as exc:
            raise Failure(ErrorCode.INVALID_GOAL, str(exc)) from None
        self._check_frame('the object pose', goal.object_pose.header.frame_id)
        tip = self.cell.fingertip
        for what, planned, here in (
            ('radius', float(goal.primitive.fingertip_radius), tip.radius),
            ('height', float(goal.primitive.height), tip.height),
        ):
            # 0: a sender that does not say. Another value: a push planned with another
            # workcell file than this arm's, whose contact and depth are off by the difference.
            if planned != 0.0 and abs(planned - here) > 1e-6:
                raise Failure(
                    ErrorCode.INVALID_GOAL,
                    f'the push was planned for a fingertip {what} of {planned:g} m; this '
                    f"arm's is {here:g} m (do the planner and the executor read the same "
                    'workcell file?)',
                )
        # The latched grid reaches each subscriber in its own time: a behaviour that already
        # has it may ask before this node does.
        self._until(
            lambda: self._grid is not None, GRID_WAIT_S, lambda: self._halted(handle), 0.05
        )
        self._not_started(handle, 'waiting for the object grid')
        grid = self._grid
        if grid is None:
            raise Failure(ErrorCode.NOT_READY, 'no object grid yet (is perception running?)')
        age = self._now() - stamp_to_s(goal.object_pose.header.stamp)
        max_age = float(self.get_parameter('max_pose_age_s').value)
        if age > max_age:
            raise Failure(ErrorCode.STALE_POSE, f'the object pose is {age:.2f} s old')
        if age < -max_age:  # a signed age let any pose of a clock running ahead pass
            raise Failure(
                ErrorCode.STALE_POSE,
                f"the object pose is stamped {-age:.2f} s ahead of this node's clock: are "
                "the machines' clocks apart (or one on sim time)?",
            )
        try:  # the arm went 40 m out for an object pose there, and succeeded
            check_on_table(grid, X, self.cell.table)
        except PlanningError as exc:
            raise Failure(ErrorCode.INVALID_GOAL, str(exc)) from None
        tol = float(self.get_parameter('contact_tolerance_m').value)
        off = distance_to_cells(grid, primitive.p_OA)
        if off > tol:
            raise Failure(
                ErrorCode.CONTACT_OFF_OBJECT,
                f'the contact point {np.round(primitive.p_OA, 4).tolist()} is {off * 1000:.1f} mm '
                'from the object',
            )
        if not approach_clear(grid, primitive.p_OA, primitive.d_O, self.cell.fingertip):
            raise Failure(
                ErrorCode.CONTACT_OFF_OBJECT,
                'the fingertip would come down on the object (the push points out of it)',
            )
        # (the executor pushed through them: only the planner and the twin knew of them)
        least_mm = (tip.radius + APPROACH_CLEARANCE) * 1000
        for k, ob in enumerate(self.cell.obstacles):
            if not stroke_clear(primitive, X, tip, (ob,)):
                raise Failure(
                    ErrorCode.INVALID_GOAL,
                    f'the fingertip would pass within {least_mm:.0f} mm of obstacle {k} of the '
                    f'workcell (centre {list(ob.centre)}, half size '
                    f'{list(ob.half_size)}) between coming down and the end of its stroke: was '
                    'the push planned with this workcell file?',
                )
        return primitive, X

    def _retract(self, tool: str, back_W: FloatArray | None = None) -> None:
        """Pull ``tool`` back (by ``back_W``) and lift it, whatever happened before (not
        while the node is shutting down, nor on once it begins to: the arm then stays where
        it stopped)."""
        assert self.backend is not None
        if self.stopping.is_set():
            return
        pose = self.backend.tool_pose(tool)
        if pose is None:
            return
        yaw = 2 * math.atan2(float(pose.q_W[2]), float(pose.q_W[3]))
        # To a fixed height: a retract after a retract did not climb another 10 cm.
        up = LIFT if tool == 'fingertip' else PRE_GRASP_HEIGHT
        waypoints = retract_waypoints(pose.p_W, yaw, back_W, up)
        motion = self.backend.follow(tool, waypoints, lambda _i, _t: None, self.stopping.is_set)
        if not motion.completed and not self.stopping.is_set():
            # Said, not taken for done: each goal's reason read "retracted" or "raised".
            raise RetractFailed(f'the {tool} was not pulled clear: {motion.message}')

    def _push(self, handle: Any) -> Push.Result:
        result = Push.Result()

        def work() -> None:
            self._execute_push(handle, result)

        if self._serve(handle, result, 'fingertip', work):
            result.error.code = ErrorCode.SUCCESS
            handle.succeed()
        return result

    def _serve(
        self, handle: Any, result: Any, tool: str, work: Callable[[], None], retract: bool = True
    ) -> bool:
        """Run a goal's ``work`` (it fills ``result``), and give back the one-goal slot its
        acceptance took when it ends. A Failure answers with its code; any other fault (a
        controller's error, a bug) pulls ``tool`` up clear (with ``retract``), whatever it
        was doing, and answers INTERNAL with the reason (a RuntimeError at the stroke left
        the fingertip against the object, and any other type escaped as an empty result,
        whose code reads as success). A grasp takes its gripper out itself, the way it came
        in, and a gripper holding the object up stays: ``retract`` False. True when
        ``work`` returned."""
        try:
            work()
            return True
        except Failure as f:
            result.error.code, result.message = f.code, str(f)
            if f.code == ErrorCode.CANCELED:
                end_stopped(handle)
            else:
                handle.abort()
            self.get_logger().info(f'{tool} goal: {f}')
            return False
        except RetractFailed as exc:  # the goal stopped, and the tool is not known clear
            self.get_logger().error(f'{tool} goal: {exc}')
            result.error.code = ErrorCode.MOTION_FAILED
            result.message = str(exc)
            if handle.is_cancel_requested:
                result.message = f'cancelled, but {exc}'
            handle.abort()
            return False
        except Exception as exc:  # noqa: BLE001 - any fault: the tool rises, the goal says why
            self.get_logger().error(f'{tool}: {traceback.format_exc()}')
            after = f'{tool} pulled up' if retract else f'the {tool} stays where it stopped'
            try:
                if retract:
                    self._retract(tool)
            except Exception as again:  # noqa: BLE001 - said; the goal still gets its answer
                self.get_logger().error(f'{tool}: the retract after the fault failed: {again}')
                after = f'and the {tool} could not be pulled up: {again}'
            result.error.code = ErrorCode.INTERNAL
            result.message = f'{type(exc).__name__}: {exc} ({after})'
            handle.abort()
            return False
        finally:
            self._slot.release()

    def _execute_push(self, handle: Any, result: Push.Result) -> None:
        """Make the push and put its record in ``result``: also when a cancel, a
        deactivation or a failed motion stopped it after its stroke (the object was pushed;
        the record was thrown away, and the push's index came again for the next push,
        which shadowed it in the bag)."""
        goal = handle.request
        primitive, X = self._check_push(handle)
        assert self.backend is not None
        waypoints = push_waypoints(primitive, X, self.cell.fingertip)
        if self.get_parameter('tare').value:
            self._clear_for_tare()
            self._tare(lambda: self._halted(handle))
            self._not_started(handle, 'during the tare')
        silent = self._wrench_silence()
        if silent is not None:
            raise Failure(
                ErrorCode.TIMEOUT,
                f'no wrench from the F/T driver on {self._wrench_topic} for {silent:.2f} s: '
                'the push does not start (is the driver streaming?)',
            )
        self._check_wrench_clock(lambda: self._halted(handle))
        self._not_started(handle, 'while the F/T queue caught up')
        waypoints = self._over_obstacles(waypoints)
        self._limit.clear()
        went_silent: list[float] = []
        times: dict[str, float] = {}
        feedback = Push.Feedback()
        index = int(goal.index)

        def on_waypoint(i: int, stamp: float | None) -> None:
            phase = waypoints[i].phase if i < len(waypoints) else 'lift'
            now = self._now() if stamp is None else stamp
            if phase == 'stroke' and 'start' not in times:
                times['start'] = now
                msg = primitive_to_msg(primitive, self.cell.fingertip, PushPrimitive())
                self.pub_primitive.publish(msg)
                self.pub_start.publish(marker_to_msg(index, now, PushMarker()))
            elif phase == 'settle' and 'end' not in times:
                times['end'] = now
                self.pub_end.publish(marker_to_msg(index, now, PushMarker()))
            elif phase == 'retract' and 'rest' not in times:
                times['rest'] = now
            feedback.phase = phase
            handle.publish_feedback(feedback)

        def should_stop() -> bool:
            # (deactivated: the arm stops as on a cancel)
            if self._halted(handle) or self._limit.is_set():
                return True
            silent = self._wrench_silence()
            if silent is not None:
                went_silent.append(silent)
            return bool(went_silent)

        motion: Motion = self.backend.follow('fingertip', waypoints, on_waypoint, should_stop)
        if not motion.completed and self.stopping.is_set():
            raise Failure(ErrorCode.CANCELED, 'the executor is shutting down: the arm stopped')
        if not motion.completed:
            self._retract('fingertip', primitive.back_W(X) if 'start' in times else None)
            # Stopped after its stroke (a cancel, a deactivation, a motion that failed in
            # the retract): the push was made, and its record is kept (not after a limit
            # or a silent sensor: the wrenches are not the push's alone, or missing).
            kept = ''
            if 'end' in times and not self._limit.is_set() and not went_silent:
                try:
                    result.record = self._record(index, primitive, *self._stroke(times))
                    kept = ' after the stroke; the push is recorded'
                except Failure as exc:
                    kept = f' after the stroke; the push is not recorded: {exc}'
            if not self.active:
                raise Failure(
                    ErrorCode.CANCELED,
                    f'the executor was deactivated: stopped and retracted{kept}',
                )
            if self._limit.is_set():
                raise Failure(ErrorCode.FT_LIMIT, 'the F/T driver reported a limit: retracted')
            if went_silent:
                raise Failure(
                    ErrorCode.TIMEOUT,
                    f'the F/T wrench on {self._wrench_topic} fell silent for '
                    f'{went_silent[0]:.2f} s during the push: stopped and retracted (no '
                    'force limit acts on a silent sensor); the push is not recorded',
                )
            if handle.is_cancel_requested:
                raise Failure(ErrorCode.CANCELED, f'cancelled: stopped and retracted{kept}')
            raise Failure(ErrorCode.MOTION_FAILED, f'{motion.message}{kept}')
        if 'start' not in times or 'end' not in times:
            raise Failure(ErrorCode.MOTION_FAILED, 'the arm skipped the stroke')
        result.record = self._record(index, primitive, *self._stroke(times))

    def _stroke(self, times: dict[str, float]) -> tuple[float, float, float]:
        """The stroke's start and end and when the object came to rest (the retract began;
        now, when the push stopped before it) [s, ROS time]."""
        return times['start'], times['end'], times.get('rest', self._now())

    @property
    def _wrench_topic(self) -> str:
        return self.resolve_topic_name('ft_wrench')

    def _wrench_silence(self) -> float | None:
        """Seconds since the last usable wrench arrived when that is longer than
        ``max_wrench_gap_s``, else None."""
        with self._lock:
            seen = self._wrench_seen
        silent = time.monotonic() - seen
        return silent if silent > float(self.get_parameter('max_wrench_gap_s').value) else None

    def _until(
        self,
        done: Callable[[], bool],
        seconds: float,
        halted: Callable[[], bool] = lambda: False,
        period: float = 0.02,
    ) -> bool:
        """Whether ``done()`` came true within ``seconds``, asked every ``period`` [s]; False
        as soon as ``halted()`` or the node is stopping."""
        end = time.monotonic() + seconds
        while not done():
            if time.monotonic() >= end or halted() or self.stopping.is_set():
                return False
            time.sleep(period)
        return True

    def _check_wrench_clock(self, should_stop: Callable[[], bool]) -> None:
        """TIMEOUT before anything moves when the latest wrench is stamped further from this
        node's clock than ``max_pose_age_s`` (either way) and stays so for
        ``measurement_wait_s``: the push's record keeps the wrenches by their stamps, so it
        would end with none, blamed on a silent driver. The wait lets this node's own F/T
        queue catch up with the driver (on a busy machine it fell 3.7 s behind, and the
        push was refused as if the clocks were apart); clocks apart stay apart. Returns
        early when ``should_stop()``."""
        max_age = float(self.get_parameter('max_pose_age_s').value)

        def age() -> float:  # of the latest wrench's stamp [s]; 0 before the first
            with self._lock:
                latest = self._wrenches[-1][0] if self._wrenches else None
            return 0.0 if latest is None else self._now() - latest

        wait = float(self.get_parameter('measurement_wait_s').value)
        if self._until(lambda: abs(age()) <= max_age, wait, should_stop) or should_stop():
            return
        late = age()
        if abs(late) <= max_age:  # (caught up just now)
            return
        raise Failure(
            ErrorCode.TIMEOUT,
            f'the F/T wrenches on {self._wrench_topic} are stamped {abs(late):.2f} s '
            f"{'behind' if late > 0 else 'ahead of'} this node's clock: the push does not "
            "start (are the machines' clocks apart, or one on sim time? or, behind, is "
            "this node's F/T queue falling behind the driver on a busy machine?)",
        )

    def _over_obstacles(self, waypoints: list[Waypoint]) -> list[Waypoint]:
        """A push's ``waypoints`` with a hop over the workcell's obstacles where the
        fingertip's move to the first one (through the air, from where it is) passes over
        one lower than it needs (:func:`slide_core.model.over_obstacles`); INVALID_GOAL
        when it may not pass (an obstacle of unknown height)."""
        if not self.cell.obstacles:
            return waypoints
        assert self.backend is not None
        pose = self.backend.tool_pose('fingertip')
        if pose is None:
            raise Failure(
                ErrorCode.NOT_READY,
                'no fingertip pose from the arm: its move over the workcell obstacles cannot '
                'be checked, no push',
            )
        try:
            tip = self.cell.fingertip
            return over_obstacles(pose.p_W, waypoints, self.cell.obstacles, tip.radius)
        except PrimitiveError as exc:
            raise Failure(ErrorCode.INVALID_GOAL, str(exc)) from None

    def _clear_for_tare(self) -> None:
        """Lift the fingertip to ``LIFT`` when it is lower: a retract the arm did not
        complete (MOTION_FAILED, which the behaviour retries) left it against the object,
        and the next push's tare took the contact force as its zero (a 20 N press let 45 N
        through a 25 N limit)."""
        assert self.backend is not None
        pose = self.backend.tool_pose('fingertip')
        if pose is None:
            raise Failure(ErrorCode.NOT_READY, 'no fingertip pose from the arm: no tare, no push')
        if pose.p_W[2] < LIFT - TARE_HEIGHT_SLACK:
            self.get_logger().warning(
                f'the fingertip is {1000 * (LIFT - pose.p_W[2]):.0f} mm under its lifted '
                'height: lifted before the F/T sensor is tared'
            )
            self._retract('fingertip')

    def _why_halted(self, handle: Any) -> str:
        """Why a goal must stop, in words ('' while it may go on): the node shutting down,
        the node deactivated, or its client's cancel."""
        if self.stopping.is_set():
            return 'the executor is shutting down'
        if not self.active:
            return 'the executor was deactivated'
        return 'cancelled' if handle.is_cancel_requested else ''

    def _halted(self, handle: Any) -> bool:
        """Whether a goal must stop (:meth:`_why_halted`)."""
        return bool(self._why_halted(handle))

    def _not_started(self, handle: Any, when: str) -> None:
        """CANCELED, saying that nothing moved for the push, when the goal was halted
        ``when`` (a cancel while the grid was awaited was answered NOT_READY 5 s later, and
        one during the tare still sent the push to the arm)."""
        why = self._why_halted(handle)
        if why:
            raise Failure(ErrorCode.CANCELED, f'{why} {when}: no push')

    def _tare(self, should_stop: Callable[[], bool]) -> None:
        """Zero the F/T sensor where the fingertip is now: retracted and lifted, in free
        air, before the push's approach (every push and the start-up end there). What
        offset is left, identification takes out per push from the readings before the
        touch. Returns early when ``should_stop()``."""
        try:
            response = call_idempotent(
                self.tare_client, Trigger.Request(), TARE_TIMEOUT_S, should_stop
            )
        except TimeoutError:
            raise Failure(
                ErrorCode.TIMEOUT,
                f'the F/T driver did not tare on {self.tare_client.srv_name} within '
                f'{TARE_TIMEOUT_S:.0f} s: is it running? (or set tare false)',
            ) from None
        if response is None:
            return  # halted: the caller says why
        if not response.success:
            raise Failure(
                ErrorCode.NOT_READY, f'the F/T driver refused to tare: {response.message}'
            )

    def _check_tip_gaps(self, stamps: list[float], t0: float, t1: float) -> None:
        """TIMEOUT when the fingertip's poses ``stamps`` [s] leave a gap longer than
        ``max_tip_gap_s`` in the stroke from ``t0`` to ``t1``: identification would read the
        fingertip as standing there, or jumping, against the forces felt."""
        gap, since = longest_gap(stamps, t0, t1)
        if gap > float(self.get_parameter('max_tip_gap_s').value):
            raise Failure(
                ErrorCode.TIMEOUT,
                f'no fingertip pose for {gap:.2f} s of the stroke ({since - t0:.2f} to '
                f'{since + gap - t0:.2f} s into it): its record would show the fingertip '
                "standing still there; is the arm's state stream (joint states) stalling?",
            )

    def _record(self, index: int, primitive: Primitive, t0: float, t1: float, t2: float) -> Any:
        from slide_interfaces.msg import PushRecord

        # Perception lags the camera, and this node's F/T queue can lag the driver (a busy
        # machine: 1.6 s measured): wait (a little) until the object poses and the wrenches
        # cover the push. (A record built at once lost the wrenches still queued: 'too few
        # measurements, 0 wrenches'.)
        def covers_push() -> bool:
            with self._lock:
                pose = self._poses[-1][0] if self._poses else -math.inf
                wrench = self._wrenches[-1][0] if self._wrenches else -math.inf
            return min(pose, wrench) >= t2

        self._until(covers_push, float(self.get_parameter('measurement_wait_s').value))
        with self._lock:
            poses = [(t, X) for t, X in self._poses if t0 - 0.05 <= t <= t2]
            tips = [(t, p) for t, p in self._tips if t0 - 0.05 <= t <= t2]
            wrenches = [(t, f) for t, f in self._wrenches if t0 - 0.05 <= t <= t2]
        if len(poses) < 2 or len(tips) < 2 or len(wrenches) < 2:
            raise Failure(
                ErrorCode.TIMEOUT,
                f'too few measurements during the push ({len(poses)} object poses, '
                f'{len(tips)} fingertip poses, {len(wrenches)} wrenches): is perception or '
                'the F/T driver running?',
            )
        self._check_tip_gaps([t for t, _ in tips], t0, t1)

        def stack(series: list[tuple[float, FloatArray]]) -> tuple[FloatArray, FloatArray]:
            return np.array([t for t, _ in series]), np.array([v for _, v in series])

        samples = PushSamples(*stack(poses), *stack(tips), *stack(wrenches), t0, t1)
        msg = PushRecord()
        msg.header.frame_id = self.frame
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.index = index
        primitive_to_msg(primitive, self.cell.fingertip, msg.primitive)
        return record_to_msg(samples, msg, PoseStamped, WrenchStamped, self.frame)

    # -- grasp --------------------------------------------------------------------------------
    def _grasp(self, handle: Any) -> GraspAction.Result:
        result = GraspAction.Result()

        def work() -> None:
            result.holding, result.lifted = self._execute_grasp(handle)

        if not self._serve(handle, result, 'gripper', work, retract=False):
            return result
        if not result.holding:
            result.error.code = ErrorCode.NOT_HELD
            result.message = 'the gripper closed but holds nothing after the lift'
            handle.abort()
            return result
        result.error.code = ErrorCode.SUCCESS
        handle.succeed()
        return result

    def _check_frame(self, what: str, frame_id: str) -> None:
        """INVALID_GOAL unless a goal's pose is in the table frame (or names none)."""
        if frame_id not in ('', self.frame):
            raise Failure(ErrorCode.INVALID_GOAL, f'{what} is in {frame_id!r}, not {self.frame}')

    def _execute_grasp(self, handle: Any) -> tuple[bool, float]:
        if not self.active or self.backend is None:
            raise Failure(ErrorCode.NOT_READY, 'the executor is not active')
        goal = handle.request
        try:
            X = pose_to_planar(goal.grasp_pose.pose)
        except MessageError as exc:
            raise Failure(ErrorCode.INVALID_GOAL, str(exc)) from None
        # As for a push: a pose in another frame was used as if it were in the table's.
        self._check_frame('the grasp pose', goal.grasp_pose.header.frame_id)
        z = float(goal.grasp_pose.pose.position.z)
        lift = float(goal.lift_height)
        if not (math.isfinite(z) and 0 < z < 0.3 and 0 < lift <= 0.5):
            raise Failure(
                ErrorCode.INVALID_GOAL, 'grasp height must be in (0, 0.3) m, lift (0, 0.5]'
            )
        g = self.cell.gripper
        grasp = Grasp(X[:2], z, float(X[2]), g.min_grip)
        approach, up = grasp_waypoints(grasp, lift, self.cell.gripper)
        feedback = GraspAction.Feedback()
        backend = self.backend
        reached = [-1]  # the furthest waypoint of the approach begun
        doing = ['opening', False]  # what the gripper does; whether it may close on the object

        def why() -> str:
            return self._why_halted(handle) or 'cancelled'

        def phase(name: str, what: str, closed: bool) -> None:
            doing[:] = [what, closed]
            if stop():
                raise _Stopped
            feedback.phase = name
            handle.publish_feedback(feedback)

        def stop() -> bool:
            return self._halted(handle)

        def on_approach(i: int, _stamp: float | None) -> None:
            reached[0] = max(reached[0], i)

        def grip(width: float, effort: float) -> tuple[float, bool]:
            gripped = backend.gripper(width, effort, stop)
            if gripped is None:
                raise _Stopped
            return gripped

        try:
            phase('open', 'opening', False)
            grip(g.max_opening, 0.0)
            phase('pre_grasp', 'coming to the pre-grasp', False)
            motion = backend.follow('gripper', approach, on_approach, stop)
            if motion.stopped:
                raise _Stopped
            if not motion.completed:
                raise Failure(
                    ErrorCode.MOTION_FAILED,
                    motion.message or 'the gripper did not reach the pre-grasp',
                )
            phase('close', 'closing', True)
            grip(2 * z, g.force)
            z0 = backend.tool_pose('gripper')
            doing[0] = 'about to lift'
        except Exception as exc:  # noqa: BLE001 - any end before the lift: out the way it came
            if isinstance(exc, _Stopped):
                code, text = ErrorCode.CANCELED, f'{why()} while {doing[0]}'
            elif isinstance(exc, Failure):
                code, text = exc.code, str(exc)
            else:  # the gripper refused or failed, the arm's controller, a bug
                self.get_logger().error(f'gripper: {traceback.format_exc()}')
                code, text = ErrorCode.INTERNAL, f'{type(exc).__name__}: {exc}'
            after = self._leave_grasp(grasp, reached[0], doing[1], isinstance(exc, _Stopped))
            raise Failure(code, f'{text}: {after}') from None
        try:
            phase('lift', 'lifting', True)
            motion = backend.follow('gripper', up, lambda _i, _t: None, stop)
            if motion.stopped:
                raise _Stopped
            if not motion.completed:
                raise Failure(ErrorCode.MOTION_FAILED, motion.message or 'the lift failed')
            phase('check', 'checking the hold', True)
            _, holding = grip(2 * z, g.force)
        except _Stopped:
            # Holding the object off the table: opening or moving now would drop it.
            raise Failure(
                ErrorCode.CANCELED,
                f'{why()} while {doing[0]}: the gripper holds it where it stopped',
            ) from None
        z1 = backend.tool_pose('gripper')
        lifted = float(z1.p_W[2] - z0.p_W[2]) if z0 is not None and z1 is not None else 0.0
        return holding, lifted

    def _leave_grasp(self, grasp: Grasp, reached: int, closed: bool, stopped: bool) -> str:
        """Take the gripper out of a grasp that ended before its lift (``stopped``: by a
        cancel or deactivation, else by a fault), ``reached`` the furthest approach waypoint
        begun (-1: none), ``closed`` whether the fingers may be on the object: open them,
        then back out along the approach and up
        (:func:`slide_core.planning.grasp_withdrawal`). Before the gripper came down a stop
        moves nothing, and a fault raises it to the approach's height (where it is is not
        known); nothing moves on a shutdown. What was done, for the result's message;
        RetractFailed when the gripper could not be taken out."""
        assert self.backend is not None
        if self.stopping.is_set():
            return 'the arm stays where it stopped'
        if reached < 1:  # not yet lowered towards the object
            if stopped:
                return 'the arm stays where it stopped' if reached == 0 else 'the arm did not move'
            self._retract('gripper')
            return 'gripper raised'
        opened = ''
        if closed:
            try:
                done = self.backend.gripper(
                    self.cell.gripper.max_opening, 0.0, self.stopping.is_set
                )
            except (RuntimeError, TimeoutError) as exc:
                raise RetractFailed(
                    f'the gripper did not open ({exc}): left where it is, not to drag the object'
                ) from None
            if done is None:
                return 'the arm stays where it stopped'
            opened = 'opened, '
        pose = self.backend.tool_pose('gripper')
        if pose is None:
            raise RetractFailed('no gripper pose: the gripper was not withdrawn')
        waypoints = grasp_withdrawal(grasp, self.cell.gripper, pose.p_W)
        if waypoints:
            motion = self.backend.follow(
                'gripper', waypoints, lambda _i, _t: None, self.stopping.is_set
            )
            if not motion.completed and not self.stopping.is_set():
                raise RetractFailed(f'the gripper was not withdrawn: {motion.message}')
        return f'{opened}withdrawn along the approach and raised'


class _Stopped(Exception):  # noqa: N818 - a cancel, deactivation or shutdown came
    """Raised inside a grasp when its stop condition came true."""


def main() -> int:
    return run(ExecutorNode, 'executor_node')


if __name__ == '__main__':
    raise SystemExit(main())
