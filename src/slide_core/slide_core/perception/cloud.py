"""A depth camera's cloud in the table frame: the table plane and the one object on it."""

from __future__ import annotations

from dataclasses import dataclass, field
import enum
import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import ConvexHull, QhullError, cKDTree
from scipy.stats import median_abs_deviation
import transforms3d  # type: ignore[import-untyped]

from slide_core.errors import SlideInputError
from slide_core.files import read_yaml
from slide_core.geometry import CELL_SIZE_RANGE, FloatArray


class PerceptionStatus(enum.Enum):
    """What a perception step found; every value but OK means: no grid, no pose."""

    OK = 'ok'
    EMPTY_CLOUD = 'empty_cloud'
    NO_TABLE = 'no_table'
    NO_OBJECT = 'no_object'
    SEVERAL_OBJECTS = 'several_objects'
    TOO_LARGE = 'too_large'
    """An object larger than the workcell takes (no node would accept its grid)."""
    PARTIAL_VIEW = 'partial_view'
    POOR_REGISTRATION = 'poor_registration'
    KEEP_OUT_UNKNOWN = 'keep_out_unknown'
    """Where a tool to cut out of the frame was then is not known."""


class PerceptionError(SlideInputError):
    """A frame from which no trustworthy grid or pose can be made."""

    def __init__(self, status: PerceptionStatus, message: str) -> None:
        super().__init__(f'{status.value}: {message}')
        self.status = status


EDGE_REACH = 0.2
"""How far past the table's free edge and far end [m] the workspace box reaches: an object
pushed out over the edge is still seen whole."""
SIDE_REACH = 0.1
"""How far past the table's sides [m] the workspace box reaches."""
WORKSPACE_Z = (-0.05, 0.4)
"""The workspace box's bottom and top [m] above the table top."""
OBSTACLE_MARGIN = 0.006
"""What is cut out round a workcell obstacle's footprint [m] (depth noise at its sides)."""


