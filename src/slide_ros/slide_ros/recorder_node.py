"""The recorder node: the episode's topics into a rosbag2 (MCAP), where rosbag2 is missing.

It records what ``ros2 bag record`` records on the robot PC (the topics of
:data:`slide_ros.topics.EPISODE_TOPICS`), with the same result: ``slide identify BAG``
reads both alike. Subscriptions are raw (CDR bytes), written with rosbags as they came, so
there is no per-type code; types and their definitions come from Jazzy's and
slide_interfaces' ``.msg`` files. A topic is subscribed when its first publisher appears,
with a QoS that matches every publisher (best effort if one is, transient local if all
are), as rosbag2 does; a message's log time is when it arrived, on the node's clock (as
rosbag2's). Topics without a header stamp (the push primitive) are taken apart, by a
small node of their own, with the time their publisher sent them (the middleware's source
timestamp, carried over to the node's clock): an overloaded recorder takes messages late,
and such a message would then be placed after the data it goes with. (The push markers
carry the stroke's times in their stamps, which the bag reader goes by.)

The bag is always complete and valid, whatever happens to the episode:

- it is written in a hidden folder beside ``bag`` and moved there when closed: on
  shutdown (SIGINT, SIGTERM, the lifecycle's cleanup or shutdown), so a finished bag never
  shows half-written;
- every ``flush_period_s`` the open MCAP chunk is closed and handed to the operating
  system, so if the node is killed outright the hidden folder still holds everything up
  to the last flush, which :func:`slide_core.io.read_pushes` reads (saying what was lost).

A disk slower than the streams does not take the memory: at most ``max_queue_mb`` wait to
be written, and messages beyond are dropped, counted per topic, and reported when the bag
closes (the recorder then exits 1, as when the disk is full).

Parameters: ``bag`` (the output folder, must not exist), ``topics`` (default: every
episode topic), ``flush_period_s``, ``max_queue_mb``.

    ros2 run slide_ros recorder_node --ros-args -p bag:=/data/episode_03
"""

from __future__ import annotations

from functools import partial
import importlib
from pathlib import Path
import queue
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from slide_core.errors import SlideError, SlideInputError
from slide_core.io import flush_chunk, interfaces_typestore
from slide_ros.lifecycle import LIFECYCLE_PARAMS, STEADY, SideNode, SlideNode
from slide_ros.params import Param, ParameterError, declare
from slide_ros.topics import EPISODE_TOPICS

PARAMS = (
    Param('bag', '', 'output folder of the bag (must not exist yet)'),
    Param(
        'topics',
        [t.name for t in EPISODE_TOPICS],
        'topics to record (default: every episode topic)',
    ),
    Param(
        'flush_period_s',
        1.0,
        'close an MCAP chunk this often: a killed recorder loses at most this much',
        low=0.05,
        high=60.0,
    ),
    Param('discovery_period_s', 0.2, 'look for new publishers this often [s]', low=0.02, high=5.0),
    Param(
        'max_queue_mb',
        512.0,
        'messages waiting for the disk, at most [MB]: beyond, new ones are dropped and '
        'counted (a disk slower than the streams)',
        low=0.01,
        high=65536.0,
    ),
    *LIFECYCLE_PARAMS,
)
TYPES = {t.name: t.type for t in EPISODE_TOPICS}
UNSTAMPED = {t.name for t in EPISODE_TOPICS if not t.stamped}


def message_class(type_name: str) -> Any:
    """The rclpy class of ``pkg/msg/Type`` (SlideInputError when it is not installed)."""
    package, kind, name = type_name.split('/')
    try:
        return getattr(importlib.import_module(f'{package}.{kind}'), name)
    except (ImportError, AttributeError):
        raise SlideInputError(f'message type {type_name} is not installed') from None


def matching_qos(publishers: list[Any], depth: int = 1000) -> QoSProfile:
    """A subscription QoS every one of ``publishers`` (TopicEndpointInfo) can serve,
    keeping ``depth`` messages while the node is busy."""
    reliable = all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers)
    latched = all(p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in publishers)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


