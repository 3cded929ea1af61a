"""A twin bag read back as wrench-driven pushes (slide_core.bag), the ground truth apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slide_core.bag import parse_range, read_ground_truth, read_pushes
from slide_core.errors import SlideInputError
from slide_core.model import load_object
from slide_core.physics import contact_cell
from slide_sim.record import record


@pytest.fixture(scope='module')
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp('bags') / 'box'
    record(load_object('box'), 3, seed=2, out=path)
    return path


def test_pushes_replay_measured_forces_at_the_contact(bag: Path) -> None:
    grid, pushes = read_pushes(bag, [0, 2])
    assert [p.index for p in pushes] == [0, 2] and grid.n == 54
    for p in pushes:
        force = np.linalg.norm(p.push.f_W, axis=1)
        assert (force > 0.5).sum() > 50  # the stroke pushed
        assert all(contact_cell(grid, c) >= 0 for c in p.push.p_OC[force > 0])
        assert np.all(np.diff(p.obs_steps) >= 0) and p.obs_steps[-1] <= p.push.steps
        np.testing.assert_allclose(p.X_WO0, p.X_obs[0], atol=1e-9)
        assert p.p_WF.shape == (p.push.steps + 1, 2)
        # The fingertip path covers the stroke (3 to 7 cm plus the approach).
        assert np.linalg.norm(p.p_WF[-1] - p.p_WF[0]) > 0.03


def test_ground_truth_is_read_separately(bag: Path) -> None:
    truth = read_ground_truth(bag)
    assert truth is not None and truth.name == 'box'
    np.testing.assert_allclose(truth.mass, load_object('box').mass, atol=1e-9)


def test_bad_bags_and_ranges_give_clear_errors(bag: Path, tmp_path: Path) -> None:
    assert parse_range('0-2,5') == [0, 1, 2, 5]
    with pytest.raises(SlideInputError, match='not like'):
        parse_range('3-1')
    with pytest.raises(SlideInputError, match='has pushes 0-2'):
        read_pushes(bag, [7])
    with pytest.raises(SlideInputError, match='no such bag'):
        read_pushes(tmp_path / 'absent')


def test_pushes_from_memory_are_the_recorded_push() -> None:
    # The episode builds its training pushes from the twin's recordings directly, with the
    # same conversion as read_pushes.
    from slide_core.bag import SETTLE_S, push_from_samples
    from slide_sim.twin import exploration

    spec = load_object('box')
    _, (rec,) = exploration(spec, 1, seed=2)
    t0, t1 = float(rec.t[rec.start]), float(rec.t[rec.end])
    mem = push_from_samples(spec.grid, 0, rec.t, rec.X_WO, rec.p_WF, rec.wrench_W, t0, t1)
    np.testing.assert_allclose(mem.X_WO0, rec.X_WO[rec.start], atol=1e-9)
    assert abs(mem.push.steps - (t1 + SETTLE_S - t0) / mem.push.dt) <= 1
    window = (rec.t >= t0) & (rec.t < t0 + mem.push.steps * mem.push.dt)
    impulse = rec.wrench_W[window, :2].sum(axis=0) * float(np.mean(np.diff(rec.t)))
    np.testing.assert_allclose(mem.push.f_W.sum(axis=0) * mem.push.dt, impulse, rtol=0.03)
    with pytest.raises(SlideInputError, match='must agree in length'):
        push_from_samples(spec.grid, 0, rec.t[:-1], rec.X_WO, rec.p_WF, rec.wrench_W, t0, t1)