def workspace_box(
    depth: float, width: float
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """The corners (table frame [m]) of the box an object must lie in on a table ``depth``
    deep and ``width`` wide (the workcell's table): the table, with ``EDGE_REACH`` past its
    edge and end and ``SIDE_REACH`` past its sides. The box was written for the 0.8 x 1.2 m
    table alone, and an object on a larger one was 'no object there'."""
    half = width / 2 + SIDE_REACH
    return (-EDGE_REACH, -half, WORKSPACE_Z[0]), (depth + EDGE_REACH, half, WORKSPACE_Z[1])


@dataclass(frozen=True)
class PerceptionConfig:
    """Settings; lengths in metres, in the table frame W.

    Attributes:
        cell_size: edge of a grid cell.
        workspace_min, workspace_max: (3,) corners of the box the object must lie in
            (the defaults: :func:`workspace_box` of the workcell's 0.8 x 1.2 m table; give
            it the table's own, as :meth:`for_table` does).
        table_inlier_distance: RANSAC inlier band of the table plane.
        max_table_tilt_deg, max_table_offset: how far the fitted plane may be from the
            calibrated z = 0 plane before the frame is refused (calibration or view wrong).
        min_table_fraction: least share of the workspace points on the table plane.
        min_height: points at least this high above the plane are object candidates.
        voxel_size: downsampling for clustering and registration.
        cluster_eps: DBSCAN neighbourhood; points closer than this are one object.
        min_cluster_points: clusters with fewer (downsampled) points are noise.
        view_margin: an object closer than this to the edge of what the camera sees (or to
            the workspace box) is partly out of view.
        fill_fraction: a cell belongs to the object when this share of it is covered (a
            rim cell also with less, when the footprint reaches into it past its blurred
            edge: :func:`slide_core.perception.shape.build_grid`).
        icp_distance: correspondence distance of the coarse ICP pass (the fine pass uses a
            quarter of it).
        max_motion: how far the object may move between two tracked frames.
        min_fitness: least share of model points matched for a pose to be trusted.
        max_rmse: largest RMS distance of the matched points for a pose to be trusted.
        obstacles: the workcell's boxes on the table, (centre x, y, half size x, y) each:
            what stands on them, and ``OBSTACLE_MARGIN`` round them, is not the object
            (:meth:`on_obstacles`).
    """

    cell_size: float = 0.02
    workspace_min: tuple[float, float, float] = (-0.2, -0.7, -0.05)
    workspace_max: tuple[float, float, float] = (1.0, 0.7, 0.4)
    table_inlier_distance: float = 0.004
    max_table_tilt_deg: float = 5.0
    max_table_offset: float = 0.03
    min_table_fraction: float = 0.2
    min_height: float = 0.006
    voxel_size: float = 0.003
    cluster_eps: float = 0.012
    min_cluster_points: int = 30
    view_margin: float = 0.01
    fill_fraction: float = 0.5
    icp_distance: float = 0.02
    max_motion: float = 0.05
    min_fitness: float = 0.6
    max_rmse: float = 0.004
    obstacles: tuple[tuple[float, float, float, float], ...] = ()

    def on_obstacles(self, points_W: FloatArray) -> NDArray[np.bool_]:
        """(N,) whether points p_W (N, 3) stand on an obstacle's footprint, or within
        ``OBSTACLE_MARGIN`` of it (at any height)."""
        out = np.zeros(points_W.shape[0], dtype=bool)
        for cx, cy, hx, hy in self.obstacles:
            out |= (np.abs(points_W[:, 0] - cx) <= hx + OBSTACLE_MARGIN) & (
                np.abs(points_W[:, 1] - cy) <= hy + OBSTACLE_MARGIN
            )
        return out

    @classmethod
    def for_table(cls, depth: float, width: float, **settings: Any) -> PerceptionConfig:
        """Settings whose workspace box is that of a table ``depth`` deep and ``width``
        wide (:func:`workspace_box`), the others ``settings`` or the defaults."""
        lo, hi = workspace_box(depth, width)
        return cls(workspace_min=lo, workspace_max=hi, **settings)

    def __post_init__(self) -> None:
        positive = (
            'cell_size',
            'table_inlier_distance',
            'max_table_offset',
            'min_height',
            'voxel_size',
            'cluster_eps',
            'icp_distance',
            'max_motion',
            'max_rmse',
            'max_table_tilt_deg',
        )
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise SlideInputError(f'perception {name} must be positive, got {value}')
        # (NaN took a table tilted 30 degrees, -1 refused every table, 0 points made
        # every speck an object)
        if not (math.isfinite(self.view_margin) and self.view_margin >= 0):
            raise SlideInputError(f'perception view_margin must be >= 0, got {self.view_margin}')
        n = self.min_cluster_points
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise SlideInputError(
                f'perception min_cluster_points must be a whole number >= 1, got {n}'
            )
        if not self.max_table_tilt_deg < 90.0:
            raise SlideInputError(
                f'perception max_table_tilt_deg must be below 90, got {self.max_table_tilt_deg}'
            )
        for name in ('fill_fraction', 'min_fitness', 'min_table_fraction'):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise SlideInputError(f'perception {name} must be in (0, 1], got {value}')
        lo, hi = np.asarray(self.workspace_min), np.asarray(self.workspace_max)
        if lo.shape != (3,) or hi.shape != (3,) or not np.all(lo < hi):
            raise SlideInputError('workspace_min must be below workspace_max on every axis')
        if self.min_height >= self.workspace_max[2]:
            raise SlideInputError(
                f'perception min_height {self.min_height} m is not below the workspace top '
                f'({self.workspace_max[2]} m): no object could be seen'
            )
        smallest, largest = CELL_SIZE_RANGE  # as object and belief files have them
        if not smallest <= self.cell_size <= largest:
            raise SlideInputError(
                f'perception cell_size must be {smallest} to {largest} m, got {self.cell_size}'
            )
        for box in self.obstacles:
            if len(box) != 4 or not all(math.isfinite(v) for v in box) or min(box[2:]) <= 0:
                raise SlideInputError(
                    'perception obstacles are (centre x, y, half size x, y) boxes of finite '
                    f'numbers and positive half sizes [m], got {list(box)}'
                )
        if self.voxel_size > self.cell_size / 2:
            raise SlideInputError('voxel_size must be at most half the cell size')


@dataclass(frozen=True)
class KeepOut:
    """A known body to cut out of the cloud: a vertical cylinder in the table frame.

    Attributes:
        p_W: (3,) centre of the body [m].
        radius: cylinder radius [m] (the body's radius plus a margin).
        half_height: half its extent along z [m].
    """

    p_W: tuple[float, float, float]
    radius: float
    half_height: float

    def contains(self, points_W: FloatArray) -> NDArray[np.bool_]:
        c = np.asarray(self.p_W, dtype=float)
        d2 = (points_W[:, 0] - c[0]) ** 2 + (points_W[:, 1] - c[1]) ** 2
        inside = (d2 <= self.radius**2) & (np.abs(points_W[:, 2] - c[2]) <= self.half_height)
        return np.asarray(inside, dtype=bool)


@dataclass(frozen=True)
class TablePlane:
    """The table top: points p with n . p + d = 0, n (3,) unit and up."""

    normal: tuple[float, float, float]
    offset: float
    inliers: int

    def height(self, points_W: FloatArray) -> FloatArray:
        """(N,) signed heights [m] of points (N, 3) above the plane."""
        return np.asarray(points_W @ np.asarray(self.normal) + self.offset, dtype=float)


@dataclass(frozen=True)
class Segmentation:
    """The object's points in one frame: p_W (M, 3) and their heights (M,) above the table;
    table_W (K, 3): the points at the table's height (within half its inlier band) inside
    the object's bounding box: the table seen through an opening in it (a ring's middle),
    which its footprint leaves open (:func:`slide_core.perception.shape.footprint_image`)."""

    points_W: FloatArray
    heights: FloatArray
    table: TablePlane
    clusters: int
    table_W: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))


