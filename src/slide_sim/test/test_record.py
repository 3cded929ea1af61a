"""Recorded pushes as a rosbag2 that rosbags reads back, the same for the same seed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from slide_core.errors import SlideInputError
from slide_core.io import read_pushes
from slide_core.model import load_object, parse_spec
from slide_sim.record import TOPICS, record
from slide_sim.tracker import Tracking


def read(bag: Path) -> dict[str, list[tuple[int, bytes]]]:
    out: dict[str, list[tuple[int, bytes]]] = {}
    with AnyReader([bag]) as reader:
        for conn, t, raw in reader.messages():
            out.setdefault(conn.topic, []).append((t, bytes(raw)))
    return out


def test_bag_holds_every_push_and_topic_and_reads_back(tmp_path: Path, workcell) -> None:
    bag = tmp_path / 'hammer'
    summary = record(load_object('hammer'), workcell, 2, seed=3, out=bag)
    assert summary['pushes'] == 2 and not summary['fell'] and summary['ok']
    data = read(bag)
    assert set(data) == set(TOPICS)
    assert len(data['/push/start']) == len(data['/push/end']) == len(data['/push/primitive']) == 2
    assert len(data['/ground_truth']) == 3 and len(data['/object/grid']) == 1
    assert len(data['/ft/wrench']) > 5 * len(data['/object/pose']) - 10
    with AnyReader([bag]) as reader:
        by_topic = {c.topic: c for c in reader.connections}
        starts = [
            (t, reader.deserialize(r, 'slide_interfaces/msg/PushMarker'))
            for _, t, r in reader.messages([by_topic['/push/start']])
        ]
        assert [m.index for _, m in starts] == [0, 1]
        # The markers carry the stroke's start, the time they are recorded at here.
        assert [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in starts] == [
            t for t, _ in starts
        ]
        _, _, raw = next(iter(reader.messages([by_topic['/object/grid']])))
        grid = reader.deserialize(raw, 'slide_interfaces/msg/ObjectGrid')
        assert grid.rows * grid.cols == len(grid.occupancy) and int(np.sum(grid.occupancy)) == 36
        _, _, raw = next(iter(reader.messages([by_topic['/ground_truth']])))
        truth = reader.deserialize(raw, 'slide_interfaces/msg/GroundTruth')
        assert truth.name == 'hammer' and np.sum(truth.model.mass) == pytest.approx(
            0.5957, abs=1e-3
        )
    # Push start and end bracket the wrench samples of their stroke, in time order.
    stamps = [t for t, _ in data['/ft/wrench']]
    assert stamps == sorted(stamps)
    assert data['/push/start'][0][0] < data['/push/end'][0][0] < data['/push/start'][1][0]


def test_same_seed_same_bag_contents(tmp_path: Path, workcell) -> None:
    spec = load_object('toothpaste')
    record(spec, workcell, 1, seed=5, out=tmp_path / 'a')
    record(spec, workcell, 1, seed=5, out=tmp_path / 'b')
    record(spec, workcell, 1, seed=6, out=tmp_path / 'c')
    a, b, c = read(tmp_path / 'a'), read(tmp_path / 'b'), read(tmp_path / 'c')
    assert a == b
    assert a['/push/primitive'] != c['/push/primitive']


def test_bad_requests(tmp_path: Path, workcell) -> None:
    spec = load_object('hammer')
    with pytest.raises(SlideInputError, match='at least 1'):
        record(spec, workcell, 0, seed=0, out=tmp_path / 'x')
    (tmp_path / 'exists').mkdir()
    with pytest.raises(SlideInputError, match='exists'):
        record(spec, workcell, 1, seed=0, out=tmp_path / 'exists')
    # Refused before the twin runs, not with an OSError from the bag writer.
    (tmp_path / 'file').write_text('')
    with pytest.raises(SlideInputError, match='cannot write in'):
        record(spec, workcell, 1, seed=0, out=tmp_path / 'file' / 'bag')
    # An object that would start over the table's edge at the default pose (a 1 m one was
    # recorded hanging 15 cm over it, and said ok).
    long = parse_spec(
        {
            'name': 'long',
            'cell_size': 0.02,
            'height': 0.02,
            'mass': [[0.01] * 40],
            'friction': [[0.4] * 40],
        }
    )
    with pytest.raises(SlideInputError, match=r'spans x -0\.050 to 0\.750 m .* past the table'):
        record(
            long, replace(workcell, table=replace(workcell.table, depth=0.7)), 1, 0, tmp_path / 'o'
        )
    assert not (tmp_path / 'o').exists()


def test_an_interrupted_recording_keeps_the_pushes_it_made(
    tmp_path: Path, workcell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C after minutes of pushes threw the whole bag away.
    spec = load_object('toothpaste')

    def after_two(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as stopped:
        record(spec, workcell, 5, seed=0, out=tmp_path / 'kept', progress=after_two)
    assert stopped.value.__notes__ == [f'the bag {tmp_path / "kept"} holds the 2 push(es) '
                                       'made before it']  # fmt: skip
    assert [pd.index for pd in read_pushes(tmp_path / 'kept').pushes] == [0, 1]
    # Interrupted in its first push, it leaves no bag, nor the folders made for it.
    from slide_sim import twin as twin_module

    def interrupted(self: object, *args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(twin_module.Twin, 'push', interrupted)
        for out in (tmp_path / 'bag', tmp_path / 'a' / 'b' / 'bag'):
            with pytest.raises(KeyboardInterrupt):
                record(spec, workcell, 3, seed=0, out=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['kept']
    # ... and the same path records cleanly afterwards, its data named after the bag (a
    # hidden temporary name was dropped by `cp bag/* elsewhere/`).
    assert record(spec, workcell, 1, seed=0, out=tmp_path / 'bag')['pushes'] == 1
    assert sorted(p.name for p in (tmp_path / 'bag').iterdir()) == ['bag.mcap', 'metadata.yaml']
    assert sorted(p.name for p in tmp_path.iterdir()) == ['bag', 'kept']


def test_a_disk_that_fills_keeps_the_pushes_written_before_it(
    tmp_path: Path, workcell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk ended the recording with a traceback, and the whole bag was thrown away:
    # the pushes flushed before it too. Here the third push's flush finds the disk full,
    # and from then on nothing more can be written (the bag is never closed: a cut file).
    import errno

    from rosbags.rosbag2 import Writer

    from slide_sim import record as record_module
    from slide_sim.testing import disk_full_at

    def full(self: object) -> None:
        raise OSError(errno.ENOSPC, 'No space left on device')

    out = tmp_path / 'full'
    with monkeypatch.context() as m:
        m.setattr(record_module.bagfile, 'flush_chunk', disk_full_at(3))
        m.setattr(Writer, 'close', full)
        with pytest.raises(OSError, match='No space left') as failed:
            record(load_object('toothpaste'), workcell, 5, seed=0, out=out)
    assert failed.value.__notes__ == [f'the bag {out} holds the 2 push(es) written before it, '
                                      'cut there']  # fmt: skip
    assert [pd.index for pd in read_pushes(out).pushes] == [0, 1]


def test_tracking_writes_poses_as_a_camera_tracker_measures_them(tmp_path: Path, workcell):
    spec = load_object('book')
    record(spec, workcell, 1, seed=4, out=tmp_path / 'true')
    record(spec, workcell, 1, seed=4, out=tmp_path / 'seen', tracking=Tracking(30.0, 1e-3, 1e-2))
    for hz in (0.0, 1e-9, 1.5):  # (a bag none of whose pushes identification could read)
        with pytest.raises(SlideInputError, match='pose rate must be 2 to 100 Hz'):
            Tracking(hz)
    assert Tracking(2.0).hz == 2.0
    with pytest.raises(SlideInputError, match='noise in x and y must be 0 to 10 mm, got -1 mm'):
        Tracking(30.0, -1e-3)
    # Noise no tracker has (1e300 m was taken) is refused in the units the CLI asks for.
    with pytest.raises(SlideInputError, match='0 to 10 mm, got 1e\\+303 mm'):
        Tracking(30.0, 1e300)
    with pytest.raises(SlideInputError, match='noise in yaw must be 0 to 10 degrees'):
        Tracking(30.0, 0.0, 1.0)

    def poses(bag: Path) -> np.ndarray:
        with AnyReader([bag]) as reader:
            conns = [c for c in reader.connections if c.topic == '/object/pose']
            rows = []
            for _, t, raw in reader.messages(conns):
                p = reader.deserialize(raw, 'geometry_msgs/msg/PoseStamped').pose
                yaw = 2 * np.arctan2(p.orientation.z, p.orientation.w)
                rows.append((t * 1e-9, p.position.x, p.position.y, yaw))
        return np.array(rows)

    true, seen = poses(tmp_path / 'true'), poses(tmp_path / 'seen')
    # The same push (its wrenches are the seed's), its poses 30 a second instead of 100.
    assert read(tmp_path / 'true')['/ft/wrench'] == read(tmp_path / 'seen')['/ft/wrench']
    assert len(seen) == pytest.approx(len(true) * 0.3, rel=0.05)
    assert np.median(np.diff(seen[:, 0])) == pytest.approx(1 / 30, abs=2e-3)
    # Each off the truth at its time by the noise asked for.
    at = np.searchsorted(true[:, 0], seen[:, 0])
    assert np.allclose(true[at, 0], seen[:, 0], atol=1e-6)
    err = seen[:, 1:] - true[at, 1:]
    assert np.std(err[:, :2]) == pytest.approx(1e-3, rel=0.2)
    assert np.std(err[:, 2]) == pytest.approx(1e-2, rel=0.25)


def test_a_recording_that_ended_with_a_fall_is_not_ok(tmp_path: Path, workcell) -> None:
    # Started with its centre of mass past the edge, the box falls in its first push: the
    # bag keeps that push, and the run says it did not do what was asked (it exited 0).
    summary = record(
        load_object('box'), workcell, 3, seed=0, out=tmp_path / 'b', X_WO=(-0.01, 0.0, 0.0)
    )
    assert summary['fell'] and summary['pushes'] == 1 and summary['ok'] is False
    assert summary['reason'].startswith('the object fell in push 0 of 3')
    assert (tmp_path / 'b' / 'metadata.yaml').is_file()
    # Its poses lean as the box did, so identification does not fit maps to the fall.
    with pytest.raises(SlideInputError, match=r'push 0: the object leant up to \d+ degrees'):
        read_pushes(tmp_path / 'b')
