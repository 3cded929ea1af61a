"""The MuJoCo twin: objects, pushes, falling, the F/T sensor, grasping."""

from __future__ import annotations

from dataclasses import replace
import math

import mujoco
import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.geometry import outline_grid
from slide_core.identification import random_push
from slide_core.model import (
    LIFT,
    Belief,
    ObjectSpec,
    Primitive,
    Waypoint,
    library_names,
    load_object,
    parse_spec,
)
from slide_core.physics import Support
from slide_core.planning import Grasp, grasp_at, grasp_here, hold_ratios, push_leans
from slide_sim.twin import Twin

UNIFORM_BOX = parse_spec(
    {
        'name': 'uniform_box',
        'cell_size': 0.02,
        'height': 0.04,
        'mass': [[0.01] * 6] * 4,
        'friction': [[0.4] * 6] * 4,
    }
)


def test_the_twins_object_weighs_what_its_file_says(workcell) -> None:
    # Each cell's mass was written with 6 decimals: a 10 g object of 2 mm cells came out
    # 5% heavier, and a 1 g sheet massless (MuJoCo refused it).
    for cell_mass in (1.23456e-5, 4e-7):
        spec = parse_spec(
            {
                'name': 'sheet',
                'cell_size': 0.002,
                'height': 0.001,
                'mass': [[cell_mass] * 10] * 8,
                'friction': [[0.4] * 10] * 8,
            }
        )
        twin = Twin(spec, workcell, (0.35, 0.0, 0.0))
        mass = float(twin.model.body_subtreemass[twin.model.body('object').id])
        assert mass == pytest.approx(spec.total_mass, rel=1e-6)


@pytest.mark.parametrize('name', library_names())
def test_each_library_object_rests_on_the_table(name: str, workcell) -> None:
    twin = Twin(load_object(name), workcell, (0.35, 0.0, 0.3))
    twin.settle(0.3)
    assert not twin.fell()
    assert abs(twin.object_height()) < 1e-3
    np.testing.assert_allclose(twin.object_pose(), [0.35, 0.0, 0.3], atol=1e-3)


def test_centred_push_on_a_uniform_box_moves_it_straight(workcell) -> None:
    twin = Twin(UNIFORM_BOX, workcell, (0.35, 0.0, 0.0))
    rec = twin.push(Primitive.create((-0.06, 0.0), (1.0, 0.0), travel=0.05, speed=0.05))
    start, end = rec.X_WO[0], rec.X_WO[-1]
    assert end[0] - start[0] > 0.03
    assert abs(end[1] - start[1]) < 2e-3
    assert abs(end[2] - start[2]) < math.radians(1.0)
    assert rec.start < rec.end and not rec.fell


def test_a_push_over_its_force_limit_stops_pulls_back_and_lifts(workcell) -> None:
    from slide_core.model import LIFT
    from slide_core.task import PushFailed
    from slide_sim.twin import ForceLimitExceeded
    from slide_sim.world import TwinWorld

    twin = Twin(UNIFORM_BOX, workcell, (0.35, 0.0, 0.0))
    push = Primitive.create((-0.06, 0.0), (1.0, 0.0), travel=0.05, speed=0.05)
    with pytest.raises(ForceLimitExceeded, match='over the 0.5 N limit') as e:
        twin.push(push, force_limit=0.5)
    assert e.value.force > 0.5
    moved = twin.object_pose()[0] - 0.35
    assert moved < 0.02  # stopped early in a 5 cm stroke
    tip = twin.fingertip()
    assert tip[2] == pytest.approx(LIFT, abs=0.01)
    assert tip[0] < 0.35 - 0.06 - 0.005  # pulled back off the box's side before the lift
    world = TwinWorld(twin, force_limit=0.5)  # the task sees the graph's failure
    with pytest.raises(PushFailed, match='over the 0.5 N limit') as failed:
        world.push(push, twin.object_pose())
    assert not failed.value.retryable
    twin.push(push, force_limit=0.0)  # 0: no limit


