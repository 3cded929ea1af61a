"""``slide episode``: the whole pre-grasp task once in the MuJoCo twin, without ROS.

Random initial pose, exploratory pushes, identification, a goal at the table edge,
closed-loop planned pushes, the grasp of the overhang and a lift
(:func:`slide_bringup.episode.run_episode`). The log goes to stderr; on a terminal a
progress bar below it counts the task's events and shows the latest. The compiled kernels
are loaded before the episode starts, so its stage times do not include that.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import sys
import time
from typing import Any

from slide_bringup.args import (
    add_contact_offset,
    add_tracking,
    force_limit,
    seed,
    tracking_of,
)
from slide_bringup.graph import FORCE_LIMIT_N
from slide_core.task import EXPLORATION, MODEL_SOURCES, TaskSettings

NAME = 'episode'
HELP = 'run the whole pre-grasp task once in the MuJoCo twin (explore, identify, plan, grasp)'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_episode_arguments(parser, default_png=None)


def add_episode_arguments(parser: argparse.ArgumentParser, default_png: Path | None) -> None:
    """The options ``slide episode`` and ``slide demo`` share."""
    parser.add_argument('--object', default='hammer', help='library name or .yaml file')
    parser.add_argument('--seed', type=seed, default=0, help='random seed (initial pose, pushes)')
    parser.add_argument(
        '--method',
        choices=MODEL_SOURCES,
        default='probabilistic',
        help='which models the planner gets (default probabilistic)',
    )
    parser.add_argument(
        '--exploration',
        choices=EXPLORATION,
        default='most-distinctive',
        help='exploratory pushes after the first: most distinctive under a belief of the '
        'pushes so far (paper 2, as the graph does; default) or random',
    )
    parser.add_argument(
        '--exploration-pushes', type=int, default=5, help='exploratory pushes (1 to 20)'
    )
    parser.add_argument(
        '--extra-exploration',
        type=int,
        default=TaskSettings.extra_exploration,
        help='while the belief is too uncertain for any goal: a staging pose at the edge '
        'first, then more exploratory pushes, one at a time with a new identification (the '
        'staging pose counted as one; 0 to 20; default %(default)s)',
    )
    parser.add_argument(
        '--push-budget', type=int, default=25, help='planned pushes allowed (default 25)'
    )
    parser.add_argument(
        '--stall-pushes',
        type=int,
        default=TaskSettings.stall_pushes,
        help='pushes in a row that bring the object no nearer the goal before the loop '
        'stops and tries the grasp (1 to 25; default %(default)s)',
    )
    parser.add_argument(
        '--regoals',
        type=int,
        default=TaskSettings.regoals,
        help='times the closed loop chooses a new goal from where the object is when no path '
        'or safe push leads to its goal from there (0 to 10; default %(default)s)',
    )
    parser.add_argument(
        '--relearn-every',
        type=int,
        default=TaskSettings.relearn_every,
        help='identify again from every push so far after this many planned pushes (0: '
        'never, up to 25; default %(default)s)',
    )
    parser.add_argument(
        '--force-limit',
        type=force_limit,
        default=FORCE_LIMIT_N,
        help='a push whose force goes over this stops, retracts and ends the episode, as the '
        "graph's F/T limit does [N] (0: off; default %(default)g)",
    )
    add_contact_offset(parser)
    add_tracking(parser)
    parser.add_argument('--png', type=Path, default=default_png, help='picture of the episode')


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    from slide_bringup.bench.warmup import warm_up
    from slide_bringup.cli import EXIT_INTERRUPTED, EXIT_TERMINATED
    from slide_bringup.episode import run_episode
    from slide_core.files import check_output
    from slide_core.model import load_object

    if args.png is not None:
        check_output(args.png, ('.png',), '--png')
    tracking = tracking_of(args)
    spec = load_object(args.object)
    with tqdm(
        total=None,
        unit='event',
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        dynamic_ncols=True,
        bar_format='{desc}: {n_fmt} events [{elapsed}]{postfix}',
        desc=f'{spec.name} seed {args.seed}',
    ) as bar:

        def progress(message: str) -> None:
            line = f'[{time.strftime("%H:%M:%S")}] {message}'
            if bar.disable:
                print(line, file=sys.stderr, flush=True)
            else:
                bar.write(line, file=sys.stderr)
                bar.set_postfix_str(message[:60], refresh=False)
                bar.update(1)

        def load_kernels() -> None:
            progress('loading the compiled kernels')
            warm_up()

        result = run_episode(
            spec,
            args.seed,
            args.method,
            exploration_pushes=args.exploration_pushes,
            extra_exploration=args.extra_exploration,
            push_budget=args.push_budget,
            stall_pushes=args.stall_pushes,
            regoals=args.regoals,
            relearn_every=args.relearn_every,
            png=args.png,
            progress=progress,
            exploration=args.exploration,
            before_start=load_kernels,
            force_limit=args.force_limit,
            tracking=tracking,
            contact_offset=args.contact_offset,
        )
    out = result.to_dict()
    out['pose_tracking'] = tracking.figures()
    out['png'] = str(args.png) if args.png is not None and args.png.exists() else None
    # The command ran; a failed episode is its result, and the exit code says so (that of
    # an interrupt or a SIGTERM when one stopped it: a batch runner told a kill from a
    # failed episode by nothing).
    out['ok'] = result.success
    if result.interrupted:
        out['exit'] = EXIT_TERMINATED if result.interrupted == 'terminated' else EXIT_INTERRUPTED
    return out


def _rest(result: dict[str, Any]) -> str:
    """Overhang and stay probability where the object lay at the end, if it lay anywhere."""
    if result['overhang_m'] is None or result['stay_probability'] is None:
        return 'no final pose (it fell while pushed)'
    return (
        f'overhang {100 * result["overhang_m"]:.1f} cm, P(stay) {result["stay_probability"]:.2f}'
    )


def format_text(result: dict[str, Any]) -> str:
    verdict = 'lifted and held' if result['success'] else 'FAILED'
    lines = [
        f'{result["object"]}, seed {result["seed"]}, {result["method"]}: {verdict}',
        f'  {result["exploration_pushes"]} exploratory pushes, identification '
        f'{result["identification_s"]:.1f} s',
        f'  {result["pushes"]} planned pushes, planning {result["planning_s"]:.1f} s '
        f'({result["simulations"]} model rollouts)',
        f'  {_rest(result)}, lifted {100 * result["lifted_m"]:.1f} cm, fell: {result["fell"]}',
        f'  total {result["total_s"]:.1f} s',
    ]
    if result['failure']:
        lines.append(f'  why: {result["failure"]}')
    if result.get('png'):
        lines.append(f'picture: {result["png"]}')
    return '\n'.join(lines)
