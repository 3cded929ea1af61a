"""``slide bench perception``: the perception pipeline on twin scenes with known truth.

For every object and random pose: render the twin's RGB-D camera (noise, quantisation,
holes), acquire the grid (footprint IoU against the true footprint; the mean distance of its
traced outline, and of its cells' staircase, to the true boundary), then push the object
and track it at the camera's 30 Hz while the fingertip is in contact (cut out by its known
pose). Tracking error compares the tracked motion with the true motion from the first
frame (the perceived object frame differs from the specification's by a fixed transform,
which the first frame fixes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import math
import time
from typing import Any

import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import (
    FloatArray,
    Grid,
    boundary_distance,
    boundary_segments,
    covered,
    rotation,
    wrap_angle,
)
from slide_core.identification import outline_point
from slide_core.io.perceive import perception_config
from slide_core.model import Primitive, library_names, load_object, load_workcell
from slide_core.perception import (
    CameraView,
    KeepOut,
    PerceptionError,
    PoseTracker,
    acquire,
    to_table_frame,
)
from slide_sim.camera import RgbdCamera, point_cloud
from slide_sim.twin import Twin

CAMERA_HZ = 30.0
IOU_PITCH = 0.001  # m, raster of the IoU

Progress = Callable[[str], None]


def compose(X_AB: FloatArray, X_BC: FloatArray) -> FloatArray:
    """SE(2) composition of planar poses (x, y, yaw)."""
    p = X_AB[:2] + rotation(float(X_AB[2])) @ X_BC[:2]
    return np.array([p[0], p[1], float(wrap_angle(X_AB[2] + X_BC[2]))])


def inverse(X_AB: FloatArray) -> FloatArray:
    R = rotation(float(X_AB[2]))
    p = -R.T @ X_AB[:2]
    return np.array([p[0], p[1], -X_AB[2]])


def footprint_mask(grid: Grid, X_WO: FloatArray, lo: FloatArray, n: int) -> FloatArray:
    """(n * n,) bool raster (pitch IOU_PITCH, lower-left ``lo``) of the grid's footprint:
    its cells, inside its real outline when it has one (:func:`covered`)."""
    xs = lo[0] + (np.arange(n) + 0.5) * IOU_PITCH
    ys = lo[1] + (np.arange(n) + 0.5) * IOU_PITCH
    gx, gy = np.meshgrid(xs, ys)
    return np.asarray(covered(grid, X_WO, np.column_stack((gx.ravel(), gy.ravel()))))


def footprint_iou(grid_a: Grid, X_a: FloatArray, grid_b: Grid, X_b: FloatArray) -> float:
    """Intersection over union of two placed grids' footprints."""
    reach = max(float(np.abs(g.p_OC).max()) + g.cell_size for g in (grid_a, grid_b)) * math.sqrt(2)
    lo = X_a[:2] - reach - 0.02
    n = int(math.ceil(2 * (reach + 0.02) / IOU_PITCH))
    a = footprint_mask(grid_a, X_a, lo, n)
    b = footprint_mask(grid_b, X_b, lo, n)
    return float((a & b).sum() / max(1, (a | b).sum()))


def boundary_error_mm(truth: Grid, X_true: FloatArray, est: Grid, X_est: FloatArray) -> float:
    """Mean distance [mm] from points every millimetre along the estimated grid's boundary
    (its outline, else its cells' staircase) to the true object's boundary."""
    a, b = boundary_segments(est)
    lengths = np.linalg.norm(b - a, axis=1)
    points = np.concatenate(
        [
            a[k]
            + np.linspace(0.0, 1.0, max(2, int(lengths[k] / 0.001)), endpoint=False)[:, None]
            * (b[k] - a[k])
            for k in range(len(a))
        ]
    )
    p_W = points @ rotation(float(X_est[2])).T + X_est[:2]
    p = (p_W - X_true[:2]) @ rotation(float(X_true[2]))  # in the true object frame
    return float(boundary_distance(truth, p).mean() * 1000)


