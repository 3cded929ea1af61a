"""The task loop's goal, closed-loop and grasp stages: no goal without more pushes unless the
belief is too uncertain; no more pushes once they stop making progress; the grasp at the
pose the goal was reached at."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from slide_core.errors import NoSolutionError, SlideInputError
from slide_core.geometry import Grid, se2_distance
from slide_core.identification import IdentificationError, PushSamples, contact_offset
from slide_core.model import Belief, Primitive
from slide_core.planning import Goal, Grasp, PlanningError, Step, UncertainBeliefError
from slide_core.task import TaskSettings
from slide_core.task.loop import Task, TaskFailure, at_rest
from slide_core.task.state import Outcome, Stage
from slide_core.task.world import (
    GraspReport,
    ObjectLost,
    Observation,
    PushFailed,
    WorldError,
)

GRID = Grid.from_occupancy(np.ones((2, 4)), 0.02, 0.03)
X_REACHED = np.array([0.02, -0.1, 0.3])
GRASP = Grasp(np.array([-0.012, -0.1]), 0.015, 0.0, 0.04, 0.04)


class Arm:
    """The hardware: a camera that sees the object at ``pose`` now, a gripper that lifts."""

    def __init__(self, pose: np.ndarray) -> None:
        self.pose = pose
        self.grasped: list[Grasp] = []

    def observe(self) -> Observation:
        return Observation(GRID, self.pose, 0.0)

    def grasp(self, grasp: Grasp) -> GraspReport:
        self.grasped.append(grasp)
        return GraspReport(True, 0.1)


class BorderlineGrasps:
    """A planner whose only grasp qualifies at exactly the pose the goal was reached at."""

    def __init__(self) -> None:
        self.asked: list[np.ndarray] = []

    def grasp_at(self, belief: Belief, X_WO: np.ndarray) -> Grasp | None:
        self.asked.append(np.array(X_WO))
        return GRASP if np.array_equal(X_WO, X_REACHED) else None


def task(pose: np.ndarray) -> tuple[Task, Arm, BorderlineGrasps]:
    arm, planner = Arm(pose), BorderlineGrasps()
    t = Task(arm, planner, TaskSettings())  # type: ignore[arg-type]  # only grasp_at is asked
    st = t.state
    st.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    st.reached, st.X_reached = True, X_REACHED
    return t, arm, planner


def test_a_second_look_within_perception_noise_keeps_the_reached_grasp() -> None:
    t, arm, planner = task(X_REACHED + [0.0004, -0.0003, 0.002])
    t.final_grasp()
    assert arm.grasped == [GRASP] and len(planner.asked) == 2
    np.testing.assert_array_equal(planner.asked[1], X_REACHED)


def test_an_object_that_moved_since_is_not_grasped_where_it_was() -> None:
    t, arm, planner = task(X_REACHED + [0.01, 0.0, 0.0])
    with pytest.raises(TaskFailure) as failure:
        t.final_grasp()
    assert failure.value.outcome is Outcome.NO_GRASP and arm.grasped == []
    assert len(planner.asked) == 1


def test_at_rest_is_within_a_few_millimetres_and_about_a_degree() -> None:
    x = np.array([0.1, 0.2, np.pi - 0.005])
    assert at_rest(x, x + [0.002, 0.002, 0.0])
    assert at_rest(x, np.array([0.1, 0.2, -np.pi + 0.005]))  # across the wrap
    assert not at_rest(x, x + [0.003, 0.003, 0.0]) and not at_rest(x, x + [0.0, 0.0, 0.05])


class NoGoal:
    """A planner whose goal search fails with ``error``."""

    def __init__(self, error: PlanningError) -> None:
        self.error, self.asked = error, 0

    def goal(self, belief: Belief, X_WO: np.ndarray) -> Goal:
        self.asked += 1
        raise self.error


@pytest.mark.parametrize(
    ('error', 'extra'),
    [
        (PlanningError('no goal: outside its workspace'), 5),  # more pushes would not help
        (UncertainBeliefError('no goal: too uncertain'), 0),  # none allowed
    ],
)
def test_no_goal_ends_the_task_without_more_pushes(error: PlanningError, extra: int) -> None:
    arm, planner = Arm(X_REACHED), NoGoal(error)
    t = Task(arm, planner, TaskSettings(extra_exploration=extra))  # type: ignore[arg-type]
    t.state.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    with pytest.raises(TaskFailure) as failure:
        t.choose_goal()
    assert failure.value.outcome is Outcome.NO_GOAL and failure.value.reason == str(error)
    assert planner.asked == 1 and t.state.explored == []


def test_extra_exploration_is_0_to_20_pushes() -> None:
    assert TaskSettings(extra_exploration=0).extra_exploration == 0
    for bad in (-1, 21):
        with pytest.raises(SlideInputError, match='extra exploration must be 0 to 20'):
            TaskSettings(extra_exploration=bad)


class Circling:
    """A planner that always has one more push (never at the goal)."""

    def step(self, belief: Belief, X_WO: np.ndarray, goal: Goal, planned: int) -> Step:
        return Step(False, None, GOAL.X_WO, None, 0.0)


GOAL = Goal(X_REACHED, 1.0, 0.02, 0.05, 0.1, GRASP)


def closed_loop(
    poses: list[list[float]], stall: int, pushed: list[bool] | None = None
) -> tuple[Task, list[bool]]:
    """plan_once at each observed pose in turn, a push counted before each but the first
    (unless ``pushed`` says it failed)."""
    arm = Arm(X_REACHED)
    t = Task(arm, Circling(), TaskSettings(stall_pushes=stall))  # type: ignore[arg-type]
    t.state.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    t.state.goal = GOAL
    ended = []
    for i, p in enumerate(poses):
        if i > 0 and (pushed is None or pushed[i]):
            t.state.planned += 1
        arm.pose = X_REACHED + np.asarray(p)
        ended.append(t.plan_once())
    return t, ended


def test_pushes_that_bring_the_object_no_nearer_the_goal_end_the_loop() -> None:
    # Nearer by 10, 5 and 3 mm, then circling 3 mm out: the fourth push without progress
    # ends the pushing, and the grasp is tried where the object is.
    circling = [[0.0, 0.0, 0.0], [0.01, 0, 0], [0.005, 0, 0], [0.003, 0, 0]]
    circling += [[-0.003, 0, 0], [0.0025, 0, 0], [0.0, 0.003, 0], [-0.0028, 0, 0]]
    t, ended = closed_loop([[0.02, 0.0, 0.0], *circling[1:]], stall=4)
    assert ended == [False] * 7 + [True]
    assert t.state.no_plan.startswith('no progress: 4 pushes in a row')
    assert '3.0 mm' in t.state.no_plan
    # Steady progress of a few millimetres a push never stops the loop.
    _, ended = closed_loop([[0.02 - 0.0015 * k, 0.0, 0.0] for k in range(12)], stall=2)
    assert not any(ended)
    # A failed push planned again is not a push without progress.
    at_3mm = [[0.02, 0.0, 0.0], *[[0.003 * (-1) ** k, 0.0, 0.0] for k in range(5)]]
    _, ended = closed_loop(at_3mm, stall=4, pushed=[True, True, False, False, False, True])
    assert ended == [False] * 6


def test_stall_pushes_is_1_to_25() -> None:
    assert TaskSettings(stall_pushes=1).stall_pushes == 1
    for bad in (0, 26):
        with pytest.raises(SlideInputError, match='stall pushes must be 1 to 25'):
            TaskSettings(stall_pushes=bad)


class Recording:
    """A planner that always has one more push and keeps the goal each step was asked for."""

    def __init__(self) -> None:
        self.goals: list[np.ndarray] = []

    def step(self, belief: Belief, X_WO: np.ndarray, goal: Goal, planned: int) -> Step:
        self.goals.append(np.array(goal.X_WO))
        return Step(False, None, goal.X_WO, None, 0.0)


@pytest.mark.parametrize('yaw_free', [False, True])
def test_a_free_goal_yaw_is_not_steered_to_and_its_drift_is_no_progress(yaw_free: bool) -> None:
    # A round object's tracked yaw drifts half a turn while it is pushed 4 mm nearer the
    # goal each time, then it stays put while the yaw goes on drifting.
    arm, planner = Arm(X_REACHED), Recording()
    t = Task(arm, planner, TaskSettings(stall_pushes=2))  # type: ignore[arg-type]
    t.state.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    t.state.goal = Goal(X_REACHED, 1.0, 0.02, 0.05, 0.1, GRASP, yaw_free=yaw_free)
    ended = []
    for k in range(8):
        t.state.planned = k
        arm.pose = X_REACHED + [0.004 * max(5 - k, 0), 0.0, 0.5 * k]
        ended.append(t.plan_once())
    steered = np.array(planner.goals)
    np.testing.assert_array_equal(steered[:, :2], np.tile(X_REACHED[:2], (8, 1)))
    if yaw_free:
        # The goal's position at the tracked yaw; the loop ends at the second push after
        # the object stopped, whatever the yaw did.
        np.testing.assert_allclose(steered[:, 2], X_REACHED[2] + 0.5 * np.arange(8))
        assert ended == [False] * 7 + [True]
    else:
        # The goal's own yaw, and an object turning away from it is no nearer, however
        # near its position comes: the loop ends at the second push.
        np.testing.assert_array_equal(steered[:, 2], np.full(8, X_REACHED[2]))
        assert ended[:3] == [False, False, True]


class RefusesOneGoal:
    """A planner with no safe push towards ``refused`` (the object turned at the edge), a
    push towards any other goal, and ``goals`` to choose from where the object is."""

    def __init__(self, refused: np.ndarray, goals: list[Goal | PlanningError]) -> None:
        self.refused, self.goals = refused, list(goals)
        self.asked_goal: list[np.ndarray] = []
        self.steps: list[np.ndarray] = []

    def goal(self, belief: Belief, X_WO: np.ndarray) -> Goal:
        self.asked_goal.append(np.array(X_WO))
        found = self.goals.pop(0)
        if isinstance(found, PlanningError):
            raise found
        return found

    def step(self, belief: Belief, X_WO: np.ndarray, goal: Goal, planned: int) -> Step:
        self.steps.append(np.array(goal.X_WO))
        if np.allclose(goal.X_WO, self.refused):
            raise PlanningError('every candidate push risks a fall')
        return Step(False, None, goal.X_WO, None, 0.0)


def regoal_task(planner: RefusesOneGoal, regoals: int) -> Task:
    arm = Arm(X_REACHED + [0.03, 0.0, 0.5])
    t = Task(arm, planner, TaskSettings(regoals=regoals))  # type: ignore[arg-type]
    t.state.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    t.state.goal = GOAL
    t.state.trace['goal'] = GOAL.X_WO.tolist()
    t.state.closest, t.state.stalled = 0.01, 3
    return t


def test_no_plan_to_the_goal_chooses_a_goal_from_where_the_object_is() -> None:
    other = Goal(X_REACHED + [0.0, 0.05, 2.0], 1.0, 0.02, 0.05, 0.1, GRASP)
    planner = RefusesOneGoal(GOAL.X_WO, [other])
    t = regoal_task(planner, regoals=2)
    assert t.plan_once() is False  # planning goes on, towards the new goal
    np.testing.assert_array_equal(planner.asked_goal, [X_REACHED + [0.03, 0.0, 0.5]])
    np.testing.assert_array_equal(planner.steps, [GOAL.X_WO, other.X_WO])
    st = t.state
    assert st.goal is other and st.regoals == 1 and st.no_plan == ''
    # Progress is judged against the new goal from scratch.
    assert st.belief is not None
    d = se2_distance(X_REACHED + [0.03, 0.0, 0.5], other.X_WO, st.belief.radius())
    assert st.stalled == 0 and st.closest == pytest.approx(float(d))
    assert st.trace['goals'] == [GOAL.X_WO.tolist(), other.X_WO.tolist()]
    assert st.trace['goal'] == other.X_WO.tolist()


@pytest.mark.parametrize(
    ('regoals', 'goals', 'asked', 'why'),
    [
        (0, [], 0, 'every candidate push risks a fall'),  # none allowed: the old behaviour
        (2, [GOAL], 1, 'after 1 new goal(s)'),  # the same goal again would be refused again
        (2, [PlanningError('no goal: too short')], 1, 'after 1 new goal(s)'),
    ],
)
def test_no_plan_and_no_other_goal_ends_the_loop_for_the_grasp(
    regoals: int, goals: list[Goal | PlanningError], asked: int, why: str
) -> None:
    planner = RefusesOneGoal(GOAL.X_WO, goals)
    t = regoal_task(planner, regoals)
    assert t.plan_once() is True
    assert len(planner.asked_goal) == asked and t.state.goal is GOAL
    assert t.state.no_plan.startswith('every candidate push risks a fall')
    assert why in t.state.no_plan


def test_new_goals_are_limited_by_the_budget() -> None:
    # Each new goal is refused in turn: two are tried, then the loop ends.
    g1 = Goal(X_REACHED + [0.0, 0.05, 1.0], 1.0, 0.02, 0.05, 0.1, GRASP)
    g2 = Goal(X_REACHED + [0.0, -0.05, 2.0], 1.0, 0.02, 0.05, 0.1, GRASP)
    planner = RefusesOneGoal(GOAL.X_WO, [g1, g2])
    t = regoal_task(planner, regoals=2)
    assert t.plan_once() is False and t.state.goal is g1
    planner.refused = g1.X_WO
    assert t.plan_once() is False and t.state.goal is g2
    planner.refused = g2.X_WO
    assert t.plan_once() is True and len(planner.asked_goal) == 2
    assert 'after 2 new goal(s)' in t.state.no_plan


def test_regoals_is_0_to_10() -> None:
    assert TaskSettings(regoals=0).regoals == 0
    for bad in (-1, 11):
        with pytest.raises(SlideInputError, match='new goals must be 0 to 10'):
            TaskSettings(regoals=bad)


def two_poses(X_WO: np.ndarray) -> PushSamples:
    """What a push measured when the camera saw the object twice: too few poses to read."""
    t = np.array([0.0, 0.5])
    zero = np.zeros((2, 2))
    return PushSamples(t, np.tile(X_WO, (2, 1)), t, zero, t, zero, 0.0, 0.5)


def pushed_at(x: float) -> PushSamples:
    """What a push measured with the object resting at x [m] (GRID is 8 cm long in x)."""
    t = np.linspace(0.0, 1.0, 5)
    X = np.column_stack((np.full(5, x), np.full(5, -0.1), np.zeros(5)))
    return PushSamples(t, X, t, np.zeros((5, 2)), t, np.zeros((5, 2)), 0.0, 1.0)


class Learner:
    """Identification: a new belief from the pushes it is given, or a failure."""

    def __init__(self) -> None:
        self.given: list[int] = []
        self.fail = False

    def identify(self, grid: Grid, pushes: list[PushSamples]) -> Belief:
        self.given.append(len(pushes))
        if self.fail:
            raise IdentificationError('the pushes do not overlap')
        return Belief.create(grid, np.full(grid.n, 0.03), np.full(grid.n, 0.5))


class PushingArm(Arm):
    def __init__(self, pose: np.ndarray) -> None:
        super().__init__(pose)
        self.pushes = 0

    def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
        self.pushes += 1
        return pushed_at(0.1)


def test_relearning_identifies_from_every_push_and_keeps_a_failed_one() -> None:
    learner = Learner()
    t = Task(Arm(X_REACHED), learner, TaskSettings(relearn_every=1))  # type: ignore[arg-type]
    st = t.state
    first = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    st.grid, st.belief, st.belief_pushes = GRID, first, 2
    st.samples = [pushed_at(0.1), pushed_at(0.1), pushed_at(0.03), pushed_at(0.2)]
    t.relearn()
    # The push with the object over the edge is in: identification carries only the cells
    # the table holds (it tells the centre of mass from the friction map best).
    assert learner.given == [4] and st.belief is not first
    assert st.relearned == 1 and st.belief_pushes == 4
    t.relearn()  # nothing new since
    assert learner.given == [4]
    st.samples.append(pushed_at(0.2))
    learner.fail, kept = True, st.belief
    t.relearn()
    assert learner.given == [4, 5] and st.belief is kept and st.relearned == 1


@pytest.mark.parametrize(('every', 'after'), [(0, []), (1, [1, 2, 3, 4]), (2, [2, 4])])
def test_the_closed_loop_relearns_every_n_planned_pushes(every: int, after: list[int]) -> None:
    learner = Learner()
    arm = PushingArm(X_REACHED)
    t = Task(arm, learner, TaskSettings(relearn_every=every))  # type: ignore[arg-type]
    st = t.state
    st.grid, st.X_WO = GRID, X_REACHED
    st.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    primitive = SimpleNamespace(d_O=np.array([1.0, 0.0]), travel=0.03)
    push = SimpleNamespace(p_WF0=np.zeros(2), primitive=primitive, expected_distance=0.01)
    st.step = Step(False, None, None, push, 0.0)  # type: ignore[arg-type]
    relearned_after = []
    for _ in range(4):
        t.push_once()
        if learner.given and len(relearned_after) < len(learner.given):
            relearned_after.append(st.planned)
    assert arm.pushes == 4 and relearned_after == after
    assert learner.given == list(after)  # every push so far: all were on the table


def test_relearn_every_is_0_to_25() -> None:
    assert TaskSettings(relearn_every=25).relearn_every == 25
    for bad in (-1, 26):
        with pytest.raises(SlideInputError, match='relearn every must be 0'):
            TaskSettings(relearn_every=bad)


def test_a_goal_chosen_under_an_older_belief_is_replaced_without_counting() -> None:
    # Relearned since the goal was chosen: the new belief refuses it (balanced by a hair)
    # and accepts a goal a millimetre further in, which is no 'same goal' here.
    nearby = Goal(GOAL.X_WO + [0.001, 0.0, 0.0], 1.0, 0.02, 0.05, 0.1, GRASP)
    planner = RefusesOneGoal(GOAL.X_WO, [nearby])
    t = regoal_task(planner, regoals=0)
    t.state.goal_belief, t.state.belief_pushes = 5, 6
    assert t.plan_once() is False
    st = t.state
    assert st.goal is nearby and st.regoals == 0 and st.goal_belief == 6
    # Under the belief that chose it, the goal's refusal counts again (none allowed here).
    planner.refused = nearby.X_WO
    assert t.plan_once() is True and st.goal is nearby
    assert st.no_plan.startswith('every candidate push risks a fall')


def test_a_push_the_camera_saw_too_little_of_ends_the_task_with_a_reason() -> None:
    # Two object poses in a stroke: build_push raised a SlideInputError the loop did not
    # catch, and Task.run, which returns a result for a failed task, raised.
    from slide_core.model import load_object, load_workcell
    from slide_core.planning import planner_config
    from slide_core.task import LocalDecider, Observation, Outcome, Task, TaskSettings

    grid = load_object('box').grid
    X = np.array([0.3, 0.0, 0.0])

    class FlakyCamera:
        def observe(self) -> Observation:
            return Observation(grid, X.copy(), 0.0)

        def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
            return two_poses(X_WO)

        def grasp(self, grasp: object) -> object:
            raise AssertionError('no grasp after a failed push')

    workcell = load_workcell()
    decider = LocalDecider(planner_config(workcell), workcell)
    result = Task(FlakyCamera(), decider, TaskSettings(exploration_pushes=1)).run()
    assert result.outcome == Outcome.PUSH_FAILED
    assert 'unusable push' in result.reason and '2 object poses' in result.reason


# -- faults of the world ------------------------------------------------------------------
PRIMITIVE = Primitive.create([-0.04, 0.0], [1.0, 0.0], 0.02, 0.05)


class FaultyArm(PushingArm):
    """A world whose next pushes, looks or grasp fail with the errors queued for them."""

    def __init__(self, pose: np.ndarray, pushes: list[WorldError] | None = None) -> None:
        super().__init__(pose)
        self.push_faults = list(pushes or [])
        self.look_faults: list[WorldError] = []
        self.grasp_fault: WorldError | None = None
        self.tried = 0

    def observe(self) -> Observation:
        if self.look_faults:
            raise self.look_faults.pop(0)
        return super().observe()

    def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
        self.tried += 1
        if self.push_faults:
            raise self.push_faults.pop(0)
        return super().push(primitive, X_WO)

    def grasp(self, grasp: Grasp) -> GraspReport:
        if self.grasp_fault is not None:
            raise self.grasp_fault
        return super().grasp(grasp)


class Explorer:
    """Exploration: always the same push; the closed loop: always the same planned push."""

    def __init__(self) -> None:
        self.drawn = 0
        self.attempts: list[int] = []
        self.sides: list[np.ndarray | None] = []
        self.refuse: str | None = None
        plan = SimpleNamespace(
            primitive=PRIMITIVE, expected_distance=0.01, p_WF0=np.zeros(2), simulations=0
        )
        self.step_ = Step(False, None, GOAL.X_WO, plan, 0.0)  # type: ignore[arg-type]

    def exploration(
        self,
        grid: Grid,
        X_WO: np.ndarray,
        belief: object,
        done: object,
        attempt: int = 0,
        side_W: np.ndarray | None = None,
    ) -> Primitive:
        self.drawn += 1
        self.attempts.append(attempt)
        self.sides.append(side_W)
        return PRIMITIVE

    def refusal(self, grid: Grid) -> str | None:
        return self.refuse

    def step(self, belief: Belief, X_WO: np.ndarray, goal: Goal, planned: int) -> Step:
        return self.step_

    def identify(self, grid: Grid, pushes: list[PushSamples]) -> Belief:
        return Belief.create(grid, np.full(grid.n, 0.03), np.full(grid.n, 0.5))


def faulty(faults: list[WorldError], retries: int = 1) -> tuple[Task, FaultyArm, Explorer]:
    arm, decider = FaultyArm(X_REACHED, faults), Explorer()
    settings = TaskSettings(push_retries=retries, retry_wait_s=0.0)
    t = Task(arm, decider, settings)  # type: ignore[arg-type]
    t.state.grid, t.state.X_WO = GRID, X_REACHED
    t.state.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    t.state.goal, t.state.step = GOAL, decider.step_
    return t, arm, decider


def test_a_failed_exploratory_push_is_chosen_again_and_a_fall_ends_as_one() -> None:
    # Any failed exploratory push ended the task as push_failed, retryable or not, and one
    # the world said the object fell in too.
    t, arm, decider = faulty([PushFailed('executor: stale pose')])
    t.explore_once()
    assert (arm.tried, decider.drawn, len(t.state.explored), len(t.state.pushes)) == (2, 2, 1, 1)
    assert decider.attempts == [0, 1]  # the retry is drawn as one (not the same push again)
    for faults, outcome, reason in (
        ([PushFailed('gone', fell=True)], Outcome.FELL, 'gone'),
        ([PushFailed('stale'), PushFailed('stale again')], Outcome.PUSH_FAILED, 'stale again'),
        ([PushFailed('F/T limit', retryable=False)], Outcome.PUSH_FAILED, 'F/T limit'),
    ):
        t, arm, _ = faulty(faults)
        with pytest.raises(TaskFailure) as failure:
            t.explore_once()
        assert (failure.value.outcome, failure.value.reason) == (outcome, reason)
        assert t.state.explored == [] and t.state.samples == []


def test_an_exploratory_push_identification_cannot_read_is_made_again() -> None:
    # A 0.32 s pause in a loaded graph's F/T stream ended a whole episode as push_failed
    # ("unusable push"), and the unreadable push's samples stayed among the explored ones.
    class Unreadable(FaultyArm):
        def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
            self.tried += 1
            if self.tried == 1:
                return two_poses(X_WO)
            return pushed_at(0.1)

    t, _, decider = faulty([])
    arm = Unreadable(X_REACHED)
    t.world = arm
    t.explore_once()
    assert (arm.tried, decider.drawn, len(t.state.explored)) == (2, 2, 1)
    assert len(t.state.samples) == len(t.state.pushes) == 1
    assert t.state.samples[0].X_WO[0, 0] == pytest.approx(0.1)


def test_a_planned_push_that_could_not_start_is_planned_again_and_said_in_the_trace() -> None:
    # The graph's world looks at the object before it pushes, and an action server can
    # refuse a goal: both escaped Task.run, which says it never raises for a failed task.
    for fault in (
        ObjectLost('no object pose from perception for 2 s'),
        WorldError('push: the goal was refused', retryable=True),
    ):
        t, arm, _ = faulty([fault])
        t.push_once()
        assert (arm.tried, t.state.planned) == (2, 1)
        failed, done = t.state.trace['pushes']
        assert failed['failed'] == str(fault) and 'failed' not in done
    t, arm, _ = faulty([ObjectLost('the object fell', fell=True)])
    with pytest.raises(TaskFailure) as failure:
        t.push_once()
    assert failure.value.outcome is Outcome.FELL
    # A fault that is no push's and no use trying again (a node gone) is an error.
    t, arm, _ = faulty([WorldError('push: the executor is not running', retryable=False)])
    with pytest.raises(TaskFailure) as failure:
        t.push_once()
    assert failure.value.outcome is Outcome.ERROR and arm.tried == 1


def test_the_task_ends_with_an_outcome_and_its_state_whatever_the_world_raises() -> None:
    t, arm, _ = faulty([])
    arm.look_faults = [WorldError('camera driver restarted')]  # looked at again: found
    assert np.array_equal(t.observe(), X_REACHED)
    arm.look_faults = [WorldError('perception: its node is gone', retryable=False)]
    with pytest.raises(TaskFailure) as failure:
        t.observe()
    assert failure.value.outcome is Outcome.ERROR
    # A grasp the object fell out of is a fall.
    t, arm, _ = faulty([])
    arm.grasp_fault = ObjectLost('the object fell', fell=True)
    t.state.grasp = GRASP
    t.decider.grasp_at = lambda belief, X: GRASP  # type: ignore[attr-defined]
    with pytest.raises(TaskFailure) as failure:
        t.final_grasp()
    assert failure.value.outcome is Outcome.FELL
    # Whatever a stage lets through, run() returns the result with the pushes made.
    t, arm, _ = faulty([])

    def broken(self: Task) -> None:
        self.state.samples.append(pushed_at(0.1))
        raise WorldError('the arm controller stopped', retryable=False)

    t.identify = broken.__get__(t)  # type: ignore[method-assign]
    result = t.run()
    assert result.outcome is Outcome.ERROR and result.reason == 'the arm controller stopped'
    assert len(result.state.samples) == 6  # 5 exploratory pushes and the one above


def test_an_object_no_goal_can_exist_for_ends_the_task_before_any_push() -> None:
    # A gripper that opens 1 mm explored and identified for minutes, then found no goal.
    t, arm, decider = faulty([])
    t.state.grid = None  # as a new task's: the first look sets it
    decider.refuse = 'the object is 3.0 cm tall and the gripper takes 0.1 cm'
    result = t.run()
    assert (result.outcome, result.stage) == (Outcome.NO_GOAL, Stage.PERCEIVE)
    assert result.reason == 'no goal: the object is 3.0 cm tall and the gripper takes 0.1 cm'
    assert (arm.tried, decider.drawn, len(result.state.samples)) == (0, 0, 0)
    decider.refuse = None  # one that fits is explored
    t, arm, decider = faulty([])
    t.state.grid = None
    t.perceive()
    t.explore_once()
    assert arm.tried == 1


def test_an_object_moved_while_its_push_was_planned_is_planned_for_again() -> None:
    # The push planned, and checked for falls, where the object was ran where it is now.
    t, arm, _ = faulty([])
    arm.pose = X_REACHED + np.array([0.12, 0.0, 0.0])  # moved since the last look
    t.push_once()
    assert (arm.tried, t.state.planned) == (1, 1)
    failed, done = t.state.trace['pushes']
    assert failed['failed'].startswith('the object moved since this push was planned')
    assert np.allclose(done['X_WO'], arm.pose) and 'failed' not in done
    # Within perception's noise it is the same pose: pushed at once.
    t, arm, _ = faulty([])
    arm.pose = X_REACHED + np.array([0.001, -0.001, 0.002])
    t.push_once()
    assert arm.tried == 1 and len(t.state.trace['pushes']) == 1


def test_identification_takes_the_exploratory_pushes_made_over_the_edge_too() -> None:
    # An object that started over the edge was identified without those pushes, and from
    # none when it stayed there: the task failed where identification can use them.
    learner = Learner()
    t = Task(Arm(X_REACHED), learner, TaskSettings())  # type: ignore[arg-type]
    st = t.state
    st.grid = GRID
    st.samples = [pushed_at(0.02)] * 3  # sticking out over the edge on every push
    st.explored, st.explored_at = [PRIMITIVE] * 3, [0, 1, 2]
    t.identify()
    assert learner.given == [3] and st.belief_pushes == 3


def test_an_object_moved_before_an_exploratory_push_is_pushed_where_it_is_now() -> None:
    # Moved while the belief so far was identified, it was pushed at the pose seen after
    # the last push: chosen, and checked, for the middle of the table, made near the edge.
    seen: list[np.ndarray] = []

    class Watching(Explorer):
        def exploration(self, grid, X_WO, belief, done, attempt=0, side_W=None):  # type: ignore[no-untyped-def]
            seen.append(np.array(X_WO))
            return super().exploration(grid, X_WO, belief, done, attempt, side_W)

    t, arm, _ = faulty([])
    t.decider = Watching()
    arm.pose = X_REACHED + np.array([-0.15, 0.0, 0.4])
    t.explore_once()
    assert np.array_equal(seen[0], arm.pose)


def test_a_planned_push_identification_cannot_read_is_left_out_of_relearning() -> None:
    # One unreadable planned push (a gap in the forces) was in every later relearning, and
    # each failed: the belief froze for the rest of the episode.
    class GapOnce(PushingArm):
        def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
            self.pushes += 1
            if self.pushes == 2:
                return two_poses(X_WO)
            return pushed_at(0.1)

    learner = Learner()
    t, _, decider = faulty([])
    t.world, t.decider = GapOnce(X_REACHED), learner
    learner.step = decider.step  # type: ignore[attr-defined]
    said: list[str] = []
    t._events = lambda _stage, message: said.append(message)
    for _ in range(3):
        assert t.push_once() is False
    assert t.state.unreadable == {1} and learner.given == [1, 2]
    assert t.state.relearned == 2
    assert any(m.startswith('push 2 is left out of identification:') for m in said)


def test_a_push_stopped_by_an_abort_is_not_in_the_trace_as_made() -> None:
    from slide_core.task.world import Aborted

    class Stopped(FaultyArm):
        def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
            raise Aborted('aborted during push')

    t, _, _ = faulty([])
    t.world = Stopped(X_REACHED)
    with pytest.raises(Aborted):
        t.push_once()
    assert t.state.trace['pushes'][-1]['failed'] == 'aborted during push'
    assert t.state.planned == 0


def test_the_time_in_the_stage_a_task_stopped_in_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    # An episode stopped (Ctrl-C, a fault) while exploring said only the exploring of the
    # pushes before: the stage it stopped in was entered and never left.
    from slide_core.task import loop
    from slide_core.task.world import Aborted

    now = [0.0]
    monkeypatch.setattr(loop, 'time', SimpleNamespace(perf_counter=lambda: now[0]))

    class Slow(FaultyArm):
        def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
            now[0] += 10.0
            if stop_next:
                raise Aborted('stopped while pushing')
            return super().push(primitive, X_WO)

    stop_next = False
    t, _, _ = faulty([])
    t.world = Slow(X_REACHED)
    t.explore_once()
    stop_next = True
    with pytest.raises(Aborted) as stop:
        t.explore_once()
    assert t.stage_seconds()['explore'] == pytest.approx(20.0)
    result = t.result(stop.value)
    assert result.stage.value == 'explore'
    assert result.stage_s['explore'] == pytest.approx(20.0)  # (10 s: the stopped push left out)
    assert t.stage_seconds() == result.stage_s  # counted once


def test_a_replan_that_ends_the_loop_after_a_failed_push_ends_it() -> None:
    # The closed loop ignored it and planned again: a second goal search, counted as a
    # second new goal.
    t, _, _ = faulty([PushFailed('executor: stale pose')])
    plans: list[bool] = []

    def plan_once(self: Task) -> bool:
        plans.append(len(plans) > 0)  # the first finds a push, the re-plan none
        return plans[-1]

    t.plan_once = plan_once.__get__(t)  # type: ignore[method-assign]
    assert t.closed_loop_step() is True and plans == [False, True]


def test_no_grasp_after_the_push_budget_says_the_budget_was_spent() -> None:
    t, _, _ = faulty([])
    t.state.reached = False
    t.decider.grasp_at = lambda belief, X: None  # type: ignore[attr-defined]
    with pytest.raises(TaskFailure) as failure:
        t.final_grasp()
    assert failure.value.outcome is Outcome.NO_GRASP
    assert failure.value.reason == (
        'no grasp at the final pose (the push budget of 25 was spent before the goal)'
    )


class UncertainFromHere(RefusesOneGoal, Learner):
    """No push towards the goal; from here, the goals (or refusals) queued, and no staging
    pose; exploration always the same push; identification a new belief from the pushes
    it is given."""

    def __init__(self, goals: list[Goal | PlanningError]) -> None:
        RefusesOneGoal.__init__(self, GOAL.X_WO, goals)
        Learner.__init__(self)

    def staging(self, belief: Belief, X_WO: np.ndarray) -> Goal:
        raise PlanningError('no goal: too short')

    def exploration(
        self,
        grid: Grid,
        X_WO: np.ndarray,
        belief: object,
        done: object,
        attempt: int = 0,
        side_W: np.ndarray | None = None,
    ) -> Primitive:
        return PRIMITIVE


@pytest.mark.parametrize('extra', [0, 1])
def test_a_belief_too_uncertain_for_a_goal_from_here_explores_once_more_in_the_loop(
    extra: int,
) -> None:
    # A belief identified again from the planned pushes refused the goal and had none from
    # here: the loop gave up and said 'no grasp' with the object 30 cm from the edge.
    other = Goal(X_REACHED + [0.0, 0.05, 2.0], 1.0, 0.02, 0.05, 0.1, GRASP)
    planner = UncertainFromHere([UncertainBeliefError('no goal: too uncertain'), other])
    arm = PushingArm(X_REACHED + [0.2, 0.0, 0.0])
    settings = TaskSettings(regoals=2, extra_exploration=extra)
    t = Task(arm, planner, settings)  # type: ignore[arg-type]
    st = t.state
    st.grid, st.belief, st.goal = (
        GRID,
        Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4)),
        GOAL,
    )
    st.samples = [pushed_at(0.2)]  # a planned push, before any exploration of the loop's
    if not extra:
        assert t.plan_once() is True and arm.pushes == 0
        assert st.no_plan.endswith('; no goal from here: no goal: too uncertain')
        return
    assert t.plan_once() is False  # explored, identified again, and a goal from there
    assert arm.pushes == 1 and st.extra_explored == 1 and st.explored == [PRIMITIVE]
    assert st.explored_at == [1]  # after the planned push: its samples are not taken for it
    assert planner.given == [2] and st.belief_pushes == 2  # every push so far
    assert st.goal is other and st.no_plan == ''


def test_the_time_spent_on_interim_beliefs_is_told_apart_from_exploring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Identifying the interim beliefs that choose the pushes was all 'exploring': an
    # episode could not say how much of it was the arm and how much the computer.
    from slide_core.task import loop

    now = [0.0]
    monkeypatch.setattr(loop, 'time', SimpleNamespace(perf_counter=lambda: now[0]))

    class SlowArm(FaultyArm):
        def push(self, primitive: object, X_WO: np.ndarray) -> PushSamples:
            now[0] += 10.0
            return super().push(primitive, X_WO)

    class SlowLearner(Explorer):
        fail = False

        def identify(self, grid: Grid, pushes: list[PushSamples]) -> Belief:
            now[0] += 3.0
            if self.fail:
                raise IdentificationError('the pushes do not overlap')
            return super().identify(grid, pushes)

    learner = SlowLearner()
    t = Task(SlowArm(X_REACHED), learner, TaskSettings(retry_wait_s=0.0))  # type: ignore[arg-type]
    t.state.grid, t.state.X_WO = GRID, X_REACHED
    t.explore_once()  # no push yet: no belief to identify
    t.explore_once()  # under a belief from the first
    learner.fail = True
    t.explore_once()  # a failed identification took its time too
    assert t.state.interim_identify_s == pytest.approx(6.0)
    assert t.stage_seconds()['explore'] == pytest.approx(36.0)


STAGING = Goal(X_REACHED + [0.01, 0.0, 0.0], 1.0, 0.02, 0.05, 0.1, GRASP, staging=True)
UNCERTAIN = UncertainBeliefError('no goal: at most 0.94 of the belief stays and is held')


def _next_answer(answers: list[Goal | PlanningError]) -> Goal:
    """The first of ``answers``, taken off: returned, or raised when it is a refusal."""
    found = answers.pop(0)
    if isinstance(found, PlanningError):
        raise found
    return found


class Stager(Learner):
    """A planner whose goal search finds the belief too uncertain while ``goals`` begins
    with an UncertainBeliefError, with staging poses ``stagings`` to offer; each step is
    done (at the pose steered to) when ``done``, refused when ``refuse`` (towards a goal
    only, when ``refuse_goals``); an exploratory push it has none of."""

    def __init__(self, goals: list[Goal | PlanningError], stagings: list[Goal | PlanningError]):
        super().__init__()
        self.goals, self.stagings = goals, stagings
        self.asked_goal = self.asked_staging = self.explorations = 0
        self.steps: list[tuple[list[float], bool]] = []
        self.done = self.refuse = self.refuse_goals = False

    def goal(self, belief: Belief, X_WO: np.ndarray) -> Goal:
        self.asked_goal += 1
        return _next_answer(self.goals)

    def staging(self, belief: Belief, X_WO: np.ndarray) -> Goal:
        self.asked_staging += 1
        return _next_answer(self.stagings)

    def exploration(self, *args: object) -> Primitive:
        self.explorations += 1
        raise NoSolutionError('no exploratory push from here')

    def step(self, belief: Belief, X_WO: np.ndarray, goal: Goal, planned: int) -> Step:
        self.steps.append((goal.X_WO.tolist(), goal.staging))
        if self.refuse or (self.refuse_goals and not goal.staging):
            raise PlanningError('every candidate push risks a fall')
        return Step(self.done, None, goal.X_WO, None, 0.0)


def staged(planner: Stager, extra: int = 5, budget: int = 25) -> tuple[Task, PushingArm]:
    """A task whose goal stage found ``planner``'s first answer, a belief from 5 pushes."""
    arm = PushingArm(X_REACHED + [0.1, 0.0, 0.0])
    settings = TaskSettings(extra_exploration=extra, push_budget=budget)
    t = Task(arm, planner, settings)  # type: ignore[arg-type]
    st = t.state
    st.grid, st.belief_pushes = GRID, 5
    st.belief = Belief.create(GRID, np.full(GRID.n, 0.02), np.full(GRID.n, 0.4))
    st.samples = [pushed_at(0.1)] * 5
    t.choose_goal()
    return t, arm


