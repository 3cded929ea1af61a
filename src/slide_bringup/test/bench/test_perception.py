"""The perception benchmark's figures on one real twin scene (rendered camera, a push)."""

from __future__ import annotations

import numpy as np

from slide_bringup.bench.perception import compose, footprint_iou, inverse, run
from slide_core.geometry import Grid


def test_iou_of_placed_grids():
    grid = Grid.from_occupancy(np.ones((2, 4)), 0.02)
    X = np.array([0.3, 0.1, 0.5])
    assert footprint_iou(grid, X, grid, X) > 0.99
    shifted = X + [0.02, 0.0, 0.0]  # along the grid's x (turned by 0.5 rad): 1/4 of 8 cm
    moved = compose(X, np.array([0.02, 0.0, 0.0]))
    assert abs(footprint_iou(grid, X, grid, moved) - 6 / 10) < 0.02
    assert footprint_iou(grid, X, grid, shifted) < 0.9
    assert np.allclose(compose(inverse(X), X), 0.0, atol=1e-12)


def test_hammer_scene_tracked_during_a_push():
    result = run(['hammer'], poses=1, seed=3)
    assert result['frames'] > 20
    assert result['poor_registrations'] == 0
    assert result['footprint_iou']['worst'] >= 0.85
    assert result['pose_error_mm']['worst'] <= 3.0
    assert result['pose_error_deg']['worst'] <= 1.0
