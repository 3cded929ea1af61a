"""Paths in SE(2) from the object's pose to the goal: OMPL's RRT* through valid poses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math
import time
from typing import Any

import numpy as np

from slide_core.geometry import FloatArray, check_pose, se2_distance, wrap_angle
from slide_core.model import Belief
from slide_core.planning.balance import in_workspace, is_valid, motion_validity, validity
from slide_core.planning.config import PlannerConfig, PlannerSettingsError, PlanningError

MOTION_CHECK_STEP = 0.01
"""SE(2) distance [m] between the poses RRT* checks along a motion. Discrete checks can
miss a corner that cuts into an obstacle between them, so the resampled waypoints are
checked again and a path with an invalid one is planned anew (:data:`PATH_ATTEMPTS`)."""
PATH_ATTEMPTS = 3


@dataclass(frozen=True)
class SE2Path:
    """An SE(2) path: waypoints (N, 3) from the start to the goal, and planning time [s]."""

    waypoints: FloatArray
    seconds: float
    exact: bool


def plan_path(
    belief: Belief, X_start: Any, X_goal: Any, config: PlannerConfig, seed: int = 1
) -> SE2Path:
    """RRT* (OMPL) from X_start to X_goal through valid poses (:func:`is_valid`), every
    waypoint of the result valid and the last at the goal; see :func:`rrt_star`. Up to
    PATH_ATTEMPTS seeds (``seed``, ``seed + 1``, ...) are tried before PlanningError. (A
    path OMPL found only part of the way, its end short of an unreachable goal, was pushed
    along as if it led there: the object wandered beside a wall until the stall stop.)"""
    t0 = time.perf_counter()
    short: SE2Path | None = None
    for attempt in range(PATH_ATTEMPTS):
        path = rrt_star(belief, X_start, X_goal, config, seed + attempt)
        if not is_valid(belief, X_start, config):
            return path  # straight from an invalid start, by design (see rrt_star)
        bad = [X for X in path.waypoints[1:] if not is_valid(belief, X, config)]
        if not bad and path.exact:
            return SE2Path(path.waypoints, time.perf_counter() - t0, path.exact)
        if not bad:
            short = path
    if short is not None:
        end = short.waypoints[-1]
        gap = float(se2_distance(end, check_pose(X_goal, 'X_goal'), belief.radius()))
        raise PlanningError(
            f'RRT* found no path from {np.round(X_start, 3).tolist()} to the goal (the '
            f'nearest it came, {np.round(end, 3).tolist()}, is {gap * 100:.1f} cm from it; '
            f'{PATH_ATTEMPTS} seeds tried): obstacles or the balance limit close it off'
        )
    raise PlanningError(
        f'RRT* paths from {np.round(X_start, 3).tolist()} kept cutting an obstacle or the '
        f'balance limit between checked poses ({PATH_ATTEMPTS} seeds tried)'
    )


def rrt_star(
    belief: Belief, X_start: Any, X_goal: Any, config: PlannerConfig, seed: int
) -> SE2Path:
    """RRT* (OMPL) from X_start to X_goal through valid poses (:func:`is_valid`).

    Reproducible: OMPL's random generator is seeded with ``seed`` (> 0) before the planner
    and its samplers are made, so the same inputs and seed give the same path. A start that
    is itself not valid (pushed too far, say) is connected straight to the goal, when that
    line stays on the table and clear of obstacles. Raises PlanningError when the goal is
    not valid, the straight line from an invalid start is not clear, or RRT* finds no
    path."""
    from ompl import base as ob
    from ompl import geometric as og
    from ompl import util as ou

    t0 = time.perf_counter()
    Xs, Xg = check_pose(X_start, 'X_start').copy(), check_pose(X_goal, 'X_goal').copy()
    Xs[2], Xg[2] = wrap_angle(Xs[2]), wrap_angle(Xg[2])  # OMPL's SE(2) yaw is in [-pi, pi]
    rho = belief.radius()
    if not is_valid(belief, Xg, config):
        raise PlanningError(f'the goal {np.round(Xg, 4).tolist()} is not a valid pose')
    if not is_valid(belief, Xs, config):
        straight = resample(np.stack((Xs, Xg)), rho, config.waypoint_step)
        # Straight on only where the line stays on the table and clear of obstacles: an
        # object seen a few millimetres into an obstacle was pushed on through it.
        if not all(in_workspace(belief.grid, X, config) for X in straight[1:]):
            raise PlanningError(
                f'the object at {np.round(Xs, 3).tolist()} is not at a valid pose, and the '
                'straight line to the goal leaves the table or cuts an obstacle'
            )
        return SE2Path(straight, 0.0, True)
    if seed <= 0:
        raise PlannerSettingsError(f'the path seed must be positive, got {seed}')
    # OMPL seeds every new generator from one global sequence: reseeding it here makes the
    # planner and the samplers made below deterministic (OMPL warns that generators exist
    # already; that is expected and silenced).
    ou.setLogLevel(ou.LogLevel.LOG_NONE)
    ou.RNG.setSeed(int(seed))
    ou.setLogLevel(ou.LogLevel.LOG_WARN)
    space = ob.SE2StateSpace()
    bounds = ob.RealVectorBounds(2)
    bounds.setLow(0, -rho)
    bounds.setHigh(0, config.table.depth)
    bounds.setLow(1, -config.table.width / 2)
    bounds.setHigh(1, config.table.width / 2)
    space.setBounds(bounds)
    space.setSubspaceWeight(1, rho)
    si = ob.SpaceInformation(space)

    check = validity(belief, config)

    def valid(state: Any) -> bool:
        return check(state.getX(), state.getY(), state.getYaw())

    si.setStateValidityChecker(valid)
    # Check motions every MOTION_CHECK_STEP (the resolution is a fraction of the extent).
    si.setStateValidityCheckingResolution(MOTION_CHECK_STEP / space.getMaximumExtent())
    motion = motion_validity(belief, config)
    if motion is not None:
        # The same poses as OMPL's discrete motion validator checks, in one compiled call
        # per motion instead of one Python call per pose (the planner's main cost).
        si.setMotionValidator(_motion_validator(ob)(si, space, motion))
    si.setup()
    start, goal = space.allocState(), space.allocState()
    for s, X in ((start, Xs), (goal, Xg)):
        s.setX(float(X[0]))
        s.setY(float(X[1]))
        s.setYaw(float(X[2]))
    pdef = ob.ProblemDefinition(si)
    pdef.setStartAndGoalStates(start, goal, 1e-3)
    planner = og.RRTstar(si)
    planner.setRange(config.rrt_range)
    planner.setProblemDefinition(pdef)
    planner.setup()
    count = [0]

    def done() -> bool:
        count[0] += 1
        return count[0] > config.rrt_iterations

    solved = planner.solve(ob.PlannerTerminationCondition(done))
    if not solved:
        raise PlanningError(
            f'RRT* found no path in {config.rrt_iterations} iterations from '
            f'{np.round(Xs, 3).tolist()} to {np.round(Xg, 3).tolist()}'
        )
    path = pdef.getSolutionPath()
    og.PathSimplifier(si).simplifyMax(path)  # shortcuts: RRT*'s tree wiggles in yaw
    X = np.array(
        [
            (path.getState(i).getX(), path.getState(i).getY(), path.getState(i).getYaw())
            for i in range(path.getStateCount())
        ]
    )
    exact = bool(pdef.hasExactSolution())
    return SE2Path(resample(X, rho, config.waypoint_step), time.perf_counter() - t0, exact)


def _motion_validator(ob: Any) -> Any:
    """OMPL's MotionValidator (from its Python module ``ob``) that checks a motion with a
    compiled function of both poses and OMPL's segment count."""

    class MotionCheck(ob.MotionValidator):  # type: ignore[misc]
        def __init__(
            self,
            si: Any,
            space: Any,
            check: Callable[[float, float, float, float, float, float, int], bool],
        ) -> None:
            super().__init__(si)
            self._space = space
            self._check = check

        def checkMotion(self, s1: Any, s2: Any) -> bool:  # noqa: N802 (OMPL's name)
            return self._check(
                s1.getX(), s1.getY(), s1.getYaw(), s2.getX(), s2.getY(), s2.getYaw(),
                self._space.validSegmentCount(s1, s2),
            )  # fmt: skip

    return MotionCheck


def resample(X: FloatArray, rho: float, step: float) -> FloatArray:
    """Waypoints every ``step`` metres (SE(2) distance) along a polyline of poses."""
    X = X.copy()
    X[:, 2] = np.unwrap(X[:, 2])
    seg = se2_distance(X[1:], X[:-1], rho)
    s = np.concatenate(([0.0], np.cumsum(seg)))
    if s[-1] <= 0:
        return X[[0, -1]]
    n = max(1, int(math.ceil(s[-1] / step)))
    at = np.linspace(0.0, s[-1], n + 1)
    out = np.column_stack([np.interp(at, s, X[:, j]) for j in range(3)])
    out[:, 2] = wrap_angle(out[:, 2])
    return out
