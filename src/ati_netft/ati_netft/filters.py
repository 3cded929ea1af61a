"""Wrench processing: low-pass filter, tool gravity compensation, force/torque limits; the
rate a sensor samples at, from its records' sequence numbers and arrival times."""

from __future__ import annotations

from collections.abc import Sequence
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

GRAVITY_W = np.array([0.0, 0.0, -9.80665])


class LowPass:
    """First-order low-pass filter (exponential smoothing) with a cut-off in Hz."""

    def __init__(self, cutoff_hz: float, rate_hz: float) -> None:
        if not (cutoff_hz > 0 and rate_hz > 0):
            raise ValueError(f'cutoff and rate must be positive, got {cutoff_hz}, {rate_hz}')
        dt = 1.0 / rate_hz
        rc = 1.0 / (2.0 * math.pi * cutoff_hz)
        self.alpha = dt / (rc + dt)
        self.state: NDArray[np.float64] | None = None

    def __call__(self, wrench: ArrayLike) -> NDArray[np.float64]:
        w = np.asarray(wrench, dtype=float)
        self.state = w.copy() if self.state is None else self.state + self.alpha * (w - self.state)
        return self.state.copy()


def quaternion_matrix(q_xyzw: ArrayLike) -> NDArray[np.float64]:
    """Rotation matrix of a quaternion (x, y, z, w), normalised; ValueError for one of
    (near) zero or non-finite norm, which is no rotation."""
    q = np.asarray(q_xyzw, dtype=float)
    norm = float(np.linalg.norm(q))
    if q.shape != (4,) or not (np.isfinite(norm) and norm > 1e-6):
        raise ValueError(f'a rotation quaternion x y z w has a non-zero norm, got {q.tolist()}')
    x, y, z, w = q / norm
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


class GravityCompensation:
    """Removes the weight of the tool mounted on the sensor.

    Args:
        mass_kg: tool mass.
        p_SC: (3,) tool centre of mass in the sensor frame [m].
    """

    def __init__(self, mass_kg: float, p_SC: ArrayLike) -> None:
        if mass_kg < 0:
            raise ValueError(f'tool mass must be >= 0 kg, got {mass_kg}')
        self.mass = float(mass_kg)
        self.p_SC = np.asarray(p_SC, dtype=float).reshape(3)

    def tool_wrench(self, R_WS: NDArray[np.float64]) -> NDArray[np.float64]:
        """The wrench the tool's weight puts on the sensor, in the sensor frame."""
        f_S = R_WS.T @ (self.mass * GRAVITY_W)
        return np.concatenate((f_S, np.cross(self.p_SC, f_S)))

    def __call__(self, wrench: ArrayLike, R_WS: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(wrench, dtype=float) - self.tool_wrench(R_WS)


FORCE_LIMIT_MAX_N = 10000.0
"""The largest force limit the driver takes [N] (its ``force_limit_n`` parameter)."""


class LimitMonitor:
    """Flags wrenches whose force or torque magnitude exceeds a limit (0 disables one).

    Plain Python on the six numbers: the driver asks it about every record, up to 7 kHz,
    where building an array per record would cost more than the test."""

    def __init__(self, max_force_n: float, max_torque_nm: float) -> None:
        if not (max_force_n >= 0 and max_torque_nm >= 0):
            raise ValueError('force and torque limits must be >= 0 (0 disables)')
        self.max_force = float(max_force_n)
        self.max_torque = float(max_torque_nm)

    @property
    def active(self) -> bool:
        return self.max_force > 0 or self.max_torque > 0

    def exceeded(self, wrench: Sequence[float]) -> bool:
        """Whether ``wrench`` (Fx, Fy, Fz, Tx, Ty, Tz) is over either limit; written as
        "not within", so that a NaN wrench is over it."""
        f, t = self.max_force, self.max_torque
        w0, w1, w2, w3, w4, w5 = wrench
        return (f > 0 and not w0 * w0 + w1 * w1 + w2 * w2 <= f * f) or (
            t > 0 and not w3 * w3 + w4 * w4 + w5 * w5 <= t * t
        )


def sampling_rate(sequence: ArrayLike, arrival: ArrayLike) -> float:
    """The rate [Hz] a sensor sampled its records at, from their sequence numbers (counts
    of its samples, ascending; unwrapped) and their arrival times [s] (N >= 2 each).

    The network and the reader only ever make a record late, never early, and a loaded
    machine makes them late by up to hundreds of milliseconds, in bursts: the first and
    the last record's times then misread the rate by that share of the window. The
    least-late records lie on the line of the sensor's clock: the rate is the slope
    between the least-late record of the window's first quarter and of its last, each
    found against the slope before (twice, from the end points'). Right wherever each of
    those quarters holds a record that came on time (a burst's last one does);
    :class:`RateMeter` checks that it did."""
    n = np.asarray(sequence, dtype=float)
    t = np.asarray(arrival, dtype=float)
    if n.shape != t.shape or n.ndim != 1 or len(n) < 2 or not n[-1] > n[0] or not t[-1] > t[0]:
        raise ValueError('need two or more records, later ones with higher sequence numbers')
    period = (t[-1] - t[0]) / (n[-1] - n[0])
    q = max(1, len(n) // 4)
    for _ in range(2):
        late = t - n * period
        i = int(np.argmin(late[:q]))
        j = len(n) - q + int(np.argmin(late[-q:]))
        if not (n[j] > n[i] and t[j] > t[i]):
            break
        period = (t[j] - t[i]) / (n[j] - n[i])
    return float(1.0 / period)


class RateMeter:
    """Measures a stream's sampling rate: :func:`sampling_rate` over successive windows of
    ``window_s`` seconds of arrivals, until two in a row agree within ``agree`` (a share).
    A window that began or ended in a stall of the reader longer than a quarter of it
    misreads the rate; the next one, without, then does not agree with it."""

    def __init__(self, window_s: float, agree: float = 0.01) -> None:
        self.window_s, self.agree = window_s, agree
        self._records: list[tuple[int, float]] = []
        self._last: float | None = None  # the last window's rate
        self.windows = 0  # windows measured so far

    def add(self, sequence: int, arrival: float) -> float | None:
        """Account for one record (sequence number, arrival [s]); the rate [Hz] once two
        windows agree (their mean), else None. A sequence that does not move on (the
        sensor restarted it) starts the measurement again."""
        records = self._records
        if records and sequence <= records[-1][0]:
            records.clear()
            self._last = None
        records.append((sequence, arrival))
        if arrival - records[0][1] < self.window_s:
            return None
        rate = sampling_rate([r[0] for r in records], [r[1] for r in records])
        self.windows += 1
        self._records = [records[-1]]  # the next window starts where this one ended
        last, self._last = self._last, rate
        if last is not None and abs(rate - last) <= self.agree * max(rate, last):
            return (rate + last) / 2
        return None
