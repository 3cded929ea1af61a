"""RViz markers (slide_ros.markers): the footprint drawn where the object is."""

from __future__ import annotations

from builtin_interfaces.msg import Time
import numpy as np

from slide_core.geometry import Grid, rotation
from slide_core.model import Belief
from slide_ros.markers import belief_markers, clear, footprint

OUTLINE = np.array([[-0.03, -0.02], [0.03, -0.02], [0.02, 0.02], [-0.02, 0.02]])


def drawn(grid: Grid, X_WO: np.ndarray) -> np.ndarray:
    belief = Belief.create(grid, np.full(grid.n, 0.01), np.full(grid.n, 0.3))
    m = footprint(belief, X_WO, 'fp', 0, (0.1, 0.2, 0.3, 1.0), 'table', Time())
    return np.array([[p.x, p.y] for p in m.points]).reshape(-1, 2, 2)


def test_the_footprint_is_the_real_outline_when_the_grid_has_one() -> None:
    occ = np.ones((2, 3), bool)
    X = np.array([0.3, -0.1, 0.5])
    segments = drawn(Grid(0.02, occ, np.full(occ.shape, 0.02), None, OUTLINE), X)
    expected = OUTLINE @ rotation(0.5).T + X[:2]
    np.testing.assert_allclose(segments[:, 0], expected)
    np.testing.assert_allclose(segments[:, 1], np.roll(expected, -1, axis=0))
    # Without an outline: the cells' ten outer sides, the 6 x 4 cm rectangle.
    squares = drawn(Grid(0.02, occ, np.full(occ.shape, 0.02)), np.zeros(3))
    assert squares.shape == (10, 2, 2)
    np.testing.assert_allclose(np.abs(squares).max(axis=(0, 1)), [0.03, 0.02])


def test_a_namespace_is_cleared_by_a_marker_none_of_its_own_shares_an_id_with() -> None:
    # The clear had id 0, as the first predicted footprint in the same array has: RViz
    # shows an error on the Plan display for every push.
    from visualization_msgs.msg import Marker

    grid = Grid(0.02, np.ones((2, 3), bool), np.full((2, 3), 0.02))
    belief = Belief.create(grid, np.full(grid.n, 0.01), np.full(grid.n, 0.3))
    array = [clear('plan/predicted', 'table', Time())] + [
        footprint(belief, np.zeros(3), 'plan/predicted', k, (0.2, 0.4, 1.0, 1.0), 'table', Time())
        for k in range(3)
    ]
    assert array[0].action == Marker.DELETEALL
    assert len({(m.ns, m.id) for m in array}) == len(array)


def test_a_belief_of_fewer_models_leaves_no_sphere_of_the_last_one() -> None:
    from visualization_msgs.msg import Marker

    grid = Grid(0.02, np.ones((2, 3), bool), np.full((2, 3), 0.02))
    belief = Belief.create(grid, np.full((2, grid.n), 0.01), np.full((2, grid.n), 0.3))
    markers = belief_markers(belief, np.zeros(3), 'table', Time()).markers
    cleared = [m for m in markers if m.action == Marker.DELETEALL]
    assert [m.ns for m in cleared] == ['belief/com']
    spheres = [m for m in markers if m.ns == 'belief/com' and m.action != Marker.DELETEALL]
    assert len(spheres) == 2 and len({(m.ns, m.id) for m in markers}) == len(markers)
