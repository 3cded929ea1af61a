"""Bad bags (issues 16 and 19): cut, missing, garbage, without metadata or disagreeing with
it, without the topics a push needs, of unknown types, in other frames, with clocks that
jump. Each gives a one-line SlideInputError naming the topic or push, never a traceback;
what is usable is used and what was skipped is returned with the reason."""

from __future__ import annotations

from collections.abc import Callable, Iterable
import math
import os
from pathlib import Path
import shutil
from typing import Any

import numpy as np
import pytest
import yaml

from slide_core.errors import SlideInputError
from slide_core.identification import STEP_S
from slide_core.io import interfaces_typestore, open_bag, read_pushes
from slide_core.model import load_object

pytest.importorskip('mujoco')
from rosbags.highlevel import AnyReader  # noqa: E402
from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402

from slide_sim.record import record  # noqa: E402

Rewrite = Callable[[str, int, Any], Iterable[tuple[str, int, Any]]]


@pytest.fixture(scope='module')
def bag(tmp_path_factory: pytest.TempPathFactory, workcell) -> Path:
    path = tmp_path_factory.mktemp('bags') / 'box'
    record(load_object('box'), workcell, 3, seed=2, out=path)
    return path


@pytest.fixture(scope='module')
def store() -> Any:
    return interfaces_typestore()


def mcap_of(folder: Path) -> Path:
    (path,) = [p for p in folder.iterdir() if p.suffix == '.mcap']
    return path


def copy(bag: Path, tmp_path: Path, name: str = 'copy') -> Path:
    out = tmp_path / name
    shutil.copytree(bag, out)
    return out


def rewrite(
    src: Path,
    dst: Path,
    store: Any,
    change: Rewrite,
    types: dict[str, str] | None = None,
    storage: StoragePlugin = StoragePlugin.MCAP,
) -> Path:
    """Copy a bag message by message; ``change(topic, t_ns, msg)`` gives what to write
    (topics of other types than the source's in ``types``)."""
    with AnyReader([src]) as reader, Writer(dst, version=9, storage_plugin=storage) as writer:
        msgtypes = {c.topic: c.msgtype for c in reader.connections}
        msgtypes.update(types or {})
        conns: dict[str, Any] = {}
        for conn, t_ns, raw in reader.messages():
            msg = reader.deserialize(raw, conn.msgtype)
            for topic, t, out in change(conn.topic, t_ns, msg):
                if topic not in conns:
                    conns[topic] = writer.add_connection(topic, msgtypes[topic], typestore=store)
                writer.write(conns[topic], t, store.serialize_cdr(out, msgtypes[topic]))
    return dst


