"""Object specification files and the object library."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from slide_core.model import (
    SpecError,
    library_names,
    load_object,
    load_spec,
    parse_spec,
    save_spec,
)

EXAMPLE = {
    'name': 'hammer',
    'cell_size': 0.02,
    'height': 0.03,
    'mass': [[0.0, 0.05, 0.05], [0.02, 0.02, 0.0]],
    'friction': [[0.0, 0.5, 0.5], [0.3, 0.3, 0.0]],
}


def test_the_documented_example_parses_with_the_documented_frame() -> None:
    spec = parse_spec(EXAMPLE)
    assert spec.grid.n == 4
    # Row 0 is +y, column 0 is -x; origin at the bounding box centre.
    np.testing.assert_allclose(spec.grid.p_OC[0], [0.0, 0.01])
    np.testing.assert_allclose(spec.mass, [0.05, 0.05, 0.02, 0.02])
    assert spec.total_mass == pytest.approx(0.14)
    assert spec.p_OCom[1] > 0  # the heavy row is the +y one


def test_library_has_eight_heterogeneous_objects_of_28_to_88_cells() -> None:
    names = library_names()
    assert len(names) >= 8
    for name in names:
        spec = load_object(name)
        assert 28 <= spec.grid.n <= 88, name
        assert spec.grid.is_connected()
        assert spec.mass.max() / spec.mass.min() > 1.3 or np.ptp(spec.friction) > 0.1, name
    assert {'book', 'hammer', 'box', 'crimp', 'snack', 'wrench', 'spray_gun', 'toothpaste'} <= set(
        names
    )


def test_a_folder_named_like_a_library_object_does_not_hide_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bag recorded as --out hammer: 'hammer: cannot read the object file (Is a directory)'.
    (tmp_path / 'hammer').mkdir()
    monkeypatch.chdir(tmp_path)
    assert load_object('hammer').name == 'hammer'


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    spec = load_object('spray_gun')
    path = save_spec(spec, tmp_path / 'gun.yaml')
    back = load_object(path)
    np.testing.assert_array_equal(back.grid.occupancy, spec.grid.occupancy)
    np.testing.assert_allclose(back.mass, spec.mass)
    np.testing.assert_allclose(back.friction, spec.friction)
    np.testing.assert_allclose(back.grid.heights, spec.grid.heights)


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        ({'friction': [[0.0, 0.5], [0.3, 0.3]]}, r'^friction: shape \(2, 2\) differs'),
        (
            {'mass': [[0.0, -0.05, 0.05], [0.02, 0.02, 0.0]]},
            r'^mass: negative mass -0.05 at row 0',
        ),
        (
            {'friction': [[0.0, 2.5, 0.5], [0.3, 0.3, 0.0]]},
            r'^friction: 2.5 at row 0, column 1 is outside',
        ),
        ({'mass': [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]}, r'^mass: no cells'),
        ({'mass': [[0.05, 0.0, 0.05], [0.0, 0.0, 0.0]]}, r'^mass: the cells are disconnected'),
        ({'masss': 1}, r"^'masss': unknown field"),
        ({'cell_size': -0.02}, r'^cell_size: must be positive'),
        ({'cell_size': 'two'}, r'^cell_size: must be a finite number'),
        # A YAML integer of any length: it overflowed the float conversion (exit 1).
        ({'cell_size': 10**400}, r'^cell_size: must be a finite number, got 1000+\.\.\.$'),
        ({'height': 10**400}, r'^height: must be a finite number'),
        ({'mass': [[0.05, 10**400, 0.05], [0.02, 0.02, 0.0]]}, r'^mass: values must be finite'),
        ({'mass': [[0.05, 'x', 0.05], [0.02, 0.02, 0.0]]}, r'^mass: row 0, column 1 is .x., not'),
        ({'mass': [[0.05, '0.1', 0.05], [0.02, 0.02, 0.0]]}, r'^mass: row 0, column 1 is .0\.1.'),
        ({'mass': [[0.05, True, 0.05], [0.02, 0.02, 0.0]]}, r'^mass: row 0, column 1 is True'),
        ({'mass': [[0.05, 1e30, 0.05], [0.02, 0.02, 0.0]]}, r'^mass: 1e\+30 kg at row 0'),
        ({'cell_size': 50.0}, r'^cell_size: 50.0 m is outside'),
        ({'friction': [[0.0, 50.0, 0.5], [0.3, 0.3, 0.0]]}, r'^friction: 50.0 at row 0'),
        ({'height': True}, r'^height: must be a finite number'),
        ({'mass': [[0.05, 0.05], [0.02, 0.02, 0.0]]}, r'^mass: every row must have the same'),
        ({'heights': [[0.03] * 3] * 2}, r'^heights: give either height or heights'),
    ],
)
def test_spec_errors_name_the_field(change: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SpecError, match=message):
        parse_spec({**EXAMPLE, **change})


CHAMFERED = [
    [-0.03, -0.02], [0.01, -0.02], [0.01, 0.0], [0.03, 0.0], [0.03, 0.01], [0.02, 0.02],
    [-0.01, 0.02], [-0.01, 0.0], [-0.03, 0.0],
]  # fmt: skip
"""EXAMPLE's outline with its +x, +y corner cut off by 1 cm."""