def test_a_belief_too_uncertain_for_a_goal_is_pushed_to_a_staging_pose_first() -> None:
    planner = Stager([UNCERTAIN], [STAGING])
    t, arm = staged(planner)
    st = t.state
    # No exploratory push (the planner has none to give): the closed loop steers there.
    assert st.goal is STAGING and st.staged == 1 and st.extra_explored == 1
    assert arm.pushes == 0 and st.trace['goal_staging'] is True
    # Under the belief the staging pose was chosen with, the goal is not looked for again.
    assert t.plan_once() is False
    assert planner.asked_goal == 1 and planner.steps == [(STAGING.X_WO.tolist(), True)]


def test_the_goal_is_looked_for_under_each_belief_on_the_way_to_the_staging_pose() -> None:
    planner = Stager([UNCERTAIN, UNCERTAIN, GOAL], [STAGING])
    t, _ = staged(planner)
    st = t.state
    st.samples.append(pushed_at(0.05))  # a push towards the staging pose, identified
    t.relearn()
    assert t.plan_once() is False
    assert planner.asked_goal == 2 and st.goal is STAGING
    st.samples.append(pushed_at(0.02))
    t.relearn()
    assert t.plan_once() is False
    # The belief from 7 pushes has a goal: it replaces the staging pose, and is steered to.
    assert planner.asked_goal == 3 and st.goal is GOAL and st.goal_belief == 7
    assert planner.steps[-1] == (GOAL.X_WO.tolist(), False)
    assert st.trace['goals'] == [STAGING.X_WO.tolist(), GOAL.X_WO.tolist()]
    assert st.trace['goal_staging'] is False


