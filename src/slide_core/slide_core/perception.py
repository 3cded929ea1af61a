"""Perception: a depth camera's point cloud to the object's cell grid and its SE(2) pose.

Frames (REP 103/105): T is the table frame (z up, the table top at z = 0, the free edge at
x = 0 in the twin), C the camera's optical frame (z forward, x right, y down), O the object
frame of the grid. The camera extrinsics X_TC come from a calibration file
(:func:`load_extrinsics`); hand-eye calibration is done elsewhere.

Pipeline, one frame at a time:

1. :func:`to_table_frame` drops NaN / zero-depth points and maps p_C (N, 3) to p_T.
2. :func:`fit_table` finds the table plane by RANSAC (open3d ``segment_plane``) and checks it
   against the calibration (tilt and offset), so a wrong extrinsic or a view without the
   table is reported, not silently used.
3. :func:`segment` keeps points above the plane inside the workspace box, removes the known
   pusher and gripper (:class:`KeepOut`, vertical cylinders around their poses), clusters the
   rest (DBSCAN) and demands exactly one object cluster that lies wholly in the view.
4. :func:`build_grid` rasterises the footprint (the top surface projected down, as the papers
   presume) into square cells: the object frame has its origin at the centre of the
   footprint's bounding box and its x axis along the footprint's major principal axis
   (pointing to +x_T); each cell's height is a robust top of its points.
5. :class:`PoseTracker` registers each new frame's object points to the acquired top-surface
   model by ICP (open3d, warm-started from the last pose), projects the result to SE(2) and
   reports the fitness; a poor registration is a status, never a pose.

Failures raise :class:`PerceptionError` with a :class:`PerceptionStatus` a node can publish.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import enum
import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import ndimage
from scipy.optimize import least_squares
from scipy.spatial import ConvexHull, QhullError, cKDTree
import transforms3d  # type: ignore[import-untyped]
import yaml

from slide_core.errors import SlideInputError
from slide_core.geometry import Grid, rotation

FloatArray = NDArray[np.float64]


class PerceptionStatus(enum.Enum):
    """What a perception step found; every value but OK means: no grid, no pose."""

    OK = 'ok'
    EMPTY_CLOUD = 'empty_cloud'
    NO_TABLE = 'no_table'
    NO_OBJECT = 'no_object'
    SEVERAL_OBJECTS = 'several_objects'
    PARTIAL_VIEW = 'partial_view'
    POOR_REGISTRATION = 'poor_registration'


class PerceptionError(SlideInputError):
    """A frame from which no trustworthy grid or pose can be made."""

    def __init__(self, status: PerceptionStatus, message: str) -> None:
        super().__init__(f'{status.value}: {message}')
        self.status = status


@dataclass(frozen=True)
class PerceptionConfig:
    """Settings; lengths in metres, in the table frame T.

    Attributes:
        cell_size: edge of a grid cell.
        workspace_min, workspace_max: (3,) corners of the box the object must lie in.
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
        fill_fraction: a cell belongs to the object when this share of it is covered.
        icp_distance: correspondence distance of the coarse ICP pass (the fine pass uses a
            quarter of it).
        max_motion: how far the object may move between two tracked frames.
        min_fitness: least share of model points matched for a pose to be trusted.
        max_rmse: largest RMS distance of the matched points for a pose to be trusted.
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
        )
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise SlideInputError(f'perception {name} must be positive, got {value}')
        for name in ('fill_fraction', 'min_fitness', 'min_table_fraction'):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise SlideInputError(f'perception {name} must be in (0, 1], got {value}')
        lo, hi = np.asarray(self.workspace_min), np.asarray(self.workspace_max)
        if lo.shape != (3,) or hi.shape != (3,) or not np.all(lo < hi):
            raise SlideInputError('workspace_min must be below workspace_max on every axis')
        if self.voxel_size > self.cell_size / 2:
            raise SlideInputError('voxel_size must be at most half the cell size')


@dataclass(frozen=True)
class KeepOut:
    """A known body to cut out of the cloud: a vertical cylinder in the table frame.

    Attributes:
        p_T: (3,) centre of the body [m].
        radius: cylinder radius [m] (the body's radius plus a margin).
        half_height: half its extent along z [m].
    """

    p_T: tuple[float, float, float]
    radius: float
    half_height: float

    def contains(self, points_T: FloatArray) -> NDArray[np.bool_]:
        c = np.asarray(self.p_T, dtype=float)
        d2 = (points_T[:, 0] - c[0]) ** 2 + (points_T[:, 1] - c[1]) ** 2
        inside = (d2 <= self.radius**2) & (np.abs(points_T[:, 2] - c[2]) <= self.half_height)
        return np.asarray(inside, dtype=bool)


