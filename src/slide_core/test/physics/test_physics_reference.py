"""The per-cell reference simulator, and the fast simulator's agreement with it."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import Grid, cell_positions
from slide_core.physics import (
    FingertipPush,
    PhysicsError,
    WrenchPush,
    simulate,
    simulate_reference,
    weld_tree,
)

DT = 0.004
# An irregular 10-cell object: small enough for the reference to be quick.
SHAPE = Grid.from_occupancy([[1, 1, 1, 0], [1, 1, 1, 1], [0, 1, 1, 0]], 0.02)


def maps(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0.005, 0.03, SHAPE.n), rng.uniform(0.15, 0.9, SHAPE.n)


def test_weld_tree_spans_the_cells_with_n_minus_one_pairs() -> None:
    tree = weld_tree(SHAPE)
    assert tree.shape == (SHAPE.n - 1, 2)
    assert set(tree.ravel()) == set(range(SHAPE.n))
    # A PhysicsError (a bad input, exit 2 in the CLI), not a bare ValueError.
    with pytest.raises(PhysicsError, match='4-connected cells only, and these are in several'):
        weld_tree(Grid.from_occupancy([[1, 0, 1]], 0.02))


@pytest.mark.parametrize('seed', [0, 1])
def test_wrench_pushes_agree_with_the_fast_simulator(seed: int) -> None:
    m, mu = maps(seed)
    f = np.zeros((120, 2))
    f[:70] = [1.4, 0.6] if seed == 0 else [-0.5, 1.6]
    push = WrenchPush.create(SHAPE, SHAPE.p_OC[seed + 2] + [0.0, 0.007], f, DT)
    fast = simulate(SHAPE, m, mu, push, [0.1, 0.2, 0.3])
    ref = simulate_reference(SHAPE, m, mu, push, [0.1, 0.2, 0.3])
    moved = np.abs(cell_positions(SHAPE, ref.X_WO[0, -1]) - cell_positions(SHAPE, ref.X_WO[0, 0]))
    assert moved.max() > 0.05 and abs(ref.X_WO[0, -1, 2] - 0.3) > 0.1  # slid and turned
    dev = np.abs(cell_positions(SHAPE, fast.X_WO[0]) - cell_positions(SHAPE, ref.X_WO[0]))
    assert dev.max() < 1e-7


@pytest.mark.parametrize(
    ('start', 'direction', 'mu_f'),
    [([-0.06, 0.01], [1.0, 0.2], 0.4), ([0.0, -0.05], [0.3, 1.0], 0.8)],
)
def test_fingertip_pushes_agree_with_the_fast_simulator(start, direction, mu_f) -> None:  # type: ignore[no-untyped-def]
    m, mu = maps(3)
    push = FingertipPush.straight(
        start, direction, 0.06, 0.08, DT, radius=0.008, mu=mu_f, dwell=0.2
    )
    fast = simulate(SHAPE, m, mu, push, [0, 0, 0])
    ref = simulate_reference(SHAPE, m, mu, push, [0, 0, 0])
    assert np.abs(ref.X_WO[0, -1, :2]).max() > 0.02
    dev = np.abs(cell_positions(SHAPE, fast.X_WO[0]) - cell_positions(SHAPE, ref.X_WO[0]))
    assert dev.max() < 1e-7
    np.testing.assert_allclose(fast.f_push_W, ref.f_push_W, atol=1e-4 * np.abs(ref.f_push_W).max())


# The same cells with a real outline: slanted at the right end and the top, on the cells.
OUTLINE = np.array(
    [[-0.02, -0.03], [0.02, -0.03], [0.02, -0.01], [0.04, -0.005], [0.04, 0.005], [0.02, 0.01],
     [0.015, 0.03], [-0.035, 0.03], [-0.04, 0.02], [-0.04, -0.01], [-0.02, -0.01]]
)  # fmt: skip


@pytest.mark.parametrize(
    ('start', 'direction'), [([0.035, -0.05], [-0.1, 1.0]), ([0.03, 0.05], [-0.3, -1.0])]
)
def test_fingertip_pushes_on_a_real_outline_agree_with_the_fast_simulator(
    start, direction
) -> None:  # type: ignore[no-untyped-def]
    shape = Grid(SHAPE.cell_size, SHAPE.occupancy, SHAPE.heights, None, OUTLINE)
    m, mu = maps(4)
    push = FingertipPush.straight(start, direction, 0.06, 0.08, DT, radius=0.008, mu=0.4)
    fast = simulate(shape, m, mu, push, [0, 0, 0])
    ref = simulate_reference(shape, m, mu, push, [0, 0, 0])
    squares = simulate_reference(SHAPE, m, mu, push, [0, 0, 0])
    assert np.abs(ref.X_WO[0, -1, :2]).max() > 0.01
    dev = np.abs(cell_positions(shape, fast.X_WO[0]) - cell_positions(shape, ref.X_WO[0]))
    assert dev.max() < 1e-7
    # The outline is not the squares: the pushes end elsewhere.
    moved = cell_positions(shape, squares.X_WO[0, -1]) - cell_positions(shape, ref.X_WO[0, -1])
    assert np.abs(moved).max() > 0.001


def test_reference_rejects_what_it_cannot_simulate() -> None:
    m, mu = maps(0)
    push = WrenchPush.create(SHAPE, [0.0, 0.0], np.ones((2, 2)), DT)
    with pytest.raises(ValueError, match='positive mass in every cell'):
        simulate_reference(SHAPE, np.where(np.arange(SHAPE.n) == 0, 0.0, m), mu, push, [0, 0, 0])
    with pytest.raises(ValueError, match='one hypothesis'):
        simulate_reference(SHAPE, np.tile(m, (2, 1)), np.tile(mu, (2, 1)), push, [0, 0, 0])


def test_a_moving_contact_point_agrees_with_the_fast_simulator() -> None:
    m, mu = maps(5)
    steps = 100
    f = np.zeros((steps, 2))
    f[:70] = [1.5, 0.3]
    p = np.column_stack((np.full(steps, -0.04), np.linspace(-0.005, 0.005, steps)))
    push = WrenchPush.create(SHAPE, p, f, DT)
    fast = simulate(SHAPE, m, mu, push, [0, 0, 0])
    ref = simulate_reference(SHAPE, m, mu, push, [0, 0, 0])
    dev = np.abs(cell_positions(SHAPE, fast.X_WO[0]) - cell_positions(SHAPE, ref.X_WO[0]))
    assert dev.max() < 1e-7 and np.abs(ref.X_WO[0, -1, :2]).max() > 0.01
