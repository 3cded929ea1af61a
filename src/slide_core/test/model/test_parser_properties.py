"""Property tests of the object-spec and belief parsers a stranger can feed (issue 19):
any YAML document gives an object or belief, or a SpecError / BeliefError naming what is
wrong in one line; never another exception. What the writers write reads back the same."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
import yaml

from slide_core.model import (
    Belief,
    BeliefError,
    SpecError,
    belief_from_dict,
    belief_to_dict,
    load_object,
    parse_spec,
)

# Any value YAML can hold (safe_load gives these types). Text without line breaks: reasons
# quote what they echo, and a line break is tested on its own below.
text = st.text(st.characters(blacklist_categories=('Cc', 'Cs', 'Zl', 'Zp')), max_size=8)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(text, inner, max_size=4)),
    max_leaves=30,
)
# Maps: rows of numbers, sometimes ragged, sometimes not numbers at all.
numbers = st.one_of(
    st.floats(-1.0, 3.0),
    st.integers(-1, 3),
    st.just(float('nan')),
    st.booleans(),
    st.text(max_size=2),
)
maps = st.one_of(
    st.lists(st.lists(numbers, min_size=0, max_size=5), min_size=0, max_size=5),
    yaml_values,
)

SPEC = load_object('box').to_dict()


def one_line(exc: Exception) -> None:
    assert str(exc) and '\n' not in str(exc)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(
        ['name', 'cell_size', 'height', 'heights', 'mass', 'friction', 'description', 'extra']
    ),
    value=st.one_of(yaml_values, maps),
)
def test_a_spec_with_any_field_changed_parses_or_says_why(key: str, value: Any) -> None:
    doc = copy.deepcopy(SPEC)
    doc[key] = value
    try:
        spec = parse_spec(doc)
    except SpecError as exc:
        one_line(exc)
        return
    assert spec.grid.n == int(np.count_nonzero(spec.mass)) and spec.total_mass > 0


@settings(max_examples=150, deadline=None)
@given(yaml_values)
def test_any_document_is_a_spec_or_a_reason(doc: Any) -> None:
    try:
        parse_spec(doc)
    except SpecError as exc:
        one_line(exc)


def test_an_unknown_field_with_a_line_break_is_named_on_one_line() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec({**SPEC, 'a\nb': 1})
    one_line(info.value)
    assert "'a\\nb': unknown field" in str(info.value)


def test_a_cell_of_a_fraction_of_a_milligram_survives_its_yaml() -> None:
    doc = {**SPEC, 'mass': [[4e-7, 0.01], [0.01, 0.01]], 'friction': [[0.3, 0.3], [0.3, 0.3]]}
    doc.pop('heights', None)
    spec = parse_spec(doc)
    np.testing.assert_allclose(parse_spec(spec.to_dict()).mass, spec.mass)


@settings(max_examples=100, deadline=None)
@given(
    mass=st.lists(
        st.lists(st.one_of(st.just(0.0), st.floats(1e-5, 0.05)), min_size=4, max_size=4),
        min_size=3,
        max_size=3,
    ),
    friction=st.floats(0.0, 2.0),
    height=st.floats(0.005, 0.3),
)
def test_a_valid_spec_round_trips_through_its_yaml(
    mass: list[list[float]], friction: float, height: float
) -> None:
    doc = {
        'name': 'thing',
        'cell_size': 0.02,
        'height': height,
        'mass': mass,
        'friction': [[friction] * 4] * 3,
    }
    try:
        spec = parse_spec(doc)
    except SpecError as exc:  # no cells, disconnected cells, too heavy for its volume
        one_line(exc)
        return
    again = parse_spec(yaml.safe_load(yaml.safe_dump(spec.to_dict())))
    np.testing.assert_allclose(again.mass, spec.mass, rtol=0.06, atol=1e-7)
    np.testing.assert_allclose(again.friction, spec.friction, atol=1e-6)
    assert np.array_equal(again.grid.occupancy, spec.grid.occupancy)


def belief_doc() -> dict[str, Any]:
    spec = load_object('box')
    rng = np.random.default_rng(0)
    mass = spec.mass * rng.uniform(0.5, 1.5, (3, spec.grid.n))
    friction = np.clip(spec.friction * rng.uniform(0.5, 1.5, (3, spec.grid.n)), 0, 2)
    belief = Belief.create(spec.grid, mass, friction, [0.5, 0.3, 0.2], [1.0, 2.0, 3.0], 'test')
    return belief_to_dict(belief, 'box')


BELIEF = belief_doc()


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(['kind', 'cell_size', 'occupancy', 'heights', 'models', 'method']),
    value=st.one_of(yaml_values, maps),
)
def test_a_belief_with_any_field_changed_loads_or_says_why(key: str, value: Any) -> None:
    doc = copy.deepcopy(BELIEF)
    doc[key] = value
    try:
        belief = belief_from_dict(doc, 'belief.yaml')
    except BeliefError as exc:
        one_line(exc)
        return
    assert abs(float(belief.weight.sum()) - 1.0) < 1e-9


@settings(max_examples=300, deadline=None)
@given(
    k=st.integers(0, 2),
    key=st.sampled_from(['weight', 'loss', 'mass', 'friction', 'other']),
    value=st.one_of(yaml_values, maps),
)
def test_a_belief_with_any_model_field_changed_loads_or_says_why(
    k: int, key: str, value: Any
) -> None:
    doc = copy.deepcopy(BELIEF)
    doc['models'][k][key] = value
    try:
        belief_from_dict(doc, 'belief.yaml')
    except BeliefError as exc:
        one_line(exc)


@settings(max_examples=150, deadline=None)
@given(yaml_values)
def test_any_document_is_a_belief_or_a_reason(doc: Any) -> None:
    if isinstance(doc, dict):
        doc = {**doc, 'kind': 'slide/belief'}
    try:
        belief_from_dict(doc, 'belief.yaml')
    except BeliefError as exc:
        one_line(exc)


def test_a_belief_round_trips_through_its_yaml() -> None:
    back = belief_from_dict(yaml.safe_load(yaml.safe_dump(BELIEF)))
    again = belief_to_dict(back, 'box')
    assert again == BELIEF
