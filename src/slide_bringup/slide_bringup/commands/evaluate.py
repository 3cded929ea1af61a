"""``slide evaluate MODEL BAG``: held-out prediction error of an identified belief."""

from __future__ import annotations

import argparse
from pathlib import Path
import sys
from typing import TYPE_CHECKING, Any

from slide_bringup.args import add_sensor_mount

if TYPE_CHECKING:
    from slide_core.identification import PushData

NAME = 'evaluate'
HELP = 'replay held-out pushes of a bag with an identified belief; print the errors'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('model', type=Path, help='belief file written by slide identify')
    parser.add_argument('bag', type=Path, help='rosbag2 folder with the test pushes')
    parser.add_argument('--test', default='5-9', help='test pushes, like 5-9')
    add_sensor_mount(parser)
    parser.add_argument(
        '--allow-training-pushes',
        action='store_true',
        help='evaluate on pushes the belief was identified from (then they are not held out)',
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from slide_bringup.args import parse_range
    from slide_core.identification import evaluate
    from slide_core.io import read_ground_truth, read_pushes
    from slide_core.model import load_belief, load_provenance, load_workcell

    belief = load_belief(args.model)
    test = parse_range(args.test)
    read = read_pushes(args.bag, test, sensor_mount=args.sensor_mount)
    for line in read.report():  # a push asked for and left out is said, not dropped
        print(f'slide evaluate: {line}', file=sys.stderr, flush=True)
    grid, pushes = read.grid, read.pushes
    trained = _trained(load_provenance(args.model), args.model, args.bag, pushes)
    overlap = sorted(pd.index for pd in pushes if trained is not None and pd.index in trained)
    if overlap and not args.allow_training_pushes:
        raise ValueError(
            f'pushes {overlap} of {args.bag} trained {args.model}: they are not held out '
            '(choose others, or pass --allow-training-pushes)'
        )
    if not grid.same_cells(belief.grid):  # (the cells' size too: 18 mm passed for 20 mm)
        raise ValueError(
            f'{args.model} is a belief about another object than {args.bag} '
            f'({how_cells_differ(belief.grid, grid)})'
        )
    truth = read_ground_truth(args.bag)
    ev = evaluate(belief, pushes, load_workcell().fingertip, None if truth is None else truth.mass)
    return {
        'model': str(args.model),
        'bag': str(args.bag),
        'test': [pd.index for pd in pushes],
        'skipped': [{'index': k.index, 'reason': k.reason} for k in read.skipped],
        'warnings': list(read.warnings),
        # None: the belief does not say what it was identified from (a behaviour node's).
        'held_out': None if trained is None else not overlap,
        'add_error_m': ev.add_error_m,
        'uniform_add_error_m': ev.uniform_add_error_m,
        'expected_add_error_m': ev.expected_add_error_m,
        'per_push_add_error_m': ev.per_push_m,
        'moved_m': ev.moved_m,
        'com_error_m': ev.com_error_m,
        'truth_in_support': ev.truth_in_support,
    }


def _trained(
    provenance: dict[str, Any], model: Path, bag: Path, pushes: list[PushData]
) -> set[int] | None:
    """Indices of ``pushes`` the belief was identified from, by what was recorded of them
    (:func:`push_fingerprint`: a copy of the bag, another path to it, its .mcap given
    directly are all the same bag; another bag of the same name is not). Belief files
    written before the fingerprints say only the bag's name and the pushes' indices; None
    when the file says neither (a behaviour node's belief, identified from its episode's
    pushes: whether these are among them is not known)."""
    from slide_core.identification import push_fingerprint

    def listed(key: str, kind: type) -> list[Any] | None:
        value = provenance.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, kind) and not isinstance(v, bool) for v in value
        ):
            raise ValueError(f'{model}: provenance {key} must be a list of {kind.__name__}')
        return value

    prints = listed('train_fingerprints', str)
    if prints is not None:
        trained = set(prints)
        return {pd.index for pd in pushes if push_fingerprint(pd) in trained}
    indices = listed('train_pushes', int)
    named = provenance.get('bag')
    if not isinstance(named, str) or not named or indices is None:
        return None
    return set(indices) if Path(named).resolve().name == _bag_name(bag) else set()


def _bag_name(bag: Path) -> str:
    """The bag folder's name, also for its .mcap or '.' given."""
    p = bag.resolve()
    return p.parent.name if p.is_file() else p.name


def format_text(result: dict[str, Any]) -> str:
    held_out = {
        True: 'held-out',
        False: 'training (NOT held-out)',
        None: 'possibly training (the belief does not say what it was identified from)',
    }[result['held_out']]
    lines = [
        f'{held_out} pushes {result["test"]} (objects moved {100 * result["moved_m"]:.1f} cm):',
        f'  mean cell error {100 * result["add_error_m"]:.2f} cm (most probable model), '
        f'{100 * result["expected_add_error_m"]:.2f} cm (belief-weighted), '
        f'{100 * result["uniform_add_error_m"]:.2f} cm (uniform maps)',
    ]
    if result['com_error_m'] is not None:
        lines.append(
            f'  centre of mass off by {100 * result["com_error_m"]:.2f} cm; truth inside the '
            f"models' support: {result['truth_in_support']}"
        )
    return '\n'.join(lines)


def how_cells_differ(model: Any, bag: Any) -> str:
    """How the belief's grid and the bag's differ, in words (two grids of one shape and cell
    size were said to be another object, with the same numbers shown for both)."""
    import numpy as np

    if model.shape != bag.shape or abs(model.cell_size - bag.cell_size) > 1e-9:
        return (
            f"its cells: {model.shape} of {model.cell_size * 100:g} cm; the bag's: "
            f'{bag.shape} of {bag.cell_size * 100:g} cm'
        )
    a, b = model.occupancy, bag.occupancy
    turned = (
        ' (the same cells turned half a turn: the object was acquired in a frame turned '
        '180 degrees from the one the belief was identified in)'
        if np.array_equal(a, b[::-1, ::-1])
        else ''
    )
    return (
        f'both {model.shape} of {model.cell_size * 100:g} cm cells, but {int((a != b).sum())} '
        f'of them are occupied in one and not the other{turned}'
    )
