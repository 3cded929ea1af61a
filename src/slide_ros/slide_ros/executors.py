"""rclpy's executors, going on past a message rclpy itself cannot take.

On a loaded machine rclpy's ``take_message`` once raised ``RuntimeError: Unable to convert
call argument '0' to Python object`` inside the executor (perception, in CI). Raised there,
it ends the spin; caught around the spin, it is worse: rclpy's handler had marked the
subscription as taken and begun its callback group, and neither is undone, so the
subscription and every callback of its group (a node's timers and services, in the default
group) never run again. Here the failed take is a skipped message, said in the log: the
handler then ends normally and the next message is taken. Any other error is raised as
before; a node's own callbacks are not touched.
"""

from __future__ import annotations

from typing import Any

from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
import rclpy.logging

_LOG = rclpy.logging.get_logger('slide_ros.executors')


class _SkipsUntakeable:
    """Mixin over an rclpy executor: a subscription's failed take is one lost message."""

    lost = 0
    """Messages that could not be taken so far."""

    def _take_subscription(self, sub: Any) -> Any:
        try:
            return super()._take_subscription(sub)  # type: ignore[misc]
        except RuntimeError as exc:
            if not self.context.ok():  # type: ignore[attr-defined]
                raise  # shutting down: not a lost message
            self.lost += 1
            _LOG.warning(
                f'a message on {sub.topic_name} could not be taken ({self.lost} so far): {exc}',
                throttle_duration_sec=5.0,
            )
            return None


class TolerantMultiThreadedExecutor(_SkipsUntakeable, MultiThreadedExecutor):
    """rclpy's MultiThreadedExecutor, skipping a message it cannot take (module docstring)."""


class TolerantSingleThreadedExecutor(_SkipsUntakeable, SingleThreadedExecutor):
    """rclpy's SingleThreadedExecutor, skipping a message it cannot take (module docstring)."""
