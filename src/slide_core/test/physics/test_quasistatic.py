"""The planner's quasi-static push model: physical behaviour, agreement with the dynamic
core, batching and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.geometry import Grid, outline_grid
from slide_core.physics import FingertipPush, simulate
from slide_core.physics.quasistatic import push

TIP_RADIUS = 0.008  # m, a fingertip for these tests
TIP_MU = 0.3

BLOCK = Grid.from_occupancy(np.ones((4, 6)), 0.02)  # 12 cm x 8 cm, centred at O
M = np.full(BLOCK.n, 0.01)
MU = np.full(BLOCK.n, 0.4)


def test_centred_push_translates_by_the_fingertip_travel() -> None:
    # The fingertip starts 5 mm from the -x side and goes 5 cm: the block moves 4.5 cm.
    r = push(
        BLOCK,
        M,
        MU,
        [0.3, 0.0, 0.0],
        [0.3 - 0.06 - 0.013, 0.0],
        [1.0, 0.0],
        0.05,
        TIP_RADIUS,
        TIP_MU,
    )
    X = r.X_WO[0, -1]
    np.testing.assert_allclose(X, [0.3 + 0.045, 0.0, 0.0], atol=2e-4)
    assert not r.slipping.any()
    assert not r.touching[0, 0] and r.touching[0, -1]


def test_a_fingertip_that_misses_leaves_it_in_place() -> None:
    r = push(BLOCK, M, MU, [0.3, 0.0, 0.0], [0.2, 0.1], [1.0, 0.0], 0.05, TIP_RADIUS, TIP_MU)
    np.testing.assert_array_equal(r.X_WO[0, -1], [0.3, 0.0, 0.0])
    assert not r.touching.any()


@pytest.mark.parametrize('which', ['heavier', 'grippier'])
def test_the_side_with_more_friction_force_lags_behind(which: str) -> None:
    # More friction force on the +y half: pushed at the middle of its -x side, that half
    # lags behind and the block turns counter-clockwise (positive yaw moves +y backwards).
    yaws = []
    for half in (BLOCK.p_OC[:, 1] > 0, BLOCK.p_OC[:, 1] < 0):
        m, mu = M.copy(), MU.copy()
        if which == 'heavier':
            m[half] *= 3
        else:
            mu[half] *= 3
        r = push(
            BLOCK,
            m,
            mu,
            [0.3, 0.0, 0.0],
            [0.3 - 0.06 - 0.009, 0.0],
            [1.0, 0.0],
            0.05,
            TIP_RADIUS,
            TIP_MU,
        )
        yaws.append(r.X_WO[0, -1, 2])
    assert yaws[0] > 0.02
    assert yaws[1] == pytest.approx(-yaws[0], abs=1e-9)  # mirror images


@pytest.mark.parametrize('height', [0.0, 0.04])
def test_agrees_with_the_dynamic_core_on_a_slipping_off_centre_push(height: float) -> None:
    rng = np.random.default_rng(3)
    m = rng.uniform(0.005, 0.02, BLOCK.n)
    mu = rng.uniform(0.2, 0.8, BLOCK.n)
    start = np.array([-0.06 - 0.0085, 0.0])  # oblique: the fingertip slips as it turns it
    d = np.array([1.0, 0.6])
    q = push(BLOCK, m, mu, [0.0, 0.0, 0.0], start, d, 0.05, TIP_RADIUS, TIP_MU, push_height=height)
    tip = FingertipPush.straight(start, d, 0.05, 0.05, 0.004, radius=0.008, mu=0.3, dwell=0.1)
    dyn = simulate(BLOCK, m, mu, tip, [0.0, 0.0, 0.0], push_height=height).X_WO[0, -1]
    assert q.slipping.any() or height  # tipped, its loads let the fingertip stick
    assert abs(q.X_WO[0, -1, 2]) > 0.1  # it did turn
    np.testing.assert_allclose(q.X_WO[0, -1, :2], dyn[:2], atol=2e-3)
    assert abs(q.X_WO[0, -1, 2] - dyn[2]) < 0.015
    if height:  # the push's moment turned it less, in both models alike
        flat = push(BLOCK, m, mu, [0.0, 0.0, 0.0], start, d, 0.05, TIP_RADIUS, TIP_MU)
        assert abs(flat.X_WO[0, -1, 2]) - abs(q.X_WO[0, -1, 2]) > 0.05


@pytest.mark.parametrize('mu_tip', [0.0, TIP_MU])
def test_a_discs_real_outline_agrees_with_the_dynamic_core_and_not_with_its_squares(
    mu_tip: float,
) -> None:
    # A fingertip 3 cm off a uniform disc's centre touches the rim obliquely and slips
    # along it; on the squares it meets a flat side and turns the disc more. The grid
    # carries the outline, and both models touch it. (Frictionless, rotation and slip
    # are coupled: three rounds of alternating searches alone left 0.09 rad.)
    a = np.linspace(0.0, 2 * np.pi, 64, endpoint=False)
    ring = 0.05 * np.column_stack((np.cos(a), np.sin(a)))
    disc = outline_grid(ring, 0.02, 0.02)
    squares = Grid(0.02, disc.occupancy, disc.heights, disc.coverage)
    m, mu = 0.02 * disc.area, np.full(disc.n, 0.4)
    start, d = np.array([-0.07, 0.03]), np.array([1.0, 0.0])
    real = push(disc, m, mu, [0.0, 0.0, 0.0], start, d, 0.04, TIP_RADIUS, mu_tip).X_WO[0, -1]
    cells = push(squares, m, mu, [0.0, 0.0, 0.0], start, d, 0.04, TIP_RADIUS, mu_tip)
    tip = FingertipPush.straight(start, d, 0.04, 0.05, 0.004, radius=TIP_RADIUS, mu=mu_tip)
    dyn = simulate(disc, m, mu, tip, [0.0, 0.0, 0.0]).X_WO[0, -1]
    np.testing.assert_allclose(real[:2], dyn[:2], atol=1e-3)
    assert abs(real[2] - dyn[2]) < 0.015
    assert abs(cells.X_WO[0, -1, 2]) - abs(real[2]) > 0.05


def test_hypotheses_in_a_batch_equal_their_single_runs() -> None:
    rng = np.random.default_rng(4)
    m = rng.uniform(0.005, 0.02, (3, BLOCK.n))
    mu = rng.uniform(0.2, 0.8, (3, BLOCK.n))
    X0 = np.array([[0.0, 0.0, 0.0], [0.0, 0.01, 0.2], [0.0, -0.02, -0.1]])
    start, d = [-0.09, 0.0], [1.0, 0.0]
    batch = push(BLOCK, m, mu, X0, start, d, 0.04, TIP_RADIUS, TIP_MU)
    for k in range(3):
        one = push(BLOCK, m[k], mu[k], X0[k], start, d, 0.04, TIP_RADIUS, TIP_MU)
        np.testing.assert_allclose(batch.X_WO[k], one.X_WO[0], atol=1e-12)


@pytest.mark.parametrize(
    ('args', 'message'),
    [
        ((M[:3], MU, [0, 0, 0], [-0.1, 0], [1, 0], 0.05), 'values per hypothesis'),
        ((-M, MU, [0, 0, 0], [-0.1, 0], [1, 0], 0.05), 'non-negative'),
        ((M, MU, [0, 0, np.nan], [-0.1, 0], [1, 0], 0.05), 'NaN'),
        ((M, MU, [0, 0, 0], [-0.1, 0], [0, 0], 0.05), 'direction non-zero'),
        ((M, MU, [0, 0, 0], [-0.1, 0], [1, 0], -0.05), 'travel'),
        ((M, MU, np.zeros((2, 3)), [-0.1, 0], [1, 0], 0.05), r'\(3,\) or \(1, 3\)'),
        # (a raw numpy broadcast error)
        ((np.tile(M, (2, 1)), np.tile(MU, (3, 1)), [0, 0, 0], [-0.1, 0], [1, 0], 0.05), '2 and 3'),
        # No friction: a 6 mm push was predicted to move it 4 cm sideways and turn it 0.5 rad.
        ((M, 0 * MU, [0, 0, 0], [-0.07, 0.01], [1, 0], 0.04), 'hypothesis 0 has no friction'),
        ((0 * M, MU, [0, 0, 0], [-0.07, 0.01], [1, 0], 0.04), 'hypothesis 0 has no friction'),
        # Inside the object: it passed through, and every step read as touching.
        ((M, MU, [0, 0, 0], [0.0, 0.01], [1, 0], 0.04), r'inside the object \(penetration 8'),
    ],
)
def test_bad_input_is_refused_with_a_reason(args: tuple, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SlideInputError, match=message):
        push(BLOCK, *args, TIP_RADIUS, TIP_MU)
