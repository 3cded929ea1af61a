"""How the executor moves the arm: a small protocol and its twin implementation.

The executor turns pushes and grasps into tool waypoints (the core's
:func:`slide_core.model.push_waypoints` and :func:`slide_core.planning.grasp_waypoints`)
and hands them to a :class:`Backend`. ``twin``: the twin node's FollowPath and
GripperCommand actions and its tool pose topics. ``moveit_py``: MoveIt on the robot PC
(:mod:`slide_ros.moveit_backend`, imported only when chosen).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import threading
import time
from typing import Any, Protocol

from geometry_msgs.msg import PoseStamped
import numpy as np
from rclpy.node import Node

from slide_core.geometry import FloatArray, quaternion_of_yaw
from slide_core.io import stamp_to_s
from slide_core.model import Waypoint
from slide_interfaces.action import FollowPath, GripperCommand
from slide_interfaces.msg import ErrorCode
from slide_ros.action_client import GoalResult, SafeActionClient
from slide_ros.lifecycle import NotReady, handshake, wait_for


@dataclass(frozen=True)
class ToolPose:
    """A tool's pose: point p_W (3,) [m], orientation (x, y, z, w) in the table frame, and
    its stamp [s]."""

    p_W: FloatArray
    q_W: FloatArray
    stamp: float


@dataclass(frozen=True)
class Motion:
    """How a motion ended: completed, stopped (cancelled) or failed, and why."""

    completed: bool
    stopped: bool = False
    message: str = ''


class Backend(Protocol):
    """The arm and gripper, as the executor needs them."""

    def connect(self, timeout_s: float) -> None:
        """Wait for the arm (raise NotReady saying what is missing)."""

    def follow(
        self,
        tool: str,
        waypoints: list[Waypoint],
        on_waypoint: Callable[[int, float | None], None],
        should_stop: Callable[[], bool],
    ) -> Motion:
        """Move ``tool`` through ``waypoints``; ``on_waypoint(i, stamp)`` as waypoint i is
        approached, with the time [s] the arm says it set off towards it (the clock its tool
        poses are stamped by), or None where it does not say (then: now); stop where it
        is as soon as ``should_stop()`` is true."""

    def gripper(
        self, width: float, max_effort: float, should_stop: Callable[[], bool]
    ) -> tuple[float, bool] | None:
        """Open or close; the final opening [m] and whether an object is held, or None when
        ``should_stop()`` came true first (the command is then cancelled where it can
        be). RuntimeError when the gripper refuses or fails the command."""

    def tool_pose(self, tool: str) -> ToolPose | None:
        """The tool's latest pose, or None before the first."""


def waypoint_msgs(waypoints: list[Waypoint], frame: str) -> list[PoseStamped]:
    out = []
    for wp in waypoints:
        m = PoseStamped()
        m.header.frame_id = frame
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in wp.p_W)
        q = quaternion_of_yaw(wp.yaw)
        m.pose.orientation.x, m.pose.orientation.y = q[0], q[1]
        m.pose.orientation.z, m.pose.orientation.w = q[2], q[3]
        out.append(m)
    return out


CANCEL_RETRY_S = 1.0
"""How long [s] :func:`cancel_goal` waits for a cancel's answer before it asks again."""
CANCEL_WAIT_S = 15.0
"""How long [s] :func:`cancel_goal` waits for a cancelled goal to end."""


def cancel_goal(
    node: Node,
    handle: Any,
    result_future: Any,
    silent: Callable[[], str | None] | None = None,
) -> None:
    """Cancel an action goal of ``node``'s and wait for it to end, or for the process to end
    first (once ``node``'s context has shut down no answer can come).

    A cancel request, or its answer, can be lost on the way (a DDS sample dropped, a server
    that has not yet matched this client's reader), and the goal then goes on: the motion
    runs to its end, and the tool refuses the next command (the retract) while it moves. So
    the request is sent again every :data:`CANCEL_RETRY_S` until the server has accepted
    it or the goal has ended (cancelling is idempotent). TimeoutError when the goal has not
    ended within :data:`CANCEL_WAIT_S`; ServerGone as soon as ``silent()`` says why the
    server seems gone (no one is left to answer)."""

    def ending() -> bool:
        return not node.context.ok()

    end = time.monotonic() + CANCEL_WAIT_S
    accepted = False
    while True:
        answer = handle.cancel_goal_async() if not accepted else None
        ask_again = min(time.monotonic() + CANCEL_RETRY_S, end)
        while not result_future.done():
            if ending():
                return
            now = time.monotonic()
            if silent is not None and now > ask_again:
                quiet = silent()
                if quiet is not None:
                    raise ServerGone(f'the cancelled goal was not seen to end: {quiet}')
            if now > end:
                raise TimeoutError(
                    f'the goal did not end within {CANCEL_WAIT_S:g} s of being cancelled'
                    + ('' if accepted else ' (no cancel request was accepted)')
                )
            if answer is not None and answer.done():
                accepted = bool(answer.result().goals_canceling)
                answer = None
            if now > ask_again and not accepted:
                break
            time.sleep(0.002)
        else:
            return


