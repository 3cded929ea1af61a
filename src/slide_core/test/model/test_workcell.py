"""The workcell file: the repository's own is valid, and each bad field is named."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from slide_core.errors import SlideInputError
from slide_core.geometry import Grid
from slide_core.model import (
    UNKNOWN_HEIGHT,
    Fingertip,
    WorkcellError,
    load_workcell,
    parse_workcell,
    workcell_path,
)

ROOT = Path(__file__).resolve().parents[4]


def _doc() -> dict:
    return yaml.safe_load((ROOT / 'config' / 'workcell.yaml').read_text())


def test_the_repository_workcell_loads_and_names_the_camera_file():
    cell = load_workcell(ROOT / 'config' / 'workcell.yaml')
    assert cell.table.depth > 0 and cell.table.width > 0
    assert cell.fingertip.clearance >= 0
    assert cell.camera_extrinsics == (ROOT / 'config' / 'twin_camera.yaml').resolve()
    assert cell.camera_extrinsics.is_file()
    assert cell.p_EF == (0.0, 0.0, 0.1)  # the fingertip's mount on the arm


def test_the_default_workcell_is_found_through_the_environment(monkeypatch, tmp_path):
    (tmp_path / 'workcell.yaml').write_text(yaml.safe_dump(_doc()))
    monkeypatch.setenv('SLIDE_CONFIG_DIR', str(tmp_path))
    assert workcell_path() == tmp_path / 'workcell.yaml'
    assert load_workcell().source == tmp_path / 'workcell.yaml'


@pytest.mark.parametrize(
    ('path', 'value', 'message'),
    [
        (('table', 'depth'), -1.0, r'^table\.depth: must be positive'),
        (('table', 'width'), '1.2', r'^table\.width: must be a finite number'),
        (('table', 'width'), 10**400, r'^table\.width: must be a finite number, got 1000'),
        (('fingertip', 'radius'), True, r'^fingertip\.radius: must be a finite number'),
        (('fingertip', 'height'), 0.001, r'^fingertip\.height: .* into the table'),
        (('gripper', 'min_grip'), 0.05, r'^gripper\.min_grip: .* longer than the pads'),
        (('camera', 'extrinsics'), '', r'^camera\.extrinsics: must name'),
        # tf2 refuses a leading slash; 'world' made the URDF's table a link joined to itself.
        (('table', 'frame_id'), '/table', r"^table\.frame_id: '/table' is not a frame name"),
        (('table', 'frame_id'), 'my table', r'^table\.frame_id: .* is not a frame name'),
        (('table', 'frame_id'), 'world', r"^table\.frame_id: 'world' is the workcell URDF's"),
        # The executor's own parameter, which no launch argument or file set.
        (('fingertip', 'mount'), [0.0, 0.1], r'^fingertip\.mount: must be the fingertip centre'),
        (('fingertip', 'mount'), [0.0, 0.0, 100.0], r'^fingertip\.mount: .* at most 0\.5 m'),
        (('fingertip', 'mount'), None, r'^fingertip\.mount: .* got'),
        (('obstacles',), [{'centre': [0.1], 'half_size': [0.1, 0.1]}], r'^obstacles\[0\]'),
        # Planned around as if it were nowhere, or everywhere (the planner took both).
        (
            ('obstacles',),
            [{'centre': [float('nan'), 0.0], 'half_size': [0.1, 0.1]}],
            r'^obstacles\[0\]\.centre: must be two finite numbers',
        ),
        (
            ('obstacles',),
            [{'centre': [0.3, 0.0], 'half_size': [float('inf'), 0.05]}],
            r'^obstacles\[0\]\.half_size: must be two finite numbers',
        ),
        (('planner',), {1: 2, 'zz': 3}, r'^planner: setting names are words, got 1$'),
        # Taken, and no object could ever fit the gripper, or be kept from a box that is
        # nowhere near the table (in the robot's base frame, say).
        (('gripper', 'max_opening'), 0.004, r'^gripper\.max_opening: .* leaves no room'),
        # A 5 m fingertip (mm taken for m) was read, and an episode failed at its first
        # push with a waypoint out of reach.
        (('fingertip', 'radius'), 5.0, r'^fingertip\.radius: 5\.0 m is more than a workcell'),
        (('table', 'depth'), 0.012, r'^fingertip\.radius: 0\.008 m is as wide as the table'),
        # Lengths in mm were loaded: a fingertip 17 m above the table, any object fitting
        # an 80 m opening.
        (
            ('fingertip', 'height'),
            17,
            r'^fingertip\.height: 17 m is more .* \(0\.3 m at most\): is it in m\?$',
        ),
        (('gripper', 'max_opening'), 80, r'^gripper\.max_opening: 80 m is more'),
        (('table', 'height'), 750, r'^table\.height: 750 m is more'),
        # PyYAML reads 8e-3 as text, and the message did not say why it was no number.
        (('fingertip', 'radius'), '8e-3', r"got '8e-3': YAML read it as text; write it with"),
        # 700 for 70.0 N was taken: the planner chose goals the real pads could not hold.
        (('gripper', 'force'), 700, r'^gripper\.force: 700 N is more .* \(400\.0 N at most\)$'),
        # The fingertip's bottom on the table top was taken: dragged over it by any error.
        (('fingertip', 'height'), 0.015, r'^fingertip\.height: 0\.015 m puts .* on or into'),
        (
            ('fingertip', 'mu'),
            30,
            r'^fingertip\.mu: 30 \(Coulomb\) is more .* \(2\.0 \(Coulomb\) at most\)$',
        ),
        (
            ('obstacles',),
            [{'centre': [1.6, 0.0], 'half_size': [0.05, 0.05]}],
            r'^obstacles\[0\]: centre \[1\.6, 0\.0\], .* lies wholly off the table',
        ),
        (
            ('obstacles',),
            [{'centre': [0.4, -0.9], 'half_size': [0.05, 0.05]}],
            r'^obstacles\[0\]: .* wholly off the table',
        ),
        # Taken: each episode explored and identified for minutes, then found no goal.
        (
            ('obstacles',),
            [{'centre': [0.4, 0.0], 'half_size': [0.5, 1.0]}],
            r'^obstacles\[0\]: it covers the whole free edge .*: move or shrink one$',
        ),
        (
            ('obstacles',),
            [
                {'centre': [0.4, 0.6], 'half_size': [0.1, 0.1]},  # not on the edge
                {'centre': [0.05, 0.3], 'half_size': [0.1, 0.35]},
                {'centre': [0.0, -0.35], 'half_size': [0.02, 0.3]},
            ],
            r'^obstacles\[1, 2\]: together they cover the whole free edge',
        ),
    ],
)
def test_bad_fields_are_named(path, value, message):
    doc = copy.deepcopy(_doc())
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(WorkcellError, match=message):
        parse_workcell(doc, ROOT / 'config' / 'workcell.yaml')


def test_a_namespaced_frame_is_a_frame_name():
    doc = copy.deepcopy(_doc())
    doc['table']['frame_id'] = 'cell_2/table'
    assert parse_workcell(doc, ROOT / 'config' / 'workcell.yaml').table.frame_id == 'cell_2/table'


def test_a_bad_field_names_the_file_read_and_a_file_for_the_folder_is_said(monkeypatch, tmp_path):
    # 'table.depth: 800 m is more than a workcell has', of a file chosen by the
    # environment; and SLIDE_CONFIG_DIR naming the workcell file itself read as
    # '.../my_cell.yaml/workcell.yaml: cannot read the workcell file (Not a directory)'.
    doc = _doc()
    doc['table']['depth'] = 800
    (tmp_path / 'workcell.yaml').write_text(yaml.safe_dump(doc))
    monkeypatch.setenv('SLIDE_CONFIG_DIR', str(tmp_path))
    with pytest.raises(WorkcellError, match=f'^{tmp_path / "workcell.yaml"}: table.depth: 800'):
        load_workcell()
    for given, why in (
        (tmp_path / 'workcell.yaml', 'is a file'),
        (tmp_path / 'nowhere', 'does not exist'),
        (tmp_path.parent, 'holds no workcell.yaml'),
    ):
        monkeypatch.setenv('SLIDE_CONFIG_DIR', str(given))
        with pytest.raises(WorkcellError, match=f'^SLIDE_CONFIG_DIR={given} {why}: it must be'):
            load_workcell()


@pytest.mark.parametrize(
    ('path', 'message'),
    [
        # Read as no obstacles at all, and the table's other keys as nothing.
        (('obstacle',), r"workcell\.yaml: unknown key 'obstacle': the keys are table, "),
        (('table', 'yaw'), r"^table: unknown key 'yaw': the keys are frame_id, depth, "),
        (('gripper', 'finger_lenght'), r"^gripper: unknown key 'finger_lenght'"),
        (('fingertip', 'mu_table'), r"^fingertip: unknown key 'mu_table'"),
        (('camera', 'intrinsics'), r"^camera: unknown key 'intrinsics'"),
    ],
)
def test_a_misspelt_key_is_named_not_left_out(path, message):
    doc = copy.deepcopy(_doc())
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = [{'centre': [0.4, 0.0], 'half_size': [0.05, 0.05]}]
    with pytest.raises(WorkcellError, match=message):
        parse_workcell(doc, ROOT / 'config' / 'workcell.yaml')


def test_a_misspelt_obstacle_key_is_named():
    doc = copy.deepcopy(_doc())
    doc['obstacles'] = [{'center': [0.4, 0.0], 'half_size': [0.05, 0.05]}]
    with pytest.raises(WorkcellError, match=r"^obstacles\[0\]: unknown key 'center'"):
        parse_workcell(doc, ROOT / 'config' / 'workcell.yaml')


def test_a_key_given_twice_is_refused_with_its_line(tmp_path):
    # The last one won: a fixture listed under obstacles, and the shipped file's own
    # 'obstacles: []' left at its end, gave a workcell without it (plans pushed through it).
    text = (ROOT / 'config' / 'workcell.yaml').read_text()
    assert '\nobstacles: []' in text
    fixture = 'obstacles:\n  - {centre: [0.17, 0.0], half_size: [0.03, 0.15]}\n'
    (tmp_path / 'workcell.yaml').write_text(fixture + text)
    (tmp_path / 'twin_camera.yaml').write_text((ROOT / 'config' / 'twin_camera.yaml').read_text())
    lines = (fixture + text).splitlines()
    line = next(k for k, v in enumerate(lines) if v.startswith('obstacles: []')) + 1
    with pytest.raises(WorkcellError, match=rf"line {line} \(the key 'obstacles' is given twice"):
        load_workcell(tmp_path / 'workcell.yaml')


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(WorkcellError, match='cannot read the workcell file'):
        load_workcell(tmp_path / 'nope.yaml')


def test_a_push_acts_at_the_middle_of_the_side_the_fingertip_covers():
    tip = Fingertip(radius=0.008, length=0.03, mu=0.3, height=0.017)  # covers 2 to 32 mm
    assert tip.force_height(0.05) == pytest.approx(0.017)  # a tall side: the centre
    assert tip.force_height(0.02) == pytest.approx(0.011)  # 2 to 20 mm
    assert tip.force_height(0.001) == pytest.approx(0.0005)  # below the fingertip's bottom
    with pytest.raises(SlideInputError, match='positive'):
        tip.force_height(0.0)
    # Per cell of a grid; zeros when the push has no moment.
    grid = Grid(0.01, np.array([[True, True, False]]), np.array([[0.05, 0.02, 0.0]]))
    np.testing.assert_allclose(tip.force_heights(grid), [0.017, 0.011])
    np.testing.assert_allclose(tip.push_heights(grid, True), [0.017, 0.011])
    np.testing.assert_array_equal(tip.push_heights(grid, False), [0.0, 0.0])


def test_an_obstacles_height_is_read_when_given_and_unknown_otherwise():
    doc = copy.deepcopy(_doc())
    doc['obstacles'] = [
        {'centre': [0.4, 0.3], 'half_size': [0.05, 0.05], 'height': 0.25},
        {'centre': [0.4, -0.3], 'half_size': [0.05, 0.05]},
        {'centre': [0.5, 0.0], 'half_size': [0.05, 0.05], 'height': None},
    ]
    tall, unknown, unsaid = parse_workcell(doc, Path('workcell.yaml')).obstacles
    assert tall.height == 0.25 and tall.top == 0.25
    assert unknown.height is None and unsaid.height is None
    assert unknown.top == UNKNOWN_HEIGHT >= 1.0  # nothing the arm passes over


@pytest.mark.parametrize(
    ('height', 'message'),
    [
        (0.0, r'^obstacles\[0\]\.height: must be positive, got 0\.0$'),
        (-0.1, r'^obstacles\[0\]\.height: must be positive'),
        (250, r'^obstacles\[0\]\.height: 250 m is more than a workcell has .*: is it in m\?$'),
        ('tall', r"^obstacles\[0\]\.height: must be a finite number, got 'tall'$"),
        (float('nan'), r'^obstacles\[0\]\.height: must be a finite number'),
    ],
)
def test_a_bad_obstacle_height_is_refused(height: object, message: str) -> None:
    doc = copy.deepcopy(_doc())
    doc['obstacles'] = [{'centre': [0.4, 0.3], 'half_size': [0.05, 0.05], 'height': height}]
    with pytest.raises(WorkcellError, match=message):
        parse_workcell(doc, Path('workcell.yaml'))


def test_obstacles_on_the_edge_that_leave_a_gap_are_taken():
    doc = copy.deepcopy(_doc())
    doc['obstacles'] = [
        {'centre': [0.05, 0.3], 'half_size': [0.1, 0.35]},  # y from -0.05
        {'centre': [0.0, -0.35], 'half_size': [0.02, 0.29]},  # y to -0.06: 1 cm free
        {'centre': [0.3, 0.0], 'half_size': [0.2, 0.7]},  # across the table, off the edge
    ]
    assert len(parse_workcell(doc, Path('workcell.yaml')).obstacles) == 3
