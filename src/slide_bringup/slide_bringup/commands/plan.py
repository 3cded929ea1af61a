"""``slide plan BELIEF --pose X Y YAW``: the goal and the next push from a belief, offline.

The planner's own decisions (:func:`slide_core.planning.select_goal` and
:func:`slide_core.planning.next_step`) for a belief file (``slide identify``'s, or the one
``slide demo`` keeps with its logs) and an object pose: without ``--goal``, the goal the
planner chooses from that pose (both must put the object's centre of mass over the table:
else bad input, exit 2); then the step towards it: done (the pose already does as a goal),
or the path's waypoint aimed at and the push. With ``--seed`` (the episode's) and
``--index`` (the planned push's), the path is drawn from the stream the graph's planner
used for that push, so a logged decision (a ``slide demo`` result's ``planned`` pushes) can
be made again and looked at. With ``--staging``, a staging pose instead of the goal (for a
belief too uncertain for one, :func:`slide_core.planning.select_staging`), and the step
towards it under :func:`slide_core.planning.staging_config`, as a push whose trace says
``staging`` was decided. No plan or no goal is a failure (exit 3) whose reason is the
planner's.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slide_bringup.args import seed
from slide_core.planning import PlannerConfig

if TYPE_CHECKING:
    from slide_core.model import Belief, Table

NAME = 'plan'
HELP = 'the goal and the next push for an object pose, from a belief file'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('belief', type=Path, help='belief file (slide identify, slide demo)')
    parser.add_argument(
        '--pose',
        type=float,
        nargs=3,
        required=True,
        metavar=('X', 'Y', 'YAW'),
        help='the object pose in the table frame [m, m, rad]',
    )
    parser.add_argument(
        '--goal',
        type=float,
        nargs=3,
        metavar=('X', 'Y', 'YAW'),
        help='the goal pose (default: the one the planner chooses from --pose)',
    )
    parser.add_argument('--seed', type=seed, default=0, help="the episode's seed (default 0)")
    parser.add_argument(
        '--index', type=int, default=0, help='the planned push the decision is for (default 0)'
    )
    parser.add_argument(
        '--overhang-weight',
        type=float,
        default=PlannerConfig.overhang_weight,
        help='goal score per metre of overhang, as the planner node (default %(default)s)',
    )
    parser.add_argument(
        '--staging',
        action='store_true',
        help="a staging pose, not a goal: one every model keeps balanced (bar the planner's "
        'staging_epsilon of the belief), for a belief too uncertain for a goal (a push whose '
        'trace says staging was planned so)',
    )
    parser.add_argument('--png', type=Path, help='picture of the decision')


def _select_goal(belief: Belief, X_WO: Any, config: PlannerConfig, staging: bool) -> Any:
    """:func:`slide_core.planning.select_goal` (or ``select_staging``), with a bar of its
    search on a terminal's stderr (a large object's takes tens of seconds)."""
    import sys

    from tqdm import tqdm

    from slide_core.planning import select_goal, select_staging

    with tqdm(
        total=100,
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        desc='staging pose search' if staging else 'goal search',
        bar_format='{desc}: {percentage:3.0f}%|{bar}| [{elapsed}]',
        leave=False,
    ) as bar:

        def progress(fraction: float) -> None:
            bar.update(round(100 * fraction) - bar.n)

        return (select_staging if staging else select_goal)(belief, X_WO, config, progress)


MAX_YAW = 2 * math.pi
"""[rad] the largest yaw --pose and --goal take (it is wrapped to [-pi, pi)): more than a
turn is degrees, most likely (90 was taken as 2.035 rad, and planned from)."""


def run(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from slide_core.files import check_output
    from slide_core.geometry import wrap_angle
    from slide_core.model import load_belief, load_workcell
    from slide_core.planning import (
        PlanningError,
        next_step,
        planner_config,
        step_seed,
    )
    from slide_core.task import push_trace

    if args.png is not None:
        check_output(args.png, ('.png',), '--png')
    if args.index < 0:
        raise ValueError(f'--index must not be negative, got {args.index}')
    belief = load_belief(args.belief)
    grid = belief.grid
    unknown = int(np.count_nonzero(grid.heights[grid.occupancy] <= 0.0))
    if unknown:
        # (a file without heights planned a grasp whose pads closed at the table, z 0,
        # which the executor refuses only once the object has been pushed there)
        raise ValueError(
            f'{args.belief}: {unknown} of the {grid.n} cells of the object have no height '
            '(0 m), and the gripper closes at half the height of what it holds: give every '
            'occupied cell its height [m] (heights; slide identify writes them from the camera)'
        )
    workcell = load_workcell()
    config = planner_config(workcell, overhang_weight=args.overhang_weight)
    poses: dict[str, Any] = {}
    for flag, pose in (('--pose', args.pose), ('--goal', args.goal)):
        if pose is None:
            continue
        if not all(math.isfinite(v) for v in pose):  # (a NaN yaw was 'more than a turn')
            raise ValueError(f'{flag}: {list(pose)} is not three finite numbers (x y yaw)')
        if not abs(pose[2]) <= MAX_YAW:
            # (1e20 rad found no goal where its wrapped value, 1.8956, found one: the
            # planner's turns lose every digit of such an angle)
            raise ValueError(
                f'{flag}: the yaw {pose[2]:g} rad is more than a turn: is it in degrees? (give '
                'radians)'
            )
        P = np.array(pose, dtype=float)
        P[2] = float(wrap_angle(P[2]))
        _check_on_table(flag, P, belief, workcell.table)
        poses[flag] = P
    X, given_goal = poses['--pose'], poses.get('--goal')
    out: dict[str, Any] = {'belief': str(args.belief), 'pose': X.tolist(), 'goal': None}
    out['goal_chosen'] = given_goal is None
    out['staging'] = args.staging
    trace: dict[str, Any] = {'X_start': X.tolist(), 'pushes': []}
    try:
        if given_goal is None:
            goal = _select_goal(belief, X, config, args.staging)
            X_goal = goal.X_WO
            out['goal'] = goal.to_dict()
        else:
            X_goal = given_goal
            out['goal'] = {'X_WO': X_goal.tolist(), 'staging': args.staging}
        trace['goal'] = X_goal.tolist()
        seed = step_seed(args.seed, args.index)
        step = next_step(belief, X, X_goal, config, seed=seed, staging=args.staging)
    except PlanningError as exc:
        out.update(ok=False, reason=str(exc))
    else:
        out.update(ok=True, reason='', done=step.done, seconds=round(step.seconds, 3))
        if not step.done:
            assert step.push is not None
            p = step.push
            push = push_trace(X, step, staging=args.staging)
            trace['pushes'].append(push)
            out['push'] = {
                **{k: v for k, v in push.items() if k not in ('X_WO', 'path')},
                'speed_mps': p.primitive.speed,
                'expected_distance_m': p.expected_distance,
                'fall_probability': p.fall_probability,
                'predicted_X_WO': p.predicted_X_WO[belief.best].tolist(),  # the likeliest's
            }
    if args.png is not None:
        from slide_core.io.plot import episode_figure

        episode_figure(args.png, belief.grid, belief, trace, config, 'slide plan')
    out['png'] = None if args.png is None else str(args.png)
    return out


def _check_on_table(flag: str, X_WO: Any, belief: Belief, table: Table) -> None:
    """ValueError unless the pose X_WO (3,) puts the belief's most probable centre of mass
    over the table top (an object resting there, or balanced at its edge)."""
    import numpy as np

    from slide_core.geometry import check_pose, rotation

    X = check_pose(X_WO, flag)
    p_WCom = X[:2] + rotation(X[2]) @ belief.com()[belief.best]
    x, y = (float(v) for v in p_WCom)
    if not (0.0 <= x <= table.depth and abs(y) <= table.width / 2):
        raise ValueError(
            f"{flag} {np.round(X, 4).tolist()} puts the object's centre of mass at "
            f'({x:.3f}, {y:.3f}) m, off the table (x 0 to {table.depth} m, |y| up to '
            f'{table.width / 2} m): no object rests there'
        )


def format_text(result: dict[str, Any]) -> str:
    lines = [f'object at {[round(v, 3) for v in result["pose"]]} ({result["belief"]})']
    goal = result.get('goal')
    if goal is not None:
        how = 'chosen' if result.get('goal_chosen') else 'given'
        what = 'staging pose' if result.get('staging') else 'goal'
        lines.append(f'  {what} ({how}): {[round(v, 3) for v in goal["X_WO"]]}')
    if not result['ok']:
        lines.append(f'  no plan: {result["reason"]}')
    elif result.get('done'):
        what = (
            'staging pose (graspable, every model balanced)'
            if result.get('staging')
            else 'goal (graspable, balanced)'
        )
        lines.append(f'  done: the pose already does as a {what}')
    else:
        p = result['push']
        lines.append(
            f'  push {p["travel"] * 100:.1f} cm from {[round(v, 3) for v in p["p_WF0"]]} '
            f'along {[round(v, 2) for v in p["direction_W"]]}, towards the waypoint '
            f'{[round(v, 3) for v in p["target"]]}: expected {p["expected_distance_m"] * 100:.1f}'
            f' cm from it, falls with probability {p["fall_probability"]:.3f}'
        )
    if result.get('png'):
        lines.append(f'picture: {result["png"]}')
    return '\n'.join(lines)
