"""The task's state and result types: stages, outcomes, settings, what it knows so far."""

from __future__ import annotations

from dataclasses import dataclass, field
import enum
import math
from typing import Any

import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid
from slide_core.identification import PushData, PushSamples
from slide_core.model import Belief, Primitive
from slide_core.planning import Goal, Grasp, Step
from slide_core.task.world import GraspReport


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
    ERROR = 'error'
    """A part the task relies on failed (a node of the graph died or stopped answering);
    the reason says which."""


SEED_MAX = 2**31 - 1
"""An episode's seed is 0 to this: the nodes take it as a ROS integer parameter, and the
twin and the draws it seeds as a 31-bit one (the command line, the launch arguments and
the nodes all refuse larger)."""


CONTACT_OFFSET_MODES = ('auto', 'check')
"""What the task does with the fingertip's contact offset (:class:`TaskSettings`)."""


@dataclass(frozen=True)
class TaskSettings:
    """exploration_pushes: 1 to 20; extra_exploration: 0 to 20 more exploratory pushes,
    one at a time, each followed by a new identification, while the goal search finds the
    belief too uncertain for any goal (:class:`slide_core.planning.UncertainBeliefError`);
    push_budget: planned pushes allowed; stall_pushes: the closed loop stops pushing (and
    tries the grasp) after this many pushes in a row that bring the object no closer to the
    goal than it has been (1 to 25); regoals: 0 to 10 times the closed loop chooses a new
    goal from where the object is when no path or safe push leads to the goal from
    there (the grasp is tried where it is after that); push_retries: a push the world
    failed and lets try again (a refused goal, a stale pose, an object not seen just
    then) is chosen or planned again from where the object is this often before the
    task fails, exploratory and planned alike; observe_retries: a lost pose is looked
    for again this often (``retry_wait_s`` apart) before the task fails; interim_beliefs:
    each exploratory push after the first is chosen under a belief identified from the
    pushes so far (paper 2's most distinctive push needs one; a random exploration does
    not, and saves the identifications); relearn_every: after every this many planned
    pushes (0: never, up to 25), the belief is identified again from every push so far,
    those with the object over the table's edge too (identification carries only the cells
    over the table): a few exploratory pushes can leave a heavy end's place open that the
    pushes towards the goal then show. While the belief is too uncertain for a goal, the
    task first pushes the object to a staging pose at the edge
    (:func:`slide_core.planning.select_staging`, one of the ``extra_exploration``);
    fingertip_radius [m]: the workcell's fingertip, with which each identification from the
    exploratory pushes measures the fingertip's recorded offset from the object
    (:func:`slide_core.identification.contact_offset`: the camera's and the arm's
    calibrations disagreeing), keeps it in the trace (``contact_offset_m``) and warns of it
    above :data:`slide_core.identification.WARN_OFFSET_M` (0: not measured);
    contact_offset: what is done with such an offset: 'auto' (the default) also takes it
    off every pose the task observes from then on (the camera's poses moved onto the arm's
    frame: the arm's kinematics are taken as right), the pushes measured so far included,
    before the belief is identified from them, when the pushes told it from three
    directions or more; when they cannot tell it (parallel sides alone, or two directions
    and above WARN_OFFSET_M), one more exploratory push goes into another side first
    (:meth:`slide_core.task.Task.tell_offset`); 'check' only says it. (A calibrated cell's
    offsets stay well below the warning, and nothing is taken off: ``slide bench
    identification`` found them within 0.17 mm on perception's tracked poses.)"""

    exploration_pushes: int = 5
    extra_exploration: int = 5
    push_budget: int = 25
    stall_pushes: int = 8
    regoals: int = 2
    push_retries: int = 1
    observe_retries: int = 2
    retry_wait_s: float = 0.5
    interim_beliefs: bool = True
    relearn_every: int = 1
    fingertip_radius: float = 0.0
    contact_offset: str = 'auto'

    def __post_init__(self) -> None:
        if not 1 <= self.exploration_pushes <= 20:
            raise SlideInputError(
                f'exploration pushes must be 1 to 20, got {self.exploration_pushes}'
            )
        if not 0 <= self.extra_exploration <= 20:
            raise SlideInputError(
                f'extra exploration must be 0 to 20 pushes, got {self.extra_exploration}'
            )
        if self.push_budget < 1:
            raise SlideInputError(f'the push budget must be at least 1, got {self.push_budget}')
        if not 1 <= self.stall_pushes <= 25:
            raise SlideInputError(
                f'stall pushes must be 1 to 25 pushes without progress, got {self.stall_pushes}'
            )
        if not 0 <= self.regoals <= 10:
            raise SlideInputError(f'new goals must be 0 to 10, got {self.regoals}')
        if not 0 <= self.relearn_every <= 25:
            raise SlideInputError(
                f'relearn every must be 0 (never) to 25 planned pushes, got {self.relearn_every}'
            )
        if not (math.isfinite(self.fingertip_radius) and self.fingertip_radius >= 0.0):
            raise SlideInputError(
                f"the fingertip's radius must be >= 0 m (0: the contact offset is not "
                f'measured), got {self.fingertip_radius}'
            )
        if self.contact_offset not in CONTACT_OFFSET_MODES:
            raise SlideInputError(
                f'contact offset must be one of {", ".join(CONTACT_OFFSET_MODES)}, got '
                f'{self.contact_offset!r}'
            )
        if self.push_retries < 0 or self.observe_retries < 0 or self.retry_wait_s < 0:
            raise SlideInputError('retries and waits must not be negative')


