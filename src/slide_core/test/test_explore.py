"""Exploration strategies pick pushes by their rule."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.explore import candidates, choose
from slide_core.geometry import Grid
from slide_core.identify import Belief

GRID = Grid(0.02, np.ones((2, 4), bool), np.full((2, 4), 0.03))
X = np.array([0.3, 0.0, 0.0])


def belief(mass_a: np.ndarray, mass_b: np.ndarray) -> Belief:
    mu = np.full((2, GRID.n), 0.5)
    return Belief(GRID, np.stack((mass_a, mass_b)), mu, np.ones(2), np.full(2, 0.5), 'test')


def test_candidates_cover_the_outline_pointing_inwards():
    cands = candidates(belief(np.full(8, 0.02), np.full(8, 0.02)))
    assert len(cands) == 12  # 2 x 4 cells: 4 + 4 long sides, 2 + 2 short sides
    for c in cands:
        assert np.linalg.norm(c.direction_O) == pytest.approx(1.0)
        assert c.p_OF @ c.direction_O < 0  # starts outside, pushes towards the middle


def test_most_distinctive_is_where_the_models_disagree():
    left = np.where(GRID.p_OC[:, 0] < 0, 0.05, 0.005)
    right = left[::-1].copy()
    rng = np.random.default_rng(0)
    same, same_scores = choose(belief(left, left), X, 'most-distinctive', rng)
    assert same_scores.max() < 1e-6
    diff, scores = choose(belief(left, right), X, 'most-distinctive', rng, max_candidates=12)
    assert scores.max() > 1e-3
    # A push along the object's long axis moves it straight whatever the mass; a push on a
    # long side off the middle turns it one way or the other: that is the informative one.
    assert abs(diff.direction_O[1]) == pytest.approx(1.0)


def test_most_different_avoids_what_was_done_and_random_is_reproducible():
    b = belief(np.full(8, 0.02), np.full(8, 0.02))
    pool = candidates(b)
    first, _ = choose(b, X, 'most-different', np.random.default_rng(1), done=[pool[0]], pool=pool)
    assert first is not pool[0]
    a, _ = choose(b, X, 'random', np.random.default_rng(5))
    c, _ = choose(b, X, 'random', np.random.default_rng(5))
    assert np.allclose(a.p_OF, c.p_OF)
    with pytest.raises(SlideInputError, match='strategy'):
        choose(b, X, 'greedy', np.random.default_rng(0))
