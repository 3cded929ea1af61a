"""Speed and accuracy figures of the physics core (``slide bench physics``).

Everything but the replay runs on a synthetic 88-cell object (8 x 11 cells of 2 cm, the
size of the papers' largest object) with heterogeneous mass and friction maps drawn from a
fixed seed, so the figures are comparable between runs and machines. The replay records
three random exploratory pushes of the library's book (88 cells) in the MuJoCo twin (as
``slide record`` and the task do, seed 0) and replays each with the recorded fingertip
path and the book's true maps (kinematic fingertip, what ``slide evaluate`` does).

``twin_true_maps_*``: the core given each library object's true maps predicts its pushes
in the twin (5 random pushes each, replayed with the recorded fingertip path), under the
default support model with the push's moment (as the planner simulates), under the papers'
m_i g loads, and without the push's moment (``..._no_push_moment``).

Timings are medians over repeats, after every compiled kernel was loaded (their first
call in a process loads them from numba's disk cache: not part of any figure).
"""

from __future__ import annotations

from collections.abc import Callable
import math
import statistics
import time
from typing import Any

import numpy as np

from slide_bringup.bench.warmup import warm_up
from slide_core.geometry import FloatArray, Grid, cell_positions
from slide_core.physics import (
    FingertipPush,
    Rollout,
    WrenchPush,
    one_step_loss,
    rollout_loss,
    simulate,
    simulate_reference,
)

DT = 0.004  # s
PUSH_S = 1.0  # s

Progress = Callable[[str], None]


def benchmark_object(seed: int = 0) -> tuple[Grid, FloatArray, FloatArray]:
    """The 88-cell benchmark object and its (mass, friction) maps."""
    grid = Grid.from_occupancy(np.ones((8, 11)), 0.02)
    rng = np.random.default_rng(seed)
    # A heavy, grippy end and a light, slippery one, with cell-to-cell noise.
    x = grid.p_OC[:, 0] / np.abs(grid.p_OC[:, 0]).max()
    mass = 0.008 + 0.006 * x + rng.uniform(-0.002, 0.002, grid.n)
    friction = 0.45 + 0.25 * x + rng.uniform(-0.1, 0.1, grid.n)
    return grid, mass, friction


def one_second_push(grid: Grid, cell: int, force_W: tuple[float, float]) -> WrenchPush:
    """A push of PUSH_S seconds: the force for 60% of it, then free sliding."""
    steps = int(round(PUSH_S / DT))
    f = np.zeros((steps, 2))
    f[: int(0.6 * steps)] = force_W
    return WrenchPush.at_cell(grid, cell, f, DT)


def _central_difference_error(
    loss: Callable[[FloatArray, FloatArray], float],
    mass: FloatArray,
    friction: FloatArray,
    analytic: FloatArray,
    rel_step: float = 1e-6,
) -> float:
    """max |analytic - numeric| / max |numeric| over all masses and frictions."""
    n = mass.size
    numeric = np.zeros(2 * n)
    for i in range(n):
        for j in range(2):
            m, mu = mass.copy(), friction.copy()
            target = m if j == 0 else mu
            step = rel_step * target[i]
            target[i] += step
            plus = loss(m, mu)
            target[i] -= 2 * step
            minus = loss(m, mu)
            numeric[i + j * n] = (plus - minus) / (2 * step)
    return float(np.abs(analytic - numeric).max() / np.abs(numeric).max())


