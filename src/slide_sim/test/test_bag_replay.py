"""A twin bag read back as wrench-driven pushes (slide_core.bag), the ground truth apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slide_core.bag import parse_range, read_ground_truth, read_pushes
from slide_core.errors import SlideInputError
from slide_core.objects import load_object
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
