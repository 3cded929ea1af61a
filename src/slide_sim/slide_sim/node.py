"""The twin node: the MuJoCo workcell standing in for the hardware, and nothing more.

It offers what the robot cell offers, under the same interfaces:

- camera: ``/camera/camera/depth/color/points`` (sensor_msgs/PointCloud2 in
  ``camera_color_optical_frame``) and ``/camera/camera/depth/camera_info``, rendered from the
  twin's RGB-D camera with its noise (realsense2_camera's topic names);
- force/torque: the twin's sensor wrench feeds an ATI Net F/T emulator, which serves it over
  UDP (RDT) and TCP/HTTP calibration, so the real ``ati_netft`` driver reads it (with
  ``ft_offset`` added, as an untared sensor reads);
- arm and gripper: ``~/follow_path`` (slide_interfaces/FollowPath: a tool through Cartesian
  waypoints at speeds; cancel stops it where it is) and ``~/gripper``
  (slide_interfaces/GripperCommand), one goal per tool at a time (another for a tool that
  is still moving is refused), and the tools' poses on ``~/fingertip_pose`` and
  ``~/gripper_pose`` (as a robot driver publishes its state);
- ground truth on ``/ground_truth`` (slide_interfaces/GroundTruth), for scoring only.

The physics runs in its own thread in real time (``real_time_factor`` scales it) on the
wall clock, so it needs no ``/clock``; the camera renders in another thread from snapshots.

    ros2 run slide_sim twin_node --ros-args -p object:=hammer -p rdt_port:=49152
"""

from __future__ import annotations

from collections.abc import Callable
import math
import queue
import sys
import threading
import time
from typing import Any

from ati_netft.emulator import NetFTEmulator
from geometry_msgs.msg import PoseStamped
import mujoco
import numpy as np
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, PointCloud2, PointField

from slide_core.errors import SlideError, SlideInputError
from slide_core.geometry import quaternion_of_yaw, yaw_of_quaternion
from slide_core.io import grid_to_msg, xyz_to_cloud
from slide_core.model import Waypoint, load_object, load_workcell
from slide_core.task import SEED_MAX
from slide_interfaces.action import FollowPath, GripperCommand
from slide_interfaces.msg import ErrorCode, GroundTruth
from slide_ros.executors import TolerantMultiThreadedExecutor
from slide_ros.params import Param, ParameterError, declare
from slide_ros.qos import LATCHED, SENSOR
from slide_sim.camera import RgbdCamera, point_cloud
from slide_sim.scene import random_start
from slide_sim.twin import Twin

OPTICAL_FRAME = 'camera_color_optical_frame'
GOAL_TOLERANCE_M = 0.001
"""How near [m] its path's end a tool must come for the path to have SUCCEEDED (the
fingertip's carriage is 5 mm behind its set point at the end of a retract, and within
0.1 mm of it 0.2 s later)."""
GOAL_SETTLE_S = 1.0
"""How long [s, the twin's clock] a tool has after its set point reached the path's end
to come within GOAL_TOLERANCE_M of it; then the path is MOTION_FAILED."""
PARAMS = (
    Param('object', 'hammer', 'library object name or object .yaml file'),
    Param('workcell_file', '', 'workcell YAML (default: config/workcell.yaml)'),
    Param('start_pose', [0.0], 'initial object pose [x, y, yaw] (table frame); [0.0]: random'),
    Param(
        'seed',
        0,
        'seed of the random start pose (as slide episode draws it)',
        low=0,
        high=SEED_MAX,
    ),
    Param('camera_rate_hz', 10.0, 'camera frames per second', low=0.5, high=60.0),
    Param('camera_seed', 0, 'seed of the depth noise', low=0, high=SEED_MAX),
    Param('camera_decimation', 2, 'keep every n-th pixel of every n-th row', low=1, high=8),
    Param('tool_rate_hz', 50.0, 'tool pose messages per second', low=1.0, high=500.0),
    Param('truth_rate_hz', 5.0, 'ground truth messages per second', low=0.1, high=100.0),
    Param('real_time_factor', 1.0, 'simulated seconds per wall-clock second', low=0.05, high=4.0),
    Param(
        'ft_rate_hz',
        1000.0,
        'F/T records per second of the emulated sensor',
        low=10.0,
        high=7000.0,
    ),
    Param(
        'ft_offset',
        [0.0] * 6,
        'what the emulated sensor reads with nothing touching the fingertip, as an untared '
        'sensor does: fx, fy, fz [N], tx, ty, tz [N m] in its frame',
    ),
    Param('rdt_port', 49152, 'UDP port the emulated sensor streams from', low=0, high=65535),
    Param('tcp_port', 49151, 'TCP port of the calibration (READCALINFO)', low=0, high=65535),
    Param('http_port', 8080, 'HTTP port of netftapi2.xml', low=0, high=65535),
    Param('table_frame', 'table', 'frame of every pose'),
)


