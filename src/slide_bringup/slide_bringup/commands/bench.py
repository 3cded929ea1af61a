"""``slide bench SUITE``: benchmarks that print figures (speed and accuracy targets live
here, not in timed tests)."""

from __future__ import annotations

import argparse
from pathlib import Path
import sys
import time
from typing import Any

NAME = 'bench'
HELP = 'run a benchmark suite and print its figures (physics, ft, perception, ...)'

SUITES = ('physics', 'ft', 'perception', 'identification', 'mit-push', 'pregrasp')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('suite', choices=SUITES, help='which benchmark to run')
    parser.add_argument(
        '--no-reference',
        action='store_true',
        help='physics: skip the slow reference simulator (no speedup or agreement figures)',
    )
    parser.add_argument(
        '--objects',
        nargs='+',
        metavar='NAME',
        help='perception, identification, pregrasp: library objects to use (default: all)',
    )
    parser.add_argument(
        '--poses', type=int, default=2, help='perception: random poses per object (default 2)'
    )
    parser.add_argument('--seed', type=int, default=0, help='random seed')
    parser.add_argument(
        '--methods',
        nargs='+',
        metavar='METHOD',
        help='identification, pregrasp: methods (default: all)',
    )
    parser.add_argument(
        '--seeds', type=int, default=3, help='pregrasp: episodes per object and method'
    )
    parser.add_argument(
        '--planning-trials',
        type=int,
        default=2,
        help='pregrasp: planning-benchmark trials per object (0: skip it)',
    )
    parser.add_argument(
        '--jobs', type=int, default=None, help='pregrasp: parallel processes (default: cores)'
    )
    parser.add_argument(
        '--overhang-weight',
        type=float,
        default=0.0,
        help='pregrasp: goal preference for overhang (0: what the grasp needs; 5: far out)',
    )
    parser.add_argument(
        '--png',
        type=Path,
        default=Path('out/bench_identification.png'),
        help='identification: loss-against-simulations picture',
    )
    parser.add_argument(
        '--data',
        type=Path,
        default=Path('../shared/data/mit-push'),
        help='mit-push: the dataset folder (default ../shared/data/mit-push)',
    )


def _progress(message: str) -> None:
    print(f'[{time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    if args.suite == 'physics':
        from slide_bringup.bench import physics as bench_physics

        result = bench_physics.run(progress=_progress, reference=not args.no_reference)
    elif args.suite == 'perception':
        from slide_bringup.bench import perception as bench_perception

        result = bench_perception.run(args.objects, args.poses, args.seed, progress=_progress)
    elif args.suite == 'identification':
        from slide_bringup.bench import identification as bench_identification

        result = bench_identification.run(
            args.objects, args.methods, args.seed, args.png, progress=_progress
        )
    elif args.suite == 'pregrasp':
        from slide_bringup.bench import pregrasp as bench_pregrasp

        result = bench_pregrasp.run(
            args.objects,
            args.methods,
            args.seeds,
            args.seed,
            args.planning_trials,
            args.jobs,
            progress=_progress,
            overhang_weight=args.overhang_weight,
        )
    elif args.suite == 'mit-push':
        from slide_bringup.bench import mitpush

        result = mitpush.run(args.data, progress=_progress)
    else:
        from ati_netft import bench as bench_ft

        result = bench_ft.run(progress=_progress)
    result['bench_wall_s'] = time.perf_counter() - t0
    return {'suite': args.suite, **result}


def format_text(result: dict[str, Any]) -> str:
    def text(value: Any) -> str:
        if isinstance(value, float):
            return f'{value:.6g}'
        if isinstance(value, dict):
            return ', '.join(f'{k} {text(v)}' for k, v in value.items())
        return str(value)

    lines = []
    for key, value in result.items():
        if isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
            lines.append(f'{key}:')
            lines.extend(f'  {k:30s} {text(v)}' for k, v in value.items())
        else:
            lines.append(f'{key:32s} {text(value)}')
    return '\n'.join(lines)
