"""Perception's compiled per-frame loops give what their numpy and scipy definitions give."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage
from scipy.spatial import cKDTree

from slide_core.geometry import rotation
from slide_core.perception import KeepOut, TablePlane, kernels, to_table_frame


def test_table_frame_keeps_finite_points_with_depth_in_order() -> None:
    rng = np.random.default_rng(0)
    p_K = rng.normal(size=(2000, 3))
    p_K[::7, 2] = 0.0
    p_K[::11, 0] = np.nan
    p_K[::13, 1] = np.inf
    p_K[::17, 2] = np.inf  # (came out as [nan, nan, inf])
    R, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    t = rng.normal(size=3)
    keep = (p_K[:, 2] > 0) & np.isfinite(p_K).all(axis=1)
    np.testing.assert_allclose(to_table_frame(p_K, R, t), p_K[keep] @ R.T + t, atol=1e-14)
    assert to_table_frame(np.zeros((0, 3)), R, t).shape == (0, 3)


def test_nearest_distances_equal_a_kd_tree_query() -> None:
    rng = np.random.default_rng(1)
    lattice = np.stack(np.meshgrid(np.arange(40), np.arange(15)), -1).reshape(-1, 2) * 0.003
    for xy in (
        rng.random((500, 2)) * [0.16, 0.04],
        lattice + rng.normal(0.0, 1e-4, lattice.shape),
        np.vstack((rng.random((50, 2)), [[0.5, 0.5], [0.5, 0.5]])),  # a coincident pair
        np.array([[0.0, 0.0], [0.0, 1.0]]),
        np.array([[0.0, 0.0], [0.1, 0.0]]),  # on a line: no area to size cells by
        np.column_stack((rng.random(200), np.zeros(200))),
        np.zeros((5, 2)),  # all in one place
    ):
        expected = cKDTree(xy).query(xy, k=2)[0][:, 1]
        np.testing.assert_array_equal(kernels.nearest_distances(xy), expected)


def test_crop_keeps_near_points_above_the_table_outside_keep_outs() -> None:
    rng = np.random.default_rng(2)
    p = rng.uniform([-0.2, -0.2, -0.01], [0.2, 0.2, 0.05], (5000, 3))
    table = TablePlane((0.0, 0.0, 1.0), 0.001, 0)
    body = KeepOut((0.02, 0.0, 0.02), 0.012, 0.03)
    near = (p[:, 0] - 0.01) ** 2 + (p[:, 1] + 0.02) ** 2 <= 0.1**2
    expected = near & (table.height(p) >= 0.006) & ~body.contains(p)
    bodies = np.array([[*body.p_W, body.radius, body.half_height]])
    idx = kernels.crop(p, 0.01, -0.02, 0.1, np.array(table.normal), table.offset, 0.006, bodies)
    np.testing.assert_array_equal(idx, np.flatnonzero(expected))


def test_registration_residuals_interpolate_the_field_as_map_coordinates() -> None:
    rng = np.random.default_rng(3)
    field = rng.random((40, 70))
    lo, pitch = np.array([-0.05, -0.03]), 0.0015
    outline = rng.uniform([-0.08, -0.06], [0.08, 0.06], (300, 2))  # some beyond the field
    X = np.array([0.01, -0.005, 0.3])
    out = np.empty(300)
    kernels.register(outline, X, field, lo, pitch, out)
    idx = ((outline - X[:2]) @ rotation(0.3) - lo) / pitch - 0.5
    expected = ndimage.map_coordinates(field, [idx[:, 1], idx[:, 0]], order=1, mode='nearest')
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_table_frame_refuses_a_transform_or_cloud_of_the_wrong_shape() -> None:
    from slide_core.errors import SlideInputError

    p_K = np.array([[0.1, 0.2, 0.5]])
    # A 2 x 2 rotation was read past its end (z came out 1.96e73); a 4 x 4 transform had
    # its translation ignored; x, y, z, intensity rows were regrouped in threes.
    for R, t in ((np.eye(2), np.zeros(3)), (np.eye(4), np.zeros(3)), (np.eye(3), np.zeros(2))):
        with pytest.raises(SlideInputError, match='R_WK must be'):
            to_table_frame(p_K, R, t)
    with pytest.raises(SlideInputError, match='not a rotation'):
        to_table_frame(p_K, 2 * np.eye(3), np.zeros(3))
    with pytest.raises(SlideInputError, match=r'\(N, 3\)'):
        to_table_frame(np.ones((4, 4)), np.eye(3), np.zeros(3))
