"""The fast grid-of-cells simulator: physical behaviour, batching and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.errors import SlideInputError
from slide_core.geometry import Grid, cell_positions
from slide_core.physics import (
    GRAVITY,
    FingertipPush,
    RigidModel,
    WrenchPush,
    simulate,
)

TIP_RADIUS = 0.008  # m, a fingertip for these tests
TIP_MU = 0.3

DT = 0.004
BLOCK = Grid.from_occupancy(np.ones((4, 6)), 0.02)  # 12 cm x 8 cm


def uniform(grid: Grid, mass: float = 0.01, mu: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    return np.full(grid.n, mass), np.full(grid.n, mu)


def constant_force(f_W: list[float], steps: int, on: int) -> np.ndarray:
    f = np.zeros((steps, 2))
    f[:on] = f_W
    return f


def test_centred_push_translates_without_turning_and_decelerates_at_mu_g() -> None:
    m, mu = uniform(BLOCK, 0.01, 0.4)
    push = WrenchPush.create(BLOCK, [0.0, 0.0], constant_force([1.5, 0.0], 150, 60), DT)
    r = simulate(BLOCK, m, mu, push, [0.3, 0.1, 0.0])
    X, V = r.X_WO[0], r.V_WBcm[0]
    assert np.abs(X[:, 1] - 0.1).max() < 1e-12
    assert np.abs(X[:, 2]).max() < 1e-12
    # While pushed: a = F/m - mu g. After release: a = -mu g until it stops, then rest.
    total = m.sum()
    accel = np.diff(V[:61, 0]) / DT
    np.testing.assert_allclose(accel, 1.5 / total - 0.4 * GRAVITY, rtol=1e-9)
    sliding = np.nonzero(V[61:, 0] > 0)[0] + 61
    decel = np.diff(V[sliding, 0]) / DT
    decel = decel[:-1]  # the last step stops it part way
    np.testing.assert_allclose(decel, -0.4 * GRAVITY, rtol=1e-9)
    assert V[-1, 0] == 0.0 and X[-1, 0] > 0.3


@pytest.mark.parametrize(('offset', 'sense'), [(0.03, -1.0), (-0.03, 1.0)])
def test_off_centre_fingertip_push_turns_as_the_voting_theorem_says(
    offset: float, sense: float
) -> None:
    # Pushing along +x on a line above the centre of friction turns the object clockwise.
    m, mu = uniform(BLOCK)
    push = FingertipPush.straight(
        [-0.075, offset], [1.0, 0.0], 0.05, 0.05, DT, mu=0.5, radius=TIP_RADIUS
    )
    r = simulate(BLOCK, m, mu, push, [0.0, 0.0, 0.0])
    assert sense * r.X_WO[0, -1, 2] > 0.05
    assert r.X_WO[0, -1, 0] > 0.01


def test_push_below_the_friction_limit_does_not_move_it() -> None:
    m, mu = uniform(BLOCK, 0.01, 0.4)
    limit = 0.4 * GRAVITY * m.sum()
    for point in ([0.0, 0.0], [0.05, 0.03]):
        # Below the limit for a centred push, and well below it off centre.
        scale = 0.95 if point == [0.0, 0.0] else 0.3
        push = WrenchPush.create(BLOCK, point, constant_force([0.0, scale * limit], 100, 100), DT)
        r = simulate(BLOCK, m, mu, push, [0.2, 0.2, 0.5])
        # (The solver leaves velocities of order 1e-8 m/s: sub-nanometre drift.)
        np.testing.assert_allclose(r.X_WO[0], np.tile([0.2, 0.2, 0.5], (101, 1)), atol=1e-9)
    # Just above the limit it slides.
    push = WrenchPush.create(BLOCK, [0.0, 0.0], constant_force([1.05 * limit, 0.0], 50, 50), DT)
    assert simulate(BLOCK, m, mu, push, [0, 0, 0]).X_WO[0, -1, 0] > 1e-4


@pytest.mark.parametrize('which', ['mass', 'friction'])
def test_heavier_or_grippier_side_turns_the_object_towards_it(which: str) -> None:
    m, mu = uniform(BLOCK)
    top = BLOCK.p_OC[:, 1] > 0  # the +y half
    if which == 'mass':
        m = np.where(top, 0.02, 0.005)
    else:
        mu = np.where(top, 0.8, 0.2)
    push = FingertipPush.straight(
        [-0.075, 0.0], [1.0, 0.0], 0.05, 0.05, DT, mu=0.5, radius=TIP_RADIUS
    )
    spin = simulate(BLOCK, m, mu, push, [0, 0, 0]).X_WO[0, -1, 2]
    # The +y half lags behind: counter-clockwise. The mirrored object turns the other way.
    assert spin > 0.02
    mirrored = simulate(BLOCK, m[::-1], mu[::-1], push, [0, 0, 0]).X_WO[0, -1, 2]
    assert mirrored == pytest.approx(-spin, rel=1e-6)


def test_momentum_is_kept_without_friction_and_dissipated_with_it() -> None:
    rng = np.random.default_rng(0)
    m = rng.uniform(0.005, 0.02, BLOCK.n)
    f = constant_force([0.8, -0.3], 100, 20)
    push = WrenchPush.create(BLOCK, BLOCK.p_OC[5], f, DT)
    r = simulate(BLOCK, m, np.zeros(BLOCK.n), push, [0, 0, 0.2])
    V = r.V_WBcm[0]
    # Linear momentum equals the impulse given, and stays; the spin stays once free.
    np.testing.assert_allclose(
        m.sum() * V[21:, :2], np.tile(f.sum(axis=0) * DT, (80, 1)), rtol=1e-9
    )
    np.testing.assert_allclose(V[21:, 2], V[21, 2], rtol=1e-9)
    assert abs(V[21, 2]) > 0.1
    # With friction, kinetic energy never grows after the push.
    r = simulate(BLOCK, m, np.full(BLOCK.n, 0.3), push, [0, 0, 0.2])
    V = r.V_WBcm[0]
    model = RigidModel.of(BLOCK)
    r_C = model.r_B - model.com(m[None])[0]
    I_C = (m * (np.sum(r_C**2, axis=1) + BLOCK.cell_size**2 / 6)).sum()
    ke = 0.5 * m.sum() * np.sum(V[:, :2] ** 2, axis=1) + 0.5 * I_C * V[:, 2] ** 2
    assert np.all(np.diff(ke[21:]) <= 1e-12)
    assert ke[-1] == 0.0


def test_fingertip_never_penetrates_and_reports_its_force() -> None:
    rng = np.random.default_rng(1)
    m = rng.uniform(0.005, 0.02, BLOCK.n)
    mu = rng.uniform(0.2, 0.8, BLOCK.n)
    push = FingertipPush.straight(
        [-0.07, 0.02], [1.0, 0.3], 0.08, 0.1, DT, radius=0.008, mu=TIP_MU
    )
    r = simulate(BLOCK, m, mu, push, [0, 0, 0])
    model = RigidModel.of(BLOCK)
    gaps = []
    for t in range(r.X_WO.shape[1]):
        X = r.X_WO[0, t]
        c, s = np.cos(X[2]), np.sin(X[2])
        p_WG = X[:2] + np.array([[c, -s], [s, c]]) @ model.p_OG
        p_BF = np.array([[c, s], [-s, c]]) @ (push.p_WF[t] - p_WG)
        gaps.append(model.closest_point(p_BF[None])[1][0] - push.radius)
    assert min(gaps) > -1e-6
    # The object was pushed, and the pusher force points along the push while in contact.
    F = r.f_push_W[0]
    in_contact = np.linalg.norm(F, axis=1) > 0
    assert in_contact.sum() > 10
    assert np.all(F[in_contact] @ np.array([1.0, 0.3]) > 0)
    assert r.X_WO[0, -1, 0] > 0.01


def test_a_batch_equals_its_hypotheses_simulated_one_by_one() -> None:
    rng = np.random.default_rng(2)
    m = rng.uniform(0.005, 0.02, (4, BLOCK.n))
    mu = rng.uniform(0.2, 0.8, (4, BLOCK.n))
    push = FingertipPush.straight(
        [-0.07, 0.01], [1.0, 0.0], 0.05, 0.08, DT, dwell=0.1, radius=TIP_RADIUS, mu=TIP_MU
    )
    batch = simulate(BLOCK, m, mu, push, [0, 0, 0])
    assert batch.X_WO.shape == (4, push.steps + 1, 3)
    for k in range(4):
        one = simulate(BLOCK, m[k], mu[k], push, [0, 0, 0])
        np.testing.assert_allclose(batch.X_WO[k], one.X_WO[0], atol=1e-12)
    spread = cell_positions(BLOCK, batch.X_WO[:, -1]).std(axis=0).max()
    assert spread > 1e-3  # different hypotheses, different outcomes


def test_per_hypothesis_start_poses_equal_separate_simulations() -> None:
    # The planner batches candidate pushes as hypotheses with their own start pose and twist.
    m, mu = uniform(BLOCK)
    push = FingertipPush.straight(
        [-0.0705, 0.0], [1.0, 0.0], 0.04, 0.05, DT, radius=TIP_RADIUS, mu=TIP_MU
    )
    X0 = np.array([[0.0, 0.0, 0.0], [0.0, 0.02, 0.0], [0.0, -0.01, 0.1]])
    V0 = np.array([[0.05, 0.0, 0.0], [0.0, 0.0, 0.0], [0.05, 0.0, 0.0]])
    batch = simulate(BLOCK, np.tile(m, (3, 1)), np.tile(mu, (3, 1)), push, X0, V0)
    for k in range(3):
        one = simulate(BLOCK, m, mu, push, X0[k], V0[k])
        np.testing.assert_allclose(batch.X_WO[k], one.X_WO[0], atol=1e-12)
    assert abs(batch.X_WO[1, -1, 2]) > 0.01  # pushed off centre: it turned
    with pytest.raises(SlideInputError, match='one per hypothesis'):
        simulate(BLOCK, m, mu, push, X0)


def test_most_sliding_steps_take_the_explicit_path() -> None:
    m, mu = uniform(BLOCK)
    push = FingertipPush.straight(
        [-0.075, 0.02], [1.0, 0.0], 0.06, 0.05, DT, dwell=0.2, radius=TIP_RADIUS, mu=TIP_MU
    )
    r = simulate(BLOCK, m, mu, push, [0, 0, 0])
    assert r.general_steps <= 5 < push.steps


@pytest.mark.parametrize(
    ('call', 'message'),
    [
        (
            lambda: simulate(BLOCK, -np.ones(BLOCK.n), np.ones(BLOCK.n), PUSH, [0, 0, 0]),
            'mass must be non-negative',
        ),
        (
            lambda: simulate(BLOCK, np.ones(BLOCK.n), np.ones(3), PUSH, [0, 0, 0]),
            'friction must have shape',
        ),
        (
            lambda: simulate(BLOCK, np.zeros(BLOCK.n), np.ones(BLOCK.n), PUSH, [0, 0, 0]),
            'positive total mass',
        ),
        (lambda: simulate(BLOCK, np.ones(BLOCK.n), np.ones(BLOCK.n), PUSH, [0, np.nan, 0]), 'NaN'),
        (  # (a raw numpy broadcast error)
            lambda: simulate(BLOCK, np.ones((2, BLOCK.n)), np.ones((3, BLOCK.n)), PUSH, [0, 0, 0]),
            '2 mass maps and 3 friction maps',
        ),
        (lambda: WrenchPush.create(BLOCK, [0.5, 0.0], np.ones((3, 2)), DT), 'on no cell'),
        (lambda: WrenchPush.at_cell(BLOCK, 99, np.ones((3, 2)), DT), 'does not exist'),
        (lambda: WrenchPush.create(BLOCK, [0, 0], np.ones((3, 3)), DT), r'shape \(T>=1, 2\)'),
        (lambda: WrenchPush.create(BLOCK, [0, 0], np.ones((3, 2)), 0.0), 'dt must be'),
        (lambda: FingertipPush.create(np.zeros((1, 2)), 0.01, 0.3, DT), r'T\+1>=2'),
        (
            lambda: FingertipPush.create(np.zeros((3, 2)), -0.01, 0.3, DT),
            'radius must be positive',
        ),
        (
            lambda: simulate(
                BLOCK,
                np.ones(BLOCK.n),
                np.ones(BLOCK.n),
                FingertipPush.straight(
                    [0, 0], [1, 0], 0.01, 0.1, DT, radius=TIP_RADIUS, mu=TIP_MU
                ),
                [0, 0, 0],
            ),
            'starts inside the object',
        ),
    ],
)
def test_bad_input_raises_a_clear_error(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SlideInputError, match=message):
        call()


PUSH = WrenchPush.create(BLOCK, [0.0, 0.0], np.ones((3, 2)), DT)


DISC_R = 0.05
DISC_OUTLINE = DISC_R * np.column_stack(
    (np.cos(np.linspace(0, 2 * np.pi, 64, endpoint=False)),
     np.sin(np.linspace(0, 2 * np.pi, 64, endpoint=False)))
)  # fmt: skip


def test_a_fingertip_on_a_discs_real_outline_pushes_through_its_centre() -> None:
    # A frictionless fingertip pushes along the outline's normal; on a circle that line
    # passes through the centre, so an off-centre push does not turn a uniform disc. On
    # the cells' squares the normal is a square's, off the centre: the disc turns.
    disc = Grid.from_polygon(DISC_OUTLINE, 0.01)
    m, mu = uniform(disc, 0.005, 0.4)
    offset = 0.02
    push = FingertipPush.straight(
        [-0.07, offset], [1.0, 0.0], 0.04, 0.05, DT, mu=0.0, radius=TIP_RADIUS
    )
    X0 = [0.0, 0.0, 0.0]  # the grid's frame is the outline's bounding box centre: the disc's
    real = simulate(disc, m, mu, push, X0, outline=DISC_OUTLINE).X_WO[0]
    cells = simulate(disc, m, mu, push, X0).X_WO[0]
    assert real[-1, 0] > 0.01  # it was pushed
    assert abs(real[-1, 2]) < 0.2 * abs(cells[-1, 2])
    assert abs(cells[-1, 2]) > 0.02
    # It moves away from the fingertip's line, along the contact normal.
    assert real[-1, 1] < -0.002


def test_a_fingertip_starting_inside_the_real_outline_is_refused() -> None:
    disc = Grid.from_polygon(DISC_OUTLINE, 0.01)
    m, mu = uniform(disc, 0.005, 0.4)
    push = FingertipPush.straight(
        [-0.048, 0.0], [1.0, 0.0], 0.02, 0.05, DT, mu=0.3, radius=TIP_RADIUS
    )
    with pytest.raises(SlideInputError, match='inside the object'):
        simulate(disc, m, mu, push, [0.0, 0.0, 0.0], outline=DISC_OUTLINE)
    with pytest.raises(SlideInputError, match='polygon'):
        simulate(disc, m, mu, push, [0.0, 0.0, 0.0], outline=DISC_OUTLINE[:2])
