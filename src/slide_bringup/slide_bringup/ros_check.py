"""A ROS 2 round trip on slide_interfaces over real DDS, in one process.

Used by ``slide doctor`` to prove that rclpy, the RMW, DDS discovery and the generated
slide_interfaces types work on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
import time

MAX_DOMAIN_ID = 232
"""The largest ROS_DOMAIN_ID Fast DDS can turn into ports; above it the DDS library ends
the process (exit 1, one line on stdout) before any report. 0 to 101 are the ones clear of
Linux's ephemeral ports (ROS 2's advice)."""


def domain_problem(value: str | None = None) -> str:
    """What is wrong with ``ROS_DOMAIN_ID`` (``value``, else the environment's); '' when it
    is unset or usable."""
    import os

    raw = os.environ.get('ROS_DOMAIN_ID', '') if value is None else value
    if not raw.strip():
        return ''
    try:
        domain = int(raw)
    except ValueError:
        domain = -1
    if not 0 <= domain <= MAX_DOMAIN_ID:
        return (
            f'ROS_DOMAIN_ID {raw!r} is no ROS domain: give a whole number from 0 to 101 '
            f'(at most {MAX_DOMAIN_ID})'
        )
    return ''


@dataclass(frozen=True)
class RoundTrip:
    """Outcome of one action goal sent and answered in-process."""

    accepted: bool
    feedback_received: int
    result_success: bool
    result_message: str
    travel_echoed_m: float
    seconds: float


def action_roundtrip(travel_m: float = 0.05, timeout_s: float = 10.0) -> RoundTrip:
    """Serve the slide Push action and call it once; return what the client saw.

    The server echoes the goal's travel in its result record's primitive and publishes
    three feedback messages. Raises TimeoutError if any stage does not finish in
    ``timeout_s`` seconds.
    """
    import rclpy
    from rclpy.action import ActionClient, ActionServer
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from slide_interfaces.action import Push
    from slide_interfaces.msg import ErrorCode
    from slide_ros.action_client import GoalResult

    t0 = time.monotonic()
    context = Context()
    rclpy.init(args=[], context=context)
    feedback: list[Push.Feedback] = []
    try:
        node = rclpy.create_node('slide_doctor', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def execute(goal_handle):  # type: ignore[no-untyped-def]
            fb = Push.Feedback()
            for i in range(3):
                fb.travelled = goal_handle.request.primitive.travel * (i + 1) / 3
                goal_handle.publish_feedback(fb)
            goal_handle.succeed()
            result = Push.Result(message='')
            result.error.code = ErrorCode.SUCCESS
            result.record.primitive = goal_handle.request.primitive
            return result

        server = ActionServer(node, Push, 'slide_doctor/push', execute)
        client = ActionClient(node, Push, 'slide_doctor/push')

        def spin_until(done, what: str) -> None:  # type: ignore[no-untyped-def]
            deadline = time.monotonic() + timeout_s
            while not done():
                if time.monotonic() > deadline:
                    raise TimeoutError(f'ROS round trip: timed out waiting for {what}')
                executor.spin_once(timeout_sec=0.05)

        spin_until(client.server_is_ready, 'the action server')
        goal = Push.Goal()
        goal.primitive.travel = travel_m
        send = client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m))
        spin_until(send.done, 'goal acceptance')
        handle = send.result()
        if not handle.accepted:
            return RoundTrip(False, 0, False, 'goal rejected', 0.0, time.monotonic() - t0)
        res = GoalResult(handle)  # (asked again when DDS lost it)
        spin_until(res.done, 'the result')
        # Feedback may arrive after the result on another topic; give it a moment.
        deadline = time.monotonic() + 1.0
        while len(feedback) < 3 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        result = res.result().result
        client.destroy()
        server.destroy()
        node.destroy_node()
        executor.shutdown()
        return RoundTrip(
            accepted=True,
            feedback_received=len(feedback),
            result_success=result.error.code == ErrorCode.SUCCESS,
            result_message=result.message,
            travel_echoed_m=float(result.record.primitive.travel),
            seconds=time.monotonic() - t0,
        )
    finally:
        rclpy.shutdown(context=context)
