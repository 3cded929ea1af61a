"""The task's decisions made in this process, with the core's functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import enum

import numpy as np

from slide_core.errors import NoSolutionError, SlideInputError
from slide_core.geometry import FloatArray, Grid
from slide_core.identification import (
    COM_DIRECTIONS,
    DEFAULT_BUDGET,
    Identification,
    PushData,
    PushSamples,
    TrainingSet,
    candidates,
    check_settings,
    choose,
    identify,
    on_table,
    random_push,
    side_push,
)
from slide_core.model import Belief, Primitive, Workcell
from slide_core.physics import DEFAULT_SUPPORT, SUPPORT_MODELS
from slide_core.planning import (
    Goal,
    Grasp,
    PlannerConfig,
    Step,
    final_grasp,
    next_step,
    select_goal,
    select_staging,
    step_seed,
    too_tall_to_grasp,
)


class ModelSource(enum.Enum):
    """Which models the planner gets from identification."""

    PROBABILISTIC = 'probabilistic'
    """The K weighted models of the probabilistic identification (paper 2)."""
    DETERMINISTIC = 'deterministic'
    """Only its most probable model (paper 1)."""
    UNIFORM = 'uniform'
    """Uniform maps with that model's total mass and friction (no distribution)."""
    GROUND_TRUTH = 'ground-truth'
    """The object's true maps (an upper bound; the twin only)."""


MODEL_SOURCES = tuple(s.value for s in ModelSource)
EXPLORATION = ('random', 'most-distinctive')
"""Exploration policies: random pushes, or after the first the most distinctive one under
the current belief (paper 2)."""


@dataclass(frozen=True)
class IdentificationSettings:
    """How the decider identifies: method (one of identification's METHODS), K models,
    budget of simulations, seed of randomised methods, support model (how the table
    carries the cells, :mod:`slide_core.physics.support`), directions the probabilistic
    belief's centre of mass is spread along (:mod:`slide_core.identification.spread`), whether
    the push's moment shifts the loads in the fit (``TrainingSet.push_height``; the belief
    records it, and the planner's simulators add it when it does)."""

    method: str = 'probabilistic'
    K: int = 8
    budget: int = DEFAULT_BUDGET
    seed: int = 0
    support: str = DEFAULT_SUPPORT
    com_directions: int = COM_DIRECTIONS
    push_moment: bool = True

    def __post_init__(self) -> None:
        names = {'method': 'identification method'}
        check_settings(self.method, self.K, self.budget, self.com_directions, names)
        if self.support not in SUPPORT_MODELS:
            raise SlideInputError(
                f'unknown support model {self.support!r}; choose from {", ".join(SUPPORT_MODELS)}'
            )


def exploration_push(
    grid: Grid,
    X_WO: FloatArray,
    belief: Belief | None,
    index: int,
    policy: str,
    seed: int,
    workcell: Workcell,
    speed: float,
    attempt: int = 0,
    progress: Callable[[float], None] | None = None,
    side_W: FloatArray | None = None,
) -> Primitive:
    """Exploratory push ``index`` of an episode: random (:func:`random_push`) before any
    belief or under the 'random' policy, else the most distinctive push under ``belief``
    (paper 2); the draws come from the stream ``[seed, 1, index]``. Its ``attempt``-th try
    after ones the world refused is random, from the stream ``[seed, 1, index, attempt]``:
    the same push (the most distinctive one is the same from the same pose) was refused
    again, and the retries were spent on it. ``progress``: as :func:`choose` takes it.

    With ``side_W`` (2,), whatever the policy: the push into the side facing it
    (:func:`side_push`, its ``attempt``-th best), which the task asks for to tell a contact
    offset that the pushes so far touched from too few directions."""
    if policy not in EXPLORATION:
        raise SlideInputError(
            f'unknown exploration {policy!r}; choose from {", ".join(EXPLORATION)}'
        )
    if attempt < 0:
        raise SlideInputError(f'attempt must not be negative, got {attempt}')
    tip, obstacles = workcell.fingertip, workcell.obstacles
    if side_W is not None:
        return side_push(grid, X_WO, side_W, workcell.table, tip, speed, obstacles, attempt)
    stream = [abs(int(seed)), 1, int(index)] + ([int(attempt)] if attempt else [])
    rng = np.random.default_rng(stream)
    if policy == 'random' or belief is None or attempt:
        return random_push(grid, X_WO, workcell.table, tip, rng, obstacles)
    pool = on_table(candidates(belief, tip), grid, X_WO, workcell.table, tip, obstacles)
    if not pool:  # every side's push would leave the middle of the table, or hit an obstacle
        return random_push(grid, X_WO, workcell.table, tip, rng, obstacles)
    try:
        candidate, _ = choose(
            belief, X_WO, 'most-distinctive', rng, tip, pool=pool, progress=progress
        )
    except NoSolutionError:  # the belief cannot roll out any of them
        return random_push(grid, X_WO, workcell.table, tip, rng, obstacles)
    return candidate.primitive(speed)


