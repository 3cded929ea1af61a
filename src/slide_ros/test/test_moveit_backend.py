"""The moveit_py backend's segment execution stops mid-segment when told.

MoveIt is not on the development machines (the backend runs on the robot PC): a stand-in
for MoveItPy takes its place, with the two calls the backend makes of it, ``execute``
(blocking for the segment) and the trajectory execution manager's ``stop_execution``.
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip('rclpy')

from slide_ros.moveit_backend import MoveItBackend  # noqa: E402


class StandInMoveIt:
    """A MoveItPy whose segments last ``segment_s`` unless stopped."""

    def __init__(self, segment_s: float, fail: bool = False) -> None:
        self.segment_s, self.fail = segment_s, fail
        self.stopped = threading.Event()

    def execute(self, trajectory: object, controllers: list[str]) -> None:
        if self.fail:
            raise RuntimeError('controller failed')
        self.stopped.wait(self.segment_s)

    def get_trajactory_execution_manager(self) -> StandInMoveIt:  # sic: MoveItPy's name
        return self

    def stop_execution(self) -> None:
        self.stopped.set()


def backend(moveit: StandInMoveIt) -> MoveItBackend:
    b = MoveItBackend.__new__(MoveItBackend)  # its constructor connects to MoveIt
    b.moveit = moveit
    return b


def test_a_stop_mid_segment_halts_the_controllers_there() -> None:
    # moveit.execute blocked for the whole segment: a cancel or the F/T limit mid-stroke
    # waited for its end (here 30 s).
    moveit = StandInMoveIt(segment_s=30.0)
    t0 = time.monotonic()
    assert backend(moveit)._execute(object(), lambda: time.monotonic() - t0 > 0.2) is False
    assert moveit.stopped.is_set() and time.monotonic() - t0 < 2.0


def test_a_segment_runs_to_its_end_and_a_failure_is_raised() -> None:
    moveit = StandInMoveIt(segment_s=0.1)
    assert backend(moveit)._execute(object(), lambda: False) is True
    assert not moveit.stopped.is_set()
    with pytest.raises(RuntimeError, match='controller failed'):
        backend(StandInMoveIt(0.0, fail=True))._execute(object(), lambda: False)
