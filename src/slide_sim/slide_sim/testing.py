"""For tests: the twin node's parameters in a test's own process, and a disk that fills
while the twin records."""

from __future__ import annotations

from collections.abc import Callable
import errno
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rclpy.parameter import Parameter


def disk_full_at(flush: int) -> Callable[[Any], bool]:
    """A stand-in for :func:`slide_core.io.bagfile.flush_chunk` (patch it into
    ``slide_sim.record.bagfile``) whose ``flush``-th call finds the disk full (ENOSPC);
    the calls before it flush as the real one does."""
    from slide_core.io import bagfile

    real = bagfile.flush_chunk
    calls: list[int] = []

    def filling(writer: Any) -> bool:
        calls.append(1)
        if len(calls) == flush:
            raise OSError(errno.ENOSPC, 'No space left on device')
        return real(writer)

    return filling


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
    from rclpy.parameter import Parameter

    return [Parameter(k, value=v) for k, v in params.items()]
