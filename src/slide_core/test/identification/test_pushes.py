"""Pushes on identification's step: the observed poses smoothed before differentiation, the
F/T sensor's offset and noise taken from the stroke's free-air start."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.identification import (
    push_from_samples,
    sensor_offset,
    smoothed_poses,
    tracking_noise,
)
from slide_core.model import APPROACH
from slide_core.physics import contact_cell


def motion(t: np.ndarray) -> np.ndarray:
    """A push's poses: at rest, sliding and turning, coming to rest (x, y, yaw)."""
    s = np.clip(t - 0.2, 0.0, None)
    return np.column_stack((0.05 * np.tanh(4 * s), 0.01 * s**2, 0.3 * np.tanh(3 * s) - 1.0))


def test_noise_free_poses_come_out_as_they_went_in() -> None:
    t_obs = np.arange(0.0, 1.5, 0.01)
    t = np.arange(0.0, 1.49, 0.004)
    X = smoothed_poses(t_obs, motion(t_obs), t, t_contact=0.2)
    assert np.abs(X - motion(t)).max() < 5e-5
    # The object was at rest until the contact: no motion before it.
    assert np.all(X[t < 0.2] == motion(t_obs)[0])


def test_tracking_noise_is_not_differentiated_into_the_velocities() -> None:
    rng = np.random.default_rng(0)
    t_obs = np.arange(0.0, 1.5, 1 / 30)
    noise = rng.normal(size=(len(t_obs), 3)) * [2e-4, 2e-4, 2e-3]
    seen = motion(t_obs) + noise
    t = np.arange(0.0, t_obs[-1], 0.01)
    smooth = smoothed_poses(t_obs, seen, t, t_contact=0.2)
    lines = np.column_stack([np.interp(t, t_obs, seen[:, c]) for c in range(3)])
    v_true = np.gradient(motion(t), t, axis=0)
    v_smooth = np.gradient(smooth, t, axis=0)
    v_lines = np.gradient(lines, t, axis=0)
    for c in range(3):
        rms_smooth = np.sqrt(np.mean((v_smooth[:, c] - v_true[:, c]) ** 2))
        rms_lines = np.sqrt(np.mean((v_lines[:, c] - v_true[:, c]) ** 2))
        assert rms_smooth < 0.5 * rms_lines, c
    rms = np.sqrt(np.mean((smooth - motion(t)) ** 2, axis=0))
    assert np.all(rms < 0.5 * np.array([2e-4, 2e-4, 2e-3]))  # nearer the truth than a pose


def test_a_perfect_trackers_sharp_start_is_not_rounded_off() -> None:
    # At rest until 0.2 s, then up to 5 cm/s and 0.2 rad/s within about 20 ms: a push's
    # start, whose accelerations identification fits (cross-validation's smoothing of such
    # noise-free poses missed the speed by 45% there).
    def start(t: np.ndarray) -> np.ndarray:
        s = np.clip(t - 0.2, 0.0, None)
        ramp = s - 0.01 * (1 - np.exp(-s / 0.01))
        return np.column_stack((0.05 * ramp, 0.0 * s, 0.2 * ramp))

    t_obs = np.arange(0.0, 1.0, 0.01)
    t = np.arange(0.0, 0.99, 0.002)
    X = smoothed_poses(t_obs, start(t_obs), t, t_contact=0.2)
    v = np.gradient(X, t, axis=0)
    v_true = np.gradient(start(t), t, axis=0)
    after = (t > 0.2) & (t < 0.3)
    error = np.abs(v - v_true)[after].max(axis=0)
    assert error[0] < 0.3 * 0.05
    assert error[2] < 0.3 * 0.2


def test_the_trackers_noise_is_read_off_the_poses_themselves() -> None:
    rng = np.random.default_rng(1)
    t_obs = np.sort(rng.uniform(0.0, 1.5, 60))  # a tracker's uneven frame times
    sigma = np.array([2e-4, 1e-4, 2e-3])
    noise = tracking_noise(t_obs, motion(t_obs) + rng.normal(size=(60, 3)) * sigma)
    assert noise is not None
    np.testing.assert_allclose(np.sqrt(noise), sigma, rtol=0.3)
    # A perfect tracker's: nothing, though the motion starts sharply at 0.2 s.
    t_100 = np.arange(0.0, 1.5, 0.01)
    assert np.all(np.sqrt(tracking_noise(t_100, motion(t_100))) < 0.02 * sigma)
    assert tracking_noise(t_100[:5], motion(t_100[:5])) is None  # too few to tell


