"""The planner's settings: the workcell it plans in and its tolerances."""

from __future__ import annotations

from dataclasses import dataclass, fields
import math
from numbers import Integral, Real
from typing import Any

from slide_core.errors import NoSolutionError, SlideInputError
from slide_core.model import MIN_PUSH_SPEED, Fingertip, Gripper, Obstacle, Table, Workcell


class PlanningError(NoSolutionError):
    """No goal, path or push satisfies the constraints (the message says which and why)."""


class UncertainBeliefError(PlanningError):
    """No goal keeps enough of the belief balanced, though there are goals where the pads
    hold and the most probable model stays: the models disagree, so more pushes could
    decide (the task explores more, :attr:`slide_core.task.TaskSettings.extra_exploration`)."""


class PlannerSettingsError(SlideInputError):
    """Planner settings that are out of range or unknown."""


@dataclass(frozen=True)
class PlannerConfig:
    """Everything the planner needs to know about the task and its tolerances.

    Attributes:
        epsilon: the fall probability a goal or an intermediate pose may have.
        staging_epsilon: the fall probability a staging pose may have
            (:func:`slide_core.planning.staging_config`; ``epsilon`` where that is less).
            0 (the default) asks every model. Measured on the graph with 0.001, which a
            novel mallet's belief had asked for (its staging poses were each refused for a
            model of weight 2e-7): the hammer staged in 3 runs of 4 on seeds 2 and 8 and
            lifted in none of them, where with 0 it lifted in both runs (and in the 4 of 4
            runs that staged before): a looser staging pose is found for beliefs its pushes
            do not settle, and the task ends there.
        balance_margin: distance [m] the centre of mass must keep inside the support.
        grasp_margin: overhang [m] a goal has beyond what the grasp needs (slack for
            the last push).
        push_speed: fingertip speed [m/s]; push_max: longest push [m]; push_min: shortest.
        sim_step: fingertip travel per step of the planner's push model [m].
        waypoint_step: spacing of the path's waypoints [m] (SE(2) distance).
        lookahead: a push aims at the farthest waypoint this close [m] (the next one at
            least).
        rrt_iterations: RRT* iterations per path; rrt_range: its longest edge [m].
        refine_iterations: finite-difference steps on the contact point.
        exhaustive_per_side: contact points per outline side in the exhaustive search.
        margin_weight: metres of pushing effort one metre of balance margin is worth.
        grasp_weight: ... one metre of graspable edge is worth (both capped at 5 cm).
        overhang_weight: ... one metre more overhang is worth (0: just what the grasp
            needs; large: as far out as balance allows, as the papers' goals ask).
        hold_weight: metres of pushing effort a goal's hold ratio of 1 costs (the pads'
            whole holding moment, :func:`slide_core.planning.grasp.hold_ratios`): of
            goals otherwise alike, the one held nearer its centre of mass wins.
        hold_max: the largest hold ratio a goal (and a pose the closed loop stops at) may
            ask of the pads for 1 - epsilon of the belief: a safety factor of 2 on the
            rigid pads' limit. Measured in the twin: a bar hangs level at 0.46 and
            droops 7 degrees at 0.85; a spray gun whose upper pad pressed a 2 cm step
            turned out of the grip at 0.56; a 2 kg block held 3.4 cm to the side turned
            out of it at 0.83 (0.35 along the approach and 0.48 across, which add).
        goal_yaws: yaws tried per goal search; goal_y_step: spacing along the edge [m].
        seen_turn: an object whose outline no turn moves by more than this (RMS, [m];
            :func:`slide_core.geometry.turn_sweep`) is round to the task: the camera
            cannot tell its yaw from the outline's noise, and a turn changes its footprint
            less than the grasp's margin, so its goal's yaw is not steered to. Perceived
            discs of 3.5 to 8 cm radius sweep 0.8 to 1.1 mm at the camera's full
            resolution, of 3.5 to 11 cm up to 4.4 mm at half of it (the twin's default); a
            hexagon of 8 cm 5.8 to 6.7 mm, boxes and tools 15 mm and more. 0 steers every
            yaw.
    """

    table: Table
    gripper: Gripper
    fingertip: Fingertip
    obstacles: tuple[Obstacle, ...] = ()
    epsilon: float = 0.05
    staging_epsilon: float = 0.0
    balance_margin: float = 0.01
    grasp_margin: float = 0.01
    push_speed: float = 0.05
    push_max: float = 0.08
    push_min: float = 0.005
    sim_step: float = 0.002
    waypoint_step: float = 0.02
    lookahead: float = 0.06
    rrt_iterations: int = 600
    rrt_range: float = 0.06
    refine_iterations: int = 3
    exhaustive_per_side: int = 5
    margin_weight: float = 1.0
    grasp_weight: float = 1.0
    overhang_weight: float = 0.0
    hold_weight: float = 0.2
    hold_max: float = 0.5
    goal_yaws: int = 36
    goal_y_step: float = 0.05
    seen_turn: float = 0.005

    def __post_init__(self) -> None:
        # Upper bounds catch a unit slip (mm or cm written as m, a percentage as a
        # fraction): 50 for hold_max planned goals the pads cannot hold.
        checks = {
            'epsilon': (0.0 <= self.epsilon < 1.0, '[0, 1)'),
            'staging_epsilon': (0.0 <= self.staging_epsilon < 1.0, '[0, 1)'),
            'balance_margin': (0.0 <= self.balance_margin <= 0.2, '[0, 0.2] m'),
            'grasp_margin': (0.0 <= self.grasp_margin <= 0.2, '[0, 0.2] m'),
            'push_speed': (
                MIN_PUSH_SPEED <= self.push_speed <= 0.5,
                f'[{MIN_PUSH_SPEED:g}, 0.5] m/s',
            ),
            'push_min': (0.0 < self.push_min < self.push_max, '(0, push_max) m'),
            'push_max': (self.push_min < self.push_max <= 0.5, '(push_min, 0.5] m'),
            'sim_step': (0.0 < self.sim_step <= 0.01, '(0, 0.01] m'),
            'waypoint_step': (0.0 < self.waypoint_step <= 0.5, '(0, 0.5] m'),
            'lookahead': (0.0 < self.lookahead <= 1.0, '(0, 1] m'),
            'rrt_iterations': (self.rrt_iterations >= 10, 'at least 10'),
            'rrt_range': (0.0 < self.rrt_range <= 1.0, '(0, 1] m'),
            'refine_iterations': (self.refine_iterations >= 0, 'at least 0'),
            'exhaustive_per_side': (self.exhaustive_per_side >= 1, 'at least 1'),
            'goal_yaws': (self.goal_yaws >= 1, 'at least 1'),
            'goal_y_step': (0.0 < self.goal_y_step <= 1.0, '(0, 1] m'),
            'overhang_weight': (self.overhang_weight >= 0.0, 'at least 0'),
            'hold_weight': (self.hold_weight >= 0.0, 'at least 0'),
            'hold_max': (0.0 < self.hold_max <= 1.0, '(0, 1]: 1 is what the pads resist'),
            'seen_turn': (0.0 <= self.seen_turn <= 0.05, '[0, 0.05] m'),
        }
        bad: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == 'int' and (isinstance(value, bool) or not isinstance(value, Integral)):
                bad[f.name] = 'a whole number'  # 12.5 yaws failed deep in planning
            elif f.type == 'float' and not math.isfinite(value):
                bad[f.name] = 'finite'
        for key, (ok, allowed) in checks.items():
            if not ok and key not in bad:
                bad[key] = allowed
        if bad:
            said = '; '.join(f'{k} = {getattr(self, k)!r}, not {why}' for k, why in bad.items())
            raise PlannerSettingsError(
                f'planner settings out of range: {said} (set in the planner: section of the '
                'workcell file, or by an option)'
            )


def planner_config(workcell: Workcell, **overrides: Any) -> PlannerConfig:
    """The planner's settings for ``workcell``: its table, gripper, fingertip and obstacles,
    the file's ``planner:`` section, then ``overrides`` (raises PlannerSettingsError on an
    unknown or bad setting)."""
    settings = {**workcell.planner, **overrides}
    known = {f.name for f in fields(PlannerConfig)} - {
        'table',
        'gripper',
        'fingertip',
        'obstacles',
    }
    unknown = sorted(set(settings) - known, key=str)  # a YAML key may be a number
    if unknown:
        raise PlannerSettingsError(
            f'unknown planner setting {unknown[0]!r} (known: {", ".join(sorted(known))})'
        )
    for key, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, Real):  # numpy's numbers too
            raise PlannerSettingsError(f'planner setting {key}: must be a number, got {value!r}')
    try:
        return PlannerConfig(
            table=workcell.table,
            gripper=workcell.gripper,
            fingertip=workcell.fingertip,
            obstacles=workcell.obstacles,
            **settings,
        )
    except (TypeError, OverflowError) as exc:
        raise PlannerSettingsError(f'bad planner setting: {exc}') from None