def gradient_errors(progress: Progress) -> dict[str, float]:
    """Analytic gradients of both losses against central differences, sliding steps."""
    grid, mass, friction = benchmark_object()
    guess_m = mass * np.random.default_rng(1).uniform(0.7, 1.3, grid.n)
    guess_mu = friction * np.random.default_rng(2).uniform(0.7, 1.3, grid.n)
    X0, V0 = np.array([0.0, 0.0, 0.2]), np.array([0.5, 0.2, 1.0])  # already sliding
    f = np.tile([2.0, 1.5], (60, 1))
    push = WrenchPush.at_cell(grid, 3, f, DT)
    truth = simulate(grid, mass, friction, push, X0, V0)
    steps = np.arange(10, 61, 10)
    X_obs = truth.X_WO[0, steps]

    progress('gradient check: rollout loss (176 parameters, central differences)')
    r = rollout_loss(grid, guess_m, guess_mu, push, X0, steps, X_obs, V0)
    if r.rollout is None or r.rollout.general_steps:
        raise RuntimeError('the gradient benchmark push must not need the general QP')
    rollout_err = _central_difference_error(
        lambda m, mu: float(rollout_loss(grid, m, mu, push, X0, steps, X_obs, V0).loss[0]),
        guess_m,
        guess_mu,
        np.concatenate((r.d_mass[0], r.d_friction[0])),
    )
    progress('gradient check: one-step loss (Eq. 1)')
    o = one_step_loss(grid, guess_m, guess_mu, push, truth.X_WO[0])
    # Its terms are one-step residuals of about 1e-9 m^2: steps of 1e-6 leave the central
    # differences at the losses' round-off (errors of 1e-4 that were the numeric side's);
    # at 1e-4 the truncation error is still below 1e-7.
    one_step_err = _central_difference_error(
        lambda m, mu: float(one_step_loss(grid, m, mu, push, truth.X_WO[0]).loss[0]),
        guess_m,
        guess_mu,
        np.concatenate((o.d_mass[0], o.d_friction[0])),
        rel_step=1e-4,
    )
    return {
        'grad_rel_error_max': max(rollout_err, one_step_err),
        'grad_rel_error_rollout': rollout_err,
        'grad_rel_error_one_step': one_step_err,
    }


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def replay(progress: Progress, pushes: int = 3, repeats: int = 5) -> dict[str, Any]:
    """Recorded fingertip pushes of the 88-cell book replayed with the recorded path."""
    from slide_core.identification import random_push
    from slide_core.model import load_object, load_workcell
    from slide_sim.twin import Twin
    from slide_sim.world import samples_of

    spec, cell = load_object('book'), load_workcell()
    progress(f'recording {pushes} exploratory pushes of the book in the twin')
    twin = Twin(spec, cell)
    rng = np.random.default_rng(0)
    data = []
    for i in range(pushes):
        primitive = random_push(spec.grid, twin.object_pose(), cell.table, cell.fingertip, rng)
        data.append(samples_of(twin.push(primitive)).to_data(spec.grid, i))
    grid = spec.grid
    times, steps, qp = [], 0, 0
    tip = cell.fingertip
    heights = tip.force_heights(grid)  # with the push's moment, as the product replays
    for i, pd in enumerate(data):
        progress(f'replaying recorded push {i + 1} of {len(data)} ({pd.push.steps} steps)')
        finger = FingertipPush.create(pd.p_WF, tip.radius, tip.mu, pd.push.dt)

        def run(f: FingertipPush = finger, X0: FloatArray = pd.X_WO0) -> Rollout:
            return simulate(grid, spec.mass, spec.friction, f, X0, push_height=heights)

        out = run()
        times.append(_median_time(run, repeats))
        steps += finger.steps
        qp += out.general_steps
    return {
        'replay_object': f'book ({grid.n} cells)',
        'replay_pushes': len(data),
        'replay_steps_per_push': steps / len(data),
        'replay_s_per_push': float(np.mean(times)),
        'replay_s_per_push_worst': float(np.max(times)),
        'replay_general_qp_fraction': qp / steps,
    }


def twin_true_maps(
    progress: Progress, pushes: int = 5, seed: int = 7, objects: list[str] | None = None
) -> dict[str, Any]:
    """The core with every library object's true maps predicting the twin's pushes.

    Per object, ``pushes`` random exploratory pushes recorded in the twin (none of them
    used to fit anything: the maps are the object's own) are replayed with the recorded
    fingertip path, under each support model, with the push's moment tipping the loads
    (the fingertip's force height on each cell). ``twin_true_maps_add_error_m`` is the mean
    over objects of the papers' metric (mean cell distance at the push's end) under the
    default support; the worst object, the mean yaw and translation errors at the end,
    the figure under the papers' m_i g loads and the figure without the push's moment come
    beside it.
    """
    from slide_core.identification import final_errors, random_push, replay
    from slide_core.model import library_names, load_object, load_workcell
    from slide_core.physics import DEFAULT_SUPPORT, SUPPORT_MODELS
    from slide_sim.twin import Twin
    from slide_sim.world import samples_of

    cell = load_workcell()
    errors: dict[str, dict[str, float]] = {s: {} for s in SUPPORT_MODELS}
    no_moment: dict[str, float] = {}
    yaw: list[float] = []
    shift: list[float] = []
    for name in objects or library_names():
        spec = load_object(name)
        progress(f'twin with true maps: recording {pushes} pushes of the {name}')
        twin = Twin(spec, cell)
        rng = np.random.default_rng(seed)
        data = []
        for i in range(pushes):
            primitive = random_push(spec.grid, twin.object_pose(), cell.table, cell.fingertip, rng)
            data.append(samples_of(twin.push(primitive)).to_data(spec.grid, i))
        heights = cell.fingertip.force_heights(spec.grid)
        for support in SUPPORT_MODELS:
            finals = replay(
                spec.grid, spec.mass, spec.friction, data, cell.fingertip, None, support, heights
            )
            errors[support][name] = float(final_errors(spec.grid, finals, data)[0].mean())
            if support == DEFAULT_SUPPORT:
                flat = replay(spec.grid, spec.mass, spec.friction, data, cell.fingertip)
                no_moment[name] = float(final_errors(spec.grid, flat, data)[0].mean())
                for pd, X in zip(data, finals[0], strict=True):
                    d = X - pd.X_steps[-1]
                    yaw.append(abs(math.remainder(float(d[2]), math.tau)))
                    shift.append(float(np.linalg.norm(d[:2])))
    default = errors[DEFAULT_SUPPORT]
    worst = max(default, key=lambda k: default[k])
    return {
        'twin_true_maps_add_error_m': float(np.mean(list(default.values()))),
        'twin_true_maps_support': DEFAULT_SUPPORT,
        'twin_true_maps_worst_object': f'{worst} {default[worst]:.4f} m',
        'twin_true_maps_yaw_error_rad': float(np.mean(yaw)),
        'twin_true_maps_position_error_m': float(np.mean(shift)),
        'twin_true_maps_pushes': pushes * len(default),
        'twin_true_maps_add_error_m_no_push_moment': float(np.mean(list(no_moment.values()))),
        **{
            f'twin_true_maps_add_error_m_{s.replace("-", "_")}': float(np.mean(list(e.values())))
            for s, e in errors.items()
        },
    }