def test_a_push_the_fingertip_cannot_reach_around_an_obstacle_fails_and_moves_nothing(
    workcell,
) -> None:
    # The fingertip stands within its clearance of an obstacle of unknown height, which
    # it may not pass over: no way around it.
    from slide_core.model import Obstacle
    from slide_core.task import PushFailed
    from slide_sim.world import TwinWorld

    park = Twin(UNIFORM_BOX, workcell, (0.35, 0.0, 0.0)).fingertip()  # where it starts
    post = Obstacle((float(park[0]), float(park[1]) + 0.013), (0.005, 0.003))
    twin = Twin(UNIFORM_BOX, replace(workcell, obstacles=(post,)), (0.35, 0.0, 0.0))
    tip = twin.fingertip()
    np.testing.assert_allclose(tip, park)
    push = Primitive.create((-0.06, 0.0), (1.0, 0.0), travel=0.05, speed=0.05)
    with pytest.raises(PushFailed, match='the tool is within 11 mm of a workcell obstacle') as e:
        TwinWorld(twin).push(push, twin.object_pose())
    assert e.value.retryable  # as the graph's executor's INVALID_GOAL is
    np.testing.assert_array_equal(twin.fingertip(), tip)
    # Given its height (5 cm), the fingertip goes on over it and pushes.
    low = replace(workcell, obstacles=(replace(post, height=0.05),))
    rec = Twin(UNIFORM_BOX, low, (0.35, 0.0, 0.0)).push(push)
    assert rec.X_WO[-1, 0] - rec.X_WO[0, 0] > 0.02


def test_an_object_pushed_past_the_edge_falls_and_the_twin_says_so(workcell) -> None:
    twin = Twin(UNIFORM_BOX, workcell, (0.07, 0.0, 0.0))
    assert not twin.fell()
    rec = twin.push(Primitive.create((0.06, 0.0), (-1.0, 0.0), travel=0.12, speed=0.1))
    twin.settle(0.5)
    assert twin.fell() and rec.X_WO[-1, 0] < 0.07
    assert twin.ground_truth()['fell'] is True


def test_a_push_over_the_edge_tips_the_object_only_within_the_planners_lean(workcell) -> None:
    # A grippy box 6 cm tall pushed 3 cm straight over the edge by a frictionless fingertip
    # whose bottom clears the table by 12 mm: once the box starts to tip, the push acts
    # there, and the planner's lean is 12 mm x 0.9 (the force height, 24 mm x 0.9, would
    # say 22 mm). Frictionless, because the fingertip's friction holds the pushed side down.
    tip = replace(workcell.fingertip, mu=0.0, height=workcell.fingertip.length / 2 + 0.012)
    cell = replace(workcell, fingertip=tip)
    spec = parse_spec(
        {
            'name': 'grippy_box',
            'cell_size': 0.02,
            'height': 0.06,
            'mass': [[0.3 / 32] * 8] * 4,
            'friction': [[0.9] * 8] * 4,
        }
    )
    lean = float(push_leans(Belief.create(spec.grid, spec.mass, spec.friction), tip)[0])
    assert lean == pytest.approx(0.0108)

    def push_to(inside: float) -> tuple[float, bool]:
        """The largest tilt [rad] while the push leaves the centre of mass ``inside`` [m]
        from the edge, and whether the box fell."""
        twin = Twin(spec, cell, (inside + 0.03, 0.0, 0.0))
        tilts = [0.0]
        push = Primitive.create((0.08, 0.0), (-1.0, 0.0), travel=0.03, speed=0.05)
        twin.push(push, on_step=lambda: tilts.append(twin.tilt()))
        twin.settle(1.0)
        return max(tilts), twin.fell()

    resting = Twin(spec, cell, (0.2 * lean, 0.0, 0.0))
    resting.settle(1.0)
    assert not resting.fell() and push_to(0.2 * lean)[1]  # at rest 2 mm in, it stays
    tilt, fell = push_to(1.2 * lean)
    assert tilt < math.radians(1.0) and not fell


