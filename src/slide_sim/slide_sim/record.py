"""Recording exploratory pushes in the twin as a rosbag2 (MCAP), written with rosbags.

The bag is what the robot would record with ``ros2 bag record`` (and readable by it):

| topic | type | rate |
| --- | --- | --- |
| /object/grid | slide_interfaces/msg/ObjectGrid | once, at the start |
| /object/pose | geometry_msgs/msg/PoseStamped | 100 Hz during pushes (``tracking``) |
| /pusher/pose | geometry_msgs/msg/PoseStamped | 100 Hz during pushes |
| /ft/wrench | geometry_msgs/msg/WrenchStamped | 500 Hz (every physics step), table frame |
| /push/primitive | slide_interfaces/msg/PushPrimitive | at each push start |
| /push/start, /push/end | slide_interfaces/msg/PushMarker (push index) | stroke start and end |
| /ground_truth | slide_interfaces/msg/GroundTruth | start, and after each push |
| /camera/camera/depth/color/points | sensor_msgs/msg/PointCloud2 | ``cloud_hz`` during pushes |

Camera clouds (optional, ``cloud_hz``) are rendered from the twin's RGB-D camera as the
twin node renders them (optical frame, every second pixel of every second row): one
before the first push and ``cloud_hz`` a second from each stroke's start, so a bag can be
identified through perception (``slide identify --poses cloud``) and replayed into the
perception node.

Object poses are the twin's truth at 100 Hz by default; ``tracking``
(:class:`slide_sim.tracker.Tracking`) writes them as a camera tracker measures them instead:
fewer a second, each with Gaussian noise, from its own random stream (the pushes stay those
of the seed). Either way they hold the object's whole orientation: one that tips over leans
in them, and a reader does not take that push for a planar one.

The slide_interfaces types are registered in the bag from their .msg definitions, found
through the ament index (``AMENT_PREFIX_PATH``). Time stamps are simulation time from a
fixed origin, so the same seed gives the same bag contents. The exploratory pushes are the
core's (:func:`slide_core.identification.random_push`). The bag is written to a temporary
folder beside ``out`` and moved there when complete: an interrupted recording leaves
nothing behind. Each push ends its own MCAP chunk, so a copy cut short still holds every
push before the cut whole (:func:`slide_core.io.read_pushes` reads up to it).
"""

from __future__ import annotations

from collections.abc import Callable
import math
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys.store import Typestore
from transforms3d import quaternions

from slide_core.errors import SlideInputError
from slide_core.files import atomic_path, check_bag_folder, check_output
from slide_core.geometry import FloatArray
from slide_core.identification import random_push
from slide_core.io import bagfile, coverage_values, outline_values
from slide_core.model import ObjectSpec, Workcell
from slide_sim.scene import check_on_table, default_pose
from slide_sim.tracker import TRUTH, Tracker, Tracking
from slide_sim.twin import PushRecording, Twin

EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01 00:00:00 UTC: the bag's time origin
POSE_DECIMATION = 5  # 500 Hz physics -> 100 Hz poses

TOPICS = {
    '/object/grid': 'slide_interfaces/msg/ObjectGrid',
    '/object/pose': 'geometry_msgs/msg/PoseStamped',
    '/pusher/pose': 'geometry_msgs/msg/PoseStamped',
    '/ft/wrench': 'geometry_msgs/msg/WrenchStamped',
    '/push/primitive': 'slide_interfaces/msg/PushPrimitive',
    '/push/start': 'slide_interfaces/msg/PushMarker',
    '/push/end': 'slide_interfaces/msg/PushMarker',
    '/ground_truth': 'slide_interfaces/msg/GroundTruth',
}
CLOUD_TOPIC = '/camera/camera/depth/color/points'
OPTICAL_FRAME = 'camera_color_optical_frame'


def interfaces_dir() -> Path:
    """The installed ``share/slide_interfaces/msg`` folder (via AMENT_PREFIX_PATH)."""
    return bagfile.interfaces_dir()


def typestore() -> Typestore:
    """ROS 2 Jazzy types plus slide_interfaces' messages."""
    store: Typestore = bagfile.interfaces_typestore()
    return store