MAX_CAMERA_DISTANCE = 10.0
"""How far [m] from the table frame's origin a camera may be: beyond, the translation is
taken for millimetres (the workcell file's lengths are bounded alike)."""


@dataclass(frozen=True)
class Extrinsics:
    """The camera's calibration: its optical frame K (``child_frame``) in the table frame W
    (``parent_frame``): R_WK (3, 3) and p_WK (3,) [m], and the quaternion q_WK (x, y, z, w)
    as the file gives it (unit)."""

    parent_frame: str
    child_frame: str
    R_WK: FloatArray
    p_WK: FloatArray
    q_WK: FloatArray


def read_extrinsics(path: str | Path) -> Extrinsics:
    """The camera extrinsics file at ``path``: ``parent_frame`` and ``child_frame`` (frame
    names), ``translation`` [x, y, z] (m) and ``rotation`` [x, y, z, w] (unit quaternion of
    the optical frame in the table frame, the ROS order). SlideInputError, one line naming
    the file and the key, for anything else: the graph, the launch file's static transform
    and perception read it alike (a mis-spelt ``child_frame`` passed the graph, crashed the
    launch file and turned perception's frame check off; 350 for 0.35 m, strings and
    booleans were taken as numbers)."""
    doc = read_yaml(path, SlideInputError, 'camera extrinsics')
    where = f'{path}'
    if not isinstance(doc, dict):
        raise SlideInputError(f'{where}: the camera extrinsics must be a mapping of keys')
    wanted = {'parent_frame', 'child_frame', 'translation', 'rotation'}
    missing, unknown = sorted(wanted - set(doc)), sorted(set(doc) - wanted)
    if missing or unknown:
        raise SlideInputError(
            f'{where}: camera extrinsics need {", ".join(sorted(wanted))}'
            + (f'; missing {", ".join(missing)}' if missing else '')
            + (f'; unknown {", ".join(map(str, unknown))}' if unknown else '')
        )
    frames = []
    for key in ('parent_frame', 'child_frame'):
        value = doc[key]
        if not isinstance(value, str) or not value.strip():
            raise SlideInputError(f'{where}: {key} must name a frame, got {value!r}')
        frames.append(value)

    def numbers(key: str, count: int) -> FloatArray:
        value = doc[key]
        if (
            not isinstance(value, list)
            or len(value) != count
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            or not all(math.isfinite(v) for v in value)
        ):
            raise SlideInputError(f'{where}: {key} must be {count} finite numbers, got {value!r}')
        return np.asarray(value, dtype=float)

    p = numbers('translation', 3)
    q = numbers('rotation', 4)
    if float(np.linalg.norm(p)) > MAX_CAMERA_DISTANCE:
        raise SlideInputError(
            f'{where}: translation {p.tolist()} puts the camera more than '
            f'{MAX_CAMERA_DISTANCE:g} m from the table frame: is it in m?'
        )
    norm = float(np.linalg.norm(q))
    if abs(norm - 1.0) > 1e-3:
        raise SlideInputError(
            f'{where}: rotation must be a unit quaternion x, y, z, w, its norm is {norm:.4g} '
            '(roll, pitch, yaw are not read here)'
        )
    x, y, z, w = q / norm
    R = np.asarray(transforms3d.quaternions.quat2mat([w, x, y, z]))
    return Extrinsics(frames[0], frames[1], R, p, q / norm)