def planning_belief(source: ModelSource, identified: Belief) -> Belief:
    """The belief the planner gets from an identified one under ``source`` (not ground
    truth, which needs the true maps)."""
    if source is ModelSource.DETERMINISTIC:
        return identified.most_probable()
    if source is ModelSource.UNIFORM:
        return identified.uniform()
    return identified


@dataclass
class LocalDecider:
    """Decisions by the core's functions, in this process.

    Attributes:
        config: the planner's settings; workcell: the cell (table, fingertip).
        source: which models the planner gets; truth: the true maps, for GROUND_TRUTH.
        identification: identification settings; exploration: one of EXPLORATION.
        seed: the episode's seed: exploratory push k draws from ``[seed, 1, k]`` and path k
            from :func:`slide_core.planning.step_seed`, so the decisions depend on the seed
            and the observations only (the ROS graph makes the same ones).
        exhaustive: the exhaustive contact search (paper 1's ablation) instead of refining.
        last_identification: what the last identification produced (time, simulations).
    """

    config: PlannerConfig
    workcell: Workcell
    source: ModelSource = ModelSource.PROBABILISTIC
    truth: Belief | None = None
    identification: IdentificationSettings = field(default_factory=IdentificationSettings)
    exploration_policy: str = 'random'
    seed: int = 0
    exhaustive: bool = False
    last_identification: Identification | None = None
    # Pushes already on identification's step, kept with the samples and grid they came
    # from: interim beliefs identify the same pushes again and again.
    _converted: dict[tuple[int, int, int], tuple[PushSamples, Grid, PushData]] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.source is ModelSource.GROUND_TRUTH and self.truth is None:
            raise SlideInputError('the ground-truth source needs the true maps')
        if self.exploration_policy not in EXPLORATION:
            raise SlideInputError(
                f'unknown exploration {self.exploration_policy!r}; choose from '
                f'{", ".join(EXPLORATION)}'
            )

    def refusal(self, grid: Grid) -> str | None:
        return too_tall_to_grasp(grid, self.config.gripper)

    def exploration(
        self,
        grid: Grid,
        X_WO: FloatArray,
        belief: Belief | None,
        done: Sequence[Primitive],
        attempt: int = 0,
        side_W: FloatArray | None = None,
    ) -> Primitive:
        return exploration_push(
            grid,
            X_WO,
            belief,
            len(done),
            self.exploration_policy,
            self.seed,
            self.workcell,
            self.config.push_speed,
            attempt,
            side_W=side_W,
        )

    def identify(self, grid: Grid, pushes: Sequence[PushSamples]) -> Belief:
        if self.source is ModelSource.GROUND_TRUTH:
            assert self.truth is not None
            return self.truth
        s = self.identification
        data = [self._to_data(grid, k, samples) for k, samples in enumerate(pushes)]
        height = self.workcell.fingertip.push_heights(grid, s.push_moment)
        train = TrainingSet.from_pushes(grid, data, s.support, height)
        self.last_identification = identify(
            train, s.method, K=s.K, budget=s.budget, seed=s.seed, com_directions=s.com_directions
        )
        return planning_belief(self.source, self.last_identification.belief)

    def _to_data(self, grid: Grid, k: int, samples: PushSamples) -> PushData:
        key = (id(samples), id(grid), k)
        hit = self._converted.get(key)
        if hit is None or hit[0] is not samples or hit[1] is not grid:
            hit = (samples, grid, samples.to_data(grid, k))
            self._converted[key] = hit
        return hit[2]

    def goal(self, belief: Belief, X_WO: FloatArray) -> Goal:
        return select_goal(belief, X_WO, self.config)

    def staging(self, belief: Belief, X_WO: FloatArray) -> Goal:
        return select_staging(belief, X_WO, self.config)

    def step(self, belief: Belief, X_WO: FloatArray, goal: Goal, index: int) -> Step:
        return next_step(
            belief,
            X_WO,
            goal.X_WO,
            self.config,
            exhaustive=self.exhaustive,
            seed=step_seed(self.seed, index),
            staging=goal.staging,
        )

    def grasp_at(self, belief: Belief, X_WO: FloatArray) -> Grasp | None:
        return final_grasp(belief, X_WO, self.config)