@dataclass(frozen=True)
class TablePlane:
    """The table top: points p with n . p + d = 0, n (3,) unit and up."""

    normal: tuple[float, float, float]
    offset: float
    inliers: int

    def height(self, points_T: FloatArray) -> FloatArray:
        """(N,) signed heights [m] of points (N, 3) above the plane."""
        return np.asarray(points_T @ np.asarray(self.normal) + self.offset, dtype=float)


@dataclass(frozen=True)
class Segmentation:
    """The object's points in one frame: p_T (M, 3) and their heights (M,) above the table."""

    points_T: FloatArray
    heights: FloatArray
    table: TablePlane
    clusters: int


@dataclass(frozen=True)
class ObjectEstimate:
    """An acquired object: its grid, the pose X_WO (3,) of its frame in T, the top-surface
    model points p_O (M, 3) (z = height above the table) for tracking, the table plane."""

    grid: Grid
    X_TO: FloatArray
    model_O: FloatArray
    table: TablePlane


@dataclass(frozen=True)
class TrackResult:
    """One tracked frame: pose X_TO (3,), fitness (share of the visible outline within
    the fine tolerance of the acquired one), inlier RMSE [m], and the object's points p_T
    (M, 3) in this frame."""

    X_TO: FloatArray
    fitness: float
    rmse: float
    points_T: FloatArray


