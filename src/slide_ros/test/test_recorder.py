"""The recorder node over real DDS: the episode topics into a bag that is always complete
(closed and moved into place on SIGINT or SIGTERM), what a killed recorder had flushed
still readable, and bad parameters refused in one line."""

from __future__ import annotations

from collections.abc import Iterator
import os
from pathlib import Path
import signal
import subprocess
import time
from typing import Any

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from slide_bringup.graph import NodeSpec  # noqa: E402
from slide_bringup.runner import command  # noqa: E402
from slide_core.io import grid_to_msg, open_bag, stamp_to_s  # noqa: E402
from slide_core.model import load_object  # noqa: E402
from slide_interfaces.msg import ObjectGrid, PushMarker  # noqa: E402

pytestmark = pytest.mark.ros
from slide_ros.params import ParameterError  # noqa: E402
from slide_ros.qos import LATCHED, RELIABLE, SENSOR  # noqa: E402
from slide_ros.recorder_node import RecorderNode  # noqa: E402


class Publisher:
    """A node that publishes like the graph: a latched grid, wrenches, push markers."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node('episode', context=self.context)
        self.grid = self.node.create_publisher(ObjectGrid, '/object/grid', LATCHED)
        self.wrench = self.node.create_publisher(WrenchStamped, '/ft/wrench', RELIABLE)
        self.raw = self.node.create_publisher(WrenchStamped, '/netft/wrench', SENSOR)
        self.start = self.node.create_publisher(PushMarker, '/push/start', RELIABLE)

    def publish_grid(self) -> None:
        spec = load_object('box')
        msg = grid_to_msg(spec.grid, np.array([0.4, 0.0, 0.3]), ObjectGrid())
        msg.header.frame_id = 'table'
        self.grid.publish(msg)

    def recorded(self, topics: list[str], timeout: float = 60.0) -> bool:
        """The recorder subscribes to every one of ``topics`` and our publishers matched it."""
        pubs = {
            '/object/grid': self.grid,
            '/ft/wrench': self.wrench,
            '/netft/wrench': self.raw,
            '/push/start': self.start,
        }
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            subscribed = all(
                any(
                    s.node_name == 'recorder' for s in self.node.get_subscriptions_info_by_topic(t)
                )
                for t in topics
            )
            if subscribed and all(pubs[t].get_subscription_count() > 0 for t in topics):
                return True
            time.sleep(0.1)
        return False

    def publish_wrenches(self, n: int, first: int = 0) -> None:
        for k in range(first, first + n):
            msg = WrenchStamped()
            msg.header.frame_id = 'table'
            msg.header.stamp = self.node.get_clock().now().to_msg()
            msg.wrench.force.x, msg.wrench.force.y = float(k), -0.5 * k
            self.wrench.publish(msg)
            if k % 10 == 0:
                marker = PushMarker(index=k // 10)
                marker.header.stamp = msg.header.stamp
                self.start.publish(marker)
            time.sleep(0.002)

    def close(self) -> None:
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def episode() -> Iterator[Publisher]:
    p = Publisher()
    yield p
    p.close()


def start_recorder(bag: Path, log: Path, **parameters: Any) -> subprocess.Popen[bytes]:
    spec = NodeSpec('slide_ros', 'recorder_node', 'recorder', {'bag': str(bag), **parameters})
    with log.open('wb') as out:
        return subprocess.Popen(
            command(spec), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes], sig: int) -> int:
    os.killpg(process.pid, sig)
    return process.wait(timeout=30)


def wrenches(bag: Path) -> list[tuple[float, float, str]]:
    b = open_bag(bag)
    out = []
    for topic, _, raw in b.messages(['/ft/wrench']):
        msg = b.decode(topic, raw)
        out.append((msg.wrench.force.x, msg.wrench.force.y, msg.header.frame_id))
    return out


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM])
def test_a_recording_is_a_complete_bag_when_the_recorder_is_stopped(
    episode: Publisher, tmp_path: Path, sig: int
) -> None:
    bag = tmp_path / 'episode'
    episode.publish_grid()  # before the recorder starts: latched, still recorded
    recorder = start_recorder(bag, tmp_path / 'recorder.log')
    try:
        assert episode.recorded(['/object/grid', '/ft/wrench', '/push/start', '/netft/wrench'])
        episode.publish_wrenches(300)
        time.sleep(0.5)
    finally:
        code = stop(recorder, sig)
    log = (tmp_path / 'recorder.log').read_text()
    assert code == 0, log
    assert '331 messages written to' in log  # the grid, 300 wrenches, 30 markers
    # Moved into place whole: the folder and its metadata, nothing hidden left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ['episode', 'recorder.log']
    assert sorted(p.name for p in bag.iterdir()) == ['episode.mcap', 'metadata.yaml']
    # Each topic's QoS is in the metadata, as ros2 bag record writes it: ros2 bag play
    # offers the grid latched again (the profiles were empty, and it played it volatile).
    import yaml

    topics = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    offered = {
        t['topic_metadata']['name']: t['topic_metadata']['offered_qos_profiles']
        for t in topics['topics_with_message_count']
    }
    grid_qos = offered['/object/grid']
    grid_qos = yaml.safe_load(grid_qos) if isinstance(grid_qos, str) else grid_qos
    assert grid_qos[0]['durability'] in (1, 'transient_local')
    wrench_qos = offered['/ft/wrench']
    wrench_qos = yaml.safe_load(wrench_qos) if isinstance(wrench_qos, str) else wrench_qos
    assert wrench_qos[0]['durability'] in (2, 'volatile')
    b = open_bag(bag)
    assert b.warnings == [] and not b.truncated
    assert b.topics['/object/grid'].type == 'slide_interfaces/msg/ObjectGrid'
    assert b.topics['/object/grid'].count == 1
    assert b.topics['/push/start'].count == 30
    # The markers keep their stamps: each is its push's first wrench's.
    markers = [b.decode(t, raw) for t, _, raw in b.messages(['/push/start'])]
    assert [m.index for m in markers] == list(range(30))
    firsts = [b.decode(t, raw) for t, _, raw in b.messages(['/ft/wrench'])][::10]
    assert [stamp_to_s(m.header.stamp) for m in markers] == [
        stamp_to_s(w.header.stamp) for w in firsts
    ]
    # Reliable topics arrive whole and as sent (the bytes were written as they came).
    assert wrenches(bag) == [(float(k), -0.5 * k, 'table') for k in range(300)]


def test_a_killed_recorder_leaves_what_it_had_flushed(episode: Publisher, tmp_path: Path):
    bag = tmp_path / 'episode'
    recorder = start_recorder(bag, tmp_path / 'recorder.log', flush_period_s=0.2)
    try:
        assert episode.recorded(['/ft/wrench', '/push/start'])
        episode.publish_wrenches(200)
        time.sleep(1.0)  # several flush periods
    finally:
        stop(recorder, signal.SIGKILL)
    # No bag where a finished one would be; the hidden folder holds what was flushed.
    assert not bag.exists()
    (hidden,) = [p for p in tmp_path.iterdir() if p.name.startswith('.episode.')]
    partial = hidden / 'episode'
    b = open_bag(partial)
    assert any('no metadata.yaml' in w for w in b.warnings)
    assert any('without its summary and footer' in w for w in b.warnings)
    assert wrenches(partial) == [(float(k), -0.5 * k, 'table') for k in range(200)]
    # Its log named where the data went; a recorder started again for the same bag says
    # where the earlier one was left (it began a new bag, and said nothing of it).
    assert (
        f'(written in {hidden} until the recording ends' in (tmp_path / 'recorder.log').read_text()
    )
    again = start_recorder(bag, tmp_path / 'again.log', use_sim_time=True)
    try:
        # With use_sim_time and no /clock it still starts (it waited for /clock, silent).
        # (The killed recorder's subscriptions linger in DDS: its log line is waited for.)
        end = time.monotonic() + 60
        while 'recording 14 topics into' not in (tmp_path / 'again.log').read_text():
            assert time.monotonic() < end, (tmp_path / 'again.log').read_text()
            time.sleep(0.1)
        time.sleep(1.0)  # its subscriptions made
        episode.publish_wrenches(5)
        time.sleep(0.5)
    finally:
        assert stop(again, signal.SIGINT) == 0
    log = (tmp_path / 'again.log').read_text()
    assert f'an earlier recording into {bag} was left in {hidden}' in log
    # The topics on which nothing came are named.
    assert 'recorder: nothing came on /object/grid' in log


def test_a_full_disk_ends_the_recording_with_what_was_flushed_and_says_so(
    episode: Publisher, tmp_path: Path
) -> None:
    # The recorder wrote on behind the failed chunk (everything after it unreadable, even
    # once there was room), counted what it had handed the writer, said "900 messages
    # written" and exited 0. A file size limit stands for the full disk (the write fails
    # with EFBIG as it would with ENOSPC).
    import re
    import resource

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

    bag = tmp_path / 'episode'
    spec = NodeSpec(
        'slide_ros', 'recorder_node', 'recorder', {'bag': str(bag), 'flush_period_s': 0.1}
    )
    log = tmp_path / 'recorder.log'
    with log.open('wb') as out:
        recorder = subprocess.Popen(
            command(spec),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=small_disk,
        )
    try:
        assert episode.recorded(['/ft/wrench', '/push/start'])
        episode.publish_wrenches(1500)
        time.sleep(1.0)
    finally:
        code = stop(recorder, signal.SIGINT)
    text = log.read_text()
    assert code == 1, text
    found = re.search(r'the bag .* is incomplete: writing it failed .*; the (\d+) messages', text)
    assert found, text
    kept = len(wrenches(bag))  # in place, readable up to the failure
    assert 0 < kept < 1500
    assert open_bag(bag).warnings  # and says what it lacks


def test_a_disk_slower_than_the_streams_drops_past_the_queue_bound_and_says_so(
    episode: Publisher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # The queue to the writer had no bound: a disk slower than the streams took the
    # memory. A writer that takes 20 ms a message stands for the slow disk.
    from rosbags.rosbag2 import Writer

    from slide_ros.testing import spinning

    write = Writer.write

    def slow(self: Any, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.02)
        write(self, *args, **kwargs)

    monkeypatch.setattr(Writer, 'write', slow)
    overrides = [
        Parameter('bag', value=str(tmp_path / 'bag')),
        Parameter('topics', value=['/ft/wrench']),
        Parameter('max_queue_mb', value=0.01),  # about 80 wrenches
    ]
    with spinning(lambda c: RecorderNode(context=c, parameter_overrides=overrides)) as node:
        assert episode.recorded(['/ft/wrench'])
        episode.publish_wrenches(600)
        time.sleep(0.5)
        node.close()
        dropped = node.dropped['/ft/wrench']
        assert node.exit_code == 1
    kept = len(wrenches(tmp_path / 'bag'))
    # (how many arrive before the bound is reached depends on the executor's pace: under
    # the whole suite's load 65 of 600 were dropped, on an idle machine over 200)
    assert dropped > 0 and kept > 0
    assert kept + dropped <= 600  # (DDS may lose a few itself)
    out = capsys.readouterr().out
    assert f'is incomplete: {kept} messages written, {dropped} dropped while the disk' in out


def test_configured_again_after_cleanup_it_says_it_records_no_more(tmp_path: Path) -> None:
    # cleanup, configure, activate all said SUCCESS, and nothing more was recorded.
    from rclpy.lifecycle import TransitionCallbackReturn

    context = Context()
    rclpy.init(context=context)
    overrides = [
        Parameter('bag', value=str(tmp_path / 'bag')),
        Parameter('autostart', value=False),
    ]
    node = RecorderNode(context=context, parameter_overrides=overrides)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        assert (tmp_path / 'bag' / 'metadata.yaml').is_file()  # closed and in place
        assert node.trigger_configure() != TransitionCallbackReturn.SUCCESS
    finally:
        node.destroy_node()
        context.try_shutdown()


def test_bad_parameters_are_refused_in_one_line(tmp_path: Path) -> None:
    def run(**parameters: Any) -> subprocess.CompletedProcess[str]:
        spec = NodeSpec('slide_ros', 'recorder_node', 'recorder', parameters)
        return subprocess.run(
            command(spec), capture_output=True, text=True, timeout=60, check=False
        )

    out = run(bag='')
    assert out.returncode == 2 and 'bag: give the output folder' in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    context = Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(ParameterError, match='topics: /nope; record episode topics'):
            RecorderNode(
                context=context,
                parameter_overrides=[
                    Parameter('bag', value=str(tmp_path / 'b')),
                    Parameter('topics', value=['/ft/wrench', '/nope']),
                ],
            )
    finally:
        rclpy.shutdown(context=context)
    (tmp_path / 'exists').mkdir()
    # Bad input, not retried: with the default 10 retries it took minutes, then exit 1.
    out = run(bag=str(tmp_path / 'exists'))
    assert out.returncode == 2
    assert 'exists: give a new folder for the bag' in out.stdout + out.stderr
    assert 'Traceback' not in out.stdout + out.stderr
