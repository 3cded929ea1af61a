"""``slide identify BAG``: per-cell mass and friction maps from recorded pushes.

Reads ``slide record``'s twin bags and the graph's (the recorder node's, ``ros2 bag
record``'s): pushes the bag cannot give whole are left out with the reason, and what was
wrong with the bag is said (see :func:`slide_core.io.read_pushes`). A bag without object
poses gets them from its camera clouds through perception (``--poses cloud`` forces it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
import sys
from typing import TYPE_CHECKING, Any

from slide_bringup.args import add_sensor_mount, contact_offset_arg, seed
from slide_core.task import TaskSettings

if TYPE_CHECKING:
    from slide_core.geometry import Grid
    from slide_core.identification import PushData

NAME = 'identify'
HELP = 'identify mass and friction maps from the pushes of a bag; write the belief as YAML'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from slide_core.identification import COM_DIRECTIONS, DEFAULT_BUDGET, METHODS
    from slide_core.physics import DEFAULT_SUPPORT, SUPPORT_MODELS

    parser.add_argument('bag', type=Path, help='rosbag2 folder (slide record or ros2 bag record)')
    parser.add_argument(
        '--train',
        default='0-4',
        help="training pushes, like 0-4 or 0,2,5, or 'all' (default %(default)s)",
    )
    parser.add_argument(
        '--poses',
        default='auto',
        choices=('auto', 'topic', 'cloud'),
        help='object poses from /object/pose (topic), from the recorded camera clouds through '
        'perception (cloud), or the topic when the bag has it (auto, the default)',
    )
    parser.add_argument(
        '--extrinsics',
        type=Path,
        help="camera extrinsics for --poses cloud (default: the workcell's camera file)",
    )
    parser.add_argument(
        '--method', default='probabilistic', choices=METHODS, help='identification method'
    )
    parser.add_argument(
        '--models',
        type=int,
        default=8,
        help='K fitted models (probabilistic; --com-directions adds its spread models)',
    )
    parser.add_argument(
        '--budget',
        type=int,
        default=DEFAULT_BUDGET,
        help='simulations allowed (default %(default)s)',
    )
    parser.add_argument('--seed', type=seed, default=0, help='seed of randomised methods')
    parser.add_argument(
        '--push-moment',
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fit with the push's moment shifting the table's pressure towards the push (at "
        "the fingertip height the bag's pushes record, else the workcell's, on each cell's "
        'side; the belief records it and the '
        "simulators that replay and plan with it add it); --no-push-moment: the papers' "
        'loads',
    )
    parser.add_argument(
        '--com-directions',
        type=int,
        default=COM_DIRECTIONS,
        metavar='D',
        help='probabilistic: also hold, per direction (D of them), the model with the centre '
        'of mass furthest along it that the pushes allow (0: the K models alone; default '
        '%(default)s)',
    )
    parser.add_argument(
        '--refine-budget',
        type=int,
        default=0,
        metavar='N',
        help="then refine the models on the simulator's pose error over the training "
        'pushes, N model evaluations (0: no refinement; about a minute per 100)',
    )
    parser.add_argument(
        '--support',
        default=DEFAULT_SUPPORT,
        choices=SUPPORT_MODELS,
        help="how the table carries the cells: a rigid body's linear pressure (default) or "
        "each cell's own weight (the papers')",
    )
    parser.add_argument(
        '--table-edge',
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the bag's poses are in the table frame, whose free edge x = 0 carries only the "
        'part of the object on the table (pushes with some of it past the edge say where its '
        'centre of mass is); --no-table-edge: poses in another frame, the whole object '
        'carried throughout',
    )
    add_sensor_mount(parser)
    parser.add_argument(
        '--contact-offset',
        type=contact_offset_arg,
        default=TaskSettings.contact_offset,
        metavar='MODE',
        help="the fingertip's recorded offset from the object (a camera-to-arm calibration's "
        'error), measured on the training pushes from where the F/T feels the fingertip '
        "against the object's outline, said, with a warning above 1 mm: auto (the default) "
        'also takes one above 1 mm, told from three push directions or more, off the '
        "fingertip's path before the fit, as the task does; check only says it; X_MM,Y_MM "
        'takes that one off; off: neither',
    )
    parser.add_argument('--out', type=Path, required=True, help='belief file to write (.yaml)')
    parser.add_argument('--png', type=Path, help="also draw the models' maps to this PNG")


LEAST_PER_MODEL = 20
"""Simulations per model below which ``slide identify`` warns that the fit barely moves
(64 models on 100 came out as the grid's uniform start)."""


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dataclasses import replace

    from tqdm import tqdm

    from slide_bringup.args import parse_range
    from slide_bringup.cli import CliError
    from slide_core.files import atomic_path, check_output
    from slide_core.identification import (
        IdentificationError,
        OffTableError,
        TrainingSet,
        check_settings,
        fit_problems,
        identify,
        push_fingerprint,
    )
    from slide_core.io import read_pushes
    from slide_core.io.plot import belief_figure
    from slide_core.model import is_belief_file, load_workcell, save_belief

    if args.refine_budget < 0:
        raise CliError(f'--refine-budget must be >= 0, got {args.refine_budget}')
    # Said before the bag is read (perceiving its clouds can take minutes), by their flags.
    flags = {'method': '--method', 'K': '--models', 'budget': '--budget'}
    flags['com_directions'] = '--com-directions'
    try:
        check_settings(args.method, args.models, args.budget, args.com_directions, flags)
    except IdentificationError as exc:
        raise CliError(str(exc)) from None
    # Outputs are checked before the work, and written only when all of it succeeded.
    inputs = tuple(p for p in (args.bag, args.extrinsics) if p is not None)
    check_output(args.out, ('.yaml', '.yml'), '--out', inputs=inputs)
    if args.out.is_file() and not is_belief_file(args.out):
        # (an object spec given as --out was replaced by the belief)
        raise CliError(f'--out {args.out} exists and is not a belief file: give a new path')
    if args.png is not None:
        check_output(args.png, ('.png',), '--png', inputs=inputs)
    if args.extrinsics is not None:
        if args.poses == 'topic':
            raise CliError('--extrinsics is for poses from the camera clouds (--poses cloud)')
        if not args.extrinsics.is_file():
            raise CliError(f'--extrinsics {args.extrinsics}: no such file')
    train_pushes = None if args.train.strip() == 'all' else parse_range(args.train)
    read = read_pushes(
        args.bag,
        train_pushes,
        poses=args.poses,
        extrinsics=args.extrinsics,
        sensor_mount=args.sensor_mount,
    )
    warnings = list(read.warnings)

    def warn(text: str) -> None:
        """Said now, on stderr, and in the result."""
        warnings.append(text)
        print(f'slide identify: warning: {text}', file=sys.stderr, flush=True)

    if args.method == 'probabilistic' and args.budget < LEAST_PER_MODEL * args.models:
        warn(
            f'--budget {args.budget} gives each of the {args.models} models about '
            f'{args.budget // args.models} simulations: they stay near where they start '
            f'(give at least {LEAST_PER_MODEL} per model)'
        )
    if args.extrinsics is not None and read.poses_from == '/object/pose':
        warn(
            f'--extrinsics {args.extrinsics} was not used: the bag has /object/pose, so the '
            'poses came from it (--poses cloud takes them from the camera clouds)'
        )
    for line in read.report():  # said now, before the long part, and in the result
        print(f'slide identify: {line}', file=sys.stderr, flush=True)
    grid, pushes = read.grid, read.pushes
    # The push acts at the fingertip's height: the one the bag's pushes were made with
    # where it says, else the workcell's (workcell.yaml of $SLIDE_CONFIG_DIR or the installed
    # config). A bag from another cell was fitted with this one's height, and nothing said so.
    tip = load_workcell().fingertip
    heights = list(dict.fromkeys(h for _, h in read.fingertips))
    if len(heights) == 1 and abs(heights[0] - tip.height) > 1e-6:
        warn(
            f"the bag's pushes were made with the fingertip {heights[0]:g} m above the table; "
            f"this workcell's is {tip.height:g} m: the fit uses the bag's"
        )
        tip = replace(tip, height=heights[0])
    elif len(heights) > 1:
        warn(
            f"the bag's pushes were made with the fingertip at {len(heights)} heights "
            f'({", ".join(f"{h:g}" for h in heights)} m above the table): the fit uses this '
            f"workcell's, {tip.height:g} m, for all"
        )
    radii = list(dict.fromkeys(r for r, _ in read.fingertips))
    radius = radii[0] if len(radii) == 1 else load_workcell().fingertip.radius
    offset, pushes = _contact_offset(args.contact_offset, grid, pushes, radius, warn)
    height = tip.push_heights(grid, args.push_moment)
    try:
        train = TrainingSet.from_pushes(grid, pushes, args.support, height, args.table_edge)
    except OffTableError as exc:
        raise CliError(
            f"{args.bag}: push {exc.push} has the whole object past the table's edge (x < 0) "
            "on some step: the bag's poses are not in the table frame, or the object fell "
            '(--no-table-edge identifies them as poses in another frame, the whole object '
            'carried throughout)'
        ) from None
    if train.still:
        warn(
            f'the object did not move in push(es) {list(train.still)}: they add nothing to '
            'the fit (a push that missed it, or could not move it)'
        )
    with tqdm(
        total=args.budget, desc='simulations', file=sys.stderr, disable=not sys.stderr.isatty()
    ) as bar:
        found = identify(
            train,
            args.method,
            K=args.models,
            budget=args.budget,
            seed=args.seed,
            progress=lambda done, total, best: bar.update(done - bar.n),
            com_directions=args.com_directions,
        )
    if args.refine_budget > 0:
        from slide_core.identification import refine

        with tqdm(
            total=args.refine_budget,
            desc='refinement',
            file=sys.stderr,
            disable=not sys.stderr.isatty(),
        ) as bar:
            found = refine(
                found,
                train,
                pushes,
                budget=args.refine_budget,
                progress=lambda done, total, best: bar.update(done - bar.n),
                push_height=height if found.belief.push_moment else None,
            )
    belief = found.belief
    for line in fit_problems(train, belief):
        warn(f'the most probable model: {line}')
    provenance = {
        'bag': str(args.bag),
        'train_pushes': [pd.index for pd in pushes],
        'train_fingerprints': [push_fingerprint(pd) for pd in pushes],
        'skipped_pushes': [s.index for s in read.skipped],
        'poses_from': read.poses_from,
        'wrench_from': read.wrench_from,
        'table_edge': args.table_edge,
    }
    if offset.get('taken_off'):
        provenance['contact_offset_taken_off_m'] = offset['taken_off_m']
    if args.png is None:
        save_belief(belief, args.out, args.bag.name, provenance)
    else:
        with atomic_path(args.png) as tmp_png:
            belief_figure(tmp_png, belief, f'{args.bag.name}: {args.method} identification')
            save_belief(belief, args.out, args.bag.name, provenance)
    k = belief.best
    return {
        'bag': str(args.bag),
        'method': args.method,
        'train': [pd.index for pd in pushes],
        'skipped': [{'push': s.index, 'reason': s.reason} for s in read.skipped],
        'warnings': warnings,
        'poses_from': read.poses_from,
        'wrench_from': read.wrench_from,
        'contact_offset': offset,
        'steps_used': train.steps,
        'models': belief.K,
        'simulations': found.simulations,
        'seconds': round(found.seconds, 3),
        'loss_n2': [round(float(v), 6) for v in belief.loss],
        'weights': [round(float(v), 4) for v in belief.weight],
        'most_probable': k,
        'total_mass_kg': round(float(belief.mass[k].sum()), 4),
        'com_m': [round(float(v), 4) for v in belief.com()[k]],
        'out': str(args.out),
        'png': str(args.png) if args.png else None,
    }


def _contact_offset(
    mode: str | tuple[float, float],
    grid: Grid,
    pushes: list[PushData],
    radius: float,
    warn: Callable[[str], None],
) -> tuple[dict[str, Any], list[PushData]]:
    """``--contact-offset``: what was measured of the fingertip's offset from the object on
    ``pushes`` (a fingertip of ``radius`` [m]) and what was taken off, for the result; and
    the pushes to fit, the offset taken off their fingertip when asked."""
    import numpy as np

    from slide_core.identification import calibrated_pushes, offset_pushes

    out: dict[str, Any] = {'mode': mode if isinstance(mode, str) else 'given'}
    if mode == 'off':
        return out, pushes
    done = calibrated_pushes(grid, pushes, radius, take_off=mode == 'auto')
    found = done.found
    if found is None:
        out['unknown'] = done.unknown
    else:
        out.update(
            measured_m=[round(float(v), 6) for v in found.p_offset_W],
            bias_m=round(found.bias_m, 6) if found.with_bias else None,
            rms_m=round(found.rms_m, 6),
            raw_rms_m=round(found.raw_rms_m, 6),
            steps=found.steps,
        )
        print(f'slide identify: {found.describe()}', file=sys.stderr, flush=True)
    if done.kept:
        out['kept'] = done.kept
    for line in done.problems():
        warn(line)
    if isinstance(mode, tuple):
        taken, pushes = np.array(mode), offset_pushes(grid, pushes, np.array(mode))
    elif done.taken_off and found is not None:
        taken, pushes = found.p_offset_W, done.pushes
    else:
        return out, pushes
    out['taken_off'] = True
    out['taken_off_m'] = [round(float(v), 6) for v in taken]
    return out, pushes


def format_text(result: dict[str, Any]) -> str:
    lines = [
        f'{result["method"]} identification from pushes {result["train"]} '
        f'({result["steps_used"]} moving steps; poses from {result["poses_from"]}): '
        f'{result["models"]} model(s), {result["simulations"]} simulations in '
        f'{result["seconds"]} s',
        f'most probable model {result["most_probable"]}: {result["total_mass_kg"]} kg, centre '
        f'of mass {result["com_m"]} m; weights {result["weights"]}',
    ]
    lines += [f'push {s["push"]} skipped: {s["reason"]}' for s in result['skipped']]
    lines += [f'warning: {w}' for w in result['warnings']]
    lines.append(
        f'belief: {result["out"]}' + (f', picture: {result["png"]}' if result['png'] else '')
    )
    return '\n'.join(lines)
