"""Perception: a depth camera's point cloud to the object's cell grid and its SE(2) pose.

Frames (see :mod:`slide_core.geometry`): W the table frame, K the camera's optical frame
(z forward, x right, y down), O the object frame of the grid. The extrinsics X_WK come
from a calibration file (:func:`load_extrinsics`); hand-eye calibration is done elsewhere.

Pipeline, one frame at a time:

1. :func:`to_table_frame` drops NaN / zero-depth points and maps p_K (N, 3) to p_W.
2. :func:`fit_table` finds the table plane by RANSAC (open3d ``segment_plane``) and checks it
   against the calibration (tilt and offset), so a wrong extrinsic or a view without the
   table is reported, not silently used.
3. :func:`segment` keeps points above the plane inside the workspace box, removes the known
   pusher and gripper (:class:`KeepOut`, vertical cylinders around their poses), clusters the
   rest (DBSCAN) and demands exactly one object cluster that lies wholly in the view (the
   camera's :class:`CameraView`, the pyramid its image spans, when the caller has it).
4. :func:`build_grid` rasterises the footprint (the top surface projected down, as the papers
   presume) into square cells laid along the footprint's minimum-area rectangle: the object
   frame has its origin at the centre of the grid and its x axis along the footprint's major
   axis (pointing to +x of W); each cell's height is a robust top of its points.
5. :class:`PoseTracker` registers each new frame's footprint outline to the acquired one
   (a chamfer distance field and robust least squares over x, y and yaw, warm-started from
   the last pose; point-to-point ICP stalled along long handles) and reports the fit; a
   poor registration is a status, never a pose; so is a pose at which the object would
   reach out of the camera's image.

Failures raise :class:`PerceptionError` with a :class:`PerceptionStatus` a node can publish.
"""

from __future__ import annotations

from slide_core.perception.cloud import (
    CameraView,
    Extrinsics,
    KeepOut,
    PerceptionConfig,
    PerceptionError,
    PerceptionStatus,
    Segmentation,
    TablePlane,
    fit_table,
    load_extrinsics,
    read_extrinsics,
    segment,
    to_table_frame,
    workspace_box,
)
from slide_core.perception.shape import ObjectEstimate, acquire, build_grid
from slide_core.perception.tracking import PoseTracker, TrackResult

__all__ = [
    'CameraView',
    'Extrinsics',
    'KeepOut',
    'ObjectEstimate',
    'PerceptionConfig',
    'PerceptionError',
    'PerceptionStatus',
    'PoseTracker',
    'Segmentation',
    'TablePlane',
    'TrackResult',
    'acquire',
    'build_grid',
    'fit_table',
    'load_extrinsics',
    'read_extrinsics',
    'segment',
    'to_table_frame',
    'workspace_box',
]
