"""Capture from an Intel RealSense (D435/D455) through pyrealsense2, for machines without
``realsense2_camera``: depth aligned to colour, then the SDK's post-processing chain
(decimation, depth to disparity, spatial, temporal, back to depth), deprojected to points
in the colour camera's optical frame.

pyrealsense2 is imported only here, and only when a capture is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from slide_core.errors import SlideInputError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class FilterSettings:
    """Post-processing: decimation magnitude (1 = off), spatial and temporal smoothing."""

    decimation: int = 2
    spatial: bool = True
    temporal: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.decimation <= 8:
            raise SlideInputError(f'decimation must be 1..8, got {self.decimation}')


class FrameProcessor:
    """Turns RealSense framesets (depth + colour) into (N, 3) points of the colour camera's
    optical frame [m]. Keeps the temporal filter's history between frames."""

    def __init__(self, settings: FilterSettings | None = None) -> None:
        import pyrealsense2 as rs

        self.rs = rs
        self.settings = settings or FilterSettings()
        self.align = rs.align(rs.stream.color)
        chain: list[Any] = []
        if self.settings.decimation > 1:
            decimation = rs.decimation_filter()
            decimation.set_option(rs.option.filter_magnitude, self.settings.decimation)
            chain.append(decimation)
        if self.settings.spatial or self.settings.temporal:
            chain.append(rs.disparity_transform(True))
            if self.settings.spatial:
                chain.append(rs.spatial_filter())
            if self.settings.temporal:
                chain.append(rs.temporal_filter())
            chain.append(rs.disparity_transform(False))
        self.chain = chain
        self.pointcloud = rs.pointcloud()

    def points(self, frames: Any) -> FloatArray:
        """Points (N, 3) of one frameset; pixels without depth are left out."""
        aligned = self.align.process(frames)
        depth = aligned.get_depth_frame()
        if not depth:
            raise SlideInputError('the frameset has no depth frame')
        frame = depth
        for f in self.chain:
            frame = f.process(frame)
        vertices = self.pointcloud.calculate(frame).get_vertices()
        p = np.asanyarray(vertices).view(np.float32).reshape(-1, 3).astype(np.float64)
        return p[p[:, 2] > 0]


class RealSenseCapture:
    """A live camera: ``points()`` waits for the next frameset and returns its points."""

    def __init__(
        self,
        serial: str = '',
        width: int = 640,
        height: int = 480,
        fps: int = 30,
        settings: FilterSettings | None = None,
    ) -> None:
        import pyrealsense2 as rs

        self.pipeline = rs.pipeline()
        config = rs.config()
        if serial:
            config.enable_device(serial)
        config.enable_stream(rs.stream.depth, width, height, rs.format.z16, fps)
        config.enable_stream(rs.stream.color, width, height, rs.format.rgb8, fps)
        try:
            self.pipeline.start(config)
        except RuntimeError as exc:
            raise SlideInputError(
                f'cannot start the RealSense {serial or "(any)"} at {width}x{height}@{fps}: '
                f'{exc}; is it plugged into USB 3 and not used by another process?'
            ) from exc
        self.processor = FrameProcessor(settings)

    def points(self, timeout_ms: int = 1000) -> FloatArray:
        return self.processor.points(self.pipeline.wait_for_frames(timeout_ms))

    def close(self) -> None:
        self.pipeline.stop()
