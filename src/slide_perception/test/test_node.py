"""The perception node over real DDS, fed with the twin camera's clouds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
import time
from typing import Any

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import PointCloud2, PointField  # noqa: E402
from slide_perception.node import LOST_FRAMES_HINT, PerceptionNode  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from slide_core.geometry import rotation  # noqa: E402
from slide_core.io import (  # noqa: E402
    cloud_to_xyz,
    grid_from_msg,
    pose_to_planar,
    xyz_to_cloud,
)
from slide_core.model import load_object, load_workcell  # noqa: E402
from slide_core.perception import load_extrinsics  # noqa: E402
from slide_interfaces.msg import ObjectGrid  # noqa: E402
from slide_sim.camera import RgbdCamera, point_cloud  # noqa: E402
from slide_sim.twin import Twin  # noqa: E402

EXTRINSICS = Path(__file__).resolve().parents[3] / 'config' / 'twin_camera.yaml'


class Harness:
    def __init__(self, *parameters: Parameter) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = PerceptionNode(
            context=self.context,
            parameter_overrides=[Parameter('extrinsics_file', value=str(EXTRINSICS)), *parameters],
        )
        self.probe = rclpy.create_node('probe', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.executor.add_node(self.probe)
        self.poses: list[PoseStamped] = []
        self.diagnostics: list[DiagnosticStatus] = []
        self.probe.create_subscription(PoseStamped, '/object/pose', self.poses.append, 10)
        self.clouds: list[PointCloud2] = []
        self.probe.create_subscription(
            PointCloud2, '/object/cloud', self.clouds.append, qos_profile_sensor_data
        )
        self.probe.create_subscription(
            DiagnosticArray, '/diagnostics', lambda m: self.diagnostics.extend(m.status), 10
        )
        self.cloud_pub = self.probe.create_publisher(
            PointCloud2, '/points', qos_profile_sensor_data
        )

    def spin_until(self, condition, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.01)
            if condition():
                return True
        return False

    def send(self, points_C: np.ndarray, stamp: Any = None) -> None:
        msg = xyz_to_cloud(points_C, PointCloud2(), PointField)
        msg.header.frame_id = 'camera_color_optical_frame'
        if stamp is not None:
            msg.header.stamp = stamp
        self.cloud_pub.publish(msg)

    def close(self) -> None:
        self.node.destroy_node()
        self.probe.destroy_node()
        self.executor.shutdown()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.close()


def statuses(h: Harness) -> list[str]:
    return [v.value for s in h.diagnostics for v in s.values if v.key == 'status']


def test_grid_latched_pose_tracked_and_bad_frames_reported(harness: Harness):
    h = harness
    spec = load_object('box')
    twin = Twin(spec, load_workcell(), (0.4, -0.1, 0.4))
    with RgbdCamera(twin.model) as camera:
        cloud_C = point_cloud(camera.capture(twin.data), world=False)
        assert h.spin_until(lambda: h.cloud_pub.get_subscription_count() > 0)
        h.send(cloud_C)
        assert h.spin_until(lambda: len(h.poses) >= 1)
        # A late subscriber still gets the grid (latched).
        grids: list[ObjectGrid] = []
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        h.probe.create_subscription(ObjectGrid, '/object/grid', grids.append, latched)
        assert h.spin_until(lambda: len(grids) == 1)
        grid, X_grid = grid_from_msg(grids[0])
        assert grids[0].header.frame_id == 'table'
        assert grid.n == spec.grid.n
        X0 = pose_to_planar(h.poses[0].pose)
        assert np.allclose(X0, X_grid)

        # Move the object 2 cm and turn it 5 degrees: the pose follows.
        q = twin.model.jnt_qposadr[0]
        twin.data.qpos[q] += 0.02
        twin.data.qpos[q + 3 : q + 7] = [np.cos(0.2 + 0.0436), 0, 0, np.sin(0.2 + 0.0436)]
        twin.settle(0.05)
        h.send(point_cloud(camera.capture(twin.data), world=False))
        assert h.spin_until(lambda: len(h.poses) >= 2)
        X1 = pose_to_planar(h.poses[-1].pose)
        assert np.linalg.norm(X1[:2] - X0[:2] - [0.02, 0.0]) < 0.003
        assert abs(abs(X1[2] - X0[2]) - np.radians(5)) < np.radians(1)
        # The segmented cloud: the box's top, 5 cm above the table, where the pose says.
        assert h.spin_until(lambda: len(h.clouds) >= 2)
        seg = cloud_to_xyz(h.clouds[-1])
        assert seg.shape[0] > 500
        assert np.median(seg[:, 2]) == pytest.approx(0.05, abs=0.003)
        assert np.linalg.norm(np.median(seg[:, :2], axis=0) - X1[:2]) < 0.02

        # An all-NaN cloud: a status, no pose.
        n = len(h.poses)
        h.send(np.full((100, 3), np.nan))
        assert h.spin_until(lambda: 'empty_cloud' in statuses(h))
        assert len(h.poses) == n

    # Reacquire: the next frame (with nothing on the table) says so.
    client = h.probe.create_client(Trigger, '/perception/reacquire')
    assert client.wait_for_service(timeout_sec=20.0)  # discovery is slow under load
    future = client.call_async(Trigger.Request())
    assert h.spin_until(future.done)
    assert future.result().success
    empty_twin = Twin(spec, load_workcell(), (0.4, -0.1, 0.4))
    q = empty_twin.model.jnt_qposadr[0]
    empty_twin.data.qpos[q : q + 3] = [3.0, 0.0, -1.0]  # off the table, out of view
    empty_twin.settle(0.01)
    with RgbdCamera(empty_twin.model) as camera:
        h.send(point_cloud(camera.capture(empty_twin.data), world=False))
    assert h.spin_until(lambda: 'no_object' in statuses(h))
    assert len(h.poses) == n


def test_parameters_read_at_start_up_cannot_be_changed_to_no_effect(harness: Harness):
    # Set on the running node, these reported success and changed nothing.
    for name, value in (('min_fitness', 0.9), ('cell_size', 0.03), ('rate_hz', 5.0)):
        refused = harness.node.set_parameters([Parameter(name, value=value)])[0]
        assert not refused.successful, name
        assert 'read-only' in refused.reason, refused.reason
    assert harness.node.get_parameter('min_fitness').value == 0.6


def test_the_arm_above_the_pusher_is_cut_out_with_its_cylinders():
    # A real arm's wrist and F/T sensor stand above the fingertip, wider than it, over the
    # object being pushed; one fingertip-sized cylinder left them in the cloud, merged into
    # the object below them.
    spec = load_object('box')
    X_WB = np.array([0.4, -0.1, 0.4])
    twin = Twin(spec, load_workcell(), tuple(X_WB))
    half = spec.grid.p_OC[:, 0].max() + 0.5 * spec.grid.cell_size  # along the box's x
    tip_W = X_WB[:2] + rotation(X_WB[2]) @ [-(half + 0.012), 0.0]
    u, v = np.meshgrid(np.linspace(-0.05, 0.05, 35), np.linspace(-0.05, 0.05, 35))
    disc = np.hypot(u, v).ravel() <= 0.05
    wrist_W = np.column_stack((tip_W[0] + u.ravel(), tip_W[1] + v.ravel(), np.full(u.size, 0.11)))
    R_WK, p_WK = load_extrinsics(EXTRINSICS)
    wrist_K = (wrist_W[disc] - p_WK) @ R_WK  # R_WK^T (p_W - p_WK), row-wise
    with RgbdCamera(twin.model) as camera:
        cloud_K = np.vstack((point_cloud(camera.capture(twin.data), world=False), wrist_K))
    stack = [0.014, -0.05, 0.05, 0.06, 0.05, 0.4]  # the fingertip, then the wrist above it
    h = Harness(Parameter('pusher_keep_out', value=stack))
    try:
        pose = PoseStamped()
        pose.header.frame_id = 'table'
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = *tip_W, 0.017
        pusher = h.probe.create_publisher(PoseStamped, '/pusher/pose', 10)
        grids: list[ObjectGrid] = []
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        h.probe.create_subscription(ObjectGrid, '/object/grid', grids.append, latched)
        assert h.spin_until(lambda: pusher.get_subscription_count() > 0)
        assert h.spin_until(lambda: h.cloud_pub.get_subscription_count() > 0)
        pusher.publish(pose)
        h.spin_until(lambda: False, 0.3)
        h.send(cloud_K)
        assert h.spin_until(lambda: bool(grids) or 'ok' not in statuses(h) and h.diagnostics)
        assert grids, statuses(h)
        grid, _ = grid_from_msg(grids[0])
        # The box alone: its cells, its 5 cm top (the wrist stands 11 cm above the table).
        assert grid.n == spec.grid.n
        assert grid.heights.max() == pytest.approx(0.05, abs=0.005)
    finally:
        h.close()


def refused(name: str, value: object, match: str) -> None:
    """A perception node given ``name`` = ``value`` (and the extrinsics) refuses it with a
    message matching ``match``."""
    context = Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(ValueError, match=match):
            PerceptionNode(
                context=context,
                parameter_overrides=[
                    Parameter('extrinsics_file', value=str(EXTRINSICS)),
                    Parameter(name, value=value),
                ],
            )
    finally:
        rclpy.shutdown(context=context)


def test_a_keep_out_that_is_not_whole_cylinders_is_refused():
    for value, match in (([0.014, -0.05], 'whole triples'), ([0.05, 0.1, 0.0], 'cylinder 0')):
        refused('gripper_keep_out', value, match)


def test_an_empty_list_or_extrinsics_in_another_frame_are_refused(tmp_path):
    # `-p gripper_keep_out:=[]` (no value to ROS 2) ended start-up with a TypeError, and
    # extrinsics in another frame than the table's were taken when the node ran on its own.
    for name in ('gripper_keep_out', 'pusher_keep_out'):
        refused(name, None, f'{name} has no value')
    refused('workspace_max', [1.0, 0.7], 'workspace_max needs the 3 numbers')
    world = tmp_path / 'world.yaml'
    world.write_text(EXTRINSICS.read_text().replace('parent_frame: table', 'parent_frame: world'))
    context = Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(ValueError, match="extrinsics are in 'world', and the table frame"):
            PerceptionNode(
                context=context,
                parameter_overrides=[Parameter('extrinsics_file', value=str(world))],
            )
    finally:
        rclpy.shutdown(context=context)


def test_missing_extrinsics_is_a_clear_error():
    context = Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(ValueError, match='extrinsics_file'):
            PerceptionNode(context=context)
    finally:
        rclpy.shutdown(context=context)


def test_a_moved_object_is_said_to_need_reacquiring_and_an_old_frame_is_not_cut_blind():
    spec = load_object('box')
    twin = Twin(spec, load_workcell(), (0.4, -0.1, 0.4))
    h = Harness()
    try:
        with RgbdCamera(twin.model) as camera:
            first = point_cloud(camera.capture(twin.data), world=False)
            q = twin.model.jnt_qposadr[0]
            twin.data.qpos[q] += 0.08  # pushed 8 cm between two frames: beyond max_motion
            twin.settle(0.05)
            moved = point_cloud(camera.capture(twin.data), world=False)
        assert h.spin_until(lambda: h.cloud_pub.get_subscription_count() > 0)
        h.send(first)
        assert h.spin_until(lambda: len(h.poses) == 1)

        # Every frame after it was 'poor_registration' for ever, with nothing said of what
        # would end it.
        def lost() -> int:
            values = {v.key: v.value for v in h.diagnostics[-1].values}
            return int(values.get('lost_frames', 0))

        for _ in range(2 * LOST_FRAMES_HINT):  # (a frame may be overtaken by the next)
            n = len(h.diagnostics)
            h.send(moved)
            assert h.spin_until(lambda n=n: len(h.diagnostics) > n)
            hinted = 'call ~/reacquire' in h.diagnostics[-1].message
            assert hinted == (lost() >= LOST_FRAMES_HINT), h.diagnostics[-1].message
            if hinted:
                break
        assert hinted
        assert len(h.poses) == 1

        # A tool pose stamped at 1000 s and a frame at 0 s (unstamped, or another clock):
        # the fingertip was cut where it had been, or nowhere, and left in the object.
        pusher = h.probe.create_publisher(PoseStamped, '/pusher/pose', 10)
        assert h.spin_until(lambda: pusher.get_subscription_count() > 0)
        pose = PoseStamped()
        pose.header.frame_id = 'table'
        pose.header.stamp.sec = 1000
        pose.pose.position.x, pose.pose.position.z = 0.3, 0.017
        pusher.publish(pose)
        h.spin_until(lambda: False, 0.3)
        h.send(moved)
        assert h.spin_until(lambda: 'keep_out_unknown' in statuses(h))
        assert 'before the oldest pusher pose' in h.diagnostics[-1].message
    finally:
        h.close()


def test_an_empty_table_frame_is_refused():
    # Taken: every grid and pose went out with no frame.
    refused('table_frame', ' ', 'table_frame')


@pytest.mark.parametrize(
    ('name', 'value', 'match'),
    [
        ('serial', '123456789', 'picks the camera of source pyrealsense2'),
        ('decimation', 4, 'decimation_filter'),
    ],
)
def test_camera_settings_that_a_topic_source_ignores_are_refused(name, value, match):
    # Taken and without effect: the cloud comes from the topic as its driver made it.
    refused(name, value, match)


def test_the_cells_are_drawn_where_the_object_is_and_none_of_the_last_grid_stays() -> None:
    # The cubes were only ever added, at the acquisition pose: acquired again with fewer
    # cells, the old ones with higher ids stood on in RViz.
    from builtin_interfaces.msg import Time
    from visualization_msgs.msg import Marker

    from slide_core.geometry import Grid
    from slide_core.perception import ObjectEstimate, TablePlane

    context = Context()
    rclpy.init(context=context)
    try:
        node = PerceptionNode(
            context=context,
            parameter_overrides=[Parameter('extrinsics_file', value=str(EXTRINSICS))],
        )
        grid = Grid(0.02, np.ones((2, 3), bool), np.full((2, 3), 0.02))
        table = TablePlane((0.0, 0.0, 1.0), 0.0, 100)
        estimate = ObjectEstimate(grid, np.array([0.4, 0.0, 0.3]), np.zeros((1, 3)), table)
        markers = node._markers(estimate, estimate.X_WO, Time()).markers
        assert markers[0].action == Marker.DELETEALL and markers[0].ns == 'object_cells'
        cubes = markers[1:]
        assert len(cubes) == grid.n and all(m.ns == 'object_cells' for m in cubes)
        assert len({m.id for m in markers}) == len(markers)
        # Drawn where the object is now (they stayed at the acquisition pose).
        X = np.array([0.2, 0.1, -0.5])
        moved = node._markers(estimate, X, Time()).markers[1:]
        centres = np.array([[m.pose.position.x, m.pose.position.y] for m in moved])
        np.testing.assert_allclose(centres, X[:2] + grid.p_OC @ rotation(-0.5).T, atol=1e-9)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_clouds_stamped_far_from_the_nodes_clock_are_tracked_with_a_warning(harness: Harness):
    # Tracking said ok, and the behaviour then found every pose too old (or too new) and
    # called the object lost.
    from rclpy.time import Duration

    h = harness
    twin = Twin(load_object('box'), load_workcell(), (0.4, -0.1, 0.4))
    with RgbdCamera(twin.model) as camera:
        frame = point_cloud(camera.capture(twin.data), world=False)
    assert h.spin_until(lambda: h.cloud_pub.get_subscription_count() > 0)
    h.send(frame, h.probe.get_clock().now().to_msg())
    assert h.spin_until(lambda: len(h.poses) == 1)
    assert h.spin_until(lambda: h.diagnostics and h.diagnostics[-1].message == 'tracking')
    assert h.diagnostics[-1].level == DiagnosticStatus.OK
    h.send(frame, (h.probe.get_clock().now() + Duration(seconds=3600)).to_msg())
    assert h.spin_until(lambda: len(h.poses) == 2)
    assert h.spin_until(lambda: 'stamped +3600' in h.diagnostics[-1].message)
    assert h.diagnostics[-1].level == DiagnosticStatus.WARN
    assert statuses(h)[-1] == 'ok'
