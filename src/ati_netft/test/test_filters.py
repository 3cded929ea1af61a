"""The driver's wrench filters: the limit monitor fails safe, orientations are rotations."""

from __future__ import annotations

import math

from ati_netft.filters import LimitMonitor, quaternion_matrix
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
