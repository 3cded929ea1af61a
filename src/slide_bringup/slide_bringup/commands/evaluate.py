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
    parser.add_argument('--tip-radius', type=float, default=0.008, help='fingertip radius [m]')
    parser.add_argument('--tip-mu', type=float, default=0.3, help='fingertip friction')


def run(args: argparse.Namespace) -> dict[str, Any]:
    from slide_core.bag import parse_range, read_ground_truth, read_pushes
    from slide_core.evaluate import evaluate
    from slide_core.identify import DT, load_belief

    belief = load_belief(args.model)
    grid, pushes = read_pushes(args.bag, parse_range(args.test), dt=DT)
    if (
        grid.occupancy.shape != belief.grid.occupancy.shape
        or not (grid.occupancy == belief.grid.occupancy).all()
    ):
        raise ValueError(f'{args.model} is a belief about another object than {args.bag}')
    truth = read_ground_truth(args.bag)
    ev = evaluate(
        belief,
        pushes,
        None if truth is None else truth.mass,
        tip_radius=args.tip_radius,
        tip_mu=args.tip_mu,
    )
    return {
        'model': str(args.model),
        'bag': str(args.bag),
        'test': [pd.index for pd in pushes],
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
        f'held-out pushes {result["test"]} (objects moved {100 * result["moved_m"]:.1f} cm):',
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