def test_arriving_at_the_staging_pose_without_a_goal_ends_the_task_ungrasped() -> None:
    planner = Stager([UNCERTAIN, UNCERTAIN], [STAGING])
    t, arm = staged(planner)
    planner.done = True
    arm.pose = STAGING.X_WO
    with pytest.raises(TaskFailure) as failure:
        t.plan_once()
    assert failure.value.outcome is Outcome.NO_GOAL and 'at the staging pose' in str(
        failure.value.reason
    )
    assert arm.grasped == [] and not t.state.reached
    # With a goal there, the loop goes on towards it.
    planner = Stager([UNCERTAIN, GOAL], [STAGING])
    t, arm = staged(planner)
    planner.done = True
    assert t.plan_once() is True  # (this planner finds every goal reached at once)
    assert t.state.goal is GOAL and t.state.reached
    assert planner.steps == [(STAGING.X_WO.tolist(), True), (GOAL.X_WO.tolist(), False)]


def test_no_plan_or_no_pushes_left_towards_the_staging_pose_end_the_task_ungrasped() -> None:
    # No plan, and no staging pose from where the object is: no grasp is tried.
    planner = Stager([UNCERTAIN], [STAGING, PlanningError('no goal: too short')])
    t, arm = staged(planner, extra=1)
    planner.refuse = True
    with pytest.raises(TaskFailure) as failure:
        t.plan_once()
    assert failure.value.outcome is Outcome.NO_GOAL and planner.asked_staging == 2
    assert 'no staging pose from here: no goal: too short' in failure.value.reason
    # The push budget spent on the way: no grasp either.
    t, arm = staged(Stager([UNCERTAIN], [STAGING]), budget=1)
    t.state.planned = 1
    assert t.closed_loop_step() is True
    with pytest.raises(TaskFailure) as failure:
        t.final_grasp()
    assert failure.value.outcome is Outcome.NO_GOAL and arm.grasped == []
    assert 'spent on the way to the staging pose' in failure.value.reason