def load_extrinsics(path: str | Path) -> tuple[FloatArray, FloatArray]:
    """R_WK (3, 3) and p_WK (3,) of the camera extrinsics file (:func:`read_extrinsics`)."""
    e = read_extrinsics(path)
    return e.R_WK, e.p_WK


@dataclass(frozen=True, eq=False)
class CameraView:
    """What the camera sees: its pose (R_WK (3, 3), p_WK (3,) [m]) and its image's bounds
    in normalised coordinates (x / z and y / z of the optical frame K), as far as one frame's
    valid points reach (a camera over a table sees something at every pixel: the table, the
    floor past its edge). Needs no intrinsics.

    Why: a part of the object past the image's edge is simply missing from the cloud, and
    what is left is a smaller object. The convex hull of the cloud in the table plane (the
    fallback without a view) reaches as far as the floor below is seen, past where the
    object's top leaves the image; and the tracker's fit to the part left scores well while
    its pose slides towards the view."""

    R_WK: FloatArray
    p_WK: FloatArray
    lo: FloatArray  # (2,) least x / z, y / z of the image
    hi: FloatArray  # (2,) largest

    @classmethod
    def of(cls, points_K: ArrayLike, R_WK: ArrayLike, p_WK: ArrayLike) -> CameraView | None:
        """The view of one frame's optical-frame points p_K (N, 3) (NaN and zero-depth
        points ignored); None when no point is valid."""
        from slide_core.perception import kernels

        p = np.ascontiguousarray(as_points(points_K, 'points_K'), dtype=np.float64)
        bounds = np.asarray(kernels.image_bounds(p), dtype=float)  # one compiled pass
        if not np.isfinite(bounds).all():
            return None
        return cls(
            np.asarray(R_WK, dtype=float), np.asarray(p_WK, dtype=float), bounds[:2], bounds[2:]
        )

    def margins(self, points_W: ArrayLike) -> FloatArray:
        """(N,) distance [m] of each table-frame point p_W (N, 3) inside the nearest side
        of the view's pyramid (negative outside it, or behind the camera)."""
        p_K = (as_points(points_W, 'points_W') - self.p_WK) @ self.R_WK
        x, y, z = p_K[:, 0], p_K[:, 1], p_K[:, 2]
        sides = []
        for coord, lo, hi in ((x, self.lo[0], self.hi[0]), (y, self.lo[1], self.hi[1])):
            sides.append((coord - lo * z) / math.hypot(1.0, lo))
            sides.append((hi * z - coord) / math.hypot(1.0, hi))
        out = np.min(np.stack(sides), axis=0)
        return np.asarray(np.where(z > 0.0, out, -np.inf), dtype=float)


def as_points(points: ArrayLike, what: str = 'points') -> FloatArray:
    """``points`` as an (N, 3) float array; SlideInputError for any other shape. (An
    (N, 4) x, y, z, intensity cloud was reshaped to (4N/3, 3) rows of mixed values.)"""
    p = np.asarray(points, dtype=float)
    if p.size == 0:
        return p.reshape(0, 3)
    if p.ndim != 2 or p.shape[1] != 3:
        raise SlideInputError(
            f'{what} must be an (N, 3) array of x, y, z [m], got shape {p.shape} (keep only '
            'the x, y, z columns of a cloud with more fields)'
        )
    return p


