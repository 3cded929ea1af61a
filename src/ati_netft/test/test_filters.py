"""The driver's wrench filters: the limit monitor fails safe, orientations are rotations; a
sensor's rate is read through a loaded machine's late records."""

from __future__ import annotations

import math

from ati_netft.filters import LimitMonitor, RateMeter, quaternion_matrix, sampling_rate
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest


def test_a_nan_wrench_is_over_the_limit() -> None:
    # NaN compares false with everything: "force > limit" let a NaN wrench through.
    monitor = LimitMonitor(25.0, 2.0)
    assert monitor.exceeded([math.nan, 0, 0, 0, 0, 0])
    assert monitor.exceeded([0, 0, 0, 0, 0, math.inf])
    assert not monitor.exceeded([3.0, 4.0, 0, 0.1, 0, 0])
    assert monitor.exceeded([30.0, 0, 0, 0, 0, 0])
    assert not LimitMonitor(0.0, 0.0).exceeded([math.nan] * 6)  # 0 disables a limit


def test_an_orientation_is_a_rotation_or_refused() -> None:
    R = quaternion_matrix([0.0, 0.0, math.sin(0.25), math.cos(0.25)])
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(quaternion_matrix([0, 0, 0, 2.0]), np.eye(3))
    for bad in ([0.0, 0.0, 0.0, 0.0], [math.nan, 0, 0, 1], [0, 0, 1]):
        with pytest.raises(ValueError, match='non-zero norm'):
            quaternion_matrix(bad)


def late_records(
    rate: float, seconds: float, stalls: list[tuple[float, float]], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sequence numbers and arrival times [s] of a sensor's records at ``rate`` over
    ``seconds``: each late by a little jitter, and those sampled in a stall of the reader
    (start, end [s]) all at its end; 5% lost (sequence gaps)."""
    rng = np.random.default_rng(seed)
    n = np.arange(int(seconds * rate) + 1)
    n = n[rng.random(len(n)) > 0.05]
    sampled = n / rate
    arrival = sampled + rng.exponential(2e-4, len(n))
    for start, end in stalls:
        held = (sampled >= start) & (sampled < end)
        arrival[held] = np.maximum(arrival[held], end)
    return n, np.maximum.accumulate(arrival)  # one reader: in order


RATES = st.sampled_from([100.0, 500.0, 1000.0, 2000.0, 7000.0])


@settings(max_examples=200, deadline=None)
@given(
    rate=RATES,
    stalls=st.lists(st.tuples(st.floats(0.03, 0.45), st.floats(0.0, 0.3)), max_size=4),
    seed=st.integers(0, 2**31),
)
def test_the_rate_is_read_through_records_made_late_in_bursts(
    rate: float, stalls: list[tuple[float, float]], seed: int
) -> None:
    # A loaded machine held the reader back: records came in bursts up to 0.3 s late, and
    # the first and last one's times misread the rate. Here the stalls leave records that
    # came on time in the window's first and last quarter (its first 30 and last 50 ms).
    spans = [(a, min(a + length, 0.45)) for a, length in stalls]
    n, arrival = late_records(rate, 0.5, spans, seed)
    assert sampling_rate(n, arrival) == pytest.approx(rate, rel=0.01)


@settings(max_examples=100, deadline=None)
@given(
    rate=RATES,
    stall=st.tuples(st.floats(0.0, 0.2), st.floats(0.0, 0.4)),
    seed=st.integers(0, 2**31),
)
def test_a_rate_meter_waits_out_a_stall_however_long(
    rate: float, stall: tuple[float, float], seed: int
) -> None:
    # A stall of 0.25 s from the stream's start left no record on time in the first
    # quarter of the window: one window alone read a 100 Hz sensor as 173 Hz.
    n, arrival = late_records(rate, 3.0, [(stall[0], stall[0] + stall[1])], seed)
    meter = RateMeter(0.5)
    rates = [r for s, t in zip(n, arrival, strict=True) if (r := meter.add(int(s), t))]
    assert rates, 'no rate in 3 s'
    assert rates[0] == pytest.approx(rate, rel=0.01)


def test_a_rate_meter_starts_again_when_the_sequence_does() -> None:
    meter = RateMeter(0.5)
    n, arrival = late_records(1000.0, 0.8, [], 1)
    assert not [s for s, t in zip(n, arrival, strict=True) if meter.add(int(s), t)]
    assert meter.windows == 1
    # The sensor rebooted at 2 kHz: its first window does not count with the old one's.
    n, arrival = late_records(2000.0, 3.0, [], 2)
    rates = [r for s, t in zip(n, arrival + 1.0, strict=True) if (r := meter.add(int(s), t))]
    assert rates[0] == pytest.approx(2000.0, rel=0.01)


def test_a_rate_needs_records_that_move_on() -> None:
    for n, t in (([5], [0.1]), ([1, 1], [0.0, 0.1]), ([1, 2], [0.1, 0.1])):
        with pytest.raises(ValueError, match='two or more records'):
            sampling_rate(n, t)