class _Bag:
    def __init__(
        self,
        writer: Writer,
        store: Typestore,
        frame: str,
        topics: dict[str, str],
        tracking: Tracking = TRUTH,
        seed: int = 0,
    ) -> None:
        self.writer, self.store, self.frame, self.topics = writer, store, frame, topics
        self.conns = {t: writer.add_connection(t, m, typestore=store) for t, m in topics.items()}
        self.T = store.types
        self.counts = dict.fromkeys(topics, 0)
        self.tracker = Tracker(tracking, seed)

    def stamp(self, t: float) -> Any:
        ns = EPOCH_NS + int(round(t * 1e9))
        return self.T['builtin_interfaces/msg/Time'](sec=ns // 10**9, nanosec=ns % 10**9)

    def header(self, t: float, frame: str) -> Any:
        return self.T['std_msgs/msg/Header'](stamp=self.stamp(t), frame_id=frame)

    def write(self, topic: str, t: float, msg: Any) -> None:
        data = self.store.serialize_cdr(msg, self.topics[topic])
        self.writer.write(self.conns[topic], EPOCH_NS + int(round(t * 1e9)), data)
        self.counts[topic] += 1

    def pose(self, X: Any, lean: FloatArray | None = None) -> Any:
        """A Pose at (x, y, z) turned by yaw X[3] about the vertical, after ``lean`` (a
        (w, x, y, z) quaternion with no yaw of its own, :func:`lean_of`; none: level)."""
        T = self.T
        w, x, y, z = math.cos(X[3] / 2), 0.0, 0.0, math.sin(X[3] / 2)
        if lean is not None:
            w, x, y, z = quaternions.qmult((w, x, y, z), lean)
        return T['geometry_msgs/msg/Pose'](
            position=T['geometry_msgs/msg/Point'](x=float(X[0]), y=float(X[1]), z=float(X[2])),
            orientation=T['geometry_msgs/msg/Quaternion'](
                x=float(x), y=float(y), z=float(z), w=float(w)
            ),
        )

    def grid(self, spec: ObjectSpec, X_WO: Any, t: float) -> Any:
        g = spec.grid
        rows, cols = g.shape
        return self.T['slide_interfaces/msg/ObjectGrid'](
            header=self.header(t, self.frame),
            pose=self.pose((X_WO[0], X_WO[1], 0.0, X_WO[2])),
            cell_size=g.cell_size,
            rows=rows,
            cols=cols,
            occupancy=g.occupancy.ravel().astype(np.uint8),
            heights=g.heights.ravel().astype(np.float32),
            coverage=coverage_values(g),
            outline=outline_values(g),
        )

    def truth(self, twin: Twin, t: float) -> Any:
        spec = twin.spec
        model = self.T['slide_interfaces/msg/MassFrictionModel'](
            mass=spec.grid.to_map(spec.mass, fill=0.0).ravel(),
            friction=spec.grid.to_map(spec.friction, fill=0.0).ravel(),
            loss=float('nan'),
        )
        f = twin.contact_force()
        fields = {
            'header': self.header(t, self.frame),
            'name': spec.name,
            'grid': self.grid(spec, twin.object_pose(), t),
            'model': model,
            'fell': twin.fell(),
            'tilt': twin.tilt(),
            'height': twin.object_height(),
            'contact_force': self.T['geometry_msgs/msg/Vector3'](
                x=float(f[0]), y=float(f[1]), z=float(f[2])
            ),
        }
        kind = self.T['slide_interfaces/msg/GroundTruth']
        # The fields this installed definition has (the message grew with the task).
        return kind(**{k: v for k, v in fields.items() if k in kind.__dataclass_fields__})

    def cloud(self, points: Any, t: float) -> Any:
        p = np.ascontiguousarray(points, dtype=np.float32)
        field = self.T['sensor_msgs/msg/PointField']
        return self.T['sensor_msgs/msg/PointCloud2'](
            header=self.header(t, OPTICAL_FRAME),
            height=1,
            width=p.shape[0],
            fields=[field(name=c, offset=4 * i, datatype=7, count=1) for i, c in enumerate('xyz')],
            is_bigendian=False,
            point_step=12,
            row_step=12 * p.shape[0],
            data=np.frombuffer(p.tobytes(), dtype=np.uint8),
            is_dense=bool(np.isfinite(p).all()),
        )


class _Camera:
    """Clouds of the twin's camera into the bag, ``hz`` a second while asked."""

    def __init__(self, bag: _Bag, twin: Twin, hz: float, seed: int) -> None:
        from slide_sim.camera import RgbdCamera

        self.bag, self.twin, self.period = bag, twin, 1.0 / hz
        self.camera = RgbdCamera(twin.model, seed=seed, decimation=2)
        self.next = -np.inf

    def __call__(self) -> None:
        from slide_sim.camera import point_cloud

        if self.twin.time + 1e-9 < self.next:
            return
        frame = self.camera.capture(self.twin.data, rgb=False)
        t = self.twin.time
        self.bag.write(CLOUD_TOPIC, t, self.bag.cloud(point_cloud(frame, world=False), t))
        self.next = t + self.period

    def close(self) -> None:
        self.camera.close()


def lean_of(q_WO: FloatArray) -> FloatArray:
    """The lean of an orientation q_WO (w, x, y, z) without its yaw (the yaw of
    :meth:`Twin.object_pose`, atan2(R_10, R_00)): q_WO = R_z(yaw) lean."""
    R = quaternions.quat2mat(q_WO)
    yaw = math.atan2(R[1, 0], R[0, 0])
    return np.asarray(
        quaternions.qmult((math.cos(yaw / 2), 0.0, 0.0, -math.sin(yaw / 2)), q_WO), dtype=float
    )


def _write_push(bag: _Bag, index: int, rec: PushRecording, twin: Twin) -> None:
    T = bag.T
    t0, t1 = float(rec.t[rec.start]), float(rec.t[rec.end])
    tip = twin.cell.fingertip
    Vec3, Point = T['geometry_msgs/msg/Vector3'], T['geometry_msgs/msg/Point']
    prim = rec.primitive
    primitive = T['slide_interfaces/msg/PushPrimitive'](
        contact=Point(x=float(prim.p_OA[0]), y=float(prim.p_OA[1]), z=0.0),
        direction=Vec3(x=float(prim.d_O[0]), y=float(prim.d_O[1]), z=0.0),
        travel=prim.travel,
        speed=prim.speed,
        fingertip_radius=tip.radius,
        height=tip.height,
    )
    bag.write('/push/primitive', t0, primitive)
    Marker = T['slide_interfaces/msg/PushMarker']
    bag.write('/push/start', t0, Marker(header=bag.header(t0, ''), index=index))
    for k, t in enumerate(rec.t):
        t = float(t)
        w = rec.wrench_W[k]
        wrench = T['geometry_msgs/msg/WrenchStamped'](
            header=bag.header(t, bag.frame),  # the twin's sensor keeps the table's axes
            wrench=T['geometry_msgs/msg/Wrench'](
                force=Vec3(x=float(w[0]), y=float(w[1]), z=float(w[2])),
                torque=Vec3(x=float(w[3]), y=float(w[4]), z=float(w[5])),
            ),
        )
        bag.write('/ft/wrench', t, wrench)
        Pose = T['geometry_msgs/msg/PoseStamped']
        X = bag.tracker.measured(rec.X_WO[k], t)
        if X is not None:
            # With the object's lean: a tracker that sees it tip says so, and a reader then
            # does not take the push for a planar one.
            lean = lean_of(rec.q_WO[k])
            bag.write(
                '/object/pose',
                t,
                Pose(
                    header=bag.header(t, bag.frame), pose=bag.pose((X[0], X[1], 0.0, X[2]), lean)
                ),
            )
        if k % POSE_DECIMATION == 0:
            p = rec.p_WF[k]
            bag.write(
                '/pusher/pose',
                t,
                Pose(header=bag.header(t, bag.frame), pose=bag.pose((p[0], p[1], p[2], 0.0))),
            )
        if k == rec.end:
            bag.write('/push/end', t1, Marker(header=bag.header(t1, ''), index=index))


def record(
    spec: ObjectSpec,
    cell: Workcell,
    pushes: int,
    seed: int,
    out: str | Path,
    X_WO: tuple[float, float, float] | None = None,
    progress: Callable[[int, int], None] = lambda i, n: None,
    cloud_hz: float = 0.0,
    tracking: Tracking = TRUTH,
) -> dict[str, Any]:
    """Run ``pushes`` random exploratory pushes in the twin and write them to ``out``
    (with camera clouds at ``cloud_hz`` during pushes when it is positive, object poses as
    ``tracking`` measures them).

    Returns a summary (pushes done, whether the object fell, message counts, duration;
    ``ok`` false when it fell: the pushes stop there, and the bag holds them). Interrupted
    (KeyboardInterrupt, or the CLI's SIGTERM), the bag keeps the pushes made and the
    interrupt goes on, with a note saying so; with none made, nothing is left.
    """
    if pushes < 1:
        raise SlideInputError(f'--pushes must be at least 1, got {pushes}')
    if not (math.isfinite(cloud_hz) and 0.0 <= cloud_hz <= 60.0):
        raise SlideInputError(f'cloud_hz must be 0 (no clouds) to 60 Hz, got {cloud_hz}')
    out = check_bag_folder(out, 'the bag folder')
    out = check_output(out, (), 'the bag folder', directory=True)
    store = typestore()
    rng = np.random.default_rng(seed)
    if X_WO is None:  # (a 1 m object was recorded hanging 15 cm over the edge, and said ok)
        check_on_table(spec, cell, default_pose(cell))
    twin = Twin(spec, cell, X_WO)
    frame = cell.table.frame_id
    topics = {**TOPICS, CLOUD_TOPIC: 'sensor_msgs/msg/PointCloud2'} if cloud_hz else TOPICS
    interrupted: KeyboardInterrupt | None = None
    failed: OSError | None = None
    done = 0
    with atomic_path(out, directory=True) as tmp:
        try:
            with Writer(tmp, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
                bag = _Bag(writer, store, frame, topics, tracking, seed)
                camera = _Camera(bag, twin, cloud_hz, seed) if cloud_hz else None
                try:
                    bag.write(
                        '/object/grid', twin.time, bag.grid(spec, twin.object_pose(), twin.time)
                    )
                    bag.write('/ground_truth', twin.time, bag.truth(twin, twin.time))
                    if camera is not None:
                        camera()  # the object at rest, to acquire it from
                    for i in range(pushes):
                        try:
                            primitive = random_push(
                                spec.grid,
                                twin.object_pose(),
                                cell.table,
                                cell.fingertip,
                                rng,
                                cell.obstacles,
                            )
                            rec = twin.push(primitive, on_step=camera)
                            _write_push(bag, i, rec, twin)
                            bag.write('/ground_truth', twin.time, bag.truth(twin, twin.time))
                            bagfile.flush_chunk(writer)  # a cut file keeps every push before it
                            done += 1
                            progress(done, pushes)
                        except KeyboardInterrupt as exc:
                            # Ctrl-C or SIGTERM: the pushes done are kept (the whole bag was
                            # thrown away, minutes of them); one cut short has no end marker,
                            # and identification leaves it out.
                            interrupted = exc
                            break
                        if twin.fell():
                            break
                    if interrupted is not None and done == 0:
                        raise interrupted
                finally:
                    if camera is not None:
                        camera.close()
                counts = dict(bag.counts)
        except OSError as exc:
            # A full disk threw the whole bag away, the pushes flushed before it too: their
            # chunks stay, a cut bag the readers take, and the error goes on with a note.
            if done == 0:
                raise
            failed, counts = exc, {}
    if failed is not None:
        failed.add_note(f'the bag {out} holds the {done} push(es) written before it, cut there')
        raise failed
    if interrupted is not None:
        interrupted.add_note(f'the bag {out} holds the {done} push(es) made before it')
        raise interrupted
    fell = twin.fell()
    summary: dict[str, Any] = {
        # The bag holds what was done; a run that ended with the object off the table did
        # not do what was asked (it said so and exited 0).
        'ok': not fell,
        'bag': str(out),
        'object': spec.name,
        'pushes': done,
        'fell': fell,
        'sim_seconds': round(twin.time, 3),
        'messages': counts,
    }
    if fell:
        summary['reason'] = (
            f'the object fell in push {done - 1} of {pushes}: the bag holds the pushes up to '
            'it (identification leaves that one out)'
        )
    return summary
