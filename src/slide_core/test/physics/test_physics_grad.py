"""Analytic mass and friction gradients against central finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from slide_core.geometry import Grid
from slide_core.physics import (
    FingertipPush,
    PhysicsError,
    WrenchPush,
    one_step_loss,
    rollout_loss,
    simulate,
)

TIP_RADIUS = 0.008  # m, a fingertip for these tests
TIP_MU = 0.3

DT = 0.004
SHAPE = Grid.from_occupancy([[1, 1, 1, 0], [1, 1, 1, 1], [0, 1, 1, 1]], 0.02)


def setup(seed: int = 3):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    n = SHAPE.n
    truth = rng.uniform(0.005, 0.03, n), rng.uniform(0.2, 0.8, n)
    guess = rng.uniform(0.005, 0.03, n), rng.uniform(0.2, 0.8, n)
    f = np.zeros((100, 2))
    f[:70] = [1.5, 0.7]
    push = WrenchPush.create(SHAPE, SHAPE.p_OC[3] + [0.0, 0.008], f, DT)
    observed = simulate(SHAPE, *truth, push, [0.1, 0.2, 0.3])
    return truth, guess, push, observed


def central_difference(loss, m, mu, eps=1e-7):  # type: ignore[no-untyped-def]
    g = np.zeros(2 * m.size)
    for i in range(m.size):
        for j, (a, b) in enumerate(((m, mu), (mu, m))):
            e = np.zeros(m.size)
            e[i] = eps * max(a[i], 1e-2)
            plus = loss(a + e, b) if j == 0 else loss(b, a + e)
            minus = loss(a - e, b) if j == 0 else loss(b, a - e)
            g[i + j * m.size] = (plus - minus) / (2 * e[i])
    return g


def relative_error(analytic: np.ndarray, numeric: np.ndarray) -> float:
    return float(np.abs(analytic - numeric).max() / np.abs(numeric).max())


def test_rollout_gradient_matches_finite_differences_from_rest() -> None:
    truth, (m, mu), push, observed = setup()
    steps = np.arange(10, 101, 10)
    X_obs = observed.X_WO[0, steps]
    r = rollout_loss(SHAPE, m, mu, push, [0.1, 0.2, 0.3], steps, X_obs)
    assert r.loss[0] > 1e-4
    assert rollout_loss(SHAPE, *truth, push, [0.1, 0.2, 0.3], steps, X_obs).loss[0] < 1e-20

    def loss(a, b):  # type: ignore[no-untyped-def]
        return rollout_loss(SHAPE, a, b, push, [0.1, 0.2, 0.3], steps, X_obs).loss[0]

    numeric = central_difference(loss, m, mu)
    assert relative_error(np.concatenate((r.d_mass[0], r.d_friction[0])), numeric) < 1e-5


def test_one_step_gradient_matches_finite_differences() -> None:
    truth, (m, mu), push, observed = setup()
    o = one_step_loss(SHAPE, m, mu, push, observed.X_WO[0])
    assert o.loss[0] > 0
    assert one_step_loss(SHAPE, *truth, push, observed.X_WO[0]).loss[0] < 1e-20

    def loss(a, b):  # type: ignore[no-untyped-def]
        return one_step_loss(SHAPE, a, b, push, observed.X_WO[0]).loss[0]

    numeric = central_difference(loss, m, mu)
    assert relative_error(np.concatenate((o.d_mass[0], o.d_friction[0])), numeric) < 1e-4


def test_gradients_point_downhill_for_a_batch() -> None:
    truth, (m, mu), push, observed = setup(5)
    steps = np.array([50, 100])
    X_obs = observed.X_WO[0, steps]
    mb = np.stack((m, truth[0] * 1.3))
    mub = np.stack((mu, truth[1] * 0.8))
    r = rollout_loss(SHAPE, mb, mub, push, [0.1, 0.2, 0.3], steps, X_obs)
    step = 1e-4 / np.abs(np.concatenate((r.d_mass, r.d_friction), axis=1)).max(axis=1)
    after = rollout_loss(
        SHAPE,
        mb - step[:, None] * r.d_mass,
        mub - step[:, None] * r.d_friction,
        push,
        [0.1, 0.2, 0.3],
        steps,
        X_obs,
    )
    assert np.all(after.loss < r.loss)


def test_sticking_and_zero_friction_give_finite_gradients() -> None:
    n = SHAPE.n
    m, mu = np.full(n, 0.01), np.full(n, 0.5)
    mu[0] = 0.0
    f = np.full((40, 2), 0.05)  # far below the friction limit: never moves
    push = WrenchPush.create(SHAPE, [0.0, 0.0], f, DT)
    r = rollout_loss(SHAPE, m, mu, push, [0, 0, 0], [40], [[0.01, 0.0, 0.0]])
    assert np.all(np.isfinite(r.d_mass)) and np.all(np.isfinite(r.d_friction))
    # Stuck: the prediction cannot change with small parameter changes.
    assert np.abs(r.d_friction).max() == 0.0


def test_gradients_need_a_wrench_push_and_matching_observations() -> None:
    n = SHAPE.n
    push = WrenchPush.create(SHAPE, [0.0, 0.0], np.ones((5, 2)), DT)
    tip = FingertipPush.straight([-0.1, 0.0], [1, 0], 0.01, 0.1, DT, radius=TIP_RADIUS, mu=TIP_MU)
    with pytest.raises(PhysicsError, match='wrench-driven'):
        rollout_loss(SHAPE, np.ones(n), np.ones(n), tip, [0, 0, 0], [1], [[0, 0, 0]])  # type: ignore[arg-type]
    with pytest.raises(PhysicsError, match='must match'):
        rollout_loss(SHAPE, np.ones(n), np.ones(n), push, [0, 0, 0], [1, 2], [[0, 0, 0]])
    with pytest.raises(PhysicsError, match='must lie in'):
        rollout_loss(SHAPE, np.ones(n), np.ones(n), push, [0, 0, 0], [9], [[0, 0, 0]])
    with pytest.raises(PhysicsError, match='shape'):
        one_step_loss(SHAPE, np.ones(n), np.ones(n), push, np.zeros((3, 3)))


def test_gradient_with_a_contact_point_that_slides_along_the_edge() -> None:
    rng = np.random.default_rng(11)
    n = SHAPE.n
    m, mu = rng.uniform(0.005, 0.03, n), rng.uniform(0.2, 0.8, n)
    truth = rng.uniform(0.005, 0.03, n), rng.uniform(0.2, 0.8, n)
    steps = 80
    f = np.tile([1.6, 0.4], (steps, 1))
    # The contact point runs along the object's -x edge, as a fingertip sliding on it.
    p = np.column_stack((np.full(steps, -0.04), np.linspace(-0.01, 0.01, steps)))
    push = WrenchPush.create(SHAPE, p, f, DT)
    observed = simulate(SHAPE, *truth, push, [0, 0, 0]).X_WO[0]
    obs = np.array([40, 80])
    r = rollout_loss(SHAPE, m, mu, push, [0, 0, 0], obs, observed[obs])

    def loss(a, b):  # type: ignore[no-untyped-def]
        return rollout_loss(SHAPE, a, b, push, [0, 0, 0], obs, observed[obs]).loss[0]

    numeric = central_difference(loss, m, mu)
    assert relative_error(np.concatenate((r.d_mass[0], r.d_friction[0])), numeric) < 1e-5


@pytest.mark.parametrize('seed', [3, 7])
def test_rollout_gradient_with_the_push_moment_matches_finite_differences(seed: int) -> None:
    # The push acts 3 cm up, on an object 4 cm tall: its moment tips the loads towards the
    # push step by step, and the tipping turns with the body.
    rng = np.random.default_rng(seed)
    n = SHAPE.n
    truth = rng.uniform(0.005, 0.03, n), rng.uniform(0.2, 0.8, n)
    m, mu = rng.uniform(0.005, 0.03, n), rng.uniform(0.2, 0.8, n)
    f = np.zeros((100, 2))
    f[:70] = [1.5, 0.7]
    push = WrenchPush.create(SHAPE, SHAPE.p_OC[3] + [0.0, 0.008], f, DT)
    X0 = [0.1, 0.2, 0.3]
    height = np.full(n, 0.03)
    observed = simulate(SHAPE, *truth, push, X0, push_height=height).X_WO[0]
    flat = simulate(SHAPE, *truth, push, X0).X_WO[0]
    assert np.abs(observed[-1] - flat[-1]).max() > 1e-4  # the moment changes the motion
    steps = np.arange(10, 101, 10)

    def run(a, b):  # type: ignore[no-untyped-def]
        return rollout_loss(SHAPE, a, b, push, X0, steps, observed[steps], push_height=height)

    assert run(*truth).loss[0] < 1e-20
    r = run(m, mu)
    assert r.loss[0] > 1e-4
    numeric = central_difference(lambda a, b: run(a, b).loss[0], m, mu)
    assert relative_error(np.concatenate((r.d_mass[0], r.d_friction[0])), numeric) < 1e-5


def test_one_step_gradient_with_the_push_moment_matches_finite_differences() -> None:
    truth, (m, mu), push, _ = setup()
    height = np.full(SHAPE.n, 0.03)
    observed = simulate(SHAPE, *truth, push, [0.1, 0.2, 0.3], push_height=height).X_WO[0]

    def run(a, b):  # type: ignore[no-untyped-def]
        return one_step_loss(SHAPE, a, b, push, observed, push_height=height)

    # The tipped loads explain the tipped motion; the static ones do not.
    assert run(*truth).loss[0] < 1e-20
    assert one_step_loss(SHAPE, *truth, push, observed).loss[0] > 1e-12
    o = run(m, mu)
    numeric = central_difference(lambda a, b: run(a, b).loss[0], m, mu)
    assert relative_error(np.concatenate((o.d_mass[0], o.d_friction[0])), numeric) < 1e-4
