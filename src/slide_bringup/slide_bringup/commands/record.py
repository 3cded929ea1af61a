"""``slide record``: random exploratory pushes in the MuJoCo twin, written as a rosbag2."""

from __future__ import annotations

import argparse
from pathlib import Path
import sys
from typing import Any

from slide_bringup.args import add_tracking, seed, tracking_of

NAME = 'record'
HELP = 'run random exploratory pushes in the twin and record them as a rosbag2 (MCAP)'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--object', required=True, help='library name or object .yaml file')
    parser.add_argument('--pushes', type=int, default=10, help='number of pushes (default 10)')
    parser.add_argument('--seed', type=seed, default=0, help='random seed (same seed, same bag)')
    parser.add_argument('--out', type=Path, required=True, help='bag folder to create')
    add_tracking(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    from slide_core.model import load_object, load_workcell
    from slide_sim.record import record

    tracking = tracking_of(args)  # checks the values
    spec = load_object(args.object)
    interactive = sys.stderr.isatty()
    with tqdm(
        total=args.pushes, desc='pushes', unit='push', file=sys.stderr, disable=not interactive
    ) as bar:

        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)
            if not interactive:
                print(f'slide record: push {done}/{total}', file=sys.stderr, flush=True)

        return record(
            spec,
            load_workcell(),
            args.pushes,
            args.seed,
            args.out,
            progress=progress,
            tracking=tracking,
        )


def format_text(result: dict[str, Any]) -> str:
    lines = [
        f'{result["bag"]}: {result["pushes"]} pushes of {result["object"]} '
        f'({result["sim_seconds"]} s simulated){"; the object FELL" if result["fell"] else ""}'
    ]
    lines += [f'  {topic}: {n}' for topic, n in result['messages'].items()]
    return '\n'.join(lines)
