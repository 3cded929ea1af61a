"""Run a graph's nodes as processes, as ``ros2 launch`` would, on machines without it.

Each node of the description (:mod:`slide_bringup.graph`) is started from its installed
executable (``<prefix>/lib/<package>/<executable>``, as ``ros2 run`` finds it) with its
parameters and remappings as ``--ros-args``. Output goes to ``<log_dir>/<node>.log``.
Ctrl-C (or :meth:`Graph.stop`) sends SIGINT to every node, waits, then terminates what is
left: nothing is left running. A node that dies on its own is reported once, with the end
of its log (:meth:`Graph.exited`, :meth:`Graph.death_notice`), as ``ros2 launch`` reports a
process that has died. A runner that is killed outright (SIGKILL, a test's timeout)
takes its nodes with it: each node asks the kernel for SIGTERM when its parent dies.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Sequence
import ctypes
from dataclasses import dataclass
import os
from pathlib import Path
import signal
import subprocess
import threading
import time
from typing import IO, Any

from slide_bringup.graph import GraphError, NodeSpec
from slide_bringup.signals import raise_terminated
from slide_core.files import check_folder


@dataclass
class Running:
    spec: NodeSpec
    process: subprocess.Popen[bytes]
    log: IO[bytes]


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC = ctypes.CDLL(None, use_errno=True) if os.name == 'posix' else None


def _die_with_parent() -> None:
    """In the forked child, before exec: SIGTERM when the runner dies, however it dies
    (only a libc call here: the child of a threaded parent must not take locks)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def executable(spec: NodeSpec) -> Path:
    """The installed executable of a node (GraphError when the package is not built)."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        prefix = Path(get_package_prefix(spec.package))
    except PackageNotFoundError:
        raise GraphError(
            f'package {spec.package} is not installed (run scripts/setup.sh, or use the robot '
            'PC for robot-only nodes)'
        ) from None
    path = prefix / 'lib' / spec.package / spec.executable
    if not path.exists():
        raise GraphError(f'{spec.package} has no executable {spec.executable} ({path})')
    return path


def fresh_log_dir(base: Path) -> Path:
    """A new folder under ``base`` named by the time to the second, made here (with -2, -3
    ... after the name when another run took it: two runs started in the same second
    shared one, and each node's log emptied the other's)."""
    stamp = time.strftime('%Y%m%d-%H%M%S')
    for k in range(1, 1000):
        path = base / (stamp if k == 1 else f'{stamp}-{k}')
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path
    raise GraphError(f'no new log folder under {base} for {stamp}: give --log-dir')


def command(spec: NodeSpec) -> list[str]:
    """The command line of one node."""
    from slide_ros.params import ros_args

    args = ros_args(spec.parameters, spec.remappings)
    where = ['-r', f'__ns:=/{spec.namespace}'] if spec.namespace else []
    return [str(executable(spec)), *spec.arguments, *args, *where, '-r', f'__node:={spec.name}']


AFTER_DEATH_S = 30.0
"""How long [s] :meth:`Graph.wait_for` waits for its node once another died: enough for
the behaviour to end its episode with the reason (a node gone mid-episode), where a node
dead at start-up left it retrying its configure for ever."""


DISCOVERY_WAIT_S = 3.0
"""How long [s] :func:`already_running` listens for the nodes of this ROS domain: a
machine's own processes are discovered within a fraction of a second when it is idle; on a
loaded 2-core machine (a CI run) 1.5 s once missed a running graph's F/T driver, and a
second graph started beside it."""


def full_name(spec: NodeSpec) -> str:
    """The node's name with its namespace, as ``ros2 node list`` prints it."""
    return f'/{spec.namespace}/{spec.name}' if spec.namespace else f'/{spec.name}'


