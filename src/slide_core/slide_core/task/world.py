"""What the task needs from the world, and from whoever makes its decisions.

The world (:class:`World`) is hardware seen through its sensors: it observes the object
(perception), executes a push primitive and reports what was measured (fingertip, F/T,
object poses), and grasps. The twin, the ROS graph on the twin and the ROS graph on the
robot all implement it.

The decider (:class:`Decider`) makes the task's decisions: which exploratory push, the
belief from the pushes, the goal, the next step of the closed loop, the grasp. In one
process it is :class:`slide_core.task.LocalDecider` (the core's functions); in the ROS
graph the behaviour node's decider asks the identification and planner nodes, which call
the same functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from slide_core.geometry import FloatArray, Grid
from slide_core.identification import PushSamples
from slide_core.model import Belief, Primitive
from slide_core.planning import Goal, Grasp, Step


@dataclass(frozen=True)
class Observation:
    """The object as perceived: its grid, its pose X_WO (3,) and when [s]."""

    grid: Grid
    X_WO: FloatArray
    stamp: float


@dataclass(frozen=True)
class GraspReport:
    """The outcome of a grasp: held and lifted, how far [m], and whether the object fell."""

    success: bool
    lifted_m: float
    fell: bool = False


class WorldError(Exception):
    """The world could not do what was asked (the message says why).

    ``fell`` is True when the world knows the object fell (the twin's ground truth); a robot
    only sees that the object is gone. ``retryable`` is False when trying again is unsafe
    or pointless (an F/T limit, an abort): the task then ends."""

    def __init__(self, message: str, fell: bool = False, retryable: bool = True) -> None:
        super().__init__(message)
        self.fell = fell
        self.retryable = retryable


class ObjectLost(WorldError):  # noqa: N818 - a condition of the world, not a program error
    """Perception does not see the object (it fell, or it left the view)."""


class PushFailed(WorldError):  # noqa: N818
    """A push was refused or aborted (stale pose, contact off the object, F/T limit)."""


class Aborted(Exception):  # noqa: N818
    """Somebody asked the task to stop."""


class World(Protocol):
    """The hardware, seen through its sensors."""

    def observe(self) -> Observation:
        """The object now; raises ObjectLost when it is not seen."""

    def push(self, primitive: Primitive, X_WO: FloatArray) -> PushSamples:
        """Execute ``primitive`` resolved at the observed pose X_WO; raises PushFailed."""

    def grasp(self, grasp: Grasp) -> GraspReport:
        """Grasp the overhang and lift it."""


class Decider(Protocol):
    """The task's decisions."""

    def refusal(self, grid: Grid) -> str | None:
        """Why no goal can exist for the object ``grid`` whatever its maps (one taller than
        the gripper takes), known before any push; None when there may be one."""

    def exploration(
        self,
        grid: Grid,
        X_WO: FloatArray,
        belief: Belief | None,
        done: Sequence[Primitive],
        attempt: int = 0,
        side_W: FloatArray | None = None,
    ) -> Primitive:
        """The next exploratory push (``belief`` is None before the first identification);
        ``attempt``: tries of it the world refused so far (a retry draws another push);
        ``side_W`` (2,): a push into the side of the object that faces it, in the table
        frame (the task asks for one to tell a contact offset). Raises NoSolutionError
        when there is none; a decider that fails for another reason (a planner node not
        running) raises WorldError, as every method here may: the task then ends as an
        error, keeping what it had."""

    def identify(self, grid: Grid, pushes: Sequence[PushSamples]) -> Belief:
        """The belief from what the exploratory pushes measured."""

    def goal(self, belief: Belief, X_WO: FloatArray) -> Goal:
        """The goal at the edge (raises PlanningError when there is none,
        UncertainBeliefError when the belief is too uncertain for one)."""

    def staging(self, belief: Belief, X_WO: FloatArray) -> Goal:
        """A staging pose at the edge for a belief too uncertain for a goal
        (:func:`slide_core.planning.select_staging`; raises PlanningError when there is
        none)."""

    def step(self, belief: Belief, X_WO: FloatArray, goal: Goal, index: int) -> Step:
        """Decision ``index`` of the closed loop towards ``goal``, under
        :func:`slide_core.planning.staging_config` when it is a staging pose (raises
        PlanningError)."""

    def grasp_at(self, belief: Belief, X_WO: FloatArray) -> Grasp | None:
        """The grasp at the final pose, or None."""
