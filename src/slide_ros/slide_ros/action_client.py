"""An rclpy ActionClient that is safe to call from one thread while an executor spins it in
another.

rclpy 7.1 (Jazzy's, as pinned) sends a goal, cancel or result request and only then records
its sequence number; a multi-threaded executor can take the server's response in between,
log "Ignoring unexpected goal response. There may be more than one action server" and leave
the caller's future pending for ever (ros2/rclpy#1123; fixed upstream by holding one lock
across both, ros2/rclpy#1308). The behaviour's task sends goals from a worker thread while
its executor spins: in the graph a planning step waited out its 10 s acceptance timeout on a
loaded machine. This subclass holds one lock across each request and the taking of
responses, as the upstream fix does.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient


class SafeActionClient(ActionClient):
    """:class:`rclpy.action.ActionClient` with requests and responses serialised."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_lock = threading.RLock()

    def take_data(self) -> Any:
        with self._request_lock:
            return super().take_data()

    def send_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle: Any) -> Any:
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle: Any) -> Any:
        with self._request_lock:
            return super()._get_result_async(goal_handle)
