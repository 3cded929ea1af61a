"""The belief: validation at the boundary, derived beliefs, and its YAML file."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from slide_core.geometry import Grid
from slide_core.model import (
    Belief,
    BeliefError,
    load_belief,
    load_object,
    max_cell_mass,
    save_belief,
)


@pytest.fixture
def hammer():
    return load_object('hammer')


def _belief(spec, K=3):
    rng = np.random.default_rng(0)
    m = spec.mass[None] * rng.uniform(0.8, 1.2, (K, spec.grid.n))
    mu = np.clip(spec.friction[None] * rng.uniform(0.8, 1.2, (K, spec.grid.n)), 0, 1)
    return Belief.create(spec.grid, m, mu, rng.uniform(0.1, 1.0, K), np.arange(K) + 1.0, 'test')


def test_weights_are_normalised_and_the_most_probable_model_is_the_heaviest_weight(hammer):
    b = _belief(hammer)
    assert b.weight.sum() == pytest.approx(1.0)
    one = b.most_probable()
    assert one.K == 1
    np.testing.assert_allclose(one.mass[0], b.mass[b.best])
    u = b.uniform()
    assert np.allclose(u.mass, u.mass[0, 0])
    assert u.mass.sum() == pytest.approx(b.mass[b.best].sum())
    total_friction = np.sum(b.mass[b.best] * b.friction[b.best])
    assert np.sum(u.mass * u.friction) == pytest.approx(total_friction)


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        ({'weight': [np.nan, 1.0, 1.0]}, 'weights must be'),
        ({'weight': [-1.0, 1.0, 1.0]}, 'weights must be'),
        ({'friction_value': 50.0}, r'friction coefficients must lie in \[0, 2'),
        ({'mass_value': 1e6}, 'more than its volume of the densest material'),
        ({'mass_value': np.nan}, 'NaN or infinite'),
        ({'mass_value': 0.0}, 'positive mass'),
    ],
)
def test_implausible_beliefs_are_refused(hammer, change, message):
    b = _belief(hammer)
    m, mu, w = b.mass.copy(), b.friction.copy(), b.weight.copy()
    if 'weight' in change:
        w = np.asarray(change['weight'])
    if 'friction_value' in change:
        mu[0, 0] = change['friction_value']
    if 'mass_value' in change:
        m[0, 0] = change['mass_value']
    with pytest.raises(BeliefError, match=message):
        Belief.create(hammer.grid, m, mu, w)


def test_yaml_round_trip_and_a_failed_write_keeps_the_old_file(hammer, tmp_path, monkeypatch):
    b = _belief(hammer)
    path = save_belief(b, tmp_path / 'b.yaml', name='hammer')
    back = load_belief(path)
    np.testing.assert_allclose(back.mass, b.mass, atol=1e-7)
    np.testing.assert_allclose(back.weight, b.weight)
    assert back.support == b.support == 'rigid'
    assert back.push_moment is b.push_moment is True
    # A file from before the support model was written down was identified with m_i g,
    # and one from before the push's moment was, without it.
    doc = yaml.safe_load(path.read_text())
    del doc['support'], doc['push_moment']
    old = tmp_path / 'old.yaml'
    old.write_text(yaml.safe_dump(doc))
    assert load_belief(old).support == 'cell-mass'
    assert load_belief(old).push_moment is False
    # A misspelt key is named: push_momnet was read as a belief without the moment.
    for where, key in ((doc, 'push_momnet'), (doc['models'][0], 'wieght')):
        where[key] = True
        old.write_text(yaml.safe_dump(doc))
        with pytest.raises(BeliefError, match=f"unknown key '{key}'"):
            load_belief(old)
        del where[key]
    doc['push_moment'] = 'yes'
    old.write_text(yaml.safe_dump(doc))
    with pytest.raises(BeliefError, match=r'old\.yaml: push_moment must be true or false'):
        load_belief(old)
    old.unlink()
    before = path.read_text()

    def broken_dump(*args, **kwargs):
        raise OSError('disk full')

    monkeypatch.setattr(yaml, 'safe_dump', broken_dump)
    with pytest.raises(OSError):
        save_belief(b, path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ['b.yaml']


def test_cells_covered_in_part_hold_their_share_in_maps_and_files(tmp_path):
    coverage = np.array([[0.5, 1.0, 1.0], [1.0, 1.0, 0.25]])
    occ = np.ones((2, 3), bool)
    grid = Grid(0.02, occ, np.full(occ.shape, 0.03), coverage)
    whole = Grid(0.02, occ, np.full(occ.shape, 0.03))
    # A cell can hold its covered volume of the densest material, no more.
    np.testing.assert_allclose(max_cell_mass(grid), max_cell_mass(whole) * grid.area)
    # Uniform maps are a uniform density: each cell's mass goes with its covered area.
    b = Belief.create(grid, np.full(6, 0.01) * grid.area, np.full(6, 0.3))
    u = b.uniform()
    np.testing.assert_allclose(u.mass[0] / grid.area, u.mass[0, 1])
    assert u.mass.sum() == pytest.approx(b.mass.sum())
    with pytest.raises(BeliefError, match='densest material'):
        Belief.create(grid, max_cell_mass(whole), np.full(6, 0.3))
    # The file keeps the coverage; a grid of whole cells writes none.
    path = save_belief(b, tmp_path / 'part.yaml')
    back = load_belief(path)
    np.testing.assert_allclose(back.grid.area, grid.area)
    doc = yaml.safe_load(path.read_text())
    for bad in ([[0.5, 1.0]], 0.5, [[0.5, 1.0, 1.0], [1.0, 0.0, 0.25]], 'all'):
        path.write_text(yaml.safe_dump({**doc, 'coverage': bad}))
        with pytest.raises(BeliefError, match=r'part\.yaml: malformed belief'):
            load_belief(path)
    whole_belief = Belief.create(whole, np.full(6, 0.01), np.full(6, 0.3))
    path = save_belief(whole_belief, tmp_path / 'whole.yaml')
    assert 'coverage' not in yaml.safe_load(path.read_text())
    assert load_belief(path).grid.whole


def test_a_belief_file_with_bad_weights_is_refused_with_the_file_named(hammer, tmp_path):
    b = _belief(hammer)
    path = save_belief(b, tmp_path / 'b.yaml')
    doc = yaml.safe_load(path.read_text())
    w0 = doc['models'][0]['weight']
    doc['models'][0]['weight'] = -0.5
    doc['models'][1]['weight'] += w0 + 0.5  # still summing to 1
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BeliefError, match=r'b\.yaml: weights must be'):
        load_belief(path)
    path.write_text('models: [')
    with pytest.raises(BeliefError, match='not valid YAML'):
        load_belief(path)


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        (lambda d: d.update(cell_size='0.02'), r'cell_size must be a number \[m\]'),
        (lambda d: d['occupancy'][0].__setitem__(0, 2), 'occupancy must hold 0 and 1 only'),
    ],
)
def test_a_belief_files_grid_is_checked_as_an_object_files_is(hammer, tmp_path, change, message):
    path = save_belief(_belief(hammer), tmp_path / 'b.yaml')
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BeliefError, match=rf'b\.yaml: {message}'):
        load_belief(path)


def test_a_belief_file_lighter_than_air_is_refused(hammer, tmp_path):
    # A cell of a nanogram (a hand-written file, or one in other units) was planned with.
    path = save_belief(_belief(hammer), tmp_path / 'b.yaml')
    doc = yaml.safe_load(path.read_text())
    row = doc['models'][1]['mass'][3]
    row[row.index(next(v for v in row if v))] = 1e-12
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BeliefError, match=r'b\.yaml: model 1, cell \d+: 1e-12 kg is less than'):
        load_belief(path)


def test_a_beliefs_file_keeps_the_grids_outline(tmp_path):
    occ = np.ones((2, 3), bool)
    outline = np.array([[-0.03, -0.02], [0.03, -0.02], [0.02, 0.02], [-0.02, 0.02]])
    grid = Grid(0.02, occ, np.full(occ.shape, 0.03), None, outline)
    b = Belief.create(grid, np.full(6, 0.01), np.full(6, 0.3))
    path = save_belief(b, tmp_path / 'outline.yaml')
    back = load_belief(path)
    assert back.grid.outline is not None
    np.testing.assert_allclose(back.grid.outline, grid.outline)
    doc = yaml.safe_load(path.read_text())
    for bad in ([[0.0, 0.0], [0.01, 0.0]], [[0.0, 0.0, 0.0]] * 3, 'square', [[0.5, 0.5]] * 3):
        path.write_text(yaml.safe_dump({**doc, 'outline': bad}))
        with pytest.raises(BeliefError, match=r'outline\.yaml: malformed belief'):
            load_belief(path)
    squares = save_belief(Belief.create(Grid(0.02, occ, grid.heights), b.mass, b.friction),
                          tmp_path / 'squares.yaml')  # fmt: skip
    assert 'outline' not in yaml.safe_load(squares.read_text())


@pytest.mark.parametrize(
    ('cell_size', 'message'),
    [
        (1.0e6, r'cell_size: 1000000.0 m is outside \[0.001, 0.1\] m'),
        (0.5, r'cell_size: 0.5 m is outside'),  # planning with it ran for minutes
        (10**400, r'cell_size must be a number \[m\], got 1000000000'),
    ],
)
def test_a_belief_file_of_an_object_no_table_holds_is_refused(
    hammer, tmp_path, cell_size, message
):
    # A 1e6 m cell was loaded, and planning asked for 283 GiB.
    path = save_belief(_belief(hammer), tmp_path / 'b.yaml')
    doc = yaml.safe_load(path.read_text())
    doc['cell_size'] = cell_size
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BeliefError, match=message):
        load_belief(path)


def test_a_belief_of_light_cells_comes_back_from_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A 6 cm disc, 4 mm thick, on 5 mm cells: its rim cells weigh under 1e-7 kg, which the
    # file's seven decimals made 0 (the reader refused the file) or 16% off.
    from slide_core.geometry import outline_grid

    a = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    grid = outline_grid(np.column_stack((0.03 * np.cos(a), 0.03 * np.sin(a))), 0.005, 0.004)
    mass = 2.5e-8 + 1e-7 * grid.area
    belief = Belief.create(grid, mass, np.full(grid.n, 0.4))
    save_belief(belief, tmp_path / 'disc.yaml')
    back = load_belief(tmp_path / 'disc.yaml')
    np.testing.assert_allclose(back.mass, belief.mass, rtol=1e-8)
    np.testing.assert_allclose(back.grid.area, grid.area, rtol=1e-8)


def test_a_belief_keeps_its_maps_when_the_callers_arrays_change() -> None:
    grid = Grid.from_occupancy(np.ones((2, 2)), 0.02, 0.02)
    mass = np.full(4, 0.01)
    belief = Belief.create(grid, mass, np.full(4, 0.3))
    mass[0] = -5.0  # a reused buffer changed a validated belief
    assert belief.mass[0, 0] == 0.01


def test_a_belief_at_the_density_bound_comes_back_from_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Heights written to 10 um shrank each cell's volume: a mass on the densest-material
    # bound, where identification's projection puts pressed cells, was refused on reading.
    grid = Grid.from_occupancy(np.ones((2, 3)), 0.02, heights=0.0317744)
    belief = Belief.create(grid, max_cell_mass(grid), np.full(grid.n, 0.5))
    save_belief(belief, tmp_path / 'dense.yaml')
    back = load_belief(tmp_path / 'dense.yaml')
    np.testing.assert_allclose(back.grid.heights, grid.heights, rtol=1e-8)
    np.testing.assert_allclose(back.mass, belief.mass, rtol=1e-8)
