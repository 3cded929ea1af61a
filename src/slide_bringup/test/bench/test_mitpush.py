"""The MIT push loader and predictions on a synthetic file in the dataset's format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip('h5py')
from slide_bringup.bench.mitpush import YAW_OFFSET, errors, load_push  # noqa: E402
from slide_core.errors import SlideInputError  # noqa: E402


def write(path: Path, missing: str = '') -> None:
    t = 1000.0 + np.arange(0.0, 1.0, 0.004)
    with h5py.File(path, 'w') as f:
        streams = {
            'tip_pose': np.column_stack((t + 0.001, -0.06 + 0.05 * (t - t[0]), 0 * t, 0 * t)),
            'object_pose': np.column_stack((t + 0.002, 0.01 * (t - t[0]), 0 * t, 0 * t)),
            'ft_wrench': np.column_stack((t, 0 * t + 1.0, 0 * t, 0 * t)),
        }
        for name, data in streams.items():
            if name != missing:
                f[name] = data


def test_streams_on_one_time_base_with_the_yaw_offset(tmp_path):
    path = tmp_path / 'motion_surface=abs_shape=rect1_a=0_v=50_i=0_s=0.5_t=0.h5'
    write(path)
    push = load_push(path)
    assert push.shape == 'rect1'
    assert push.t[0] == 0.0 and push.t[-1] <= 1.0 - 0.002
    assert np.allclose(push.X_WO[:, 2], YAW_OFFSET)
    # Resampled at the common time stamps (the object stream starts 2 ms later).
    assert push.X_WO[0, 0] == pytest.approx(0.0, abs=1e-9)
    assert push.p_WT[0, 0] == pytest.approx(
        -0.06 + 0.05 * 0.001, abs=1e-9
    )  # its clock is 1 ms ahead
    assert errors(push.X_WO[-1], push.X_WO[0]) == pytest.approx((push.X_WO[-1, 0], 0.0))


def test_a_file_without_a_stream_is_refused(tmp_path):
    path = tmp_path / 'broken.h5'
    write(path, missing='ft_wrench')
    with pytest.raises(SlideInputError, match='ft_wrench'):
        load_push(path)


def test_a_shape_has_its_mass_from_the_urdf_and_its_thickness_from_the_mesh(tmp_path):
    from slide_bringup.bench.mitpush import core_object, load_shape

    obj = tmp_path / 'obj'
    obj.mkdir()
    square = 0.04 * np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
    np.save(obj / 'sq_ext.npy', square)
    (obj / 'sq.urdf').write_text('<link name="link_object"><inertia ixx="0.5" iyy="0.001"/>')
    (obj / 'sq.obj').write_text('v 0.04 0.04 -0.006\nv -0.04 -0.04 0.006\nf 1 2 1\n')
    shape = load_shape(tmp_path, 'sq')
    assert shape.mass == 0.5 and shape.thickness == pytest.approx(0.012)
    # The tip covers the whole side: its force acts at mid-thickness.
    assert core_object(shape).push_height == pytest.approx(0.006)
    assert core_object(shape, push_moment=False).push_height == 0.0
    (obj / 'sq.obj').write_text('f 1 2 3\n')
    with pytest.raises(SlideInputError, match='no vertices'):
        load_shape(tmp_path, 'sq')
