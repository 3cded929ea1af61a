"""run(): what a node's log says when its shutdown hangs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

NODE = textwrap.dedent(
    """
    import threading
    import time

    from rclpy.node import Node
    from slide_ros.lifecycle import run

    class Stuck(Node):
        def __init__(self):
            super().__init__('stuck')
            self.exit_code = 0  # done at once: run() stops spinning and shuts the node down
            self.stopping = threading.Event()

        def idle(self):
            return True

        def destroy_node(self):
            time.sleep({sleep})  # a clean-up that hangs
            super().destroy_node()

    raise SystemExit(run(Stuck, 'stuck'))
    """
)


def _run(sleep: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-c', NODE.format(sleep=sleep)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_shutdown_that_hangs_writes_every_threads_stack_to_the_log() -> None:
    out = _run(6.0)
    assert out.returncode == 0, out.stderr
    assert 'most recent call first' in out.stderr
    assert 'in destroy_node' in out.stderr  # where it hung


def test_a_prompt_shutdown_writes_nothing() -> None:
    out = _run(0.0)
    assert out.returncode == 0, out.stderr
    assert 'most recent call first' not in out.stderr
