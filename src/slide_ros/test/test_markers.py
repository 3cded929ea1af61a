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


def test_the_force_is_drawn_at_the_fingertip_and_fades() -> None:
    # As a WrenchStamped in the table frame RViz drew it at the table's origin, far from the
    # push, and it stayed when the stream stopped.
    from slide_ros.markers import FORCE_SCALE, force_arrow

    m = force_arrow(np.array([0.3, -0.1, 0.015]), np.array([2.0, -1.0, 0.0]), 'table', Time())
    start, end = ([p.x, p.y, p.z] for p in m.points)
    np.testing.assert_allclose(start, [0.3, -0.1, 0.015])
    np.testing.assert_allclose(np.subtract(end, start), np.array([2.0, -1.0, 0.0]) * FORCE_SCALE)
    assert 0 < m.lifetime.sec + 1e-9 * m.lifetime.nanosec <= 1.0


def test_each_obstacle_is_a_box_over_its_footprint() -> None:
    from visualization_msgs.msg import Marker

    from slide_core.model import Obstacle
    from slide_ros.markers import obstacle_markers

    boxes = (Obstacle((0.2, 0.1), (0.05, 0.01)), Obstacle((0.4, -0.2), (0.02, 0.03), 0.3))
    markers = obstacle_markers(boxes, 'table', Time()).markers
    assert markers[0].action == Marker.DELETEALL
    cubes = markers[1:]
    assert [(m.pose.position.x, m.pose.position.y) for m in cubes] == [(0.2, 0.1), (0.4, -0.2)]
    assert [(m.scale.x, m.scale.y) for m in cubes] == [(0.1, 0.02), (0.04, 0.06)]
    # As tall as the workcell says, standing on the table; a flat footprint when unknown.
    assert [m.scale.z for m in cubes] == [0.01, 0.3]
    assert [m.pose.position.z for m in cubes] == [0.005, 0.15]
    assert len({(m.ns, m.id) for m in markers}) == len(markers)