def test_ft_sensor_reads_the_fingertip_contact_force(workcell) -> None:
    twin = Twin(load_object('box'), workcell, (0.35, 0.0, 0.0))
    # Drive the stroke by hand to compare both signals at every step.
    x0 = 0.35 - 0.09 - 0.02
    z = workcell.fingertip.height
    twin.follow(
        [
            Waypoint(np.array([x0, 0.0, LIFT]), 0.3, 0.0, 'up'),
            Waypoint(np.array([x0, 0.0, z]), 0.1, 0.0, 'down'),
        ],
        record='none',
    )
    start = np.array(twin.data.ctrl[:3])
    sensed, contact = [], []
    for k in range(500):
        twin.data.ctrl[:3] = start + np.array([0.05 * twin.model.opt.timestep * k, 0.0, 0.0])
        twin.step()  # no path is active: one physics step with the twin's own friction
        sensed.append(twin.wrench()[:3])
        contact.append(twin.contact_force())
    sensed, contact = np.array(sensed), np.array(contact)
    pushing = np.linalg.norm(contact, axis=1) > 0.5
    assert pushing.sum() > 100
    error = np.linalg.norm(sensed[pushing] - contact[pushing], axis=1)
    assert np.median(error) < 0.02 * np.median(np.linalg.norm(contact[pushing], axis=1))


def test_gripper_lifts_an_overhang(workcell) -> None:
    book = load_object('book')  # 22 cm long: 4 cm past the edge at x = 0.07
    twin = Twin(book, workcell, (0.07, 0.0, 0.0))
    grasp = Grasp(
        np.array([-0.005, 0.0]), z=float(book.grid.heights.max()) / 2, yaw=0.0, grip=0.04
    )
    result = twin.grasp(grasp, lift=0.1)
    assert result.success and result.lifted_m > 0.08


def test_a_held_object_hangs_level_turns_with_the_hand_and_has_not_fallen(workcell) -> None:
    book = load_object('book')
    twin = Twin(book, workcell, (0.07, 0.0, 0.0))
    grasp = Grasp(
        np.array([-0.005, 0.0]), z=float(book.grid.heights.max()) / 2, yaw=0.0, grip=0.04
    )
    assert twin.grasp(grasp, lift=0.1).success and twin.tilt() < math.radians(1)
    # The hand turns 30 degrees about y (the book's far end up), a degree at a time: the
    # coupled fingers keep their grip and the book turns with them.
    hand = twin.model.body_mocapid[mujoco.mj_name2id(twin.model, mujoco.mjtObj.mjOBJ_BODY, 'hand')]
    for degrees in range(1, 31):
        a = -math.radians(degrees) / 2
        twin.data.mocap_quat[hand] = [math.cos(a), 0.0, math.sin(a), 0.0]
        twin.settle(0.02)
    assert twin.tilt() == pytest.approx(math.radians(30), abs=math.radians(2))
    assert twin.holding() and twin.gripper_width() == pytest.approx(2 * grasp.z, abs=1e-3)
    # Tilted in the grip is held, not fallen.
    assert not twin.fell() and twin.ground_truth()['fell'] is False
    assert twin.ground_truth()['tilt'] == pytest.approx(twin.tilt())


def _bar(mass: float) -> ObjectSpec:
    """A uniform bar 30 x 4 x 3 cm of ``mass`` [kg] on 1 cm cells."""
    occupancy = np.ones((4, 30))
    return parse_spec(
        {
            'name': 'bar',
            'cell_size': 0.01,
            'height': 0.03,
            'mass': (occupancy * mass / occupancy.size).tolist(),
            'friction': (occupancy * 0.4).tolist(),
        }
    )


@pytest.mark.parametrize(('mass', 'ratio', 'held'), [(1.0, 0.46, True), (3.0, 1.37, False)])
def test_the_pads_hold_what_the_planners_hold_ratio_allows(
    mass: float, ratio: float, held: bool, workcell
) -> None:
    # A bar 30 x 4 cm, held 4 cm at its end, 11 cm from its centre of mass: the planner's
    # hold ratio says it hangs at 1 kg and not at 3 kg, and the twin's gripper agrees.
    bar = _bar(mass)
    X = np.array([0.1, 0.0, 0.0])  # 5 cm past the edge
    grasp = grasp_at(bar.grid, X, workcell.gripper)
    assert grasp is not None
    belief = Belief.create(bar.grid, bar.mass, bar.friction)
    assert hold_ratios(belief, X, grasp, workcell.gripper)[0] == pytest.approx(ratio, abs=0.03)
    result = Twin(bar, workcell, tuple(X)).grasp(grasp)
    if held:
        assert result.success and result.tilt < math.radians(1)
    else:
        assert not result.success and result.tilt > math.radians(15)


