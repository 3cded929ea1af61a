"""``slide launch pregrasp [name:=value ...]``: the pre-grasp graph without ``ros2 launch``.

Starts the nodes of :func:`slide_bringup.graph.pregrasp` (the description
``pregrasp.launch.py`` reads too) as processes, logs in ``--log-dir``. Ctrl-C stops every
node cleanly; with ``exit_on_done:=true`` the command ends when the episode does, its exit
code saying the outcome (0 lifted, 3 failed). A node that dies on its own is reported with
the end of its log and makes the exit code 3, episode or not.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import sys
import time
from typing import Any

NAME = 'launch'
HELP = 'start the pre-grasp graph (pip-only machines; ros2 launch on the robot PC)'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('graph', choices=('pregrasp',), help='which graph')
    parser.add_argument(
        'assignments', nargs='*', metavar='name:=value', help='launch arguments (see --list)'
    )
    parser.add_argument(
        '--log-dir', type=Path, default=None, help='node logs (default out/launch/TIME)'
    )
    parser.add_argument('--list', action='store_true', help='list the launch arguments and exit')


def take_extra(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """Take the name:=value words that came after an option into ``args.assignments``
    (argparse takes positionals only before the first option); return the rest."""
    taken = [w for w in extra if ':=' in w and not w.startswith('-')]
    args.assignments = [*args.assignments, *taken]
    return [w for w in extra if w not in taken]


def parse_assignments(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition(':=')
        if not sep or not name:
            raise ValueError(f'{item!r} is not name:=value')
        out[name] = value
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from slide_bringup.graph import ARGUMENTS, pregrasp
    from slide_bringup.runner import Graph, fresh_log_dir
    from slide_bringup.signals import Terminated

    if args.list:
        return {name: {'default': d, 'help': h} for name, (d, h) in ARGUMENTS.items()}
    given = parse_assignments(args.assignments)
    specs = pregrasp(given)
    log_dir = args.log_dir or fresh_log_dir(Path('out/launch'))
    graph = Graph(specs, log_dir)
    graph.start()
    names = [s.name for s in specs]
    print(f'slide launch: {", ".join(names)} running; logs in {log_dir}', file=sys.stderr)
    code: int | None = None

    def died(name: str, exit_code: int) -> None:
        # As ros2 launch does: the rest keeps running (the behaviour ends the episode with
        # a reason when a node it needs is gone), and the user sees why this one went.
        print(f'slide launch: {graph.death_notice(name, exit_code)}', file=sys.stderr)

    try:
        if given.get('exit_on_done') == 'true':
            code = graph.wait_for('behaviour', on_exit=died)
        else:
            while True:
                for name, exit_code in graph.exited():
                    died(name, exit_code)
                time.sleep(1.0)
    except KeyboardInterrupt as exc:
        print('slide launch: stopping every node', file=sys.stderr)
        if isinstance(exc, Terminated):  # a service manager's stop: 143 once all stopped
            raise
    finally:
        codes = graph.stop(on_exit=died)  # and one that did not end cleanly
    return launch_result(names, codes, log_dir, code)


def launch_result(
    names: list[str], codes: dict[str, int], log_dir: Path, code: int | None
) -> dict[str, Any]:
    """What ``slide launch`` reports: the nodes, their exit codes, where their logs are, the
    episode's exit code (None without ``exit_on_done``), and when not ok the reason."""
    failed = {n: c for n, c in codes.items() if c != 0}
    reasons: list[str] = []
    if code not in (None, 0):
        reasons.append(f'the episode ended with exit code {code}')
    if failed:
        reasons.append(
            'node(s) that died or did not end cleanly: '
            + ', '.join(f'{n} ({c})' for n, c in failed.items())
            + f'; their logs are in {log_dir}'
        )
    out: dict[str, Any] = {
        'nodes': names,
        'exit_codes': codes,
        'logs': str(log_dir),
        'episode_exit_code': code,
        # Not ok when a node died or did not end cleanly, whatever the episode did.
        'ok': not reasons,
    }
    if reasons:
        out['reason'] = '; '.join(reasons)
    return out
