"""One whole pre-grasp episode in the twin, in this process: ``slide episode``.

A random initial pose; the core's task loop (:class:`slide_core.task.Task`) over the twin
(:class:`slide_sim.world.TwinWorld`) with the core's decisions
(:class:`slide_core.task.LocalDecider`); the ground truth scores it. Reproducible: the
seed fixes the start pose (:func:`slide_sim.scene.random_start`), the exploratory pushes and
every RRT* path, each from its own stream, so the ROS graph given the same seed makes the
same decisions wherever its observations agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slide_bringup.graph import FORCE_LIMIT_N
from slide_bringup.signals import Terminated
from slide_core.errors import SlideInputError
from slide_core.geometry import com_margins, overhang
from slide_core.model import Belief, ObjectSpec, Workcell, load_workcell
from slide_core.physics import DEFAULT_SUPPORT
from slide_core.planning import PlannerConfig, planner_config, stay_probability
from slide_core.task import (
    Aborted,
    IdentificationSettings,
    LocalDecider,
    ModelSource,
    Outcome,
    Stage,
    Task,
    TaskResult,
    TaskSettings,
)
from slide_sim.scene import random_start
from slide_sim.tracker import TRUTH, Tracking
from slide_sim.twin import Twin
from slide_sim.world import TwinWorld

Progress = Callable[[str], None]


@dataclass
class EpisodeResult:
    """What one episode did (see ``to_dict`` for the JSON). ``X_final``, ``overhang_m`` and
    ``stay_probability`` describe the pose the object was grasped at, or else where it came
    to rest; an object that fell while it was pushed has none: empty and None.
    ``com_error_m``: how far the last belief's most probable centre of mass lies from the
    truth (None without a belief); ``staged``: staging poses chosen (the belief too
    uncertain for a goal, :func:`slide_core.planning.select_staging`);
    ``contact_offset_m``: the fingertip's recorded offset from the object in the camera's
    poses, measured on the exploratory pushes (None when they could not tell it;
    :class:`slide_core.task.TaskSettings`); ``contact_offset_taken_off_m``: what of it the
    task took off its poses (None: nothing, below 1 mm, ``check``, or told from two push
    directions only)."""

    object: str
    seed: int
    method: str
    outcome: str = ''
    stage: str = ''
    success: bool = False
    fell: bool = False
    exploration_pushes: int = 0
    pushes: int = 0
    regoals: int = 0
    relearned: int = 0
    staged: int = 0
    reached: bool = False
    stay_probability: float | None = 0.0
    goal_stay_probability: float = 0.0
    goal_truly_balanced: bool = False
    com_error_m: float | None = None
    contact_offset_m: list[float] | None = None
    contact_offset_taken_off_m: list[float] | None = None
    overhang_m: float | None = 0.0
    lifted_m: float = 0.0
    identification_s: float = 0.0
    interim_identification_s: float = 0.0
    planning_s: float = 0.0
    total_s: float = 0.0
    simulations: int = 0
    failure: str = ''
    interrupted: str = ''
    goal: dict[str, Any] = field(default_factory=dict)
    X_final: list[float] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != 'trace'}
        for k, v in out.items():
            if isinstance(v, float):
                out[k] = round(v, 4)
        out['stages'] = {k: round(v, 3) for k, v in self.stages.items()}
        out['X_final'] = [round(v, 5) for v in self.X_final]
        return out


def score(
    spec: ObjectSpec,
    seed: int,
    method: str,
    task: TaskResult,
    config: PlannerConfig,
    twin: Twin,
) -> EpisodeResult:
    """The episode's figures from the task's result and the twin's ground truth."""
    st = task.state
    r = EpisodeResult(spec.name, seed, method)
    r.outcome, r.stage = task.outcome.value, task.stage.value
    r.success = task.success
    r.failure = '' if task.success else f'{task.stage.value}: {task.reason}'
    r.exploration_pushes, r.pushes, r.reached = task.exploration_pushes, task.pushes, task.reached
    r.regoals = st.regoals
    r.relearned = st.relearned
    r.staged = st.staged
    r.stages = task.stage_s
    r.identification_s = task.stage_s.get(Stage.IDENTIFY.value, 0.0)
    r.interim_identification_s = st.interim_identify_s  # (within the exploring stage's time)
    r.planning_s = task.stage_s.get(Stage.PLAN.value, 0.0) + task.stage_s.get(
        Stage.GOAL.value, 0.0
    )
    r.total_s = task.total_s
    truth = Belief.create(spec.grid, spec.mass, spec.friction)
    if st.goal is not None:
        r.goal = st.goal.to_dict()
        r.goal_stay_probability = st.goal.stay_probability
        r.goal_truly_balanced = bool(com_margins(spec.grid, truth.com(), st.goal.X_WO)[0] >= 0)
    if st.belief is not None:
        r.com_error_m = float(np.linalg.norm(st.belief.com()[st.belief.best] - truth.com()[0]))
    r.simulations = st.simulations
    r.contact_offset_m = st.trace.get('contact_offset_m')
    r.contact_offset_taken_off_m = st.trace.get('contact_offset_taken_off_m')
    # Where the object lay when the task grasped it (the pose it decided on), not where the
    # gripper has since carried it: a held object turns and its 'overhang' means nothing.
    r.fell = task.outcome is Outcome.FELL or (st.report is not None and st.report.fell)
    X = np.asarray(st.trace['X_final'], dtype=float) if 'X_final' in st.trace else None
    if X is None and r.fell:
        # Fallen off the table while pushed: its planar pose and the balance there would
        # describe a toppled object as if it lay on the table.
        r.X_final, r.overhang_m, r.stay_probability = [], None, None
    else:
        if X is None:
            X = twin.object_pose()
        r.X_final = X.tolist()
        r.overhang_m = overhang(spec.grid, X)
        if st.belief is not None:
            r.stay_probability = stay_probability(st.belief, X, config.balance_margin)
    if st.report is not None:
        r.lifted_m = st.report.lifted_m
    r.trace = st.trace
    return r


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
    workcell: Workcell | None = None,
    exploration: str = 'most-distinctive',
    support: str = DEFAULT_SUPPORT,
    extra_exploration: int = TaskSettings.extra_exploration,
    stall_pushes: int = TaskSettings.stall_pushes,
    regoals: int = TaskSettings.regoals,
    relearn_every: int = TaskSettings.relearn_every,
    before_start: Callable[[], None] | None = None,
    force_limit: float = FORCE_LIMIT_N,
    tracking: Tracking = TRUTH,
    contact_offset: str = TaskSettings.contact_offset,
) -> EpisodeResult:
    """Run the whole task once in a fresh twin (reproducible from ``seed``); ``support``:
    the support model identification and planning use (the twin is a rigid body);
    ``extra_exploration``: more exploratory pushes while the belief is too uncertain for a
    goal; ``stall_pushes``: pushes in a row without progress before the loop stops and
    tries the grasp; ``regoals``: new goals from where the object is when nothing leads to
    the goal from there; ``relearn_every``: planned pushes between identifications from
    the pushes so far (:class:`TaskSettings`); ``before_start`` is called once every
    setting was accepted, before the task (the command line loads the compiled kernels
    there, so that a bad setting is said at once); ``force_limit`` [N]: a push whose force
    goes over it stops, retracts and ends the episode, as the graph's F/T limit does (0:
    none); ``tracking``: the object poses the task observes and identifies from, as a
    camera tracker gives them (default: the twin's truth at 100 Hz); ``contact_offset``:
    what the task does with the fingertip's offset from the object that the exploratory
    pushes show (:class:`TaskSettings`: 'check' says it, 'auto' takes it off the poses)."""
    try:
        source = ModelSource(method)
    except ValueError:
        names = ', '.join(s.value for s in ModelSource)
        raise SlideInputError(f'unknown method {method!r}; choose from {names}') from None
    cell = workcell or load_workcell()
    settings = TaskSettings(
        exploration_pushes=exploration_pushes,
        extra_exploration=extra_exploration,
        push_budget=push_budget,
        stall_pushes=stall_pushes,
        regoals=regoals,
        relearn_every=relearn_every,
        interim_beliefs=exploration != 'random',
        fingertip_radius=cell.fingertip.radius,
        contact_offset=contact_offset,
    )
    config = config or planner_config(cell)
    twin = Twin(spec, cell, random_start(spec, cell, seed))
    decider = LocalDecider(
        config,
        cell,
        source=source,
        truth=Belief.create(spec.grid, spec.mass, spec.friction),
        identification=IdentificationSettings(seed=seed, support=support),
        exploration_policy=exploration,
        seed=seed,
        exhaustive=exhaustive,
    )
    if before_start is not None:
        before_start()
    say = progress or (lambda _m: None)
    say(f'{spec.name} seed {seed} {method}: {exploration_pushes} exploratory pushes')
    world = TwinWorld(twin, force_limit=force_limit, tracking=tracking, seed=seed)
    task = Task(world, decider, settings, events=lambda stage, m: say(m))
    try:
        outcome = task.run()
    except KeyboardInterrupt as exc:
        # Ctrl-C or SIGTERM: the episode so far is the result (it was lost with a
        # traceback); a SIGTERM was said to be a Ctrl-C.
        how = 'terminated' if isinstance(exc, Terminated) else 'interrupted'
        signal_name = 'SIGTERM' if how == 'terminated' else 'Ctrl-C'
        outcome = task.result(Aborted(f'{how} ({signal_name})'))
        say(f'{how} at {outcome.stage.value}: the episode so far is kept')
    else:
        how = ''
    result = score(spec, seed, method, outcome, config, twin)
    result.interrupted = how
    if png is not None and outcome.state.belief is not None:
        from slide_core.io.plot import episode_figure

        belief = outcome.state.belief
        try:
            episode_figure(png, spec.grid, belief, outcome.state.trace, config, _title(result))
        except (OSError, ValueError, KeyError) as exc:  # the picture, never the result
            say(f'no picture: {exc}')
    return result


def _title(r: EpisodeResult) -> str:
    verdict = 'lifted' if r.success else ('fell' if r.fell else 'failed')
    head = f'{r.object}, seed {r.seed}, {r.method}: {verdict} after {r.pushes} pushes'
    if r.overhang_m is None or r.stay_probability is None:
        return head
    return f'{head}, overhang {r.overhang_m * 100:.1f} cm, P(stay) {r.stay_probability:.2f}'