def test_a_grasp_coming_in_square_to_a_turned_bars_end_lifts_it_level(workcell) -> None:
    # The bar turned 9 degrees, its end 7 cm out: across the edge no grasp holds the 4 cm
    # the pads must; the gripper comes in turned with the bar, its pads clear of the edge.
    bar = _bar(0.5)
    X = np.array([0.08, 0.0, 0.16])
    assert grasp_at(bar.grid, X, workcell.gripper) is None
    grasp = grasp_here(bar.grid, X, workcell.gripper)
    assert grasp is not None and grasp.yaw == pytest.approx(0.16)
    belief = Belief.create(bar.grid, bar.mass, bar.friction)
    assert hold_ratios(belief, X, grasp, workcell.gripper)[0] < 0.5
    twin = Twin(bar, workcell, tuple(X))
    result = twin.grasp(grasp)
    assert result.success and result.tilt < math.radians(1)
    assert twin.object_pose()[2] == pytest.approx(0.16, abs=0.01)  # not turned in the pads


@pytest.mark.parametrize(
    ('mass', 'side', 'held'), [(2.0, 0.0, True), (2.0, 0.034, True), (4.0, 0.045, False)]
)
def test_moments_along_and_across_the_pads_add_up_in_the_hold_ratio(
    mass: float, side: float, held: bool, workcell
) -> None:
    # A block 14 x 10 x 5 cm, 5.5 cm past the edge, held by its overhang in the middle or
    # to the side: 2 kg asks 0.35 of the pads' limit along the approach and 0.48 across
    # 3.4 cm to the side; 4 kg asks 0.70 and 1.26 at 4.5 cm, where the pads slip and do
    # not lift it. The twin's stiff pads hold the sum up to nearly 2 (each axis to 1, the
    # pressure's centre in a corner); a hand moved as a mocap body dropped the 2 kg block
    # at 0.83.
    occupancy = np.ones((5, 7))
    block = parse_spec(
        {
            'name': 'block',
            'cell_size': 0.02,
            'height': 0.05,
            'mass': (occupancy * mass / occupancy.size).tolist(),
            'friction': (occupancy * 0.3).tolist(),
        }
    )
    X = np.array([0.015, 0.0, 0.0])
    grasp = Grasp(np.array([-0.015, side]), 0.025, 0.0, 0.04)
    belief = Belief.create(block.grid, block.mass, block.friction)
    along = mass * 9.81 * 0.05 / (workcell.gripper.force * 0.04)
    across = mass * 9.81 * side / (workcell.gripper.force * workcell.gripper.finger_width)
    ratio = hold_ratios(belief, X, grasp, workcell.gripper)[0]
    assert ratio == pytest.approx(along + across)
    result = Twin(block, workcell, tuple(X)).grasp(grasp)
    if held:
        assert result.success and result.tilt < math.radians(1)
    else:
        assert ratio > 1.9 and not result.success


def test_a_hammer_held_by_its_head_beside_its_centre_of_mass_comes_up_level(workcell) -> None:
    # Its head lifted 3 cm, the hammer turned over in the pads and landed upside down (the
    # graph's demo, seed 7), at 0.21 of what the pads resist: the hand, a mocap body, had
    # no velocity for the contact solver, and its pads chattered while they lifted.
    hammer = load_object('hammer')
    X = np.array([0.1064, 0.1776, math.pi - 0.0784])  # the head 4.4 cm past the edge
    grasp = Grasp(np.array([-0.0051, 0.161]), 0.0155, 0.0, 0.04, span=0.04)
    belief = Belief.create(hammer.grid, hammer.mass, hammer.friction)
    assert hold_ratios(belief, X, grasp, workcell.gripper)[0] == pytest.approx(0.21, abs=0.01)
    result = Twin(hammer, workcell, tuple(X)).grasp(grasp)
    assert result.success and result.lifted_m > 0.09 and result.tilt < math.radians(2)


def test_exploration_is_reproducible_from_a_seed(workcell) -> None:
    hammer = load_object('hammer')

    def explore(seed: int) -> list:
        rng = np.random.default_rng(seed)
        twin = Twin(hammer, workcell)
        out = []
        for _ in range(2):
            p = random_push(
                hammer.grid, twin.object_pose(), workcell.table, workcell.fingertip, rng
            )
            out.append(twin.push(p))
        return out

    a, b, c = explore(7), explore(7), explore(8)
    for ra, rb in zip(a, b, strict=True):
        np.testing.assert_array_equal(ra.X_WO, rb.X_WO)
        np.testing.assert_array_equal(ra.wrench_W, rb.wrench_W)
    assert not np.array_equal(a[0].primitive.p_OA, c[0].primitive.p_OA)