def test_a_tracker_that_holds_still_poses_still_gets_its_motion_smoothed() -> None:
    # At rest for 1.2 s, where the tracker repeats its pose exactly, then noisy motion: the
    # noise is what the moving poses show, not the still ones' none.
    rng = np.random.default_rng(2)
    t_obs = np.arange(0.0, 2.0, 1 / 30)
    sigma = np.array([2e-4, 2e-4, 2e-3])
    noise = rng.normal(size=(len(t_obs), 3)) * sigma * (t_obs > 1.2)[:, None]
    seen = motion(t_obs - 1.0) + noise
    t = np.arange(1.2, t_obs[-1], 0.01)
    smooth = smoothed_poses(t_obs, seen, t, t_contact=1.2)
    lines = np.column_stack([np.interp(t, t_obs, seen[:, c]) for c in range(3)])
    v_true = np.gradient(motion(t - 1.0), t, axis=0)
    for c in range(3):
        rms_smooth = np.sqrt(np.mean((np.gradient(smooth[:, c], t) - v_true[:, c]) ** 2))
        rms_lines = np.sqrt(np.mean((np.gradient(lines[:, c], t) - v_true[:, c]) ** 2))
        assert rms_smooth < 0.5 * rms_lines, c


def test_few_or_repeated_poses_are_joined_by_straight_lines() -> None:
    # (fewer than five bins of SMOOTHING_BIN_S: no spline)
    t_obs = np.array([0.0, 0.1, 0.1, 0.2])
    X_obs = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [9.0, 9.0, 9.0], [2.0, 4.0, 6.0]])
    X = smoothed_poses(t_obs, X_obs, np.array([0.05, 0.15]))
    # The repeated time's poses are averaged.
    np.testing.assert_allclose(X, [[2.5, 2.75, 3.0], [3.5, 4.75, 6.0]])
    with pytest.raises(ValueError):
        smoothed_poses(t_obs[:0], X_obs[:0], np.array([0.0]))


def test_a_push_where_the_outline_cuts_a_corner_acts_on_the_nearest_cell() -> None:
    # Three 2 cm cells in an L, the outline cutting the inner corner at (0, 0) across the
    # empty cell (vertices on occupied cells, as a grid's outline needs).
    occupancy = np.array([[1, 0], [1, 1]], dtype=bool)
    outline = [[-0.02, -0.02], [0.02, -0.02], [0.02, 0.0], [0.0, 0.02], [-0.02, 0.02]]
    grid = Grid(0.02, occupancy, np.full((2, 2), 0.02), outline=np.array(outline))
    t = np.arange(0.0, 0.5, 0.002)
    X = np.tile([0.4, 0.0, 0.0], (len(t), 1))
    u = np.array([1.0, 1.0]) / np.sqrt(2)
    p_WF = np.array([0.41, 0.01]) + u * 0.0079  # pressing on the cut's middle
    f_W = np.tile(-2.0 * u, (len(t), 1))
    pd = push_from_samples(grid, 0, t, X, np.tile(p_WF, (len(t), 1)), f_W, 0.05, 0.4)
    p_OA = pd.push.p_OA[np.linalg.norm(pd.push.f_W, axis=1) > 0]
    assert len(p_OA) > 0
    assert all(contact_cell(grid, p) >= 0 for p in p_OA)
    # The cells' nearest point to the cut's middle (0.01, 0.01): 1 cm away, on a side.
    assert np.linalg.norm(p_OA - [0.01, 0.01], axis=1) == pytest.approx(0.01, abs=1e-9)


RADIUS = 0.006  # m, the fingertip's


