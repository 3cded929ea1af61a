"""Command-line value parsing shared by the subcommands."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
import pytest

from slide_bringup.args import parse_range
from slide_core.errors import SlideInputError


def test_ranges_and_lists():
    assert parse_range('0-2,5') == [0, 1, 2, 5]
    assert parse_range('3') == [3]
    for bad in ('3-1', '', 'a-b', '-1', '1,,2', '0-', '3_0', '+3', '1-+4', ' 2 3'):
        with pytest.raises(SlideInputError, match='not like'):
            parse_range(bad)


def test_a_push_named_twice_is_refused():
    with pytest.raises(SlideInputError, match='names push 1, 2 more than once'):
        parse_range('0-2,1-2,2')


@given(st.text(max_size=20))
def test_any_text_parses_or_is_refused_with_a_reason(text):
    try:
        out = parse_range(text)
    except SlideInputError as exc:
        assert str(exc)
    else:
        assert out and len(out) == len(set(out)) and min(out) >= 0


@given(st.lists(st.integers(0, 50), min_size=1, max_size=10, unique=True))
def test_a_list_of_distinct_indices_reads_back(indices):
    assert parse_range(','.join(map(str, indices))) == indices


def test_a_range_past_any_bag_is_refused_before_it_is_listed():
    # '0-10000000000' was a list of ten billion indices: a MemoryError, exit 1.
    with pytest.raises(SlideInputError, match='names more than 10000 pushes'):
        parse_range('0-10000000000')
    with pytest.raises(SlideInputError, match='names more than'):
        parse_range('0-5000,6000-11000')
    assert len(parse_range('0-9999')) == 10_000


def test_a_seed_is_a_whole_number_numpy_and_ros_take():
    import argparse

    from slide_bringup.args import seed

    assert seed('0') == 0 and seed(str(2**31 - 1)) == 2**31 - 1
    for bad, message in (('-1', 'got -1'), (str(2**31), 'from 0 to 2147483647'), ('x', 'whole')):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            seed(bad)
