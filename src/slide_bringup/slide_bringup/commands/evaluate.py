"""``slide evaluate MODEL BAG``: held-out prediction error of an identified belief."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

NAME = 'evaluate'
HELP = 'replay held-out pushes of a bag with an identified belief; print the errors'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('model', type=Path, help='belief file written by slide identify')
    parser.add_argument('bag', type=Path, help='rosbag2 folder with the test pushes')
    parser.add_argument('--test', default='5-9', help='test pushes, like 5-9')
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
    provenance = load_provenance(args.model)
    same_bag = Path(str(provenance.get('bag', ''))).name == args.bag.name
    overlap = sorted(set(test) & set(provenance.get('train_pushes', []))) if same_bag else []
    if overlap and not args.allow_training_pushes:
        raise ValueError(
            f'pushes {overlap} of {args.bag} trained {args.model}: they are not held out '
            '(choose others, or pass --allow-training-pushes)'
        )
    grid, pushes = read_pushes(args.bag, test)
    if (
        grid.occupancy.shape != belief.grid.occupancy.shape
        or not (grid.occupancy == belief.grid.occupancy).all()
    ):
        raise ValueError(f'{args.model} is a belief about another object than {args.bag}')
    truth = read_ground_truth(args.bag)
    ev = evaluate(belief, pushes, load_workcell().fingertip, None if truth is None else truth.mass)
    return {
        'model': str(args.model),
        'bag': str(args.bag),
        'test': [pd.index for pd in pushes],
        'held_out': not overlap,
        'add_error_m': ev.add_error_m,
        'uniform_add_error_m': ev.uniform_add_error_m,
        'expected_add_error_m': ev.expected_add_error_m,
        'per_push_add_error_m': ev.per_push_m,
        'moved_m': ev.moved_m,
        'com_error_m': ev.com_error_m,
        'truth_in_support': ev.truth_in_support,
    }


def format_text(result: dict[str, Any]) -> str:
    lines = [
        f'{"held-out" if result["held_out"] else "training (NOT held-out)"} pushes '
        f'{result["test"]} (objects moved {100 * result["moved_m"]:.1f} cm):',
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