def pushed_box(
    offset: tuple[float, float], noise: float, seed: int = 0
) -> tuple[Grid, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """A 4 cm box at (0.4, 0) pushed along +x: the fingertip starts APPROACH short of it at
    t = 0 and moves at 5 cm/s until t = 0.8 s, touching at 0.4 s with 1.5 N; the sensor
    reads the force plus ``offset`` [N] plus white noise of ``noise`` [N], at 500 Hz.
    Returns the grid, the times, poses, fingertip centres, readings and the touch's time."""
    grid = Grid(0.02, np.ones((2, 2), dtype=bool), np.full((2, 2), 0.02))
    t = np.arange(0.0, 1.2, 0.002)
    t_touch = APPROACH / 0.05
    x_tip = 0.38 - RADIUS - APPROACH + 0.05 * np.clip(t, 0.0, 0.8)
    p_WF = np.column_stack((x_tip, np.zeros_like(t)))
    moved = 0.05 * np.clip(np.minimum(t, 0.8) - t_touch, 0.0, None)
    X = np.column_stack((0.4 + moved, np.zeros_like(t), np.zeros_like(t)))
    f = np.where(((t >= t_touch) & (t < 0.8))[:, None], [1.5, 0.0], [0.0, 0.0])
    rng = np.random.default_rng(seed)
    f_W = f + np.asarray(offset) + rng.normal(0.0, noise, f.shape)
    return grid, t, X, p_WF, f_W, t_touch


def test_the_sensors_offset_and_noise_come_from_the_strokes_free_air_start() -> None:
    grid, t, X, p_WF, f_W, t_touch = pushed_box((1.0, -0.6), 0.02)
    found = sensor_offset(np.column_stack((t, f_W)), np.column_stack((t, p_WF)), grid, X[0], 0.0)
    # Until the fingertip's centre is APPROACH from the box: its radius of travel, 0.12 s.
    assert found.samples == pytest.approx(RADIUS / 0.05 / 0.002, abs=1)
    np.testing.assert_allclose(found.f0, [1.0, -0.6], atol=0.01)
    assert found.sigma == pytest.approx(0.02, rel=0.3)
    assert found.touch_n == pytest.approx(5 * found.sigma)
    # A record that starts at the touch has no free air: the sensor is taken as tared.
    late = t >= t_touch
    found = sensor_offset(
        np.column_stack((t[late], f_W[late])),
        np.column_stack((t[late], p_WF[late])),
        grid,
        X[0],
        t_touch,
    )
    assert found.samples == 0
    np.testing.assert_array_equal(found.f0, [0.0, 0.0])


def test_an_untared_sensor_gives_the_push_a_tared_one_gives() -> None:
    grid, t, X, p_WF, f_tared, t_touch = pushed_box((0.0, 0.0), 0.0)
    _, _, _, _, f_offset, _ = pushed_box((1.0, -0.6), 0.02)
    tared = push_from_samples(grid, 0, t, X, p_WF, f_tared, 0.0, 0.8)
    untared = push_from_samples(grid, 0, t, X, p_WF, f_offset, 0.0, 0.8)
    steps = np.arange(len(tared.push.f_W)) * 0.01
    before = steps + 0.01 <= t_touch
    # No force before the touch (the raw readings, 1.17 N, would have been a push), ...
    assert np.all(untared.push.f_W[before] == 0.0)
    assert np.all(tared.push.f_W[before] == 0.0)
    # ... and the same force after it, to the noise averaged over a step (5 readings).
    pushing = (steps >= t_touch + 0.01) & (steps + 0.01 <= 0.8)
    assert np.abs(untared.push.f_W[pushing] - tared.push.f_W[pushing]).max() < 0.05
    np.testing.assert_allclose(tared.push.f_W[pushing], [[1.5, 0.0]] * int(pushing.sum()))


def test_series_in_any_order_give_the_same_push_and_bad_samples_are_left_out() -> None:
    from slide_core.identification import IdentificationError

    grid = Grid.from_occupancy(np.ones((3, 5)), 0.02, 0.02)
    t = np.linspace(0.0, 1.0, 101)
    X = np.column_stack((0.3 + np.clip(t - 0.4, 0, None) * 0.05, 0 * t, 0 * t))
    p = np.column_stack((0.222 + 0.05 * t, 0 * t))
    f = np.column_stack((np.where(t > 0.4, 1.0, 0.0), 0 * t))
    ordered = push_from_samples(grid, 0, t, X, p, f, 0.0, 0.7)
    # Shuffled rows (series merged from two sources) kept 12 of 99 steps and lost every
    # newton; reversed ones were said not to overlap in time.
    for k in (np.random.default_rng(0).permutation(len(t)), np.arange(len(t))[::-1]):
        pd = push_from_samples(grid, 0, t[k], X[k], p[k], f[k], 0.0, 0.7)
        assert pd.push.steps == ordered.push.steps
        np.testing.assert_allclose(pd.push.f_W, ordered.push.f_W)
        np.testing.assert_allclose(pd.X_steps, ordered.X_steps)
    # A NaN pose (a tracking glitch) was blamed on the contact point's shape; it is left
    # out, as any sample that is not finite is.
    X[50, 0] = np.nan
    glitch = push_from_samples(grid, 0, t, X, p, f, 0.0, 0.7)
    keep = np.arange(len(t)) != 50
    without = push_from_samples(grid, 0, t[keep], X[keep], p[keep], f[keep], 0.0, 0.7)
    np.testing.assert_allclose(glitch.X_steps, without.X_steps)
    np.testing.assert_allclose(glitch.push.f_W, ordered.push.f_W)  # its force is kept
    with pytest.raises(IdentificationError, match='time step must be positive'):
        push_from_samples(grid, 0, t, X, p, f, 0.0, 0.7, dt=0.0)
    with pytest.raises(IdentificationError, match='must agree'):
        push_from_samples(grid, 0, t, X, p, f[:, 0], 0.0, 0.7)


@pytest.mark.parametrize(
    ('series', 'lost', 'kept'),
    [
        ('wrench', (0.45, 0.75), (0.5, 0.7)),  # silent mid-stroke: read as no force
        ('object pose', (0.05, 1.2), (0.2, 1.2)),  # the camera lost the whole stroke
        # the arm's state stalled (the executor refuses the push; its bag keeps it)
        ('pusher pose', (0.2, 0.75), (0.3, 0.75)),
    ],
)
def test_a_push_is_not_read_across_a_gap_in_its_forces_or_poses(
    series: str, lost: tuple[float, float], kept: tuple[float, float]
) -> None:
    from slide_core.identification import IdentificationError, build_push

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    poses = np.column_stack((t, X))
    tips = np.column_stack((t, p_WF))
    wrench = np.column_stack((t, f_W))

    def without(a: np.ndarray, gap: tuple[float, float]) -> np.ndarray:
        return a[(a[:, 0] < gap[0]) | (a[:, 0] >= gap[1])]

    def build(gap: tuple[float, float]) -> object:
        cut = {
            'object pose': (without(poses, gap), tips, wrench),
            'pusher pose': (poses, without(tips, gap), wrench),
            'wrench': (poses, tips, without(wrench, gap)),
        }[series]
        return build_push(grid, 3, 0.0, 1.1, *cut, '<test>', 0.01)

    with pytest.raises(IdentificationError, match=f'push 3: no {series} for '):
        build(lost)
    build(kept)  # shorter gaps: within what a loaded machine's streams show


def test_a_push_that_moved_the_object_with_no_force_felt_is_refused() -> None:
    # A dead F/T channel (or one tared in contact) read about 0 N while the box slid 2 cm:
    # its steps were fitted as a push of no force, and the belief was a 1.6 g hammer.
    from slide_core.identification import IdentificationError

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    silent = np.random.default_rng(1).normal(0.0, 0.01, f_W.shape)
    with pytest.raises(IdentificationError, match=r'push 2: the object moved 2\.0 cm while'):
        push_from_samples(grid, 2, t, X, p_WF, silent, 0.0, 0.8)
    # A push that missed (nothing felt, nothing moved) is read as before.
    still = np.tile(X[0], (len(t), 1))
    push_from_samples(grid, 2, t, still, p_WF, silent, 0.0, 0.8)


def test_a_push_felt_with_the_fingertip_far_from_the_object_is_refused() -> None:
    # A fingertip path 30 cm off the object (its poses in another frame) was fitted: the
    # force acted on the nearest cell, and the fit blamed the F/T sensor's frame.
    from slide_core.identification import IdentificationError

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    with pytest.raises(IdentificationError, match=r'push 3: the fingertip is 28\.0 cm from'):
        push_from_samples(grid, 3, t, X, p_WF + [0.0, 0.3], f_W, 0.0, 0.8)
    push_from_samples(grid, 3, t, X, p_WF, f_W, 0.0, 0.8)  # touching it: read


@pytest.mark.parametrize(
    ('glitch', 'what'),
    [
        ((0.03, 0.0, 0.0), 'jumps 30 mm and 0.00 rad'),
        ((0.0, 0.0, np.pi), 'jumps 0 mm and 3.14 rad'),
    ],
)
def test_a_pose_that_jumps_faster_than_a_push_moves_is_refused(
    glitch: tuple[float, float, float], what: str
) -> None:
    # One pose 3 cm off (a tracker's glitch), or turned by pi (a flip of a symmetric
    # outline), was smoothed into the motion and fitted: the centre of mass at the wrong
    # end.
    from slide_core.identification import IdentificationError

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    bad = X.copy()
    bad[300] += glitch
    with pytest.raises(IdentificationError, match=f'push 4: the object pose {what}'):
        push_from_samples(grid, 4, t, bad, p_WF, f_W, 0.0, 0.8)
    push_from_samples(grid, 4, t, X, p_WF, f_W, 0.0, 0.8)


def test_a_push_in_which_the_object_never_moved_is_named_as_adding_nothing() -> None:
    # It was left out of the fit without a word, and listed among the pushes trained on.
    from slide_core.identification import IdentificationError, TrainingSet

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    moving = push_from_samples(grid, 0, t, X, p_WF, f_W, 0.0, 0.8)
    still_X = np.tile(X[0], (len(t), 1))
    missed = push_from_samples(grid, 3, t, still_X, p_WF, np.zeros_like(f_W), 0.0, 0.8)
    assert TrainingSet.from_pushes(grid, [moving, missed]).still == (3,)
    assert TrainingSet.from_pushes(grid, [moving]).still == ()
    with pytest.raises(IdentificationError, match='did they touch it, and can they move it'):
        TrainingSet.from_pushes(grid, [missed])


def test_no_step_up_to_the_touch_is_fitted_as_sliding() -> None:
    # The box rests until the fingertip touches it: the smoothed velocities carried its
    # motion back into the steps before, which were fitted as sliding against no force.
    from slide_core.identification import TrainingSet

    grid, t, X, p_WF, f_W, t_touch = pushed_box((0.0, 0.0), 0.0)
    push = push_from_samples(grid, 0, t, X, p_WF, f_W, 0.0, 0.8)
    assert push.touch_step == pytest.approx(t_touch / push.push.dt, abs=1.0)  # the touch's
    train = TrainingSet.from_pushes(grid, [push])
    assert train.w[0, 0] > 1.0  # the first step fitted already feels the 1.5 N push
    # The true maps (sliding friction 1.5 N) explain the push: only the instant start and
    # stop of this made-up motion are left (the steps before the touch doubled it).
    m = np.full(grid.n, 0.05)
    mu = np.full(grid.n, 1.5 / (m.sum() * 9.81))
    assert train.loss(m, mu)[0] < 0.08 * train.wrench_square


def test_the_touch_step_knows_the_share_of_it_after_the_first_force_felt() -> None:
    # Identification gives the touch step sliding friction for that share only.
    grid, t, X, p_WF, f_W, t_touch = pushed_box((0.0, 0.0), 0.0)
    on_time = push_from_samples(grid, 0, t, X, p_WF, f_W, 0.0, 0.8)
    assert on_time.touch_step == 40 and on_time.touch_share == pytest.approx(1.0)
    f_W[t < 0.4065] = 0.0  # the first force felt at 0.408 s, in the step from 0.40 to 0.41 s
    late = push_from_samples(grid, 0, t, X, p_WF, f_W, 0.0, 0.8)
    assert late.touch_step == 40 and late.touch_share == pytest.approx(0.2)


def test_steps_pressed_by_a_fingertip_coming_to_rest_are_not_fitted_as_sliding() -> None:
    # At a stroke's end the fingertip slows to a stop and still presses, below the sliding
    # friction: the object comes to rest. Tracked poses smoothed through the stop said it
    # crept on at a few mm/s, and those steps were fitted as sliding: on the twin's pushes
    # tracked at 30 Hz they held half the true maps' loss.
    from slide_core.identification import TrainingSet
    from slide_core.identification.training import SLOW_TIP

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    stroke = TrainingSet.from_pushes(grid, [push_from_samples(grid, 0, t, X, p_WF, f_W, 0.0, 0.8)])
    held = t >= 0.8
    tau = 0.1  # the fingertip's speed (5 cm/s) falls by e every 0.1 s
    slowing = 0.05 * tau * (1.0 - np.exp(-(t[held] - 0.8) / tau))
    p_WF[held, 0] += slowing
    X[held, 0] += slowing
    f_W[held] = [1.0, 0.0]  # 1 N: static friction, below the 1.5 N of sliding
    X[held, 1] += 0.005 * (t[held] - 0.8)  # the tracked pose creeps sideways at 5 mm/s
    push = push_from_samples(grid, 0, t, X, p_WF, f_W, 0.0, 1.2)
    assert push.felt[-1] and push.fingertip_speed[-1] < 0.002
    train = TrainingSet.from_pushes(grid, [push])
    # Fitted: the stroke, and the steps until the fingertip is below SLOW_TIP of its speed.
    assert train.steps <= stroke.steps + math.ceil(tau * math.log(1 / SLOW_TIP) / 0.01)
    m = np.full(grid.n, 0.05)
    mu = np.full(grid.n, 1.5 / (m.sum() * 9.81))
    assert train.loss(m, mu)[0] < 0.08 * train.wrench_square


def test_times_in_the_wrong_unit_are_suspected_aloud() -> None:
    # Milliseconds read as seconds: 'no object pose for 10.00 s from 2250.00 s after its
    # start', with no word of the unit.
    from slide_core.identification import IdentificationError

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    with pytest.raises(IdentificationError, match=r'are its times in seconds\?'):
        push_from_samples(grid, 1, t * 1000, X, p_WF, f_W, 0.0, 800.0)
    with pytest.raises(IdentificationError, match=r'two steps \(are its times in seconds\?\)'):
        push_from_samples(grid, 1, t / 1e6, X, p_WF, f_W, 0.0, 0.8e-6)


def test_steps_with_the_object_over_the_edge_carry_only_the_cells_on_the_table() -> None:
    from slide_core.identification import IdentificationError, TrainingSet

    grid, t, X, p_WF, f_W, _ = pushed_box((0.0, 0.0), 0.0)
    shift = np.array([-0.39, 0.0])  # the box starts with its back column half over x = 0
    edge = push_from_samples(grid, 0, t, X + np.append(shift, 0.0), p_WF + shift, f_W, 0.0, 0.8)
    train = TrainingSet.from_pushes(grid, [edge])
    assert train.supported is not None and train.over_edge[0] and not train.over_edge[-1]
    back = grid.p_OC[:, 0] < 0.0
    first = train.supported[0]
    assert np.all(first[~back] == 1.0) and np.all((first[back] > 0.5) & (first[back] < 1.0))
    assert np.all(train.supported[~train.over_edge] == 1.0)
    # In another frame than the table's, or pushed well away from the edge: all carried.
    assert TrainingSet.from_pushes(grid, [edge], table_edge=False).supported is None
    on_table = push_from_samples(grid, 0, t, X, p_WF, f_W, 0.0, 0.8)
    assert TrainingSet.from_pushes(grid, [on_table]).supported is None
    off = push_from_samples(grid, 0, t, X - [0.5, 0.0, 0.0], p_WF - [0.5, 0.0], f_W, 0.0, 0.8)
    with pytest.raises(IdentificationError, match='wholly off the table'):
        TrainingSet.from_pushes(grid, [off])
