"""The pregrasp bench's jobs: a Ctrl-C or SIGTERM keeps the episodes done."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from slide_bringup.bench import pregrasp


def nap(seconds: float) -> dict[str, float]:
    time.sleep(seconds)
    return {'slept': seconds}


def test_a_stopped_run_keeps_the_jobs_done_and_ends_its_workers() -> None:
    # Every episode done was lost with the interrupt (up to 19 minutes of them), and a
    # SIGTERM, which only the bench's own process hears, left its workers running on.
    def interrupt(_message: str) -> None:
        raise KeyboardInterrupt  # as the first job's row comes in

    t0 = time.monotonic()
    with pytest.raises(pregrasp.Stopped) as stop:
        pregrasp.map_jobs(nap, [0.01, 60.0, 60.0], 2, interrupt, 'job')
    assert stop.value.rows == [{'slept': 0.01}]
    end = time.monotonic() + 10.0
    while multiprocessing.active_children() and time.monotonic() < end:
        time.sleep(0.05)
    assert multiprocessing.active_children() == []
    assert time.monotonic() - t0 < 50.0  # the 60 s jobs were not waited for


def crash(job: tuple[object, ...]) -> dict[str, object]:
    name, seed, method = job[:3]
    return {'object': name, 'seed': seed, 'method': method, 'error': "RuntimeError('boom')"}


def test_episodes_that_crashed_make_the_run_a_failed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every episode crashing read as a run that went well: exit 0.
    monkeypatch.setattr(pregrasp, '_episode', crash)
    result = pregrasp.run(['box'], ['uniform'], seeds=2, planning_trials=0, workers=1)
    assert result['ok'] is False and result['methods']['uniform']['errors'] == 2
    assert result['reason'].startswith('2 of 2 episode(s) ended in an error, the first: Runtime')


def say_tracking(*args: object, **kwargs: object) -> None:
    """An episode that says the tracking it was given (from a worker process: as its error)."""
    raise RuntimeError(f'tracking {kwargs.get("tracking")}')


def test_the_episodes_observe_poses_as_the_tracking_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slide_sim.tracker import PERCEPTION

    monkeypatch.setattr(pregrasp, 'run_episode', say_tracking)
    result = pregrasp.run(
        ['box'], ['uniform'], seeds=1, planning_trials=0, workers=1, tracking=PERCEPTION
    )
    assert f'tracking {PERCEPTION}' in result['episodes'][0]['error']
    assert result['pose_tracking'] == pytest.approx(
        {'hz': 30.0, 'noise_mm': 0.15, 'noise_deg': 0.05}
    )


def offsets(job: tuple[object, ...]) -> dict[str, object]:
    """An episode whose exploration told the contact offset on seeds 1 and 2 and took it off
    on seed 2 only (seed 1's pushes touched from two directions)."""
    from slide_bringup.episode import EpisodeResult

    name, seed, method = job[:3]
    r = EpisodeResult(str(name), int(str(seed)), str(method), success=True, pushes=3)
    if seed in (1, 2):
        r.contact_offset_m = [-5e-3, 0.0]
    if seed == 2:
        r.contact_offset_taken_off_m = [-5e-3, 0.0]
    return r.to_dict()


def test_the_bench_counts_the_offsets_told_and_taken_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bench said how far off its beliefs were, not whether the camera's offset had been
    # taken off the poses they were identified from.
    monkeypatch.setattr(pregrasp, '_episode', offsets)
    result = pregrasp.run(['box'], ['uniform'], seeds=3, planning_trials=0, workers=1)
    counts = result['methods']['uniform']
    assert counts['contact_offsets_measured'] == 2 and counts['contact_offsets_taken_off'] == 1
