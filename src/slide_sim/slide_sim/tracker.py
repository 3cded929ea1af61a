"""A camera tracker's object poses, made from the twin's truth: fewer a second, each off it
by Gaussian noise, and all of them by a calibration's offset if asked. ``slide record``
writes them to bags (:mod:`slide_sim.record`), and the in-process episode's world observes
through them (:class:`slide_sim.world.TwinWorld`), so that identification and the task meet
the poses perception gives the graph."""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
from numpy.typing import ArrayLike

from slide_core.errors import SlideInputError
from slide_core.identification import MAX_POSE_GAP_S

MAX_SIGMA_M = 0.01
MAX_SIGMA_RAD = math.radians(10.0)
MAX_OFFSET_M = 0.02


@dataclass(frozen=True)
class Tracking:
    """How object poses are measured: ``hz`` poses a second, each off the truth by Gaussian
    noise of ``sigma_m`` [m] in x and y and ``sigma_rad`` [rad] in yaw, and every one off it
    by ``offset_m`` (x, y) [m] in the table frame: a camera whose extrinsics are off by that
    (the arm's fingertip is where it is commanded). The default is perfect tracking at
    100 Hz; perception's benchmark measures 0.15 mm and 0.05 degrees median error, tracked
    at 30 Hz (:data:`PERCEPTION`)."""

    hz: float = 100.0
    sigma_m: float = 0.0
    sigma_rad: float = 0.0
    offset_m: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        # Identification refuses a push with a gap of MAX_POSE_GAP_S in its poses: a slower
        # rate made a bag that none of its pushes could be read from.
        low = 2.0 / MAX_POSE_GAP_S
        if not (math.isfinite(self.hz) and low <= self.hz <= 100.0):
            raise SlideInputError(
                f'the pose rate must be {low:g} to 100 Hz, got {self.hz:g} (identification '
                f'needs a pose at least every {MAX_POSE_GAP_S:g} s)'
            )
        # A tracker off by more than these has lost the object (perception refuses frames
        # whose registration is worse than 4 mm); noise beyond them is no tracking.
        if not (math.isfinite(self.sigma_m) and 0.0 <= self.sigma_m <= MAX_SIGMA_M):
            raise SlideInputError(
                f'the pose noise in x and y must be 0 to {MAX_SIGMA_M * 1e3:g} mm, got '
                f'{self.sigma_m * 1e3:g} mm'
            )
        if not (math.isfinite(self.sigma_rad) and 0.0 <= self.sigma_rad <= MAX_SIGMA_RAD):
            raise SlideInputError(
                f'the pose noise in yaw must be 0 to {math.degrees(MAX_SIGMA_RAD):g} degrees, '
                f'got {math.degrees(self.sigma_rad):g} degrees'
            )
        offset = tuple(float(v) for v in self.offset_m)
        if not (
            len(offset) == 2
            and all(math.isfinite(v) for v in offset)
            and math.hypot(*offset) <= MAX_OFFSET_M
        ):
            # (beyond it a stroke planned to start APPROACH short of the object, 2 cm,
            # starts on it)
            shown = ', '.join(f'{v * 1e3:g}' for v in offset)
            raise SlideInputError(
                f'the pose offset must be x and y, finite, at most {MAX_OFFSET_M * 1e3:g} mm '
                f'long, got ({shown}) mm'
            )
        object.__setattr__(self, 'offset_m', offset)  # (a list given compares as a tuple)

    @classmethod
    def of(
        cls,
        hz: float,
        noise_mm: float,
        noise_deg: float,
        offset_mm: tuple[float, float] = (0.0, 0.0),
    ) -> Tracking:
        """From the command line's units: poses a second, noise in mm and degrees, the
        offset in mm."""
        offset = (float(offset_mm[0]) * 1e-3, float(offset_mm[1]) * 1e-3)
        return cls(hz, noise_mm * 1e-3, math.radians(noise_deg), offset)

    def figures(self) -> dict[str, float]:
        """Rate, noise and offset in the command line's units, for a result to say:
        ``hz``, ``noise_mm``, ``noise_deg``, and ``offset_x_mm``, ``offset_y_mm`` when there
        is one."""
        out = {
            'hz': self.hz,
            'noise_mm': self.sigma_m * 1e3,
            'noise_deg': math.degrees(self.sigma_rad),
        }
        if self.offset_m != (0.0, 0.0):
            out['offset_x_mm'], out['offset_y_mm'] = (v * 1e3 for v in self.offset_m)
        return out

    @property
    def perfect(self) -> bool:
        """The twin's truth at its full rate."""
        return (
            self.hz >= 100.0
            and self.sigma_m == 0.0
            and self.sigma_rad == 0.0
            and self.offset_m == (0.0, 0.0)
        )


TRUTH = Tracking()
"""The twin's true poses at 100 Hz (perfect perception): the default."""
PERCEPTION = Tracking(30.0, 0.15e-3, math.radians(0.05))
"""Poses as perception tracks them (``slide bench perception``: 0.15 mm and 0.05 degrees
median error, 30 Hz)."""


class Tracker:
    """A tracker on its own clock and random stream (seeded: the same seed, the same
    noise), :class:`Tracking`'s rate and noise."""

    def __init__(self, tracking: Tracking = TRUTH, seed: int = 0) -> None:
        self.tracking = tracking
        self.noise = np.random.default_rng([abs(int(seed)), 2])
        self.next_pose = -math.inf

    def noisy(self, X_WO: ArrayLike) -> tuple[float, float, float]:
        """One pose (x, y, yaw) as the tracker measures X_WO, whenever it is asked."""
        tr = self.tracking
        X = np.asarray(X_WO, dtype=float)
        ex, ey, eyaw = self.noise.normal(size=3) * (tr.sigma_m, tr.sigma_m, tr.sigma_rad)
        dx, dy = tr.offset_m
        return float(X[0] + ex + dx), float(X[1] + ey + dy), float(X[2] + eyaw)

    def measured(self, X_WO: ArrayLike, t: float) -> tuple[float, float, float] | None:
        """The tracker's pose (x, y, yaw) of X_WO at time t [s], or None when it has none
        then (between its frames)."""
        if t + 1e-9 < self.next_pose:
            return None
        period = 1.0 / self.tracking.hz
        # On the tracker's clock; after a pause between pushes, from now.
        self.next_pose = self.next_pose + period if t - self.next_pose < period else t + period
        return self.noisy(X_WO)
