"""``slide replay BAG``: a bag's messages back into the graph, with /clock, as
``ros2 bag play --clock`` does (see :mod:`slide_ros.replay`)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
import sys
import time
from typing import Any

NAME = 'replay'
HELP = "publish a bag's messages into the ROS graph at their times, with /clock"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('bag', type=Path, help='rosbag2 folder or .mcap file')
    parser.add_argument(
        '--rate', type=float, default=1.0, help='bag seconds per wall second (default 1)'
    )
    parser.add_argument(
        '--topics', nargs='+', metavar='TOPIC', help="topics to play (default: all the bag's)"
    )
    parser.add_argument(
        '--wait',
        type=float,
        default=2.0,
        metavar='S',
        help='wait up to S seconds for subscribers of every played topic and /clock first '
        '(default 2)',
    )
    parser.add_argument(
        '--clock-hz', type=float, default=40.0, help='/clock messages per second (default 40)'
    )
    parser.add_argument(
        '--start-offset',
        type=float,
        default=0.0,
        metavar='S',
        help='start S seconds into the bag (latched topics: their latest message before)',
    )


OTHERS_PERIOD_S = 1.0
"""How often [s] a replay looks for other publishers of its topics and ``/clock``."""


def run(args: argparse.Namespace) -> dict[str, Any]:
    import rclpy
    from rclpy.context import Context
    from tqdm import tqdm

    from slide_bringup.cli import CliError
    from slide_bringup.ros_check import domain_problem

    problem = domain_problem()
    if problem:  # (Fast DDS ended the process on it, with no word on stderr)
        raise CliError(problem)
    if not 0.0 <= args.wait <= 600.0:
        raise CliError(f'--wait must be in [0, 600] s, got {args.wait}')
    from slide_ros.replay import Player

    context = Context()
    rclpy.init(args=[], context=context)
    try:
        # A name of its own: two replays (or a replay and a runner's node) shared one.
        node = rclpy.create_node(f'replay_{os.getpid()}', context=context)
        try:
            player = Player(
                node, args.bag, args.topics, args.rate, args.clock_hz, args.start_offset
            )
            end = time.monotonic() + args.wait
            while not player.subscribed() and time.monotonic() < end:
                time.sleep(0.05)
            for line in player.bag.warnings:  # said before a long replay, and in the result
                print(f'slide replay: warning: {line}', file=sys.stderr, flush=True)
            # Other publishers of the clock or of a played topic, looked for as the replay
            # goes (discovery takes its time): two replays at once ran /clock backwards 237
            # times, and neither said so.
            said: set[str] = set()
            looked = [-math.inf]

            def look() -> None:
                if time.monotonic() - looked[0] < OTHERS_PERIOD_S:
                    return
                looked[0] = time.monotonic()
                for topic, names in player.others().items():
                    if topic in said:
                        continue
                    said.add(topic)
                    warnings.append(
                        f'{topic} is published by {", ".join(names)} too: '
                        + (
                            "their clocks mix, and the graph's time jumps back and forth"
                            if topic == '/clock'
                            else "the bag's messages mix with theirs"
                        )
                    )
                    print(f'slide replay: warning: {warnings[-1]}', file=sys.stderr, flush=True)

            warnings: list[str] = []
            look()
            # A bag of a whole episode plays for minutes: a bar on a terminal says how far.
            with tqdm(
                total=round(player.seconds, 1),
                unit='s',
                file=sys.stderr,
                disable=not sys.stderr.isatty(),
                dynamic_ncols=True,
                bar_format='{desc}: {n:.1f}/{total:.1f} s of the bag [{elapsed}<{remaining}]',
                desc='replay',
            ) as bar:

                def progress(done: float, _total: float) -> None:
                    bar.update(round(done, 1) - bar.n)
                    look()

                result = player.play(progress=progress)
            if not player.flush():
                print(
                    'slide replay: warning: some subscribers did not acknowledge the last '
                    'messages within 5 s; they may have missed them',
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    return {
        'bag': result.bag,
        'messages': result.messages,
        'left_out': result.left_out,
        'warnings': [*result.warnings, *warnings],
        'bag_seconds': result.bag_seconds,
        'wall_seconds': result.wall_seconds,
    }


def format_text(result: dict[str, Any]) -> str:
    lines = [
        f'{result["bag"]}: {sum(result["messages"].values())} messages, '
        f'{result["bag_seconds"]} s of bag time in {result["wall_seconds"]} s'
    ]
    lines += [f'  {topic}: {n}' for topic, n in result['messages'].items()]
    lines += [f'  left out {topic}: {why}' for topic, why in result['left_out'].items()]
    return '\n'.join(lines)
