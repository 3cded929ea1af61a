"""Figures (slide_core.io.plot): the object drawn as it is, the pictures written."""

from __future__ import annotations

import matplotlib

matplotlib.use('Agg')

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from slide_core.geometry import Grid, rotation  # noqa: E402
from slide_core.io.plot import draw_object, object_figure  # noqa: E402

OCC = np.ones((2, 3), bool)
OUTLINE = np.array([[-0.03, -0.02], [0.03, -0.02], [0.02, 0.02], [-0.02, 0.02]])


def test_an_object_is_drawn_as_its_outline_or_its_cells(tmp_path) -> None:  # type: ignore[no-untyped-def]
    traced = Grid(0.02, OCC, np.full(OCC.shape, 0.02), None, OUTLINE)
    squares = Grid(0.02, OCC, np.full(OCC.shape, 0.02))
    X = np.array([0.3, 0.1, 0.4])
    fig, ax = plt.subplots()
    draw_object(ax, traced, X, 'blue', 0.5)
    assert len(ax.patches) == 1
    drawn = ax.patches[0].get_xy()[:4]
    np.testing.assert_allclose(drawn, OUTLINE @ rotation(0.4).T + X[:2])
    draw_object(ax, squares, X, 'blue', 0.5)
    assert len(ax.patches) == 1 + squares.n
    plt.close(fig)
    # The maps carry the outline over the cells; the picture is written.
    path = object_figure(tmp_path / 'o.png', traced, np.full(6, 0.01), np.full(6, 0.3), 'o')
    assert path.stat().st_size > 1000


def test_an_episode_that_ended_in_exploration_is_drawn(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Only its first pose is known (no X_start): the picture raised KeyError, and slide
    # episode lost the whole result with it.
    from slide_core.io.plot import episode_figure
    from slide_core.model import Belief, load_workcell
    from slide_core.planning import planner_config

    grid = Grid(0.02, OCC, np.full(OCC.shape, 0.02))
    belief = Belief.create(grid, np.full(6, 0.01), np.full(6, 0.3))
    trace = {'X_initial': [0.3, 0.1, 0.4], 'pushes': []}
    config = planner_config(load_workcell())
    path = episode_figure(tmp_path / 'e.png', grid, belief, trace, config, 'fell')
    assert path.stat().st_size > 1000
