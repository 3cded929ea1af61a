"""The fingertip's recorded contacts as a check of the calibration: the offset between where
the arm says the fingertip is and where the camera says the object is, read off the pushes
the F/T felt, and taken off the fingertip's path."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.identification import (
    WARN_OFFSET_M,
    IdentificationError,
    PushData,
    contact_gaps,
    contact_offset,
    contact_problems,
    fit_contact_offset,
    offset_pushes,
    push_from_samples,
)
from slide_core.model import APPROACH

RADIUS = 0.008  # m, the fingertip's
HALF = 0.02  # m, the box's half side
SIDES = {'+x': (1.0, 0.0), '-x': (-1.0, 0.0), '+y': (0.0, 1.0), '-y': (0.0, -1.0)}


def box() -> Grid:
    """A 4 cm square box of 2 cm cells (no outline: the cells' squares are the object)."""
    return Grid(0.02, np.ones((2, 2), dtype=bool), np.full((2, 2), 0.02))


def pushed(grid: Grid, index: int, side: str, tip_offset: tuple[float, float]) -> PushData:
    """The box at (0.4, 0) pushed through its centre along SIDES[side] at 5 cm/s, touching
    at 0.4 s with 1.5 N until the stroke ends at 0.8 s; the fingertip recorded
    ``tip_offset`` [m] off where it was."""
    d = np.array(SIDES[side])
    t = np.arange(0.0, 1.2, 0.002)
    travel = 0.05 * np.clip(t, 0.0, 0.8)
    start = np.array([0.4, 0.0]) - d * (HALF + RADIUS + APPROACH)
    p_WF = start + travel[:, None] * d + np.asarray(tip_offset)
    moved = 0.05 * np.clip(np.minimum(t, 0.8) - APPROACH / 0.05, 0.0, None)
    X = np.column_stack((0.4 + moved * d[0], moved * d[1], np.zeros_like(t)))
    touching = (t >= APPROACH / 0.05) & (t < 0.8)
    f_W = np.where(touching[:, None], 1.5 * d, 0.0)
    return push_from_samples(grid, index, t, X, p_WF, f_W, 0.0, 0.8)


def test_an_offset_between_fingertip_and_object_is_read_off_pushes_from_four_sides() -> None:
    grid = box()
    offset = (1.5e-3, -0.8e-3)
    pushes = [pushed(grid, k, side, offset) for k, side in enumerate(SIDES)]
    found = contact_offset(grid, pushes, RADIUS)
    np.testing.assert_allclose(found.p_offset_W, offset, atol=2e-5)
    assert found.with_bias and abs(found.bias_m) < 2e-5
    assert found.pushes == 4 and found.steps > 4 * 30  # 0.4 s of touch each, 10 ms steps
    assert found.rms_m < 5e-5 < found.raw_rms_m
    # Said, with what to check, above a millimetre; not below it.
    assert 'camera extrinsics' in found.problem()
    assert contact_problems(grid, pushes, RADIUS) == [found.problem()]
    small = [pushed(grid, k, side, (0.3e-3, 0.2e-3)) for k, side in enumerate(SIDES)]
    assert contact_offset(grid, small, RADIUS).size_m < WARN_OFFSET_M
    assert contact_problems(grid, small, RADIUS) == []


def test_a_gap_the_same_on_every_side_is_told_from_the_offset() -> None:
    # A fingertip 0.7 mm thicker than said: every side's gap 0.7 mm short.
    grid = box()
    pushes = [pushed(grid, k, side, (1e-3, 0.0)) for k, side in enumerate(SIDES)]
    found = contact_offset(grid, pushes, RADIUS - 0.7e-3)
    np.testing.assert_allclose(found.p_offset_W, [1e-3, 0.0], atol=2e-5)
    assert found.bias_m == pytest.approx(0.7e-3, abs=2e-5)


def test_pushes_into_two_sides_give_the_offset_alone_and_into_one_side_nothing() -> None:
    grid = box()
    two = [pushed(grid, k, side, (1e-3, 2e-3)) for k, side in enumerate(('+x', '+y'))]
    found = contact_offset(grid, two, RADIUS)
    assert not found.with_bias and found.bias_m == 0.0
    np.testing.assert_allclose(found.p_offset_W, [1e-3, 2e-3], atol=2e-5)
    one = [pushed(grid, k, '+x', (1e-3, 2e-3)) for k in range(3)]
    with pytest.raises(IdentificationError, match='too few directions'):
        contact_offset(grid, one, RADIUS)
    assert contact_problems(grid, one, RADIUS) == []  # (nothing to say: not a fault)


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
        contact_gaps(box(), [], 0.0)


def test_an_offset_taken_off_gives_the_pushes_recorded_without_it() -> None:
    grid = box()
    offset = (0.5e-3, 3e-3)  # along the side: each force's point 3 mm off the middle
    true = [pushed(grid, k, side, (0.0, 0.0)) for k, side in enumerate(SIDES)]
    off = [pushed(grid, k, side, offset) for k, side in enumerate(SIDES)]
    felt = true[0].felt
    assert np.abs(off[0].push.p_OA[felt] - true[0].push.p_OA[felt]).max() > 2.9e-3
    mended = offset_pushes(grid, off, contact_offset(grid, off, RADIUS).p_offset_W)
    for fixed, want in zip(mended, true, strict=True):
        np.testing.assert_allclose(fixed.push.p_OA, want.push.p_OA, atol=5e-5)
        np.testing.assert_allclose(fixed.p_WF, want.p_WF, atol=5e-5)
        np.testing.assert_array_equal(fixed.push.f_W, want.push.f_W)
    with pytest.raises(IdentificationError, match='finite'):
        offset_pushes(grid, off, np.array([np.nan, 0.0]))