def already_running(specs: Sequence[NodeSpec], wait_s: float = DISCOVERY_WAIT_S) -> list[str]:
    """The nodes of ``specs`` that already run in this ROS domain (another graph's, on this
    machine or on the network): listened for ``wait_s``, and each one heard of asked for its
    parameters, since DDS can still list a node that is gone (the test suite saw the F/T
    driver tests' in-process nodes after their contexts had ended), and only a live node
    answers."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    wanted = {full_name(s) for s in specs}
    context = Context()
    rclpy.init(args=[], context=context)  # (the launch arguments are not ROS ones: a
    # record:=PATH read as a deprecated remap rule)
    try:
        probe = rclpy.create_node(f'slide_runner_probe_{os.getpid()}', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        heard: set[str] = set()
        end = time.monotonic() + wait_s
        while not heard and time.monotonic() < end:
            names = probe.get_node_names_and_namespaces()
            heard = wanted & {ns.rstrip('/') + '/' + name for name, ns in names}
            time.sleep(0.1)
        alive = sorted(name for name in heard if _answers(probe, name))
        executor.shutdown()
        spinner.join(timeout=2.0)
        probe.destroy_node()
    finally:
        context.try_shutdown()
    return alive


ANSWER_WAIT_S = 2.0
"""How long [s] :func:`already_running` waits for a node it heard of to answer."""


def _answers(probe: Any, name: str) -> bool:
    """Whether node ``name`` answers a request for its parameters' names (asked again until
    it does: :func:`slide_ros.lifecycle.call_idempotent`)."""
    from rcl_interfaces.srv import ListParameters

    from slide_ros.lifecycle import call_idempotent

    client = probe.create_client(ListParameters, f'{name}/list_parameters')
    try:
        if not client.wait_for_service(timeout_sec=ANSWER_WAIT_S):
            return False
        call_idempotent(client, ListParameters.Request(depth=1), ANSWER_WAIT_S)
        return True
    except TimeoutError:
        return False
    finally:
        probe.destroy_client(client)


class Graph:
    """The running nodes of a graph."""

    def __init__(self, specs: Sequence[NodeSpec], log_dir: Path) -> None:
        robot = [s.name for s in specs if s.robot_only]
        if robot:
            raise GraphError(
                f'{", ".join(robot)} run on the robot PC only: use ros2 launch slide_bringup '
                'pregrasp.launch.py there'
            )
        self.specs = list(specs)
        self.log_dir = check_folder(log_dir, '--log-dir')
        self.nodes: list[Running] = []
        self._reported: set[str] = set()

    def start(self) -> None:
        """Start every node. From here on SIGTERM (``timeout``, a service manager) ends the
        caller as Ctrl-C does, so its ``finally`` stops the nodes, and at exit whatever is
        still running is stopped: nothing is left behind."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, raise_terminated)
        commands = [command(s) for s in self.specs]  # every executable exists, or nothing runs
        from slide_bringup.ros_check import domain_problem

        problem = domain_problem()
        if problem:  # (every node's DDS library would end it at start-up)
            raise GraphError(problem)
        # Two graphs in one ROS domain took each other's topics and actions: a demo's truth
        # check read the other twin, and each behaviour drove the other's executor.
        clash = already_running(self.specs)
        if clash:
            domain = os.environ.get('ROS_DOMAIN_ID', '0')
            raise GraphError(
                f'{", ".join(clash)} already run in ROS domain {domain} (another graph, on '
                'this machine or on its network): stop it, or give this one a domain of its '
                'own (ROS_DOMAIN_ID=N, 0 to 101)'
            )
        atexit.register(self.stop)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for spec, cmd in zip(self.specs, commands, strict=True):
            log = (self.log_dir / f'{spec.name}.log').open('wb')
            # A process group of its own: the terminal's Ctrl-C reaches the runner, which
            # then stops the nodes in order.
            process = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=os.environ.copy(),
                preexec_fn=_die_with_parent,
            )
            self.nodes.append(Running(spec, process, log))

    def __enter__(self) -> Graph:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def poll(self) -> dict[str, int | None]:
        """Each node's exit code (None while it runs)."""
        return {r.spec.name: r.process.poll() for r in self.nodes}

    def exited(self) -> list[tuple[str, int]]:
        """The nodes that have exited since the last call, with their exit codes; each is
        reported once."""
        out = []
        for r in self.nodes:
            code = r.process.poll()
            if code is not None and r.spec.name not in self._reported:
                self._reported.add(r.spec.name)
                out.append((r.spec.name, code))
        return out

    def death_notice(self, name: str, code: int, lines: int = 20) -> str:
        """What to tell a user about node ``name`` that exited with ``code``."""
        tail = self.log_tail(name, lines)
        where = self.log_dir / f'{name}.log'
        return f'node {name} exited with code {code}; the end of {where}:\n{tail}'

    def wait_for(
        self,
        name: str,
        timeout_s: float | None = None,
        on_exit: Callable[[str, int], None] | None = None,
    ) -> int | None:
        """Wait until node ``name`` exits; its exit code (None on timeout, or when another
        node died and ``name`` had not ended :data:`AFTER_DEATH_S` later). Any other node
        that exits meanwhile is passed to ``on_exit`` (name, exit code) once."""
        target = next((r.process for r in self.nodes if r.spec.name == name), None)
        if target is None:
            raise GraphError(f'no node {name!r} in the graph')
        end = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            for other, code in self.exited():
                if other != name and on_exit is not None:
                    on_exit(other, code)
                if other != name and code != 0:
                    # A node it needs is gone: ``name`` would wait for it for ever (the
                    # behaviour retries its configure until every node it needs is up).
                    gone = time.monotonic() + AFTER_DEATH_S
                    end = gone if end is None else min(end, gone)
            if target.poll() is not None:
                return target.returncode
            if end is not None and time.monotonic() > end:
                return None
            time.sleep(0.1)

    def stop(
        self, grace_s: float = 8.0, on_exit: Callable[[str, int], None] | None = None
    ) -> dict[str, int]:
        """SIGINT to every node, then SIGTERM and SIGKILL to what is left; exit codes.
        Further SIGTERMs to this process are ignored while it cleans up. A node not reported
        before (:meth:`exited`) that did not end cleanly is passed to ``on_exit``."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for r in self.nodes:
            if r.process.poll() is None:
                os.killpg(r.process.pid, signal.SIGINT)
        end = time.monotonic() + grace_s
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for r in self.nodes:
                while r.process.poll() is None and time.monotonic() < end:
                    time.sleep(0.05)
                if r.process.poll() is None:
                    os.killpg(r.process.pid, sig)
            end = time.monotonic() + 2.0
        codes = {}
        for r in self.nodes:
            codes[r.spec.name] = r.process.wait()
            r.log.close()
        atexit.unregister(self.stop)
        if on_exit is not None:
            for name, code in self.exited():
                if code != 0:
                    on_exit(name, code)
        return codes

    def log_tail(self, name: str, lines: int = 20) -> str:
        path = self.log_dir / f'{name}.log'
        if not path.exists():
            return ''
        return '\n'.join(path.read_text(errors='replace').splitlines()[-lines:])