def test_without_a_staging_pose_the_goal_stage_explores_as_before() -> None:
    planner = Stager([UNCERTAIN], [PlanningError('no goal: too short')])
    with pytest.raises(TaskFailure) as failure:
        staged(planner)
    assert planner.asked_staging == 1 and planner.explorations == 1
    assert failure.value.outcome is Outcome.PUSH_FAILED  # (this planner has no push)
    # Not allowed any more exploration: neither.
    planner = Stager([UNCERTAIN], [STAGING])
    with pytest.raises(TaskFailure) as failure:
        staged(planner, extra=0)
    assert failure.value.outcome is Outcome.NO_GOAL
    assert planner.asked_staging == planner.explorations == 0


def test_a_belief_identified_again_too_uncertain_for_any_goal_is_staged_too() -> None:
    # The closed loop's belief, identified again, refuses the goal and has none from here:
    # it gets the staging pose (once), not more exploring on the table.
    planner = Stager([GOAL, UNCERTAIN, UNCERTAIN], [STAGING])
    t, arm = staged(planner, extra=2)
    st = t.state
    assert st.goal is GOAL and st.staged == 0
    planner.refuse_goals = True
    st.samples.append(pushed_at(0.05))
    t.relearn()
    assert t.plan_once() is False
    assert st.goal is STAGING and st.staged == 1 and st.extra_explored == 1
    assert planner.explorations == 0 and planner.steps[-1] == (STAGING.X_WO.tolist(), True)
    assert st.trace['goals'] == [GOAL.X_WO.tolist(), STAGING.X_WO.tolist()]