def keep(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
    return [(topic, t, msg)]


def test_a_bag_cut_at_half_identifies_from_its_complete_pushes(bag: Path, tmp_path: Path):
    cut = copy(bag, tmp_path)
    data = mcap_of(cut)
    os.truncate(data, data.stat().st_size // 2)
    read = read_pushes(cut, [0, 1, 2])
    assert [p.index for p in read.pushes] == [0]
    assert [s.index for s in read.skipped] == [1, 2]
    assert all('cut' in s.reason for s in read.skipped)
    assert any('stops inside a chunk' in w and 'are lost' in w for w in read.warnings)
    # metadata.yaml still counts what the full recording held: that is said too.
    assert any(w.startswith('metadata.yaml disagrees') for w in read.warnings)
    whole = read_pushes(bag, [0])
    np.testing.assert_allclose(read.pushes[0].push.f_W, whole.pushes[0].push.f_W)


def test_a_bag_cut_before_its_first_push_says_so(bag: Path, tmp_path: Path):
    cut = copy(bag, tmp_path)
    os.truncate(mcap_of(cut), 2000)
    with pytest.raises(SlideInputError, match=r'/push/start .*stops inside') as exc:
        read_pushes(cut)
    assert '\n' not in str(exc.value)


def test_missing_empty_and_garbage_data_files(bag: Path, tmp_path: Path):
    missing = copy(bag, tmp_path, 'missing')
    mcap_of(missing).unlink()
    with pytest.raises(SlideInputError, match='metadata.yaml names .* which the folder lacks'):
        read_pushes(missing)
    empty = copy(bag, tmp_path, 'empty')
    mcap_of(empty).write_bytes(b'')
    with pytest.raises(SlideInputError, match='is empty'):
        read_pushes(empty)
    garbage = copy(bag, tmp_path, 'garbage')
    mcap_of(garbage).write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(SlideInputError, match='not an MCAP file'):
        read_pushes(garbage)
    with pytest.raises(SlideInputError, match='no such bag'):
        read_pushes(tmp_path / 'absent')
    (tmp_path / 'folder').mkdir()
    with pytest.raises(SlideInputError, match='not a bag'):
        read_pushes(tmp_path / 'folder')


def test_a_damaged_chunk_loses_its_push_only(bag: Path, tmp_path: Path):
    bad = copy(bag, tmp_path)
    data = mcap_of(bad)
    raw = bytearray(data.read_bytes())
    # The second chunk (push 1: each push ends a chunk of its own) says it holds one byte
    # more than it does: it fails its size check.
    at, chunks = 8, []
    while raw[at] != 0x02:
        length = int.from_bytes(raw[at + 1 : at + 9], 'little')
        if raw[at] == 0x06:
            chunks.append(at)
        at += 9 + length
    size_at = chunks[1] + 9 + 16  # after the opcode, length, start and end times
    raw[size_at : size_at + 8] = (
        int.from_bytes(raw[size_at : size_at + 8], 'little') + 1
    ).to_bytes(8, 'little')
    data.write_bytes(bytes(raw))
    read = read_pushes(bad)
    assert [p.index for p in read.pushes] == [0, 2]
    assert [(s.index, s.reason) for s in read.skipped] == [
        (1, 'not in the bag (lost with data that is cut short or damaged: see the warnings)')
    ]
    assert any('malformed' in w and 'skipped' in w for w in read.warnings)


def test_without_metadata_or_as_a_bare_mcap_file(bag: Path, tmp_path: Path):
    bare = copy(bag, tmp_path)
    (bare / 'metadata.yaml').unlink()
    read = read_pushes(bare)
    assert [p.index for p in read.pushes] == [0, 1, 2]
    assert any('no metadata.yaml' in w for w in read.warnings)
    assert [p.index for p in read_pushes(mcap_of(bare)).pushes] == [0, 1, 2]


def test_an_unclosed_split_bag_is_read_in_the_order_it_was_written(
    bag: Path, tmp_path: Path, store: Any
):
    # Sorted by name, split_10 came before split_2: a replay went back in time once and
    # published the files between in one late burst.
    with AnyReader([bag]) as reader:
        edges = np.linspace(reader.start_time, reader.end_time + 1, 12)
    folder = tmp_path / 'split'
    folder.mkdir()
    for k in range(11):

        def part(topic: str, t: int, msg: Any, k: int = k) -> list[tuple[str, int, Any]]:
            return [(topic, t, msg)] if edges[k] <= t < edges[k + 1] else []

        written = rewrite(bag, tmp_path / f'part{k}', store, part)
        mcap_of(written).rename(folder / f'split_{k}.mcap')
    assert [f.name for f in open_bag(folder).files] == [f'split_{k}.mcap' for k in range(11)]
    assert [p.index for p in read_pushes(folder).pushes] == [0, 1, 2]


def test_metadata_that_disagrees_with_its_data_is_reported_and_the_data_read(
    bag: Path, tmp_path: Path
):
    liar = copy(bag, tmp_path)
    meta = yaml.safe_load((liar / 'metadata.yaml').read_text())
    for t in meta['rosbag2_bagfile_information']['topics_with_message_count']:
        if t['topic_metadata']['name'] == '/ft/wrench':
            t['message_count'] *= 2
        if t['topic_metadata']['name'] == '/pusher/pose':
            t['topic_metadata']['type'] = 'geometry_msgs/msg/PointStamped'
    (liar / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    read = read_pushes(liar)
    assert len(read.pushes) == 3
    assert any('/ft/wrench' in w and 'disagrees' in w for w in read.warnings)
    assert any('says /pusher/pose is geometry_msgs/msg/PointStamped' in w for w in read.warnings)
    (liar / 'metadata.yaml').write_text(':\n  - [unbalanced')
    read = read_pushes(liar)
    assert len(read.pushes) == 3 and any('unreadable' in w for w in read.warnings)


@pytest.mark.parametrize(
    ('dropped', 'message'),
    [
        ('/ft/wrench', r'no wrench: /ft/wrench not recorded; /netft/wrench not recorded'),
        ('/object/grid', r'no object grid: /object/grid not recorded'),
        ('/object/pose', r'no object poses: /object/pose not recorded, and /camera/.* not'),
        ('/push/start', r'no push markers: /push/start not recorded'),
        ('/pusher/pose', r'no fingertip poses: /pusher/pose not recorded'),
    ],
)
def test_a_bag_without_a_topic_a_push_needs(
    bag: Path, tmp_path: Path, store: Any, dropped: str, message: str
):
    out = rewrite(
        bag, tmp_path / 'out', store, lambda t, n, m: [] if t == dropped else keep(t, n, m)
    )
    with pytest.raises(SlideInputError, match=message):
        read_pushes(out)


@pytest.mark.parametrize(
    ('silent', 'message'),
    [
        ('/ft/wrench', 'no wrench: /ft/wrench has no messages'),
        ('/object/grid', 'no object grid: /object/grid has no messages'),
    ],
)
def test_topics_declared_without_messages(
    bag: Path, tmp_path: Path, store: Any, silent: str, message: str
):
    out = tmp_path / 'silent'
    with (
        AnyReader([bag]) as reader,
        Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer,
    ):
        conns = {
            c.topic: writer.add_connection(c.topic, c.msgtype, typestore=store)
            for c in reader.connections
        }
        for conn, t_ns, raw in reader.messages():
            if conn.topic != silent:
                writer.write(conns[conn.topic], t_ns, raw)
    with pytest.raises(SlideInputError, match=message):
        read_pushes(out)


def test_no_complete_push(bag: Path, tmp_path: Path, store: Any):
    # Every push aborted before its stroke ended: starts, no ends.
    aborted = rewrite(
        bag, tmp_path / 'aborted', store, lambda t, n, m: [] if t == '/push/end' else keep(t, n, m)
    )
    with pytest.raises(
        SlideInputError, match=r'no complete push \(push 0: no /push/end.*push 2: '
    ) as exc:
        read_pushes(aborted)
    assert '\n' not in str(exc.value)

    def second_aborted(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        return [] if topic == '/push/end' and msg.index == 1 else [(topic, t, msg)]

    read = read_pushes(rewrite(bag, tmp_path / 'one', store, second_aborted))
    assert [p.index for p in read.pushes] == [0, 2]
    assert read.skipped[0].index == 1 and 'no /push/end' in read.skipped[0].reason


def test_a_lost_end_and_a_lost_start_do_not_make_two_strokes_one_push(
    bag: Path, tmp_path: Path, store: Any
):
    # Push 0's end and push 1's start lost: push 0 ran on to push 1's end, its stroke and
    # the next one's motion read as one push, and push 1 was never said to be missing.
    def lost(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        gone = (topic == '/push/end' and msg.index == 0) or (
            topic == '/push/start' and msg.index == 1
        )
        return [] if gone else [(topic, t, msg)]

    whole = read_pushes(bag)
    read = read_pushes(rewrite(bag, tmp_path / 'lost', store, lost))
    assert [p.index for p in read.pushes] == [2]
    assert read.pushes[0].push.steps == whole.pushes[2].push.steps
    (skipped,) = read.skipped
    assert skipped.index == 0 and 'no /push/end of its own' in skipped.reason
    assert 'end of push 1' in skipped.reason
    assert any('/push/end for push 1 but no /push/start' in w for w in read.warnings)


def test_a_push_tried_again_keeps_its_index_and_the_others_theirs(
    bag: Path, tmp_path: Path, store: Any
):
    # The graph tries a failed push again under the same index: every push was numbered
    # by its order in the bag, so push 1 became 2 and --train picked other pushes.
    def tried_twice(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        out = [(topic, t, msg)]
        if topic == '/push/start' and msg.index == 1:
            import copy as copying

            attempt = copying.deepcopy(msg)  # an attempt 0.2 s before, aborted
            stamp = attempt.header.stamp
            ns = stamp.sec * 10**9 + stamp.nanosec - 200_000_000
            stamp.sec, stamp.nanosec = divmod(ns, 10**9)
            out.insert(0, (topic, t - 200_000_000, attempt))
        return out

    whole = read_pushes(bag)
    read = read_pushes(rewrite(bag, tmp_path / 'again', store, tried_twice))
    assert [p.index for p in read.pushes] == [0, 1, 2] and not read.skipped
    for a, b in zip(read.pushes, whole.pushes, strict=True):
        assert a.push.steps == b.push.steps
    assert any('push 1 started more than once' in w for w in read.warnings)


def test_unknown_message_types(bag: Path, tmp_path: Path, store: Any):
    # A wrench topic of a type the reader cannot decode, defined nowhere: named, refused.
    out = tmp_path / 'unknown'
    with (
        AnyReader([bag]) as reader,
        Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer,
    ):
        conns = {}
        for c in reader.connections:
            if c.topic == '/ft/wrench':
                conns[c.topic] = writer.add_connection(
                    c.topic, 'acme_msgs/msg/Force', msgdef='', rihs01='RIHS01_' + '0' * 64
                )
            else:
                conns[c.topic] = writer.add_connection(c.topic, c.msgtype, typestore=store)
        for conn, t_ns, raw in reader.messages():
            writer.write(conns[conn.topic], t_ns, raw)
    with pytest.raises(
        SlideInputError, match=r'/ft/wrench its type acme_msgs/msg/Force is unknown'
    ):
        read_pushes(out)

    # A wrench of another known type than WrenchStamped: named with both types.
    def as_vector(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic != '/ft/wrench':
            return [(topic, t, msg)]
        return [(topic, t, msg.wrench.force)]

    other = rewrite(
        bag, tmp_path / 'other', store, as_vector, {'/ft/wrench': 'geometry_msgs/msg/Vector3'}
    )
    with pytest.raises(SlideInputError, match='its type is geometry_msgs/msg/Vector3, not'):
        read_pushes(other)


def test_an_end_marker_of_another_type_is_named_not_taken_for_aborted_pushes(
    bag: Path, tmp_path: Path, store: Any
):
    # /push/end as a plain integer: every push was said to have been aborted.
    def as_int(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic != '/push/end':
            return [(topic, t, msg)]
        return [(topic, t, store.types['std_msgs/msg/Int32'](data=msg.index))]

    other = rewrite(bag, tmp_path / 'int', store, as_int, {'/push/end': 'std_msgs/msg/Int32'})
    with pytest.raises(SlideInputError) as exc:
        read_pushes(other)
    assert "the bag's /push/end its type is std_msgs/msg/Int32" in str(exc.value)


def test_undecodable_messages_are_counted_and_skipped(bag: Path, tmp_path: Path, store: Any):
    out = tmp_path / 'torn'
    with (
        AnyReader([bag]) as reader,
        Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer,
    ):
        conns = {
            c.topic: writer.add_connection(c.topic, c.msgtype, typestore=store)
            for c in reader.connections
        }
        for k, (conn, t_ns, raw) in enumerate(reader.messages()):
            torn = conn.topic == '/pusher/pose' and k % 50 == 0
            writer.write(conns[conn.topic], t_ns, raw[:10] if torn else raw)
    read = read_pushes(out)
    assert len(read.pushes) == 3
    assert any(w.startswith('/pusher/pose: ') and 'do not decode' in w for w in read.warnings)


SIM_S = 1_700_000_000
"""How far a wall clock's stamps lie after a simulation's that started at 0 [s]."""


def on_sim_time(msg: Any) -> Any:
    """The message as a graph under sim time stamps it (its log time stays the wall's)."""
    if hasattr(msg, 'header'):
        msg.header.stamp.sec -= SIM_S
    elif hasattr(msg, 'stamp'):  # a push marker
        msg.stamp.sec -= SIM_S
    return msg


@pytest.mark.parametrize('sim_time', [False, True])
def test_a_clock_that_jumps_skips_the_pushes_it_spoils(
    bag: Path, tmp_path: Path, store: Any, sim_time: bool
):
    # Under sim time the windows (stamps) were compared with the recorder's log times: a
    # jump was never inside one, and the spoilt push was built.
    with AnyReader([bag]) as reader:
        starts = sorted(t for c, t, _ in reader.messages() if c.topic == '/push/start')

    def jump(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic == '/ft/wrench' and starts[1] <= t < starts[2]:
            msg.header.stamp.sec += 10
        return [(topic, t, on_sim_time(msg) if sim_time else msg)]

    out = rewrite(bag, tmp_path / 'jump', store, jump)
    read = read_pushes(out)
    assert [p.index for p in read.pushes] == [0, 2]
    (skip,) = read.skipped
    assert (
        skip.index == 1
        and 'clock of /ft/wrench jumps' in skip.reason
        and '+10.00 s' in skip.reason
    )


def test_a_push_left_out_is_named_once(bag: Path, tmp_path: Path, store: Any):
    # 'push 1 skipped: push 1: no wrench for ...': the reason named its push again.
    with AnyReader([bag]) as reader:
        marks = {
            (c.topic, reader.deserialize(raw, c.msgtype).index): t
            for c, t, raw in reader.messages()
            if c.topic in ('/push/start', '/push/end')
        }
    middle = (marks['/push/start', 1] + marks['/push/end', 1]) // 2

    def silent(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic == '/ft/wrench' and middle - 2 * 10**8 <= t < middle + 2 * 10**8:
            return []
        return [(topic, t, msg)]

    read = read_pushes(rewrite(bag, tmp_path / 'silent', store, silent))
    (skip,) = read.skipped
    assert skip.index == 1 and skip.reason.startswith('no wrench for '), skip.reason
    assert read.report()[-1].startswith('push 1 skipped: no wrench for ')


@pytest.mark.parametrize('sim_time', [False, True])
def test_pushes_after_the_object_was_acquired_anew_are_not_read_on_the_first_grid(
    bag: Path, tmp_path: Path, store: Any, sim_time: bool
):
    # Under sim time the grid in force was looked up by a stamp among log times: always
    # the first grid, and another object's pushes were fitted on it.
    import copy as copying

    with AnyReader([bag]) as reader:
        starts = sorted(t for c, t, _ in reader.messages() if c.topic == '/push/start')
    sent = []

    def reacquired(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        out = [(topic, t, on_sim_time(msg) if sim_time else msg)]
        if topic == '/object/grid' and not sent:
            other = copying.deepcopy(msg)
            other.heights = np.asarray(other.heights, dtype=np.float32) + np.float32(0.01)
            other.header.stamp.sec += int((starts[2] - t) // 10**9) - 1
            out.append((topic, starts[2] - 10**9, other))
            sent.append(True)
        return out

    read = read_pushes(rewrite(bag, tmp_path / 'again', store, reacquired))
    assert [p.index for p in read.pushes] == [0, 1]
    (skip,) = read.skipped
    assert skip.index == 2 and 'acquired anew' in skip.reason


def test_wrenches_in_the_sensor_frame_are_turned_with_the_fingertip_orientation(
    bag: Path, tmp_path: Path, store: Any
):
    yaw = 0.6  # the fingertip (and the sensor on it) turned about z

    def in_sensor_frame(mount: float) -> Rewrite:
        """The bag as a sensor turned by ``mount`` on the fingertip at ``yaw`` records it."""
        c, s = math.cos(yaw + mount), math.sin(yaw + mount)

        def change(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
            if topic == '/pusher/pose':
                q = msg.pose.orientation
                q.x, q.y, q.z, q.w = 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)
            if topic == '/ft/wrench':
                f = msg.wrench.force
                f.x, f.y = c * f.x + s * f.y, -s * f.x + c * f.y  # R_WS^T f_W
                msg.header.frame_id = 'ft_sensor'
                return [('/netft/wrench', t, msg)]
            return [(topic, t, msg)]

        return change

    types = {'/netft/wrench': 'geometry_msgs/msg/WrenchStamped'}
    out = rewrite(bag, tmp_path / 'sensor', store, in_sensor_frame(0.0), types)
    turned = read_pushes(out)
    assert turned.wrench_from.startswith('/netft/wrench') and 'orientation' in turned.wrench_from
    for a, b in zip(turned.pushes, read_pushes(bag).pushes, strict=True):
        np.testing.assert_allclose(a.push.f_W, b.push.f_W, atol=1e-9)

    # A sensor turned a quarter on the fingertip (the executor's sensor_mount): read with
    # its mount it is the same push; read without it, forces a quarter off, and said so.
    quarter = math.pi / 2
    turned_out = rewrite(bag, tmp_path / 'mounted', store, in_sensor_frame(quarter), types)
    mount = [0.0, 0.0, math.sin(quarter / 2), math.cos(quarter / 2)]
    right = read_pushes(turned_out, sensor_mount=mount)
    assert right.wrench_from.endswith('and the sensor mount')
    for a, b in zip(right.pushes, read_pushes(bag).pushes, strict=True):
        np.testing.assert_allclose(a.push.f_W, b.push.f_W, atol=1e-9)
    square = read_pushes(turned_out)
    assert 'give its mount when it is turned' in square.wrench_from
    assert not np.allclose(square.pushes[0].push.f_W, right.pushes[0].push.f_W, atol=1e-3)
    with pytest.raises(SlideInputError, match='a sensor mount is a unit quaternion'):
        read_pushes(turned_out, sensor_mount=[0.0, 0.0, 0.0])
    # Given for a bag of the executor's /ft/wrench it changed nothing, and nothing said so.
    unused = read_pushes(bag, sensor_mount=mount)
    assert any(w.startswith('the sensor mount was not used') for w in unused.warnings)
    assert not any('sensor mount' in w for w in read_pushes(bag).warnings)

    def camera_frame(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic == '/ft/wrench':
            msg.header.frame_id = 'camera_link'
        return [(topic, t, msg)]

    with pytest.raises(SlideInputError, match="frame 'camera_link', neither the table frame"):
        read_pushes(rewrite(bag, tmp_path / 'camera', store, camera_frame))

    def poses_elsewhere(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic == '/object/pose':
            msg.header.frame_id = 'camera_link'
        return [(topic, t, msg)]

    with pytest.raises(
        SlideInputError, match="/object/pose: every pose is in frame 'camera_link'"
    ):
        read_pushes(rewrite(bag, tmp_path / 'poses', store, poses_elsewhere))


def test_an_sqlite3_bag_reads_alike(bag: Path, tmp_path: Path, store: Any):
    out = rewrite(bag, tmp_path / 'db', store, keep, storage=StoragePlugin.SQLITE3)
    a, b = read_pushes(out), read_pushes(bag)
    assert [p.index for p in a.pushes] == [0, 1, 2]
    for pa, pb in zip(a.pushes, b.pushes, strict=True):
        np.testing.assert_allclose(pa.push.f_W, pb.push.f_W)


def test_a_bag_from_before_the_grids_coverage_reads_as_whole_cells(
    bag: Path, tmp_path: Path, store: Any
):
    # A recording made before ObjectGrid carried each cell's coverage and the outline
    # holds the old type: its grid reads back whole, as squares, and its pushes as before.
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from slide_core.io.bagfile import interfaces_dir

    old = get_typestore(Stores.ROS2_JAZZY)
    types: dict[str, Any] = {}
    for path in sorted(interfaces_dir().glob('*.msg')):
        text = path.read_text()
        if path.stem == 'ObjectGrid':
            assert 'float32[] coverage' in text and 'float64[] outline' in text
            text = text.replace('float32[] coverage', '').replace('float64[] outline', '')
        types.update(get_types_from_msg(text, f'slide_interfaces/msg/{path.stem}'))
    old.register(types)
    OldGrid = old.types['slide_interfaces/msg/ObjectGrid']

    def drop_coverage(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic == '/object/grid':
            fields = {k: getattr(msg, k) for k in OldGrid.__dataclass_fields__}
            return [(topic, t, OldGrid(**fields))]
        if 'GroundTruth' in type(msg).__name__:
            return []  # it holds a grid too; the pushes do not need it
        return [(topic, t, msg)]

    older = rewrite(bag, tmp_path / 'older', old, drop_coverage)
    read = read_pushes(older)
    assert read.grid.whole and read.grid.n == load_object('box').grid.n
    assert read.grid.outline is None
    assert [p.index for p in read.pushes] == [0, 1, 2]
    np.testing.assert_allclose(read.pushes[0].push.f_W, read_pushes(bag, [0]).pushes[0].push.f_W)


LATE_NS = 100_000_000  # 0.1 s: how late a loaded graph once delivered a marker


def late_markers(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
    """The push markers recorded late, as a loaded graph delivers them."""
    return [(topic, t + LATE_NS if topic in ('/push/start', '/push/end') else t, msg)]


def test_markers_place_a_push_by_their_stamp_not_by_when_they_were_recorded(
    bag: Path, tmp_path: Path, store: Any
):
    late = read_pushes(rewrite(bag, tmp_path / 'late', store, late_markers))
    assert late.warnings == ()
    for a, b in zip(late.pushes, read_pushes(bag).pushes, strict=True):
        assert a.push.steps == b.push.steps
        np.testing.assert_array_equal(a.X_WO0, b.X_WO0)
        np.testing.assert_array_equal(a.push.f_W, b.push.f_W)


def unstamped_warnings(count: int, why: str) -> tuple[str, ...]:
    return tuple(
        f'{topic}: {count} marker(s) {why}: placed by when they were recorded, which can be '
        'late under load'
        for topic in ('/push/start', '/push/end')
    )


NO_STAMP = 'without a stamp (std_msgs/msg/UInt32 of an older recording, or a zero stamp)'


@pytest.mark.parametrize('kind', ['UInt32', 'zero stamp'])
def test_markers_without_a_stamp_are_read_by_when_they_were_recorded(
    bag: Path, tmp_path: Path, store: Any, kind: str
):
    # Before the markers were stamped they were std_msgs/UInt32; a publisher may also leave
    # a PushMarker's stamp unset. Such a bag still reads, its pushes opening when the
    # markers were recorded, and it says so.
    def unstamped(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic in ('/push/start', '/push/end'):
            if kind == 'UInt32':
                msg = store.types['std_msgs/msg/UInt32'](data=msg.index)
            else:
                msg.header.stamp.sec, msg.header.stamp.nanosec = 0, 0
        return late_markers(topic, t, msg)

    types = dict.fromkeys(('/push/start', '/push/end'), 'std_msgs/msg/UInt32')
    out = rewrite(bag, tmp_path / 'older', store, unstamped, types if kind == 'UInt32' else None)
    older = read_pushes(out)
    assert older.warnings == unstamped_warnings(3, NO_STAMP)
    assert [p.index for p in older.pushes] == [0, 1, 2]
    # Opened 0.1 s late: the steps of that 0.1 s are missing from each push.
    steps = [p.push.steps for p in read_pushes(bag).pushes]
    assert [p.push.steps for p in older.pushes] == [n - round(0.1 / STEP_S) for n in steps]


@pytest.mark.parametrize('which', ['one jumped', 'another clock'])
def test_markers_stamped_off_the_datas_clock_are_placed_by_when_they_were_recorded(
    bag: Path, tmp_path: Path, store: Any, which: str
):
    # A clock that jumped once, or an executor on another clock than the data's (simulated
    # time against the wall clock): the stamps cannot place the pushes; the log can.
    def off(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic in ('/push/start', '/push/end') and (which == 'another clock' or msg.index == 1):
            msg.header.stamp.sec -= 1000
        return [(topic, t, msg)]

    read = read_pushes(rewrite(bag, tmp_path / 'off', store, off))
    count = 1 if which == 'one jumped' else 3
    why = 'stamped more than 5 s off the clock of /pusher/pose (another clock, or one that jumped)'
    assert read.warnings == unstamped_warnings(count, why)
    for a, b in zip(read.pushes, read_pushes(bag).pushes, strict=True):
        assert a.index == b.index and a.push.steps == b.push.steps
        np.testing.assert_array_equal(a.X_WO0, b.X_WO0)


def test_a_push_during_which_the_object_leant_over_is_not_read(
    bag: Path, tmp_path: Path, store: Any
):
    # A toppling push was replayed as a planar one: its poses, yaw alone, fitted maps to an
    # object that was falling. Push 1's poses lean 30 degrees from halfway through its
    # stroke; push 2's lean 5 degrees throughout (a tracker's noise, an uneven table).
    with AnyReader([bag]) as reader:
        marks = sorted(
            (t, reader.deserialize(raw, c.msgtype).index)
            for c, t, raw in reader.messages()
            if c.topic in ('/push/start', '/push/end')
        )
    (s1,), (e1,) = ([t for t, i in marks[k::2] if i == 1] for k in (0, 1))
    (s2,) = [t for t, i in marks[::2] if i == 2]

    def lean(msg: Any, degrees: float) -> Any:
        half = math.radians(degrees) / 2  # about x, after the yaw: q_yaw * q_x
        q = msg.pose.orientation
        w, z, c, s = q.w, q.z, math.cos(half), math.sin(half)
        q.w, q.x, q.y, q.z = w * c, w * s, z * s, z * c
        return msg

    def tipped(topic: str, t: int, msg: Any) -> list[tuple[str, int, Any]]:
        if topic == '/object/pose' and t >= (s1 + e1) // 2 and t < s2:
            msg = lean(msg, 30.0)
        elif topic == '/object/pose' and t >= s2:
            msg = lean(msg, 5.0)
        return [(topic, t, msg)]

    read = read_pushes(rewrite(bag, tmp_path / 'tipped', store, tipped))
    assert [p.index for p in read.pushes] == [0, 2]
    (skip,) = read.skipped
    assert skip.index == 1
    assert 'leant up to 30 degrees' in skip.reason and 'tipped over' in skip.reason
    whole = read_pushes(bag, [2])
    np.testing.assert_allclose(read.pushes[1].X_obs, whole.pushes[0].X_obs, atol=1e-9)
