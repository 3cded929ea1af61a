"""The twin as the task's world, in this process: ``slide episode`` and the benchmarks.

Observations are the object's true grid and its pose as ``tracking`` measures it (by
default the twin's truth: perfect perception; :data:`slide_sim.tracker.PERCEPTION` gives
perception's rate and noise); the ROS graph instead observes the twin through the
perception node. Pushes are the twin's fingertip following the workcell's waypoints,
measured as a robot would: fingertip centre and F/T force at every physics step, object
poses as the tracker gives them.
"""

from __future__ import annotations

from collections.abc import Callable
import math

import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray
from slide_core.model import Primitive, PrimitiveError
from slide_core.planning import Grasp
from slide_core.task import GraspReport, ObjectLost, Observation, PushFailed, PushSamples
from slide_sim.tracker import TRUTH, Tracker, Tracking
from slide_sim.twin import ForceLimitExceeded, PushRecording, Twin


def samples_of(rec: PushRecording, tracker: Tracker | None = None) -> PushSamples:
    """A twin push recording as the task's push samples: every physics step, the object
    poses those ``tracker`` gives (default: the truth at every step)."""
    t_X, X_WO = rec.t, rec.X_WO
    if tracker is not None:
        seen = [
            (float(t), tracker.measured(X, float(t))) for t, X in zip(rec.t, rec.X_WO, strict=True)
        ]
        t_X = np.array([t for t, X in seen if X is not None])
        X_WO = np.array([X for _, X in seen if X is not None]).reshape(-1, 3)
    return PushSamples(
        t_X,
        X_WO,
        rec.t,
        rec.p_WF[:, :2],
        rec.t,
        rec.wrench_W[:, :2],
        float(rec.t[rec.start]),
        float(rec.t[rec.end]),
    )


class TwinWorld:
    """The twin behind the :class:`slide_core.task.World` protocol.

    ``on_push`` is told every push recording (``slide record`` writes them to a bag).
    ``force_limit`` [N] (0: none): a push whose force goes over it stops and retracts, and
    fails as the graph's does on its F/T driver's limit (not to be tried again).
    ``tracking``: how the object's poses are measured, observed and during pushes alike,
    on a tracker seeded with ``seed``."""

    def __init__(
        self,
        twin: Twin,
        on_push: Callable[[PushRecording], None] | None = None,
        force_limit: float = 0.0,
        tracking: Tracking = TRUTH,
        seed: int = 0,
    ) -> None:
        if not (math.isfinite(force_limit) and force_limit >= 0):
            raise SlideInputError(f'force_limit must be >= 0 N (0: none), got {force_limit}')
        self.twin = twin
        self.tracker = None if tracking.perfect else Tracker(tracking, seed)
        self._on_push = on_push
        self.force_limit = force_limit
        self.recordings: list[PushRecording] = []

    def observe(self) -> Observation:
        if self.twin.fell():
            raise ObjectLost('the object fell off the table', fell=True)
        X_WO = self.twin.object_pose()
        if self.tracker is not None:
            X_WO = np.array(self.tracker.noisy(X_WO))
        return Observation(self.twin.spec.grid, X_WO, self.twin.time)

    def push(self, primitive: Primitive, X_WO: FloatArray) -> PushSamples:
        try:
            rec = self.twin.push(
                primitive, np.asarray(X_WO, dtype=float), force_limit=self.force_limit
            )
        except ForceLimitExceeded as exc:
            raise PushFailed(f'push: {exc}', retryable=False) from None
        except PrimitiveError as exc:  # (as the graph's executor refuses it: INVALID_GOAL)
            raise PushFailed(f'push: {exc}', retryable=True) from None
        self.recordings.append(rec)
        if self._on_push is not None:
            self._on_push(rec)
        return samples_of(rec, self.tracker)

    def grasp(self, grasp: Grasp) -> GraspReport:
        outcome = self.twin.grasp(grasp, lift=0.1)
        # Held but tilted in the grip is not a fall (Twin.fell); dropped or left tipped
        # over is.
        fell = outcome.fell or (not outcome.success and self.twin.fell())
        return GraspReport(outcome.success, outcome.lifted_m, fell)
