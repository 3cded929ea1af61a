"""Lifecycle nodes that bring themselves up, and the plumbing every slide node shares.

*configure* connects what the node needs (hardware, other nodes) and may fail with a
reason; *activate* starts serving. A failed transition logs one line (no traceback: a
warning while autostart will try it again, else an error) and can be tried again over
``~/change_state``. With ``autostart`` (default true) the node configures and activates
itself, so the pip-only runner and tests need no lifecycle manager; on the robot a
lifecycle manager can drive it instead (``autostart:=false``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import faulthandler
import math
import signal
import sys
import threading
import time
import traceback
from typing import Any

import rclpy
from rclpy.action import GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future

from slide_core.errors import SlideError, SlideInputError
from slide_interfaces.msg import ErrorCode
from slide_ros.action_client import GoalResult
from slide_ros.executors import TolerantMultiThreadedExecutor, TolerantSingleThreadedExecutor
from slide_ros.params import Param, ParameterError

LIFECYCLE_PARAMS = (
    Param('autostart', True, 'configure and activate at start-up'),
    Param('configure_retries', 10, 'start-up retries (-1: for ever)', low=-1, high=1000),
    Param('retry_backoff_s', 1.0, 'first wait between retries [s], doubling', low=0.05, high=30.0),
    Param('retry_backoff_max_s', 30.0, 'longest wait between retries [s]', low=0.05, high=300.0),
)


STEADY = Clock(clock_type=ClockType.STEADY_TIME)
"""The clock of the timers that bring a node up: with ``use_sim_time`` a timer on the node's
clock waits for ``/clock`` (a recorder started before a replay recorded nothing until it
ticked, and said nothing)."""


class NotReady(Exception):  # noqa: N818 - a state of the node, reported as NOT_READY
    """The node cannot configure yet (what it needs is missing); the message says what."""


class SideNode:
    """A plain node beside ``owner`` (its context and namespace, named ``name``), spun by a
    single-threaded executor in a thread of its own, for a node's high-rate subscriptions.
    rclpy's MultiThreadedExecutor busy-waited while a taken message's callback had not
    begun: measured here on a 250 Hz stream from another process, in 9 of 15 runs it took
    3 to 32 messages a second at 63 to 118% of a core (2, 3 or 4 threads; the other 6: 113
    to 213 at 8 to 15%), where a single-threaded one took what was sent at 3 to 7%; the
    executor node, fed the F/T stream so, used 61% of a core and fell up to 3.7 s behind
    the driver. That was rclpy queueing the callback again and again (ros2/rclpy#1452),
    which the executor :func:`run` spins nodes with no longer does
    (:class:`slide_ros.executors.QueuesOnceExecutor`: 250 messages a second at 8%); a
    side node still keeps a high-rate stream off the threads of the node's other work.
    Destroy it with :meth:`destroy` before the owner."""

    def __init__(self, owner: Node, name: str) -> None:
        # (use_global_arguments off: a runner's '__node:=NAME' renamed it too)
        self.node = rclpy.create_node(
            name,
            context=owner.context,
            namespace=owner.get_namespace(),
            start_parameter_services=False,
            use_global_arguments=False,
            parameter_overrides=[],
        )
        self._executor = TolerantSingleThreadedExecutor(context=owner.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self.node.context.ok() and not self._stop.is_set():
            try:
                self._executor.spin_once(timeout_sec=0.1)
            except Exception:  # noqa: BLE001 - shutting down under it
                return

    def stop(self) -> None:
        """Stop the thread: no callback of the node runs after this returns (within one
        spin; 2 s at most)."""
        self._stop.set()
        # A daemon thread still inside rcl when the interpreter exits aborts the process.
        self._thread.join(timeout=2.0)

    def destroy(self) -> None:
        """Stop the thread and destroy the node."""
        self.stop()
        self._executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()


class SlideNode(LifecycleNode):
    """A lifecycle node with autostart and retries; subclasses implement :meth:`configure`
    (raise NotReady or SlideError with a reason) and may override :meth:`activate` and
    :meth:`deactivate`."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.active = False
        self.gave_up = False
        self.exit_code: int | None = None  # set to end the node's run (see run())
        # Set when the process is ending (Ctrl-C, SIGTERM, shutdown): work in flight stops
        # at once; DDS may already be gone, so nothing more is sent.
        self.stopping = threading.Event()
        self._retries_left = 0
        self._backoff = 1.0
        self._backoff_max = 30.0
        self._retry_timer: Any = None
        self._bad_input = False  # the last configure failed on something a retry cannot fix
        self._autostarting = False  # the configure running is autostart's, not a manager's
        service = getattr(self, '_service_change_state', None)
        if service is not None:
            service.callback = self._refusing_unavailable(service.callback)

    @property
    def lifecycle_state(self) -> str:
        """The lifecycle state's label: unconfigured, inactive, active, finalized (or a
        transition's, while one runs)."""
        return str(self._state_machine.current_state[1])

    def _refusing_unavailable(self, served: Callable[[Any, Any], Any]) -> Callable[..., Any]:
        """``~/change_state``'s callback, answering success false to a transition the
        current state does not have. rclpy's raised RCLError for one asked by its id (a
        manager's configure of an active node), and the node's process died of it."""

        def change_state(request: Any, response: Any) -> Any:
            wanted = request.transition
            available = self._state_machine.available_transitions
            if not wanted.label and all(t[0] != wanted.id for t in available):
                self.get_logger().warning(
                    f'lifecycle transition {wanted.id} refused: there is none such from '
                    f'{self.lifecycle_state} (available: '
                    f'{", ".join(str(t[1]) for t in available) or "none"})'
                )
                response.success = False
                return response
            return served(request, response)

        return change_state

    def start_up(self, values: dict[str, Any]) -> None:
        """Begin the autostart (call at the end of the subclass's constructor)."""
        self._retries_left = int(values['configure_retries'])
        self._backoff = float(values['retry_backoff_s'])
        self._backoff_max = float(values['retry_backoff_max_s'])
        if values['autostart']:
            self._retry_timer = self.create_timer(0.01, self._autostart, clock=STEADY)

    def _autostart(self) -> None:
        self._retry_timer.cancel()
        self.destroy_timer(self._retry_timer)
        # A lifecycle manager may have moved the node on while a retry waited: configuring
        # it again raised out of this timer, and the node's process died.
        state = self.lifecycle_state
        if state == 'inactive':
            self.trigger_activate()
            return
        if state != 'unconfigured':
            return  # active, finalized: there is nothing left to start
        self._autostarting = True
        try:
            configured = self.trigger_configure() == TransitionCallbackReturn.SUCCESS
        finally:
            self._autostarting = False
        if configured:
            self.trigger_activate()
            return
        if self._bad_input:
            self.get_logger().error('start-up failed on bad input: not retried')
            self.exit_code = 2
            return
        if self._retries_left == 0:
            self.gave_up = True
            self.get_logger().error('start-up failed and no retry is left')
            return
        self._retries_left -= 1
        self.get_logger().info(f'retrying start-up in {self._backoff:.2f} s')
        self._retry_timer = self.create_timer(self._backoff, self._autostart, clock=STEADY)
        self._backoff = min(self._backoff_max, 2 * self._backoff)

    # -- to implement ---------------------------------------------------------------------
    def idle(self) -> bool:
        """No goal is being executed (run() waits for this, briefly, before exiting)."""
        return True

    def configure(self) -> None:
        """Connect what the node needs; raise NotReady (or SlideError) saying what failed."""

    def activate(self) -> None:
        """Start serving."""

    def deactivate(self) -> None:
        """Stop serving (goals in flight are cancelled by the subclass)."""

    # -- lifecycle --------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Configure; any failure is one logged line (rclpy turned an exception it was not
        given into ERROR and logged nothing, and autostart retried it without a reason).
        Bad input (a SlideInputError, a bad parameter, a backend that is not installed) is
        not retried by autostart: the same input fails the same way.

        What a node waits for at start-up (another node not up yet, hardware not yet
        reachable) is a warning while autostart will try again; an error when it will not
        (no retry left, or a manager's configure). Logged as errors, every normal start of
        the graph wrote some, and an operator learns to read past them."""
        self._bad_input = False
        try:
            self.configure()
        except (NotReady, SlideError, OSError, TimeoutError) as exc:
            self._bad_input = isinstance(exc, SlideInputError)
            # (two call sites: rclpy refuses to log from one site at another severity)
            if self._autostarting and self._retries_left != 0 and not self._bad_input:
                self.get_logger().warning(f'configure failed: {exc}')
            else:
                self.get_logger().error(f'configure failed: {exc}')
            return TransitionCallbackReturn.FAILURE
        except (ParameterError, ImportError) as exc:
            self._bad_input = True
            self.get_logger().error(f'configure failed: {exc}')
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:  # noqa: BLE001 - said in one line, and a retry may help
            self.get_logger().error(f'configure failed: {type(exc).__name__}: {exc}')
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.activate()
        self.active = True
        self.get_logger().info('active')
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self.deactivate()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self.deactivate()
        return TransitionCallbackReturn.SUCCESS


class GoalSlot:
    """One goal at a time for a node's action servers: the slot is taken when a goal is
    accepted (a second one is refused at once) and given back when its execution ends.
    Taken only in the execute callback, a push and a grasp sent together were both
    accepted (15 of 15 tries), and the grasp ran after the push had moved the object."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def accept(self, _goal: Any) -> GoalResponse:
        """The servers' goal callback."""
        return GoalResponse.ACCEPT if self._lock.acquire(blocking=False) else GoalResponse.REJECT

    def release(self) -> None:
        """The goal's execution ended (call in its ``finally``)."""
        self._lock.release()

    def free(self) -> bool:
        return not self._lock.locked()


def end_stopped(handle: Any) -> None:
    """End a goal that stopped because its client cancelled it or because the node is
    shutting down: CANCELED in the first case, ABORTED in the second. rclpy allows
    ``canceled()`` only after a cancel request; called during shutdown it raised, and the
    goal ended aborted with an empty result (error code 0, read as success)."""
    if handle.is_cancel_requested:
        handle.canceled()
    else:
        handle.abort()


class GoalFailed(Exception):  # noqa: N818 - carries an error code for the result
    """Ends a goal served by :func:`answer_goal` ABORTED with ``code`` and the message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


ErrorCodes = Sequence[tuple[type[BaseException] | tuple[type[BaseException], ...], int]]


def answer_goal(
    node: SlideNode,
    handle: Any,
    result: Any,
    work: Callable[[], None],
    *,
    slot: GoalSlot,
    who: str,
    codes: ErrorCodes = (),
    stopped: type[BaseException] | tuple[type[BaseException], ...] = (),
) -> Any:
    """Serve one action goal of ``node`` and return its ``result``, whatever happens: a
    failure is an error code and a reason, never a traceback or an empty result (code 0,
    read as success).

    - The node not active: NOT_READY, 'not active', and ``work`` is not run.
    - ``work()`` fills ``result``; when it returns, SUCCESS.
    - ``stopped`` (raised by ``work`` when it noticed a cancel, a deactivation or the
      process ending): CANCELED when the client asked, else NOT_READY, 'the ``who`` is
      deactivated' (or shutting down), the exception's text before it.
    - :class:`GoalFailed`: its code and text.
    - ``codes``: (exception type(s), code) pairs, the first that matches: that code and the
      exception's text.
    - Any other exception: INTERNAL with its type and text, the traceback logged.

    ``slot``, taken when the goal was accepted, is given back when it ends.
    """

    def finish(code: int, message: str) -> Any:
        result.error.code, result.message = code, message
        handle.abort()
        return result

    try:
        if not node.active:
            return finish(ErrorCode.NOT_READY, 'not active')
        try:
            work()
        except stopped as exc:
            asked = handle.is_cancel_requested  # (read first: after canceled() it is False)
            end_stopped(handle)
            text = str(exc)
            if asked:
                result.error.code, result.message = ErrorCode.CANCELED, text or 'cancelled'
            else:  # (a deactivation read as the client's own cancel)
                why = 'shutting down' if node.stopping.is_set() else 'deactivated'
                result.error.code = ErrorCode.NOT_READY
                result.message = f'{text}: ' * bool(text) + f'the {who} is {why}'
            return result
        except GoalFailed as exc:
            return finish(exc.code, str(exc))
        except Exception as exc:  # noqa: BLE001 - mapped below; a fault answers with its reason
            for types, code in codes:
                if isinstance(exc, types):
                    return finish(code, str(exc))
            node.get_logger().error(f'{who}: {traceback.format_exc()}')
            return finish(ErrorCode.INTERNAL, f'{type(exc).__name__}: {exc}')
        result.error.code = ErrorCode.SUCCESS
        handle.succeed()
        return result
    finally:
        slot.release()


def remote_state(node: Any, name: str, timeout_s: float = 1.0) -> str | None:
    """The lifecycle state label ('unconfigured', 'inactive', 'active', ...) of node
    ``name`` (its ``get_state`` service), or None when it does not answer."""
    from lifecycle_msgs.srv import GetState

    clients = getattr(node, '_state_clients', None)
    if clients is None:
        clients = {}
        node._state_clients = clients
    if name not in clients:
        # A group of its own: the caller (a configure step) holds the default group while it
        # waits, and the response must still be processed.
        clients[name] = node.create_client(
            GetState, f'{name}/get_state', callback_group=ReentrantCallbackGroup()
        )
    client = clients[name]
    if not client.wait_for_service(timeout_sec=timeout_s):
        return None
    try:
        result = call_idempotent(client, GetState.Request(), timeout_s)
    except TimeoutError:
        return None
    return str(result.current_state.label) if result is not None else None


RESEND_S = 0.5
"""How long [s] :func:`call_idempotent` waits for an answer before it sends the request
again: Fast DDS's server waits 100 ms for the client's response reader, then drops the
answer; a second request after the reader has been matched is answered."""


def call_idempotent(
    client: Any,
    request: Any,
    timeout_s: float,
    should_stop: Callable[[], bool] = lambda: False,
    resend_s: float = RESEND_S,
) -> Any:
    """The answer to ``request`` from the service behind ``client``, sent again every
    ``resend_s`` until an answer comes (waiting without spinning: another thread spins the
    node); TimeoutError after ``timeout_s``, None when ``should_stop`` said so first.

    A service's answer is lost when its server has not yet matched the client's response
    reader, though ``service_is_ready`` said true (ros2/rmw_fastrtps#842, open for Jazzy): a
    single call then waits for an answer the server sent and DDS dropped. Only for requests
    that may be served twice (a state query, a tare at rest)."""
    return _first_answer(
        lambda: client.call_async(request),
        timeout_s,
        should_stop,
        resend_s,
        client.remove_pending_request,  # the unanswered ones would stay for ever
    )


def _first_answer(
    send: Callable[[], Future],
    timeout_s: float,
    should_stop: Callable[[], bool] = lambda: False,
    resend_s: float = RESEND_S,
    forget: Callable[[Future], Any] | None = None,
) -> Any:
    """The first answer to a request that ``send`` makes, made again every ``resend_s``
    until an answer to any of them comes (waiting without spinning: another thread spins
    the node); TimeoutError after ``timeout_s``, None when ``should_stop`` said so first.
    ``forget`` is given each request's future at the end (to drop those never answered)."""
    end = time.monotonic() + timeout_s
    sent: list[Future] = []
    sent_at = -math.inf
    try:
        while True:
            for future in sent:
                if future.done():
                    return future.result()
            if should_stop():
                return None
            now = time.monotonic()
            if now > end:
                raise TimeoutError(f'no answer within {timeout_s:g} s')
            if now >= sent_at + resend_s:
                sent.append(send())
                sent_at = now
            time.sleep(0.002)
    finally:
        if forget is not None:
            for future in sent:
                forget(future)


HANDSHAKE_RESEND_S = 2.0
"""How long [s] :func:`handshake` waits for a probe's acceptance before it sends another."""


def handshake(
    client: Any,
    probe: Any,
    timeout_s: float,
    should_stop: Callable[[], bool] = lambda: False,
    resend_s: float = HANDSHAKE_RESEND_S,
) -> bool:
    """Send ``probe``, a goal the server behind the action ``client`` refuses as soon as it
    runs (an invalid one), every ``resend_s`` until an acceptance comes back, then wait
    for its end (a server of one goal at a time refuses the next until then; its result
    asked for again while lost, :class:`slide_ros.action_client.GoalResult`) up to
    ``timeout_s`` or ``resend_s``, whichever is later. True once answered; False when
    ``should_stop`` said so first; TimeoutError after ``timeout_s`` without an answer.

    An action server that has not yet matched the client's response reader runs a goal
    but loses its acceptance (rmw: "failed to send response (timeout)"), though
    ``server_is_ready`` said true. A goal that must not run twice (a push) is sent only
    after this: sent before, it ran while its sender waited for an answer that never came.
    Waits without spinning: another thread spins the client's node."""
    end = time.monotonic() + timeout_s
    # (at least one probe is given resend_s: a connect with its deadline past still asks)
    handle = _first_answer(
        lambda: client.send_goal_async(probe), max(timeout_s, resend_s), should_stop, resend_s
    )
    if handle is None:
        return False
    if handle.accepted:  # refused in its execute callback, at once: let it end first
        try:
            wait_for(GoalResult(handle), max(end - time.monotonic(), resend_s), should_stop)
        except TimeoutError:
            pass  # it answered, which is what was asked
    return True


def wait_for(
    future: Future | GoalResult,
    timeout_s: float,
    should_stop: Callable[[], bool] = lambda: False,
) -> Any:
    """The future's result, waiting without spinning (another thread spins the node);
    TimeoutError after ``timeout_s``, None when ``should_stop`` said so first."""
    end = time.monotonic() + timeout_s
    while not future.done():
        if should_stop():
            return None
        if time.monotonic() > end:
            raise TimeoutError(f'no answer within {timeout_s:g} s')
        time.sleep(0.002)
    return future.result()


def run(make: Callable[[], Any], name: str, threads: int = 4) -> int:
    """Run one node until Ctrl-C, SIGTERM, shutdown, or the node sets its ``exit_code``;
    exit code 2 on a bad parameter, 1 when a lifecycle node gave up starting, else the
    node's.

    SIGINT and SIGTERM end the spin and set the node's ``stopping``; the node is then spun
    for up to STOP_GRACE_S while its work in flight stops, so that a goal the shutdown
    stopped reaches its client ABORTED with its result. (rclpy's own handlers shut the
    context down first: the abort could not be sent, and the client waited on a goal
    still executing.) A second signal ends the node at once."""
    rclpy.init(args=sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    signalled = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        if signalled.is_set():
            raise KeyboardInterrupt
        signalled.set()

    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        node = make()
    except (ParameterError, SlideError, OSError, ValueError) as exc:
        print(f'{name}: {exc}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = TolerantMultiThreadedExecutor(num_threads=threads)
    executor.add_node(node)
    code = 0
    try:
        while (
            rclpy.ok()
            and not signalled.is_set()
            and not getattr(node, 'gave_up', False)
            and getattr(node, 'exit_code', None) is None
        ):
            executor.spin_once(timeout_sec=0.2)
        if getattr(node, 'gave_up', False):
            code = 1
        elif getattr(node, 'exit_code', None) is not None:
            code = int(node.exit_code)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # A SIGINT that lands between rclpy's checks shuts the context down under a spin,
        # which then fails to build its wait set: that is the shutdown, not a fault.
        if rclpy.ok():
            raise
    finally:
        # A shutdown that hangs (a thread stuck in a callback, or in DDS) ends in a SIGKILL
        # from whoever started the node; its log then says where every thread was. The
        # watchdog runs on through the interpreter's exit, where it joins those threads.
        faulthandler.dump_traceback_later(STOP_REPORT_S, exit=False)
        # Work in flight (an action's execute callback in the executor's threads, which the
        # interpreter joins at exit) sees ``stopping`` and ends; give it a moment, spun, so
        # that what it answers (an aborted goal's result) is still sent.
        node.stopping.set()
        busy = not node.idle()
        end = time.monotonic() + STOP_GRACE_S
        flushed: float | None = None  # when what work in flight answered has left
        while time.monotonic() < end:
            if node.idle():
                if not busy:
                    break
                # (its answer, just written, leaves before the node's writers are gone)
                flushed = flushed or time.monotonic() + FLUSH_S
                if time.monotonic() >= flushed:
                    break
            try:
                executor.spin_once(timeout_sec=0.02)
            except Exception:  # noqa: BLE001 - the context is gone: wait without spinning
                time.sleep(0.02)
        node.destroy_node()
        rclpy.try_shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return code


STOP_GRACE_S = 3.0
"""How long run() waits for work in flight to stop before the node is destroyed."""

FLUSH_S = 0.2
"""How long run() spins on, at least, once work was in flight when the node was told to
stop (its last answers are sent)."""

STOP_REPORT_S = 4.0
"""How long a node may take to end once run() stops spinning before it writes every
thread's stack to stderr, its log (within the 8 s that ``slide launch`` and the 5 s that
``ros2 launch`` give a node after SIGINT)."""
