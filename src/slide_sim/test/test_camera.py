"""The twin's RGB-D camera: a noisy, quantised depth image that agrees with the scene."""

from __future__ import annotations

import numpy as np

from slide_core.model import load_object, load_workcell
from slide_sim.camera import DEPTH_UNIT_M, RgbdCamera, point_cloud
from slide_sim.twin import Twin


def test_depth_sees_the_table_and_the_object_on_it() -> None:
    spec = load_object('box')  # 5 cm tall
    twin = Twin(spec, load_workcell(), (0.35, 0.0, 0.0))
    with RgbdCamera(twin.model, seed=1) as camera:
        frame = camera.capture(twin.data)
        clean = camera.capture(twin.data, noise=False)
    assert frame.rgb.shape == (480, 640, 3) and frame.depth.shape == (480, 640)
    holes = np.mean(frame.depth == 0)
    assert 0.002 < holes < 0.02  # stereo dropouts
    valid = frame.depth[frame.depth > 0]
    assert np.allclose(valid / DEPTH_UNIT_M, np.round(valid / DEPTH_UNIT_M), atol=1e-3)
    assert np.any(frame.depth != clean.depth)  # noisy
    cloud = point_cloud(clean)
    on_table = (np.abs(cloud[:, 1]) < 0.3) & (cloud[:, 0] > 0.5) & (cloud[:, 0] < 0.75)
    assert np.abs(cloud[on_table, 2]).max() < 2e-3  # the table top is z = 0
    near_object = np.linalg.norm(cloud[:, :2] - [0.35, 0.0], axis=1) < 0.04
    beyond = cloud[:, 0] < -0.05  # past the edge: the floor, 0.75 m below
    assert np.median(cloud[beyond, 2]) < -0.7
    assert abs(np.median(cloud[near_object, 2]) - 0.05) < 2e-3  # the box's top
