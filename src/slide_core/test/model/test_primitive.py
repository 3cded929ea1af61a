"""A push primitive is checked when made and keeps what it was made from."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from slide_core.model import (
    APPROACH_CLEARANCE,
    LIFT,
    Obstacle,
    Primitive,
    PrimitiveError,
    Waypoint,
    over_obstacles,
)
from slide_core.model.primitive import HOP_CLEARANCE, MAX_HOP


def test_a_primitive_keeps_its_contact_when_the_callers_array_changes() -> None:
    # It kept a reference: a reused buffer moved a validated push's contact (x = 99 m).
    contact = np.array([0.02, 0.0])
    push = Primitive.create(contact, [-1.0, 0.0], 0.05, 0.04)
    contact[0] = 99.0
    assert push.p_OA[0] == 0.02


def test_a_primitive_is_refused_for_what_no_push_can_be() -> None:
    for p_OA, d_O, travel, speed, reason in (
        ([0.0, float('nan')], [1.0, 0.0], 0.05, 0.04, 'finite 2-vectors'),
        ([0.0, 0.0], [0.0, 0.0], 0.05, 0.04, 'direction is zero'),
        ([0.0, 0.0], [1.0, 0.0], 0.0, 0.04, 'travel'),
        ([0.0, 0.0], [1.0, 0.0], 0.05, -1.0, 'speed'),
        ([0.0, 0.0], [1.0, 0.0], 0.05, 1e-300, 'speed'),  # a 5 cm stroke of 1e298 s
    ):
        with pytest.raises(PrimitiveError, match=reason):
            Primitive.create(p_OA, d_O, travel, speed)
    np.testing.assert_allclose(Primitive.create([0, 0], [3.0, 4.0], 0.05, 0.04).d_O, [0.6, 0.8])


# -- the move through the air to a push, over and around the workcell's obstacles ---------
RADIUS = 0.008
NEAR = RADIUS + APPROACH_CLEARANCE


def _push_from(b: tuple[float, float]) -> list[Waypoint]:
    """A push's waypoints whose approach point lies above b."""
    return [
        Waypoint(np.array([*b, LIFT]), 0.3, 0.0, 'approach'),
        Waypoint(np.array([*b, 0.017]), 0.1, 0.05, 'lower'),
    ]


def _flown(start: np.ndarray, waypoints: list[Waypoint]) -> np.ndarray:
    """Points (N, 3) of the straight moves from ``start`` through the waypoints up to the
    approach (the moves an arm makes between its set points)."""
    stops = [start] + [
        w.p_W for w in waypoints[: [w.phase for w in waypoints].index('approach') + 1]
    ]
    return np.vstack(
        [
            p + np.linspace(0.0, 1.0, 200)[:, None] * (q - p)
            for p, q in zip(stops, stops[1:], strict=False)
        ]
    )


def _keeps_clear(path: np.ndarray, obstacles: list[Obstacle]) -> bool:
    """Each point is NEAR from every box's footprint, or above its top by HOP_CLEARANCE."""
    for ob in obstacles:
        near = ob.distance(path[:, :2]) < NEAR - 1e-6
        if ob.height is None and near.any():
            return False
        if near.any() and path[near, 2].min() < ob.top + HOP_CLEARANCE - 1e-9:
            return False
    return True


def test_a_move_no_obstacle_is_under_keeps_its_waypoints() -> None:
    start = np.array([-0.25, 0.0, LIFT])
    aside = [Obstacle((0.3, 0.4), (0.05, 0.05)), Obstacle((0.3, 0.0), (0.05, 0.05), 0.05)]
    push = _push_from((0.5, 0.0))
    # One beside the way, one under it lower than the fingertip passes (12 cm).
    assert over_obstacles(start, push, aside, RADIUS) == push
    assert over_obstacles(start, push, [], RADIUS) == push


