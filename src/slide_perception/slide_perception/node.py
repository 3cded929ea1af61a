"""ROS 2 perception node: point cloud to object grid and tracked SE(2) pose.

Subscribes to ``points`` (sensor_msgs/PointCloud2; remap it to realsense2_camera's
``/camera/camera/depth/color/points``), or captures from a RealSense through pyrealsense2
(``source:=pyrealsense2``). The cloud is expected in the camera's optical frame; the
extrinsics file gives the optical frame in the table frame. ``pusher/pose`` and
``gripper/pose`` (geometry_msgs/PoseStamped in the table frame) are cut out of the cloud,
each with the stack of vertical cylinders around it that ``pusher_keep_out`` and
``gripper_keep_out`` describe (on a real arm: the fingertip, then the wider wrist and
sensor above it, which would otherwise be merged into the object below them). With
``workcell_file``, what stands on the workcell's obstacles is not the object either; the
graph gives it, and the workspace box and pusher keep-out, from the workcell.

Publishes ``object/grid`` (slide_interfaces/ObjectGrid, latched), ``object/pose``
(PoseStamped), ``object/cloud`` (the segmented points), ``object/markers`` (MarkerArray)
and ``/diagnostics`` (what the last frame gave: ok or why there is no grid or pose).
A message that cannot be used (a malformed cloud, a cloud perception cannot make sense of,
a pose with NaN) is reported on ``/diagnostics`` (``bad_cloud``, ``bad_pose``), counted in
``bad_messages`` (also on ``/diagnostics``), and the node carries on with the next one.
Service ``~/reacquire`` (std_srvs/Trigger) forgets the object; the next frame acquires it.

    ros2 run slide_perception perception_node --ros-args \\
        -p extrinsics_file:=/path/to/camera.yaml \\
        -r points:=/camera/camera/depth/color/points
"""

from __future__ import annotations

from collections import deque
import math
import re
import sys
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
import numpy as np
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import PointCloud2, PointField
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, rotation
from slide_core.io import cloud_to_xyz, grid_to_msg, set_planar_pose, xyz_to_cloud
from slide_core.io.perceive import obstacle_boxes
from slide_core.model import load_workcell
from slide_core.perception import (
    CameraView,
    KeepOut,
    ObjectEstimate,
    PerceptionConfig,
    PerceptionError,
    PerceptionStatus,
    PoseTracker,
    acquire,
    read_extrinsics,
    to_table_frame,
)
from slide_interfaces.msg import ObjectGrid
from slide_perception.realsense import FilterSettings
from slide_ros.executors import TolerantSingleThreadedExecutor

CLOUD_QOS = qos_profile_sensor_data
KEEP_OUT_HISTORY = 200  # tool poses kept per tool (a few seconds at the tools' rates)
KEEP_OUT_REACH_S = 0.5
"""How far [s] a cloud's stamp may lie before the oldest tool pose kept and still be cut
with it: further back, where the tool was is not known (or the camera and the arm stamp on
different clocks), and the frame is refused; a cloud stamped at 0 had the fingertip cut
where it stood seconds before, 20 cm away, and left in the object."""
CLOCK_APART_S = 5.0
"""How far [s] a cloud's stamp may lie from the node's clock before /diagnostics warns
(a frame waits in queues for well under a second)."""
MARKER_PERIOD_S = 0.2
"""How often [s] at most the cells are drawn again at the tracked pose."""
DECIMATION = FilterSettings.decimation
"""The decimation a pyrealsense2 source applies unless told otherwise."""
LOST_FRAMES_HINT = 15
"""Tracked frames in a row without a pose after which ``/diagnostics`` says to reacquire
(the object moved further than ``max_motion`` between two frames, say)."""


def _seconds(stamp: Any) -> float:
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def _at(history: list[tuple[float, np.ndarray]], t: float) -> np.ndarray | None:
    """The position at time ``t`` from stamped positions (interpolated; the nearest end
    outside them); None without any."""
    if not history:
        return None
    stamps = np.array([s for s, _ in history])
    order = np.argsort(stamps)
    stamps = stamps[order]
    points = np.array([history[i][1] for i in order])
    return np.array([np.interp(t, stamps, points[:, j]) for j in range(3)])


LATCHED_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
POSE_QOS = QoSProfile(depth=10)
DIAGNOSTICS_QOS = QoSProfile(depth=10)


