"""For tests that run the twin node in their own process."""

from __future__ import annotations

from typing import Any

from rclpy.parameter import Parameter


def twin_parameters(**overrides: Any) -> list[Parameter]:
    """The twin node's parameters for a test in one process: the book at rest at (0.4, 0, 0)
    under the default workcell, a slow, coarse camera (the CPU is the test's), the emulated
    sensor's ports chosen by the system; ``overrides`` replace or add parameters."""
    params: dict[str, Any] = {
        'object': 'book',
        'start_pose': [0.4, 0.0, 0.0],
        'camera_rate_hz': 0.5,
        'camera_decimation': 8,
        'rdt_port': 0,
        'tcp_port': 0,
        'http_port': 0,
        **overrides,
    }
    return [Parameter(k, value=v) for k, v in params.items()]