def test_identifying_says_the_fingertips_offset_from_the_object(side_pushes) -> None:  # type: ignore[no-untyped-def]
    # The camera and the arm 1.5 mm apart moved every push force's point along the outline,
    # and nothing said so.
    def explored(settings: TaskSettings, offset: tuple[float, float]) -> tuple[Task, list[str]]:
        said: list[str] = []
        t = Task(
            Arm(X_REACHED),
            Learner(),  # type: ignore[arg-type]
            settings,
            events=lambda _stage, message: said.append(message),
        )
        st = t.state
        st.grid = side_pushes.grid
        st.samples = [side_pushes.samples(side, offset) for side in ('+x', '-x', '+y', '-y')]
        st.pushes = [s.to_data(st.grid, k) for k, s in enumerate(st.samples)]
        st.explored, st.explored_at = [PRIMITIVE] * 4, [0, 1, 2, 3]
        t.identify()
        return t, said

    settings = TaskSettings(fingertip_radius=side_pushes.radius, contact_offset='check')
    t, said = explored(settings, (-1.5e-3, 0.5e-3))
    np.testing.assert_allclose(t.state.trace['contact_offset_m'], [-1.5e-3, 0.5e-3], atol=2e-5)
    (warning,) = [m for m in said if m.startswith('warning: ')]
    assert 'camera extrinsics' in warning and '(-1.50, +0.50) mm' in warning
    # Within a millimetre: said, no warning.
    t, said = explored(settings, (0.4e-3, 0.0))
    assert not [m for m in said if m.startswith('warning: ')]
    assert any("the fingertip's recorded contacts sit (+0.40, " in m for m in said)
    # Without the fingertip's radius it is not measured.
    t, said = explored(TaskSettings(), (-1.5e-3, 0.5e-3))
    assert 'contact_offset_m' not in t.state.trace
    assert not any('recorded contacts' in m for m in said)
    with pytest.raises(SlideInputError, match="fingertip's radius must be >= 0"):
        TaskSettings(fingertip_radius=-0.008)