def to_table_frame(points_K: ArrayLike, R_WK: ArrayLike, p_WK: ArrayLike) -> FloatArray:
    """Finite, non-zero points p_K (N, 3) of the optical frame mapped to p_W (M, 3) with the
    camera's rotation R_WK (3, 3) and position p_WK (3,) [m] (one compiled pass,
    :func:`slide_core.perception.kernels.to_table_frame`)."""
    from slide_core.perception import kernels

    p = np.ascontiguousarray(as_points(points_K, 'points_K'))
    R = np.asarray(R_WK, dtype=np.float64)
    t = np.asarray(p_WK, dtype=np.float64)
    # (the compiled pass reads R's nine entries unchecked: a 2 x 2 one read past its end)
    if R.shape != (3, 3) or t.shape != (3,) or not (np.isfinite(R).all() and np.isfinite(t).all()):
        raise SlideInputError(
            f'R_WK must be a finite (3, 3) rotation and p_WK a finite (3,) position, got '
            f'shapes {R.shape} and {t.shape}'
        )
    if not np.allclose(R @ R.T, np.eye(3), atol=1e-4):
        raise SlideInputError('R_WK is not a rotation (R R^T != I): check the extrinsics')
    return np.asarray(
        kernels.to_table_frame(p, np.ascontiguousarray(R), np.ascontiguousarray(t)),
        dtype=float,
    )


def _o3d_cloud(points: FloatArray) -> Any:
    import open3d as o3d

    return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))


def _in_box(points: FloatArray, lo: ArrayLike, hi: ArrayLike) -> NDArray[np.bool_]:
    return np.asarray(np.all((points >= np.asarray(lo)) & (points <= np.asarray(hi)), axis=1))


# -- table ------------------------------------------------------------------------------------
def fit_table(points_W: FloatArray, config: PerceptionConfig, seed: int = 0) -> TablePlane:
    """RANSAC plane of the table in a cloud p_W (N, 3) already in the table frame.

    The table is the lowest large plane: nothing on it lies below it. Where the plane with
    the most points leaves ``min_table_fraction`` of them lower than ``min_height`` below
    it, the plane of those is taken instead (a tray filling most of the view had its top
    taken for the table, and then no object was found on it)."""
    import open3d as o3d

    if points_W.shape[0] == 0:
        raise PerceptionError(PerceptionStatus.EMPTY_CLOUD, 'the cloud has no valid point')
    work = points_W[_in_box(points_W, config.workspace_min, config.workspace_max)]
    if work.shape[0] < 3 * config.min_cluster_points:
        raise PerceptionError(
            PerceptionStatus.NO_TABLE,
            f'only {work.shape[0]} points inside the workspace box; is the camera aimed at the '
            'table, the extrinsics file right, and the cloud in metres?',
        )
    cloud = _o3d_cloud(work).voxel_down_sample(config.voxel_size)
    total = len(cloud.points)
    o3d.utility.random.seed(seed)
    while True:
        model, inliers = cloud.segment_plane(config.table_inlier_distance, 3, 200)
        n = np.asarray(model[:3], dtype=float)
        d = float(model[3])
        scale = float(np.linalg.norm(n))
        n, d = n / scale, d / scale
        if n[2] < 0:
            n, d = -n, -d
        below = np.flatnonzero(np.asarray(cloud.points) @ n + d < -config.min_height)
        if len(below) < max(config.min_table_fraction * total, 3 * config.min_cluster_points):
            break
        cloud = cloud.select_by_index(below)
    tilt = math.degrees(math.acos(min(1.0, float(n[2]))))
    if len(inliers) < config.min_table_fraction * total or tilt > config.max_table_tilt_deg:
        raise PerceptionError(
            PerceptionStatus.NO_TABLE,
            f'no table plane: the best plane holds {len(inliers)} of {total} points and is '
            f'tilted {tilt:.1f} deg from the calibrated table (max '
            f'{config.max_table_tilt_deg} deg)',
        )
    if abs(d) > config.max_table_offset:
        raise PerceptionError(
            PerceptionStatus.NO_TABLE,
            f'the table plane is {abs(d) * 1000:.0f} mm from z = 0 of the table frame (max '
            f'{config.max_table_offset * 1000:.0f} mm): check the camera extrinsics',
        )
    return TablePlane((float(n[0]), float(n[1]), float(n[2])), d, len(inliers))


