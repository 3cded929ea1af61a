"""The MIT push loader and predictions on a synthetic file in the dataset's format."""

from __future__ import annotations

from dataclasses import replace
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


def test_a_file_that_is_not_a_push_is_refused_with_its_name(tmp_path):
    path = tmp_path / 'garbage.h5'
    path.write_bytes(b'not hdf5')
    with pytest.raises(SlideInputError, match='garbage.h5: not a readable HDF5 push'):
        load_push(path)
    path = tmp_path / 'flat.h5'
    with h5py.File(path, 'w') as f:
        for name in ('tip_pose', 'object_pose', 'ft_wrench'):
            f[name] = np.arange(4.0)
    with pytest.raises(SlideInputError, match=r'flat.h5: tip_pose has shape \(4,\)'):
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


def square_data(root: Path) -> list:
    """An 8 cm steel square in the dataset's layout and three pushes on it, their 'recorded'
    ends made up so that the tip frictions fit differently."""
    from slide_bringup.bench.mitpush import RealPush

    obj = root / 'obj'
    obj.mkdir()
    np.save(
        obj / 'sq_ext.npy', 0.04 * np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
    )
    (obj / 'sq.urdf').write_text('<link name="link_object"><inertia ixx="0.5" iyy="0.001"/>')
    (obj / 'sq.obj').write_text('v 0.04 0.04 -0.006\nv -0.04 -0.04 0.006\nf 1 2 1\n')
    t = np.arange(0.0, 1.0, 0.004)
    pushes = []
    for i, (offset, end) in enumerate(
        ((0.02, (0.02, 0.004, 0.3)), (-0.01, (0.025, -0.002, -0.1)), (0.0, (0.03, 0.0, 0.0)))
    ):
        p_WT = np.column_stack((-0.05 + 0.04 * t, np.full_like(t, offset)))
        X = np.zeros((len(t), 3))
        X[-1] = end
        pushes.append(RealPush(f'p{i}', 'sq', t, X, p_WT))
    return pushes


