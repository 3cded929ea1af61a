"""``slide bench SUITE``: benchmarks that print figures (speed and accuracy targets live
here, not in timed tests)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

NAME = 'bench'
HELP = 'run a benchmark suite and print its figures (physics, ft)'

SUITES = ('physics', 'ft')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('suite', choices=SUITES, help='which benchmark to run')
    parser.add_argument(
        '--no-reference',
        action='store_true',
        help='physics: skip the slow reference simulator (no speedup or agreement figures)',
    )


def _progress(message: str) -> None:
    print(f'[{time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    if args.suite == 'physics':
        from slide_core import bench_physics

        result = bench_physics.run(progress=_progress, reference=not args.no_reference)
    else:
        from ati_netft import bench as bench_ft

        result = bench_ft.run(progress=_progress)
    result['bench_wall_s'] = time.perf_counter() - t0
    return {'suite': args.suite, **result}


def format_text(result: dict[str, Any]) -> str:
    lines = []
    for key, value in result.items():
        text = f'{value:.6g}' if isinstance(value, float) else str(value)
        lines.append(f'{key:32s} {text}')
    return '\n'.join(lines)