def test_with_auto_the_offset_is_taken_off_every_pose_before_identifying(side_pushes) -> None:  # type: ignore[no-untyped-def]
    offset = np.array([-1.5e-3, 0.5e-3])  # the fingertip's contacts: the camera off by -that
    learner = Learner()
    given: list[list[PushSamples]] = []
    identify = learner.identify

    def spy(grid: Grid, pushes: list[PushSamples]) -> Belief:
        given.append(list(pushes))
        return identify(grid, pushes)

    learner.identify = spy  # type: ignore[method-assign]
    said: list[str] = []
    settings = TaskSettings(fingertip_radius=side_pushes.radius, contact_offset='auto')
    arm = Arm(X_REACHED)
    t = Task(arm, learner, settings, events=lambda _s, m: said.append(m))  # type: ignore[arg-type]
    st = t.state
    st.grid = side_pushes.grid
    raw = [side_pushes.samples(side, tuple(offset)) for side in ('+x', '-x', '+y', '-y')]
    st.samples = list(raw)
    st.pushes = [s.to_data(st.grid, k) for k, s in enumerate(st.samples)]
    st.explored, st.explored_at = [PRIMITIVE] * 4, [0, 1, 2, 3]
    t.identify()
    np.testing.assert_allclose(st.p_offset_W, offset, atol=2e-5)
    assert st.trace['contact_offset_taken_off_m'] == pytest.approx(offset, abs=2e-5)
    # The pushes it identified from had their poses moved onto the fingertip's frame ...
    (pushes,) = given
    for seen, before in zip(pushes, raw, strict=True):
        moved = seen.X_WO - before.X_WO
        np.testing.assert_allclose(moved, [[*st.p_offset_W, 0.0]] * len(seen.t_X))
        np.testing.assert_array_equal(seen.p_WF, before.p_WF)
    # ... so their contacts now sit where the fingertip touched.
    assert contact_offset(st.grid, st.pushes, side_pushes.radius).size_m < 5e-5
    (warning,) = [m for m in said if m.startswith('warning: ')]
    assert 'taken off every pose from here on' in warning
    # Every pose observed from now on is moved as well.
    np.testing.assert_allclose(t.observe(), X_REACHED + [*st.p_offset_W, 0.0])
    # Identified again (more exploration): nothing more to take off, and the offset is
    # still said in the camera's own poses.
    taken = st.p_offset_W.copy()
    t.identify()
    np.testing.assert_array_equal(st.p_offset_W, taken)
    assert st.trace['contact_offset_m'] == pytest.approx(offset, abs=2e-5)
    with pytest.raises(SlideInputError, match='contact offset must be one of auto, check'):
        TaskSettings(contact_offset='fix')