def test_a_move_passes_over_an_obstacle_of_known_height_and_around_one_of_unknown() -> None:
    start = np.array([-0.25, 0.0, LIFT])
    push = _push_from((0.5, 0.0))
    tall = [Obstacle((0.3, 0.0), (0.02, 0.25), 0.2)]
    over = over_obstacles(start, push, tall, RADIUS)
    assert [w.phase for w in over] == ['transit', 'transit', 'approach', 'lower']
    assert [float(w.p_W[2]) for w in over[:2]] == pytest.approx([0.2 + HOP_CLEARANCE] * 2)
    assert _keeps_clear(_flown(start, over), tall)
    assert not _keeps_clear(_flown(start, push), tall)
    # Of unknown height: around its end, at the fingertip's height.
    wall = [Obstacle((0.3, 0.0), (0.02, 0.25))]
    around = over_obstacles(start, push, wall, RADIUS)
    assert [w.phase for w in around] == ['transit', 'transit', 'approach', 'lower']
    assert all(float(w.p_W[2]) == LIFT for w in around[:2])
    assert all(abs(float(w.p_W[1])) > 0.25 + NEAR for w in around[:2])
    assert _keeps_clear(_flown(start, around), wall)
    # Too tall to pass over: around it as well.
    assert [w.phase for w in over_obstacles(start, push, [replace(wall[0], height=1.0)], RADIUS)][
        :2
    ] == ['transit', 'transit']


def test_a_move_with_no_way_around_is_refused_naming_why() -> None:
    start = np.array([-0.25, 0.0, LIFT])
    push = _push_from((0.5, 0.0))
    # The approach point boxed in on four sides by obstacles of unknown height.
    ring = [
        Obstacle((0.5, 0.1), (0.12, 0.02)),
        Obstacle((0.5, -0.1), (0.12, 0.02)),
        Obstacle((0.4, 0.0), (0.02, 0.12)),
        Obstacle((0.6, 0.0), (0.02, 0.12)),
    ]
    with pytest.raises(PrimitiveError, match='no way through the air to the approach point'):
        over_obstacles(start, push, ring, RADIUS)
    # The same ring 30 cm tall is passed over.
    high = [replace(ob, height=0.3) for ob in ring]
    assert _keeps_clear(_flown(start, over_obstacles(start, push, high, RADIUS)), high)
    # The fingertip itself too near one it may not pass over.
    with pytest.raises(PrimitiveError, match=r'^the tool is within 11 mm of a workcell obstacle'):
        over_obstacles(start, push, [Obstacle((-0.25, 0.015), (0.05, 0.005))], RADIUS)


@settings(max_examples=200, deadline=None)
@given(
    boxes=st.lists(
        st.tuples(
            st.floats(0.0, 0.8),
            st.floats(-0.5, 0.5),
            st.floats(0.01, 0.15),
            st.floats(0.01, 0.15),
            st.one_of(st.none(), st.floats(0.02, 0.8)),
        ),
        min_size=1,
        max_size=4,
    ),
    a=st.tuples(st.floats(-0.3, 0.9), st.floats(-0.6, 0.6)),
    b=st.tuples(st.floats(0.0, 0.8), st.floats(-0.5, 0.5)),
)
def test_any_move_the_obstacles_leave_a_way_for_keeps_clear_of_them(boxes, a, b) -> None:  # type: ignore[no-untyped-def]
    obstacles = [Obstacle((x, y), (hx, hy), h) for x, y, hx, hy, h in boxes]
    # The planner keeps the push clear of every obstacle, and the fingertip is in none.
    assume(all(float(ob.distance(b)[0]) >= NEAR for ob in obstacles))
    assume(
        all(float(ob.distance(a)[0]) >= NEAR or ob.top + HOP_CLEARANCE <= LIFT for ob in obstacles)
    )
    start = np.array([*a, LIFT])
    push = _push_from(b)
    try:
        out = over_obstacles(start, push, obstacles, RADIUS)
    except PrimitiveError as exc:
        # Refused only with a reason, and only where a box it may not pass over is in the way.
        assert 'workcell obstacle' in str(exc)
        assert any(ob.height is None or ob.top + HOP_CLEARANCE > MAX_HOP for ob in obstacles)
        return
    assert out[-2:] == push
    assert _keeps_clear(_flown(start, out), obstacles)
