"""``slide bench SUITE``: benchmarks that print figures (speed and accuracy targets live
here, not in timed tests).

On a terminal a progress bar on stderr counts the suite's jobs (episodes and planning
trials, objects and methods, objects, stages); the timestamped log lines go to stderr
above it, as they do without a terminal."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
import sys
import time
from typing import Any

from slide_bringup.args import add_contact_offset, add_tracking, seed, tracking_of

NAME = 'bench'
HELP = 'run a benchmark suite and print its figures (physics, ft, perception, ...)'

SUITES = ('physics', 'ft', 'executor', 'perception', 'identification', 'mit-push', 'pregrasp')
APPLIES = {
    'no_reference': ('physics',),
    'objects': ('perception', 'identification', 'pregrasp', 'executor'),
    'poses': ('perception',),
    'seed': ('perception', 'identification', 'pregrasp', 'executor'),
    'pushes': ('executor',),
    'methods': ('identification', 'pregrasp'),
    'seeds': ('identification', 'pregrasp'),
    'planning_trials': ('pregrasp',),
    'jobs': ('pregrasp', 'mit-push'),
    'overhang_weight': ('pregrasp',),
    'refine_budget': ('identification',),
    'support': ('identification', 'pregrasp'),
    'png': ('identification',),
    'data': ('mit-push',),
    'raw_tip': ('mit-push',),
    'pose_rate': ('identification', 'pregrasp'),
    'pose_noise': ('identification', 'pregrasp'),
    'pose_offset': ('identification', 'pregrasp'),
    'contact_offset': ('pregrasp',),
}
"""The suites each option is for: one given to another suite is refused (they were
ignored, and a physics run with --objects nosuch --jobs 0 ran its minute)."""
MOST = {'poses': 1000, 'seeds': 1000, 'planning_trials': 1000, 'jobs': 64, 'refine_budget': 100000}
"""The largest count each option takes (--jobs 10000 forked 10000 processes at once, and
--seeds 1e8 built 3.2e9 jobs in memory)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from slide_core.physics import SUPPORT_MODELS

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
        help='perception, identification, pregrasp: library objects to use (default: all); '
        'executor: the first (default box)',
    )
    parser.add_argument(
        '--poses',
        type=int,
        default=2,
        help='perception: random poses per object (1 to 1000, default 2)',
    )
    parser.add_argument(
        '--seed',
        type=seed,
        default=0,
        help='perception, identification, pregrasp, executor: random seed (pregrasp: its '
        'episodes take seed to seed + seeds - 1; default 0)',
    )
    parser.add_argument(
        '--pushes', type=int, default=6, help='executor: pushes to send (1 to 50, default 6)'
    )
    parser.add_argument(
        '--methods',
        nargs='+',
        metavar='METHOD',
        help='identification, pregrasp: methods (default: all; identification: its fitting '
        'methods, pregrasp: probabilistic, deterministic, uniform, ground-truth)',
    )
    parser.add_argument(
        '--seeds',
        type=int,
        default=None,
        help='pregrasp: episodes per object and method (1 to 1000, default 3); '
        'identification: sets of pushes per object, from seeds --seed on, figures their '
        'mean (default 1)',
    )
    parser.add_argument(
        '--planning-trials',
        type=int,
        default=2,
        help='pregrasp: planning-benchmark trials per object (0: skip it; at most 1000, '
        'default 2)',
    )
    parser.add_argument(
        '--jobs',
        type=int,
        default=None,
        help='pregrasp, mit-push: parallel processes, 1 to 64 (default: one per core)',
    )
    parser.add_argument(
        '--overhang-weight',
        type=float,
        default=0.0,
        help='pregrasp: goal preference for overhang, in metres of pushing effort per metre '
        'of overhang (0, the default: what the grasp needs; 5: far out)',
    )
    parser.add_argument(
        '--refine-budget',
        type=int,
        default=0,
        metavar='N',
        help="identification: also refine the probabilistic models on the simulator's pose "
        'error (N evaluations, at most 100000; about a minute per object at 100) and report '
        'both (default 0: not)',
    )
    parser.add_argument(
        '--support',
        default=None,
        choices=SUPPORT_MODELS,
        help='identification, pregrasp: the support model the maps are identified, evaluated '
        'and planned under (default: the core default, rigid)',
    )
    parser.add_argument(
        '--png',
        type=Path,
        default=Path('out/bench_identification.png'),
        help='identification: loss-against-simulations picture (default '
        'out/bench_identification.png)',
    )
    parser.add_argument(
        '--data',
        type=Path,
        default=Path('../shared/data/mit-push'),
        help='mit-push: the dataset folder (default ../shared/data/mit-push)',
    )
    parser.add_argument(
        '--raw-tip',
        action='store_true',
        help="mit-push: replay the tip's path as recorded (default: less the tip tracking's "
        'offset from the objects, found on the train pushes)',
    )
    add_tracking(
        parser,
        'pregrasp: the episodes observe; identification: its tracked-pose fit sees '
        "(there perception's 30 Hz, 0.15 mm, 0.05 deg unless either is given) ",
    )
    add_contact_offset(parser, 'pregrasp: ')