def test_with_auto_an_offset_from_two_directions_only_is_said_not_taken_off(side_pushes) -> None:  # type: ignore[no-untyped-def]
    # Pushes into two sides alone cannot tell an offset from an outline drawn wide.
    said: list[str] = []
    settings = TaskSettings(fingertip_radius=side_pushes.radius, contact_offset='auto')
    t = Task(Arm(X_REACHED), Learner(), settings, events=lambda _s, m: said.append(m))  # type: ignore[arg-type]
    st = t.state
    st.grid = side_pushes.grid
    raw = [side_pushes.samples(side, (-1.5e-3, 0.5e-3)) for side in ('+x', '+y')]
    st.samples = list(raw)
    st.pushes = [s.to_data(st.grid, k) for k, s in enumerate(st.samples)]
    st.explored, st.explored_at = [PRIMITIVE] * 2, [0, 1]
    t.identify()
    np.testing.assert_allclose(st.trace['contact_offset_m'], [-1.5e-3, 0.5e-3], atol=2e-5)
    np.testing.assert_array_equal(st.p_offset_W, [0.0, 0.0])
    assert 'contact_offset_taken_off_m' not in st.trace
    assert [s.X_WO for s in st.samples] == [s.X_WO for s in raw]
    (warning,) = [m for m in said if m.startswith('warning: ')]
    assert 'not taken off' in warning and 'third side' in warning
    np.testing.assert_allclose(t.observe(), X_REACHED)


