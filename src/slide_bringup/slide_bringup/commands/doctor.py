"""``slide doctor``: check that this machine can run slide (Python, ROS 2, DDS, MuJoCo)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
import importlib
import os
import platform
import sys
from typing import Any

NAME = 'doctor'
HELP = (
    'check the environment: Python, slide_core, ROS 2 (rclpy, DDS, actions), MuJoCo, the '
    'workcell file and the nodes'
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--skip-ros', action='store_true', help='do not start a ROS 2 node (no DDS traffic)'
    )


def _version(module: str) -> str:
    mod = importlib.import_module(module)
    return str(getattr(mod, '__version__', 'unknown'))


def _ros_roundtrip() -> str:
    from slide_bringup.ros_check import action_roundtrip, domain_problem

    problem = domain_problem()
    if problem:  # (Fast DDS ended the doctor's process on it, before any report)
        raise ValueError(problem)
    rt = action_roundtrip()
    if not (rt.accepted and rt.result_success and rt.feedback_received == 3):
        raise RuntimeError(f'action round trip incomplete: {rt}')
    return f'Push action goal, 3 feedback, result in {rt.seconds:.2f} s'


def _workcell() -> str:
    """The workcell file, its planner settings and its camera calibration load (the demo
    refused to start without them, and the planner node on a mis-spelt setting, while the
    doctor said every check passed)."""
    from slide_core.model import load_workcell, workcell_path
    from slide_core.perception import load_extrinsics
    from slide_core.planning import planner_config

    cell = load_workcell()
    planner_config(cell)
    load_extrinsics(cell.camera_extrinsics)
    return f'{workcell_path()}, camera {cell.camera_extrinsics.name}'


def _nodes() -> str:
    """Every node of the twin graph is installed (``slide demo`` starts them)."""
    from slide_bringup.graph import pregrasp
    from slide_bringup.runner import command

    specs = pregrasp({})
    for spec in specs:
        command(spec)  # GraphError naming the package that is not built
    return f'{len(specs)} node executables installed'


def _dds_profile() -> str:
    """The Fast DDS profile the graph's processes get (``config/fastdds.xml`` through
    ``scripts/env.sh``): without one a point cloud goes as fragmented best-effort UDP,
    which loses most of them, and a node killed outright is noticed after 20 s."""
    import xml.etree.ElementTree as ET

    rmw = os.environ.get('RMW_IMPLEMENTATION') or 'rmw_fastrtps_cpp'  # Jazzy's default
    if 'fastrtps' not in rmw and 'fastdds' not in rmw:
        return f'{rmw}: not Fast DDS, config/fastdds.xml does not apply'
    names = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE')
    given = next(((n, os.environ[n]) for n in names if os.environ.get(n)), None)
    if given is None:
        raise RuntimeError(
            'no Fast DDS profile (FASTRTPS_DEFAULT_PROFILES_FILE is not set): point clouds '
            'go as fragmented UDP and most are lost, and a node killed outright is noticed '
            'after 20 s; run through scripts/run.sh, or export '
            'FASTRTPS_DEFAULT_PROFILES_FILE=<the repository>/config/fastdds.xml'
        )
    name, path = given
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise RuntimeError(f'{name}={path}: not a readable profile ({exc})') from None
    lease = root.find('.//{*}leaseDuration/{*}sec')
    if lease is None or lease.text is None:
        return f'{path} (participant lease: Fast DDS default, 20 s)'
    return f'{path} (participant lease {lease.text.strip()} s)'


def _mujoco() -> str:
    import mujoco

    return f'mujoco {mujoco.__version__}, MUJOCO_GL={os.environ.get("MUJOCO_GL", "")}'


def run(args: argparse.Namespace) -> dict[str, Any]:
    checks: dict[str, Callable[[], str]] = {
        'python': lambda: platform.python_version(),
        'slide_core': lambda: _version('slide_core'),
        'numpy': lambda: _version('numpy'),
        'scipy': lambda: _version('scipy'),
        'mujoco': _mujoco,
        'rclpy': lambda: (
            (importlib.import_module('rclpy') and '')
            + f'RMW {os.environ.get("RMW_IMPLEMENTATION", "default")}'
        ),
        'dds_profile': _dds_profile,
        'slide_interfaces': lambda: (
            importlib.import_module('slide_interfaces.action') and 'generated types import'
        ),
        'workcell': _workcell,
        'nodes': _nodes,
    }
    if not args.skip_ros:
        checks['ros_action_roundtrip'] = _ros_roundtrip
    report: dict[str, Any] = {}
    ok = True
    for name, check in checks.items():
        try:
            report[name] = {'ok': True, 'detail': check()}
        except Exception as exc:  # noqa: BLE001 - a doctor reports every failure
            ok = False
            report[name] = {'ok': False, 'detail': f'{type(exc).__name__}: {exc}'}
            print(f'slide doctor: {name}: {exc}', file=sys.stderr)
    return {
        'ok': ok,
        'ros_from': os.environ.get('SLIDE_ROS_FROM', 'unknown'),
        'checks': report,
    }


def format_text(result: dict[str, Any]) -> str:
    lines = [f'ROS 2 from: {result["ros_from"]}']
    for name, c in result['checks'].items():
        lines.append(f'[{"ok" if c["ok"] else "FAIL"}] {name}: {c["detail"]}')
    lines.append('all checks passed' if result['ok'] else 'some checks FAILED')
    return '\n'.join(lines)