def test_the_friction_fits_stop_a_friction_that_cannot_win_and_find_the_grid_minimum(tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    from slide_bringup.bench.mitpush import (
        TIP_RADIUS,
        Fit,
        core_object,
        fit_core,
        fit_limit_surface,
        load_shape,
        predict_core,
    )
    from slide_core.physics import limit_surface

    train = square_data(tmp_path)
    shape = load_shape(tmp_path, 'sq')
    mus = (0.2, 0.6, 0.1, 0.3)
    ls = limit_surface.LimitSurfaceObject.from_outline(shape.outline)
    ls_err = [
        np.mean(
            [
                errors(
                    limit_surface.simulate(ls, p.X_WO[0], p.p_WT, TIP_RADIUS, mu)[-1], p.X_WO[-1]
                )[0]
                for p in train
            ]
        )
        for mu in mus
    ]
    expected = (mus[int(np.argmin(ls_err))], min(ls_err))
    assert fit_limit_surface(tmp_path, train, mus) == pytest.approx(expected)
    with ProcessPoolExecutor(2) as pool:
        assert fit_limit_surface(tmp_path, train, mus, pool) == pytest.approx(expected)

    # Pushes whose recorded ends are the core's own replays at a tip friction of 0.1: the
    # fit finds it, and every other friction is worse after its first push already.
    core = core_object(shape)
    train = [
        replace(p, X_WO=np.vstack((p.X_WO[:-1], predict_core(core, p, np.array([0.25]), 0.1))))
        for p in train
    ]
    said: list[str] = []
    fit = fit_core(tmp_path, train, (0.1, 0.6, 0.2), (0.25,), said.append)
    assert fit == Fit(0.25, 0.1, pytest.approx(0.0, abs=1e-9))
    assert said[1:] == [
        'fit: tip friction 0.600 (2/3): above the best after 1 of 3 pushes',
        'fit: tip friction 0.200 (3/3): above the best after 1 of 3 pushes',
    ]


def test_a_replay_moves_a_tip_start_out_of_the_object_and_no_further(tmp_path):
    from slide_bringup.bench.mitpush import TIP_RADIUS, clear_start, core_object, load_shape

    square_data(tmp_path)
    obj = core_object(load_shape(tmp_path, 'sq'))
    X0 = np.array([0.0, 0.0, 0.0])
    side = -0.04 - TIP_RADIUS  # the tip's centre touching the square's left side
    for start, moved in ((side + 0.0002, side - 1e-6), (side - 0.0003, side - 0.0003)):
        path = np.column_stack((start + np.linspace(0.0, 0.03, 10), np.full(10, 0.01)))
        cleared = clear_start(obj, X0, path)
        assert cleared[0] == pytest.approx([moved, 0.01], abs=1e-9)
        # The whole path moves with its start: the push keeps its length.
        assert np.allclose(cleared - cleared[0], path - path[0])


def test_the_tip_tracking_offset_is_found_from_where_pushing_tips_touch(tmp_path):
    from slide_bringup.bench.mitpush import (
        DT,
        TIP_RADIUS,
        RealPush,
        calibrated,
        fit_tip_offset,
        load_shape,
        tip_offset_samples,
    )

    square_data(tmp_path)
    shapes = {'sq': load_shape(tmp_path, 'sq')}
    offset = np.array([-0.0012, 0.0004])
    t = np.arange(0.0, 1.0, DT)
    pushes = []
    # A tip touching the square's side (its centre TIP_RADIUS out) and carrying it along
    # at 3 cm/s, into three sides in turn, recorded with the offset; half a second still.
    for i, (direction, yaw) in enumerate(
        (((1.0, 0.0), 0.0), ((0.0, 1.0), 0.3), ((-1.0, 0.0), 0.0))
    ):
        d = np.array(direction)
        moved = np.clip(t - 0.5, 0.0, None)[:, None] * 0.03 * d
        X_WO = np.column_stack((moved, np.full(len(t), yaw)))
        side = 0.04 + TIP_RADIUS
        R = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
        p_WT = moved - R @ (d * side) + offset + np.array([0.0, 0.01]) * (1 - abs(d[1]))
        pushes.append(RealPush(f'p{i}', 'sq', t, X_WO, p_WT))
    # Only the time steps in which the object moves count; the offset is found.
    assert len(tip_offset_samples(shapes, pushes)) == pytest.approx(3 * 0.5 / DT, abs=6)
    assert fit_tip_offset(shapes, pushes) == pytest.approx(offset, abs=1e-6)
    assert np.allclose(calibrated(pushes[0], offset).p_WT, pushes[0].p_WT - offset)
    # Pushes into opposite sides along one axis say nothing of the other.
    with pytest.raises(SlideInputError, match='too few directions'):
        fit_tip_offset(shapes, [pushes[0], pushes[2]])


def test_a_tip_start_in_a_notch_is_moved_out_of_both_its_sides(tmp_path, monkeypatch):
    from slide_bringup.bench import mitpush
    from slide_bringup.bench.mitpush import TIP_RADIUS, Shape, clear_start, core_object

    # A square with a wide notch in its left side, apex at (-0.03, 0): a tip in the notch
    # overlaps both of its sides, and moving it off the nearer one presses it into the other.
    outline = np.array(
        [[-0.04, -0.04], [0.04, -0.04], [0.04, 0.04], [-0.04, 0.04], [-0.04, 0.02]]
        + [[-0.03, 0.0], [-0.04, -0.02]]
    )
    obj = core_object(Shape('notched', outline, 0.5, 0.012))
    model = obj.model()
    X0 = np.array([0.0, 0.0, 0.0])  # the outline's box centre is its origin

    def gap(p: np.ndarray) -> float:
        return float(model.contact((p - model.p_OG)[None, :])[2][0]) - TIP_RADIUS

    start = np.array([-0.033, 0.0005])
    path = start + np.column_stack((np.linspace(0.0, 0.02, 10), np.zeros(10)))
    assert gap(start) < -0.001
    cleared = clear_start(obj, X0, path)
    assert 0.0 <= gap(cleared[0]) < 1e-5
    # Out of the notch along its middle, no further than the tip's fit there (5.25 mm from
    # the apex), and the whole path moves with its start.
    assert np.linalg.norm(cleared[0] - [-0.03, 0.0]) < 0.0055
    assert np.allclose(cleared - cleared[0], path - path[0])
    monkeypatch.setattr(mitpush, 'MOVES_OUT', 1)
    with pytest.raises(SlideInputError, match='could not be moved out of the object'):
        clear_start(obj, X0, path)
