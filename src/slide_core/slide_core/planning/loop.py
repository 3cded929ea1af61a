"""The closed loop, one decision at a time: at the goal, or the path and the next push."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import time
from typing import Any

import numpy as np

from slide_core.geometry import FloatArray, check_pose, se2_distance
from slide_core.model import Belief
from slide_core.planning.config import PlannerConfig, PlanningError
from slide_core.planning.goal import goal_acceptable, goal_refusal, staging_config
from slide_core.planning.grasp import Grasp, grasp_here
from slide_core.planning.path import SE2Path, plan_path
from slide_core.planning.push import PushPlan, select_push


def reached(belief: Belief, X_WO: Any, config: PlannerConfig) -> bool:
    """True when the object is at a pose that does as a goal: graspable (the pads hold at
    least ``min_grip``, coming in square to the edge or to the object's sides:
    :func:`slide_core.planning.grasp.grasp_here`) and balanced with probability
    1 - epsilon. The goal itself asks ``grasp_margin`` more overhang, so that a push
    falling a little short still does."""
    return goal_acceptable(belief, check_pose(X_WO, 'X_WO'), config, landed=True) is not None


def final_grasp(belief: Belief, X_WO: Any, config: PlannerConfig) -> Grasp | None:
    """The grasp the task ends with at the observed pose: the goal's grasp when the pose
    does as a goal, else any grasp of the overhang nearest the most probable centre of
    mass (the push budget ran out or no plan was left); None when nothing holds. Either
    may come in square to the object's sides (:func:`slide_core.planning.grasp.grasp_here`)."""
    X = check_pose(X_WO, 'X_WO')
    return goal_acceptable(belief, X, config, landed=True) or grasp_here(
        belief.grid, X, config.gripper, belief.com()[belief.best]
    )


def next_waypoint(waypoints: FloatArray, X_WO: Any, lookahead: float, rho: float) -> FloatArray:
    """The waypoint a push aims at: along ``waypoints`` (N, 3), the last before the first
    one beyond ``lookahead`` (SE(2) distance) of X_WO, at least the one after the start.
    (The farthest within it skipped a detour: a path round the end of a rail came back
    within reach across it, and the push aimed through the rail.)"""
    X = check_pose(X_WO, 'X_WO')
    if len(waypoints) < 2:
        return np.asarray(waypoints[-1], dtype=float)
    d = se2_distance(waypoints[1:], X[None, :], rho)
    beyond = np.nonzero(d > lookahead)[0]
    k = int(beyond[0]) - 1 if len(beyond) else len(d) - 1
    return np.asarray(waypoints[1 + max(k, 0)], dtype=float)


@dataclass(frozen=True)
class Step:
    """One decision of the closed loop: done (at the goal), or the path from the observed
    pose, the waypoint aimed at and the push to make; with the time it took [s]."""

    done: bool
    path: SE2Path | None
    target: FloatArray | None
    push: PushPlan | None
    seconds: float


def step_seed(seed: int, index: int) -> int:
    """A positive 31-bit seed for decision ``index`` of an episode seeded with ``seed``."""
    state = np.random.SeedSequence([abs(int(seed)), int(index)]).generate_state(1)[0]
    return int(state % (2**31 - 1)) + 1


def next_step(
    belief: Belief,
    X_WO: Any,
    X_goal: Any,
    config: PlannerConfig,
    exhaustive: bool = False,
    seed: int = 1,
    on_stage: Callable[[str], None] | None = None,
    staging: bool = False,
) -> Step:
    """Paper 2's Algorithm 4, one iteration: stop if the observed pose has reached the goal
    (pose X_goal), else plan a path from it (RRT*, seeded with ``seed``), aim at the next
    waypoint and choose the push. ``on_stage`` is told 'path' and 'push' as they begin, and
    'push' again before each push candidate is checked (a node publishes feedback, or
    raises to stop).

    PlanningError when X_goal itself would not do as a goal under ``belief`` (a goal chosen
    under an older belief: the pushes since moved it past what the pads hold, or the
    balance): arriving there would not end the loop, which circled such a goal until its
    stall stop (a plate's goal, held at 0.46 of the pads when chosen, at 0.52 after).

    With ``staging``, X_goal is a staging pose (:func:`slide_core.planning.select_staging`),
    reached, judged and pushed towards under :func:`staging_config`."""
    t0 = time.perf_counter()
    if staging:
        config = staging_config(config)
    X = check_pose(X_WO, 'X_WO')
    say = on_stage or (lambda _s: None)
    if reached(belief, X, config):
        return Step(True, None, None, None, time.perf_counter() - t0)
    G = check_pose(X_goal, 'X_goal')
    refusal = goal_refusal(belief, G, config)
    if refusal is not None:
        raise PlanningError(
            f'the goal {np.round(G, 4).tolist()} would not do as a goal under this belief: '
            f'{refusal}'
        )
    say('path')
    path = plan_path(belief, X, X_goal, config, seed=seed)
    target = next_waypoint(path.waypoints, X, config.lookahead, belief.radius())
    say('push')
    push = select_push(belief, X, target, config, exhaustive=exhaustive, check=lambda: say('push'))
    return Step(False, path, target, push, time.perf_counter() - t0)
