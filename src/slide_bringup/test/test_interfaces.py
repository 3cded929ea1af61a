"""The generated slide_interfaces types build, import and survive CDR serialisation."""

from __future__ import annotations

import math

import pytest

rclpy_serialization = pytest.importorskip('rclpy.serialization')
from geometry_msgs.msg import PoseStamped, WrenchStamped  # noqa: E402

from slide_interfaces.action import (  # noqa: E402
    ChooseExploration,
    FollowPath,
    Grasp,
    GripperCommand,
    Identify,
    PlanStep,
    Push,
    SelectGoal,
)
from slide_interfaces.msg import (  # noqa: E402
    MassFrictionModel,
    ModelBelief,
    ObjectGrid,
    PushPrimitive,
    PushRecord,
)


def _grid() -> ObjectGrid:
    grid = ObjectGrid()
    grid.header.frame_id = 'table'
    grid.pose.position.x = 0.4
    grid.pose.orientation.z = math.sin(0.3 / 2)
    grid.pose.orientation.w = math.cos(0.3 / 2)
    grid.cell_size = 0.02
    grid.rows, grid.cols = 2, 3
    grid.occupancy = [0, 1, 1, 1, 1, 0]
    grid.heights = [0.0, 0.03, 0.03, 0.02, 0.02, 0.0]
    return grid


def test_belief_round_trips_through_cdr() -> None:
    belief = ModelBelief()
    belief.grid = _grid()
    belief.models = [
        MassFrictionModel(mass=[0.0, 0.05, 0.05, 0.02, 0.02, 0.0], friction=[0.3] * 6, loss=0.01),
        MassFrictionModel(mass=[0.0, 0.02, 0.02, 0.05, 0.05, 0.0], friction=[0.5] * 6, loss=0.02),
    ]
    belief.probabilities = [0.7, 0.3]
    belief.temperature = 0.005

    data = rclpy_serialization.serialize_message(belief)
    back = rclpy_serialization.deserialize_message(data, ModelBelief)

    assert back == belief
    assert list(back.grid.occupancy) == [0, 1, 1, 1, 1, 0]
    assert back.models[1].mass[3] == pytest.approx(0.05)
    assert back.grid.heights[1] == pytest.approx(0.03)


def test_push_record_round_trips_with_stamped_series() -> None:
    record = PushRecord(index=4)
    record.primitive = PushPrimitive(travel=0.05, speed=0.02, fingertip_radius=0.005)
    record.primitive.direction.x = 1.0
    for i in range(3):
        w = WrenchStamped()
        w.header.stamp.nanosec = i * 1000
        w.wrench.force.x = 0.1 * i
        record.wrenches.append(w)
        record.object_poses.append(PoseStamped())
    data = rclpy_serialization.serialize_message(record)
    back = rclpy_serialization.deserialize_message(data, PushRecord)
    assert back == record
    assert [w.wrench.force.x for w in back.wrenches] == pytest.approx([0.0, 0.1, 0.2])


def test_actions_have_goal_result_and_feedback() -> None:
    actions = (FollowPath, GripperCommand, Push, Grasp, Identify, ChooseExploration)
    for action in (*actions, SelectGoal, PlanStep):
        for part in ('Goal', 'Result', 'Feedback'):
            assert hasattr(action, part), f'{action.__name__} lacks {part}'
        # Every result says why it ended: an error code besides the message.
        assert hasattr(action.Result(), 'error') and hasattr(action.Result(), 'message')
    goal = Identify.Goal(
        method='probabilistic', num_models=8, density_max=8000.0, friction_max=1.0
    )
    back = rclpy_serialization.deserialize_message(
        rclpy_serialization.serialize_message(goal), Identify.Goal
    )
    assert back.method == 'probabilistic' and back.num_models == 8
