"""Held-out evaluation: hull test, uniform maps, replays of recorded twin pushes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slide_core.identification import TrainingSet, evaluate, identify, in_hull
from slide_core.io import read_ground_truth, read_pushes
from slide_core.model import Belief, uniform_maps

pytest.importorskip('mujoco')
from slide_core.model import load_object  # noqa: E402
from slide_sim.record import record  # noqa: E402


def test_in_hull_including_degenerate_hulls():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1.0]])
    assert in_hull(square, np.array([0.5, 0.5]))
    assert not in_hull(square, np.array([1.5, 0.5]))
    line = np.array([[0, 0], [0.5, 0.5], [1, 1.0]])
    assert in_hull(line, np.array([0.25, 0.25]))
    assert not in_hull(line, np.array([0.25, 0.3]))
    point = np.array([[0.1, 0.1]])
    assert in_hull(point, np.array([0.1, 0.1005])) and not in_hull(point, np.array([0.2, 0.1]))
    # The tolerance holds for a whole hull too (it held only for the degenerate ones).
    cm = square / 100
    assert in_hull(cm, np.array([0.0105, 0.005]))
    assert not in_hull(cm, np.array([0.0108, 0.0108]))  # 1.13 mm off the corner
    assert in_hull(cm, np.array([0.0108, 0.0108]), tol=0.002)


def test_uniform_maps_keep_total_mass_and_friction_force():
    spec = load_object('hammer')
    m, mu = uniform_maps(spec.mass, spec.friction)
    assert m.sum() == pytest.approx(spec.mass.sum())
    assert np.sum(m * mu) == pytest.approx(np.sum(spec.mass * spec.friction))


@pytest.fixture(scope='module')
def bag(tmp_path_factory: pytest.TempPathFactory, workcell) -> Path:
    path = tmp_path_factory.mktemp('bags') / 'wrench'
    record(load_object('wrench'), workcell, 4, seed=5, out=path)
    return path


def test_identified_model_explains_the_twin_better_than_uniform_maps(bag: Path, workcell):
    grid, train = read_pushes(bag, [0, 1, 2])
    _, test = read_pushes(bag, [3])
    truth = read_ground_truth(bag)
    assert truth is not None
    ts = TrainingSet.from_pushes(grid, train)
    belief = identify(ts, 'probabilistic', K=4, budget=800).belief
    uniform = identify(ts, 'uniform').belief
    assert belief.loss.min() < uniform.loss[0]
    tip = workcell.fingertip
    ev = evaluate(belief, test, tip, truth.mass)
    assert ev.moved_m > 0.01
    assert ev.add_error_m < 0.3 * ev.moved_m  # the replay follows the object
    assert len(ev.per_push_m) == 1 and ev.com_error_m is not None
    true_belief = Belief.create(grid, truth.mass, truth.friction, method='truth')
    assert evaluate(true_belief, test, tip, truth.mass).com_error_m == pytest.approx(
        0.0, abs=1e-12
    )
