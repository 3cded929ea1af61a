"""A push primitive is checked when made and keeps what it was made from."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.model import Primitive, PrimitiveError


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