def _view_hull(points_W: FloatArray) -> FloatArray | None:
    """(k, 3) half-planes a x + b y + c <= 0 of the convex hull of what the camera sees."""
    xy = points_W[:: max(1, points_W.shape[0] // 5000), :2]
    try:
        hull = ConvexHull(xy)
    except (QhullError, ValueError):
        return None
    eq = np.asarray(hull.equations, dtype=float)
    return np.asarray(eq / np.linalg.norm(eq[:, :2], axis=1, keepdims=True), dtype=float)


# -- segmentation ---------------------------------------------------------------------------
def segment(
    points_W: FloatArray,
    config: PerceptionConfig,
    keep_out: tuple[KeepOut, ...] = (),
    table: TablePlane | None = None,
    view: CameraView | None = None,
) -> Segmentation:
    """The object's points in a table-frame cloud p_W (N, 3); ``view``: the camera's
    (:class:`CameraView`), else the edge of the view is the cloud's convex hull in the
    table plane, which the floor past the table's edge widens.

    Raises PerceptionError: EMPTY_CLOUD, NO_TABLE, NO_OBJECT, SEVERAL_OBJECTS or
    PARTIAL_VIEW (the object touches the edge of the view or of the workspace box, or a
    tool in ``keep_out`` or an obstacle cuts into it: :func:`_check_not_cut_out`).
    """
    points_W = as_points(points_W, 'points_W')
    points_W = points_W[np.isfinite(points_W).all(axis=1)]
    if points_W.shape[0] == 0:
        raise PerceptionError(PerceptionStatus.EMPTY_CLOUD, 'the cloud has no valid point')
    plane = table or fit_table(points_W, config)
    h = plane.height(points_W)
    candidate = (h >= config.min_height) & _in_box(
        points_W, config.workspace_min, config.workspace_max
    )
    seen = candidate.copy()  # (before the tools and obstacles are cut out)
    for body in keep_out:
        candidate &= ~body.contains(points_W)
    if config.obstacles:
        candidate &= ~config.on_obstacles(points_W)
    above = points_W[candidate]
    if above.shape[0] < config.min_cluster_points:
        raise PerceptionError(
            PerceptionStatus.NO_OBJECT, _why_no_object(points_W, h, above, config)
        )
    # Cluster in the table plane: a step in an object's top whose wall faces away from the
    # camera leaves a gap in 3D but none in the footprint.
    flat = np.column_stack((above[:, :2], np.zeros(above.shape[0])))
    cloud = _o3d_cloud(flat).voxel_down_sample(config.voxel_size)
    down = np.asarray(cloud.points)
    labels = np.asarray(cloud.cluster_dbscan(config.cluster_eps, 4))
    sizes = np.bincount(labels[labels >= 0]) if (labels >= 0).any() else np.zeros(0, int)
    objects = np.flatnonzero(sizes >= config.min_cluster_points)
    if objects.size == 0:
        raise PerceptionError(
            PerceptionStatus.NO_OBJECT,
            f'no cluster of at least {config.min_cluster_points} points above the table',
        )
    if objects.size > 1:
        raise PerceptionError(
            PerceptionStatus.SEVERAL_OBJECTS,
            f'{objects.size} separate objects above the table (sizes '
            f'{sorted(sizes[objects].tolist(), reverse=True)}); clear the table or give the '
            'pusher and gripper poses so they are cut out',
        )
    # Back to full resolution: every candidate point near the kept cluster.
    kept = down[labels == objects[0]]

    near = cKDTree(kept).query(flat, distance_upper_bound=config.voxel_size * 1.5)[0]
    obj = above[np.isfinite(near)]
    _check_in_view(obj, points_W, config, view)
    heights = plane.height(obj)
    _check_not_cut_out(obj, heights, points_W[seen & ~candidate], h[seen & ~candidate], config)
    _check_not_thin(heights, h, config)
    lo, hi = obj[:, :2].min(axis=0), obj[:, :2].max(axis=0)
    through = (np.abs(h) <= config.table_inlier_distance / 2) & np.all(
        (points_W[:, :2] >= lo) & (points_W[:, :2] <= hi), axis=1
    )
    return Segmentation(obj, heights, plane, int(objects.size), points_W[through])


THIN_SIGMAS = 1.0
"""The median height of an object's points must stand this many standard deviations of
the table's depth noise above ``min_height`` (:func:`segment`). Below it the top itself
lies within about 0.7 deviations of the threshold, and a quarter of its points and more
fall under it: what is left is the noise's tail, not the top."""


def _why_no_object(
    points_W: FloatArray, h: FloatArray, above: FloatArray, config: PerceptionConfig
) -> str:
    """Why fewer than ``min_cluster_points`` points ``above`` (M, 3) make an object, for a
    cloud p_W (N, 3) of heights ``h`` (N,) above the table: what a person would change (a
    45 cm box, a 1.5 cm cube and a 4 mm sheet were each 'no object there')."""
    n = above.shape[0]
    if n > 0:
        return (
            f'{n} points above the table in the workspace, fewer than the '
            f'{config.min_cluster_points} an object needs (min_cluster_points): an object '
            'too small for the camera to see at this distance, or noise'
        )
    lo, hi = np.asarray(config.workspace_min), np.asarray(config.workspace_max)
    tall = (h >= config.min_height) & _in_box(
        points_W, (lo[0], lo[1], -np.inf), (hi[0], hi[1], np.inf)
    )
    if np.count_nonzero(tall) >= config.min_cluster_points:
        top = float(points_W[tall, 2].max())
        return (
            f'no points above the table in the workspace box, but {np.count_nonzero(tall)} '
            f'above it (up to z {top:.2f} m, the box ends at {hi[2]:g} m): an object taller '
            'than the box? raise workspace_max z'
        )
    # Above the table's depth noise by 4 of its deviations, and below min_height: the top
    # of a thin object, not the noise's tail.
    sigma = _table_noise(h, config)
    thin = (h >= max(0.5 * config.min_height, 4.0 * sigma)) & (h < config.min_height)
    if np.count_nonzero(thin & _in_box(points_W, lo, hi)) >= config.min_cluster_points:
        return (
            f'no points above the table in the workspace, but some within '
            f'{config.min_height * 1000:.0f} mm of it (min_height): an object thinner than '
            'that is not seen (lower min_height on a quieter camera)'
        )
    return '0 points above the table in the workspace: no object there'


def _table_noise(h: FloatArray, config: PerceptionConfig) -> float:
    """The table's depth noise [m], robust (a normal's sigma from the median absolute
    height about the plane) from the heights ``h`` (N,) of a cloud's points within
    ``table_inlier_distance`` of the plane."""
    band = config.table_inlier_distance
    table = h[np.abs(h) < band]
    if not table.size:
        return band / 2
    return float(median_abs_deviation(table, center=lambda _h, axis: 0.0, scale='normal'))


def _check_not_thin(heights: FloatArray, table_h: FloatArray, config: PerceptionConfig) -> None:
    """PerceptionError(NO_OBJECT) when the object's points (``heights`` (M,) above the
    table) are the noise's tail above ``min_height`` rather than its top: their median
    within THIN_SIGMAS of the table's noise (robust, from the heights ``table_h`` of every
    point near the plane) of the threshold. A 5 mm box under a 6 mm threshold gave a grid
    of 27 of its 32 cells, read up to 50% too high."""
    sigma = _table_noise(table_h, config)
    top = float(np.median(heights))
    if top < config.min_height + THIN_SIGMAS * sigma:
        raise PerceptionError(
            PerceptionStatus.NO_OBJECT,
            f'what stands above the table is {top * 1000:.1f} mm tall (median), within '
            f'{THIN_SIGMAS:g} depth-noise deviation ({sigma * 1000:.1f} mm) of the '
            f'{config.min_height * 1000:.0f} mm height threshold: the noise of a thin object, '
            'not its top (lower min_height on a quieter camera)',
        )


def _check_in_view(
    obj: FloatArray, points_W: FloatArray, config: PerceptionConfig, view: CameraView | None
) -> None:
    lo = np.asarray(config.workspace_min)[:2] + config.view_margin
    hi = np.asarray(config.workspace_max)[:2] - config.view_margin
    if not np.all((obj[:, :2] >= lo) & (obj[:, :2] <= hi)):
        reach_lo, reach_hi = obj[:, :2].min(axis=0), obj[:, :2].max(axis=0)
        raise PerceptionError(
            PerceptionStatus.PARTIAL_VIEW,
            f'the object reaches past the workspace box (it spans x {reach_lo[0]:.3f} to '
            f'{reach_hi[0]:.3f} m, y {reach_lo[1]:.3f} to {reach_hi[1]:.3f} m; the box, '
            f'less {config.view_margin * 1000:.0f} mm: x {lo[0]:.3f} to {hi[0]:.3f}, y '
            f'{lo[1]:.3f} to {hi[1]:.3f}): move the object in, or widen workspace_min / '
            'workspace_max',
        )
    if view is not None:
        check_in_image(obj, view, config)
        return
    hull = _view_hull(points_W)
    if hull is None:
        raise PerceptionError(PerceptionStatus.PARTIAL_VIEW, 'the view has no area')
    inside = obj[:, :2] @ hull[:, :2].T + hull[:, 2]
    if inside.max() > -config.view_margin:
        raise PerceptionError(
            PerceptionStatus.PARTIAL_VIEW,
            'the object touches the edge of the camera view; move the camera or the object',
        )


def _check_not_cut_out(
    obj: FloatArray,
    heights: FloatArray,
    cut: FloatArray,
    cut_h: FloatArray,
    config: PerceptionConfig,
) -> None:
    """PerceptionError(PARTIAL_VIEW) when more than a cell's area of the object may have
    been cut out of the cloud with a tool's keep-out cylinder or round a workcell obstacle:
    points cut (``cut`` (K, 3), heights ``cut_h`` (K,) above the table) that lie within
    ``cluster_eps`` of the object's points ``obj`` (M, 3, heights ``heights``) in the table
    plane, at the height of the object's surface there (within ``CUT_HEIGHT_BAND``), over
    more than ``cell_size`` squared (counted on the ``voxel_size`` raster). A gripper 3 cm
    past a box's end took 16% of its area out of the acquired grid, and the episode ran on
    the rest; a fingertip beside the object, its keep-out a few millimetres into it, or a
    tool above it, is no matter."""
    if cut.shape[0] == 0:
        return
    d, found = cKDTree(obj[:, :2]).query(cut[:, :2], distance_upper_bound=config.cluster_eps)
    k = np.asarray(found, dtype=np.int64)  # the nearest object point of each cut point
    near = np.isfinite(d)
    surface = np.zeros(cut.shape[0], dtype=bool)
    surface[near] = np.abs(cut_h[near] - heights[k[near]]) <= CUT_HEIGHT_BAND
    lost = cut[surface]
    pixels = np.unique(np.floor(lost[:, :2] / config.voxel_size).astype(np.int64), axis=0)
    area = pixels.shape[0] * config.voxel_size**2
    if area <= config.cell_size**2:
        return
    at = np.round(lost[:, :2].mean(axis=0), 3).tolist()
    raise PerceptionError(
        PerceptionStatus.PARTIAL_VIEW,
        f'a tool or a workcell obstacle (cut out of the cloud) reaches into the object near '
        f'{at} m: about {area * 1e4:.0f} cm2 at the height of its surface would be cut out '
        'with it; move the tool, or the object, clear to acquire it',
    )


CUT_HEIGHT_BAND = 0.01
"""How near [m] the height of a cut point must be to the object's surface beside it for
the point to be taken for the object's (:func:`_check_not_cut_out`)."""


def check_in_image(points_W: FloatArray, view: CameraView, config: PerceptionConfig) -> None:
    """PerceptionError(PARTIAL_VIEW) when an object point p_W (N, 3) lies within
    ``view_margin`` of the edge of the camera's image (or past it)."""
    margin = float(view.margins(points_W).min()) if len(points_W) else math.inf
    if margin < config.view_margin:
        where = (
            f'reaches {-margin * 1000:.0f} mm past the edge of the camera image'
            if margin < 0
            else f'comes within {margin * 1000:.0f} mm of the edge of the camera image (the '
            f'least kept is {config.view_margin * 1000:.0f} mm)'
        )  # (it read 'reaches -0 mm past the edge')
        raise PerceptionError(
            PerceptionStatus.PARTIAL_VIEW,
            f'the object {where}: part of it may not be seen; move the camera or the object',
        )


# -- grid -----------------------------------------------------------------------------------