def run(progress: Progress = lambda _: None, reference: bool = True) -> dict[str, Any]:
    """All figures of ``slide bench physics`` as one JSON-ready dict."""
    progress('loading the compiled kernels')
    warm_up()
    out: dict[str, Any] = {'object_cells': 88, 'dt_s': DT, 'push_s': PUSH_S}
    out.update(gradient_errors(progress))
    grid, mass, friction = benchmark_object()
    push = one_second_push(grid, 5, (6.0, 2.0))

    progress('timing the fast simulator (1 s push, 88 cells, one hypothesis)')
    fast = simulate(grid, mass, friction, push, [0, 0, 0])
    out['fast_s_per_push'] = _median_time(
        lambda: simulate(grid, mass, friction, push, [0, 0, 0]), 21
    )
    out['fast_general_steps_per_push'] = fast.general_steps

    progress('timing K = 32 hypotheses in one batch')
    rng = np.random.default_rng(3)
    K = 32
    mk = mass * rng.uniform(0.5, 1.5, (K, grid.n))
    muk = friction * rng.uniform(0.5, 1.5, (K, grid.n))
    batch = simulate(grid, mk, muk, push, [0, 0, 0])
    out['batch_hypotheses_per_s'] = K / _median_time(
        lambda: simulate(grid, mk, muk, push, [0, 0, 0]), 7
    )
    out['batch_k'] = K
    out['batch_general_steps'] = batch.general_steps
    out.update(replay(progress))
    out.update(twin_true_maps(progress))

    if reference:
        progress('timing the reference simulator (1 s push, 88 cells; about a minute)')
        t0 = time.perf_counter()
        ref = simulate_reference(grid, mass, friction, push, [0, 0, 0])
        out['reference_s_per_push'] = time.perf_counter() - t0
        out['speedup_fast_vs_reference'] = out['reference_s_per_push'] / out['fast_s_per_push']
        devs = [_max_dev(grid, fast.X_WO[0], ref.X_WO[0])]
        # More pushes on a smaller irregular object: other contact cells and directions.
        small = Grid.from_occupancy([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 0]], 0.02)
        rng = np.random.default_rng(4)
        for i, force in enumerate([(1.5, 0.5), (-0.4, 1.8), (1.2, -1.2), (0.2, 2.0)]):
            progress(f'fast vs reference: push {i + 1} of 4 on a 12-cell object')
            m_s = rng.uniform(0.005, 0.03, small.n)
            mu_s = rng.uniform(0.15, 0.9, small.n)
            p = one_second_push(small, 2 * i, force)
            a = simulate(small, m_s, mu_s, p, [0.1, -0.1, 0.3])
            b = simulate_reference(small, m_s, mu_s, p, [0.1, -0.1, 0.3])
            devs.append(_max_dev(small, a.X_WO[0], b.X_WO[0]))
        out['fast_vs_reference_max_dev_m'] = max(devs)
        out['fast_vs_reference_pushes'] = len(devs)
    out['published_s_per_simulation'] = 1.34
    out['published_s_per_gradient'] = 0.0069
    return out


def _max_dev(grid: Grid, X_a: FloatArray, X_b: FloatArray) -> float:
    return float(np.abs(cell_positions(grid, X_a) - cell_positions(grid, X_b)).max())
