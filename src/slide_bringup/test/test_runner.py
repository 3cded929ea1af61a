"""The pip-only runner leaves nothing running, even when it is killed outright."""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import pytest

from slide_bringup.graph import NodeSpec
from slide_bringup.runner import Graph, already_running

# A driver that keeps retrying a sensor that is not there: a node that never ends by itself.
NETFT = NodeSpec(
    'ati_netft',
    'netft_node',
    'netft',
    {'address': '127.0.0.1', 'rdt_port': 9, 'configure_retries': -1, 'retry_backoff_s': 0.5},
)

CHILD = """
import sys, time
from pathlib import Path
from slide_bringup.graph import NodeSpec
from slide_bringup.runner import Graph, already_running
graph = Graph([NodeSpec(**eval(sys.argv[1]))], Path(sys.argv[2]))
graph.start()
try:
    print(graph.nodes[0].process.pid, flush=True)
    time.sleep(600)
except KeyboardInterrupt as exc:
    print(type(exc).__name__, flush=True)
finally:
    graph.stop()
"""


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper (a container's PID 1 may not reap)."""
    try:
        state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ('Z', 'X')


def _gone(pid: int, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def runner_child(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A process running the graph of NETFT (CHILD), and its node's pid; both killed after."""
    spec = {k: getattr(NETFT, k) for k in ('package', 'executable', 'name', 'parameters')}
    child = subprocess.Popen(
        [sys.executable, '-c', CHILD, repr(spec), str(tmp_path / 'logs')],
        stdout=subprocess.PIPE,
        text=True,
    )
    node = 0
    try:
        assert child.stdout is not None
        node = int(child.stdout.readline())
        yield child, node
    finally:
        child.kill()
        child.wait()
        if node and _alive(node):
            os.kill(node, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='PR_SET_PDEATHSIG is Linux')
def test_a_killed_runner_takes_its_nodes_with_it(tmp_path: Path) -> None:
    with runner_child(tmp_path) as (child, node):
        assert _alive(node)
        os.kill(child.pid, signal.SIGKILL)  # no finally, no atexit: only the kernel is left
        child.wait(10)
        assert _gone(node, 10), f'node {node} outlived its killed runner'


def test_stop_ends_every_node_and_gives_its_exit_code(tmp_path: Path) -> None:
    with Graph([NETFT], tmp_path / 'logs') as graph:
        pid = graph.nodes[0].process.pid
        time.sleep(1.0)
        assert graph.poll() == {'netft': None}
    assert not _alive(pid)
    assert graph.nodes[0].process.returncode is not None


def test_a_second_graph_in_the_same_ros_domain_is_refused(tmp_path: Path) -> None:
    # Two demos on one machine took each other's topics and actions: one's truth check
    # read the other twin. The second now starts nothing and says why.
    from slide_bringup.graph import GraphError

    with Graph([NETFT], tmp_path / 'first') as graph:
        end = time.monotonic() + 60  # until its process is up and answers
        up = False
        while not up and time.monotonic() < end:
            up = bool(already_running([NETFT]))
        assert up, "the first graph's F/T driver never answered"
        second = Graph([NETFT], tmp_path / 'second')
        domain = os.environ['ROS_DOMAIN_ID']
        try:
            with pytest.raises(GraphError, match=f'/netft already run in ROS domain {domain}'):
                second.start()
        finally:  # (a second driver that started anyway outlived the test, into the next)
            second.stop()
        assert second.nodes == [] and not (tmp_path / 'second' / 'netft.log').exists()
        assert graph.poll() == {'netft': None}
    with Graph([NETFT], tmp_path / 'third') as graph:  # the first is gone: it starts
        assert graph.poll() == {'netft': None}


def test_a_domain_id_no_node_could_start_in_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every node's DDS library ended it at start-up, and the runner reported deaths.
    from slide_bringup.graph import GraphError

    monkeypatch.setenv('ROS_DOMAIN_ID', '300')
    graph = Graph([NETFT], tmp_path / 'logs')
    with pytest.raises(GraphError, match="ROS_DOMAIN_ID '300' is no ROS domain"):
        graph.start()
    assert graph.nodes == []


def test_a_node_that_dies_is_reported_once_with_the_end_of_its_log(tmp_path: Path) -> None:
    # Perception without its extrinsics file refuses to start: exit 2, one line why.
    broken = NodeSpec('slide_perception', 'perception_node', 'perception', {})
    seen: list[tuple[str, int]] = []
    with Graph([NETFT, broken], tmp_path / 'logs') as graph:
        # netft never ends by itself: each wait times out, passing on perception's exit.
        end = time.monotonic() + 60
        while not seen and time.monotonic() < end:
            assert graph.wait_for('netft', 0.5, on_exit=lambda *e: seen.append(e)) is None
        assert seen == [('perception', 2)]
        notice = graph.death_notice('perception', 2)
        assert 'node perception exited with code 2' in notice
        assert 'needs the extrinsics_file parameter' in notice
        assert graph.exited() == []  # reported once
        assert graph.poll()['netft'] is None
        unclean: list[tuple[str, int]] = []
        graph.stop(on_exit=lambda *e: unclean.append(e))
    # netft stopped by SIGINT is a clean exit, and perception was reported already.
    assert graph.poll() == {'netft': 0, 'perception': 2} and unclean == []
    assert graph.exited() == []


def test_sigterm_stops_the_graph_and_says_it_was_a_termination(tmp_path: Path) -> None:
    # The runner raised a plain KeyboardInterrupt on SIGTERM: `slide demo` then exited 130
    # and `slide launch` 0, where the CLI's contract says 143.
    with runner_child(tmp_path) as (child, node):
        assert child.stdout is not None
        child.send_signal(signal.SIGTERM)
        assert child.stdout.readline().strip() == 'Terminated'
        child.wait(20)
        assert _gone(node, 10), f'node {node} outlived the stopped graph'


def test_waiting_for_a_node_ends_once_another_died_and_it_did_not_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The behaviour retries its configure for ever while a node it needs is dead: with
    # exit_on_done, `slide launch` waited for it until someone stopped it by hand.
    from slide_bringup import runner

    monkeypatch.setattr(runner, 'AFTER_DEATH_S', 1.0)
    broken = NodeSpec('slide_perception', 'perception_node', 'perception', {})
    with Graph([NETFT, broken], tmp_path / 'logs') as graph:
        t0 = time.monotonic()
        assert graph.wait_for('netft', on_exit=lambda *e: None) is None  # no timeout given
        assert time.monotonic() - t0 < 30


def test_runs_started_in_the_same_second_get_folders_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both wrote into one folder, each node's log emptying the other's.
    from slide_bringup import runner

    monkeypatch.setattr(runner.time, 'strftime', lambda _fmt: '20261128-201245')
    folders = [runner.fresh_log_dir(tmp_path / 'out') for _ in range(3)]
    assert [f.name for f in folders] == ['20261128-201245', '20261128-201245-2',
                                         '20261128-201245-3']  # fmt: skip
    assert all(f.is_dir() for f in folders)
