"""PointCloud2 -> core -> ObjectGrid message -> core grid, with real ROS message types."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip('rclpy')
from sensor_msgs.msg import PointCloud2, PointField  # noqa: E402
from std_msgs.msg import UInt32  # noqa: E402

from slide_core.errors import SlideInputError  # noqa: E402
from slide_core.geometry import Grid, signed_area  # noqa: E402
from slide_core.io import (  # noqa: E402
    cloud_to_xyz,
    grid_from_msg,
    grid_to_msg,
    marker_from_msg,
    marker_to_msg,
    ns_to_s,
    stamp_to_s,
    xyz_to_cloud,
)
from slide_interfaces.msg import ObjectGrid, PushMarker  # noqa: E402


def organised_cloud(points: np.ndarray, width: int, pad: int = 4) -> PointCloud2:
    """x, y, z float32 plus an rgb float and row padding, as realsense2_camera sends."""
    height = points.shape[0] // width
    step = 16
    rows = []
    for r in range(height):
        row = np.zeros((width, 4), np.float32)
        row[:, :3] = points[r * width : (r + 1) * width]
        rows.append(row.tobytes() + b'\0' * pad)
    msg = PointCloud2()
    msg.height, msg.width = height, width
    msg.fields = [
        PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
        for i, n in enumerate(('x', 'y', 'z', 'rgb'))
    ]
    msg.point_step, msg.row_step = step, width * step + pad
    msg.data = b''.join(rows)
    return msg


def test_organised_padded_cloud_with_nans():
    rng = np.random.default_rng(0)
    pts = rng.uniform(-1, 1, (12, 3)).astype(np.float32)
    pts[3] = np.nan
    out = cloud_to_xyz(organised_cloud(pts, width=4))
    assert out.shape == (12, 3)
    assert np.isnan(out[3]).all()
    assert np.allclose(out[~np.isnan(out[:, 0])], pts[~np.isnan(pts[:, 0])])


def test_flat_cloud_round_trip():
    pts = np.arange(30, dtype=float).reshape(10, 3) / 7
    msg = xyz_to_cloud(pts, PointCloud2(), PointField)
    assert np.allclose(cloud_to_xyz(msg), pts, atol=1e-6)


def test_cloud_without_xyz_or_short_is_refused():
    msg = xyz_to_cloud(np.zeros((5, 3)), PointCloud2(), PointField)
    msg.fields = msg.fields[:2]
    with pytest.raises(SlideInputError, match='x, y and z'):
        cloud_to_xyz(msg)
    msg = xyz_to_cloud(np.zeros((5, 3)), PointCloud2(), PointField)
    msg.width = 50
    with pytest.raises(SlideInputError, match='bytes'):
        cloud_to_xyz(msg)


def test_grid_message_round_trip():
    occ = np.array([[1, 1, 0], [1, 1, 1]], bool)
    heights = np.array([[0.03, 0.025, 0.0], [0.03, 0.02, 0.01]])
    grid = Grid(0.02, occ, heights)
    X = np.array([0.4, -0.1, 2.5])
    msg = grid_to_msg(grid, X, ObjectGrid())
    back, X_back = grid_from_msg(msg)
    assert np.array_equal(back.occupancy, occ)
    assert np.allclose(back.heights, heights, atol=1e-7)
    assert np.allclose(back.p_OC, grid.p_OC)
    assert np.allclose(X_back[:2], X[:2])
    assert math.isclose(X_back[2], X[2], abs_tol=1e-12)
    assert len(msg.coverage) == 0 and back.whole  # whole cells send no coverage
    msg.heights = msg.heights[:-1]
    with pytest.raises(SlideInputError, match='height'):
        grid_from_msg(msg)
    # No object on the table is 4.5 m long (a belief file's grid is held to the same).
    big = grid_to_msg(Grid(0.5, np.ones((9, 9), bool), np.full((9, 9), 0.03)), X, ObjectGrid())
    with pytest.raises(SlideInputError, match=r'cell_size: 0.5 m is outside \[0.001, 0.1\]'):
        grid_from_msg(big)


def test_a_grid_message_carries_the_cells_coverage():
    occ = np.array([[1, 1, 0], [1, 1, 1]], bool)
    coverage = np.array([[0.5, 1.0, 0.0], [1.0, 0.25, 0.8]])
    grid = Grid(0.02, occ, np.full(occ.shape, 0.03), coverage)
    msg = grid_to_msg(grid, np.zeros(3), ObjectGrid())
    back, _ = grid_from_msg(msg)
    np.testing.assert_allclose(back.area, grid.area, atol=1e-7)
    # A message from before the field (a recorded bag's own type) reads as whole cells.
    old = SimpleNamespace(**{k: getattr(msg, k) for k in ('cell_size', 'rows', 'cols')})
    old.occupancy, old.heights, old.pose = msg.occupancy, msg.heights, msg.pose
    assert grid_from_msg(old)[0].whole
    msg.coverage = msg.coverage[:-1]
    with pytest.raises(SlideInputError, match='coverage'):
        grid_from_msg(msg)
    msg.coverage = [0.5, 1.0, 0.0, 1.0, 0.0, 0.8]  # an occupied cell with none
    with pytest.raises(SlideInputError, match='coverage'):
        grid_from_msg(msg)


def test_a_grid_message_carries_the_outline():
    occ = np.array([[1, 1, 0], [1, 1, 1]], bool)
    outline = np.array([[-0.03, -0.02], [0.03, -0.02], [0.02, 0.0], [-0.01, 0.02], [-0.03, 0.0]])
    grid = Grid(0.02, occ, np.full(occ.shape, 0.03), None, outline)
    msg = grid_to_msg(grid, np.zeros(3), ObjectGrid())
    back, _ = grid_from_msg(msg)
    assert back.outline is not None
    np.testing.assert_array_equal(back.outline, grid.outline)
    assert len(grid_to_msg(Grid(0.02, occ, grid.heights), np.zeros(3), ObjectGrid()).outline) == 0
    msg.outline = msg.outline[:-1]  # an odd count
    with pytest.raises(SlideInputError, match='outline values'):
        grid_from_msg(msg)
    msg.outline = [0.5, 0.5, 0.6, 0.5, 0.6, 0.6]  # off the cells
    with pytest.raises(SlideInputError, match='no occupied cell'):
        grid_from_msg(msg)


def test_twin_camera_cloud_to_grid_message_to_core_grid():
    """The real pipeline: the twin's rendered depth as a PointCloud2 in the optical frame,
    through the extrinsics file, perception, the ObjectGrid message and back."""
    from pathlib import Path

    from slide_core.model import load_object, load_workcell
    from slide_core.perception import PerceptionConfig, acquire, load_extrinsics, to_table_frame
    from slide_sim.camera import RgbdCamera, point_cloud
    from slide_sim.twin import Twin

    spec = load_object('wrench')
    twin = Twin(spec, load_workcell(), (0.4, 0.05, 0.6))
    with RgbdCamera(twin.model) as camera:
        frame = camera.capture(twin.data)
    cloud = xyz_to_cloud(point_cloud(frame, world=False), PointCloud2(), PointField)
    root = Path(__file__).resolve().parents[4]
    R_WK, p_WK = load_extrinsics(root / 'config' / 'twin_camera.yaml')
    assert np.allclose(R_WK, frame.R_WK, atol=1e-6) and np.allclose(p_WK, frame.p_WK)
    est = acquire(to_table_frame(cloud_to_xyz(cloud), R_WK, p_WK), PerceptionConfig())
    grid, X = grid_from_msg(grid_to_msg(est.grid, est.X_WO, ObjectGrid()))
    assert grid.n == spec.grid.n
    assert np.allclose(
        np.sort(grid.heights[grid.occupancy]),
        np.sort(spec.grid.heights[spec.grid.occupancy]),
        atol=0.003,
    )
    assert np.linalg.norm(X[:2] - twin.object_pose()[:2]) < 0.01
    # The wrench is built of whole cells: each reads about whole, and crosses as it is.
    assert est.grid.area.min() > 0.9
    np.testing.assert_allclose(grid.area, est.grid.area, atol=1e-6)
    # Its traced outline crosses too, and bounds about the cells' area (a staircase).
    assert grid.outline is not None and est.grid.outline is not None
    np.testing.assert_array_equal(grid.outline, est.grid.outline)
    w = spec.grid.cell_size
    assert signed_area(grid.outline) == pytest.approx(spec.grid.n * w * w, rel=0.05)


@pytest.mark.parametrize(('support', 'push_moment'), [('rigid', True), ('cell-mass', False)])
def test_belief_message_round_trip_keeps_the_support_model(
    support: str, push_moment: bool
) -> None:
    from slide_core.io import belief_from_msg, belief_to_msg
    from slide_core.model import Belief
    from slide_interfaces.msg import MassFrictionModel, ModelBelief

    grid = Grid.from_occupancy([[1, 1, 0], [1, 1, 1]], 0.02, 0.03)
    rng = np.random.default_rng(0)
    b = Belief.create(
        grid,
        rng.uniform(0.01, 0.02, (2, grid.n)),
        rng.uniform(0.2, 0.6, (2, grid.n)),
        [0.3, 0.7],
        [1.0, 2.0],
        'probabilistic',
        support,
        push_moment,
    )
    msg = belief_to_msg(b, np.array([0.3, 0.1, 0.2]), ModelBelief(), MassFrictionModel, 0.05)
    back = belief_from_msg(msg)
    assert back.support == support and back.method == 'probabilistic'
    assert back.push_moment is push_moment
    np.testing.assert_allclose(back.mass, b.mass)
    msg.support = ''  # a sender from before the field: the default
    assert belief_from_msg(msg).support == 'rigid'
    msg.support = 'springs'
    with pytest.raises(SlideInputError, match='support model'):
        belief_from_msg(msg)
    msg.support = support
    msg.probabilities = [5.0, 5.0]  # made into [0.5, 0.5] without a word
    with pytest.raises(SlideInputError, match='probabilities sum to 10, not 1'):
        belief_from_msg(msg)


def test_push_marker_round_trip_and_the_unstamped_markers_of_older_bags():
    msg = marker_to_msg(3, 1_767_225_601.25, PushMarker())
    assert msg.header.frame_id == '' and marker_from_msg(msg) == (3, 1_767_225_601.25)
    assert marker_from_msg(UInt32(data=4)) == (4, None)  # no time of its own
    with pytest.raises(SlideInputError, match='must not be negative, got -1'):
        marker_to_msg(-1, 0.0, PushMarker())
    unset = PushMarker(index=5)  # a publisher that did not stamp it
    assert marker_from_msg(unset) == (5, None)


def test_a_log_time_converts_as_its_stamp_does():
    # A message logged at its stamp is placed at the same instant, to the bit: bags mix
    # the two (push markers without stamps are placed by their log times).
    rng = np.random.default_rng(0)
    for t_ns in rng.integers(1_700_000_000 * 10**9, 1_800_000_000 * 10**9, 1000):
        msg = PushMarker()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(t_ns), 10**9)
        assert ns_to_s(int(t_ns)) == stamp_to_s(msg.header.stamp)


def test_a_pose_yaw_does_not_depend_on_the_quaternions_length() -> None:
    from geometry_msgs.msg import Pose

    from slide_core.geometry import yaw_of_quaternion
    from slide_core.io import MessageError, pose_to_planar

    # (0, 0, 0.5, 0.5) is a quarter turn, as tf2 reads it: it came out 0.785 rad.
    assert yaw_of_quaternion(0.0, 0.0, 0.5, 0.5) == pytest.approx(math.pi / 2)
    for yaw in (-3.0, -1.0, 0.0, 0.4, 2.5):
        q = (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))
        assert yaw_of_quaternion(*(3.0 * np.array(q))) == pytest.approx(yaw)
    pose = Pose()
    pose.orientation.w = 0.0  # the zero quaternion is no rotation: it read as yaw 0
    with pytest.raises(MessageError, match='zero quaternion'):
        pose_to_planar(pose)


def test_a_tilted_pose_is_refused_not_flattened() -> None:
    from geometry_msgs.msg import Pose

    from slide_core.io import MessageError, pose_to_planar

    def pose_of(roll: float, yaw: float) -> Pose:
        # yaw about z, then roll about the turned x axis (q = q_yaw q_roll)
        cr, sr = math.cos(roll / 2), math.sin(roll / 2)
        cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
        pose = Pose()
        o = pose.orientation
        o.x, o.y, o.z, o.w = cy * sr, sy * sr, sy * cr, cy * cr
        return pose

    # A tracker's few degrees of lean are the table's plane: the yaw is read.
    assert pose_to_planar(pose_of(math.radians(3.0), 0.7))[2] == pytest.approx(0.7)
    # An object tipped on its side (or a pose in the camera's frame) was read as lying
    # flat at its heading, and planned for.
    for roll in (math.radians(30.0), math.pi / 2, math.pi):
        with pytest.raises(MessageError, match='tilted .* degrees'):
            pose_to_planar(pose_of(roll, 0.7))


def test_a_push_record_with_a_bad_sample_says_which_series_and_sample() -> None:
    # 'the push record holds NaN or infinite values', and a tilted pose's reason, named
    # neither the series nor the sample.
    from geometry_msgs.msg import PoseStamped, WrenchStamped

    from slide_core.io import MessageError, record_from_msg
    from slide_interfaces.msg import PushRecord

    def pose(x: float, tilt: float = 0.0) -> PoseStamped:
        m = PoseStamped()
        m.header.frame_id = 'table'
        m.pose.position.x = x
        m.pose.orientation.x, m.pose.orientation.w = math.sin(tilt / 2), math.cos(tilt / 2)
        return m

    def wrench(fx: float) -> WrenchStamped:
        m = WrenchStamped()
        m.header.frame_id = 'table'
        m.wrench.force.x = fx
        return m

    def record(**series: list) -> PushRecord:  # type: ignore[type-arg]
        msg = PushRecord(
            object_poses=[pose(0.4)] * 3, pusher_poses=[pose(0.3)] * 3, wrenches=[wrench(1.0)] * 3
        )
        for name, values in series.items():
            setattr(msg, name, values)
        return msg

    assert record_from_msg(record(), 'table').f_W.shape == (3, 2)
    for series, reason in (
        ({'wrenches': [wrench(1.0), wrench(math.nan), wrench(math.inf)]}, r'wrenches\[1\] holds'),
        ({'pusher_poses': [pose(0.3), pose(0.3), pose(math.nan)]}, r'pusher_poses\[2\] holds'),
        ({'object_poses': [pose(0.4), pose(0.4, 0.5), pose(0.4)]}, r'object_poses\[1\]: the pose'),
    ):
        with pytest.raises(MessageError, match=reason):
            record_from_msg(record(**series), 'table')
