"""The executor node's start-up over real DDS: a retried configure reuses its backend."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip('rclpy')

import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from slide_ros.executor_node import ExecutorNode  # noqa: E402
from slide_ros.lifecycle import NotReady  # noqa: E402

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[3]


def test_a_retried_configure_connects_the_same_backend_again() -> None:
    context = Context()
    rclpy.init(context=context)
    params = {
        'autostart': False,
        'workcell_file': str(ROOT / 'config' / 'workcell.yaml'),
        'twin_namespace': '/nobody_runs_here',
        'connect_timeout_s': 0.2,
    }
    node = ExecutorNode(
        context=context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
    )
    try:
        with pytest.raises(NotReady, match='/nobody_runs_here/follow_path'):
            node.configure()
        subscriptions = len(list(node.subscriptions))
        waitables = len(list(node.waitables))
        for _ in range(3):
            with pytest.raises(NotReady, match='is the twin running'):
                node.configure()
        assert node.backend is None
        assert len(list(node.subscriptions)) == subscriptions
        assert len(list(node.waitables)) == waitables
    finally:
        node.destroy_node()
        context.try_shutdown()
