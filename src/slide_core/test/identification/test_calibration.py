"""The fingertip's recorded contacts as a check of the calibration: the offset between where
the arm says the fingertip is and where the camera says the object is, read off the pushes
the F/T felt, and taken off the fingertip's path."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from slide_core.geometry import FloatArray, Grid, rotation
from slide_core.identification import (
    WARN_OFFSET_M,
    IdentificationError,
    PushData,
    calibrated_pushes,
    contact_gaps,
    contact_offset,
    fit_contact_offset,
    offset_pushes,
    third_side,
)

SIDES = ('+x', '-x', '+y', '-y')


def test_the_fingertips_offset_is_read_off_pushes_into_four_sides(side_pushes) -> None:  # type: ignore[no-untyped-def]
    grid, radius = side_pushes.grid, side_pushes.radius
    offset = (1.5e-3, -0.8e-3)
    pushes = [side_pushes.data(k, side, offset) for k, side in enumerate(SIDES)]
    found = contact_offset(grid, pushes, radius)
    np.testing.assert_allclose(found.p_offset_W, offset, atol=2e-5)
    assert found.with_bias and abs(found.bias_m) < 2e-5
    assert found.pushes == 4 and found.steps > 4 * 30  # 0.4 s of touch each, 10 ms steps
    assert found.rms_m < 5e-5 < found.raw_rms_m
    # Said, with what to check, above a millimetre; not below it.
    assert 'camera extrinsics' in found.problem()
    done = calibrated_pushes(grid, pushes, radius, take_off=False)
    assert done.problems() == [found.problem()] and not done.taken_off
    assert done.pushes == pushes
    small = [side_pushes.data(k, side, (0.3e-3, 0.2e-3)) for k, side in enumerate(SIDES)]
    assert contact_offset(grid, small, radius).size_m < WARN_OFFSET_M
    done = calibrated_pushes(grid, small, radius)
    assert done.problems() == [] and not done.taken_off and done.pushes == small


def test_a_gap_the_same_on_every_side_is_told_from_the_offset(side_pushes) -> None:  # type: ignore[no-untyped-def]
    # A fingertip 0.7 mm thicker than said: every side's gap 0.7 mm short.
    grid, radius = side_pushes.grid, side_pushes.radius
    pushes = [side_pushes.data(k, side, (1e-3, 0.0)) for k, side in enumerate(SIDES)]
    found = contact_offset(grid, pushes, radius - 0.7e-3)
    np.testing.assert_allclose(found.p_offset_W, [1e-3, 0.0], atol=2e-5)
    assert found.bias_m == pytest.approx(0.7e-3, abs=2e-5)


def test_pushes_into_two_sides_give_the_offset_alone_into_one_nothing(side_pushes) -> None:  # type: ignore[no-untyped-def]
    grid, radius = side_pushes.grid, side_pushes.radius
    two = [side_pushes.data(k, side, (1e-3, 2e-3)) for k, side in enumerate(('+x', '+y'))]
    found = contact_offset(grid, two, radius)
    assert not found.with_bias and found.bias_m == 0.0
    np.testing.assert_allclose(found.p_offset_W, [1e-3, 2e-3], atol=2e-5)
    one = [side_pushes.data(k, '+x', (1e-3, 2e-3)) for k in range(3)]
    with pytest.raises(IdentificationError, match='too few directions'):
        contact_offset(grid, one, radius)
    done = calibrated_pushes(grid, one, radius)  # (nothing to say: not a fault)
    assert done.found is None and 'too few directions' in done.unknown
    assert done.problems() == [] and done.pushes == one


def test_from_two_directions_a_wide_outline_is_said_but_not_taken_off(side_pushes) -> None:  # type: ignore[no-untyped-def]
    # No offset, and every gap 0.8 mm long (an outline drawn that much narrower than the
    # object, or a fingertip thinner than said): from two sides the fit cannot tell this
    # from an offset along their normals' sum, 1.1 mm.
    grid, radius = side_pushes.grid, side_pushes.radius
    two = [side_pushes.data(k, side, (0.0, 0.0)) for k, side in enumerate(('+x', '+y'))]
    found = contact_offset(grid, two, radius - 0.8e-3)
    np.testing.assert_allclose(np.abs(found.p_offset_W), [0.8e-3, 0.8e-3], atol=2e-5)
    assert found.problem() and 'third side' in found.kept()
    done = calibrated_pushes(grid, two, radius - 0.8e-3)
    assert not done.taken_off and done.pushes == two and done.kept == found.kept()
    (line,) = done.problems()
    assert 'camera extrinsics' in line and 'not taken off' in line and 'third side' in line
    # From three sides the same outline is told from a real offset, which is taken off.
    three = [side_pushes.data(k, side, (1e-3, -1e-3)) for k, side in enumerate(SIDES[:3])]
    found = contact_offset(grid, three, radius - 0.8e-3)
    np.testing.assert_allclose(found.p_offset_W, [1e-3, -1e-3], atol=2e-5)
    assert found.bias_m == pytest.approx(0.8e-3, abs=2e-5) and found.kept() == ''
    done = calibrated_pushes(grid, three, radius - 0.8e-3)
    assert done.taken_off and done.kept == ''


def test_the_third_side_faces_away_from_the_two_pushed(side_pushes) -> None:  # type: ignore[no-untyped-def]
    grid, radius = side_pushes.grid, side_pushes.radius
    # Pushed along +x and +y (into the sides facing -x and -y): the side between the two
    # facing away.
    two = [side_pushes.data(k, side) for k, side in enumerate(('+x', '+y'))]
    np.testing.assert_allclose(third_side(grid, two, radius), np.sqrt([0.5, 0.5]), atol=1e-6)
    # With the push into the side it names, the bias is told: the offset is no longer kept.
    pushed = side_pushes.data(2, '-x', (1e-3, -1e-3))
    wide = [side_pushes.data(k, s, (1e-3, -1e-3)) for k, s in enumerate(('+x', '+y'))]
    assert contact_offset(grid, wide, radius - 0.8e-3).kept()
    found = contact_offset(grid, [*wide, pushed], radius - 0.8e-3)
    assert found.kept() == '' and found.bias_m == pytest.approx(0.8e-3, abs=2e-5)
    np.testing.assert_allclose(found.p_offset_W, [1e-3, -1e-3], atol=2e-5)
    # Opposite sides alone: across them.
    opposite = [side_pushes.data(k, s) for k, s in enumerate(('+x', '-x'))]
    assert abs(third_side(grid, opposite, radius)[1]) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(IdentificationError, match='no push touched'):
        third_side(grid, [], radius)


def _turned(side_pushes, index: int, normal_deg: float, offset: FloatArray) -> PushData:  # type: ignore[no-untyped-def]
    """A push along the box's +x, the box and the push turned about its centre so that the
    side pushed faces ``normal_deg`` [deg] (table frame); the fingertip recorded ``offset``
    (2,) [m] off where it was."""
    samples = side_pushes.samples('+x')
    angle = np.radians(normal_deg - 180.0)
    R, p_WC = rotation(angle), np.array([0.4, 0.0])
    X = samples.X_WO.copy()
    X[:, :2] = (X[:, :2] - p_WC) @ R.T + p_WC
    X[:, 2] += angle
    p_WF = (samples.p_WF - p_WC) @ R.T + p_WC + offset
    turned = replace(samples, X_WO=X, p_WF=p_WF, f_W=samples.f_W @ R.T)
    return turned.to_data(side_pushes.grid, index)


def test_the_third_side_is_across_pushes_that_touched_near_one_line(side_pushes) -> None:  # type: ignore[no-untyped-def]
    # As on the pregrasp bench's hammer: touches from directions within 30 degrees of one
    # line, both ways, tell the offset but not the bias (an outline 0.8 mm wide).
    grid, radius = side_pushes.grid, side_pushes.radius - 0.8e-3
    offset = np.array([-4e-3, 1e-3])
    normals = (180.0, 0.0, 200.0, 210.0, 210.0)
    pushes = [_turned(side_pushes, k, a, offset) for k, a in enumerate(normals)]
    before = contact_offset(grid, pushes, radius)
    assert before.kept() and before.problem()
    side = third_side(grid, pushes, radius)
    # Across that line: the side facing away from them all lies on it, and a push into it
    # leaves the bias untold.
    away = -np.sum([[np.cos(np.radians(a)), np.sin(np.radians(a))] for a in normals], axis=0)
    on_line = _turned(side_pushes, 5, float(np.degrees(np.arctan2(away[1], away[0]))), offset)
    assert contact_offset(grid, [*pushes, on_line], radius).kept()
    assert abs(float(side @ away)) / np.linalg.norm(away) < 0.5
    across = _turned(side_pushes, 5, float(np.degrees(np.arctan2(side[1], side[0]))), offset)
    found = contact_offset(grid, [*pushes, across], radius)
    assert found.kept() == '' and found.bias_m == pytest.approx(0.8e-3, abs=5e-5)
    np.testing.assert_allclose(found.p_offset_W, offset, atol=5e-5)


def test_a_few_steps_far_off_do_not_move_the_fit() -> None:
    rng = np.random.default_rng(0)
    angle = rng.uniform(0.0, 2 * np.pi, 400)
    n_W = np.column_stack((np.cos(angle), np.sin(angle)))
    offset = np.array([-1.2e-3, 0.4e-3])
    gaps = n_W @ offset + rng.normal(0.0, 1e-4, 400)
    gaps[:40] += 4e-3  # a tenth: a touch the force reads before the poses
    found = fit_contact_offset(gaps, n_W)
    np.testing.assert_allclose(found.p_offset_W, offset, atol=1e-4)
    with pytest.raises(IdentificationError, match='one of each per step'):
        fit_contact_offset(gaps[:-1], n_W)
    with pytest.raises(IdentificationError, match='radius must be positive'):
        contact_gaps(Grid.from_occupancy(np.ones((2, 2)), 0.02, 0.02), [], 0.0)


def test_an_offset_taken_off_gives_the_pushes_recorded_without_it(side_pushes) -> None:  # type: ignore[no-untyped-def]
    grid, radius = side_pushes.grid, side_pushes.radius
    offset = (0.5e-3, 3e-3)  # along the side: each force's point 3 mm off the middle
    true = [side_pushes.data(k, side, (0.0, 0.0)) for k, side in enumerate(SIDES)]
    off = [side_pushes.data(k, side, offset) for k, side in enumerate(SIDES)]
    felt = true[0].felt
    assert np.abs(off[0].push.p_OA[felt] - true[0].push.p_OA[felt]).max() > 2.9e-3
    mended = offset_pushes(grid, off, contact_offset(grid, off, radius).p_offset_W)
    done = calibrated_pushes(grid, off, radius)  # (the same, as identification takes it off)
    assert done.taken_off and done.problems()[0].endswith('taken off the fingertip before the fit')
    for fixed, want in zip(mended, true, strict=True):
        np.testing.assert_allclose(fixed.push.p_OA, want.push.p_OA, atol=5e-5)
        np.testing.assert_allclose(fixed.p_WF, want.p_WF, atol=5e-5)
        np.testing.assert_array_equal(fixed.push.f_W, want.push.f_W)
    for fixed, want in zip(done.pushes, true, strict=True):
        np.testing.assert_allclose(fixed.push.p_OA, want.push.p_OA, atol=5e-5)
    with pytest.raises(IdentificationError, match='finite'):
        offset_pushes(grid, off, np.array([np.nan, 0.0]))
