"""The whole task in the twin: explore, identify, plan, push, grasp, lift."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slide_bringup.episode import run_episode
from slide_core.errors import SlideInputError
from slide_core.model import Belief, load_object
from slide_core.task import ModelSource, planning_belief


def test_an_episode_lifts_the_object_and_draws_what_happened(tmp_path: Path) -> None:
    png = tmp_path / 'episode.png'
    messages: list[str] = []
    r = run_episode(load_object('hammer'), 0, 'probabilistic', png=png, progress=messages.append)
    assert r.success and not r.fell and r.reached, r.failure
    assert r.exploration_pushes == 5 and 1 <= r.pushes <= 25
    assert r.lifted_m > 0.08
    assert r.overhang_m >= 0.045  # the pads' 4 cm and the 5 mm clearance
    assert r.stay_probability >= 0.95 and r.goal_truly_balanced
    assert r.identification_s > 0 and r.planning_s > 0 and r.total_s > r.planning_s
    assert r.outcome == 'succeeded' and r.stage == 'done'
    assert png.read_bytes()[:4] == b'\x89PNG'
    assert any('push 1' in m for m in messages)
    d = r.to_dict()
    for key in (
        'success',
        'fell',
        'exploration_pushes',
        'pushes',
        'stay_probability',
        'overhang_m',
        'identification_s',
        'planning_s',
        'total_s',
    ):
        assert key in d


def test_each_method_gives_the_planner_its_models() -> None:
    spec = load_object('crimp')
    rng = np.random.default_rng(0)
    K, n = 3, spec.grid.n
    belief = Belief.create(
        spec.grid,
        spec.mass * rng.uniform(0.5, 1.5, (K, n)),
        np.full((K, n), 0.4),
        [0.2, 0.5, 0.3],
        [1.0, 2.0, 3.0],
        'probabilistic',
    )
    beliefs = {
        s: planning_belief(s, belief) for s in ModelSource if s is not ModelSource.GROUND_TRUTH
    }
    assert beliefs[ModelSource.PROBABILISTIC].K == 3
    np.testing.assert_allclose(beliefs[ModelSource.DETERMINISTIC].mass[0], belief.mass[1])
    assert np.ptp(beliefs[ModelSource.UNIFORM].mass) == 0.0
    np.testing.assert_allclose(beliefs[ModelSource.UNIFORM].mass.sum(), belief.mass[1].sum())
    with pytest.raises(SlideInputError, match='unknown method'):
        run_episode(spec, 0, 'psychic')
    with pytest.raises(SlideInputError, match='exploration pushes'):
        run_episode(spec, 0, exploration_pushes=0)


def test_the_same_seed_gives_the_same_episode() -> None:
    spec = load_object('crimp')
    a = run_episode(spec, 4, 'deterministic', push_budget=3)
    b = run_episode(spec, 4, 'deterministic', push_budget=3)
    assert a.X_final == b.X_final and a.pushes == b.pushes and a.goal == b.goal
