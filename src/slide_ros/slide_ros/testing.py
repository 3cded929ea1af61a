"""For tests (and scripts) that talk to running graph nodes: an rclpy node spinning in a
thread and a context of its own, beside the test's code."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import contextlib
import threading
import time
from typing import Any

import rclpy
from rclpy.action import ActionClient
from rclpy.context import Context

from slide_ros.action_client import GoalResult
from slide_ros.executors import TolerantMultiThreadedExecutor
from slide_ros.lifecycle import call_idempotent, handshake


@contextlib.contextmanager
def spinning(make: Callable[[Context], Any], threads: int = 4) -> Iterator[Any]:
    """The node ``make(context)`` builds in a context of its own, spun by a multi-threaded
    executor in a thread for as long as the ``with`` block runs, then destroyed."""
    context = Context()
    rclpy.init(context=context)
    try:
        node = make(context)
    except BaseException:
        context.try_shutdown()
        raise
    executor = TolerantMultiThreadedExecutor(num_threads=threads, context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield node
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
        thread.join(timeout=5.0)


class Peer:
    """An rclpy node spinning in a thread of its own, in a context of its own.

    Its action clients must be :class:`slide_ros.action_client.SafeActionClient`: a goal sent
    from the caller's thread while this one spins can otherwise lose its response
    (ros2/rclpy#1123).
    """

    def __init__(self, name: str) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = TolerantMultiThreadedExecutor(num_threads=3, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - shut down under us, or one callback failed
                if not self.context.ok():
                    return

    def wait(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        end = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > end:
                raise AssertionError(f'timed out after {timeout_s:g} s waiting for {what}')
            time.sleep(0.05)

    def result(self, future: Any, timeout_s: float) -> Any:
        self.wait(future.done, timeout_s, 'a future')
        return future.result()

    def call(self, client: Any, request: Any, timeout_s: float = 10.0) -> Any:
        """The answer to a request that may be served twice (a state query), sent again until
        one comes (:func:`slide_ros.lifecycle.call_idempotent`: DDS loses the answers of a
        client the server has not yet matched)."""
        self.wait(client.service_is_ready, 30.0, client.srv_name)
        return call_idempotent(client, request, timeout_s)

    def change_state(self, client: Any, transition: int, timeout_s: float = 30.0) -> bool:
        """Whether the node behind the ``~/change_state`` ``client`` made ``transition``.

        A transition must not be asked twice, so its answer is made safe from being lost
        first: CREATE, which no created node has, is asked (and refused) until an answer
        comes."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        create = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CREATE))
        assert not self.call(client, create).success
        request = ChangeState.Request(transition=Transition(id=transition))
        return bool(self.result(client.call_async(request), timeout_s).success)

    def handshake(self, client: ActionClient, goal: Any, timeout_s: float = 60.0) -> None:
        """Send ``goal``, one the server ends at once (a goal it refuses as invalid), until
        its answer comes back (:func:`slide_ros.lifecycle.handshake`): the first real goal's
        answer never came on a loaded machine."""
        self.wait(lambda: client.server_is_ready(), timeout_s, 'the action server')
        handshake(client, goal, timeout_s)

    def send(
        self, client: ActionClient, goal: Any, timeout_s: float = 120.0, feedback: Any = None
    ) -> tuple[Any, Any]:
        """Send a goal; (goal handle, result future)."""
        self.wait(lambda: client.server_is_ready(), 60.0, 'the action server')
        handle = self.result(client.send_goal_async(goal, feedback_callback=feedback), 10.0)
        assert handle.accepted
        return handle, GoalResult(handle)

    def close(self) -> None:
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(timeout=2.0)


class LosesFirstAnswers:
    """An action server's handle (``server._handle``, to be replaced by this), losing its
    first ``n`` goal responses as rmw does ("failed to send response (timeout)") while the
    server has not yet discovered the client's response reader: the goal itself still
    runs. Its first ``results`` result responses are lost too (the result service is
    matched apart from the goal service)."""

    def __init__(self, handle: Any, n: int, results: int = 0) -> None:
        self._handle, self.left, self.lost = handle, n, 0
        self.results_left, self.results_lost = results, 0

    def send_result_response(self, header: Any, response: Any) -> None:
        if self.results_left > 0:
            self.results_left -= 1
            self.results_lost += 1
            return
        self._handle.send_result_response(header, response)

    def send_goal_response(self, header: Any, response: Any) -> None:
        if self.left > 0:
            self.left -= 1
            self.lost += 1
            return
        self._handle.send_goal_response(header, response)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)
