"""``slide bench executor``: the executor's pushes over DDS on the twin graph.

Starts the hardware end of the graph (twin, ATI F/T driver, perception, executor) as
``slide launch`` does, on free ports, and sends the executor exploratory Push goals as the
behaviour node would (the object's latest perceived pose, a random side, 4 cm/s). Per push:

- round trip: goal sent to result received; overhead: that minus the stroke itself (the
  record's push start to end: approach, lowering, retract and the messages around them);
- wrench samples per second arriving at the executor through the driver during the stroke;
- perception's pose error during the push: the record's object poses against the twin's
  ground truth at the same time, from the push's first pose on (the perceived object frame
  differs from the twin's body frame by a fixed transform, which that pose fixes).
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from pathlib import Path
import tempfile
import time
from typing import Any

import numpy as np

from slide_core.geometry import rotation, wrap_angle

Progress = Callable[[str], None]
NODES = ('twin', 'netft', 'perception', 'executor')
SPEED = 0.04  # m/s, the behaviour's exploration speed
TRUTH_HZ = 50.0
MATCH_S = 0.012  # a pose and a truth message this close in time are compared


def pose_errors(record: Any, truths: list[Any]) -> list[tuple[float, float]]:
    """(position [m], yaw [rad]) errors of the record's perceived poses against the twin's
    ground truth messages ``truths`` (GroundTruth) nearest in time."""
    from slide_core.io import grid_from_msg, pose_to_planar, stamp_to_s

    t_truth = np.array([stamp_to_s(m.header.stamp) for m in truths])
    pairs = []
    for pose in record.object_poses:
        t = stamp_to_s(pose.header.stamp)
        k = int(np.argmin(np.abs(t_truth - t)))
        if abs(t_truth[k] - t) < MATCH_S:
            pairs.append((pose_to_planar(pose.pose), grid_from_msg(truths[k].grid)[1]))
    if len(pairs) < 2:
        return []
    X_WO0, X_WB0 = pairs[0]
    p_BO = rotation(float(X_WB0[2])).T @ (X_WO0[:2] - X_WB0[:2])
    yaw_BO = float(X_WO0[2] - X_WB0[2])
    out = []
    for X_WO, X_WB in pairs[1:]:
        p_err = X_WO[:2] - (X_WB[:2] + rotation(float(X_WB[2])) @ p_BO)
        out.append(
            (float(np.linalg.norm(p_err)), abs(wrap_angle(float(X_WO[2] - X_WB[2] - yaw_BO))))
        )
    return out


def run(
    pushes: int = 6,
    seed: int = 0,
    obj: str = 'box',
    progress: Progress | None = None,
    note: Progress | None = None,
) -> dict[str, Any]:
    """Start the graph, make ``pushes`` pushes of ``obj``; the figures (see the module).
    ``progress`` is told of each push, ``note`` of the rest."""
    from geometry_msgs.msg import PoseStamped

    from slide_bringup.graph import pregrasp, select
    from slide_bringup.runner import Graph
    from slide_core.errors import SlideInputError
    from slide_core.io import grid_from_msg, pose_to_planar, primitive_to_msg, stamp_to_s
    from slide_core.model import load_object, load_workcell
    from slide_core.task import exploration_push
    from slide_interfaces.action import Push
    from slide_interfaces.msg import ErrorCode, GroundTruth, ObjectGrid
    from slide_ros.action_client import SafeActionClient
    from slide_ros.lifecycle import remote_state
    from slide_ros.qos import LATCHED, RELIABLE
    from slide_ros.testing import Peer

    if not 1 <= pushes <= 50:
        raise SlideInputError(f'pushes must be 1 to 50, got {pushes}')
    load_object(obj)  # bad input before anything starts
    say = progress or (lambda _m: None)
    tell = note or say
    cell = load_workcell()
    more = {'twin': {'truth_rate_hz': TRUTH_HZ}, 'executor': {'max_pose_age_s': 10.0}}
    specs = [
        dataclasses.replace(s, parameters={**s.parameters, **more.get(s.name, {})})
        for s in select(
            pregrasp({'object': obj, 'seed': str(seed), 'start_episode': 'false'}), NODES
        )
    ]
    rows: list[dict[str, float]] = []
    errors: list[tuple[float, float]] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        graph = Graph(specs, Path(tmp) / 'logs')
        peer = Peer('bench_executor')
        grids: list[Any] = []
        poses: list[Any] = []
        truths: list[Any] = []
        peer.node.create_subscription(ObjectGrid, '/object/grid', grids.append, LATCHED)
        peer.node.create_subscription(PoseStamped, '/object/pose', poses.append, RELIABLE)
        peer.node.create_subscription(GroundTruth, '/ground_truth', truths.append, LATCHED)
        client = SafeActionClient(peer.node, Push, '/executor/push')
        try:
            t0 = time.perf_counter()
            graph.start()
            tell(f'graph of {", ".join(NODES)} starting')
            for name in ('netft', 'executor'):
                peer.wait(
                    lambda name=name: remote_state(peer.node, f'/{name}') == 'active',
                    240,
                    f'/{name} to be active',
                )
            peer.wait(lambda: bool(grids) and len(poses) > 2, 120, 'perception')
            tell(f'graph up in {time.perf_counter() - t0:.1f} s')
            for i in range(pushes):
                n = len(poses)
                peer.wait(lambda n=n: len(poses) >= n + 2, 30, 'fresh object poses')
                grid, _ = grid_from_msg(grids[-1])
                pose = poses[-1]
                primitive = exploration_push(
                    grid, pose_to_planar(pose.pose), None, i, 'random', seed, cell, SPEED
                )
                goal = Push.Goal()
                primitive_to_msg(primitive, cell.fingertip, goal.primitive)
                goal.object_pose, goal.index = pose, i
                sent = time.perf_counter()
                _, done = peer.send(client, goal)
                result = peer.result(done, 120).result
                trip = time.perf_counter() - sent
                if result.error.code != ErrorCode.SUCCESS:
                    failed.append(f'push {i}: {result.message}')
                    say(f'push {i + 1}/{pushes} failed: {result.message}')
                    continue
                record = result.record
                stroke = stamp_to_s(record.end) - stamp_to_s(record.start)
                inside = [
                    w
                    for w in record.wrenches
                    if stamp_to_s(record.start)
                    <= stamp_to_s(w.header.stamp)
                    <= stamp_to_s(record.end)
                ]
                e = pose_errors(record, list(truths))
                errors.extend(e)
                rows.append(
                    {
                        'round_trip_s': trip,
                        'stroke_s': stroke,
                        'overhead_s': trip - stroke,
                        'wrench_hz': len(inside) / stroke if stroke > 0 else 0.0,
                        'poses': len(record.object_poses),
                    }
                )
                worst = max((a for a, _ in e), default=float('nan'))
                say(
                    f'push {i + 1}/{pushes}: round trip {trip:.2f} s, stroke {stroke:.2f} s, '
                    f'{rows[-1]["wrench_hz"]:.0f} wrenches/s, pose error <= '
                    f'{worst * 1000:.2f} mm over {len(e)} poses'
                )
        finally:
            client.destroy()
            peer.close()
            codes = graph.stop()

    def stats(key: str) -> dict[str, float]:
        v = np.array([r[key] for r in rows])
        if not len(v):
            return {}
        return {'median': float(np.median(v)), 'min': float(v.min()), 'max': float(v.max())}

    e = np.array(errors).reshape(-1, 2)
    return {
        'object': obj,
        'pushes': pushes,
        'succeeded': len(rows),
        'failed': failed,
        'round_trip_s': stats('round_trip_s'),
        'stroke_s': stats('stroke_s'),
        'overhead_s': stats('overhead_s'),
        'wrench_samples_per_s': stats('wrench_hz'),
        'pose_error_mm': {
            'frames': int(len(e)),
            'median': float(np.median(e[:, 0]) * 1000) if len(e) else float('nan'),
            'max': float(e[:, 0].max() * 1000) if len(e) else float('nan'),
        },
        'yaw_error_deg': {
            'median': float(np.degrees(np.median(e[:, 1]))) if len(e) else float('nan'),
            'max': float(np.degrees(e[:, 1].max())) if len(e) else float('nan'),
        },
        'exit_codes': codes,
    }