# -- inputs ---------------------------------------------------------------------------------
def load_extrinsics(path: str | Path) -> tuple[FloatArray, FloatArray]:
    """Camera extrinsics from YAML: ``parent_frame``, ``child_frame``, ``translation``
    [x, y, z] (m) and ``rotation`` [x, y, z, w] (unit quaternion of the optical frame in the
    table frame, the ROS order). Returns R_TC (3, 3), p_TC (3,)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SlideInputError(f'cannot read camera extrinsics {path}: {exc}') from exc
    if not isinstance(data, dict) or not {'translation', 'rotation'} <= set(data):
        raise SlideInputError(f'{path}: needs translation [x, y, z] and rotation [x, y, z, w]')
    p = np.asarray(data['translation'], dtype=float)
    q = np.asarray(data['rotation'], dtype=float)
    if p.shape != (3,) or q.shape != (4,) or not (np.isfinite(p).all() and np.isfinite(q).all()):
        raise SlideInputError(f'{path}: translation must have 3 numbers and rotation 4')
    norm = float(np.linalg.norm(q))
    if abs(norm - 1.0) > 1e-3:
        raise SlideInputError(f'{path}: rotation must be a unit quaternion, its norm is {norm}')
    x, y, z, w = q / norm
    return np.asarray(transforms3d.quaternions.quat2mat([w, x, y, z])), p


def to_table_frame(points_C: ArrayLike, R_TC: ArrayLike, p_TC: ArrayLike) -> FloatArray:
    """Finite, non-zero points p_C (N, 3) of the optical frame mapped to p_T (M, 3)."""
    p = np.asarray(points_C, dtype=np.float64).reshape(-1, 3)
    keep = np.flatnonzero((p[:, 2] > 0) & np.isfinite(p[:, 0]) & np.isfinite(p[:, 1]))
    p_T = (np.asarray(R_TC, dtype=float) @ p[keep].T).T  # (R p^T)^T: contiguous, fast
    p_T += np.asarray(p_TC, dtype=float)
    return np.asarray(p_T, dtype=float)


def _o3d_cloud(points: FloatArray) -> Any:
    import open3d as o3d

    return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))


def _in_box(points: FloatArray, lo: ArrayLike, hi: ArrayLike) -> NDArray[np.bool_]:
    return np.asarray(np.all((points >= np.asarray(lo)) & (points <= np.asarray(hi)), axis=1))


# -- table ------------------------------------------------------------------------------------
def fit_table(points_T: FloatArray, config: PerceptionConfig, seed: int = 0) -> TablePlane:
    """RANSAC plane of the table in a cloud p_T (N, 3) already in the table frame."""
    import open3d as o3d

    if points_T.shape[0] == 0:
        raise PerceptionError(PerceptionStatus.EMPTY_CLOUD, 'the cloud has no valid point')
    work = points_T[_in_box(points_T, config.workspace_min, config.workspace_max)]
    if work.shape[0] < 3 * config.min_cluster_points:
        raise PerceptionError(
            PerceptionStatus.NO_TABLE,
            f'only {work.shape[0]} points inside the workspace box; is the camera aimed at the '
            'table and the extrinsics file right?',
        )
    cloud = _o3d_cloud(work).voxel_down_sample(config.voxel_size)
    o3d.utility.random.seed(seed)
    model, inliers = cloud.segment_plane(config.table_inlier_distance, 3, 200)
    n = np.asarray(model[:3], dtype=float)
    d = float(model[3])
    scale = float(np.linalg.norm(n))
    n, d = n / scale, d / scale
    if n[2] < 0:
        n, d = -n, -d
    tilt = math.degrees(math.acos(min(1.0, float(n[2]))))
    total = len(cloud.points)
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


def _view_hull(points_T: FloatArray) -> FloatArray | None:
    """(k, 3) half-planes a x + b y + c <= 0 of the convex hull of what the camera sees."""
    xy = points_T[:: max(1, points_T.shape[0] // 5000), :2]
    try:
        hull = ConvexHull(xy)
    except (QhullError, ValueError):
        return None
    eq = np.asarray(hull.equations, dtype=float)
    return np.asarray(eq / np.linalg.norm(eq[:, :2], axis=1, keepdims=True), dtype=float)


# -- segmentation ---------------------------------------------------------------------------
def segment(
    points_T: FloatArray,
    config: PerceptionConfig,
    keep_out: tuple[KeepOut, ...] = (),
    table: TablePlane | None = None,
) -> Segmentation:
    """The object's points in a table-frame cloud p_T (N, 3).

    Raises PerceptionError: EMPTY_CLOUD, NO_TABLE, NO_OBJECT, SEVERAL_OBJECTS or
    PARTIAL_VIEW (the object touches the edge of the view or of the workspace box).
    """
    points_T = np.asarray(points_T, dtype=float).reshape(-1, 3)
    points_T = points_T[np.isfinite(points_T).all(axis=1)]
    if points_T.shape[0] == 0:
        raise PerceptionError(PerceptionStatus.EMPTY_CLOUD, 'the cloud has no valid point')
    plane = table or fit_table(points_T, config)
    h = plane.height(points_T)
    candidate = (h >= config.min_height) & _in_box(
        points_T, config.workspace_min, config.workspace_max
    )
    for body in keep_out:
        candidate &= ~body.contains(points_T)
    above = points_T[candidate]
    if above.shape[0] < config.min_cluster_points:
        raise PerceptionError(
            PerceptionStatus.NO_OBJECT,
            f'{above.shape[0]} points above the table in the workspace: no object there',
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
    _check_in_view(obj, points_T, config)
    return Segmentation(obj, plane.height(obj), plane, int(objects.size))


def _check_in_view(obj: FloatArray, points_T: FloatArray, config: PerceptionConfig) -> None:
    lo = np.asarray(config.workspace_min)[:2] + config.view_margin
    hi = np.asarray(config.workspace_max)[:2] - config.view_margin
    if not np.all((obj[:, :2] >= lo) & (obj[:, :2] <= hi)):
        raise PerceptionError(
            PerceptionStatus.PARTIAL_VIEW, 'the object reaches past the workspace box'
        )
    hull = _view_hull(points_T)
    if hull is None:
        raise PerceptionError(PerceptionStatus.PARTIAL_VIEW, 'the view has no area')
    inside = obj[:, :2] @ hull[:, :2].T + hull[:, 2]
    if inside.max() > -config.view_margin:
        raise PerceptionError(
            PerceptionStatus.PARTIAL_VIEW,
            'the object touches the edge of the camera view; move the camera or the object',
        )


# -- grid -----------------------------------------------------------------------------------
def _footprint_image(
    xy: FloatArray, origin: FloatArray, shape: tuple[int, int], pitch: float
) -> NDArray[np.bool_]:
    """Covered sub-cells (rows, cols) of points xy (M, 2); row 0 at +y, pixel (0, 0)'s
    lower-left corner at origin + (0, (rows - 1) * pitch)."""
    rows, cols = shape
    c = np.floor((xy[:, 0] - origin[0]) / pitch).astype(int)
    r = rows - 1 - np.floor((xy[:, 1] - origin[1]) / pitch).astype(int)
    ok = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
    image = np.zeros(shape, dtype=bool)
    image[r[ok], c[ok]] = True
    image = ndimage.binary_closing(image, np.ones((3, 3), bool), border_value=0)
    image = ndimage.binary_fill_holes(image)
    labels, count = ndimage.label(image)
    if count > 1:
        image = labels == 1 + int(np.argmax(ndimage.sum(image, labels, range(1, count + 1))))
    return np.asarray(image, dtype=bool)


@dataclass(frozen=True)
class _Raster:
    origin: FloatArray  # (2,) lower-left corner of the grid in the rotated frame
    rows: int
    cols: int
    coverage: FloatArray  # (rows, cols) covered share of each cell
    mismatch: float  # sub-cells a thresholded grid gets wrong, in cells


def _raster(xy_P: FloatArray, w: float, sub: int) -> _Raster:
    """Cells of edge w over the bounding box of points xy_P (M, 2), centred on it."""
    lo, hi = xy_P.min(axis=0), xy_P.max(axis=0)
    cols, rows = (int(v) for v in np.maximum(1, np.round((hi - lo) / w)))
    origin = (lo + hi) / 2 - np.array([cols, rows]) * w / 2
    fine = _footprint_image(xy_P, origin, (rows * sub, cols * sub), w / sub)
    coverage = fine.reshape(rows, sub, cols, sub).mean(axis=(1, 3))
    return _Raster(origin, rows, cols, coverage, float(np.minimum(coverage, 1 - coverage).sum()))


def _lattice_angle(xy: FloatArray) -> float:
    """The rotation in [0, pi/2) of the footprint's minimum-area bounding rectangle.

    One of its sides lies on a side of the convex hull of the points xy (M, 2), so only the
    hull's edge directions are tried. For a box (book, tray) this puts the sides along the
    cells; for other shapes it is a well-defined, repeatable choice.
    """
    try:
        hull = xy[ConvexHull(xy).vertices]
    except (QhullError, ValueError):
        return 0.0
    edges = np.diff(np.vstack((hull, hull[:1])), axis=0)
    angles = np.arctan2(edges[:, 1], edges[:, 0]) % (math.pi / 2)
    c, s = np.cos(angles), np.sin(angles)
    u = hull @ np.vstack((c, s))  # (h, k) coordinates along each candidate's axes
    v = hull @ np.vstack((-s, c))
    area = (u.max(axis=0) - u.min(axis=0)) * (v.max(axis=0) - v.min(axis=0))
    return float(angles[int(np.argmin(area))])


def build_grid(seg: Segmentation, config: PerceptionConfig) -> ObjectEstimate:
    """Rasterise a segmented object into its cell grid and the pose of its frame in T.

    The cell lattice is turned to the angle at which the footprint fills whole cells best
    (a box's sides then lie on cell sides); of the four lattice directions, the object's x
    axis is the one nearest the footprint's major principal axis, pointing to +x of T.
    """
    w = config.cell_size
    sub = 5  # coverage is measured on sub-cells of w / 5
    pitch = w / sub
    xy = seg.points_T[:, :2]
    # Principal axes of the covered area (not of the points: their density varies).
    lo = xy.min(axis=0) - 2 * pitch
    n_px = np.ceil((xy.max(axis=0) + 2 * pitch - lo) / pitch).astype(int)
    cover = _footprint_image(xy, lo, (int(n_px[1]), int(n_px[0])), pitch)
    rr, cc = np.nonzero(cover)
    centres = np.column_stack(
        (lo[0] + (cc + 0.5) * pitch, lo[1] + (cover.shape[0] - 1 - rr + 0.5) * pitch)
    )
    mean = centres.mean(axis=0)
    cov = np.cov((centres - mean).T) if centres.shape[0] > 2 else np.eye(2)
    evals, evecs = np.linalg.eigh(cov)
    major = evecs[:, int(np.argmax(evals))]
    base = _lattice_angle(xy)
    directions = base + np.arange(4) * math.pi / 2
    yaw = float(
        directions[int(np.argmax(np.cos(directions) * major[0] + np.sin(directions) * major[1]))]
    )
    if math.cos(yaw) < 0 or (abs(math.cos(yaw)) < 1e-12 and math.sin(yaw) < 0):
        yaw += math.pi
    yaw = math.atan2(math.sin(yaw), math.cos(yaw))
    R = rotation(yaw)
    # Points in the lattice frame P (origin at the area centroid, axes along the cells).
    xy_P = (xy - mean) @ R
    ras = _raster(xy_P, w, sub)
    rows, cols, origin = ras.rows, ras.cols, ras.origin
    centre_P = origin + np.array([cols, rows]) * w / 2
    occupancy = ras.coverage >= config.fill_fraction
    if not occupancy.any():
        raise PerceptionError(
            PerceptionStatus.NO_OBJECT,
            f'the object covers no {w * 100:.0f} cm cell to {config.fill_fraction:.0%}; '
            'use a smaller cell_size',
        )
    # Heights: a robust top of the points falling in each cell.
    c = np.floor((xy_P[:, 0] - origin[0]) / w).astype(int)
    r = int(rows) - 1 - np.floor((xy_P[:, 1] - origin[1]) / w).astype(int)
    ok = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
    heights = np.zeros((rows, cols))
    flat = r[ok] * int(cols) + c[ok]
    h_ok = seg.heights[ok]
    order = np.argsort(flat, kind='stable')
    flat, h_ok = flat[order], h_ok[order]
    starts = np.searchsorted(flat, np.arange(int(rows) * int(cols)))
    ends = np.searchsorted(flat, np.arange(int(rows) * int(cols)), side='right')
    for k in np.flatnonzero(occupancy.ravel()):
        if ends[k] > starts[k]:
            heights.flat[k] = float(np.percentile(h_ok[starts[k] : ends[k]], 75))
    missing = occupancy & (heights <= 0)
    if missing.any():  # a covered cell without its own points: its neighbours' median
        known = np.where(occupancy & (heights > 0), heights, np.nan)
        fill = ndimage.generic_filter(known, np.nanmedian, size=3, mode='constant', cval=np.nan)
        heights[missing] = np.nan_to_num(fill[missing], nan=float(np.nanmedian(known)))
    grid = Grid(w, occupancy, heights)
    p_TO = mean + R @ centre_P
    X_TO = np.array([p_TO[0], p_TO[1], yaw])
    model_xy = (xy - p_TO) @ R
    model = np.column_stack((model_xy, seg.heights))
    return ObjectEstimate(grid, X_TO, model, seg.table)


def acquire(
    points_T: ArrayLike,
    config: PerceptionConfig,
    keep_out: tuple[KeepOut, ...] = (),
) -> ObjectEstimate:
    """Segment a table-frame cloud p_T (N, 3) and build the object's grid and pose."""
    return build_grid(segment(np.asarray(points_T, dtype=float), config, keep_out), config)


# -- tracking -------------------------------------------------------------------------------
def _outline(xy: FloatArray, pitch: float, anchor: FloatArray) -> FloatArray:
    """Centres (K, 2) of the outline pixels of the footprint of points xy (M, 2), on a raster
    of ``pitch`` whose pixel corners include ``anchor`` (2,)."""
    lo = anchor + pitch * np.floor((xy.min(axis=0) - 3 * pitch - anchor) / pitch)
    n = np.ceil((xy.max(axis=0) + 3 * pitch - lo) / pitch).astype(int)
    image = _footprint_image(xy, lo, (int(n[1]), int(n[0])), pitch)
    edge = image & ~ndimage.binary_erosion(image)
    r, c = np.nonzero(edge)
    return np.column_stack(
        (lo[0] + (c + 0.5) * pitch, lo[1] + (image.shape[0] - 1 - r + 0.5) * pitch)
    )


@dataclass
class PoseTracker:
    """Tracks an acquired object's SE(2) pose from frame to frame.

    Registration is chamfer matching of footprint outlines: the acquired footprint's outline
    becomes a distance field in the object frame; each frame's outline points are fitted to
    it over (x, y, yaw) by robust least squares, warm-started from the last pose. Unlike
    point-to-point ICP this does not stall along weakly constrained directions (sliding
    along a long handle). Outline points next to the pusher or gripper are not used: there
    the outline is the cut, not the object. A frame whose outline matches poorly raises
    PerceptionError(POOR_REGISTRATION) and leaves the last good pose unchanged.
    """

    estimate: ObjectEstimate
    config: PerceptionConfig
    X_TO: FloatArray = field(init=False)
    _radius: float = field(init=False)
    _pitch: float = field(init=False)
    _field: FloatArray = field(init=False)
    _field_lo: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        self.X_TO = np.array(self.estimate.X_TO, dtype=float)
        xy = self.estimate.model_O[:, :2]
        self._radius = float(np.linalg.norm(xy, axis=1).max())
        self._pitch = self.config.voxel_size / 2
        pad = self.config.icp_distance
        lo = xy.min(axis=0) - pad
        n = np.ceil((xy.max(axis=0) + pad - lo) / self._pitch).astype(int)
        image = _footprint_image(xy, lo, (int(n[1]), int(n[0])), self._pitch)
        edge = image & ~ndimage.binary_erosion(image)
        # Distance [m] to the outline; rows flipped so that index 0 is the lowest y.
        self._field = (
            np.asarray(ndimage.distance_transform_edt(~edge[::-1]), dtype=float) * self._pitch
        )
        self._field_lo = lo

    def _distance(self, p_O: FloatArray) -> FloatArray:
        idx = (p_O - self._field_lo) / self._pitch - 0.5
        return np.asarray(
            ndimage.map_coordinates(self._field, [idx[:, 1], idx[:, 0]], order=1, mode='nearest'),
            dtype=float,
        )

    def update(self, points_T: ArrayLike, keep_out: tuple[KeepOut, ...] = ()) -> TrackResult:
        """Register one table-frame cloud p_T (N, 3); return the new pose and its scores
        (fitness: share of outline points within the fine tolerance icp_distance / 4)."""
        cfg = self.config
        p = np.asarray(points_T, dtype=float).reshape(-1, 3)
        if p.shape[0] == 0:
            raise PerceptionError(PerceptionStatus.EMPTY_CLOUD, 'the cloud has no valid point')
        reach = self._radius + cfg.max_motion
        d2 = (p[:, 0] - self.X_TO[0]) ** 2 + (p[:, 1] - self.X_TO[1]) ** 2
        p = p[d2 <= reach**2]
        h = self.estimate.table.height(p)
        keep = (h >= cfg.min_height) & np.isfinite(h)
        for body in keep_out:
            keep &= ~body.contains(p)
        xy = p[keep, :2]
        if xy.shape[0] < cfg.min_cluster_points:
            raise PerceptionError(
                PerceptionStatus.POOR_REGISTRATION,
                f'only {xy.shape[0]} object points near the last pose: object lost',
            )
        # Outline on a raster aligned with the model's (the last pose's object frame), so
        # that both staircases alias alike and cancel instead of biasing the yaw.
        R_last = rotation(float(self.X_TO[2]))
        outline_O = _outline((xy - self.X_TO[:2]) @ R_last, self._pitch, self._field_lo)
        outline = self.X_TO[:2] + outline_O @ R_last.T
        for body in keep_out:
            c = np.asarray(body.p_T)[:2]
            far = np.sum((outline - c) ** 2, axis=1) > (body.radius + 2 * self._pitch) ** 2
            outline = outline[far]
        if outline.shape[0] < cfg.min_cluster_points:
            raise PerceptionError(
                PerceptionStatus.POOR_REGISTRATION, 'too little of the outline is visible'
            )

        def residuals(X: FloatArray) -> FloatArray:
            p_O = (outline - X[:2]) @ rotation(float(X[2]))
            return self._distance(p_O)

        tol = cfg.icp_distance / 4
        fit = least_squares(
            residuals, self.X_TO, loss='soft_l1', f_scale=tol / 2, x_scale=[0.01, 0.01, 0.1]
        )
        X = np.array(fit.x, dtype=float)
        X[2] = math.atan2(math.sin(X[2]), math.cos(X[2]))
        res = np.abs(fit.fun)
        inlier = res <= tol
        fitness = float(inlier.mean())
        rmse = float(np.sqrt(np.mean(res[inlier] ** 2))) if inlier.any() else math.inf
        moved = float(np.linalg.norm(X[:2] - self.X_TO[:2]))
        if fitness < cfg.min_fitness or rmse > cfg.max_rmse or moved > cfg.max_motion:
            raise PerceptionError(
                PerceptionStatus.POOR_REGISTRATION,
                f'registration fitness {fitness:.2f} (min {cfg.min_fitness}), rmse '
                f'{rmse * 1000:.1f} mm (max {cfg.max_rmse * 1000:.1f}), jump '
                f'{moved * 1000:.0f} mm (max {cfg.max_motion * 1000:.0f})',
            )
        self.X_TO = X
        return TrackResult(X, fitness, rmse, p[keep])


def _se2_matrix(X: FloatArray) -> FloatArray:
    T = np.eye(4)
    T[:2, :2] = rotation(float(X[2]))
    T[:2, 3] = X[:2]
    return T


def _project_se2(T: FloatArray) -> FloatArray:
    """The planar part of a rigid transform: yaw about z and the x, y translation."""
    return _se2_matrix(np.array([T[0, 3], T[1, 3], math.atan2(T[1, 0], T[0, 0])]))
