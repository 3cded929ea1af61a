from __future__ import annotations

import math

import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.model import Primitive, load_object
from slide_sim.tracker import PERCEPTION, TRUTH, Tracker, Tracking
from slide_sim.twin import Twin
from slide_sim.world import TwinWorld


def test_a_tracker_gives_poses_at_its_rate_with_its_noise() -> None:
    tracker = Tracker(Tracking(30.0, 0.5e-3, math.radians(0.2)), seed=3)
    X = np.array([0.3, -0.1, 1.0])
    t = np.arange(0.0, 10.0, 0.002)  # the twin's physics steps, 10 s
    seen = [(k, tracker.measured(X, float(s))) for k, s in enumerate(t)]
    poses = np.array([p for _, p in seen if p is not None])
    assert len(poses) == pytest.approx(300, abs=2)
    error = poses - X
    assert np.std(error[:, :2]) == pytest.approx(0.5e-3, rel=0.1)
    assert np.std(error[:, 2]) == pytest.approx(math.radians(0.2), rel=0.1)
    assert abs(float(np.mean(error[:, 0]))) < 1e-4
    # The same seed, the same noise; another, another.
    again = Tracker(Tracking(30.0, 0.5e-3, math.radians(0.2)), seed=3)
    assert again.noisy(X) == Tracker(again.tracking, seed=3).noisy(X)
    assert Tracker(again.tracking, seed=4).noisy(X) != Tracker(again.tracking, seed=3).noisy(X)


def test_tracking_out_of_range_is_refused_with_what_it_takes() -> None:
    with pytest.raises(SlideInputError, match='pose rate must be 2 to 100 Hz'):
        Tracking.of(500.0, 0.0, 0.0)
    with pytest.raises(SlideInputError, match='noise in x and y must be 0 to 10 mm'):
        Tracking.of(30.0, 20.0, 0.0)
    with pytest.raises(SlideInputError, match='noise in yaw'):
        Tracking.of(30.0, 0.1, float('nan'))
    assert TRUTH.perfect and not PERCEPTION.perfect and not Tracking(30.0).perfect


def test_the_twin_world_observes_and_records_pushes_through_its_tracker(workcell) -> None:  # type: ignore[no-untyped-def]
    spec = load_object('box')
    push = Primitive.create((-0.06, 0.0), (1.0, 0.0), travel=0.04, speed=0.05)
    tracking = Tracking.of(30.0, 1.0, 0.5)  # noisier than perception: seen above rounding
    truth_world = TwinWorld(Twin(spec, workcell, (0.35, 0.0, 0.0)))
    world = TwinWorld(Twin(spec, workcell, (0.35, 0.0, 0.0)), tracking=tracking, seed=1)
    # By default the truth itself, at every physics step.
    seen = truth_world.observe().X_WO
    np.testing.assert_array_equal(seen, truth_world.twin.object_pose())
    exact = truth_world.push(push, seen)
    assert len(exact.t_X) == len(exact.t_F)
    # Tracked: the same push (the twin is deterministic), its poses a tracker's.
    observed = world.observe().X_WO
    off = observed - world.twin.object_pose()
    assert 0.0 < np.linalg.norm(off[:2]) < 0.005 and 0.0 < abs(off[2]) < math.radians(3.0)
    tracked = world.push(push, observed)
    # Placed from the pose it saw: the fingertip and F/T at every step, as before.
    assert len(tracked.t_F) == len(tracked.t_f) == len(exact.t_F)
    assert np.abs(tracked.p_WF - exact.p_WF).max() < 0.005
    gaps = np.diff(tracked.t_X)
    assert np.median(gaps) == pytest.approx(1 / 30, abs=0.003)
    rec = world.recordings[-1]  # the twin's truth of this push
    truth_then = np.column_stack([np.interp(tracked.t_X, rec.t, rec.X_WO[:, c]) for c in range(3)])
    error = tracked.X_WO - truth_then
    assert np.std(error[:, :2]) == pytest.approx(1e-3, rel=0.35)
    assert np.std(error[:, 2]) == pytest.approx(math.radians(0.5), rel=0.35)
    # The object moved, and the tracked poses say so.
    assert tracked.X_WO[-1, 0] - tracked.X_WO[0, 0] > 0.01


def test_a_tracking_says_its_rate_and_noise_in_the_command_lines_units() -> None:
    figures = Tracking.of(30.0, 0.15, 0.05).figures()
    assert figures == pytest.approx({'hz': 30.0, 'noise_mm': 0.15, 'noise_deg': 0.05})
    # With an offset, and saying it.
    figures = Tracking.of(30.0, 0.0, 0.0, (2.0, -1.0)).figures()
    assert figures['offset_x_mm'] == pytest.approx(2.0)
    assert figures['offset_y_mm'] == pytest.approx(-1.0)


def test_a_camera_whose_extrinsics_are_off_shows_as_the_fingertips_contact_offset(
    workcell,  # type: ignore[no-untyped-def]
) -> None:
    # Every pose 2 mm off in x and -1 mm in y; the fingertip goes where it is commanded, from
    # the pose the camera gave, so it touches each side off where the task aimed.
    from slide_core.identification import contact_offset

    tracking = Tracking.of(100.0, 0.0, 0.0, (2.0, -1.0))
    assert not tracking.perfect
    spec = load_object('box')
    world = TwinWorld(Twin(spec, workcell, (0.35, 0.0, 0.0)), tracking=tracking)
    seen = world.observe().X_WO
    np.testing.assert_allclose(seen - world.twin.object_pose(), [2e-3, -1e-3, 0.0], atol=1e-12)
    grid = spec.grid
    half = grid.p_OC.max(axis=0) + grid.cell_size / 2  # (x, y) half sizes of the box
    np.testing.assert_allclose(grid.p_OC.min(axis=0) - grid.cell_size / 2, -half)
    pushes = []
    for k, d in enumerate(((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0))):
        at = -np.asarray(d) * half  # the middle of the side that faces the fingertip
        push = Primitive.create(tuple(at), d, travel=0.02, speed=0.05)
        samples = world.push(push, world.observe().X_WO)
        pushes.append(samples.to_data(grid, k))
    found = contact_offset(grid, pushes, workcell.fingertip.radius)
    # The recorded fingertip, relative to the object, sits the camera's offset back.
    np.testing.assert_allclose(found.p_offset_W, [-2e-3, 1e-3], atol=3e-4)
    assert 'camera extrinsics' in found.problem()
    with pytest.raises(SlideInputError, match=r'at most 20 mm long, got \(15, 15\) mm'):
        Tracking.of(30.0, 0.0, 0.0, (15.0, 15.0))
    assert Tracking(offset_m=[0.0, 0.0]).perfect  # type: ignore[arg-type]