SERVER_CHECK_S = 0.5
"""How often [s] :func:`run_goal` looks whether the action server is still there."""


class ServerGone(RuntimeError):  # noqa: N818 - a condition of the graph
    """The action server running a goal went silent or left (its process died): the
    goal's fate is unknown, and no answer will come."""


def run_goal(
    node: Node,
    client: Any,
    goal: Any,
    timeout_s: float,
    should_stop: Callable[[], bool],
    what: str,
    feedback: Callable[[Any], None] | None = None,
    silent: Callable[[], str | None] | None = None,
) -> Any:
    """Send ``goal`` with ``node``'s ``client`` (its feedback to ``feedback``) and wait for
    its result (the action's Result message), or None when ``should_stop()`` came true
    first: the goal is then cancelled (:func:`cancel_goal`) unless the process is ending.
    RuntimeError naming ``what`` when the server refuses the goal; ServerGone when
    ``silent()`` (before sending, then every :data:`SERVER_CHECK_S`) says why the server
    seems gone (a twin that died mid-grasp left the goal waiting out the whole timeout,
    and its cancel 15 s more); TimeoutError when an answer does not come in time."""
    quiet = silent() if silent is not None else None
    if quiet is not None:
        raise ServerGone(f'{what} is not answering: {quiet}')
    handle = wait_for(client.send_goal_async(goal, feedback_callback=feedback), 5.0)
    if not handle.accepted:
        raise RuntimeError(f'{what} refused the command')
    result_future = GoalResult(handle)
    gone: list[str | None] = [None]
    checked = [time.monotonic()]

    def stop_or_gone() -> bool:
        now = time.monotonic()
        if silent is not None and now - checked[0] >= SERVER_CHECK_S:
            checked[0] = now
            gone[0] = silent()
        return gone[0] is not None or should_stop()

    if wait_for(result_future, timeout_s, stop_or_gone) is None:
        if gone[0] is not None:
            raise ServerGone(f'{what} stopped answering: {gone[0]}')
        if node.context.ok():  # else the process is ending: nothing can be sent
            cancel_goal(node, handle, result_future, silent)
        return None
    return result_future.result().result


FOLLOW_SLACK = 2.0
"""A path may take this many times its length at its speeds, plus its dwells and
:data:`FOLLOW_MARGIN_S`, before :meth:`TwinBackend.follow` gives up on its answer."""
FOLLOW_MARGIN_S = 30.0
FOLLOW_UNKNOWN_S = 600.0


def follow_timeout(start: Any, waypoints: list[Waypoint]) -> float:
    """How long [s] a path from ``start`` ((3,) [m]; None: not known, then
    :data:`FOLLOW_UNKNOWN_S`) through ``waypoints`` may take before its answer is
    overdue."""
    if start is None:
        return FOLLOW_UNKNOWN_S
    seconds = FOLLOW_MARGIN_S
    p = np.asarray(start, dtype=float)
    for wp in waypoints:
        q = np.asarray(wp.p_W, dtype=float)
        if wp.speed > 0:
            seconds += FOLLOW_SLACK * float(np.linalg.norm(q - p)) / float(wp.speed)
        seconds += FOLLOW_SLACK * max(float(wp.dwell_s), 0.0)
        p = q
    return seconds


POSE_SILENCE_S = 3.0
"""How long [s] the twin's tool poses may stop before a motion's server counts as gone."""
GRIPPER_WAIT_S = 30.0
"""How long [s] a gripper command may take before it is a failure."""


