"""An rclpy ActionClient that is safe to call from one thread while an executor spins it in
another, and a goal's result that is asked for again when DDS lost it (:class:`GoalResult`).

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
import time
from typing import Any

from action_msgs.msg import GoalStatus
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


RESULT_AGAIN_S = 1.0
"""How long [s] a goal's result may stay away after its server reported the goal ended
before :class:`GoalResult` asks for it again (and again each time as long)."""


class GoalResult:
    """A goal's result, asked for again while it does not come though the goal ended.

    rclpy asks once, at once on the goal's acceptance. Fast DDS loses a request sent before
    its writer matched the server's reader, and a response whose reader the server has not
    yet matched (ros2/rmw_fastrtps#842); the goal and result services are matched apart, so
    a goal's acceptance can come through and its result not, and the caller then waits out
    its whole timeout on a goal that ended (the goals' acceptances and the lifecycle
    services' answers were lost so on loaded machines, and are sent again for it too:
    :func:`slide_ros.lifecycle.handshake`, :func:`slide_ros.lifecycle.call_idempotent`).
    The server keeps a goal's result after it ends (rclpy's ``result_timeout``, 15 min)
    and answers every request for it, so asking again is safe. The goal's status comes on
    a latched topic (its last state reaches a late subscriber): once it says the goal
    ended and :data:`RESULT_AGAIN_S` has passed, :meth:`done` asks again.

    Quacks as the rclpy Future it stands for: :meth:`done` and :meth:`result` (a
    ``GetResult.Response``, with ``status`` and ``result``); ``done()`` must be polled (as
    :func:`slide_ros.lifecycle.wait_for` does) for a lost result to be asked for again.
    """

    ENDED = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)

    def __init__(self, handle: Any, again_s: float = RESULT_AGAIN_S) -> None:
        self._handle, self._again_s = handle, again_s
        self._futures = [handle.get_result_async()]
        self._ended_at: float | None = None  # when the status first said ended [monotonic s]
        self.asked = 1
        """How many result requests were sent."""

    def done(self) -> bool:
        if any(future.done() for future in self._futures):
            return True
        if self._handle.status in self.ENDED:
            now = time.monotonic()
            if self._ended_at is None:
                self._ended_at = now
            elif now - self._ended_at >= self._again_s:
                self._ended_at = now
                self._futures.append(self._handle.get_result_async())
                self.asked += 1
        return False

    def result(self) -> Any:
        for future in self._futures:
            if future.done():
                return future.result()
        raise RuntimeError('the goal result has not come yet: wait until done() says so')
