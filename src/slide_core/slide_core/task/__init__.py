"""The pre-grasp task as one loop over a world and a decider (see :mod:`.loop`).

The twin and the ROS graph implement :class:`World`; :class:`LocalDecider` makes the
decisions in this process, the ROS behaviour node's decider asks the planner and
identification nodes. :class:`Task` runs the stages; its result's :class:`Outcome` says how
it ended.
"""

from __future__ import annotations

from slide_core.identification import PushSamples
from slide_core.task.decider import (
    EXPLORATION,
    MODEL_SOURCES,
    IdentificationSettings,
    LocalDecider,
    ModelSource,
    exploration_push,
    planning_belief,
)
from slide_core.task.loop import Task, TaskFailure, push_trace
from slide_core.task.state import (
    CONTACT_OFFSET_MODES,
    SEED_MAX,
    Outcome,
    Stage,
    TaskResult,
    TaskSettings,
    TaskState,
)
from slide_core.task.world import (
    Aborted,
    Decider,
    GraspReport,
    ObjectLost,
    Observation,
    PushFailed,
    World,
    WorldError,
)

__all__ = [
    'EXPLORATION',
    'MODEL_SOURCES',
    'CONTACT_OFFSET_MODES',
    'SEED_MAX',
    'Aborted',
    'Decider',
    'GraspReport',
    'IdentificationSettings',
    'LocalDecider',
    'ModelSource',
    'ObjectLost',
    'Observation',
    'Outcome',
    'PushFailed',
    'PushSamples',
    'Stage',
    'Task',
    'TaskFailure',
    'TaskResult',
    'TaskSettings',
    'TaskState',
    'World',
    'WorldError',
    'exploration_push',
    'planning_belief',
    'push_trace',
]
