"""Playing a bag back into the graph, as ``ros2 bag play --clock`` does, where rosbag2 is
missing (``slide replay``).

Each message is published as the CDR bytes it was recorded as (no per-type code) at its
log time, scaled by ``rate``, on a publisher of the topic's type; ``/clock``
(rosgraph_msgs/Clock) carries the bag's time, at every message and ``clock_hz`` times a
second in between, so nodes with ``use_sim_time`` follow the bag. Latched topics (the grid,
the belief: :data:`slide_ros.topics.EPISODE_TOPICS`) are published latched.

What a bag cannot give is said, not raised: topics of unknown or uninstalled types, and
topics recorded with another definition of their type than the one installed (an older
slide_interfaces: its bytes would not decode, and subscribers drop them without a word),
are left out with the reason, and the bag's own warnings (cut short, metadata that
disagrees) come with the result. Replaying the camera's clouds into the perception node
rebuilds the grid and the poses, and what the graph's nodes draw follows the bag in RViz.
The identification node does not identify from replayed pushes (it takes pushes in its
``~/identify`` goal, or a bag's path there): give it the bag (``bag:``), or use ``slide
identify BAG``. A recorder that records a replay at another ``rate`` than 1 needs
``use_sim_time`` (its log times are then the bag's): on the wall clock, its log times and
the messages' stamps drift apart, and pushes are lost on reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
import heapq
import math
from pathlib import Path
import time
from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile

from slide_core.errors import SlideInputError
from slide_core.io import Bag, interfaces_typestore, open_bag, wire_layout
from slide_ros.qos import LATCHED, RELIABLE
from slide_ros.recorder_node import message_class
from slide_ros.topics import EPISODE_TOPICS

LATCHED_TOPICS = {t.name for t in EPISODE_TOPICS if t.latched}
CLOCK_TOPIC = '/clock'
REORDER_S = 10.0
"""Messages are put in time order over this much bag time (a bag file need not be in
order: writers fill chunks as messages come, and twin bags write a push's clouds first)."""


def in_time_order(
    messages: Iterable[tuple[str, int, bytes]], horizon_s: float = REORDER_S
) -> Iterator[tuple[str, int, bytes]]:
    """``messages`` (topic, log time [ns], data) sorted by time, as long as none comes more
    than ``horizon_s`` after a later one; one that does comes as soon as it is read."""
    heap: list[tuple[int, int, str, bytes]] = []
    horizon = int(horizon_s * 1e9)
    latest = None
    for k, (topic, t_ns, data) in enumerate(messages):
        heapq.heappush(heap, (t_ns, k, topic, data))
        latest = t_ns if latest is None else max(latest, t_ns)
        while heap and heap[0][0] <= latest - horizon:
            t, _, tp, d = heapq.heappop(heap)
            yield tp, t, d
    while heap:
        t, _, tp, d = heapq.heappop(heap)
        yield tp, t, d


@dataclass(frozen=True)
class ReplayResult:
    """What a replay published.

    Attributes:
        bag: the bag's path; messages: per topic, how many were published.
        left_out: topics of the bag that were not played, with the reason.
        warnings: what was wrong with the bag (one line each).
        bag_seconds: the span of bag time played; wall_seconds: how long it took.
        stopped: the replay was stopped before the end.
    """

    bag: str
    messages: dict[str, int]
    left_out: dict[str, str]
    warnings: tuple[str, ...]
    bag_seconds: float
    wall_seconds: float
    stopped: bool = False


def plan(bag: Bag, topics: Sequence[str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(topic -> type to play, topic -> why it is left out). Raises SlideInputError when a
    requested topic is not in the bag or nothing can be played."""
    if topics:
        absent = [t for t in topics if t not in bag.topics]
        if absent:
            raise SlideInputError(
                f'{bag.path}: has no {", ".join(absent)} (it holds {", ".join(bag.topics)})'
            )
    chosen = list(topics) if topics else list(bag.topics)
    try:
        installed = interfaces_typestore()  # the definitions of the installed types
    except SlideInputError:
        installed = None
    play: dict[str, str] = {}
    left_out: dict[str, str] = {}
    for topic in chosen:
        info = bag.topics[topic]
        if topic == CLOCK_TOPIC:
            # A bag recorded under sim time (ros2 bag record -a) holds the graph's clock:
            # played beside the player's own, two clocks went back and forth by 1.8e9 s.
            left_out[topic] = 'the player publishes the time of the bag on it'
        elif topic in bag.unknown:
            left_out[topic] = bag.unknown[topic]
        elif info.count == 0:
            left_out[topic] = 'no messages'
        else:
            try:
                message_class(info.type)
            except (SlideInputError, ValueError):
                left_out[topic] = f'its type {info.type} is not installed here'
                continue
            change = _definition_change(bag, info.type, installed)
            if change:
                left_out[topic] = (
                    f'it was recorded with another definition of {info.type} than the one '
                    f'installed ({change}): its bytes would not decode'
                )
                continue
            play[topic] = info.type
    if not play:
        reasons = '; '.join(f'{t}: {why}' for t, why in left_out.items())
        raise SlideInputError(
            f'{bag.path}: nothing to play ({reasons or "the bag holds no message"})'
        )
    return play, left_out


def _definition_change(bag: Bag, type_name: str, installed: Any) -> str:
    """How the bag's definition of a type differs from the one in the type store
    ``installed`` ('' if it does not, or if either lacks it)."""
    recorded = bag.layout(type_name)
    if recorded is None or installed is None or type_name not in installed.fielddefs:
        return ''
    now = wire_layout(installed, type_name)
    if recorded == now:
        return ''
    names_then, names_now = [f for f, _ in recorded], [f for f, _ in now]
    if names_then != names_now:
        return f'fields {", ".join(names_then)} recorded, {", ".join(names_now)} installed'
    changed = [f for (f, a), (_, b) in zip(recorded, now, strict=True) if a != b]
    return f'the type of {", ".join(changed)} differs'


PROGRESS_PERIOD_S = 0.2
"""How often [s] :meth:`Player.play` tells its progress at most."""


class Player:
    """Publishes a bag's messages on a node (see the module docstring), from
    ``start_offset`` seconds into the bag (latched topics: their latest message before it
    first)."""

    def __init__(
        self,
        node: Node,
        path: str | Path,
        topics: Sequence[str] | None = None,
        rate: float = 1.0,
        clock_hz: float = 40.0,
        start_offset: float = 0.0,
    ) -> None:
        if not (math.isfinite(rate) and 0.01 <= rate <= 100.0):
            raise SlideInputError(f'--rate must be in [0.01, 100], got {rate}')
        if not (math.isfinite(start_offset) and start_offset >= 0.0):
            raise SlideInputError(f'--start-offset must be >= 0 s, got {start_offset}')
        if not (math.isfinite(clock_hz) and 0.0 <= clock_hz <= 1000.0):
            raise SlideInputError(f'the clock rate must be in [0, 1000] Hz, got {clock_hz}')
        from rosgraph_msgs.msg import Clock

        self.node = node
        self.bag = open_bag(path)
        self.play_types, self.left_out = plan(self.bag, topics)
        self.rate = rate
        self.start_ns = (self.bag.first_ns or 0) + int(start_offset * 1e9)
        if self.bag.last_ns is not None and self.start_ns > self.bag.last_ns:
            # Nothing would be played, the latched grid and ground truth neither.
            length = (self.bag.last_ns - (self.bag.first_ns or 0)) * 1e-9
            raise SlideInputError(
                f'--start-offset {start_offset:g} s is past the end of {path} '
                f'({length:.2f} s long)'
            )
        self.seconds = max(0.0, ((self.bag.last_ns or self.start_ns) - self.start_ns) * 1e-9)
        """Bag seconds from the start to the bag's end."""
        self.clock_period = 1.0 / clock_hz if clock_hz > 0 else math.inf
        self._Clock = Clock
        self.clock = node.create_publisher(Clock, CLOCK_TOPIC, 10)
        self.publishers: dict[str, Any] = {}
        for topic, typ in self.play_types.items():
            qos: QoSProfile = LATCHED if topic in LATCHED_TOPICS else RELIABLE
            self.publishers[topic] = node.create_publisher(message_class(typ), topic, qos)

    def others(self) -> dict[str, list[str]]:
        """The nodes besides this one that publish ``/clock`` or a played topic (another
        replay's clock runs the graph's time backwards; a live node's topic mixes with the
        bag's), by topic."""
        me = (self.node.get_name(), self.node.get_namespace())
        found: dict[str, list[str]] = {}
        for topic in (CLOCK_TOPIC, *self.publishers):
            names = sorted(
                f'{i.node_namespace.rstrip("/")}/{i.node_name}'
                if not i.node_name.startswith('_NODE_NAME_UNKNOWN')
                else 'a node not yet known by name'
                for i in self.node.get_publishers_info_by_topic(topic)
                if (i.node_name, i.node_namespace) != me
            )
            if names:
                found[topic] = names
        return found

    def subscribed(self) -> bool:
        """Every played topic, and ``/clock``, has a matched subscriber (call before
        :meth:`play` to wait for late subscribers: a ``/clock`` matched after the start
        misses the bag's first times)."""
        publishers = (*self.publishers.values(), self.clock)
        return all(p.get_subscription_count() > 0 for p in publishers)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every reliable message sent was acknowledged by every matched
        subscriber (at most ``timeout_s`` per publisher); False if some were not. Call before
        destroying the node: a writer destroyed right after its last publish loses what it
        had not yet delivered."""
        from rclpy.duration import Duration

        wait = Duration(nanoseconds=int(timeout_s * 1e9))
        acked = [p.wait_for_all_acked(wait) for p in self.publishers.values()]  # each one
        return all(acked)

    def _publish_clock(self, t_ns: int) -> None:
        msg = self._Clock()
        msg.clock.sec, msg.clock.nanosec = t_ns // 10**9, t_ns % 10**9
        self.clock.publish(msg)

    def play(
        self,
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[float, float], None] = lambda done, total: None,
    ) -> ReplayResult:
        """Publish every message at its time (scaled by the rate); returns what was sent.
        ``progress`` is told the bag seconds played and those from the start to the bag's
        end, a few times a second."""
        counts = dict.fromkeys(self.play_types, 0)
        total_s = self.seconds
        told = 0.0
        wall0 = time.monotonic()
        t0: int | None = None
        last_ns = 0
        stopped = False
        next_clock = 0.0
        held: dict[str, bytes] = {}  # latched messages before the start: the latest of each
        for topic, t_ns, data in in_time_order(self.bag.messages(self.play_types)):
            if t_ns < self.start_ns:
                if topic in LATCHED_TOPICS:
                    held[topic] = data
                continue
            if t0 is None:
                t0 = t_ns
                for latched, payload in held.items():
                    self.publishers[latched].publish(payload)
                    counts[latched] += 1
            due = wall0 + (t_ns - t0) * 1e-9 / self.rate
            while True:
                now = time.monotonic()
                if should_stop():
                    stopped = True
                    break
                if now >= next_clock and now < due:
                    bag_now = t0 + int((now - wall0) * self.rate * 1e9)
                    self._publish_clock(max(bag_now, last_ns))
                    next_clock = now + self.clock_period
                if now >= due:
                    break
                time.sleep(min(due - now, max(next_clock - now, 0.0), 0.01))
            if stopped:
                break
            last_ns = max(last_ns, t_ns)
            self._publish_clock(last_ns)
            self.publishers[topic].publish(data)
            counts[topic] += 1
            if time.monotonic() - told >= PROGRESS_PERIOD_S:
                told = time.monotonic()
                progress((last_ns - self.start_ns) * 1e-9, total_s)
        if t0 is None and held and not stopped:
            # Nothing played comes after the start: the latched messages before it are
            # still the state there (they were sent only with a first later message).
            self._publish_clock(self.start_ns)
            for latched, payload in held.items():
                self.publishers[latched].publish(payload)
                counts[latched] += 1
        if not stopped:
            progress(total_s, total_s)
        warnings = (*self.bag.warnings, *self.bag.decode_warnings())
        return ReplayResult(
            str(self.bag.path),
            counts,
            dict(self.left_out),
            tuple(warnings),
            round((last_ns - t0) * 1e-9, 3) if t0 is not None else 0.0,
            round(time.monotonic() - wall0, 3),
            stopped,
        )