def test_bad_requests_are_refused(workcell) -> None:
    twin = Twin(UNIFORM_BOX, workcell)
    bad = Waypoint(np.array([np.nan, 0.0, 0.1]), 0.1, 0.0, 'approach')
    with pytest.raises(SlideInputError, match='bad position'):
        twin.follow([bad])
    with pytest.raises(SlideInputError, match='finite'):
        Twin(UNIFORM_BOX, workcell, (float('nan'), 0.0, 0.0))


def disc(radius: float, heavy: float = 1.0) -> ObjectSpec:
    """A disc of 2 cm cells with its real outline, ``heavy`` times denser on its +x half."""
    a = np.linspace(0.0, 2 * math.pi, 96, endpoint=False)
    grid = outline_grid(radius * np.column_stack((np.cos(a), np.sin(a))), 0.02, 0.03)
    mass = 0.4 * grid.area * np.where(grid.p_OC[:, 0] > 0, heavy, 1.0)
    mass *= 0.4 / mass.sum()
    doc = {
        'name': 'disc',
        'cell_size': 0.02,
        'height': 0.03,
        'mass': grid.to_map(mass, fill=0.0).tolist(),
        'friction': grid.to_map(np.full(grid.n, 0.4), fill=0.0).tolist(),
        'outline': grid.outline.tolist(),
    }
    return parse_spec(doc)


@pytest.mark.parametrize('name', ['hammer', 'book', 'spray_gun', 'heavy disc'])
def test_the_resting_pressure_is_a_rigid_bodys_linear_pressure(name: str, workcell) -> None:
    # The finding behind the core's default support model: per cell, the table carries the
    # rigid body's linear pressure, not the cell's own weight. A disc's cells the rim cuts
    # carry their share of the square too (their contacts' stiffness scaled by it; with the
    # box cells' stiffness the smallest carried 2.4 times their share).
    spec = disc(0.07, heavy=3.0) if name == 'heavy disc' else load_object(name)
    twin = Twin(spec, workcell, (0.35, 0.0, 0.0))
    twin.settle(0.5)
    loads = np.mean([(twin.step(), twin.table_loads())[1] for _ in range(50)], axis=0)
    weight = spec.total_mass * 9.81
    rigid = Support.of(spec.grid, 'rigid').loads(spec.mass)[0]
    cell_mass = Support.of(spec.grid, 'cell-mass').loads(spec.mass)[0]
    assert loads.sum() == pytest.approx(weight, rel=0.01)
    assert np.abs(loads - rigid).sum() < 0.03 * weight
    assert np.abs(loads - cell_mass).sum() > 2 * np.abs(loads - rigid).sum()


def test_a_round_object_is_built_of_meshes_where_its_rim_cuts_the_cells(workcell) -> None:
    spec = disc(0.07)
    twin = Twin(spec, workcell, (0.35, 0.0, 0.3))
    # Each cell the rim cuts is the part of its square inside it, the others are boxes.
    types = [twin.model.geom(f'cell{i}').type[0] for i in range(spec.grid.n)]
    cut = spec.grid.area < 1.0
    assert 20 <= cut.sum() < spec.grid.n
    assert all((t == mujoco.mjtGeom.mjGEOM_MESH) == c for t, c in zip(types, cut, strict=True))


def test_a_round_object_pushed_through_its_centre_slides_straight(workcell) -> None:
    twin = Twin(disc(0.07), workcell, (0.35, 0.0, 0.0))
    rec = twin.push(Primitive.create((-0.07, 0.0), (1.0, 0.0), travel=0.05, speed=0.05))
    start, end = rec.X_WO[0], rec.X_WO[-1]
    assert end[0] - start[0] > 0.03
    assert abs(end[1] - start[1]) < 2e-3
    assert abs(end[2] - start[2]) < math.radians(1.0)


