"""The pre-grasp task as one loop over a world and a decider:

    perceive -> explore x N -> identify -> goal -> (observe, plan, push)* -> grasp

(with one more exploratory push before identifying when the pushes so far touched the object
from too few directions to tell the fingertip's contact offset: :meth:`Task.tell_offset`)

(while the belief is too uncertain for any goal, the goal stage first chooses a staging pose
at the edge, which the closed loop pushes the object to, identifying again after each push
and looking for the goal under each new belief (pushes with part of the object past the edge
can tell where its weight lies; :func:`slide_core.planning.select_staging`); when there is no
staging pose, it explores once more and identifies again, up to
``TaskSettings.extra_exploration`` times, the staging pose counted as one; the closed loop
chooses a goal anew from where the object is when nothing leads to its goal from there, up
to ``TaskSettings.regoals`` times, and, with ``TaskSettings.relearn_every``, identifies
again from the pushes so far; when the belief is then too uncertain for any goal, it
explores once more and identifies again from every push, within the same
``extra_exploration``)

Each stage is a method of :class:`Task` that reads and updates its :class:`TaskState`;
:meth:`Task.run` calls them in order, and so do the leaves of the ROS behaviour node, so
the order, the budget, the retries and the stop conditions are written once, here.
Failures end the task with a typed :class:`Outcome` naming the stage and the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
import math
import time
from typing import Any

import numpy as np

from slide_core.errors import NoSolutionError
from slide_core.geometry import FloatArray, rotation, se2_distance
from slide_core.identification import (
    IdentificationError,
    PushSamples,
    contact_offset,
    third_side,
)
from slide_core.model import Belief, Primitive
from slide_core.planning import Goal, PlanningError, Step, UncertainBeliefError
from slide_core.task.state import (
    Outcome,
    Stage,
    TaskResult,
    TaskSettings,
    TaskState,
)
from slide_core.task.world import (
    Aborted,
    Decider,
    ObjectLost,
    PushFailed,
    World,
    WorldError,
)

STALL_PROGRESS_M = 0.001
"""A push that brings the object less than this [m, SE(2) distance] nearer the goal than
it has been makes no progress (perception's noise is a fraction of it)."""

REST_TOLERANCE_M = 0.003
REST_TOLERANCE_RAD = 0.02
"""Two observations of an object at rest agree to within these (perception's noise is
below a millimetre and a few tenths of a degree)."""


def at_rest(X_a: FloatArray, X_b: FloatArray) -> bool:
    """Whether two observed poses (3,) are the same within perception's noise."""
    d = np.asarray(X_b, dtype=float) - np.asarray(X_a, dtype=float)
    yaw = float(np.arctan2(np.sin(d[2]), np.cos(d[2])))
    return bool(np.hypot(d[0], d[1]) <= REST_TOLERANCE_M and abs(yaw) <= REST_TOLERANCE_RAD)


def push_trace(
    X_WO: FloatArray,
    step: Step,
    goal: FloatArray | None = None,
    index: int | None = None,
    belief_pushes: int | None = None,
    staging: bool = False,
) -> dict[str, Any]:
    """A planned push as the trace keeps it (the picture draws it, the behaviour's result
    lists it): the pose it was planned from, the fingertip's start and direction in the
    table frame, the travel [m], the waypoint aimed at and the path's waypoints; and what
    it was decided with: the goal steered to, the index its random stream is drawn for and
    the ``belief_pushes`` of the belief (``TaskState.beliefs``), and whether the goal was a
    staging pose (decided under :func:`slide_core.planning.staging_config`)."""
    assert step.push is not None
    p = step.push
    return {
        'X_WO': np.asarray(X_WO, dtype=float).tolist(),
        'p_WF0': p.p_WF0.tolist(),
        'direction_W': (rotation(float(X_WO[2])) @ p.primitive.d_O).tolist(),
        'travel': p.primitive.travel,
        'target': None if step.target is None else step.target.tolist(),
        'path': None if step.path is None else step.path.waypoints.tolist(),
        'goal': None if goal is None else np.asarray(goal, dtype=float).tolist(),
        'index': index,
        'belief_pushes': belief_pushes,
        'staging': staging,
    }


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
        self.started = time.perf_counter()
        self._open: tuple[Stage, float] | None = None  # the stage entered and not left

    # -- helpers ---------------------------------------------------------------------------
    def _enter(self, stage: Stage) -> float:
        if self._should_stop():
            raise Aborted(f'aborted before {stage.value}')
        self.state.stage = stage
        t0 = time.perf_counter()
        self._open = (stage, t0)
        return t0

    def _leave(self, stage: Stage, t0: float) -> None:
        key = stage.value
        self.state.stage_s[key] = self.state.stage_s.get(key, 0.0) + time.perf_counter() - t0
        self._open = None

    def stage_seconds(self) -> dict[str, float]:
        """Seconds spent per stage so far, the time in the stage running now included."""
        seconds = dict(self.state.stage_s)
        if self._open is not None:
            stage, t0 = self._open
            seconds[stage.value] = seconds.get(stage.value, 0.0) + time.perf_counter() - t0
        return seconds

    def say(self, message: str) -> None:
        self._events(self.state.stage, message)

    def observe(self) -> FloatArray:
        """The object's pose now, looked for again ``observe_retries`` times when lost."""
        s = self.settings
        for attempt in range(s.observe_retries + 1):
            try:
                obs = self.world.observe()
            except WorldError as exc:  # ObjectLost, or the sensor's own fault
                if not isinstance(exc, ObjectLost) and not exc.retryable:
                    raise TaskFailure(Outcome.ERROR, self.state.stage, str(exc)) from None
                if exc.fell or attempt == s.observe_retries:
                    outcome = Outcome.FELL if exc.fell else Outcome.OBJECT_LOST
                    raise TaskFailure(outcome, self.state.stage, str(exc)) from None
                self.say(f'object not seen ({exc}); looking again')
                self._sleep(s.retry_wait_s)
                continue
            if self.state.grid is None:
                self.state.grid = obs.grid
            X = self._calibrated_pose(obs.X_WO)
            self.state.X_WO = X
            return X
        raise AssertionError('unreachable')

    def _push(self, primitive: Primitive) -> PushSamples:
        """Execute a push at the last observed pose; keep what was measured."""
        assert self.state.X_WO is not None
        samples = self._calibrated(self.world.push(primitive, self.state.X_WO))
        self.state.samples.append(samples)
        return samples

    def _calibrated_pose(self, X_WO: FloatArray) -> FloatArray:
        """An observed pose with the contact offset taken off so far
        (:attr:`TaskState.p_offset_W`) added."""
        dx, dy = self.state.p_offset_W
        if dx == 0.0 and dy == 0.0:
            return X_WO
        return np.asarray(X_WO + np.array([dx, dy, 0.0]), dtype=float)

    def _calibrated(
        self, samples: PushSamples, p_offset_W: FloatArray | None = None
    ) -> PushSamples:
        """A push's samples with ``p_offset_W`` (default: the one taken off so far) added to
        its object poses."""
        dx, dy = self.state.p_offset_W if p_offset_W is None else p_offset_W
        if dx == 0.0 and dy == 0.0:
            return samples
        return replace(samples, X_WO=samples.X_WO + np.array([dx, dy, 0.0]))

    # -- stages ----------------------------------------------------------------------------
    def perceive(self) -> None:
        """The object's first look; an object no goal can be found for whatever its maps
        ends the task here, before any push (it failed only after exploring and
        identifying)."""
        t0 = self._enter(Stage.PERCEIVE)
        X = self.observe()
        self.state.trace['X_initial'] = X.tolist()
        assert self.state.grid is not None
        refusal = self.decider.refusal(self.state.grid)
        if refusal:
            raise TaskFailure(Outcome.NO_GOAL, Stage.PERCEIVE, f'no goal: {refusal}')
        self._leave(Stage.PERCEIVE, t0)

    def explore_once(self, side_W: FloatArray | None = None) -> None:
        """One exploratory push: chosen, executed, recorded. With ``side_W`` (2,), the push
        into the side of the object facing it (table frame), when there is one
        (:meth:`tell_offset`: none is said, and nothing pushed)."""
        t0 = self._enter(Stage.EXPLORE)
        st = self.state
        assert st.grid is not None and st.X_WO is not None
        usable = self._explored()
        fresh = st.belief is not None and st.belief_pushes == len(usable)
        # In the closed loop the belief is the freshest already (from every push so far);
        # a push into a given side needs none.
        interim = self.settings.interim_beliefs and side_W is None
        if interim and usable and not fresh and st.goal is None:
            # The push the models identified so far disagree most about (paper 2).
            t_identify = time.perf_counter()
            try:
                st.belief = self.decider.identify(st.grid, usable)
                st.belief_pushes = len(usable)
                self.say(f'interim belief from {len(usable)} push(es)')
            except (IdentificationError, NoSolutionError) as exc:
                st.belief = None
                self.say(f'no interim belief ({exc}); this push is drawn at random')
            finally:  # (told apart from the pushes: it was all 'exploring')
                st.interim_identify_s += time.perf_counter() - t_identify
        for attempt in range(self.settings.push_retries + 1):
            # Looked at again: the object may have been moved while the belief so far was
            # identified (a hand), and the push chosen, and checked, where it had been.
            self.observe()
            assert st.grid is not None and st.X_WO is not None
            try:
                primitive = self.decider.exploration(
                    st.grid, st.X_WO, st.belief, st.explored, attempt, side_W
                )
            except NoSolutionError as exc:
                if side_W is None:
                    raise TaskFailure(Outcome.PUSH_FAILED, Stage.EXPLORE, str(exc)) from None
                self.say(f'warning: no push into that side ({exc})')
                self._leave(Stage.EXPLORE, t0)
                return
            n = len(st.explored) + 1
            self.say(f'exploratory push {n}: {primitive.travel * 100:.1f} cm')
            try:
                samples = self._calibrated(self.world.push(primitive, st.X_WO))
                # What identification cannot read (a gap in the forces, too few poses) is
                # a failed push too: a loaded machine's F/T stream paused 0.32 s once.
                try:
                    data = samples.to_data(st.grid, len(st.pushes))
                except IdentificationError as exc:
                    raise PushFailed(f'unusable push: {exc}', retryable=True) from None
            except WorldError as exc:
                self._push_failed(exc, Stage.EXPLORE, attempt)
                self.say(f'exploratory push failed ({exc}); choosing one again from here')
                continue
            st.explored_at.append(len(st.samples))
            st.samples.append(samples)
            st.pushes.append(data)
            break
        st.explored.append(primitive)
        st.trace.setdefault('X_explore', []).append(self.observe().tolist())
        self._leave(Stage.EXPLORE, t0)

    def tell_offset(self) -> None:
        """With ``contact_offset`` 'auto', one more exploratory push when the pushes so far
        touched the object from too few directions to tell the fingertip's offset from it
        (into parallel sides alone, or one side: the offset along those sides, which moves
        every force's point, is not seen), or measured one above WARN_OFFSET_M that they
        cannot tell from an outline drawn wide, which cannot be taken off
        (:meth:`ContactOffset.kept`): into the side that tells it best
        (:func:`slide_core.identification.third_side`), after which the check that
        :meth:`identify` makes tells the offset and takes it off when it is above
        WARN_OFFSET_M. Nothing otherwise (nor when no such side can be pushed)."""
        st, s = self.state, self.settings
        if s.contact_offset != 'auto' or s.fingertip_radius <= 0.0 or st.grid is None:
            return
        try:
            found = contact_offset(st.grid, st.pushes, s.fingertip_radius)
        except IdentificationError as exc:
            why = f'the offset is not told ({exc})'
        else:
            if not (found.problem() and found.kept()):
                return
            why = (
                f'{found.describe()}, from too few push directions to tell it from an '
                'outline drawn wide'
            )
        try:
            side_W = third_side(st.grid, st.pushes, s.fingertip_radius)
        except IdentificationError as exc:
            self.say(f'no side to tell the offset from: {exc}')
            return
        st.trace['offset_side_W'] = [round(float(v), 6) for v in side_W]
        self.say(
            f'{why}: one more exploratory push, into the side facing ({side_W[0]:+.2f}, '
            f'{side_W[1]:+.2f}), to tell it'
        )
        self.explore_once(side_W)

    def _explored(self) -> list[PushSamples]:
        """What the exploratory pushes measured (over the table's edge too: identification
        carries only the cells the table holds on each step)."""
        st = self.state
        return [st.samples[k] for k in st.explored_at]

    def identify(self) -> None:
        t0 = self._enter(Stage.IDENTIFY)
        st = self.state
        assert st.grid is not None
        if not self._explored():
            raise TaskFailure(
                Outcome.IDENTIFICATION_FAILED,
                Stage.IDENTIFY,
                'no exploratory push was made: nothing to identify from',
            )
        self._check_contacts()
        usable = self._explored()
        try:
            st.belief = self.decider.identify(st.grid, usable)
        except (IdentificationError, NoSolutionError) as exc:
            raise TaskFailure(Outcome.IDENTIFICATION_FAILED, Stage.IDENTIFY, str(exc)) from None
        st.belief_pushes = len(usable)
        self.say(f'identified {st.belief.K} model(s)')
        self._leave(Stage.IDENTIFY, t0)

    def _check_contacts(self) -> None:
        """The fingertip's recorded offset from the object on the exploratory pushes
        (``TaskSettings.fingertip_radius``): kept in the trace, said, and warned of above
        WARN_OFFSET_M; nothing when the pushes touch from too few directions to tell it.
        With ``contact_offset`` 'auto', one above WARN_OFFSET_M is taken off: added to every
        pose observed so far and from now on (:attr:`TaskState.p_offset_W`), unless the
        pushes touched from too few directions (:meth:`ContactOffset.kept` says why)."""
        st, radius = self.state, self.settings.fingertip_radius
        if radius <= 0.0 or st.grid is None or not st.pushes:
            return
        try:
            found = contact_offset(st.grid, st.pushes, radius)
        except IdentificationError:
            return
        # (in the camera's own poses: what was taken off before included)
        total = st.p_offset_W + found.p_offset_W
        st.trace['contact_offset_m'] = [round(float(v), 6) for v in total]
        problem = found.problem()
        if not problem:
            self.say(found.describe())
            return
        if self.settings.contact_offset != 'auto':
            self.say(f'warning: {problem}')
            return
        if found.kept():
            self.say(f'warning: {found.left_on()}')
            return
        delta = found.p_offset_W
        st.p_offset_W = st.p_offset_W + delta
        st.samples = [self._calibrated(s, delta) for s in st.samples]
        st.pushes = [st.samples[k].to_data(st.grid, i) for i, k in enumerate(st.explored_at)]
        if st.X_WO is not None:
            st.X_WO = st.X_WO + np.array([*delta, 0.0])
        st.trace['contact_offset_taken_off_m'] = [round(float(v), 6) for v in st.p_offset_W]
        x, y = (1e3 * st.p_offset_W).tolist()
        self.say(
            f'warning: {problem}; taken off every pose from here on (the camera taken as off '
            f'by ({-x:+.2f}, {-y:+.2f}) mm, the arm as right)'
        )

    def choose_goal(self) -> None:
        """The goal at the edge; while the belief is too uncertain for any, first a staging
        pose at the edge (:meth:`Decider.staging`: the closed loop pushes the object there
        and looks for the goal again under each belief on the way), else one more
        exploratory push and identification at a time; ``extra_exploration`` of these at
        most, the staging pose counting as one."""
        st = self.state
        while True:
            t0 = self._enter(Stage.GOAL)
            assert st.belief is not None
            X = self.observe()
            st.trace['X_start'] = X.tolist()
            try:
                st.goal = self.decider.goal(st.belief, X)
                st.goal_belief = st.belief_pushes
                break
            except UncertainBeliefError as exc:
                extra = st.extra_explored
                if extra >= self.settings.extra_exploration:
                    self._leave(Stage.GOAL, t0)
                    after = f' (after {extra} more exploratory push(es))' if extra > 0 else ''
                    raise TaskFailure(Outcome.NO_GOAL, Stage.GOAL, f'{exc}{after}') from None
                st.extra_explored += 1
                if not st.staged:
                    staging = self._staging(st.belief, X, exc)
                    if staging is not None:
                        st.goal = staging
                        st.goal_belief = st.goal_tried = st.belief_pushes
                        break
                self._leave(Stage.GOAL, t0)
                self.say(f'{exc}: exploring once more')
                self.explore_once()
                self.identify()
            except PlanningError as exc:
                raise TaskFailure(Outcome.NO_GOAL, Stage.GOAL, str(exc)) from None
        st.trace['goal'] = st.goal.X_WO.tolist()
        st.trace['goal_yaw_free'] = st.goal.yaw_free
        st.trace['goal_staging'] = st.goal.staging
        if not st.goal.staging:
            free = ' (its yaw free: the camera cannot see this outline turn)' * st.goal.yaw_free
            self.say(f'goal {np.round(st.goal.X_WO, 3).tolist()}{free}')
        self._leave(Stage.GOAL, t0)

    def _staging(self, belief: Belief, X: FloatArray, uncertain: PlanningError) -> Goal | None:
        """A staging pose for the object at X (:meth:`Decider.staging`), counted in
        ``state.staged``, or None when there is none (said, with why)."""
        try:
            staging = self.decider.staging(belief, X)
        except PlanningError as exc:
            self.say(f'{uncertain}; no staging pose at the edge either ({exc})')
            return None
        self.state.staged += 1
        self.say(
            f'{uncertain}: pushing the object to a staging pose at the edge, '
            f'{np.round(staging.X_WO, 3).tolist()} ({staging.overhang * 100:.1f} cm out, where '
            'every model stays, bar staging_epsilon of the belief), to learn where its '
            'weight lies from pushes there'
        )
        return staging

    def _set_goal(self, goal: Goal) -> None:
        """Steer to ``goal`` from now on, chosen under the belief the task has now."""
        st = self.state
        st.goal, st.goal_belief = goal, st.belief_pushes
        st.closest, st.stalled = math.inf, 0
        st.trace.setdefault('goals', [st.trace.get('goal')]).append(goal.X_WO.tolist())
        st.trace['goal'] = goal.X_WO.tolist()
        st.trace['goal_yaw_free'] = goal.yaw_free
        st.trace['goal_staging'] = goal.staging

    def _goal_after_staging(self, X: FloatArray, arrived: bool) -> None:
        """Under a staging pose, with the object observed at X: the goal looked for again
        when the belief was identified again since the last look, or the staging pose is
        reached (``arrived``); a goal found replaces the staging pose. Arrived with the
        belief still too uncertain for a goal (or with none for another reason), the task
        ends as ``no_goal``: the pushes at the edge told what they could, and no
        exploratory push is made from there (they keep to the table's middle)."""
        st = self.state
        assert st.belief is not None
        if arrived:
            self.relearn()  # (without relearn_every, the pushes there were not identified)
        elif st.goal_tried == st.belief_pushes:
            return
        t0 = self._enter(Stage.GOAL)
        st.goal_tried = st.belief_pushes
        try:
            goal = self.decider.goal(st.belief, X)
        except PlanningError as exc:
            if arrived:
                raise TaskFailure(
                    Outcome.NO_GOAL,
                    Stage.GOAL,
                    f'{exc} (at the staging pose, with the belief from {st.belief_pushes} pushes)',
                ) from None
            self.say(f'still {exc}: on to the staging pose')
            self._leave(Stage.GOAL, t0)
            return
        self._set_goal(goal)
        where = 'at the staging pose' if arrived else 'on the way to the staging pose'
        self.say(
            f'goal {np.round(goal.X_WO, 3).tolist()}, under the belief from '
            f'{st.belief_pushes} pushes ({where})'
        )
        self._leave(Stage.GOAL, t0)

    def plan_once(self) -> bool:
        """Observe and decide: True when the goal is reached, no plan exists (none to the
        goal, nor to a goal chosen anew from here, ``regoals`` times at most), or
        ``stall_pushes`` pushes in a row made no progress (then the reason is kept in
        ``state.no_plan`` and the task goes on to the grasp). Under a staging pose, the goal
        is looked for first when the belief is new (:meth:`_goal_after_staging`); no plan
        to the staging pose, or none to a goal or staging pose chosen anew, ends the task as
        ``no_goal``, and so does arriving there, or stalling, under a belief still too
        uncertain for a goal: no grasp is tried where no goal could be trusted."""
        t0 = self._enter(Stage.PLAN)
        st = self.state
        assert st.belief is not None and st.goal is not None
        X = self.observe()
        if st.goal.staging:
            self._leave(Stage.PLAN, t0)
            self._goal_after_staging(X, arrived=False)
            t0 = self._enter(Stage.PLAN)
        while True:
            # A round object's goal yaw is free: steer to its position at the tracked yaw.
            goal = replace(st.goal, X_WO=st.goal.toward(X))
            try:
                st.step = self.decider.step(st.belief, X, goal, st.planned)
                break
            except PlanningError as exc:
                verdict = self._new_goal(X, exc)
                if verdict == 'explore':
                    # Too uncertain for any goal from here (a belief identified again from
                    # the planned pushes): the loop gave up, and 'no grasp' was said with
                    # the object 30 cm from the edge.
                    self._leave(Stage.PLAN, t0)
                    st.extra_explored += 1
                    self.explore_once()
                    self.relearn()
                    t0 = self._enter(Stage.PLAN)
                    X = self.observe()
                    continue
                if verdict == 'goal':
                    continue
                after = f' (after {st.regoals} new goal(s))' if st.regoals else ''
                if st.goal.staging:
                    raise TaskFailure(
                        Outcome.NO_GOAL,
                        Stage.PLAN,
                        f'no plan to the staging pose: {exc}{after}{verdict}',
                    ) from None
                st.no_plan = f'{exc}{after}{verdict}'
                self.say(f'no plan: {st.no_plan}')
                self._leave(Stage.PLAN, t0)
                return True
        self._leave(Stage.PLAN, t0)
        if st.step.push is not None:
            st.simulations += st.step.push.simulations
        if st.step.done and st.goal.staging:
            self.say('at the staging pose')
            self._goal_after_staging(X, arrived=True)  # a goal, or the task ends
            return self.plan_once()
        if st.step.done:
            st.reached = True
            st.X_reached = X
            return True
        # Pushes that bring the object no nearer the goal than it has been: the loop circles
        # the goal (its shortest push turns the object past what the grasp tolerates, or the
        # model is off here), and more of them would only spend the push budget.
        # Only a push made since the last look counts (a failed push re-planned does not).
        d = float(se2_distance(X, goal.X_WO, st.belief.radius()))
        if d < st.closest - STALL_PROGRESS_M:
            st.closest, st.stalled = d, 0
        elif st.planned > st.progress_at:
            st.stalled += 1
        st.progress_at = st.planned
        if st.stalled >= self.settings.stall_pushes and st.goal.staging:
            self.say(f'{st.stalled} pushes in a row brought it no nearer the staging pose')
            self._goal_after_staging(X, arrived=True)  # as near as it gets: as if there
            return self.plan_once()
        if st.stalled >= self.settings.stall_pushes:
            st.no_plan = (
                f'no progress: {st.stalled} pushes in a row brought the object no nearer the '
                f'goal than {st.closest * 1000:.1f} mm'
            )
            self.say(st.no_plan)
            return True
        return False

    def _new_goal(self, X: FloatArray, refusal: PlanningError) -> str:
        """After no path or safe push to the goal from the observed pose X: a goal chosen
        anew from X, ``regoals`` times at most. The pushes so far can have left the object
        where the old goal is out of reach (turned at the edge, where every push towards it
        risks a fall), while from here another is not. 'goal' when there is a new goal (or
        staging pose) to plan for; 'explore' when the belief is too uncertain for any goal
        from here, there is no staging pose, and ``extra_exploration`` allows one more
        exploratory push; else why there is none, to
        add to the loop's reason ('' when the budget is spent or the goal search chose the
        old goal again, which would be refused again). A goal chosen under an older belief
        (``relearn_every``) is replaced without counting against ``regoals``: the belief
        that refuses it is not the one that chose it. Under a staging pose, a staging pose
        is chosen anew, as a goal is; and a belief too uncertain for a goal from here gets a
        staging pose (once an episode) before any more exploring."""
        st = self.state
        assert st.belief is not None and st.goal is not None
        stale = st.goal_belief != st.belief_pushes
        if not stale:
            if st.regoals >= self.settings.regoals:
                return ''
            st.regoals += 1
        older = ', chosen under an older belief' * stale
        if st.goal.staging:
            # (The goal itself was looked for under this belief as the step began.)
            self.say(f'no plan to the staging pose ({refusal}{older}): choosing one from here')
            try:
                goal = self.decider.staging(st.belief, X)
            except PlanningError as exc:
                self.say(f'no staging pose from here: {exc}')
                return f'; no staging pose from here: {exc}'
        else:
            self.say(f'no plan to the goal ({refusal}{older}): choosing a goal from here')
            try:
                goal = self.decider.goal(st.belief, X)
            except UncertainBeliefError as exc:
                if st.extra_explored >= self.settings.extra_exploration:
                    self.say(f'no goal from here: {exc}')
                    extra = st.extra_explored
                    after = f' after {extra} more exploratory push(es)' if extra else ''
                    return f'; no goal from here{after}: {exc}'
                staging = None if st.staged else self._staging(st.belief, X, exc)
                if staging is None:
                    self.say(f'no goal from here: {exc}: exploring once more')
                    return 'explore'
                st.extra_explored += 1
                st.goal_tried = st.belief_pushes
                goal = staging
            except PlanningError as exc:
                self.say(f'no goal from here: {exc}')
                return f'; no goal from here: {exc}'
        if not stale and at_rest(goal.X_WO, st.goal.X_WO):
            # The belief that refused the old goal chose it again. (A stale goal's
            # neighbour is not: the new belief accepted it, a millimetre further in.)
            self.say('the goal from here is the same goal')
            return ''
        self._set_goal(goal)
        what = 'staging pose' if goal.staging else 'goal'
        self.say(f'new {what} {np.round(goal.X_WO, 3).tolist()}')
        return 'goal'

    def push_once(self) -> bool:
        """Execute the planned push; a failed one is re-planned up to ``push_retries``.
        True when a re-plan found the loop over (at the goal, or no plan from here)."""
        st = self.state
        for attempt in range(self.settings.push_retries + 1):
            step = st.step
            assert step is not None and step.push is not None and st.X_WO is not None
            t0 = self._enter(Stage.PUSH)
            p = step.push
            # What plan_once decided it with: the goal steered to from this pose, this
            # index's random stream and this belief (kept, by its pushes).
            if st.belief is not None:
                st.beliefs.setdefault(st.belief_pushes, st.belief)
            goal = None if st.goal is None else st.goal.toward(st.X_WO)
            staging = st.goal is not None and st.goal.staging
            trace = push_trace(st.X_WO, step, goal, st.planned, st.belief_pushes, staging)
            st.trace['pushes'].append(trace)
            self.say(
                f'push {st.planned + 1}: {p.primitive.travel * 100:.1f} cm, expected '
                f'{p.expected_distance * 100:.1f} cm from the waypoint'
            )
            X_planned = st.X_WO
            try:
                # Looked at again: an object moved while the push was planned (somebody's
                # hand) would get a push planned, and checked for falls, where it was.
                if not at_rest(X_planned, self.observe()):
                    raise PushFailed(
                        'the object moved since this push was planned at '
                        f'{np.round(X_planned, 3).tolist()}',
                        retryable=True,
                    )
                samples = self._push(p.primitive)
            except WorldError as exc:
                self._leave(Stage.PUSH, t0)
                trace['failed'] = str(exc)  # planned, not pushed: the trace says so
                self._push_failed(exc, Stage.PUSH, attempt)
                self.say(f'push failed ({exc}); planning again')
                if self.plan_once():
                    return True
                continue
            except Aborted as exc:
                trace['failed'] = str(exc)  # stopped on the way: not a push that was made
                raise
            st.planned += 1
            self._leave(Stage.PUSH, t0)
            every = self.settings.relearn_every
            if every:
                self._check_readable(samples)
                if st.planned % every == 0:
                    self.relearn()
            return False
        return False

    def _check_readable(self, samples: PushSamples) -> None:
        """Leave the planned push just made (the last of ``state.samples``) out of every
        identification when identification cannot read it (a gap in the forces): each
        relearning identifies again from every push so far, and one such push had every
        later one fail."""
        st = self.state
        assert st.grid is not None
        k = len(st.samples) - 1
        try:
            samples.to_data(st.grid, k)
        except IdentificationError as exc:
            st.unreadable.add(k)
            self.say(f'push {st.planned} is left out of identification: {exc}')

    def _push_failed(self, exc: WorldError, stage: Stage, attempt: int) -> None:
        """After a push (attempt ``attempt``, from 0) that the world failed with ``exc``:
        return when it may be tried again, else raise the TaskFailure that ends the task.
        An object the world no longer sees is looked for first (:meth:`observe`, which
        ends the task as ``object_lost`` when it stays unseen); a fault of the world that
        is no push's (a node gone) is an ``error``."""
        reason = str(exc)
        if exc.fell:
            raise TaskFailure(Outcome.FELL, stage, reason)
        if isinstance(exc, ObjectLost):
            self.say(f'object not seen before the push ({exc}); looking again')
            self.observe()
        elif not isinstance(exc, PushFailed) and not exc.retryable:
            raise TaskFailure(Outcome.ERROR, stage, reason)
        if not exc.retryable or attempt == self.settings.push_retries:
            raise TaskFailure(Outcome.PUSH_FAILED, stage, reason)

    def relearn(self) -> None:
        """The belief identified again from every readable push so far, those that had the
        object over the table's edge too (``TaskSettings.relearn_every``); the old one is
        kept when no push was added or the identification fails."""
        st = self.state
        assert st.grid is not None
        usable = [s for k, s in enumerate(st.samples) if k not in st.unreadable]
        if len(usable) <= st.belief_pushes:
            return
        t0 = self._enter(Stage.IDENTIFY)
        try:
            belief = self.decider.identify(st.grid, usable)
        except (IdentificationError, NoSolutionError) as exc:
            self.say(f'belief kept: identifying again from {len(usable)} pushes failed ({exc})')
        else:
            st.belief, st.belief_pushes = belief, len(usable)
            st.relearned += 1
            self.say(f'identified {belief.K} model(s) again, from {len(usable)} pushes')
        self._leave(Stage.IDENTIFY, t0)

    def final_grasp(self) -> None:
        """The grasp at the object's pose, and the lift. Not under a staging pose (the
        push budget spent on the way there): no goal was found, and no grasp is tried
        where the belief trusts none."""
        st = self.state
        if st.goal is not None and st.goal.staging:
            raise TaskFailure(
                Outcome.NO_GOAL,
                Stage.PLAN,
                f'the push budget of {self.settings.push_budget} was spent on the way to the '
                'staging pose, the belief still too uncertain for a goal',
            )
        t0 = self._enter(Stage.GRASP)
        assert st.belief is not None
        X = self.observe()
        st.trace['X_final'] = X.tolist()
        st.grasp = self.decider.grasp_at(st.belief, X)
        if st.grasp is None and st.X_reached is not None and at_rest(st.X_reached, X):
            # The goal was reached at X_reached and the object has not moved since: a
            # grasp that qualified only by a hair (a band exactly as wide as the pads)
            # must not be lost to the noise of a second look.
            st.grasp = self.decider.grasp_at(st.belief, st.X_reached)
        if st.grasp is None:
            why = f' ({st.no_plan})' if st.no_plan else ''
            if not st.no_plan and not st.reached:
                budget = self.settings.push_budget
                why = f' (the push budget of {budget} was spent before the goal)'
            raise TaskFailure(Outcome.NO_GRASP, Stage.GRASP, f'no grasp at the final pose{why}')
        st.trace['grasp'] = st.grasp.to_dict()
        self.say(f'grasping at {np.round(st.grasp.p_WE, 3).tolist()}')
        try:
            st.report = self.world.grasp(st.grasp)
        except WorldError as exc:
            outcome = Outcome.FELL if exc.fell else Outcome.GRASP_FAILED
            raise TaskFailure(outcome, Stage.GRASP, str(exc)) from None
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

    def closed_loop_step(self) -> bool:
        """One iteration of the closed loop (observe, plan, push); True when the loop is
        over: at the goal, no plan from here, or the push budget spent."""
        if self.state.planned >= self.settings.push_budget or self.plan_once():
            return True
        # (Ignored, a re-plan that found the loop over was made again, with its goal search.)
        return self.push_once() or self.state.planned >= self.settings.push_budget

    # -- the whole task --------------------------------------------------------------------
    def run(self) -> TaskResult:
        """Run every stage in order; never raises for a failed task (see the outcome)."""
        try:
            self.perceive()
            for _ in range(self.settings.exploration_pushes):
                self.explore_once()
            self.tell_offset()
            self.identify()
            self.choose_goal()
            while not self.closed_loop_step():
                pass
            self.final_grasp()
        except (TaskFailure, Aborted) as exc:
            return self.result(exc)
        except WorldError as exc:
            # A fault of the world no stage knows what to do with: the task ends with it,
            # and keeps its state (the pushes, the beliefs), as for any other outcome.
            return self.result(TaskFailure(Outcome.ERROR, self.state.stage, str(exc)))
        return self.result(None)

    def result(self, ended_by: TaskFailure | Aborted | None) -> TaskResult:
        """The task's result: succeeded when nothing ended it early, else the failure's (or
        the abort's) outcome, stage and reason. The time in the stage it stopped in counts
        (it was left out: an episode stopped after 5 minutes of exploring said 2)."""
        st = self.state
        if self._open is not None:
            self._leave(*self._open)
        if isinstance(ended_by, TaskFailure):
            outcome, stage, reason = ended_by.outcome, ended_by.stage, ended_by.reason
        elif isinstance(ended_by, Aborted):
            outcome, stage, reason = Outcome.ABORTED, st.stage, str(ended_by)
        else:
            outcome, stage, reason = Outcome.SUCCEEDED, Stage.DONE, ''
            st.stage = Stage.DONE
        return TaskResult(
            outcome,
            stage,
            reason,
            len(st.explored),
            st.planned,
            st.reached,
            dict(st.stage_s),
            time.perf_counter() - self.started,
            st,
        )
