"""``slide demo``: the main job, one whole pre-grasp episode in the MuJoCo twin.

The hammer (by default) lies at a random pose on the table. The robot pokes it with five
random exploratory pushes, identifies a belief over its mass and friction maps from the
recorded motion and wrenches, chooses a goal at the table edge where the handle sticks out
and stays balanced with high probability, pushes it there in closed loop (observe, replan
with RRT*, choose the push that the belief's models agree brings it nearest the next
waypoint), grasps the overhang and lifts it. Writes a PNG of the maps, the plan and the
pushes (``out/demo.png``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from slide_bringup.commands import episode

NAME = 'demo'
HELP = 'one whole pre-grasp episode in the MuJoCo twin, with a picture (the main job)'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    episode.add_episode_arguments(parser, default_png=Path('out/demo.png'))


def run(args: argparse.Namespace) -> dict[str, Any]:
    return episode.run(args)


def format_text(result: dict[str, Any]) -> str:
    return episode.format_text(result)
