"""The training pushes' regression form (:mod:`slide_core.identification.training`)."""

from __future__ import annotations

import numpy as np

from slide_core.geometry import Grid, cell_positions
from slide_core.identification import PushData, TrainingSet
from slide_core.physics import WrenchPush, simulate


def test_a_force_that_jumps_gives_the_mass_it_moved() -> None:
    # A 3 x 3 block pushed through its centre by a force that jumps between 1.5 and 0.5 N
    # every 0.1 s, always sliding; its poses simulated at 1 ms and read every 10 ms, as
    # identification reads pushes. The forces were smoothed less than the accelerations
    # that the poses give: least squares took a share of each jump for inertia that the
    # accelerations lacked, and the mass came out 10% heavy.
    grid = Grid.from_occupancy(np.ones((3, 3)), 0.02)
    m, mu = np.full(grid.n, 0.02), np.full(grid.n, 0.5)
    step, fine = 0.01, 0.001
    blocks = np.array([1.5, 0.5] * 6)
    f = np.repeat(np.column_stack((blocks, np.zeros(blocks.size))), 10, axis=0)
    centre = 4
    X = simulate(
        grid, m, mu, WrenchPush.at_cell(grid, centre, np.repeat(f, 10, axis=0), fine), [0.3, 0, 0]
    ).X_WO[0][::10]
    assert np.all(np.diff(X[1:, 0]) > 0.0)  # it never stops
    push = WrenchPush.at_cell(grid, centre, f, step)
    p_WF = cell_positions(grid, X)[:, centre] - [0.011, 0.0]  # a fingertip on its side
    train = TrainingSet.from_pushes(
        grid, [PushData(0, push, X[0], np.arange(X.shape[0]), X, p_WF, X)], table_edge=False
    )
    # Every split of the same friction force (mu M) into mass and friction, 0.8 to 1.25
    # times the mass: the truth explains the forces best.
    scale = np.linspace(0.8, 1.25, 91)
    loss = [float(train.loss(m * k, mu / k)[0]) for k in scale]
    assert abs(scale[int(np.argmin(loss))] - 1.0) <= 0.01
    assert min(loss) < 1e-3 * train.wrench_square