def test_a_launched_block_stops_where_coulomb_friction_says_and_stays(workcell) -> None:
    twin = Twin(UNIFORM_BOX, workcell, (0.3, 0.0, 0.0))
    twin.settle(0.2)
    x0 = twin.object_pose()[0]
    obj = twin.model.body_jntadr[twin.model.body('object').id]
    twin.data.qvel[twin.model.jnt_dofadr[obj]] = 1.0  # 1 m/s along +x
    twin.settle(0.6)
    mu = float(UNIFORM_BOX.friction[0])
    expected = 1.0 / (2 * mu * 9.81)
    stopped = twin.object_pose()
    assert stopped[0] - x0 == pytest.approx(expected, rel=0.02)
    assert abs(stopped[1]) < 1e-3 and abs(stopped[2]) < 0.01
    twin.settle(0.5)  # static friction holds it: no creep
    np.testing.assert_allclose(twin.object_pose(), stopped, atol=1e-6)


@pytest.mark.parametrize('name', ['box', 'book', 'hammer'])
def test_a_steadily_pushed_object_is_carried_by_its_weight_and_slides_by_coulomb(
    name: str, workcell
) -> None:
    spec = load_object(name)
    twin = Twin(spec, workcell, (0.35, 0.0, 0.0))
    weight = spec.total_mass * 9.81
    com = spec.mass @ spec.grid.p_OC / spec.total_mass
    back = float(spec.grid.p_OC[:, 0].min()) - spec.grid.cell_size / 2
    loads: list[np.ndarray] = []
    push = []
    primitive = Primitive.create((back - 0.001, com[1]), (1.0, 0.0), travel=0.06, speed=0.05)
    rec = twin.push(
        primitive, on_step=lambda: (loads.append(twin.table_loads()), push.append(twin.wrench()))
    )
    speed = np.diff(rec.X_WO[:, 0]) / np.diff(rec.t)
    steady = np.abs(speed[: len(loads)] - 0.05) < 0.005
    assert steady.sum() > 200
    N = np.array(loads)[steady]
    # Every step of the push, not only on average (MuJoCo's own friction made it chatter
    # between 0 and 7 weights: slide_sim.friction).
    assert np.all(np.abs(N.sum(axis=1) - weight) < 0.10 * weight)
    # The pusher's force is the table's Coulomb friction, sum_i mu_i N_i, on average.
    friction = N @ spec.friction
    pushing = np.array(push)[steady, 0]
    assert pushing.mean() == pytest.approx(friction.mean(), rel=0.02)


def test_the_fingers_open_as_wide_as_the_workcell_says(workcell) -> None:
    # The fingers' set points were capped at 4 cm each whatever the gripper's opening.
    import dataclasses

    for opening in (0.05, 0.12):
        cell = dataclasses.replace(
            workcell, gripper=dataclasses.replace(workcell.gripper, max_opening=opening)
        )
        twin = Twin(load_object('box'), cell, (0.4, 0.0, 0.0))
        twin.command_gripper(opening, ramp_s=0.0)
        twin.settle(1.0)
        assert twin.gripper_width() == pytest.approx(opening, abs=0.002)


def test_the_gripper_goes_only_where_an_arm_could_take_it(workcell) -> None:
    # Its paths were not checked: a hand sent 10 cm into the table went through it and
    # shoved the book 11 cm, and one sent to x = 50 m was taken; an opening of 0.5 m was
    # clamped to the gripper's 8 cm and SUCCEEDED.
    from slide_core.planning import grasp_waypoints

    book = load_object('book')
    twin = Twin(book, workcell, (0.07, 0.0, 0.0))
    for p, reason in (
        ([0.3, 0.0, -0.1], r'the gripper would be 1\d\d.\d mm into the table'),
        ([0.3, 0.0, 0.03], 'mm into the table'),  # the lower pad, open wide, under the top
        ([50.0, 0.0, 0.2], "out of the gripper's reach"),
    ):
        with pytest.raises(SlideInputError, match=reason):
            twin.check_path('gripper', [Waypoint(np.array(p), 0.1, 0.0, 'there')])
    with pytest.raises(SlideInputError, match='width 0.5 m is beyond the gripper opening 0.08 m'):
        twin.command_gripper(0.5)
    # A grasp's own path, its pads reaching under the top beyond the edge, is taken.
    grasp = Grasp(
        np.array([-0.005, 0.0]), z=float(book.grid.heights.max()) / 2, yaw=0.0, grip=0.04
    )
    approach, up = grasp_waypoints(grasp, 0.1, workcell.gripper)
    twin.check_path('gripper', [*approach, *up])
    assert twin.grasp(grasp, lift=0.1).success