def test_an_outline_makes_its_cells_the_parts_inside_it(tmp_path: Path) -> None:
    spec = parse_spec({**EXAMPLE, 'outline': CHAMFERED})
    assert spec.grid.outline is not None
    # The corner cell (row 0, column 2) keeps 7/8 of its square; the others all of theirs.
    corner = spec.grid.index_of(0, 2)
    assert spec.grid.area[corner] == pytest.approx(0.875, abs=0.01)
    assert np.delete(spec.grid.area, corner) == pytest.approx(1.0)
    back = load_object(save_spec(spec, tmp_path / 'chamfered.yaml'))
    np.testing.assert_allclose(back.grid.outline, spec.grid.outline)
    np.testing.assert_allclose(back.grid.area, spec.grid.area)
    # The corner's mass is bounded by its part's volume: 0.25 kg of osmium fills 11 cm^3,
    # more than the 10.5 cm^3 inside the outline, less than the square's 12 cm^3.
    heavy = {**EXAMPLE, 'mass': [[0.0, 0.05, 0.25], [0.02, 0.02, 0.0]]}
    assert parse_spec(heavy).mass.max() == 0.25
    with pytest.raises(SpecError, match=r'^mass: 0.25 kg at row 0, column 2 .* its 10.5 cm'):
        parse_spec({**heavy, 'outline': CHAMFERED})


def test_a_cell_far_lighter_than_its_air_is_refused() -> None:
    # 1e-300 kg was taken as a cell, and the twin's MuJoCo refused the scene.
    for tiny in (1e-300, 1e-8):  # (1.2e-5 m^3 of air weighs 1.4e-5 kg)
        with pytest.raises(SpecError, match=r'^mass: .* at row 1, column 1 is less than its'):
            parse_spec({**EXAMPLE, 'mass': [[0.0, 0.05, 0.02], [0.02, tiny, 0.0]]})
    # A foam tray's floor, about 2 kg/m^3 over its rim's height, is an object.
    volume = EXAMPLE['cell_size'] ** 2 * EXAMPLE['height']
    assert parse_spec({**EXAMPLE, 'mass': [[0.0, 0.05, 0.02], [0.02, 2 * volume, 0.0]]})