class TwinNode(Node):
    """The twin behind ROS interfaces (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('twin', **kwargs)
        p = declare(self, PARAMS)
        self.frame = str(p['table_frame'])
        cell = load_workcell(p['workcell_file'] or None)
        spec = load_object(p['object'])
        start = [float(v) for v in p['start_pose']]
        if start == [0.0]:  # the default: a random start
            start = list(random_start(spec, cell, int(p['seed'])))
        if len(start) != 3 or not all(math.isfinite(v) for v in start):
            raise ParameterError(f'start_pose must be [x, y, yaw], got {start}')
        offset = [float(v) for v in p['ft_offset']]
        if len(offset) != 6 or not all(math.isfinite(v) for v in offset):
            raise ParameterError(f'ft_offset must be [fx, fy, fz, tx, ty, tz], got {offset}')
        self.ft_offset = np.array(offset)
        self.twin = Twin(spec, cell, (start[0], start[1], start[2]))
        self.rtf = float(p['real_time_factor'])
        self._lock = threading.Lock()
        self._commands: queue.Queue[Callable[[], None]] = queue.Queue()
        self._stop = threading.Event()
        # The sensor's wrench summed over the physics steps since the emulator's last sample,
        # and their number: a sample is the mean force over its period, as a real sensor's
        # filtered output is, not the latest step's chatter (the physics runs in bursts).
        self._ft_lock = threading.Lock()
        self._ft_block = (np.zeros(6), 0)
        self._wrench = tuple(float(v) for v in self.ft_offset)
        # The fingertip's contact force summed over the physics steps since the last truth
        # message, and their number: the truth carries its mean, as the driver's block means.
        self._contact = (np.zeros(3), 0)
        # (sim time, qpos, mocap positions, ROS time of the state) for the camera thread.
        self._snapshot: tuple[float, np.ndarray, np.ndarray, Any] | None = None
        # Per tool: moving, waypoint index, paths started, distance [m] to its set point
        # (all as of the last step).
        self._status = {'fingertip': (False, -1, 0, 0.0), 'gripper': (False, -1, 0, 0.0)}
        # The tools (and the gripper's fingers) a goal holds from its acceptance to its end.
        self._busy: set[str] = set()
        self._poses = {'fingertip': np.zeros(4), 'gripper': np.zeros(4)}
        self._gripper = (0.0, False)
        self.emulator = NetFTEmulator(
            rate_hz=float(p['ft_rate_hz']),
            source=self._ft_sample,
            rdt_port=int(p['rdt_port']),
            tcp_port=int(p['tcp_port']),
            http_port=int(p['http_port']),
        ).start()
        group = ReentrantCallbackGroup()
        self.pub_cloud = self.create_publisher(
            PointCloud2, '/camera/camera/depth/color/points', SENSOR
        )
        self.pub_info = self.create_publisher(
            CameraInfo, '/camera/camera/depth/camera_info', SENSOR
        )
        self.pub_tip = self.create_publisher(PoseStamped, '~/fingertip_pose', 10)
        self.pub_hand = self.create_publisher(PoseStamped, '~/gripper_pose', 10)
        self.pub_truth = self.create_publisher(GroundTruth, '/ground_truth', LATCHED)
        self.follow_server = ActionServer(
            self,
            FollowPath,
            '~/follow_path',
            execute_callback=self._follow,
            goal_callback=lambda g: self._reserve(g.tool),
            cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=group,
        )
        self.gripper_server = ActionServer(
            self,
            GripperCommand,
            '~/gripper',
            execute_callback=self._grip,
            goal_callback=lambda _g: self._reserve('fingers'),
            cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=group,
        )
        self.create_timer(1.0 / float(p['tool_rate_hz']), self._publish_tools)
        self.create_timer(1.0 / float(p['truth_rate_hz']), self._publish_truth)
        self._camera_period = 1.0 / float(p['camera_rate_hz'])
        self._camera_seed = int(p['camera_seed'])
        self._decimation = int(p['camera_decimation'])
        self._sim = threading.Thread(target=self._run_physics, name='twin-physics', daemon=True)
        self._render = threading.Thread(target=self._run_camera, name='twin-camera', daemon=True)
        self._sim.start()
        self._render.start()
        self.get_logger().info(
            f'twin of {spec.name} at {start}: F/T emulator RDT {self.emulator.rdt_port}, '
            f'calibration TCP {self.emulator.tcp_port} / HTTP {self.emulator.http_port}'
        )

    def _ft_sample(self, _t: float) -> tuple[float, ...]:
        """The emulator's next sample (its thread): the mean wrench over the physics steps
        since the last one, or the last sample again when no step ran in between; plus the
        sensor's offset (``ft_offset``)."""
        with self._ft_lock:
            total, n = self._ft_block
            if n:
                self._ft_block = (np.zeros(6), 0)
                self._wrench = tuple(float(v) for v in total / n + self.ft_offset)
            return self._wrench

    # -- the physics thread: the only one that touches the twin ------------------------------
    def _run_physics(self) -> None:
        twin = self.twin
        h = twin.model.opt.timestep
        wall0, sim0 = time.monotonic(), twin.time
        next_snapshot = 0.0
        while not self._stop.is_set():
            while not self._commands.empty():
                try:
                    self._commands.get_nowait()()
                except Exception as exc:  # noqa: BLE001 - one bad command must not stop physics
                    self.get_logger().error(f'twin command failed: {exc}')
            twin.step()
            w = twin.wrench()
            with self._ft_lock:
                total, n = self._ft_block
                self._ft_block = (total + w, n + 1)
            total, n = self._contact
            self._contact = (total + twin.contact_force(), n + 1)
            with self._lock:
                for tool in ('fingertip', 'gripper'):
                    self._status[tool] = (
                        twin.moving(tool),
                        twin.waypoint(tool),
                        twin.paths_started[tool],
                        twin.tool_lag(tool),
                    )
                self._poses['fingertip'] = np.array([*twin.fingertip(), 0.0])
                self._poses['gripper'] = twin.gripper_pose()
                self._gripper = (twin.gripper_width(), twin.holding())
                if twin.time >= next_snapshot:
                    self._snapshot = (
                        twin.time,
                        twin.data.qpos.copy(),
                        twin.data.mocap_pos.copy(),
                        self.get_clock().now().to_msg(),
                    )
                    next_snapshot = twin.time + self._camera_period
            ahead = (twin.time - sim0) / self.rtf - (time.monotonic() - wall0)
            if ahead > 0.002:
                time.sleep(ahead)
            elif ahead < -0.5:  # fell behind (a busy machine): do not try to catch up
                wall0, sim0 = time.monotonic(), twin.time
        del h

    def _submit(self, command: Callable[[], None]) -> None:
        self._commands.put(command)

    # -- the camera thread ----------------------------------------------------------------
    def _run_camera(self) -> None:
        data = mujoco.MjData(self.twin.model)
        last = -1.0
        with RgbdCamera(
            self.twin.model, seed=self._camera_seed, decimation=self._decimation
        ) as camera:
            while not self._stop.is_set():
                with self._lock:
                    snap = self._snapshot
                if snap is None or snap[0] == last:
                    time.sleep(0.005)
                    continue
                last = snap[0]
                data.qpos[:] = snap[1]
                data.mocap_pos[:] = snap[2]
                mujoco.mj_forward(self.twin.model, data)
                try:
                    frame = camera.capture(data, rgb=False)
                    cloud = point_cloud(frame, world=False)
                    if not self.context.ok():
                        break
                    self._publish_cloud(cloud, frame.intrinsics, snap[3])
                except Exception as exc:  # noqa: BLE001 - a failed frame is one lost frame
                    if not self.context.ok():
                        break
                    self.get_logger().warning(f'camera frame lost: {exc}')

    def _publish_cloud(self, points: np.ndarray, k: Any, stamp: Any) -> None:
        """Publish a frame stamped when its state was taken (as a camera stamps the exposure,
        not the end of its processing)."""
        msg = xyz_to_cloud(points, PointCloud2(), PointField)
        msg.header.stamp, msg.header.frame_id = stamp, OPTICAL_FRAME
        self.pub_cloud.publish(msg)
        info = CameraInfo()
        info.header = msg.header
        info.width, info.height = k.width, k.height
        info.k = [k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]
        info.p = [k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        info.distortion_model = 'plumb_bob'
        info.d = [0.0] * 5
        self.pub_info.publish(info)

    # -- state topics -----------------------------------------------------------------------
    def _pose_msg(self, tool: str) -> PoseStamped:
        with self._lock:
            p = self._poses[tool].copy()
        msg = PoseStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.frame
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in p[:3])
        qx, qy, qz, qw = quaternion_of_yaw(float(p[3]))
        o = msg.pose.orientation
        o.x, o.y, o.z, o.w = qx, qy, qz, qw
        return msg

    def _publish_tools(self) -> None:
        self.pub_tip.publish(self._pose_msg('fingertip'))
        self.pub_hand.publish(self._pose_msg('gripper'))

    def _publish_truth(self) -> None:
        done = threading.Event()
        out: dict[str, Any] = {}

        def read() -> None:
            out['stamp'] = self.get_clock().now().to_msg()  # the state's time, as the camera's
            out['X'] = self.twin.object_pose()
            out['fell'] = self.twin.fell()
            out['tilt'] = self.twin.tilt()
            out['height'] = self.twin.object_height()
            total, n = self._contact
            self._contact = (np.zeros(3), 0)
            out['contact'] = total / n if n else self.twin.contact_force()
            done.set()

        self._submit(read)
        if not done.wait(0.5):
            return
        spec = self.twin.spec
        msg = GroundTruth()
        msg.header.stamp = out['stamp']
        msg.header.frame_id = self.frame
        msg.name = spec.name
        grid_to_msg(spec.grid, out['X'], msg.grid)
        msg.grid.header = msg.header
        msg.model.mass = spec.grid.to_map(spec.mass, fill=0.0).ravel().tolist()
        msg.model.friction = spec.grid.to_map(spec.friction, fill=0.0).ravel().tolist()
        msg.model.loss = float('nan')
        msg.fell = bool(out['fell'])
        msg.tilt = float(out['tilt'])
        msg.height = float(out['height'])
        c = msg.contact_force
        c.x, c.y, c.z = (float(v) for v in out['contact'])
        self.pub_truth.publish(msg)

    # -- actions ----------------------------------------------------------------------------
    def _reserve(self, tool: str) -> GoalResponse:
        """One goal per tool at a time, as the executor takes one motion at a time: a second
        path for a tool that is moving is refused, not run over the first (both goals then
        followed the second path and 'succeeded'). A goal naming no tool is accepted, to be
        refused with its reason in the execute callback."""
        if tool not in self._status and tool != 'fingers':
            return GoalResponse.ACCEPT
        with self._lock:
            if tool in self._busy:
                self.get_logger().warning(f'refused a goal for the {tool}: it is still moving')
                return GoalResponse.REJECT
            self._busy.add(tool)
        return GoalResponse.ACCEPT

    def _release(self, tool: str) -> None:
        with self._lock:
            self._busy.discard(tool)

    def _follow(self, handle: Any) -> FollowPath.Result:
        try:
            return self._follow_path(handle)
        finally:
            self._release(handle.request.tool)

    def _follow_path(self, handle: Any) -> FollowPath.Result:
        goal = handle.request
        result = FollowPath.Result()
        try:
            waypoints = self._waypoints(goal)
        except ValueError as exc:
            handle.abort()
            result.error.code, result.message = ErrorCode.INVALID_GOAL, str(exc)
            return result
        tool = goal.tool
        with self._lock:
            started = self._status[tool][2]
        failed: list[str] = []

        def begin() -> None:
            try:
                self.twin.start_path(tool, waypoints)
            except Exception as exc:
                failed.append(str(exc))
                raise

        self._submit(begin)
        # Wait until the physics thread took the path (a path shorter than a step may be
        # done by then: waiting to see it moving took 2 s), then until it is done.
        feedback = FollowPath.Feedback()
        settle_until = math.inf  # on the twin's clock, once the set point is at the end
        while True:
            with self._lock:
                moving, index, begun, lag = self._status[tool]
            if begun > started and not moving:
                # Done when the tool is at the path's end, as an arm's controller checks its
                # goal tolerance: the set point's arrival had been reported as the tool's.
                if lag <= GOAL_TOLERANCE_M:
                    break
                if math.isinf(settle_until):
                    settle_until = self.twin.time + GOAL_SETTLE_S
                elif self.twin.time > settle_until:
                    handle.abort()
                    result.error.code = ErrorCode.MOTION_FAILED
                    result.message = (
                        f'the {tool} stopped {lag * 1000:.1f} mm from the end of its path '
                        f'{GOAL_SETTLE_S:g} s after its set point got there (held back: '
                        'pressed against something?)'
                    )
                    result.pose = self._pose_msg(tool)
                    return result
            if failed or self._stop.is_set() or not self._sim.is_alive():
                handle.abort()  # (shutting down, the path never ends)
                result.error.code = ErrorCode.INTERNAL
                result.message = 'the twin stopped'
                if failed:
                    result.message = f'the twin could not start the path: {failed[0]}'
                return result
            if handle.is_cancel_requested:
                self._submit(lambda: self.twin.stop(tool))
                deadline = time.monotonic() + 2.0
                while self._status[tool][0] and time.monotonic() < deadline:
                    time.sleep(0.002)
                handle.canceled()
                result.error.code, result.message = ErrorCode.CANCELED, 'stopped where it was'
                result.pose = self._pose_msg(tool)
                return result
            feedback.waypoint = max(0, index)
            feedback.pose = self._pose_msg(tool)
            handle.publish_feedback(feedback)
            time.sleep(0.02)
        handle.succeed()
        result.error.code = ErrorCode.SUCCESS
        result.pose = self._pose_msg(tool)
        return result

    def _waypoints(self, goal: Any) -> list[Waypoint]:
        if goal.tool not in ('fingertip', 'gripper'):
            raise ValueError(f"tool must be 'fingertip' or 'gripper', got {goal.tool!r}")
        n = len(goal.waypoints)
        if n == 0 or len(goal.speeds) != n or len(goal.dwells) != n:
            raise ValueError(f'{n} waypoints need as many speeds and dwells')
        out = []
        for i, (pose, speed, dwell) in enumerate(
            zip(goal.waypoints, goal.speeds, goal.dwells, strict=True)
        ):
            if pose.header.frame_id not in ('', self.frame):
                raise ValueError(f'waypoint {i} is in {pose.header.frame_id!r}, not {self.frame}')
            p = pose.pose.position
            q = pose.pose.orientation
            if not all(math.isfinite(v) for v in (q.x, q.y, q.z, q.w)):
                # A NaN yaw made start_path raise in the physics thread, which died, and
                # every goal after it 'succeeded' without a move.
                raise ValueError(f'waypoint {i}: the orientation must be finite')
            yaw = yaw_of_quaternion(q.x, q.y, q.z, q.w) if q.w or q.z else 0.0
            xyz = np.array([p.x, p.y, p.z], dtype=float)
            if not (np.isfinite(xyz).all() and 0 < speed <= 1.0 and 0 <= dwell <= 10.0):
                raise ValueError(
                    f'waypoint {i}: position, speed (0, 1] or dwell [0, 10] out of range'
                )
            out.append(Waypoint(xyz, float(speed), float(dwell), f'waypoint {i}', yaw))
        # What the arm cannot do is refused here, with the reason, not found in the physics
        # thread after the goal was taken (the twin reads it only: no step runs meanwhile).
        self.twin.check_path(goal.tool, out)  # SlideInputError is a ValueError
        return out

    def _grip(self, handle: Any) -> GripperCommand.Result:
        try:
            return self._command_gripper(handle)
        finally:
            self._release('fingers')

    def _command_gripper(self, handle: Any) -> GripperCommand.Result:
        goal = handle.request
        result = GripperCommand.Result()
        try:  # here: raised in the physics thread, it was only logged, and the goal SUCCEEDED
            self.twin.check_gripper(goal.width, goal.max_effort)
        except SlideInputError as exc:
            handle.abort()
            result.error.code, result.message = ErrorCode.INVALID_GOAL, str(exc)
            return result
        t0 = self.twin.time
        self._submit(lambda: self.twin.command_gripper(goal.width, goal.max_effort))
        # The fingers move for 0.5 s and settle for 0.3 s of simulated time: on the twin's
        # clock (a wall-clock wait read the fingers mid-way when the physics ran behind).
        while self.twin.time < t0 + 0.8:
            if self._stop.is_set() or not self._sim.is_alive():
                handle.abort()
                result.error.code, result.message = ErrorCode.INTERNAL, 'the twin stopped'
                return result
            if handle.is_cancel_requested:
                self._submit(self.twin.hold_fingers)  # (they closed on to the end)
                handle.canceled()
                result.error.code, result.message = ErrorCode.CANCELED, 'stopped'
                return result
            time.sleep(0.005)
        with self._lock:
            result.width, result.holding = self._gripper
        handle.succeed()
        result.error.code = ErrorCode.SUCCESS
        return result

    def destroy_node(self) -> None:
        self._stop.set()
        self._sim.join(timeout=2.0)
        self._render.join(timeout=5.0)
        self.emulator.stop()
        super().destroy_node()


def main(argv: list[str] | None = None) -> int:
    rclpy.init(args=argv)
    try:
        node = TwinNode()
    except (ParameterError, SlideError, OSError) as exc:
        print(f'twin_node: {exc}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = TolerantMultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # A SIGINT between rclpy's checks shuts the context down under a spin: no fault.
        if rclpy.ok():
            raise
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
