"""Object poses from recorded camera clouds: the perception node's work, offline.

For a bag without ``/object/pose`` (a robot bag recorded without perception running, or
one whose perception is to be redone), the recorded clouds go through the same steps as
in the perception node (:mod:`slide_perception.node`): each cloud into the table frame
with the camera's extrinsics, the pusher and gripper cut out at their recorded poses, the
object acquired from the first frame that shows it alone (grid and pose), then tracked
frame by frame (:class:`slide_core.perception.PoseTracker`); a frame that gives no pose
is counted by its status, as the node reports it on ``/diagnostics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid
from slide_core.model import Workcell
from slide_core.perception import (
    CameraView,
    KeepOut,
    PerceptionConfig,
    PerceptionError,
    PoseTracker,
    acquire,
    read_extrinsics,
    to_table_frame,
)

PUSHER_KEEP_OUT = (0.014, 0.05)
"""Radius and half height [m] cut out around the pusher (the node's defaults: the
workcell's 8 mm fingertip and :data:`KEEP_OUT_MARGIN`)."""
KEEP_OUT_MARGIN = 0.006
"""What the pusher's keep-out adds to the fingertip's radius [m] (depth noise at its rim)."""

GRIPPER_KEEP_OUT = (0.07, 0.1)
"""Radius and half height [m] cut out around the gripper (the node's defaults)."""


def pusher_keep_out(fingertip_radius: float) -> tuple[float, float]:
    """Radius and half height [m] to cut out around a fingertip of this radius [m] (the
    workcell's: one wider than the default keep-out would leave its rim in the cloud, a
    second object beside the object)."""
    return fingertip_radius + KEEP_OUT_MARGIN, PUSHER_KEEP_OUT[1]


def obstacle_boxes(cell: Workcell) -> tuple[tuple[float, float, float, float], ...]:
    """The workcell's obstacles as perception takes them (``PerceptionConfig.obstacles``)."""
    return tuple((*o.centre, *o.half_size) for o in cell.obstacles)


def perception_config(cell: Workcell, **settings: Any) -> PerceptionConfig:
    """Perception's settings for the workcell ``cell``: its table's workspace box and its
    obstacles (a box on the table was a second object), the others ``settings`` or the
    defaults."""
    return PerceptionConfig.for_table(
        cell.table.depth, cell.table.width, obstacles=obstacle_boxes(cell), **settings
    )


KeepOutAt = Callable[[float], tuple[KeepOut, ...]]


@dataclass(frozen=True, eq=False)
class CloudTrack:
    """What perception made of a bag's clouds.

    Attributes:
        grid: the acquired object's cells; frame: the table frame's name.
        log: the log time [s] of the cloud it was acquired from.
        poses: (log time [s], stamp [s], X_WO (3,)) of every frame that gave a pose.
        frames: clouds worked on; refused: per status, how many gave no pose.
        warnings: one line per kind of trouble (clouds in another frame, refusals).
    """

    grid: Grid
    frame: str
    log: float
    poses: list[tuple[float, float, FloatArray]]
    frames: int
    refused: dict[str, int]
    warnings: list[str]


def keep_out_from(
    t_pusher: FloatArray,
    p_pusher: FloatArray,
    t_gripper: FloatArray | None = None,
    p_gripper: FloatArray | None = None,
    pusher: tuple[float, float] = PUSHER_KEEP_OUT,
) -> KeepOutAt:
    """The bodies to cut out of a cloud stamped t: the pusher and gripper at their latest
    recorded positions (N, 3) (table frame) no later than t; ``pusher``: the radius and
    half height [m] of the pusher's (:func:`pusher_keep_out`)."""
    tools = [(t_pusher, p_pusher, pusher)]
    if t_gripper is not None and p_gripper is not None:
        tools.append((t_gripper, p_gripper, GRIPPER_KEEP_OUT))
    ordered = []
    for t, p, size in tools:
        order = np.argsort(t, kind='stable')
        ordered.append((np.asarray(t, dtype=float)[order], np.asarray(p, float)[order], size))

    def at(t: float) -> tuple[KeepOut, ...]:
        out = []
        for times, points, (radius, half) in ordered:
            k = int(np.searchsorted(times, t, side='right')) - 1
            if k >= 0:
                x, y, z = (float(v) for v in points[k])
                out.append(KeepOut((x, y, z), radius, half))
        return tuple(out)

    return at


Cloud = Callable[[], tuple[float, str, FloatArray]]
"""A cloud not yet decoded: called, it gives (stamp [s], frame, points p_K (N, 3) in the
camera's optical frame), or raises SlideInputError when the message is malformed."""


def track_clouds(
    clouds: Iterable[tuple[float, Cloud]],
    extrinsics: str | Path | None,
    keep_out: KeepOutAt,
    source: str = '<clouds>',
    config: PerceptionConfig | None = None,
    table_frame: str = 'table',
    wanted: Callable[[float], bool] = lambda log: True,
) -> CloudTrack:
    """Acquire and track the object over clouds (log time [s], the cloud), in order.
    Once the object is acquired, only clouds whose log time is ``wanted`` are decoded and
    tracked (the object rests between pushes: the tracker takes up where it stopped).
    ``keep_out``: the tools to cut out of the cloud logged at a log time [s] (looked up by
    log time: a camera on another clock was cut where the tools were at its wrong stamps);
    ``extrinsics``: the camera file (default: the workcell's); ``config``: perception's
    settings (default: the workcell table's workspace box). Raises SlideInputError when no
    cloud shows the object."""
    if extrinsics is None or config is None:
        from slide_core.model import load_workcell

        cell = load_workcell()
        extrinsics = cell.camera_extrinsics if extrinsics is None else extrinsics
        config = config or perception_config(cell)
    camera = read_extrinsics(extrinsics)
    R_WK, p_WK, optical = camera.R_WK, camera.p_WK, camera.child_frame
    cfg = config
    tracker: PoseTracker | None = None
    grid: Grid | None = None
    acquired_at = 0.0
    poses: list[tuple[float, float, FloatArray]] = []
    refused: dict[str, int] = {}
    other_frames: dict[str, int] = {}
    frames = 0
    bad = 0
    for log, decode in clouds:
        if tracker is not None and not wanted(log):
            continue
        try:
            stamp, frame, p_K = decode()
        except SlideInputError:
            bad += 1
            continue
        if optical and frame and frame != optical:
            other_frames[frame] = other_frames.get(frame, 0) + 1
            continue
        frames += 1
        p_W = to_table_frame(p_K, R_WK, p_WK)
        view = CameraView.of(p_K, R_WK, p_WK)
        bodies = keep_out(log)
        try:
            if tracker is None:
                estimate = acquire(p_W, cfg, bodies, view)
                tracker = PoseTracker(estimate, cfg)
                grid, acquired_at = estimate.grid, log
                X = np.array(estimate.X_WO, dtype=float)
            else:
                X = tracker.update(p_W, bodies, view).X_WO
        except PerceptionError as exc:
            refused[exc.status.value] = refused.get(exc.status.value, 0) + 1
            continue
        except (RuntimeError, ValueError):
            # A cloud perception cannot handle (open3d refuses degenerate ones with a
            # RuntimeError, numpy with a ValueError): that frame is lost, as the node
            # loses it; one such frame ended slide identify with a traceback.
            refused['bad_cloud'] = refused.get('bad_cloud', 0) + 1
            continue
        poses.append((log, stamp, X))
    warnings = []
    if bad:
        warnings.append(f'{bad} malformed cloud(s) skipped')
    if other_frames:
        warnings.append(
            f'{sum(other_frames.values())} cloud(s) in frame '
            f'{", ".join(map(repr, sorted(other_frames)))}, not the camera frame {optical!r} '
            'of the extrinsics: not used'
        )
    if refused:
        warnings.append(
            f'perception gave no pose for {sum(refused.values())} of {frames} cloud(s) ('
            + ', '.join(f'{k}: {v}' for k, v in sorted(refused.items()))
            + ')'
        )
    if grid is None:
        raise SlideInputError(
            f'{source}: perception found no object in any of {frames} cloud(s)'
            + (f' ({"; ".join(warnings)})' if warnings else '')
        )
    return CloudTrack(grid, table_frame, acquired_at, poses, frames, refused, warnings)
