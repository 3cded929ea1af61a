"""The whole pre-grasp task in the twin, without ROS: ``slide episode``.

A random initial pose; exploratory pushes (the twin's random pushes, as the robot pokes an
unknown object); identification from their recorded motion and F/T wrenches; a goal at
the edge; closed-loop planned pushes (observe the pose, replan, push) until the goal is
reached or the push budget runs out; the grasp of the overhang and a lift. The decisions
are :mod:`slide_core.plan`'s, exactly as the ROS nodes make them.

Methods (which models the planner gets): :data:`slide_core.plan.METHODS`, see
:func:`slide_core.plan.models_for`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import math
from pathlib import Path
import time
from typing import Any

import numpy as np

from slide_core.bag import push_from_samples
from slide_core.errors import SlideInputError
from slide_core.geometry import rotation
from slide_core.identify import DT, TrainingSet, identify
from slide_core.model import ObjectSpec
from slide_core.plan import (
    METHODS,
    Gripper,
    Models,
    PlannerConfig,
    PlanningError,
    Table,
    com_margins,
    goal_acceptable,
    grasp_at,
    models_for,
    next_step,
    overhang,
    select_goal,
    stay_probability,
)
from slide_sim.scene import Workcell, object_extent
from slide_sim.twin import PushRecording, Twin

Progress = Callable[[str], None]


def planner_config(cell: Workcell | None = None, **overrides: Any) -> PlannerConfig:
    """Planner settings that match the twin's workcell (table, fingertip, gripper)."""
    cell = cell or Workcell()
    return PlannerConfig(
        table=Table(cell.table_depth, cell.table_width),
        gripper=Gripper(
            max_opening=cell.gripper_opening,
            finger_depth=cell.finger_depth,
            finger_width=cell.finger_width,
        ),
        tip_radius=cell.fingertip_radius,
        tip_mu=cell.fingertip_mu,
        **overrides,
    )


def random_start(spec: ObjectSpec, cell: Workcell, rng: np.random.Generator) -> np.ndarray:
    """A random pose well inside the table: at least 15 cm of table around the object."""
    r = object_extent(spec)
    lo = np.array([r + 0.15, -cell.table_width / 2 + r + 0.15])
    hi = np.array([cell.table_depth - r - 0.15, cell.table_width / 2 - r - 0.15])
    if np.any(lo >= hi):
        raise SlideInputError(f'{spec.name} is too large for the table')
    hi = np.minimum(hi, [0.6, 0.3])
    return np.array([*rng.uniform(lo, np.maximum(hi, lo + 1e-3)), rng.uniform(-math.pi, math.pi)])


def _data(spec: ObjectSpec, index: int, rec: PushRecording) -> Any:
    return push_from_samples(
        spec.grid,
        index,
        rec.t,
        rec.X_WO,
        rec.p_WF,
        rec.wrench_W,
        float(rec.t[rec.start]),
        float(rec.t[rec.end]),
        dt=DT,
    )


@dataclass
class EpisodeResult:
    """What one episode did (see ``to_dict`` for the JSON)."""

    object: str
    seed: int
    method: str
    success: bool = False
    fell: bool = False
    exploration_pushes: int = 0
    pushes: int = 0
    reached: bool = False
    stay_probability: float = 0.0
    goal_stay_probability: float = 0.0
    goal_truly_balanced: bool = False
    overhang_m: float = 0.0
    lifted_m: float = 0.0
    identification_s: float = 0.0
    planning_s: float = 0.0
    total_s: float = 0.0
    simulations: int = 0
    failure: str = ''
    goal: dict[str, Any] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != 'trace'}
        for k, v in out.items():
            if isinstance(v, float):
                out[k] = round(v, 4)
        return out


