"""rclpy's executors, going on past a message rclpy itself cannot take, and (the
multi-threaded one) not spinning on work it has already handed to its threads.

On a loaded machine rclpy's ``take_message`` once raised ``RuntimeError: Unable to convert
call argument '0' to Python object`` inside the executor (perception, in CI). Raised there,
it ends the spin; caught around the spin, it is worse: rclpy's handler had marked the
subscription as taken and begun its callback group, and neither is undone, so the
subscription and every callback of its group (a node's timers and services, in the default
group) never run again. Here the failed take is a skipped message, said in the log: the
handler then ends normally and the next message is taken. Any other error is raised as
before; a node's own callbacks are not touched.

rclpy 7.1's MultiThreadedExecutor (Jazzy's, as pinned) hands each ready callback to its
thread pool as a task and keeps it among the tasks in progress; until a pool thread starts
it, every turn of the spin finds it again, without waiting, and queues it once more
(ros2/rclpy#1452, fixed upstream by ros2/rclpy#1547). The spinning thread then holds the
GIL, which keeps the pool's threads from starting the task: measured in one process with
the twin, a test peer's spin queued each pose message's callback about 700 times, took 71%
of a core, and slowed the twin's physics to a tenth to a fifth of real time (a path of 8 s
took 25 to 45 s, and the test waiting for it timed out). Here a task waiting in the pool
is queued once; while it waits, the spin sleeps a moment instead of queueing it again.

Its ``shutdown`` destroys the executor's guard condition without waiting for the pool
(rclpy 7.1 tests the shut-down flag it has just set before waiting), so work that was in
the pool ran on after it. A callback that then started failed on the destroyed guard
condition (``InvalidHandle: cannot use Destroyable``), and a goal that then ended failed
to schedule its result's callback (``create_task``: ``'NoneType' object has no attribute
'trigger'``). Both errors stayed in their tasks, and each test run that stopped a node in
the middle of its work printed ``The following exception was never retrieved`` at exit.
Here a task made after shutdown is never run, as none is, and an error of a callback that
ran after shutdown is taken from its task and logged.
"""

from __future__ import annotations

from collections.abc import Callable
import threading
import time
from typing import Any

from rclpy.exceptions import InvalidHandle
from rclpy.executors import (
    ConditionReachedException,
    ExternalShutdownException,
    MultiThreadedExecutor,
    ShutdownException,
    SingleThreadedExecutor,
    TimeoutException,
)
import rclpy.logging
from rclpy.task import Task

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


QUEUED_WAIT_S = 0.0005
"""How long [s] the spin sleeps when the work it found is a task already waiting in the
pool (the sleep lets a pool thread take the GIL and start it)."""


class QueuesOnceExecutor(MultiThreadedExecutor):
    """rclpy's MultiThreadedExecutor, handing a task to its pool once (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queued: set[int] = set()  # ids of the tasks in the pool not yet started
        self._queued_lock = threading.Lock()

    def _spin_once_impl(
        self, timeout_sec: Any = None, wait_condition: Callable[[], bool] = lambda: False
    ) -> None:
        try:
            handler, _entity, _node = self.wait_for_ready_callbacks(
                timeout_sec, None, wait_condition
            )
        except (
            ExternalShutdownException,
            ShutdownException,
            TimeoutException,
            ConditionReachedException,
        ):
            return
        key = id(handler)
        with self._queued_lock:
            queued = key in self._queued
            self._queued.add(key)
        if queued:
            time.sleep(QUEUED_WAIT_S)
            return

        def run() -> None:
            # (Taken off once it has run: while it runs rclpy does not find it again; a
            # coroutine's task that then awaits something is found again and queued anew.)
            try:
                handler()
            finally:
                with self._queued_lock:
                    self._queued.discard(key)
            if self._is_shutdown and handler.done():
                self._after_shutdown(handler)

        self._executor.submit(run)
        self._futures.append(handler)
        for future in self._futures[:]:
            if future.done():
                self._futures.remove(future)
                future.result()  # raise what a callback raised, as rclpy's does

    def create_task(self, callback: Any, *args: Any, **kwargs: Any) -> Task:
        """rclpy's ``create_task``; after shutdown, a task that is never run (rclpy's
        raised AttributeError on the guard condition it had destroyed)."""
        with self._shutdown_lock:
            if self._guard is None:
                return Task(callback, args, kwargs, executor=self)
            return super().create_task(callback, *args, **kwargs)

    @staticmethod
    def _after_shutdown(task: Task) -> None:
        """Take the error of a task that ran after shutdown, if it failed, and log it: no
        spin is left to raise it (module docstring)."""
        error = task.exception()
        if isinstance(error, InvalidHandle):  # the executor's or the node's, destroyed
            _LOG.debug(f'a callback ran after shutdown and found {error}')
        elif error is not None:
            _LOG.warning(f'a callback that ran after shutdown failed: {error!r}')


class TolerantMultiThreadedExecutor(_SkipsUntakeable, QueuesOnceExecutor):
    """rclpy's MultiThreadedExecutor, skipping a message it cannot take and handing a task
    to its pool once (module docstring)."""


class TolerantSingleThreadedExecutor(_SkipsUntakeable, SingleThreadedExecutor):
    """rclpy's SingleThreadedExecutor, skipping a message it cannot take (module docstring)."""
