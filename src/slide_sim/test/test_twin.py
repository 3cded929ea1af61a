"""The MuJoCo twin: objects, pushes, falling, the F/T sensor, grasping."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.model import library_names, load_object, parse_spec
from slide_sim.twin import LIFT_Z, Twin, contour_point, exploration

UNIFORM_BOX = parse_spec(
    {
        'name': 'uniform_box',
        'cell_size': 0.02,
        'height': 0.04,
        'mass': [[0.01] * 6] * 4,
        'friction': [[0.4] * 6] * 4,
    }
)


@pytest.mark.parametrize('name', library_names())
def test_each_library_object_rests_on_the_table(name: str) -> None:
    twin = Twin(load_object(name), (0.35, 0.0, 0.3))
    twin.settle(0.3)
    assert not twin.fell()
    assert abs(twin.object_height()) < 1e-3
    np.testing.assert_allclose(twin.object_pose(), [0.35, 0.0, 0.3], atol=1e-3)


def test_centred_push_on_a_uniform_box_moves_it_straight() -> None:
    twin = Twin(UNIFORM_BOX, (0.35, 0.0, 0.0))
    rec = twin.push((-0.06, 0.0), (1.0, 0.0), travel=0.05, speed=0.05)
    start, end = rec.X_WO[0], rec.X_WO[-1]
    assert end[0] - start[0] > 0.03
    assert abs(end[1] - start[1]) < 2e-3
    assert abs(end[2] - start[2]) < math.radians(1.0)
    assert rec.start < rec.end and not rec.fell


def test_an_object_pushed_past_the_edge_falls_and_the_twin_says_so() -> None:
    twin = Twin(UNIFORM_BOX, (0.07, 0.0, 0.0))
    assert not twin.fell()
    rec = twin.push((0.06, 0.0), (-1.0, 0.0), travel=0.12, speed=0.1)
    twin.settle(0.5)
    assert twin.fell() and rec.X_WO[-1, 0] < 0.07
    assert twin.ground_truth()['fell'] is True


def test_ft_sensor_reads_the_fingertip_contact_force() -> None:
    twin = Twin(load_object('box'), (0.35, 0.0, 0.0))
    # Drive the stroke by hand to compare both signals at every step.
    twin._move(np.array([0.35 - 0.09 - 0.02, 0.0, LIFT_Z - twin.tip_z]), 0.3)
    twin._move(np.array([0.35 - 0.09 - 0.02, 0.0, 0.0]), 0.1)
    start = np.array(twin.data.ctrl[:3])
    sensed, contact = [], []
    for k in range(500):
        twin.data.ctrl[:3] = start + np.array([0.05 * twin.model.opt.timestep * k, 0.0, 0.0])
        mujoco.mj_step(twin.model, twin.data)
        sensed.append(twin.wrench()[:3])
        contact.append(twin.contact_force())
    sensed, contact = np.array(sensed), np.array(contact)
    pushing = np.linalg.norm(contact, axis=1) > 0.5
    assert pushing.sum() > 100
    error = np.linalg.norm(sensed[pushing] - contact[pushing], axis=1)
    assert np.median(error) < 0.02 * np.median(np.linalg.norm(contact[pushing], axis=1))


def test_gripper_lifts_an_overhang() -> None:
    book = load_object('book')  # 22 cm long: 4 cm past the edge at x = 0.07
    twin = Twin(book, (0.07, 0.0, 0.0))
    result = twin.grasp((-0.005, 0.0), yaw=0.0, lift=0.1)
    assert result.success and result.lifted_m > 0.08


def test_exploration_is_reproducible_from_a_seed() -> None:
    hammer = load_object('hammer')
    _, a = exploration(hammer, 2, seed=7)
    _, b = exploration(hammer, 2, seed=7)
    _, c = exploration(hammer, 2, seed=8)
    for ra, rb in zip(a, b, strict=True):
        np.testing.assert_array_equal(ra.X_WO, rb.X_WO)
        np.testing.assert_array_equal(ra.wrench_W, rb.wrench_W)
    assert not np.array_equal(a[0].contact_O, c[0].contact_O)


def test_contour_points_lie_on_the_outline_with_inward_normals() -> None:
    spec = load_object('crimp')
    rng = np.random.default_rng(0)
    half = spec.grid.cell_size / 2
    for _ in range(50):
        p, n_in = contour_point(spec, rng)
        inside = p + n_in * 1e-4
        outside = p - n_in * 1e-4
        in_cell = np.any(np.all(np.abs(spec.grid.p_OC - inside) <= half, axis=1))
        out_cell = np.any(np.all(np.abs(spec.grid.p_OC - outside) <= half, axis=1))
        assert in_cell and not out_cell


def test_bad_requests_are_refused() -> None:
    twin = Twin(UNIFORM_BOX)
    with pytest.raises(SlideInputError, match='travel and speed'):
        twin.push((-0.06, 0.0), (1.0, 0.0), travel=0.0)
    with pytest.raises(SlideInputError, match='non-zero'):
        twin.push((-0.06, 0.0), (0.0, 0.0), travel=0.05)
    with pytest.raises(SlideInputError, match='finite'):
        Twin(UNIFORM_BOX, (float('nan'), 0.0, 0.0))
