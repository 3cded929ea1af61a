"""Recorded pushes from a rosbag2: ``slide record``'s twin bags, the recorder node's and
``ros2 bag record``'s bags of the graph (the topics of ``slide_ros.topics``).

Topics read: ``/object/grid`` and ``/object/pose`` (perception's), or, when the bag has no
object poses, the camera's cloud ``/camera/camera/depth/color/points`` run through
perception here (:mod:`slide_core.io.perceive`); ``/pusher/pose`` (the fingertip, table
frame); a wrench, ``/ft/wrench`` or else ``/netft/wrench``; ``/push/start`` and
``/push/end`` (the stroke's start and end, with the push's index; a push ends SETTLE_S after
its stroke, before the fingertip retracts; a push without its end marker was aborted or
cut short and is not used, nor is one during which an object pose leans past ``MAX_TILT``:
the object tipped over or fell). ``/ground_truth`` is read only by
:func:`read_ground_truth`, never by :func:`read_pushes`, so identification cannot see it.

Frames are honest: every series is used in the frame its header names (an unnamed frame is
taken to be the table's, and said). Poses must be in the table frame. A wrench in the table
frame is used as it is; one in the F/T sensor's frame (the driver's ``/netft/wrench``) is
turned into the table frame with the sensor's orientation that the bag holds, the fingertip
pose's orientation on ``/pusher/pose`` at the wrench's time (as the executor does; the sensor
is mounted with the tool's axes); any other frame is refused with the reason.

Times: series and push markers are placed by their header stamps. A message whose stamp is
more than JUMP_S off the recording clock (the bag's log time), against what the topic keeps
otherwise, comes from a clock that jumped: it is not used, and a push during which that
happened is skipped. A push marker without a stamp (the ``std_msgs/UInt32`` of older
recordings), or stamped on another clock than the fingertip's poses, is placed by when it
was recorded, and said (:func:`slide_core.io.series.marker_times`).

What cannot be used is reported, never a traceback: a bag with nothing usable raises
:class:`~slide_core.errors.SlideInputError` (one line); otherwise the pushes that could not
be built are returned in :attr:`BagPushes.skipped` with their reason, and what was wrong
with the bag in :attr:`BagPushes.warnings`. Each push becomes a wrench-driven replay on a
fixed time step (:func:`slide_core.identification.build_push`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
import math
from numbers import Integral
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid, GridError
from slide_core.identification import SETTLE_S, STEP_S, PushData, build_push
from slide_core.io.bagfile import Bag, open_bag
from slide_core.io.messages import MAX_TILT, MessageError, grid_from_msg, ns_to_s, stamp_to_s
from slide_core.io.series import (
    CLOUD_TOPIC,
    JUMP_S,
    Series,
    clock_jump,
    marker_times,
    planar_rows,
    quaternion_matrix,
    read_series,
    stamp_offset,
    usable,
    wrench_rows,
)

REQUIRED = ('/object/grid', '/object/pose', '/pusher/pose', '/ft/wrench', '/push/start')
"""The topics of a complete twin bag (``slide record``)."""
WRENCH_TOPICS = ('/ft/wrench', '/netft/wrench')
PoseSource = Literal['auto', 'topic', 'cloud']
LOST_REASON = 'not in the bag (lost with data that is cut short or damaged: see the warnings)'
"""Why a push the bag should hold is skipped: its markers were in data the bag lost (a
file that stops early, was not closed, or has a malformed chunk; the warnings say which)."""


@dataclass(frozen=True)
class Skipped:
    """A push of the bag that could not be used, and why (one line)."""

    index: int
    reason: str


@dataclass(frozen=True, eq=False)
class BagPushes:
    """What :func:`read_pushes` made of a bag.

    Attributes:
        grid: the object's cells (perception's grid, or the one built from the clouds).
        pushes: the usable pushes asked for, in the order asked.
        skipped: the pushes asked for that could not be used, with the reason.
        warnings: what was wrong with the bag but left data to use (one line each).
        count: how many pushes the bag starts (``/push/start`` markers).
        poses_from, wrench_from: where the object poses and the wrenches came from.
        fingertips: the fingertips (radius, height above the table) [m] the bag's pushes
            say they were made with (``/push/primitive``), each once, in the order first
            seen; empty when the bag does not say (no such topic, or zeros: a sender that
            did not fill them in).

    It unpacks as ``grid, pushes`` for callers that need no more.
    """

    grid: Grid
    pushes: list[PushData]
    skipped: tuple[Skipped, ...] = ()
    warnings: tuple[str, ...] = ()
    count: int = 0
    poses_from: str = ''
    wrench_from: str = ''
    fingertips: tuple[tuple[float, float], ...] = ()

    def __iter__(self) -> Iterator[Any]:
        return iter((self.grid, self.pushes))

    def report(self) -> list[str]:
        """Warnings, then the skipped pushes, one line each."""
        return [*self.warnings, *(f'push {s.index} skipped: {s.reason}' for s in self.skipped)]


def _check_dt(dt: float) -> None:
    if not 0.0005 <= dt <= 0.05:
        raise SlideInputError(f'the replay step must be 0.5 to 50 ms, got {dt * 1000:g} ms')


def mount_rotation(q: ArrayLike) -> FloatArray:
    """The rotation (3, 3) of a sensor mount given as a quaternion x, y, z, w (normalised);
    SlideInputError unless it is four finite numbers of a norm near 1."""
    try:
        v = np.asarray(q, dtype=float)
    except (TypeError, ValueError):
        raise SlideInputError(f'a sensor mount is a quaternion x, y, z, w, got {q!r}') from None
    if v.shape != (4,) or not np.isfinite(v).all() or not 0.5 < np.linalg.norm(v) < 2.0:
        raise SlideInputError(f'a sensor mount is a unit quaternion x, y, z, w, got {v.tolist()}')
    return quaternion_matrix(v)


def read_pushes(
    path: str | Path,
    indices: list[int] | None = None,
    dt: float = STEP_S,
    poses: PoseSource = 'auto',
    extrinsics: str | Path | None = None,
    sensor_mount: ArrayLike | None = None,
) -> BagPushes:
    """The object grid and the requested pushes (all when ``indices`` is None), on replay
    steps of ``dt`` seconds, with what was skipped and why.

    ``sensor_mount``: the F/T sensor's orientation in the fingertip's frame (quaternion x,
    y, z, w: the executor's parameter), for wrenches recorded in the sensor's frame
    (``/netft/wrench`` without the executor's ``/ft/wrench``); None: square on it.

    ``poses``: 'topic' reads ``/object/pose`` and ``/object/grid``; 'cloud' runs perception
    on the recorded camera clouds with the camera ``extrinsics`` file (default: the
    workcell's); 'auto' takes the topic when the bag has it, else the clouds.

    Raises SlideInputError (one line) when the bag has no usable push: the reason names the
    topic or push."""
    path = Path(path)
    _check_dt(dt)
    R_TS = None if sensor_mount is None else mount_rotation(sensor_mount)
    if poses not in ('auto', 'topic', 'cloud'):
        raise SlideInputError(f'poses must be auto, topic or cloud, got {poses!r}')
    bag = open_bag(path)
    name = str(path)
    # Why a topic may be missing: the first thing wrong with the bag, if it was cut.
    cut = f' ({bag.warnings[0]})' if bag.truncated and bag.warnings else ''

    def need(topic: str, what: str) -> None:
        why = usable(bag, topic)
        if why:
            raise SlideInputError(f'{name}: no {what}: {topic} {why}{cut}')

    need('/push/start', 'push markers')
    need('/pusher/pose', 'fingertip poses')
    why_wrench = {t: usable(bag, t) for t in WRENCH_TOPICS}
    usable_wrench = [t for t in WRENCH_TOPICS if not why_wrench[t]]
    if not usable_wrench:
        raise SlideInputError(
            f'{name}: no wrench: ' + '; '.join(f'{t} {w}' for t, w in why_wrench.items()) + cut
        )
    wrench_topic = usable_wrench[0]
    why_pose, why_cloud = usable(bag, '/object/pose'), usable(bag, CLOUD_TOPIC)
    from_cloud = poses == 'cloud' or (poses == 'auto' and bool(why_pose))
    if from_cloud and why_cloud:
        if poses == 'cloud':
            raise SlideInputError(f'{name}: no camera clouds: {CLOUD_TOPIC} {why_cloud}')
        raise SlideInputError(
            f'{name}: no object poses: /object/pose {why_pose}, and {CLOUD_TOPIC} '
            f'(to run perception on) {why_cloud}'
        )
    if not from_cloud:
        need('/object/pose', 'object poses')
        why_grid = usable(bag, '/object/grid')
        if why_grid:
            hint = '' if why_cloud else f' (poses=cloud reads {CLOUD_TOPIC} instead)'
            raise SlideInputError(f'{name}: no object grid: /object/grid {why_grid}{hint}{cut}')

    topics = ['/pusher/pose', wrench_topic, '/push/start']
    optional = ['/push/end', '/push/primitive']
    if from_cloud:
        optional.append('/gripper/pose')
    topics += [t for t in optional if not usable(bag, t)]
    if not from_cloud:
        topics += ['/object/pose', '/object/grid']
    series = read_series(bag, topics)
    warnings = list(bag.warnings)
    if from_cloud:
        grids, series['/object/pose'] = _perceive(bag, series, extrinsics, warnings)
        poses_from = f'{CLOUD_TOPIC} through perception'
    else:
        grids = list(series['/object/grid'].rows)
        if not grids:
            raise SlideInputError(f'{name}: no object grid: no /object/grid message decodes')
        poses_from = '/object/pose'
    warnings += bag.decode_warnings()
    for s in series.values():
        if s.bad:
            warnings.append(f'{s.topic}: {s.bad} message(s) hold bad values; skipped')
    table = grids[0][2] or 'table'
    for topic in ('/object/pose', '/pusher/pose', wrench_topic):
        unnamed = series[topic].frames.count('')
        if unnamed:
            warnings.append(
                f'{topic}: {unnamed} message(s) name no frame: taken to be in the table frame'
            )

    # Frames: every series in the frame its header names; clocks that jump.
    arrays: dict[str, FloatArray] = {}
    jumps: dict[str, np.ndarray] = {}
    refused: dict[str, str] = {}
    for topic in ('/object/pose', '/pusher/pose'):
        arrays[topic], jumps[topic], problem, fatal = planar_rows(series[topic], table)
        if fatal:
            refused[topic] = problem
        elif problem:
            warnings.append(f'{topic}: {problem}')
    arrays[wrench_topic], jumps[wrench_topic], problem, wrench_from = wrench_rows(
        series[wrench_topic], series['/pusher/pose'], table, R_TS
    )
    if problem:
        refused[wrench_topic] = problem
    if R_TS is not None and wrench_topic == '/ft/wrench':
        # (it changed nothing, and nothing said so)
        warnings.append(
            'the sensor mount was not used: the bag has /ft/wrench, which the executor '
            'already turned into the table frame (a mount is for /netft/wrench alone)'
        )
    if refused:
        raise SlideInputError(f'{name}: ' + '; '.join(f'{t}: {why}' for t, why in refused.items()))

    marks = series['/push/start']
    if not marks.log:
        raise SlideInputError(f'{name}: no complete push (no /push/start marker decodes)')
    mark_times, why = marker_times(marks, series['/pusher/pose'])
    if why:
        warnings.append(f'/push/start: {why}')
    end_marks = series.get('/push/end')
    end_times: list[float] = []
    why_end = usable(bag, '/push/end')
    if why_end:  # every push would be said to have been aborted
        warnings.append(f'/push/end {why_end}: no push can be read to its end')
    if end_marks is not None:
        end_times, why = marker_times(end_marks, series['/pusher/pose'])
        if why:
            warnings.append(f'/push/end: {why}')
    order = np.argsort(mark_times, kind='stable')
    starts = [mark_times[k] for k in order]
    numbers = [int(marks.rows[k]) for k in order]
    renumbered = len(set(numbers)) != len(numbers)
    if renumbered and all(a <= b for a, b in zip(numbers, numbers[1:], strict=False)):
        # A push tried again: the executor numbers an attempt by the pushes it returned,
        # so a failed attempt's index comes again. Its last start is the push.
        last = sorted({n: k for k, n in enumerate(numbers)}.values())
        again = sorted(n for n, c in Counter(numbers).items() if c > 1)
        warnings.append(
            f'push {_ranges(again)} started more than once (tried again after a failed '
            'attempt, or a marker sent twice): the last start is read'
        )
        starts, numbers = [starts[k] for k in last], [numbers[k] for k in last]
        renumbered = False
    if renumbered:
        warnings.append(
            f'/push/start repeats push indices ({numbers}): pushes are numbered by their '
            'order in the bag'
        )
        numbers = list(range(len(starts)))
    position = {n: k for k, n in enumerate(numbers)}
    count = len(starts)
    lost = bag.truncated
    if indices is None:
        wanted = sorted(numbers)
        if lost:  # pushes whose markers were lost with the data (metadata may count them)
            known = max(max(numbers) + 1, bag.listed.get('/push/start', 0))
            wanted = sorted({*wanted, *range(known)})
    else:
        wanted = list(indices)
        if not all(isinstance(i, Integral) for i in wanted):  # 'all' reads as 'a', 'l', 'l'
            raise SlideInputError(
                f'{name}: pushes are asked for by number (a list of ints, or None for all), '
                f'not {indices!r}'
            )
        twice = sorted(i for i, n in Counter(wanted).items() if n > 1)
        if twice:  # one push twice in a training set weighs it double, silently
            raise SlideInputError(f'{name}: push {_ranges(twice)} asked for more than once')
    beyond = [i for i in wanted if i not in position]
    if beyond and not lost:
        raise SlideInputError(
            f'{name}: has pushes {_ranges(numbers)}, asked for {_ranges(beyond)}'
        )
    ends = (
        sorted(zip(end_times, (int(r) for r in end_marks.rows), strict=True))
        if end_marks is not None
        else []
    )
    # Windows are on the stamps' clock (the markers'); the bag's end, its grids and the
    # clocks' jumps on the recorder's: a sim-time bag's are 1.8e9 s apart.
    offset = stamp_offset(series['/pusher/pose'])
    end_of_data = (bag.last_ns or 0) * 1e-9 + offset
    if not renumbered:
        orphans = sorted({n for _, n in ends} - set(numbers))
        if orphans:
            warnings.append(
                f'/push/end for push {_ranges(orphans)} but no /push/start: a lost start '
                'marker; the stroke is not read'
            )

    tilted = series['/object/pose'].tilted
    skipped: list[Skipped] = []
    built: list[PushData] = []
    chosen: Grid | None = None
    bounds = [*starts, math.inf]
    for i in wanted:
        if i not in position:
            skipped.append(Skipped(i, LOST_REASON))
            continue
        k = position[i]
        t0, t_next = bounds[k], bounds[k + 1]
        inside = [(t, n) for t, n in ends if t0 <= t < t_next]
        # Its own end marker; any in its window only where the indices were renumbered
        # (else a lost end and a lost start made two strokes one push).
        after = [t for t, n in inside if n == i or renumbered]
        if not after:
            others = sorted({n for _, n in inside})
            if others:
                why = (
                    f'no /push/end of its own (the end of push {_ranges(others)} lies before '
                    'the next push: its /push/start lost?)'
                )
            else:
                why = _unfinished(t0, t_next, end_of_data)
                if why_end:
                    why += f"; the bag's /push/end {why_end}"
            skipped.append(Skipped(i, why))
            continue
        stop = min(after[0] + SETTLE_S, t_next, max(end_of_data, after[0]))
        reason = clock_jump(series, jumps, t0 - offset, stop - offset)
        if reason:
            skipped.append(Skipped(i, reason))
            continue
        leant = [tilt for t, tilt in tilted if t0 <= t <= stop]
        if leant:
            skipped.append(
                Skipped(
                    i,
                    f'the object leant up to {math.degrees(max(leant)):.0f} degrees during it '
                    f'({len(leant)} pose(s) past {math.degrees(MAX_TILT):.0f}): it tipped over '
                    'or fell, which the planar model cannot replay',
                )
            )
            continue
        grid = _grid_at(grids, t0 - offset)
        if chosen is None:
            chosen = grid
        elif not _same_grid(grid, chosen):
            skipped.append(
                Skipped(i, 'the object was acquired anew (another /object/grid) before it')
            )
            continue
        try:
            built.append(
                build_push(
                    grid,
                    i,
                    t0,
                    stop,
                    arrays['/object/pose'],
                    arrays['/pusher/pose'],
                    arrays[wrench_topic],
                    name,
                    dt,
                )
            )
        except SlideInputError as exc:
            # (the bag and the push are named by whoever reports it: said twice before)
            reason = str(exc).removeprefix(f'{name}: ').removeprefix(f'push {i}: ')
            skipped.append(Skipped(i, reason))
    if not built:
        detail = '; '.join(f'push {s.index}: {s.reason}' for s in skipped)
        # What was wrong with the bag may be why (clouds on another clock than the pushes).
        said = ''.join(f'; {w}' for w in warnings)
        raise SlideInputError(f'{name}: no complete push ({detail}){said}')
    assert chosen is not None
    recorded = series['/push/primitive'].rows if '/push/primitive' in series else []
    fingertips = tuple(dict.fromkeys(tip for tip in recorded if tip[0] > 0.0 and tip[1] > 0.0))
    return BagPushes(
        chosen,
        built,
        tuple(skipped),
        tuple(warnings),
        count,
        poses_from,
        wrench_from,
        fingertips,
    )


def _ranges(numbers: list[int], most: int = 8) -> str:
    """Push indices as runs ('0-4, 7, 9-12'), the first ``most`` runs of them and how many
    there are in all (a message stays one short line)."""
    ordered = sorted(set(numbers))
    runs: list[str] = []
    start = prev = ordered[0]
    for n in [*ordered[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(f'{start}-{prev}' if prev > start else str(start))
        if n is not None:
            start = prev = n
    shown = ', '.join(runs[:most])
    return shown if len(runs) <= most else f'{shown}, ... ({len(ordered)} pushes)'


def _unfinished(t0: float, t_next: float, end_of_data: float) -> str:
    if math.isinf(t_next):
        return (
            f'no /push/end: the recording stops {max(end_of_data - t0, 0.0):.2f} s after its '
            'start (cut short, or the push was aborted)'
        )
    return 'no /push/end before the next push: the stroke did not finish (aborted)'


def _perceive(
    bag: Bag,
    series: dict[str, Series],
    extrinsics: str | Path | None,
    warnings: list[str],
) -> tuple[list[tuple[float, Grid, str]], Series]:
    """Perception on the bag's clouds: the grid (as a one-grid list) and the pose series.
    After the acquisition only the clouds of the pushes are worked on."""
    from slide_core.io.messages import cloud_to_xyz
    from slide_core.io.perceive import (
        keep_out_from,
        perception_config,
        pusher_keep_out,
        track_clouds,
    )
    from slide_core.model import load_workcell
    from slide_core.perception import KeepOut

    starts = sorted(series['/push/start'].log)
    ends = sorted(series['/push/end'].log) if '/push/end' in series else []
    windows = [
        (t0 - 0.5, (min((e for e in ends if e >= t0), default=t0 + 30.0)) + SETTLE_S + 0.5)
        for t0 in starts
    ]

    def wanted(log: float) -> bool:
        return any(a <= log <= b for a, b in windows)

    def clouds() -> Iterator[tuple[float, Any]]:
        for topic, t_ns, raw in bag.messages([CLOUD_TOPIC]):

            def decode(raw: bytes = raw, topic: str = topic) -> tuple[float, str, FloatArray]:
                msg = bag.decode(topic, raw)
                if msg is None:
                    raise MessageError('the cloud does not decode')
                return stamp_to_s(msg.header.stamp), str(msg.header.frame_id), cloud_to_xyz(msg)

            yield ns_to_s(t_ns), decode

    cell = load_workcell()  # read once: the fingertip, the camera, the table, the obstacles
    pusher = series['/pusher/pose']
    gripper = series.get('/gripper/pose')
    tools_at = keep_out_from(
        np.asarray(pusher.stamp),
        np.array([r[[0, 1, 3]] for r in pusher.rows]).reshape(-1, 3),
        None if gripper is None else np.asarray(gripper.stamp),
        None if gripper is None else np.array([r[[0, 1, 3]] for r in gripper.rows]).reshape(-1, 3),
        pusher_keep_out(cell.fingertip.radius),
    )
    # A cloud logged at t is cut where the tools were then, on their own clock: by the
    # clouds' stamps, a camera 1000 s ahead had the fingertip's last pose cut out of every
    # cloud (its keep-out over the object, which no cloud was then acquired from).
    tools_offset = stamp_offset(pusher)

    def keep_out(log: float) -> tuple[KeepOut, ...]:
        return tools_at(log + tools_offset)

    track = track_clouds(
        clouds(),
        extrinsics or cell.camera_extrinsics,
        keep_out,
        str(bag.path),
        config=perception_config(cell),
        wanted=wanted,
    )
    warnings.extend(f'{CLOUD_TOPIC}: {w}' for w in track.warnings)
    poses = Series('/object/pose')
    for log, stamp, X in track.poses:
        poses.add(log, stamp, np.array([*X, 0.0, 0.0, 0.0, 0.0, 1.0]), track.frame)
    apart = stamp_offset(poses) - stamp_offset(pusher)
    if poses.log and abs(apart) > JUMP_S:
        # (read as 'push 0 has 0 object poses', with nothing of why)
        warnings.append(
            f'{CLOUD_TOPIC}: the clouds are stamped {apart:+.1f} s off the clock of the '
            "fingertip's poses (a camera on another clock, or clouds without a stamp): the "
            'poses perceived in them fall outside the pushes'
        )
    return [(track.log, track.grid, track.frame)], poses


def _grid_at(grids: list[tuple[float, Grid, str]], t: float) -> Grid:
    """The grid in force at log time ``t``: the last one before it, else the first."""
    before = [g for lg, g, _ in grids if lg <= t]
    return before[-1] if before else grids[0][1]


def _same_grid(a: Grid, b: Grid) -> bool:
    return (
        a is b
        or a.shape == b.shape
        and abs(a.cell_size - b.cell_size) < 1e-9
        and bool(np.array_equal(a.occupancy, b.occupancy))
        and bool(np.allclose(a.heights, b.heights, atol=1e-4))
        and bool(np.allclose(a.area, b.area, atol=1e-4))
    )


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """The true object of a twin bag (evaluation only)."""

    name: str
    grid: Grid
    mass: FloatArray
    friction: FloatArray


def read_ground_truth(path: str | Path) -> GroundTruth | None:
    """The bag's /ground_truth (first message), or None when it has none (a robot bag)."""
    bag = open_bag(Path(path))
    if usable(bag, '/ground_truth'):
        return None
    for topic, _, raw in bag.messages(['/ground_truth']):
        msg = bag.decode(topic, raw)
        if msg is None:
            continue
        grid, _ = grid_from_msg(msg.grid)
        try:
            mass = grid.from_map(np.reshape(msg.model.mass, grid.shape), 'mass')
            friction = grid.from_map(np.reshape(msg.model.friction, grid.shape), 'friction')
        except (ValueError, GridError) as exc:
            raise MessageError(f'{path}: the ground truth does not fit its grid ({exc})') from None
        return GroundTruth(str(msg.name), grid, mass, friction)
    return None