@dataclass
class TaskState:
    """What the task knows so far (the behaviour node publishes it): the grid and last pose, the
    exploratory primitives and their pushes on identification's step, what every push
    measured, the belief and how many pushes it was identified from (those that
    identification can read), the exploratory pushes added because the belief was too
    uncertain for a goal (a staging pose counted among them), the staging poses chosen
    (``staged``), the goal (or staging pose), last step, planned pushes, the grasp;
    ``X_reached``: the observed pose at which the planner found the goal reached;
    ``closest``: the nearest [m, SE(2)] the object has been to the goal, ``stalled`` the
    pushes since it last came nearer, and ``progress_at`` the planned pushes at the last
    look; ``regoals``: the goals chosen anew from where the object was because none led to
    the goal from there; ``relearned``: the times the belief was identified again during the
    closed loop (``TaskSettings.relearn_every``), from ``belief_pushes`` pushes the last
    time; ``goal_belief``: the ``belief_pushes`` of the belief the goal was chosen under;
    ``goal_tried``: the ``belief_pushes`` of the belief the goal was last looked for under
    while steering to a staging pose; ``beliefs``: every belief a planned push was decided
    under, by its ``belief_pushes`` (each trace entry of a push names its own, with the goal
    and the index it was planned for, so the decision can be made again); ``unreadable``:
    the indices in ``samples`` of planned pushes identification cannot read (left out when
    it identifies again); ``explored_at``: the indices in ``samples`` of the exploratory
    pushes (the closed loop explores too, after planned pushes); ``interim_identify_s``: the
    seconds the exploring stage spent identifying the interim beliefs it chooses pushes
    under (counted in that stage's time too); ``p_offset_W`` (2,) [m]: the fingertip's
    contact offset taken off so far (``TaskSettings.contact_offset`` 'auto'): added to every
    observed pose and every push's poses, those in ``samples`` and ``pushes`` included (the
    trace's poses from before it was taken off stay as they were observed; the interim
    beliefs that chose the exploratory pushes were identified without it)."""

    stage: Stage = Stage.PERCEIVE
    grid: Grid | None = None
    X_WO: FloatArray | None = None
    explored: list[Primitive] = field(default_factory=list)
    pushes: list[PushData] = field(default_factory=list)
    samples: list[PushSamples] = field(default_factory=list)
    explored_at: list[int] = field(default_factory=list)
    belief: Belief | None = None
    belief_pushes: int = 0
    extra_explored: int = 0
    staged: int = 0
    goal: Goal | None = None
    step: Step | None = None
    planned: int = 0
    simulations: int = 0
    reached: bool = False
    X_reached: FloatArray | None = None
    closest: float = math.inf
    stalled: int = 0
    progress_at: int = 0
    regoals: int = 0
    relearned: int = 0
    goal_belief: int = 0
    goal_tried: int = 0
    beliefs: dict[int, Belief] = field(default_factory=dict)
    unreadable: set[int] = field(default_factory=set)
    grasp: Grasp | None = None
    report: GraspReport | None = None
    stage_s: dict[str, float] = field(default_factory=dict)
    interim_identify_s: float = 0.0
    p_offset_W: FloatArray = field(default_factory=lambda: np.zeros(2))
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
