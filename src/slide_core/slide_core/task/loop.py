"""The pre-grasp task as one loop over a world and a decider:

    perceive -> explore x N -> identify -> goal -> (observe, plan, push)* -> grasp

Each stage is a method of :class:`Task` that reads and updates its :class:`TaskState`;
:meth:`Task.run` calls them in order, and so do the leaves of the ROS behaviour node, so
the order, the budget, the retries and the stop conditions are written once, here.
Failures end the task with a typed :class:`Outcome` naming the stage and the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import enum
import time
from typing import Any

import numpy as np

from slide_core.errors import NoSolutionError, SlideInputError
from slide_core.geometry import FloatArray, Grid, rotation
from slide_core.identification import IdentificationError, PushData, PushSamples
from slide_core.model import Belief, Primitive
from slide_core.planning import Goal, Grasp, PlanningError, Step
from slide_core.task.world import (
    Aborted,
    Decider,
    GraspReport,
    ObjectLost,
    PushFailed,
    World,
    WorldError,
)


class Stage(enum.Enum):
    """Where the task is."""

    PERCEIVE = 'perceive'
    EXPLORE = 'explore'
    IDENTIFY = 'identify'
    GOAL = 'goal'
    PLAN = 'plan'
    PUSH = 'push'
    GRASP = 'grasp'
    DONE = 'done'


class Outcome(enum.Enum):
    """How the task ended."""

    SUCCEEDED = 'succeeded'
    """The object was grasped and lifted."""
    OBJECT_LOST = 'object_lost'
    """Perception lost the object (and the world could not say it fell)."""
    FELL = 'fell'
    """The object fell off the table."""
    PUSH_FAILED = 'push_failed'
    """A push failed more often than the retries allow."""
    IDENTIFICATION_FAILED = 'identification_failed'
    """No belief could be identified from the exploratory pushes."""
    NO_GOAL = 'no_goal'
    """No pose at the edge is graspable and balanced with high probability."""
    NO_PLAN = 'no_plan'
    """No path or safe push from the object's pose, and the grasp failed there."""
    BUDGET_SPENT = 'budget_spent'
    """The planned pushes ran out before the goal, and the grasp failed there."""
    NO_GRASP = 'no_grasp'
    """At the final pose no grasp holds the object."""
    GRASP_FAILED = 'grasp_failed'
    """The grasp did not lift the object."""
    ABORTED = 'aborted'
    """Somebody stopped the task."""


@dataclass(frozen=True)
class TaskSettings:
    """exploration_pushes: 1 to 20; push_budget: planned pushes allowed; push_retries: a
    failed push is re-planned this often before the task fails; observe_retries: a lost
    pose is looked for again this often (``retry_wait_s`` apart) before the task fails."""

    exploration_pushes: int = 5
    push_budget: int = 25
    push_retries: int = 1
    observe_retries: int = 2
    retry_wait_s: float = 0.5

    def __post_init__(self) -> None:
        if not 1 <= self.exploration_pushes <= 20:
            raise SlideInputError(
                f'exploration pushes must be 1 to 20, got {self.exploration_pushes}'
            )
        if self.push_budget < 1:
            raise SlideInputError(f'the push budget must be at least 1, got {self.push_budget}')
        if self.push_retries < 0 or self.observe_retries < 0 or self.retry_wait_s < 0:
            raise SlideInputError('retries and waits must not be negative')


@dataclass
class TaskState:
    """What the task knows so far (the behaviour node publishes it): the grid and last
    pose, the exploratory primitives and their pushes on identification's step, what
    every push measured, the belief, goal, last step, planned pushes, the grasp."""

    stage: Stage = Stage.PERCEIVE
    grid: Grid | None = None
    X_WO: FloatArray | None = None
    explored: list[Primitive] = field(default_factory=list)
    pushes: list[PushData] = field(default_factory=list)
    samples: list[PushSamples] = field(default_factory=list)
    belief: Belief | None = None
    goal: Goal | None = None
    step: Step | None = None
    planned: int = 0
    simulations: int = 0
    reached: bool = False
    grasp: Grasp | None = None
    report: GraspReport | None = None
    stage_s: dict[str, float] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=lambda: {'pushes': []})
    no_plan: str = ''


@dataclass(frozen=True)
class TaskResult:
    """How the task ended and what it did.

    Attributes:
        outcome: how it ended; stage: where (DONE on success); reason: why, in words.
        exploration_pushes, pushes: pushes made; reached: the goal was reached.
        stage_s: seconds spent per stage; total_s: the whole task.
        state: the final state (belief, goal, grasp, trace for the picture).
    """

    outcome: Outcome
    stage: Stage
    reason: str
    exploration_pushes: int
    pushes: int
    reached: bool
    stage_s: dict[str, float]
    total_s: float
    state: TaskState

    @property
    def success(self) -> bool:
        return self.outcome is Outcome.SUCCEEDED