@pytest.mark.parametrize(
    ('outline', 'message'),
    [
        ('round', r'^outline: must be a list of \[x, y\] vertices'),
        ([[0.0, 0.0], [0.01, 'a'], [0.0, 0.01]], r'^outline: must be a list of \[x, y\]'),
        ([[0.0, 0.0], [0.01, 0.0]], r'^outline: .*at least 3 vertices'),
        ([[-0.03, -0.02], [0.01, -0.02], [0.01, 0.0], [-0.03, 0.02]], r'^outline: .*cell'),
        (
            [[-0.03, -0.02], [0.01, -0.02], [0.01, 0.0], [-0.03, 0.0]],
            r'^outline: the cell at row 0, column 1 has mass but lies outside',
        ),
        (  # across the L's concave corner: the planner pushed where the twin had nothing
            [
                [-0.03, -0.02],
                [0.01, -0.02],
                [0.03, 0.0],
                [0.03, 0.02],
                [-0.01, 0.02],
                [-0.01, 0.0],
                [-0.03, 0.0],
            ],
            r'^outline: 50% of the empty cell at row 1, column 2 lies inside the outline',
        ),
    ],
)
def test_a_bad_outline_is_refused_saying_why(outline: object, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_spec({**EXAMPLE, 'outline': outline})


def test_missing_fields_and_bad_files(tmp_path: Path) -> None:
    doc = dict(EXAMPLE)
    del doc['friction']
    with pytest.raises(SpecError, match='^friction: missing'):
        parse_spec(doc)
    bad = tmp_path / 'bad.yaml'
    bad.write_text('name: [unclosed')
    with pytest.raises(SpecError, match='not valid YAML'):
        load_spec(bad)
    with pytest.raises(SpecError, match='cannot read'):
        load_spec(tmp_path / 'absent.yaml')
    with pytest.raises(SpecError, match='no library object'):
        load_object('anvil')
    partial = tmp_path / 'partial.yaml'
    partial.write_text(yaml.safe_dump(doc))  # a file's error names the file
    with pytest.raises(SpecError, match=f'^{partial}: friction: missing'):
        load_object(partial)
    good = tmp_path / 'ok.yaml'
    good.write_text(yaml.safe_dump(EXAMPLE))
    assert load_object(good).name == 'hammer'


def test_an_object_of_too_many_cells_is_refused_at_once(tmp_path):
    doc = {
        'name': 'carpet',
        'cell_size': 0.005,
        'height': 0.01,
        'mass': [[0.001] * 200] * 200,
        'friction': [[0.3] * 200] * 200,
    }
    with pytest.raises(SpecError, match=r'^mass: 40000 cells; at most'):
        parse_spec(doc)


def test_the_summary_shows_small_masses_and_the_occupied_extent() -> None:
    # A 6.7 mg cell showed as 0.0 kg, and empty border columns counted as the object's size.
    light = {**EXAMPLE, 'mass': [[0.0, 6.7e-6, 6.7e-6], [6.7e-6, 6.7e-6, 0.0]]}
    light |= {'height': 0.001, 'mass': [[0.0, 0.0, 6.7e-6, 6.7e-6], [0.0, 6.7e-6, 6.7e-6, 0.0]]}
    light |= {'friction': [[0.0, 0.0, 0.5, 0.5], [0.0, 0.3, 0.3, 0.0]]}
    summary = parse_spec(light).summary()
    assert summary['mass_per_cell_kg'] == [6.7e-6, 6.7e-6]
    assert summary['mass_kg'] == pytest.approx(2.68e-5)
    assert summary['grid'] == [2, 4] and summary['size_m'] == [0.06, 0.04]


def test_numbers_in_e_notation_without_a_dot_are_numbers(tmp_path: Path) -> None:
    # YAML 1.1 read 1e-2 as text: 'mass: row 0, column 0 is '1e-2', not a number'.
    path = tmp_path / 'sci.yaml'
    path.write_text(
        'name: sci\ncell_size: 2e-2\nheight: 3E-2\n'
        'mass: [[0, 5e-2, 5.0e-2], [2e-2, 2e-2, 0]]\nfriction: [[0, 0.5, 0.5], [0.3, 0.3, 0]]\n'
    )
    spec = load_spec(path)
    assert spec.grid.cell_size == 0.02 and spec.total_mass == pytest.approx(0.14)
    assert spec.summary() == parse_spec(EXAMPLE).summary() | {'name': 'sci'}