def run_episode(
    spec: ObjectSpec,
    seed: int,
    method: str = 'probabilistic',
    exploration_pushes: int = 5,
    push_budget: int = 25,
    config: PlannerConfig | None = None,
    png: Path | None = None,
    progress: Progress | None = None,
    exhaustive: bool = False,
) -> EpisodeResult:
    """Run the whole task once in a fresh twin (reproducible from ``seed`` up to RRT*)."""
    if method not in METHODS:
        raise SlideInputError(f'unknown method {method!r}; choose from {", ".join(METHODS)}')
    if not 1 <= exploration_pushes <= 20:
        raise SlideInputError(f'exploration pushes must be 1 to 20, got {exploration_pushes}')
    if push_budget < 1:
        raise SlideInputError(f'the push budget must be at least 1, got {push_budget}')
    say = progress or (lambda _m: None)
    t_start = time.perf_counter()
    cell = Workcell()
    config = config or planner_config(cell)
    rng = np.random.default_rng(seed)
    result = EpisodeResult(spec.name, seed, method)
    twin = Twin(spec, tuple(float(v) for v in random_start(spec, cell, rng)))  # type: ignore[arg-type]
    say(f'{spec.name} seed {seed} {method}: {exploration_pushes} exploratory pushes')
    recs = [twin.random_push(rng) for _ in range(exploration_pushes)]
    result.exploration_pushes = len(recs)
    trace: dict[str, Any] = {'X_explore': [r.X_WO[-1].tolist() for r in recs], 'pushes': []}
    belief = None
    if method != 'ground-truth':
        t0 = time.perf_counter()
        train = TrainingSet.from_pushes(spec.grid, [_data(spec, i, r) for i, r in enumerate(recs)])
        belief = identify(train, 'probabilistic', seed=seed)
        result.identification_s = time.perf_counter() - t0
    models = models_for(method, spec, belief)
    truth = Models.create(spec.grid, spec.mass, spec.friction)
    X = twin.object_pose()
    trace['X_start'] = X.tolist()
    say(f'identified in {result.identification_s:.1f} s; choosing a goal')
    t0 = time.perf_counter()
    try:
        goal = select_goal(models, X, config)
    except PlanningError as exc:
        result.failure = f'goal: {exc}'
        result.total_s = time.perf_counter() - t_start
        return result
    result.planning_s += time.perf_counter() - t0
    result.goal = goal.to_dict()
    result.goal_stay_probability = goal.stay_probability
    result.goal_truly_balanced = bool(com_margins(spec.grid, truth.com(), goal.X_WO)[0] >= 0.0)
    trace['goal'] = goal.X_WO.tolist()
    while result.pushes < push_budget:
        X = twin.object_pose()
        try:
            step = next_step(models, X, goal, config, exhaustive=exhaustive)
        except PlanningError as exc:
            result.failure = f'planning: {exc}'
            break
        result.planning_s += step.seconds
        if step.done:
            result.reached = True
            break
        assert step.push is not None and step.path is not None
        result.simulations += step.push.simulations
        p = step.push
        d_W = rotation(float(X[2])) @ p.direction_O
        trace['pushes'].append(
            {
                'X_WO': X.tolist(),
                'p_WF0': p.p_WF0.tolist(),
                'direction_W': d_W.tolist(),
                'travel': p.travel,
                'target': step.target.tolist() if step.target is not None else None,
                'path': step.path.waypoints.tolist(),
            }
        )
        say(
            f'push {result.pushes + 1}: {p.travel * 100:.1f} cm, expected '
            f'{p.expected_distance * 100:.1f} cm from the waypoint ({step.seconds:.2f} s)'
        )
        rec = twin.push(p.contact_O, p.direction_O, p.travel, p.speed)
        result.pushes += 1
        if rec.fell or twin.fell():
            result.fell = True
            result.failure = 'the object fell while being pushed'
            break
    X = twin.object_pose()
    trace['X_final'] = X.tolist()
    result.overhang_m = overhang(spec.grid, X)
    result.stay_probability = stay_probability(models, X, config.balance_margin)
    if not result.fell:
        grasp = goal_acceptable(models, X, config) or grasp_at(
            spec.grid, X, config.gripper, models.com()[int(np.argmax(models.weight))]
        )
        if grasp is None:
            result.failure = result.failure or 'no grasp at the final pose'
        else:
            trace['grasp'] = grasp.to_dict()
            say(f'grasping at {np.round(grasp.p_W, 3).tolist()}')
            outcome = twin.grasp(
                (float(grasp.p_W[0]), float(grasp.p_W[1])), grasp.yaw, 0.1, z=grasp.z
            )
            result.lifted_m = outcome.lifted_m
            result.success = outcome.success
            # Held but tilted in the grip is not a fall; dropped or left tipped over is.
            result.fell = outcome.fell or (not outcome.success and twin.fell())
            if not outcome.success:
                result.failure = result.failure or 'the grasp did not lift the object'
        if not result.reached and not result.failure:
            result.failure = 'push budget spent before the goal'
    result.total_s = time.perf_counter() - t_start
    result.trace = trace
    if png is not None:
        from slide_core.plot import episode_figure

        episode_figure(png, spec.grid, models, trace, config, title=_title(result))
    return result


def _title(r: EpisodeResult) -> str:
    verdict = 'lifted' if r.success else ('fell' if r.fell else 'failed')
    return (
        f'{r.object}, seed {r.seed}, {r.method}: {verdict} after {r.pushes} pushes, '
        f'overhang {r.overhang_m * 100:.1f} cm, P(stay) {r.stay_probability:.2f}'
    )
