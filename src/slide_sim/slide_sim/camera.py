"""The twin's RGB-D camera: a RealSense D435-like view of the table, rendered headless.

Images are 640 x 480. Depth is in metres along the optical axis, with the sensor's faults:
noise growing with the square of the distance, quantisation to the depth unit (1 mm), and
holes (zero depth) where a real stereo camera loses the match. Frames follow ROS
conventions: the optical frame has z forward, x right, y down (REP 103 ``_optical``).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

WIDTH, HEIGHT = 640, 480
DEPTH_UNIT_M = 0.001
NOISE_PER_M2 = 0.001  # depth noise standard deviation [m] at 1 m; grows with z^2
HOLE_FRACTION = 0.005
MAX_RANGE_M = 3.0

# MuJoCo cameras look along -z with y up; the optical frame looks along +z with y down.
R_MUJOCO_OPTICAL = np.diag([1.0, -1.0, -1.0])


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics [px]."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int = WIDTH
    height: int = HEIGHT

    def matrix(self) -> FloatArray:
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])


@dataclass
class RgbdFrame:
    """One frame: colour (H, W, 3) uint8, depth (H, W) float32 [m] (0 = no data), and the
    camera pose X_WK: R_WK (3, 3), p_WK (3,) of the optical frame in the world."""

    rgb: NDArray[np.uint8]
    depth: NDArray[np.float32]
    intrinsics: Intrinsics
    R_WK: FloatArray
    p_WK: FloatArray
    time: float


class RgbdCamera:
    """Renders the model's ``rgbd`` camera. Close it (or use ``with``) when done."""

    def __init__(
        self, model: mujoco.MjModel, camera: str = 'rgbd', seed: int = 0, decimation: int = 1
    ) -> None:
        """``decimation`` renders at 1/n of the D435's resolution in each direction (as
        realsense2_camera's decimation filter thins its frames; rendering is the cost)."""
        self.model = model
        self.camera = camera
        self._id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if self._id < 0:
            raise ValueError(f'the model has no camera named {camera!r}')
        if not 1 <= decimation <= 8:
            raise ValueError(f'decimation must be 1 to 8, got {decimation}')
        width, height = WIDTH // decimation, HEIGHT // decimation
        fovy = np.radians(model.cam_fovy[self._id])
        f = (height / 2) / np.tan(fovy / 2)
        self.intrinsics = Intrinsics(f, f, (width - 1) / 2, (height - 1) / 2, width, height)
        self._renderer = mujoco.Renderer(model, height, width)
        self._rng = np.random.default_rng(seed)

    def close(self) -> None:
        self._renderer.close()

    def __enter__(self) -> RgbdCamera:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def capture(self, data: mujoco.MjData, noise: bool = True, rgb: bool = True) -> RgbdFrame:
        """A frame of ``data``'s scene; ``rgb=False`` skips the colour image (zeros), which
        costs most of the rendering (a depth cloud does not need it)."""
        r = self._renderer
        if rgb:
            r.disable_depth_rendering()
            r.update_scene(data, camera=self.camera)
            colour = r.render().copy()
        else:
            colour = np.zeros((self.intrinsics.height, self.intrinsics.width, 3), np.uint8)
        r.enable_depth_rendering()
        r.update_scene(data, camera=self.camera)
        depth = r.render().astype(np.float64)
        r.disable_depth_rendering()
        if noise:
            depth = depth + self._rng.normal(0.0, 1.0, depth.shape) * NOISE_PER_M2 * depth**2
            depth = np.round(depth / DEPTH_UNIT_M) * DEPTH_UNIT_M
            depth[self._rng.random(depth.shape) < HOLE_FRACTION] = 0.0
        depth[depth > MAX_RANGE_M] = 0.0
        R_WK = data.cam_xmat[self._id].reshape(3, 3) @ R_MUJOCO_OPTICAL
        return RgbdFrame(
            colour,
            depth.astype(np.float32),
            self.intrinsics,
            R_WK,
            data.cam_xpos[self._id].copy(),
            float(data.time),
        )


def point_cloud(frame: RgbdFrame, world: bool = True, decimation: int = 1) -> FloatArray:
    """(N, 3) points of the valid depth pixels, in the world frame (or the optical frame);
    ``decimation`` keeps every n-th pixel of every n-th row (realsense2_camera's
    decimation filter thins a cloud likewise)."""
    k = frame.intrinsics
    valid = frame.depth > 0
    if decimation > 1:
        keep = np.zeros_like(valid)
        keep[::decimation, ::decimation] = True
        valid &= keep
    v, u = np.nonzero(valid)
    z = frame.depth[v, u].astype(float)
    p_K = np.column_stack(((u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z))
    if not world:
        return p_K
    return np.asarray(p_K @ frame.R_WK.T + frame.p_WK, dtype=float)