def test_the_fingertip_reaches_the_whole_of_a_large_table(workcell) -> None:
    # The carriage moved 2 m at most: on a 4 x 4 m table the far half was out of reach, and
    # a push there was refused only when it was made.
    from slide_core.model import Waypoint

    big = replace(workcell, table=replace(workcell.table, depth=4.0, width=4.0))
    twin = Twin(load_object('box'), big, (3.0, 1.5, 0.0))
    on_far_corner = Waypoint(np.array([3.9, 1.9, 0.1]), 0.1, 0.0, 'there')
    twin.check_path('fingertip', [on_far_corner])
    with pytest.raises(SlideInputError, match="out of the fingertip's reach"):
        twin.check_path('fingertip', [Waypoint(np.array([50.0, 0.0, 0.1]), 0.1, 0.0, 'far')])


def test_the_workcells_obstacles_stand_in_the_twin_and_starts_keep_clear_of_them(
    workcell,
) -> None:
    # The twin built none: a push went through where one stood, and the camera never saw
    # one; a random start could lie inside one.
    from slide_core.geometry import reach
    from slide_core.model import Obstacle
    from slide_sim.scene import START_MARGIN_MIN, random_start

    box = load_object('box')
    # A wall across the middle of the starts' region.
    wall = Obstacle((0.3, 0.0), (0.02, 0.25))
    cell = replace(workcell, obstacles=(wall,))
    for seed in range(20):
        X = random_start(box, cell, seed)
        assert wall.distance(X[:2])[0] >= reach(box.grid) + START_MARGIN_MIN
    twin = Twin(box, cell, (0.5, 0.0, 0.0))
    geom = twin.model.geom('obstacle_0')
    assert np.allclose(geom.size, (0.02, 0.25, 0.05)) and np.allclose(geom.pos, (0.3, 0.0, 0.05))
    # Pushed into it, the box (18 cm long) stops against it.
    twin.push(Primitive.create([0.09, 0.0], [-1.0, 0.0], 0.12, 0.05))
    assert twin.object_pose()[0] - 0.09 > 0.3 + 0.02 - 0.005
    everywhere = replace(workcell, obstacles=(Obstacle((0.4, 0.0), (0.4, 0.6)),))
    with pytest.raises(SlideInputError, match='no random start for box leaves'):
        random_start(box, everywhere, 0)
    # One whose height the workcell gives stands that tall (10 cm when it does not say).
    tall = Twin(box, replace(workcell, obstacles=(Obstacle((0.3, 0.0), (0.02, 0.25), 0.3),)))
    geom = tall.model.geom('obstacle_0')
    assert np.allclose(geom.size, (0.02, 0.25, 0.15)) and np.allclose(geom.pos, (0.3, 0.0, 0.15))


def test_an_object_too_large_for_a_random_start_says_by_how_much(workcell) -> None:
    # 'rod50 is too large for the table', of a 50 cm rod on a 0.8 x 1.2 m table; and then
    # a 40 x 30 cm tray, with exactly the 15 cm asked for around it, was refused.
    from slide_core.geometry import reach, to_world
    from slide_sim.scene import START_MARGIN_MIN, random_start

    def rod(cells: int) -> ObjectSpec:
        return parse_spec(
            {
                'name': f'rod{2 * cells}',
                'cell_size': 0.02,
                'height': 0.02,
                'mass': [[0.01] * cells],
                'friction': [[0.4] * cells],
            }
        )

    t = workcell.table
    for cells in (20, 25, 34):  # 15 cm around it, then less, as the table allows
        spec = rod(cells)
        X = np.array(random_start(spec, workcell, 0))
        corners = to_world(X, spec.grid.p_OC)
        assert reach(spec.grid) + START_MARGIN_MIN <= X[0] <= t.depth - START_MARGIN_MIN
        assert corners[:, 0].min() > 0.0 and corners[:, 0].max() < t.depth
    with pytest.raises(
        SlideInputError,
        match=r'^rod76 reaches 38\.4 cm from its centre, .* may reach 35\.0 cm at most',
    ):
        random_start(rod(38), workcell, 0)