class _Progress:
    """The log (stderr, timestamped) and, on a terminal, a tqdm bar below it."""

    def __init__(self, total: int | None, unit: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=total,
            unit=unit,
            file=sys.stderr,
            disable=not sys.stderr.isatty(),
            dynamic_ncols=True,
        )

    def log(self, message: str) -> None:
        """A log line that also counts one job done."""
        self.note(message)
        self.bar.update(1)

    def note(self, message: str) -> None:
        """A log line."""
        line = f'[{time.strftime("%H:%M:%S")}] {message}'
        if self.bar.disable:
            print(line, file=sys.stderr, flush=True)
        else:
            self.bar.write(line, file=sys.stderr)

    def advance(self, what: str, done: int, total: int) -> None:
        """Jobs of a phase with a known count (pregrasp's episodes, planning trials)."""
        if self.bar.total != total or self.bar.desc != what:
            self.bar.reset(total=total)
            self.bar.set_description(what)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def _jobs(args: argparse.Namespace) -> tuple[int | None, str]:
    """How many jobs the suite reports (the bar's total; None: counted as they come)."""
    from slide_core.model import library_names

    objects = len(args.objects) if args.objects else len(library_names())
    if args.suite == 'physics':
        return (17 if args.no_reference else 22), 'stage'
    if args.suite == 'perception':
        return objects, 'object'
    if args.suite == 'identification':
        from slide_core.identification import METHODS

        seeds = 1 if args.seeds is None else args.seeds
        return objects * len(args.methods or METHODS) * seeds, 'method'
    if args.suite == 'pregrasp':
        return None, 'job'
    if args.suite == 'executor':
        return args.pushes, 'push'
    return None, 'step'


@functools.cache
def _defaults() -> argparse.ArgumentParser:
    """The command's parser, for its options' defaults."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def _given(args: argparse.Namespace, *dests: str) -> bool:
    """Whether any of the options ``dests`` was set to other than its default."""
    return any(getattr(args, dest) != _defaults().get_default(dest) for dest in dests)


def _tracking_given(args: argparse.Namespace) -> bool:
    """Whether ``--pose-rate``, ``--pose-noise`` or ``--pose-offset`` was set to other than
    its default."""
    return _given(args, 'pose_rate', 'pose_noise', 'pose_offset')


def check_options(args: argparse.Namespace) -> None:
    """SlideInputError, before any work, for an option given to a suite it is not for
    (:data:`APPLIES`: set to other than its default), a count over :data:`MOST`, or an
    object named twice."""
    from slide_core.errors import SlideInputError

    for dest, suites in APPLIES.items():
        if args.suite not in suites and _given(args, dest):
            flag = '--' + dest.replace('_', '-')
            raise SlideInputError(
                f'{flag} is for {", ".join(suites)}, not {args.suite}: leave it out'
            )
    for dest, most in MOST.items():
        value = getattr(args, dest)
        if value is not None and value > most:
            flag = '--' + dest.replace('_', '-')
            raise SlideInputError(f'{flag} takes at most {most}, got {value}')
    named = [str(o) for o in args.objects or ()]
    twice = sorted({o for o in named if named.count(o) > 1})
    if twice:
        raise SlideInputError(f'--objects names {", ".join(twice)} more than once')
    if args.suite == 'executor' and len(named) > 1:
        raise SlideInputError('--objects: the executor suite pushes one object; name one')
    if (
        args.suite == 'identification'
        and args.methods
        and 'probabilistic' not in args.methods
        and _tracking_given(args)
    ):
        # (the tracked-pose fit is the probabilistic one's: without it they were ignored)
        raise SlideInputError(
            '--pose-rate, --pose-noise and --pose-offset set the poses of the probabilistic fit '
            'from tracked poses: add probabilistic to --methods, or leave them out'
        )


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_options(args)
    t0 = time.perf_counter()
    total, unit = _jobs(args)
    bar = _Progress(total, unit)
    try:
        result = _run_suite(args, bar)
    finally:
        bar.close()
    result['bench_wall_s'] = time.perf_counter() - t0
    if result.get('interrupted'):  # the jobs done kept, and the exit code says it stopped
        from slide_bringup.cli import EXIT_INTERRUPTED, EXIT_TERMINATED

        terminated = result['interrupted'] == 'terminated'
        result['exit'] = EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    return {'suite': args.suite, **result}


def _run_suite(args: argparse.Namespace, bar: _Progress) -> dict[str, Any]:
    if args.suite == 'physics':
        from slide_bringup.bench import physics as bench_physics

        return bench_physics.run(progress=bar.log, reference=not args.no_reference)
    if args.suite == 'perception':
        from slide_bringup.bench import perception as bench_perception

        return bench_perception.run(args.objects, args.poses, args.seed, progress=bar.log)
    if args.suite == 'identification':
        from slide_bringup.bench import identification as bench_identification

        return bench_identification.run(
            args.objects,
            args.methods,
            args.seed,
            args.png,
            progress=bar.log,
            support=args.support,
            refine_budget=args.refine_budget,
            seeds=1 if args.seeds is None else args.seeds,
            **({'tracking': tracking_of(args)} if _tracking_given(args) else {}),
        )
    if args.suite == 'pregrasp':
        from slide_bringup.bench import pregrasp as bench_pregrasp

        return bench_pregrasp.run(
            args.objects,
            args.methods,
            3 if args.seeds is None else args.seeds,
            args.seed,
            args.planning_trials,
            args.jobs,
            progress=bar.note,
            overhang_weight=args.overhang_weight,
            advance=bar.advance,
            support=args.support,
            tracking=tracking_of(args),
            contact_offset=args.contact_offset,
        )
    if args.suite == 'executor':
        from slide_bringup.bench import executor as bench_executor

        obj = args.objects[0] if args.objects else 'box'
        return bench_executor.run(args.pushes, args.seed, obj, progress=bar.log, note=bar.note)
    if args.suite == 'mit-push':
        from slide_bringup.bench import mitpush

        return mitpush.run(
            args.data, progress=bar.log, workers=args.jobs, calibrate_tip=not args.raw_tip
        )
    from ati_netft import bench as bench_ft

    return bench_ft.run(progress=bar.log)


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