class TaskFailure(Exception):  # noqa: N818 - it carries an outcome, it is not a bug
    """Ends the task: the outcome, the stage and the reason."""

    def __init__(self, outcome: Outcome, stage: Stage, reason: str) -> None:
        super().__init__(reason)
        self.outcome, self.stage, self.reason = outcome, stage, reason


Events = Callable[[Stage, str], None]


class Task:
    """One pre-grasp task over ``world`` with ``decider`` (see the module docstring).

    ``events`` is told what happens (stage, message); ``should_stop`` is polled between
    steps (the behaviour node's abort), and a True ends the task as ABORTED.
    """

    def __init__(
        self,
        world: World,
        decider: Decider,
        settings: TaskSettings | None = None,
        events: Events | None = None,
        should_stop: Callable[[], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.world, self.decider = world, decider
        self.settings = settings or TaskSettings()
        self.state = TaskState()
        self._events = events or (lambda _s, _m: None)
        self._should_stop = should_stop or (lambda: False)
        self._sleep = sleep

    # -- helpers ---------------------------------------------------------------------------
    def _enter(self, stage: Stage) -> float:
        if self._should_stop():
            raise Aborted(f'aborted before {stage.value}')
        self.state.stage = stage
        return time.perf_counter()

    def _leave(self, stage: Stage, t0: float) -> None:
        key = stage.value
        self.state.stage_s[key] = self.state.stage_s.get(key, 0.0) + time.perf_counter() - t0

    def say(self, message: str) -> None:
        self._events(self.state.stage, message)

    def observe(self) -> FloatArray:
        """The object's pose now, looked for again ``observe_retries`` times when lost."""
        s = self.settings
        for attempt in range(s.observe_retries + 1):
            try:
                obs = self.world.observe()
            except ObjectLost as exc:
                if exc.fell or attempt == s.observe_retries:
                    outcome = Outcome.FELL if exc.fell else Outcome.OBJECT_LOST
                    raise TaskFailure(outcome, self.state.stage, str(exc)) from None
                self.say(f'object not seen ({exc}); looking again')
                self._sleep(s.retry_wait_s)
                continue
            if self.state.grid is None:
                self.state.grid = obs.grid
            self.state.X_WO = obs.X_WO
            return obs.X_WO
        raise AssertionError('unreachable')

    def _push(self, primitive: Primitive) -> PushSamples:
        """Execute a push at the last observed pose; keep what was measured."""
        assert self.state.X_WO is not None
        samples = self.world.push(primitive, self.state.X_WO)
        self.state.samples.append(samples)
        return samples

    # -- stages ----------------------------------------------------------------------------
    def perceive(self) -> None:
        t0 = self._enter(Stage.PERCEIVE)
        X = self.observe()
        self.state.trace['X_initial'] = X.tolist()
        self._leave(Stage.PERCEIVE, t0)

    def explore_once(self) -> None:
        """One exploratory push: chosen, executed, recorded."""
        t0 = self._enter(Stage.EXPLORE)
        st = self.state
        assert st.grid is not None and st.X_WO is not None
        primitive = self.decider.exploration(st.grid, st.X_WO, st.belief, st.explored)
        self.say(f'exploratory push {len(st.explored) + 1}: {primitive.travel * 100:.1f} cm')
        assert st.grid is not None
        try:
            st.pushes.append(self._push(primitive).to_data(st.grid, len(st.pushes)))
        except PushFailed as exc:
            raise TaskFailure(Outcome.PUSH_FAILED, Stage.EXPLORE, str(exc)) from None
        except IdentificationError as exc:
            raise TaskFailure(
                Outcome.PUSH_FAILED, Stage.EXPLORE, f'unusable push: {exc}'
            ) from None
        st.explored.append(primitive)
        st.trace.setdefault('X_explore', []).append(self.observe().tolist())
        self._leave(Stage.EXPLORE, t0)

    def identify(self) -> None:
        t0 = self._enter(Stage.IDENTIFY)
        st = self.state
        assert st.grid is not None
        try:
            st.belief = self.decider.identify(st.grid, st.pushes)
        except (IdentificationError, NoSolutionError) as exc:
            raise TaskFailure(Outcome.IDENTIFICATION_FAILED, Stage.IDENTIFY, str(exc)) from None
        self.say(f'identified {st.belief.K} model(s)')
        self._leave(Stage.IDENTIFY, t0)

    def choose_goal(self) -> None:
        t0 = self._enter(Stage.GOAL)
        st = self.state
        assert st.belief is not None
        X = self.observe()
        st.trace['X_start'] = X.tolist()
        try:
            st.goal = self.decider.goal(st.belief, X)
        except PlanningError as exc:
            raise TaskFailure(Outcome.NO_GOAL, Stage.GOAL, str(exc)) from None
        st.trace['goal'] = st.goal.X_WO.tolist()
        self.say(f'goal {np.round(st.goal.X_WO, 3).tolist()}')
        self._leave(Stage.GOAL, t0)

    def plan_once(self) -> bool:
        """Observe and decide: True when the goal is reached or no plan exists (then the
        reason is kept in ``state.no_plan`` and the task goes on to the grasp)."""
        t0 = self._enter(Stage.PLAN)
        st = self.state
        assert st.belief is not None and st.goal is not None
        X = self.observe()
        try:
            st.step = self.decider.step(st.belief, X, st.goal, st.planned)
        except PlanningError as exc:
            st.no_plan = str(exc)
            self.say(f'no plan: {exc}')
            self._leave(Stage.PLAN, t0)
            return True
        self._leave(Stage.PLAN, t0)
        if st.step.push is not None:
            st.simulations += st.step.push.simulations
        if st.step.done:
            st.reached = True
            return True
        return False

    def push_once(self) -> None:
        """Execute the planned push; a failed one is re-planned up to ``push_retries``."""
        st = self.state
        for attempt in range(self.settings.push_retries + 1):
            step = st.step
            assert step is not None and step.push is not None and st.X_WO is not None
            t0 = self._enter(Stage.PUSH)
            p = step.push
            d_W = rotation(float(st.X_WO[2])) @ p.primitive.d_O
            st.trace['pushes'].append(
                {
                    'X_WO': st.X_WO.tolist(),
                    'p_WF0': p.p_WF0.tolist(),
                    'direction_W': d_W.tolist(),
                    'travel': p.primitive.travel,
                    'target': None if step.target is None else step.target.tolist(),
                    'path': None if step.path is None else step.path.waypoints.tolist(),
                }
            )
            self.say(
                f'push {st.planned + 1}: {p.primitive.travel * 100:.1f} cm, expected '
                f'{p.expected_distance * 100:.1f} cm from the waypoint'
            )
            try:
                self._push(p.primitive)
            except PushFailed as exc:
                self._leave(Stage.PUSH, t0)
                if exc.fell:
                    raise TaskFailure(Outcome.FELL, Stage.PUSH, str(exc)) from None
                if attempt == self.settings.push_retries:
                    raise TaskFailure(Outcome.PUSH_FAILED, Stage.PUSH, str(exc)) from None
                self.say(f'push failed ({exc}); planning again')
                if self.plan_once():
                    return
                continue
            st.planned += 1
            self._leave(Stage.PUSH, t0)
            return

    def final_grasp(self) -> None:
        t0 = self._enter(Stage.GRASP)
        st = self.state
        assert st.belief is not None
        X = self.observe()
        st.trace['X_final'] = X.tolist()
        st.grasp = self.decider.grasp_at(st.belief, X)
        if st.grasp is None:
            raise TaskFailure(Outcome.NO_GRASP, Stage.GRASP, 'no grasp at the final pose')
        st.trace['grasp'] = st.grasp.to_dict()
        self.say(f'grasping at {np.round(st.grasp.p_WE, 3).tolist()}')
        try:
            st.report = self.world.grasp(st.grasp)
        except WorldError as exc:
            raise TaskFailure(Outcome.GRASP_FAILED, Stage.GRASP, str(exc)) from None
        self._leave(Stage.GRASP, t0)
        if not st.report.success:
            if st.report.fell:
                raise TaskFailure(Outcome.FELL, Stage.GRASP, 'the object fell from the grasp')
            if st.no_plan:
                raise TaskFailure(Outcome.NO_PLAN, Stage.PLAN, st.no_plan)
            if not st.reached:
                raise TaskFailure(
                    Outcome.BUDGET_SPENT, Stage.PLAN, 'push budget spent before the goal'
                )
            raise TaskFailure(
                Outcome.GRASP_FAILED, Stage.GRASP, 'the grasp did not lift the object'
            )

    # -- the whole task --------------------------------------------------------------------
    def run(self) -> TaskResult:
        """Run every stage in order; never raises for a failed task (see the outcome)."""
        t_start = time.perf_counter()
        st = self.state
        outcome, stage, reason = Outcome.SUCCEEDED, Stage.DONE, ''
        try:
            self.perceive()
            for _ in range(self.settings.exploration_pushes):
                self.explore_once()
            self.identify()
            self.choose_goal()
            while st.planned < self.settings.push_budget:
                if self.plan_once():
                    break
                self.push_once()
            self.final_grasp()
            st.stage = Stage.DONE
        except TaskFailure as f:
            outcome, stage, reason = f.outcome, f.stage, f.reason
        except Aborted as exc:
            outcome, stage, reason = Outcome.ABORTED, st.stage, str(exc)
        return TaskResult(
            outcome,
            stage,
            reason,
            len(st.explored),
            st.planned,
            st.reached,
            dict(st.stage_s),
            time.perf_counter() - t_start,
            st,
        )
