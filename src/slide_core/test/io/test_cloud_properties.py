"""Property tests of the PointCloud2 decoder a stranger can feed (issue 19): whatever the
layout, cloud_to_xyz gives (N, 3) points or a MessageError saying why; never another
exception, never a silent reshape."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from slide_core.io import MessageError, cloud_to_xyz, xyz_to_cloud

DTYPES = {1: 'i1', 2: 'u1', 3: 'i2', 4: 'u2', 5: 'i4', 6: 'u4', 7: 'f4', 8: 'f8'}


def field(name: str, offset: int, datatype: int, count: int = 1) -> SimpleNamespace:
    return SimpleNamespace(name=name, offset=offset, datatype=datatype, count=count)


def message(**kw: Any) -> SimpleNamespace:
    return SimpleNamespace(**kw)


@st.composite
def any_cloud(draw: st.DrawFn) -> SimpleNamespace:
    """Any layout at all: fields, offsets, types, steps, sizes and buffers disagreeing."""
    names = draw(st.lists(st.sampled_from(['x', 'y', 'z', 'rgb', 'x']), max_size=6))
    width, height = draw(st.integers(-2, 40)), draw(st.integers(-1, 5))
    step = draw(st.integers(-4, 48))
    row_step = draw(st.one_of(st.just(max(step, 0) * max(width, 0)), st.integers(-8, 4000)))
    size = draw(st.one_of(st.just(max(row_step, 0) * max(height, 0)), st.integers(0, 4000)))
    return message(
        fields=[
            field(
                n,
                draw(st.integers(-4, 56)),
                draw(st.sampled_from([*DTYPES, 0, 9, 200])),
                draw(st.integers(0, 4)),
            )
            for n in names
        ],
        width=width,
        height=height,
        point_step=step,
        row_step=row_step,
        is_bigendian=draw(st.booleans()),
        data=draw(
            st.one_of(st.binary(min_size=size, max_size=size), st.just(list(range(size % 256))))
        ),
    )


@settings(max_examples=400, deadline=None)
@given(any_cloud())
def test_any_layout_decodes_to_n_by_3_or_says_why(msg: SimpleNamespace) -> None:
    try:
        out = cloud_to_xyz(msg)
    except MessageError as exc:
        assert str(exc) and '\n' not in str(exc)
        return
    assert out.shape == (msg.width * msg.height, 3) and out.dtype == np.float64


@st.composite
def laid_out(draw: st.DrawFn) -> tuple[SimpleNamespace, np.ndarray]:
    """A valid cloud of known points: x, y, z of one float type at any offsets, among other
    fields, with padding inside points and at row ends, either byte order, organised or
    not."""
    width, height = draw(st.integers(0, 12)), draw(st.integers(1, 4))
    kind = draw(st.sampled_from(['f4', 'f8']))
    size = np.dtype(kind).itemsize
    slots = draw(st.permutations(range(5)))[:3]  # x, y, z among 5 slots of `size` bytes
    pad = draw(st.integers(0, 7))
    step = 5 * size + pad
    row_pad = draw(st.integers(0, 9)) if height > 1 else 0
    big = draw(st.booleans())
    points = draw(
        st.lists(
            st.tuples(*[st.floats(-10, 10, width=32)] * 3),
            min_size=width * height,
            max_size=width * height,
        )
    )
    xyz = np.array(points, dtype=float).reshape(-1, 3)
    dt = np.dtype(
        {
            'names': ['x', 'y', 'z'],
            'formats': [('>' if big else '<') + kind] * 3,
            'offsets': [s * size for s in slots],
            'itemsize': step,
        }
    )
    rows = []
    for r in range(height):
        row = np.zeros(width, dtype=dt)
        for c, name in enumerate('xyz'):
            row[name] = xyz[r * width : (r + 1) * width, c]
        rows.append(row.tobytes() + b'\xab' * row_pad)
    datatype = 7 if kind == 'f4' else 8
    msg = message(
        fields=[field(n, s * size, datatype) for n, s in zip('xyz', slots, strict=True)]
        + [field('rgb', slots[0] * size, 7)],  # an overlapping extra field is allowed
        width=width,
        height=height,
        point_step=step,
        row_step=width * step + row_pad,
        is_bigendian=big,
        data=b''.join(rows),
    )
    return msg, xyz


@settings(max_examples=200, deadline=None)
@given(laid_out())
def test_every_valid_layout_reads_back_its_points(case: tuple[SimpleNamespace, np.ndarray]):
    msg, xyz = case
    np.testing.assert_array_equal(cloud_to_xyz(msg), xyz)


def test_a_field_beyond_the_point_is_refused() -> None:
    msg = xyz_to_cloud(np.zeros((4, 3)), message(), field)
    msg.fields[2] = field('z', 12, 7)
    with pytest.raises(MessageError, match='field z at offset 12 .* outside the 12-byte point'):
        cloud_to_xyz(msg)


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=3).filter(lambda s: len(s) != 2 or s[1] != 3)
)
def test_only_n_by_3_arrays_become_clouds(shape: list[int]) -> None:
    # (N, 4) or (N, 2) arrays were reshaped into other points without a word.
    with pytest.raises(MessageError, match=r'shape \(N, 3\)'):
        xyz_to_cloud(np.zeros(shape), message(), field)


@given(st.integers(0, 50))
def test_n_by_3_round_trips(n: int) -> None:
    points = np.random.default_rng(n).uniform(-1, 1, (n, 3)).astype(np.float32)
    msg = xyz_to_cloud(points, message(), field)
    np.testing.assert_array_equal(cloud_to_xyz(msg), points)