def _stats(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {'median': math.nan, 'p95': math.nan, 'worst': math.nan}
    return {
        'median': float(np.median(v)),
        'p95': float(np.percentile(v, 95)),
        'worst': float(v.max()),
    }


@dataclass
class _Watcher:
    """Renders a frame every ``every`` physics steps of a push and tracks it."""

    twin: Twin
    camera: RgbdCamera
    tracker: PoseTracker
    offset: FloatArray  # X_O'O: the true object frame in the perceived one
    every: int
    errors_mm: list[float] = field(default_factory=list)
    errors_deg: list[float] = field(default_factory=list)
    frame_ms: list[float] = field(default_factory=list)
    poor: int = 0
    frames: int = 0
    _steps: int = 0

    def __call__(self) -> None:
        self._steps += 1
        if self._steps % self.every:
            return
        shot = self.camera.capture(self.twin.data)
        p_K = point_cloud(shot, world=False)
        tip = self.twin.fingertip()
        f = self.twin.cell.fingertip
        keep_out = (KeepOut((tip[0], tip[1], tip[2]), f.radius + 0.004, f.length / 2 + 0.005),)
        self.frames += 1
        t = time.perf_counter()
        p_W = to_table_frame(p_K, shot.R_WK, shot.p_WK)
        view = CameraView.of(p_K, shot.R_WK, shot.p_WK)
        try:
            res = self.tracker.update(p_W, keep_out, view)
        except PerceptionError:
            self.poor += 1
            return
        self.frame_ms.append((time.perf_counter() - t) * 1000)
        X_pred = compose(res.X_WO, self.offset)
        X_true = self.twin.object_pose()
        self.errors_mm.append(float(np.linalg.norm(X_pred[:2] - X_true[:2])) * 1000)
        self.errors_deg.append(abs(math.degrees(float(wrap_angle(X_pred[2] - X_true[2])))))


def run(
    objects: Sequence[str] | None = None,
    poses: int = 2,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Figures over ``poses`` random scenes per object (default: the whole library)."""
    names = list(objects or library_names())
    if poses < 1:
        raise SlideInputError(f'poses must be at least 1, got {poses}')
    for name in names:  # an unknown one is refused before the others' scenes run
        load_object(name)
    cell = load_workcell()
    config = perception_config(cell)
    rng = np.random.default_rng(seed)
    ious: list[float] = []
    acquire_ms: list[float] = []
    outline_mm: list[float] = []  # the estimated boundary's distance to the true one
    squares_mm: list[float] = []  # the same for the estimated cells' staircase
    traced = 0
    w = config.cell_size
    watchers: list[_Watcher] = []
    per_object: dict[str, Any] = {}
    for name in names:
        spec = load_object(name)
        obj_iou: list[float] = []
        obj_err: list[float] = []
        for _ in range(poses):
            X0 = (rng.uniform(0.22, 0.5), rng.uniform(-0.22, 0.22), rng.uniform(-math.pi, math.pi))
            twin = Twin(spec, cell, X0)
            with RgbdCamera(twin.model, seed=int(rng.integers(1 << 31))) as camera:
                shot = camera.capture(twin.data)
                t = time.perf_counter()
                p_K = point_cloud(shot, world=False)
                view = CameraView.of(p_K, shot.R_WK, shot.p_WK)
                est = acquire(to_table_frame(p_K, shot.R_WK, shot.p_WK), config, view=view)
                acquire_ms.append((time.perf_counter() - t) * 1000)
                X_true0 = twin.object_pose()
                obj_iou.append(footprint_iou(spec.grid, X_true0, est.grid, est.X_WO))
                squares = Grid(w, est.grid.occupancy, est.grid.heights, est.grid.coverage)
                outline_mm.append(boundary_error_mm(spec.grid, X_true0, est.grid, est.X_WO))
                squares_mm.append(boundary_error_mm(spec.grid, X_true0, squares, est.X_WO))
                traced += est.grid.outline is not None
                watcher = _Watcher(
                    twin,
                    camera,
                    PoseTracker(est, config),
                    compose(inverse(est.X_WO), X_true0),
                    max(1, round(1.0 / CAMERA_HZ / twin.model.opt.timestep)),
                )
                contact, inward = outline_point(spec.grid, rng)
                push = Primitive.create(contact, inward, float(rng.uniform(0.03, 0.06)), 0.05)
                twin.push(push, on_step=watcher)
            watchers.append(watcher)
            obj_err.extend(watcher.errors_mm)
        ious.extend(obj_iou)
        per_object[name] = {
            'footprint_iou': min(obj_iou),
            'pose_error_mm_worst': max(obj_err) if obj_err else math.nan,
        }
        if progress:
            progress(f'{name}: IoU {min(obj_iou):.3f}, {len(obj_err)} frames tracked')
    return {
        'objects': len(names),
        'scenes': len(names) * poses,
        'frames': sum(w.frames for w in watchers),
        'poor_registrations': sum(w.poor for w in watchers),
        'footprint_iou': {'median': float(np.median(ious)), 'worst': float(min(ious))},
        'outlines_traced': traced,
        'outline_error_mm': _stats(outline_mm),
        'squares_error_mm': _stats(squares_mm),
        'pose_error_mm': _stats([e for w in watchers for e in w.errors_mm]),
        'pose_error_deg': _stats([e for w in watchers for e in w.errors_deg]),
        'ms_per_frame': _stats([e for w in watchers for e in w.frame_ms]),
        'acquire_ms': _stats(acquire_ms),
        'per_object': per_object,
    }
