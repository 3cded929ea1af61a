"""The pyrealsense2 capture chain, driven through the SDK's own software device with
synthetic depth and colour frames (no camera needed)."""

from __future__ import annotations

import numpy as np
import pytest

rs = pytest.importorskip('pyrealsense2')
from slide_perception.realsense import FilterSettings, FrameProcessor  # noqa: E402

from slide_core.errors import SlideInputError  # noqa: E402

W, H, F = 160, 120, 100.0  # px, px, focal length [px]


class SoftwareCamera:
    """A software device with a depth and a colour sensor, 2 cm apart like a D435."""

    def __init__(self) -> None:
        self.device = rs.software_device()
        self.depth_sensor = self.device.add_sensor('Depth')
        self.color_sensor = self.device.add_sensor('Color')
        intr = rs.intrinsics()
        intr.width, intr.height, intr.fx, intr.fy = W, H, F, F
        intr.ppx, intr.ppy = W / 2, H / 2
        intr.model, intr.coeffs = rs.distortion.none, [0.0] * 5
        self.depth_profile = self.depth_sensor.add_video_stream(
            self._stream(rs.stream.depth, 0, 2, rs.format.z16, intr)
        )
        self.color_profile = self.color_sensor.add_video_stream(
            self._stream(rs.stream.color, 1, 3, rs.format.rgb8, intr)
        )
        self.depth_sensor.add_read_only_option(rs.option.depth_units, 0.001)
        ext = rs.extrinsics()
        ext.rotation = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
        ext.translation = [-0.015, 0.0, 0.0]
        self.depth_profile.register_extrinsics_to(self.color_profile, ext)
        self.sync = rs.syncer()
        self.depth_sensor.open(self.depth_profile)
        self.color_sensor.open(self.color_profile)
        self.depth_sensor.start(self.sync)
        self.color_sensor.start(self.sync)
        self.n = 0

    @staticmethod
    def _stream(kind, uid, bpp, fmt, intr):  # type: ignore[no-untyped-def]
        s = rs.video_stream()
        s.type, s.index, s.uid = kind, 0, uid
        s.width, s.height, s.fps, s.bpp, s.fmt, s.intrinsics = W, H, 30, bpp, fmt, intr
        return s

    def _frame(self, pixels, bpp, profile):  # type: ignore[no-untyped-def]
        f = rs.software_video_frame()
        f.pixels, f.stride, f.bpp = pixels, W * bpp, bpp
        f.timestamp, f.frame_number = self.n * 33.3, self.n
        f.domain = rs.timestamp_domain.hardware_clock
        f.profile = profile.as_video_stream_profile()
        return f

    def frames(self, depth_mm: np.ndarray):  # type: ignore[no-untyped-def]
        """Inject one depth (H, W) uint16 [mm] and colour frame; return the frameset."""
        for _ in range(2):  # the syncer pairs a frame with the next of the other stream
            self.n += 1
            self.depth_sensor.on_video_frame(self._frame(depth_mm, 2, self.depth_profile))
            colour = np.full((H, W, 3), 128, np.uint8)
            self.color_sensor.on_video_frame(self._frame(colour, 3, self.color_profile))
            frames = self.sync.wait_for_frames(1000)
        return frames


def scene_depth() -> np.ndarray:
    """A table 0.9 m away with a 3 cm thick box on it, and a few holes."""
    depth = np.full((H, W), 900, np.uint16)
    depth[40:80, 50:110] = 870
    depth[5, 5:20] = 0
    return depth


@pytest.mark.parametrize('decimation', [1, 2])
def test_aligned_filtered_points_show_table_and_box(decimation):
    cam = SoftwareCamera()
    proc = FrameProcessor(FilterSettings(decimation=decimation, temporal=False))
    p = proc.points(cam.frames(scene_depth()))
    assert p.shape[0] > 0.8 * (W // decimation) * (H // decimation)
    z = np.round(p[:, 2], 3)
    assert set(np.unique(z)) >= {0.87, 0.9}
    box = p[np.abs(p[:, 2] - 0.87) < 0.002]
    # Box pixels 50..110 x 40..80 at 0.87 m, seen from the colour camera 1.5 cm to the side.
    width = box[:, 0].max() - box[:, 0].min()
    assert abs(width - 60 / F * 0.87) < 0.03
    assert abs(box[:, 1].mean() - (60 - H / 2) / F * 0.87) < 0.01


def test_temporal_filter_keeps_history_between_frames():
    cam = SoftwareCamera()
    proc = FrameProcessor(FilterSettings(decimation=1))
    for _ in range(4):  # the default persistence wants the pixel valid in 2 of the last 4
        first = proc.points(cam.frames(scene_depth()))
    holes = scene_depth()
    holes[60:70, 60:70] = 0  # a dropout inside the box in the second frame
    second = proc.points(cam.frames(holes))
    assert second.shape[0] >= first.shape[0] - 10  # filled from the first frame


def test_bad_settings():
    with pytest.raises(SlideInputError, match='decimation'):
        FilterSettings(decimation=0)
