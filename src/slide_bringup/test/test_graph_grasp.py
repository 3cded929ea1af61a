"""A Grasp goal to the executor on a graph of its own (twin, F/T driver, executor): the
object overhangs from the start. In a module of its own, so that no other graph's executor
serves the same action while it runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('rclpy')
pytest.importorskip('mujoco')


from slide_bringup.graph import pregrasp, select  # noqa: E402
from slide_bringup.runner import Graph  # noqa: E402
from slide_core.io import set_planar_pose  # noqa: E402
from slide_core.model import load_object, load_workcell  # noqa: E402
from slide_core.planning import grasp_at  # noqa: E402
from slide_interfaces.action import Grasp  # noqa: E402
from slide_interfaces.msg import ErrorCode, GroundTruth  # noqa: E402
from slide_ros.action_client import SafeActionClient  # noqa: E402
from slide_ros.lifecycle import remote_state  # noqa: E402
from slide_ros.qos import LATCHED  # noqa: E402
from slide_ros.testing import Peer  # noqa: E402


def test_a_grasp_goal_lifts_an_overhanging_book(tmp_path: Path) -> None:
    cell = load_workcell()
    X_WO = np.array([0.06, 0.0, 0.0])  # 22 cm long: 5 cm of it past the edge
    specs = select(
        pregrasp({'object': 'book', 'start_episode': 'false'}), ('twin', 'netft', 'executor')
    )
    specs = [
        dataclasses.replace(
            s, parameters={**s.parameters, 'start_pose': X_WO.tolist(), 'truth_rate_hz': 20.0}
        )
        if s.name == 'twin'
        else s
        for s in specs
    ]
    spec = load_object('book')
    grasp = grasp_at(spec.grid, X_WO, cell.gripper, spec.p_OCom)
    assert grasp is not None
    peer = Peer('grasp_test')
    truths: list[GroundTruth] = []
    peer.node.create_subscription(GroundTruth, '/ground_truth', truths.append, LATCHED)
    client = SafeActionClient(peer.node, Grasp, '/executor/grasp')
    try:
        with Graph(specs, tmp_path / 'logs') as graph:
            peer.wait(
                lambda: remote_state(peer.node, '/executor') == 'active', 240, 'the executor'
            )
            peer.wait(lambda: bool(truths), 30, 'ground truth')
            h0 = truths[-1].height
            goal = Grasp.Goal(lift_height=0.1)
            set_planar_pose(goal.grasp_pose.pose, np.array([*grasp.p_WE, grasp.yaw]), grasp.z)
            # A pose in another frame was used as if it were in the table's.
            goal.grasp_pose.header.frame_id = 'base_link'
            _, done = peer.send(client, goal)
            refused = peer.result(done, 30).result
            assert refused.error.code == ErrorCode.INVALID_GOAL
            assert (
                refused.message == f"the grasp pose is in 'base_link', not {cell.table.frame_id}"
            )
            goal.grasp_pose.header.frame_id = cell.table.frame_id
            phases: list[str] = []
            _, done = peer.send(client, goal, feedback=lambda m: phases.append(m.feedback.phase))
            result = peer.result(done, 120).result
            assert result.error.code == ErrorCode.SUCCESS, result.message + graph.log_tail(
                'executor'
            )
            assert result.holding and result.lifted > 0.08
            assert phases[:2] == ['open', 'pre_grasp'] and 'lift' in phases
            n = len(truths)
            peer.wait(lambda: len(truths) > n + 2, 10, 'ground truth after the lift')
            assert truths[-1].height - h0 > 0.08, 'the twin says the book did not rise'
            assert not truths[-1].fell
    finally:
        client.destroy()
        peer.close()