class SideDecider(Learner):
    """Exploration into the side asked for, or along +x; records what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[np.ndarray | None] = []
        self.refuse_sides = False

    def exploration(
        self,
        grid: Grid,
        X_WO: np.ndarray,
        belief: object,
        done: object,
        attempt: int = 0,
        side_W: np.ndarray | None = None,
    ) -> Primitive:
        self.sides.append(side_W)
        if side_W is None:
            return PRIMITIVE
        if self.refuse_sides:
            raise NoSolutionError('every side facing it is at the table edge')
        # Into the side facing side_W: along the axis most against it.
        axes = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
        d = axes[int(np.argmin(axes @ side_W))]
        return Primitive.create(-0.03 * d, d, 0.02, 0.05)


class SideArm(Arm):
    """Pushes the box of ``side_pushes`` along the primitive's axis, the fingertip recorded
    ``offset`` off."""

    def __init__(self, pose: np.ndarray, pushes, offset: tuple[float, float]) -> None:  # type: ignore[no-untyped-def]
        super().__init__(pose)
        self.side_pushes, self.offset = pushes, offset
        self.pushed: list[str] = []

    def push(self, primitive: Primitive, X_WO: np.ndarray) -> PushSamples:
        key = {(1, 0): '+x', (-1, 0): '-x', (0, 1): '+y', (0, -1): '-y'}[
            tuple(int(v) for v in np.round(primitive.d_O))
        ]
        self.pushed.append(key)
        return self.side_pushes.samples(key, self.offset)


@pytest.mark.parametrize(
    ('sides', 'offset', 'mode', 'side', 'taken_off'),
    [
        # Two sides measured a real 1.6 mm offset that could not be taken off (an outline
        # drawn wide reads the same): the side facing away from both tells it.
        (('+x', '+y'), (-1.5e-3, 0.5e-3), 'auto', (0.5**0.5, 0.5**0.5), True),
        (('+x', '+y'), (-1.5e-3, 0.5e-3), 'check', None, False),  # only said: nothing told
        (('+x', '+y'), (0.3e-3, 0.2e-3), 'auto', None, False),  # within a millimetre
        (('+x', '+y', '-x'), (-1.5e-3, 0.5e-3), 'auto', None, False),  # three sides told it
        # Opposite sides alone do not see the offset along them at all: a side across
        # tells it, and it is taken off when above a millimetre.
        (('+x', '-x'), (-1.5e-3, 0.5e-3), 'auto', (0.0, 1.0), True),
        (('+x', '-x'), (0.3e-3, 0.2e-3), 'auto', (0.0, 1.0), False),
        (('+x', '-x'), (-1.5e-3, 0.5e-3), 'check', None, False),
    ],
)
def test_with_auto_an_offset_the_pushes_cannot_tell_is_told_by_a_push_into_another_side(
    side_pushes,  # type: ignore[no-untyped-def]
    sides: tuple[str, ...],
    offset: tuple[float, float],
    mode: str,
    side: tuple[float, float] | None,
    taken_off: bool,
) -> None:
    said: list[str] = []
    decider = SideDecider()
    arm = SideArm(X_REACHED, side_pushes, offset)
    settings = TaskSettings(fingertip_radius=side_pushes.radius, contact_offset=mode)
    t = Task(arm, decider, settings, events=lambda _s, m: said.append(m))  # type: ignore[arg-type]
    st = t.state
    st.grid, st.X_WO = side_pushes.grid, X_REACHED.copy()
    st.samples = [side_pushes.samples(s, offset) for s in sides]
    st.pushes = [s.to_data(st.grid, k) for k, s in enumerate(st.samples)]
    st.explored, st.explored_at = [PRIMITIVE] * len(sides), list(range(len(sides)))
    t.tell_offset()
    t.identify()
    if side is None:
        assert decider.sides == [] and arm.pushed == [] and len(st.explored) == len(sides)
        assert 'offset_side_W' not in st.trace
        return
    # Asked for that side (across opposite sides: either way), pushed it, and identified
    # from every push; the offset told from three directions taken off when above 1 mm.
    (side_W,) = decider.sides
    np.testing.assert_allclose(np.abs(side_W), side, atol=1e-6)
    assert st.trace['offset_side_W'] == pytest.approx(side_W, abs=1e-6)
    (pushed,) = arm.pushed  # along d: into the side whose outward normal is -d
    d = {'+x': (1.0, 0.0), '-x': (-1.0, 0.0), '+y': (0.0, 1.0), '-y': (0.0, -1.0)}[pushed]
    assert float(-np.array(d) @ side_W) > 0.7
    assert len(st.explored) == len(sides) + 1 and decider.given == [len(sides) + 1]
    assert any(f'into the side facing ({side_W[0]:+.2f}, {side_W[1]:+.2f})' in m for m in said)
    if taken_off:
        np.testing.assert_allclose(st.p_offset_W, offset, atol=2e-5)
    else:
        np.testing.assert_array_equal(st.p_offset_W, [0.0, 0.0])
        np.testing.assert_allclose(st.trace['contact_offset_m'], offset, atol=2e-5)


def test_no_side_to_push_leaves_a_two_direction_offset_kept_and_the_task_going_on(
    side_pushes,  # type: ignore[no-untyped-def]
) -> None:
    said: list[str] = []
    decider = SideDecider()
    decider.refuse_sides = True
    arm = SideArm(X_REACHED, side_pushes, (-1.5e-3, 0.5e-3))
    settings = TaskSettings(fingertip_radius=side_pushes.radius)
    t = Task(arm, decider, settings, events=lambda _s, m: said.append(m))  # type: ignore[arg-type]
    st = t.state
    st.grid, st.X_WO = side_pushes.grid, X_REACHED.copy()
    st.samples = [side_pushes.samples(side, (-1.5e-3, 0.5e-3)) for side in ('+x', '+y')]
    st.pushes = [s.to_data(st.grid, k) for k, s in enumerate(st.samples)]
    st.explored, st.explored_at = [PRIMITIVE] * 2, [0, 1]
    t.tell_offset()
    assert arm.pushed == [] and len(st.explored) == 2 and st.stage is Stage.EXPLORE
    assert any('no push into that side (every side facing it' in m for m in said)
    t.identify()  # identified as before, the offset kept and warned of
    assert decider.given == [2]
    np.testing.assert_array_equal(st.p_offset_W, [0.0, 0.0])
    assert any('not taken off' in m and 'third side' in m for m in said)