class TwinBackend:
    """The twin node's motion interface (namespace ``ns``, default ``/twin``)."""

    def __init__(self, node: Node, ns: str, frame: str, callback_group: Any = None) -> None:
        self.node, self.frame = node, frame
        self._names = (f'{ns}/follow_path', f'{ns}/gripper')
        self._follow = SafeActionClient(
            node, FollowPath, f'{ns}/follow_path', callback_group=callback_group
        )
        self._grip = SafeActionClient(
            node, GripperCommand, f'{ns}/gripper', callback_group=callback_group
        )
        self._poses: dict[str, ToolPose] = {}
        self._heard: dict[str, float] = {}  # when each tool's latest pose came [monotonic s]
        self._lock = threading.Lock()
        for tool in ('fingertip', 'gripper'):
            node.create_subscription(
                PoseStamped,
                f'{ns}/{tool}_pose',
                lambda msg, tool=tool: self._on_pose(tool, msg),
                10,
                callback_group=callback_group,
            )

    def _on_pose(self, tool: str, msg: PoseStamped) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        stamp = stamp_to_s(msg.header.stamp)
        pose = ToolPose(np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w]), stamp)
        with self._lock:
            self._poses[tool] = pose
            self._heard[tool] = time.monotonic()

    def _silent(self, tool: str) -> str | None:
        """Why the twin seems gone (no ``tool`` pose for :data:`POSE_SILENCE_S` since its
        first), or None. Its poses come at ``tool_rate_hz`` (at least 1 Hz) for as long as
        it runs; an action server that died is still reported ready for as long as DDS
        takes to notice (tens of seconds, or never within the same process)."""
        with self._lock:
            heard = self._heard.get(tool)
        quiet = 0.0 if heard is None else time.monotonic() - heard
        return f'no {tool} pose for {quiet:.1f} s' if quiet > POSE_SILENCE_S else None

    def connect(self, timeout_s: float) -> None:
        """Wait for the twin's servers, then until each has answered a goal it refuses
        without moving (no waypoints; a negative opening): see
        :func:`slide_ros.lifecycle.handshake` (a push sent before moved the fingertip while
        the executor waited for an answer that never came)."""
        deadline = time.monotonic() + timeout_s
        clients = (self._follow, self._grip)
        for client, name in zip(clients, self._names, strict=True):
            if not client.wait_for_server(timeout_sec=timeout_s):
                raise NotReady(f'no action server {name} (is the twin running?)')
        probes = (FollowPath.Goal(tool='fingertip'), GripperCommand.Goal(width=-1.0))
        for client, probe, name in zip(clients, probes, self._names, strict=True):
            try:
                handshake(client, probe, max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                raise NotReady(
                    f'{name} runs but its answers do not arrive (DDS discovery not '
                    'complete, or a firewall between the processes)'
                ) from None

    def follow(
        self,
        tool: str,
        waypoints: list[Waypoint],
        on_waypoint: Callable[[int, float | None], None],
        should_stop: Callable[[], bool],
    ) -> Motion:
        goal = FollowPath.Goal()
        goal.tool = tool
        goal.waypoints = waypoint_msgs(waypoints, self.frame)
        goal.speeds = [float(w.speed) for w in waypoints]
        goal.dwells = [float(w.dwell_s) for w in waypoints]
        seen = [-1]

        def feedback(msg: Any) -> None:
            # Every waypoint is announced once and in order, even when a short one passed
            # between two feedback messages; at the twin's stamp of the pose it sent with
            # the news, not when the news arrived (late on a loaded machine).
            stamp = stamp_to_s(msg.feedback.pose.header.stamp)
            for i in range(seen[0] + 1, int(msg.feedback.waypoint) + 1):
                seen[0] = i
                on_waypoint(i, stamp if stamp > 0.0 else None)

        last = self.tool_pose(tool)
        timeout_s = follow_timeout(None if last is None else last.p_W, waypoints)
        try:
            result = run_goal(
                self.node,
                self._follow,
                goal,
                timeout_s,
                should_stop,
                'the arm',
                feedback,
                lambda: self._silent(tool),
            )
        except ServerGone as exc:
            return Motion(False, message=str(exc))
        except RuntimeError:
            return Motion(False, message='the arm refused the path')
        if result is None:
            return Motion(False, True, 'stopped')
        if result.error.code != ErrorCode.SUCCESS:
            return Motion(False, message=result.message or f'arm error {result.error.code}')
        return Motion(True)

    def gripper(
        self, width: float, max_effort: float, should_stop: Callable[[], bool]
    ) -> tuple[float, bool] | None:
        goal = GripperCommand.Goal(width=float(width), max_effort=float(max_effort))
        result = run_goal(
            self.node,
            self._grip,
            goal,
            GRIPPER_WAIT_S,
            should_stop,
            'the gripper',
            silent=lambda: self._silent('gripper'),
        )
        if result is None:
            return None
        if result.error.code != ErrorCode.SUCCESS:
            raise RuntimeError(
                f'the gripper failed: {result.message or f"error {result.error.code}"}'
            )
        return float(result.width), bool(result.holding)

    def tool_pose(self, tool: str) -> ToolPose | None:
        with self._lock:
            return self._poses.get(tool)