def _range(lo: float, hi: float) -> list[FloatingPointRange]:
    return [FloatingPointRange(from_value=lo, to_value=hi)]


KEEP_OUT_DESCRIPTION = (
    'what of the {tool} and the arm above it to cut out of the cloud: vertical cylinders '
    'about the {tool} pose, as radius, bottom, top [m] (bottom and top relative to the '
    "pose's height), three numbers per cylinder; e.g. the fingertip, then the wrist and "
    'the F/T sensor above it, wider'
)


def keep_out_stack(name: str, values: Any) -> tuple[tuple[float, float, float], ...]:
    """The (radius, bottom, top) triples [m] of a keep-out parameter's flat list.
    SlideInputError when it is not whole triples of finite numbers with radius >= 0 and
    bottom < top."""
    if values is None:  # what ROS 2 makes of `name:=[]`: a list without a type
        raise SlideInputError(
            f'{name} has no value (an empty list reads as none): give radius, bottom, top [m] '
            'per cylinder; 0.0, -0.01, 0.01 cuts nothing out'
        )
    flat = [float(v) for v in values]
    if len(flat) % 3:
        raise SlideInputError(
            f'{name} takes radius, bottom, top per cylinder: {len(flat)} numbers are not '
            'whole triples'
        )
    stack = tuple((flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3))
    for k, (radius, bottom, top) in enumerate(stack):
        if not (np.isfinite([radius, bottom, top]).all() and radius >= 0 and bottom < top):
            raise SlideInputError(
                f'{name}: cylinder {k} ({radius:g}, {bottom:g}, {top:g}) needs a finite '
                'radius >= 0 and a bottom below its top [m]'
            )
    return stack


class PerceptionNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__('perception', **kwargs)

        def p(name: str, default: Any, descriptor: ParameterDescriptor) -> Any:
            # Read once, here: a change while running would report success and do nothing.
            descriptor.read_only = True
            return self.declare_parameter(name, default, descriptor)

        extrinsics = p(
            'extrinsics_file',
            '',
            ParameterDescriptor(description='YAML with the camera optical frame in the table'),
        ).value
        self.table_frame = p(
            'table_frame', 'table', ParameterDescriptor(description='frame of grid and pose')
        ).value
        workcell_file = p(
            'workcell_file',
            '',
            ParameterDescriptor(
                description='workcell file whose obstacles are cut out of the cloud, with '
                "what stands on them (empty: none; the graph gives the workcell's)"
            ),
        ).value
        source = p(
            'source',
            'topic',
            ParameterDescriptor(description='topic (PointCloud2 on points) or pyrealsense2'),
        ).value
        cell_size = p(
            'cell_size',
            0.02,
            ParameterDescriptor(
                description='grid cell edge [m]',
                # (at least twice the registration's voxel: 5 mm was offered, then refused)
                floating_point_range=_range(2 * PerceptionConfig.voxel_size, 0.1),
            ),
        ).value
        ws_min = p(
            'workspace_min',
            [-0.2, -0.7, -0.05],
            ParameterDescriptor(description='workspace box corner in the table frame [m]'),
        ).value
        ws_max = p(
            'workspace_max',
            [1.0, 0.7, 0.4],
            ParameterDescriptor(description='workspace box corner in the table frame [m]'),
        ).value
        min_fitness = p(
            'min_fitness',
            0.6,
            ParameterDescriptor(
                description='least share of the outline matched for a pose',
                floating_point_range=_range(0.05, 1.0),
            ),
        ).value
        min_height = p(
            'min_height',
            PerceptionConfig.min_height,
            ParameterDescriptor(
                description='points at least this high above the table are the object [m] '
                '(objects whose top stands within the depth noise of it are refused: lower '
                'it on a quieter camera)',
                floating_point_range=_range(0.001, 0.05),
            ),
        ).value
        rate = p(
            'rate_hz',
            30.0,
            ParameterDescriptor(
                description='most frames processed per second',
                floating_point_range=_range(0.5, 120.0),
            ),
        ).value
        self.pusher_keep_out = keep_out_stack(
            'pusher_keep_out',
            p(
                'pusher_keep_out',
                [0.014, -0.05, 0.05],
                ParameterDescriptor(description=KEEP_OUT_DESCRIPTION.format(tool='pusher')),
            ).value,
        )
        self.gripper_keep_out = keep_out_stack(
            'gripper_keep_out',
            p(
                'gripper_keep_out',
                [0.07, -0.1, 0.1],
                ParameterDescriptor(description=KEEP_OUT_DESCRIPTION.format(tool='gripper')),
            ).value,
        )
        decimation = p(
            'decimation',
            DECIMATION,
            ParameterDescriptor(
                description='pyrealsense2 source: decimation filter magnitude',
                integer_range=[IntegerRange(from_value=1, to_value=8, step=1)],
            ),
        ).value
        serial = p(
            'serial', '', ParameterDescriptor(description='pyrealsense2 source: camera serial')
        ).value
        if not extrinsics:
            raise SlideInputError('perception needs the extrinsics_file parameter (X_WK)')
        if not isinstance(self.table_frame, str) or not self.table_frame.strip():
            raise SlideInputError('table_frame must name the frame of grid and pose')
        camera = read_extrinsics(extrinsics)
        self.R_WK, self.p_WK = camera.R_WK, camera.p_WK
        self.extrinsics = extrinsics
        self.camera_frame = camera.child_frame
        for name, corner in (('workspace_min', ws_min), ('workspace_max', ws_max)):
            if corner is None or len(corner) != 3:
                raise SlideInputError(
                    f'{name} needs the 3 numbers x, y, z [m] of a corner of the box the object '
                    f'must lie in (table frame), got {"none" if corner is None else list(corner)}'
                )
        if camera.parent_frame != self.table_frame:
            # (checked by the graph's launch description, not by the node run on its own)
            raise SlideInputError(
                f'{extrinsics}: the camera extrinsics are in {camera.parent_frame!r}, and the '
                f'table frame is {self.table_frame!r}: give the camera pose in the table frame, '
                'or set table_frame'
            )
        obstacles: tuple[tuple[float, float, float, float], ...] = ()
        if workcell_file:
            # (a box on the table, which the planner steered round, was a second object)
            obstacles = obstacle_boxes(load_workcell(workcell_file))
        self.config = PerceptionConfig(
            cell_size=cell_size,
            workspace_min=tuple(ws_min),
            workspace_max=tuple(ws_max),
            min_fitness=min_fitness,
            min_height=min_height,
            obstacles=obstacles,
        )
        self.estimate: ObjectEstimate | None = None
        self.tracker: PoseTracker | None = None
        self._lock = threading.Lock()
        self._cloud: tuple[Any, np.ndarray] | None = None  # (stamp, p_K)
        # Recent keep-out poses (stamp [s], position (3,)): a frame uses the pose of each tool
        # at the frame's stamp, so a cloud that waited in the queue is cut where the tool was.
        self._pusher: deque[tuple[float, np.ndarray]] = deque(maxlen=KEEP_OUT_HISTORY)
        self._gripper: deque[tuple[float, np.ndarray]] = deque(maxlen=KEEP_OUT_HISTORY)
        self.bad_messages = 0
        self._foreign: dict[str, tuple[float, str]] = {}  # tool: its last pose in another frame
        self.lost_frames = 0  # tracked frames in a row without a pose
        self._drawn = -math.inf  # when the cells were last drawn (monotonic [s])

        self.pub_grid = self.create_publisher(ObjectGrid, 'object/grid', LATCHED_QOS)
        self.pub_pose = self.create_publisher(PoseStamped, 'object/pose', POSE_QOS)
        self.pub_cloud = self.create_publisher(PointCloud2, 'object/cloud', CLOUD_QOS)
        self.pub_markers = self.create_publisher(MarkerArray, 'object/markers', LATCHED_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', DIAGNOSTICS_QOS)
        self.create_subscription(PoseStamped, 'pusher/pose', self._on_pusher, POSE_QOS)
        self.create_subscription(PoseStamped, 'gripper/pose', self._on_gripper, POSE_QOS)
        self.create_service(Trigger, '~/reacquire', self._reacquire)
        self.capture = None
        if source == 'topic':
            # (both were taken and did nothing: the cloud comes as it was published)
            if serial:
                raise SlideInputError(
                    f'serial {serial!r} picks the camera of source pyrealsense2; with source '
                    'topic the cloud comes from the points topic: set source:=pyrealsense2, '
                    'or leave serial out'
                )
            if decimation != DECIMATION:
                raise SlideInputError(
                    f'decimation {decimation} filters the frames of source pyrealsense2; with '
                    "source topic thin the cloud where it is made (realsense2_camera's "
                    'decimation_filter), or leave decimation out'
                )
            self.create_subscription(PointCloud2, 'points', self._on_cloud, CLOUD_QOS)
        elif source == 'pyrealsense2':
            from slide_perception.realsense import RealSenseCapture

            self.capture = RealSenseCapture(serial, settings=FilterSettings(decimation))
        else:
            raise SlideInputError(f'source must be topic or pyrealsense2, got {source!r}')
        self.create_timer(1.0 / rate, self._step)
        self.get_logger().info(
            f'perception: {source}, cells {cell_size * 100:g} cm, table frame {self.table_frame!r}'
        )

    # -- callbacks: store and return ----------------------------------------------------------
    def _bad(self, status: str, reason: str) -> None:
        self.bad_messages += 1
        self._report(DiagnosticStatus.ERROR, status, reason)
        self.get_logger().warning(f'{status}: {reason}', throttle_duration_sec=5.0)

    def _on_cloud(self, msg: PointCloud2) -> None:
        frame = msg.header.frame_id
        if frame and self.camera_frame and frame != self.camera_frame:
            # (a D435's depth/color/points is in its depth frame unless aligned to colour:
            # 15 mm off, and every pose with it)
            self._bad(
                'wrong_frame',
                f'a cloud in {frame!r} is ignored: the extrinsics ({self.extrinsics}) are '
                f'those of {self.camera_frame!r}; publish the cloud in that frame or give the '
                'extrinsics of this one',
            )
            return
        try:
            p_K = cloud_to_xyz(msg)
        except (ValueError, TypeError, OverflowError, MemoryError) as exc:
            # SlideInputError (a ValueError) says what is wrong; anything else is also
            # one bad message, never the end of the node.
            self._bad('bad_cloud', str(exc) or type(exc).__name__)
            return
        with self._lock:
            self._cloud = (msg.header.stamp, p_K)

    def _planar(self, msg: PoseStamped, tool: str) -> np.ndarray | None:
        frame = msg.header.frame_id
        if frame and frame != self.table_frame:
            # Where the tool is is then not known: frames are refused until its poses come
            # in the table frame again (ignored with a log line, the fingertip touching the
            # box was taken into its grid, 6.6 mm off, with status ok).
            self._foreign[tool] = (_seconds(msg.header.stamp), frame)
            self._bad(
                'wrong_frame',
                f'a {tool} pose in {frame!r} is ignored: publish it in {self.table_frame!r} '
                '(the tool cannot be cut out of the frames meanwhile)',
            )
            return None
        q = msg.pose.position
        p = np.array([q.x, q.y, q.z], dtype=float)
        if not np.isfinite(p).all():
            self._bad('bad_pose', f'a keep-out pose holds NaN or infinite values: {p.tolist()}')
            return None
        return p

    def _on_pusher(self, msg: PoseStamped) -> None:
        p = self._planar(msg, 'pusher')
        if p is not None:
            self._pusher.append((_seconds(msg.header.stamp), p))

    def _on_gripper(self, msg: PoseStamped) -> None:
        p = self._planar(msg, 'gripper')
        if p is not None:
            self._gripper.append((_seconds(msg.header.stamp), p))

    def _reacquire(self, _: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            self.estimate = None
            self.tracker = None
            self.lost_frames = 0
        response.success = True
        response.message = 'object forgotten: the next frame acquires it'
        return response

    # -- work ---------------------------------------------------------------------------------
    def _keep_out(self, stamp: float) -> tuple[KeepOut, ...]:
        """The tools to cut out of a frame stamped ``stamp`` [s], each at the pose it had
        then (interpolated between the poses around it; the latest after them). A
        PerceptionError (``keep_out_unknown``) when the frame is older than a tool's
        poses reach back (``KEEP_OUT_REACH_S``)."""
        bodies = []
        for tool, history, stack in (
            ('pusher', self._pusher, self.pusher_keep_out),
            ('gripper', self._gripper, self.gripper_keep_out),
        ):
            kept = list(history)
            foreign = self._foreign.get(tool)
            if foreign is not None and foreign[0] >= max((t for t, _ in kept), default=-math.inf):
                raise PerceptionError(
                    PerceptionStatus.KEEP_OUT_UNKNOWN,
                    f'the latest {tool} pose is in {foreign[1]!r}, not {self.table_frame!r}: '
                    'where the tool is is not known, so it cannot be cut out',
                )
            if kept and stamp < min(t for t, _ in kept) - KEEP_OUT_REACH_S:
                oldest = min(t for t, _ in kept)
                raise PerceptionError(
                    PerceptionStatus.KEEP_OUT_UNKNOWN,
                    f'the cloud is stamped {oldest - stamp:.1f} s before the oldest {tool} '
                    'pose kept: where the tool was is not known, so it cannot be cut out '
                    '(are the camera and the arm on different clocks, or is the cloud '
                    'unstamped?)',
                )
            p = _at(kept, stamp)
            if p is None:
                continue
            for radius, bottom, top in stack:
                z = float(p[2]) + 0.5 * (bottom + top)
                bodies.append(KeepOut((float(p[0]), float(p[1]), z), radius, 0.5 * (top - bottom)))
        return tuple(bodies)

    def _step(self) -> None:
        if self.capture is not None:
            try:
                cloud = (self.get_clock().now().to_msg(), self.capture.points())
            except (RuntimeError, SlideInputError) as exc:
                self._report(DiagnosticStatus.ERROR, 'no_frames', str(exc))
                return
        else:
            with self._lock:
                cloud, self._cloud = self._cloud, None
        if cloud is None:
            return
        stamp, p_K = cloud
        t0 = time.perf_counter()
        p_W = to_table_frame(p_K, self.R_WK, self.p_WK)
        view = CameraView.of(p_K, self.R_WK, self.p_WK)
        try:
            keep_out = self._keep_out(_seconds(stamp))
            if self.tracker is None:
                estimate = acquire(p_W, self.config, keep_out, view)
                self.estimate, self.tracker = estimate, PoseTracker(estimate, self.config)
                X_WO = estimate.X_WO
                model = estimate.model_O
                segmented = np.column_stack(
                    (X_WO[:2] + model[:, :2] @ rotation(float(X_WO[2])).T, model[:, 2])
                )
                self._publish_grid(estimate, stamp)
                detail = {'cells': str(estimate.grid.n)}
            else:
                result = self.tracker.update(p_W, keep_out, view)
                X_WO, segmented = result.X_WO, result.points_W
                detail = {
                    'fitness': f'{result.fitness:.3f}',
                    'rmse_mm': f'{result.rmse * 1e3:.2f}',
                }
        except PerceptionError as exc:
            message = str(exc)
            if self.tracker is not None:
                self.lost_frames += 1
                if self.lost_frames >= LOST_FRAMES_HINT:
                    # (the tracker keeps its last pose: it never found the object again)
                    message += (
                        f'; no pose for {self.lost_frames} frames: if the object was moved, '
                        'call ~/reacquire'
                    )
            self._report(
                DiagnosticStatus.WARN,
                exc.status.value,
                message,
                {'lost_frames': str(self.lost_frames)},
            )
            return
        except Exception as exc:  # noqa: BLE001 - one frame perception cannot handle
            # (open3d refuses degenerate clouds with RuntimeError, numpy with ValueError):
            # that frame is lost, the node carries on.
            text = re.sub(r'\x1b\[[0-9;]*m', '', str(exc)).strip() or type(exc).__name__
            self._bad('bad_cloud', f'perception failed on this frame: {text.splitlines()[0]}')
            return
        self.lost_frames = 0
        pose = PoseStamped()
        pose.header.stamp = stamp
        pose.header.frame_id = self.table_frame
        set_planar_pose(pose.pose, X_WO)
        self.pub_pose.publish(pose)
        now = time.monotonic()
        if self.estimate is not None and now - self._drawn >= MARKER_PERIOD_S:
            # The cells where the object is now: drawn once, at the acquisition pose, they
            # stayed there while the object was pushed away.
            self.pub_markers.publish(self._markers(self.estimate, X_WO, stamp))
            self._drawn = now
        if self.pub_cloud.get_subscription_count():
            cloud_msg = PointCloud2()
            cloud_msg.header = pose.header
            self.pub_cloud.publish(xyz_to_cloud(segmented, cloud_msg, PointField))
        detail['ms'] = f'{(time.perf_counter() - t0) * 1000:.1f}'
        apart = _seconds(stamp) - self.get_clock().now().nanoseconds * 1e-9
        if abs(apart) > CLOCK_APART_S:
            # (tracking 'ok', and every pose then too old or too new for the behaviour,
            # which said the object was lost)
            detail['stamp_offset_s'] = f'{apart:+.1f}'
            self._report(
                DiagnosticStatus.WARN,
                'ok',
                f"tracking, but the clouds are stamped {apart:+.1f} s from this node's clock: "
                'their poses are too old or too new to push on (the camera on another clock, '
                'unstamped clouds, or use_sim_time set on one side only)',
                detail,
            )
            return
        self._report(DiagnosticStatus.OK, 'ok', 'tracking', detail)

    def _publish_grid(self, estimate: ObjectEstimate, stamp: Any) -> None:
        msg = ObjectGrid()
        msg.header.stamp = stamp
        msg.header.frame_id = self.table_frame
        self.pub_grid.publish(grid_to_msg(estimate.grid, estimate.X_WO, msg))
        self.pub_markers.publish(self._markers(estimate, estimate.X_WO, stamp))
        self._drawn = time.monotonic()

    def _markers(self, estimate: ObjectEstimate, X: FloatArray, stamp: Any) -> MarkerArray:
        """The object's cells as cubes at the pose X (3,) (x, y, yaw), table frame."""
        grid = estimate.grid
        R = rotation(float(X[2]))
        heights = grid.heights[grid.occupancy]
        # The last grid's cubes go first: an object acquired anew with fewer cells left the
        # old ones beyond its count standing.
        gone = Marker()
        gone.header.stamp, gone.header.frame_id = stamp, self.table_frame
        gone.ns, gone.id, gone.action = 'object_cells', -1, Marker.DELETEALL
        markers = [gone]
        for i, (p_OC, h, a) in enumerate(zip(grid.p_OC, heights, grid.area, strict=True)):
            m = Marker()
            m.header.stamp = stamp
            m.header.frame_id = self.table_frame
            m.ns, m.id, m.type, m.action = 'object_cells', i, Marker.CUBE, Marker.ADD
            p_W = X[:2] + R @ p_OC
            set_planar_pose(m.pose, np.array([p_W[0], p_W[1], X[2]]))
            m.pose.position.z = float(h) / 2
            m.scale.x = m.scale.y = grid.cell_size * 0.95
            m.scale.z = max(float(h), 1e-3)
            # A cell the object covers in part is drawn fainter.
            m.color.r, m.color.g, m.color.b, m.color.a = 0.3, 0.45, 0.8, 0.3 + 0.5 * float(a)
            markers.append(m)
        return MarkerArray(markers=markers)

    def _report(
        self, level: int, status: str, message: str, values: dict[str, str] | None = None
    ) -> None:
        diag = DiagnosticStatus(name='perception', level=level, message=message)
        diag.hardware_id = 'camera'
        diag.values = [
            KeyValue(key='status', value=status),
            KeyValue(key='bad_messages', value=str(self.bad_messages)),
        ] + [KeyValue(key=k, value=v) for k, v in (values or {}).items()]
        array = DiagnosticArray(status=[diag])
        array.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(array)

    def destroy_node(self) -> None:
        if self.capture is not None:
            self.capture.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the node until Ctrl-C; exit code 2, with one line saying why, when a parameter
    or the extrinsics file is bad."""
    from slide_core.perception import kernels

    kernels.warm_up()  # numba's disk cache now, not on the first tracked frame
    rclpy.init(args=args)
    try:
        node = PerceptionNode()
    except (ValueError, ParameterException, OSError) as exc:  # SlideInputError is a ValueError
        print(f'perception_node: {exc}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    # A message rclpy cannot take is skipped and said (seen once in CI: it ended the node).
    executor = TolerantSingleThreadedExecutor()
    executor.add_node(node)
    try:
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # A SIGINT between rclpy's checks shuts the context down under a spin: no fault.
        if rclpy.ok():
            raise
    finally:
        node.destroy_node()
        # Not ``if rclpy.ok(): rclpy.shutdown()``: rclpy shuts the context down on SIGINT from
        # a thread of its own, which can land between the check and the call (exit 1).
        rclpy.try_shutdown()
    return 0
