"""Parsing of command-line values shared by several ``slide`` subcommands."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from slide_core.errors import SlideInputError
from slide_core.task import CONTACT_OFFSET_MODES, SEED_MAX, TaskSettings

if TYPE_CHECKING:
    from slide_sim.tracker import Tracking


def seed(text: str) -> int:
    """The argparse type of ``--seed``: a whole number from 0 to
    :data:`slide_core.task.SEED_MAX`, as the graph's nodes take it (numpy's generators take
    no negative seed, and said only 'expected non-negative integer')."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not a whole number') from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f'a seed is from 0 to {SEED_MAX}, got {value}')
    return value


def force_limit(text: str) -> float:
    """The argparse type of ``--force-limit``: newtons, from 0 (off) to what the graph's
    ``force_limit`` argument takes."""
    from slide_bringup.graph import GraphError
    from slide_bringup.graph import force_limit as checked

    try:
        return checked(text)
    except GraphError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix('force_limit ')) from None


MAX_PUSHES = 10_000
"""Most pushes a range may name: about 14 hours of 5 s pushes, more than any session's bag
(a range is a list in memory; '0-10000000000' would fill it)."""


def parse_range(text: str) -> list[int]:
    """'0-4' or '0,2,5-7' -> push indices, in order; a repeated index is refused, and so
    is a range of more than :data:`MAX_PUSHES` pushes."""
    out: list[int] = []
    too_many = False
    try:
        for part in text.split(','):
            part = part.strip()
            if not part or not set(part) <= set('0123456789- '):
                raise ValueError  # (int() read '3_0' as 30 and '+3' as 3)
            if '-' in part[1:]:
                a, b = (int(v) for v in part.split('-', 1))
                if a < 0 or b < a:
                    raise ValueError
                if b - a + 1 + len(out) > MAX_PUSHES:
                    too_many = True  # said below: not a list of ten billion first
                    break
                out.extend(range(a, b + 1))
            else:
                v = int(part)
                if v < 0:
                    raise ValueError
                out.append(v)
    except ValueError:
        raise SlideInputError(f'push range {text!r} is not like 0-4 or 0,2,5-7') from None
    if too_many or len(out) > MAX_PUSHES:
        raise SlideInputError(f'push range {text!r} names more than {MAX_PUSHES} pushes')
    seen: set[int] = set()
    repeated = sorted({i for i in out if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    if repeated:
        raise SlideInputError(
            f'push range {text!r} names push {", ".join(map(str, repeated))} more than once'
        )
    return out


def add_sensor_mount(parser: argparse.ArgumentParser) -> None:
    """``--sensor-mount X Y Z W``: the F/T sensor's orientation in the fingertip's frame,
    for a bag whose wrenches are in the sensor's frame (the executor's ``sensor_mount``)."""
    parser.add_argument(
        '--sensor-mount',
        type=float,
        nargs=4,
        metavar=('X', 'Y', 'Z', 'W'),
        help="the F/T sensor's orientation on the fingertip, a quaternion (the executor's "
        'sensor_mount), for wrenches recorded in the sensor frame (/netft/wrench without '
        '/ft/wrench); default: square on it',
    )


def add_tracking(parser: argparse.ArgumentParser, what: str = '') -> None:
    """``--pose-rate HZ``, ``--pose-noise MM DEG`` and ``--pose-offset X_MM Y_MM``: object
    poses as a camera tracker gives them (:class:`slide_sim.tracker.Tracking`;
    :func:`tracking_of` reads them); ``what`` begins their help (the suites they are
    for)."""
    parser.add_argument(
        '--pose-rate',
        type=float,
        default=100.0,
        metavar='HZ',
        help=f'{what}object poses a second, as a tracker gives them (default 100, at most 100)',
    )
    parser.add_argument(
        '--pose-noise',
        type=float,
        nargs=2,
        default=(0.0, 0.0),
        metavar=('MM', 'DEG'),
        help=f"{what}Gaussian noise on each pose's x and y [mm] and yaw [deg] (default 0 0; "
        "perception's benchmark measures about 0.15 mm and 0.05 deg, at 30 Hz)",
    )
    parser.add_argument(
        '--pose-offset',
        type=float,
        nargs=2,
        default=(0.0, 0.0),
        metavar=('X_MM', 'Y_MM'),
        help=f"{what}every pose off by this in the table frame [mm], a camera's extrinsics "
        "off while the arm's fingertip goes where it is commanded (default 0 0)",
    )


def add_contact_offset(parser: argparse.ArgumentParser, what: str = '') -> None:
    """``--contact-offset auto|check``: what the task does with the fingertip's offset from
    the object that its exploratory pushes show (:class:`slide_core.task.TaskSettings`);
    ``what`` begins the help."""
    parser.add_argument(
        '--contact-offset',
        choices=CONTACT_OFFSET_MODES,
        default=TaskSettings.contact_offset,
        help=f"{what}the fingertip's offset from the object measured on the exploratory "
        "pushes (the camera's and the arm's calibrations apart), said, with a warning above "
        '1 mm: auto (the default) also takes one above 1 mm, told from three push '
        'directions or more, off every pose the task observes, the camera taken as off, '
        'with one more exploratory push into another side when the pushes cannot tell it '
        '(parallel sides alone; two directions, or near one line, and above 1 mm); check '
        'only says it',
    )


def tracking_of(args: argparse.Namespace) -> Tracking:
    """The tracking :func:`add_tracking`'s options ask for (SlideInputError when out of
    range)."""
    from slide_sim.tracker import Tracking

    mm, deg = args.pose_noise
    return Tracking.of(args.pose_rate, mm, deg, tuple(args.pose_offset))


def contact_offset_arg(text: str) -> str | tuple[float, float]:
    """``--contact-offset``: 'check', 'auto', 'off', or an offset X_MM,Y_MM as (x, y) [m]."""
    mode = text.strip().lower()
    if mode in ('check', 'auto', 'off'):
        return mode
    parts = mode.split(',')
    try:
        mm = tuple(float(p) for p in parts)
    except ValueError:
        mm = ()
    if len(mm) != 2 or not all(math.isfinite(v) for v in mm):
        raise argparse.ArgumentTypeError(
            f"expected check, auto, off or two lengths in mm as X_MM,Y_MM, got '{text}'"
        )
    return (mm[0] * 1e-3, mm[1] * 1e-3)