def bag_qos(qos: QoSProfile) -> tuple[Any, ...]:
    """The rosbags QoS of a subscription's ``qos``, for a bag's metadata: ``ros2 bag play``
    offers each topic with it (without it the grid, the belief and the behaviour's state
    were played volatile, and a late subscriber never got them)."""
    from rosbags.interfaces import (
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )

    latched = qos.durability == DurabilityPolicy.TRANSIENT_LOCAL
    reliable = qos.reliability == ReliabilityPolicy.RELIABLE
    return (
        Qos(
            QosHistory.KEEP_LAST,
            1 if latched else int(qos.depth),
            QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
            QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
            QosTime(0, 0),
            QosTime(0, 0),
            QosLiveliness.AUTOMATIC,
            QosTime(0, 0),
            False,
        ),
    )


class RecorderNode(SlideNode):
    """Records the episode topics into a bag (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('recorder', **kwargs)
        p = declare(self, PARAMS)
        if not p['bag']:
            raise ParameterError('bag: give the output folder of the recording (-p bag:=DIR)')
        self.target = Path(p['bag']).expanduser().absolute()
        self.topics = [str(t) for t in p['topics'] if str(t)]
        unknown = [t for t in self.topics if t not in TYPES]
        if unknown or not self.topics:
            raise ParameterError(
                f'topics: {", ".join(unknown) or "none given"}; record episode topics: '
                + ', '.join(TYPES)
            )
        self.flush_period = float(p['flush_period_s'])
        self.counts: dict[str, int] = dict.fromkeys(self.topics, 0)
        self._queue: queue.Queue[tuple[str, str, int, bytes] | None] = queue.Queue()
        self._max_queued = int(float(p['max_queue_mb']) * 1e6)
        self._queued = 0  # bytes in the queue
        self._queued_lock = threading.Lock()
        self.dropped: dict[str, int] = dict.fromkeys(self.topics, 0)
        self._subs: dict[str, Any] = {}
        self._offered: dict[str, tuple[Any, ...]] = {}  # topic: its QoS, for the metadata
        self._writer: Any = None
        self._tmp: Path | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._error = ''
        self._pending: dict[str, int] = {}  # what the writer thread left unflushed
        self._close_lock = threading.Lock()
        self._discovery = self.create_timer(
            float(p['discovery_period_s']), self._discover, clock=STEADY
        )
        # Unstamped topics: a node of their own whose callbacks get the message info (the
        # EventsExecutor that takes the streams cannot give it), spun in its own thread.
        self._markers = SideNode(self, 'recorder_markers')
        self.start_up(p)

    # -- lifecycle -------------------------------------------------------------------------
    def configure(self) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        if self._closed:
            # (it returned SUCCESS and recorded nothing: cleanup had closed the bag)
            raise SlideInputError(
                f'this recorder closed its bag {self.target} at cleanup: one recorder node '
                'records one bag; start another with a new bag folder to record again'
            )
        if self._writer is not None:
            return
        if self.target.exists():
            raise SlideInputError(f'{self.target} exists: give a new folder for the bag')
        parent = self.target.parent
        for left in sorted(parent.glob(f'.{self.target.name}.*')):
            # (a restarted recorder began a new bag, and said nothing of the old one)
            self.get_logger().warning(
                f'an earlier recording into {self.target} was left in {left} (its recorder '
                'was killed before it closed): slide identify reads it there'
            )
        try:
            parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f'.{self.target.name}.', dir=parent))
        except OSError as exc:
            raise SlideInputError(f'cannot write the bag in {parent}: {exc.strerror}') from None
        store = interfaces_typestore()
        writer = Writer(tmp / self.target.name, version=9, storage_plugin=StoragePlugin.MCAP)
        writer.open()
        self._tmp, self._writer, self._store = tmp, writer, store
        self._thread = threading.Thread(target=self._write, name='bag writer', daemon=True)
        self._thread.start()
        self.get_logger().info(
            f'recording {len(self.topics)} topics into {self.target} (written in {tmp} until '
            'the recording ends; a recorder killed outright leaves it there, readable)'
        )

    def deactivate(self) -> None:
        # Paused: no new messages; the bag stays open until cleanup or shutdown.
        for topic, sub in self._subs.items():
            (self._markers.node if topic in UNSTAMPED else self).destroy_subscription(sub)
        self._subs.clear()

    def on_cleanup(self, state: Any) -> Any:
        self.close()
        return super().on_cleanup(state)

    def on_shutdown(self, state: Any) -> Any:
        result = super().on_shutdown(state)
        self.close()
        return result

    def destroy_node(self) -> None:
        self.close()
        # (a daemon thread still inside rcl when the interpreter exits aborts the process: a
        # recorder that never configured exited by SIGABRT instead of 1)
        self._markers.destroy()
        super().destroy_node()

    # -- subscriptions (callbacks store and return) ------------------------------------------
    def _discover(self) -> None:
        if not self.active or self._closed:
            return
        for topic in self.topics:
            if topic in self._subs:
                continue
            publishers = self.get_publishers_info_by_topic(topic)
            if not publishers:
                continue
            types = {p.topic_type for p in publishers}
            if types != {TYPES[topic]}:
                self.get_logger().error(
                    f'{topic} is published as {", ".join(sorted(types))}, not '
                    f'{TYPES[topic]}: not recorded',
                    throttle_duration_sec=30.0,
                )
                continue
            if topic in UNSTAMPED:
                node, callback = self._markers.node, partial(self._on_marker, topic)
            else:
                node, callback = self, partial(self._on_message, topic)
            # A queue for a few seconds of each stream (a busy recorder takes messages in
            # bursts; with 100 it lost a tenth of a 250 Hz wrench); clouds are 1 MB each.
            depth = 20 if TYPES[topic].endswith('/PointCloud2') else 2000
            qos = matching_qos(publishers, depth)
            self._offered[topic] = bag_qos(qos)
            self._subs[topic] = node.create_subscription(
                message_class(TYPES[topic]), topic, callback, qos, raw=True
            )

    def _on_message(self, topic: str, data: bytes) -> None:
        self._enqueue(topic, self.get_clock().now().nanoseconds, data)

    def _on_marker(self, topic: str, data: bytes, info: dict[str, Any]) -> None:
        now = self.get_clock().now().nanoseconds
        sent = int(info.get('source_timestamp') or 0)
        # The delay since the publisher sent it, on the system clock (source timestamps'),
        # taken off the node's clock (which may be /clock's).
        delay = max(0, time.time_ns() - sent) if sent > 0 else 0
        self._enqueue(topic, now - delay, data)

    def _enqueue(self, topic: str, t_ns: int, data: bytes) -> None:
        """Hand a message to the writer thread, or drop and count it when ``max_queue_mb``
        already waits for the disk (the queue had no bound: a slow disk took the memory)."""
        with self._queued_lock:
            if self._queued + len(data) > self._max_queued:
                self.dropped[topic] += 1
                full = True
            else:
                self._queued += len(data)
                full = False
        if full:
            self.get_logger().warning(
                f'the disk falls behind: {self._max_queued / 1e6:g} MB wait to be written; '
                f'dropping messages ({sum(self.dropped.values())} so far)',
                throttle_duration_sec=5.0,
            )
            return
        self._queue.put((topic, TYPES[topic], t_ns, data))

    # -- the writer thread ----------------------------------------------------------------
    def _write(self) -> None:
        """Write what comes until the queue's end. After a failed write or flush (a full
        disk) nothing more goes in: the file is broken from its last whole chunk on, and a
        chunk written after it, even once there is room again, would sit behind a broken
        record. ``counts`` holds the messages in flushed chunks, on disk."""
        conns: dict[str, Any] = {}
        pending = dict.fromkeys(self.topics, 0)  # in the open chunk, not yet on disk
        last_flush = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=min(0.1, self.flush_period))
            except queue.Empty:
                item = ('', '', 0, b'')  # nothing came: only flush when due
            if item is None:
                self._pending = pending
                return
            topic, typ, t_ns, data = item
            with self._queued_lock:
                self._queued -= len(data)
            if self._error:
                continue  # drained, not written
            try:
                if topic:
                    if topic not in conns:
                        conns[topic] = self._writer.add_connection(
                            topic,
                            typ,
                            typestore=self._store,
                            offered_qos_profiles=self._offered.get(topic, ()),
                        )
                    self._writer.write(conns[topic], t_ns, data)
                    pending[topic] += 1
                if time.monotonic() - last_flush >= self.flush_period:
                    flush_chunk(self._writer)
                    self._flushed(pending)
                    last_flush = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a full disk must not kill the node
                self._error = str(exc) or type(exc).__name__
                self.get_logger().error(
                    f'the bag cannot be written: {exc}; recording stops here (what was '
                    'flushed before stays readable)'
                )
                self.exit_code = 1  # the node ends, and closes the bag (it ran on till Ctrl-C)

    def _flushed(self, pending: dict[str, int]) -> None:
        for topic, n in pending.items():
            self.counts[topic] += n
            pending[topic] = 0

    def close(self) -> Path | None:
        """Stop recording, close the bag and move it into place (once); its path, or None
        when there was nothing to close."""
        with self._close_lock:
            if self._closed or self._writer is None:
                if not self._closed and self.exit_code is None:
                    # (it exited 0, with no bag and not a word)
                    print(
                        f'recorder: no bag: the recording never started ({self.target} was '
                        'not opened)',
                        flush=True,
                    )
                    self.exit_code = 1
                self._closed = True
                return None
            self._closed = True
        for topic, sub in list(self._subs.items()):
            try:
                (self._markers.node if topic in UNSTAMPED else self).destroy_subscription(sub)
            except Exception:  # noqa: BLE001, S110 - the context may be gone at shutdown
                pass
        self._subs.clear()
        self._markers.stop()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join()
        assert self._tmp is not None
        try:
            if not self._error:  # (closing a broken file would write behind its break)
                self._writer.close()
                self._flushed(self._pending)
            (self._tmp / self.target.name).rename(self.target)
            shutil.rmtree(self._tmp, ignore_errors=True)
        except OSError as exc:
            print(f'recorder: the bag stays in {self._tmp}: {exc}', flush=True)
            self.exit_code = 1
            return None
        total = sum(self.counts.values())
        dropped = sum(self.dropped.values())
        # Logging may be gone at shutdown: say it on stdout as well.
        if dropped and not self._error:
            per_topic = ', '.join(f'{t} {n}' for t, n in self.dropped.items() if n)
            print(
                f'recorder: the bag {self.target} is incomplete: {total} messages written, '
                f'{dropped} dropped while the disk fell behind ({per_topic}; max_queue_mb '
                f'{self._max_queued / 1e6:g})',
                flush=True,
            )
            self.exit_code = 1
            return self.target
        if self._error:
            # It had reported success, with every message handed to the writer counted.
            print(
                f'recorder: the bag {self.target} is incomplete: writing it failed '
                f'({self._error}); the {total} messages flushed before are in it',
                flush=True,
            )
            self.exit_code = 1
            return self.target
        silent = [t for t, n in self.counts.items() if n == 0]
        print(f'recorder: {total} messages written to {self.target}', flush=True)
        if silent:
            print(
                f'recorder: nothing came on {", ".join(silent)}'
                + (' (no message at all: was the graph running?)' if total == 0 else ''),
                flush=True,
            )
        return self.target


def _executor() -> Any:
    """rclpy's EventsExecutor where it exists (it takes messages in C++: the recorder keeps
    up with a 500 Hz wrench and the camera), else the SingleThreadedExecutor."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        return SingleThreadedExecutor()
    return EventsExecutor()


def main() -> int:
    """``recorder_node``: exit code 2 on a bad parameter or bad input at start-up (a bag
    folder that exists), 1 when start-up failed for good (as
    :func:`slide_ros.lifecycle.run`)."""
    rclpy.init(args=sys.argv)
    try:
        node = RecorderNode()
    except (ParameterError, SlideError, OSError) as exc:
        print(f'recorder_node: {exc}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = _executor()
    executor.add_node(node)
    try:
        while rclpy.ok() and not node.gave_up and node.exit_code is None:
            executor.spin_once(timeout_sec=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    if node.exit_code is not None:
        return int(node.exit_code)
    return 1 if node.gave_up else 0


if __name__ == '__main__':
    raise SystemExit(main())
