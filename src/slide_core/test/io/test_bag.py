"""A twin bag read back as wrench-driven pushes (slide_core.io.bag), the ground truth apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.io import read_ground_truth, read_pushes
from slide_core.model import load_object
from slide_core.physics import contact_cell

pytest.importorskip('mujoco')
from slide_sim.record import record  # noqa: E402


@pytest.fixture(scope='module')
def bag(tmp_path_factory: pytest.TempPathFactory, workcell) -> Path:
    path = tmp_path_factory.mktemp('bags') / 'box'
    record(load_object('box'), workcell, 3, seed=2, out=path)
    return path


def test_pushes_replay_measured_forces_at_the_contact(bag: Path) -> None:
    grid, pushes = read_pushes(bag, [0, 2])
    assert [p.index for p in pushes] == [0, 2] and grid.n == 54
    for p in pushes:
        force = np.linalg.norm(p.push.f_W, axis=1)
        assert (force > 0.5).sum() > 50  # the stroke pushed
        assert all(contact_cell(grid, c) >= 0 for c in p.push.p_OA[force > 0])
        assert np.all(np.diff(p.obs_steps) >= 0) and p.obs_steps[-1] <= p.push.steps
        np.testing.assert_allclose(p.X_WO0, p.X_obs[0], atol=1e-9)
        assert p.p_WF.shape == (p.push.steps + 1, 2)
        # The fingertip path covers the stroke (3 to 7 cm plus the approach).
        assert np.linalg.norm(p.p_WF[-1] - p.p_WF[0]) > 0.03


def test_ground_truth_is_read_separately(bag: Path) -> None:
    truth = read_ground_truth(bag)
    assert truth is not None and truth.name == 'box'
    np.testing.assert_allclose(truth.mass, load_object('box').mass, atol=1e-9)


def test_bad_bags_give_clear_errors(bag: Path, tmp_path: Path) -> None:
    with pytest.raises(SlideInputError, match='has pushes 0-2'):
        read_pushes(bag, [7])
    # A short line however many are missing (one range of 2 million was a 17 MB 'line').
    with pytest.raises(SlideInputError, match=r'has pushes 0-2, asked for 3-1999$'):
        read_pushes(bag, list(range(3, 2000)))
    with pytest.raises(
        SlideInputError, match=r'asked for 3, 5, 7, 9, 11, 13, 15, 17, \.\.\. \(20'
    ):
        read_pushes(bag, list(range(3, 42, 2)))
    # The identification node's bag goals took a push twice, weighing it double.
    with pytest.raises(SlideInputError, match='push 0 asked for more than once'):
        read_pushes(bag, [0, 0])
    # The CLI's 'all' given to the library read as pushes 'a', 'l', 'l': 'push l asked for
    # more than once'.
    with pytest.raises(SlideInputError, match=r"by number .* not 'all'"):
        read_pushes(bag, 'all')  # type: ignore[arg-type]
    with pytest.raises(SlideInputError, match=r'by number .* not \[0, 1.5\]'):
        read_pushes(bag, [0, 1.5])  # type: ignore[list-item]
    with pytest.raises(SlideInputError, match='no such bag'):
        read_pushes(tmp_path / 'absent')


def test_pushes_from_memory_are_the_recorded_push(workcell) -> None:
    # The task builds its training pushes from what the world measured, with the same
    # conversion as read_pushes.
    from slide_core.identification import SETTLE_S, random_push
    from slide_sim.twin import Twin
    from slide_sim.world import samples_of

    spec = load_object('box')
    twin = Twin(spec, workcell)
    rng = np.random.default_rng(2)
    rec = twin.push(
        random_push(spec.grid, twin.object_pose(), workcell.table, workcell.fingertip, rng)
    )
    t0, t1 = float(rec.t[rec.start]), float(rec.t[rec.end])
    mem = samples_of(rec).to_data(spec.grid, 0)
    np.testing.assert_allclose(mem.X_WO0, rec.X_WO[rec.start], atol=1e-9)
    assert abs(mem.push.steps - (t1 + SETTLE_S - t0) / mem.push.dt) <= 1
    window = (rec.t >= t0) & (rec.t < t0 + mem.push.steps * mem.push.dt)
    impulse = rec.wrench_W[window, :2].sum(axis=0) * float(np.mean(np.diff(rec.t)))
    np.testing.assert_allclose(mem.push.f_W.sum(axis=0) * mem.push.dt, impulse, rtol=0.03)
