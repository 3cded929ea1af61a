"""``slide bench identification``: every identification method on twin bags of the library.

Per object: 10 random exploratory pushes recorded in the twin (seeded); pushes 0-4 train,
5-9 test. Every method gets the same training steps, bounds and simulation budget. Figures:
held-out ``add_error_m`` (replay of the recorded fingertip with the most probable model),
wall time, the training loss reached against simulations used (the papers' Fig. 4, drawn to
a PNG, with the held-out loss at the end), the simulations each method needs to come within
10% of the best loss any method reached, and paper 2's edge-balance test: random poses
over the table edge, the belief's probability that the object stays against what the twin
does when it is left there.

The same pushes are also recorded with the object poses a camera tracker would give
(:data:`TRACKED`: perception's median tracking error, at its 30 Hz, as white noise) and
identified with the probabilistic method: the held-out error and centre of mass there say
what the twin's perfect 100 Hz poses hide. The probabilistic belief holds the default
centre-of-mass spread (:mod:`slide_core.identification.spread`); ``no_com_spread`` gives its
figures with the K models alone (whether the true centre of mass lies in the models' hull,
and the edge-balance poses it calls stable).

Every fit has the push's moment shifting the loads, as the product identifies
(``TrainingSet.push_height`` at the fingertip's force height on each cell; the beliefs
record it and the held-out replays add it); ``no_push_moment`` gives the probabilistic
figures of the fit and replays without it (the papers' loads). The rollout refinement
(``--refine-budget``) refines the probabilistic fit, with the moment, and compares with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import math
from pathlib import Path
import tempfile
from typing import Any

import numpy as np

from slide_core.files import check_output, write_atomic
from slide_core.geometry import cell_positions
from slide_core.identification import METHODS, TrainingSet, evaluate, identify, refine
from slide_core.io import read_ground_truth, read_pushes
from slide_core.model import ObjectSpec, Workcell, library_names, load_object, load_workcell
from slide_core.physics import DEFAULT_SUPPORT, check_support
from slide_core.planning import stay_probability
from slide_sim.record import Tracking, record
from slide_sim.twin import Twin

Progress = Callable[[str], None]
BUDGET = 2000
STABLE_P = 0.9
TRACKED = Tracking(30.0, 0.15e-3, math.radians(0.05))
"""Poses as perception tracks them (``slide bench perception``: 0.15 mm and 0.05 degrees
median error, 30 Hz)."""


def edge_poses(spec: ObjectSpec, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Poses with 10 to 60% of the cells past the edge (x < 0), random yaw."""
    poses = []
    while len(poses) < count:
        yaw = rng.uniform(-math.pi, math.pi)
        x0 = np.array([0.0, rng.uniform(-0.2, 0.2), yaw])
        xs = cell_positions(spec.grid, x0)[:, 0]
        frac = rng.uniform(0.1, 0.6)
        x0[0] = -np.quantile(xs, frac)
        poses.append(x0)
    return poses


def twin_stays(spec: ObjectSpec, cell: Workcell, X_WO: np.ndarray) -> bool:
    twin = Twin(spec, cell, (float(X_WO[0]), float(X_WO[1]), float(X_WO[2])))
    twin.settle(1.0)
    return not twin.fell()


def _record(
    spec: ObjectSpec, cell: Workcell, seed: int, bag: Path, tracking: Tracking | None = None
) -> None:
    """The bench's 10 pushes of ``spec`` into ``bag``, a temporary folder: an interrupt's
    or a failure's note that the bag keeps the pushes made is dropped, since the bag goes
    with the bench (the message named a folder that no longer existed)."""
    try:
        record(spec, cell, 10, seed, bag, tracking=tracking or Tracking())
    except (KeyboardInterrupt, OSError) as exc:
        exc.__notes__ = [n for n in getattr(exc, '__notes__', []) if str(bag) not in n]
        raise


def _mean(values: Sequence[float]) -> float | None:
    """The mean of ``values``, None when there are none (no ground truth to compare)."""
    return float(np.mean(values)) if values else None


def run(
    objects: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    seed: int = 0,
    png: Path | None = None,
    progress: Progress | None = None,
    support: str | None = None,
    refine_budget: int = 0,
) -> dict[str, Any]:
    names = list(objects or library_names())
    if png is not None:
        check_output(png, ('.png',), '--png')  # before minutes of work, not after
    support = check_support(support or DEFAULT_SUPPORT)
    if refine_budget < 0:
        raise ValueError(f'the refinement budget must be >= 0, got {refine_budget}')
    methods = list(methods or METHODS)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:  # before a bag is recorded and the methods before it run
        raise ValueError(f'unknown methods {unknown}; choose from {", ".join(METHODS)}')
    for name in names:
        load_object(name)
    rows: dict[str, dict[str, list[float]]] = {
        m: {'add': [], 'uniform': [], 's': [], 'sims_to_target': [], 'test_loss': []}
        for m in methods
    }
    curves: dict[str, list[tuple[list[int], list[float], float]]] = {m: [] for m in methods}
    balance = {'poses': 0, 'predicted_stable': 0, 'stable_and_stayed': 0, 'agree': 0}
    com_errors: list[float] = []
    in_support: list[bool] = []
    tracked: dict[str, list[float]] = {'add': [], 'com': []}
    alone_rows: dict[str, list[float]] = {'add': [], 'com': [], 'in': [], 'models': []}
    alone_balance = {'predicted_stable': 0, 'stable_and_stayed': 0}
    flat: dict[str, list[float]] = {'add': [], 'com': [], 'tracked_add': [], 'tracked_com': []}
    flat_balance = {'predicted_stable': 0, 'stable_and_stayed': 0}
    refined: dict[str, dict[str, float | None]] = {}
    cell = load_workcell()
    with tempfile.TemporaryDirectory() as tmp:
        for k, name in enumerate(names):
            spec = load_object(name)
            # (by its place: a file's path as the name put the bag at that path)
            bag = Path(tmp) / f'object{k}'
            _record(spec, cell, seed, bag)
            grid, train_pd = read_pushes(bag, list(range(5)))
            _, test_pd = read_pushes(bag, list(range(5, 10)))
            truth = read_ground_truth(bag)
            mass = None if truth is None else truth.mass
            height = cell.fingertip.force_heights(grid)
            train = TrainingSet.from_pushes(grid, train_pd, support, height)
            test = TrainingSet.from_pushes(grid, test_pd, support, height)
            beliefs = {}
            for method in methods:
                beliefs[method] = identify(train, method, budget=BUDGET, seed=seed)
            best_loss = min(float(r.belief.loss.min()) for r in beliefs.values())
            for method, found in beliefs.items():
                belief = found.belief
                ev = evaluate(belief, test_pd, cell.fingertip, mass)
                r = rows[method]
                r['add'].append(ev.add_error_m)
                r['uniform'].append(ev.uniform_add_error_m)
                r['s'].append(found.seconds)
                k = belief.best
                r['test_loss'].append(float(test.loss(belief.mass[k], belief.friction[k])[0]))
                used = [u for u, _ in found.trace]
                losses = [float(train.loss(t[: grid.n], t[grid.n :])[0]) for _, t in found.trace]
                curves[method].append((used, losses, best_loss))
                hit = [u for u, f in zip(used, losses, strict=True) if f <= 1.1 * best_loss]
                r['sims_to_target'].append(float(hit[0]) if hit else math.inf)
                if method == 'probabilistic' and truth is not None and ev.com_error_m is not None:
                    com_errors.append(ev.com_error_m)
                    in_support.append(bool(ev.truth_in_support))
                if progress:
                    progress(
                        f'{name} {method}: add {100 * ev.add_error_m:.2f} cm (uniform '
                        f'{100 * ev.uniform_add_error_m:.2f}), {found.seconds:.2f} s'
                    )
            if 'probabilistic' in beliefs:
                # The papers' fit, without the push's moment, compared.
                train_flat = TrainingSet.from_pushes(grid, train_pd, support)
                papers = identify(train_flat, 'probabilistic', budget=BUDGET, seed=seed)
                if refine_budget > 0:
                    fit = beliefs['probabilistic']
                    after = refine(fit, train, train_pd, budget=refine_budget, push_height=height)
                    ev0 = evaluate(fit.belief, test_pd, cell.fingertip, mass)
                    ev1 = evaluate(after.belief, test_pd, cell.fingertip, mass)
                    refined[name] = {
                        'add_error_m': ev0.add_error_m,
                        'refined_add_error_m': ev1.add_error_m,
                        'seconds': fit.seconds,
                        'refined_seconds': after.seconds,
                        'com_error_m': ev0.com_error_m,
                        'refined_com_error_m': ev1.com_error_m,
                    }
                    if progress:
                        progress(
                            f'{name} refined: add {100 * ev0.add_error_m:.2f} -> '
                            f'{100 * ev1.add_error_m:.2f} cm, {after.seconds:.1f} s'
                        )
                seen = Path(tmp) / f'object{k}-tracked'
                _record(spec, cell, seed, seen, TRACKED)
                grid_t, train_t = read_pushes(seen, list(range(5)))
                _, test_t = read_pushes(seen, list(range(5, 10)))
                found_t = identify(
                    TrainingSet.from_pushes(grid_t, train_t, support, height),
                    'probabilistic',
                    budget=BUDGET,
                    seed=seed,
                )
                ev = evaluate(found_t.belief, test_t, cell.fingertip, mass)
                tracked['add'].append(ev.add_error_m)
                if ev.com_error_m is not None:
                    tracked['com'].append(ev.com_error_m)
                if progress:
                    progress(
                        f'{name} probabilistic, tracked poses: add {100 * ev.add_error_m:.2f} cm'
                    )
                alone = identify(
                    train, 'probabilistic', budget=BUDGET, seed=seed, com_directions=0
                ).belief
                ev = evaluate(alone, test_pd, cell.fingertip, mass)
                alone_rows['add'].append(ev.add_error_m)
                alone_rows['models'].append(alone.K)
                if ev.com_error_m is not None:
                    alone_rows['com'].append(ev.com_error_m)
                    alone_rows['in'].append(float(bool(ev.truth_in_support)))
                ev = evaluate(papers.belief, test_pd, cell.fingertip, mass)
                flat['add'].append(ev.add_error_m)
                if ev.com_error_m is not None:
                    flat['com'].append(ev.com_error_m)
                found_tt = identify(
                    TrainingSet.from_pushes(grid_t, train_t, support),
                    'probabilistic',
                    budget=BUDGET,
                    seed=seed,
                )
                ev = evaluate(found_tt.belief, test_t, cell.fingertip, mass)
                flat['tracked_add'].append(ev.add_error_m)
                if ev.com_error_m is not None:
                    flat['tracked_com'].append(ev.com_error_m)
                rng = np.random.default_rng(seed)
                for X in edge_poses(spec, 12, rng):
                    p = stay_probability(beliefs['probabilistic'].belief, X)
                    stayed = twin_stays(spec, cell, X)
                    balance['poses'] += 1
                    balance['agree'] += int((p >= 0.5) == stayed)
                    if p >= STABLE_P:
                        balance['predicted_stable'] += 1
                        balance['stable_and_stayed'] += int(stayed)
                    if stay_probability(alone, X) >= STABLE_P:
                        alone_balance['predicted_stable'] += 1
                        alone_balance['stable_and_stayed'] += int(stayed)
                    if stay_probability(papers.belief, X) >= STABLE_P:
                        flat_balance['predicted_stable'] += 1
                        flat_balance['stable_and_stayed'] += int(stayed)
    per_method = {
        m: {
            'add_error_m': float(np.mean(r['add'])),
            'uniform_add_error_m': float(np.mean(r['uniform'])),
            'heldout_loss_n2': float(np.mean(r['test_loss'])),
            'seconds': float(np.mean(r['s'])),
            'simulations_to_within_10pct': float(np.median(r['sims_to_target'])),
        }
        for m, r in rows.items()
    }
    result: dict[str, Any] = {
        'objects': names,
        'support': support,
        **({'rollout_refinement': refined} if refined else {}),
        'budget_simulations': BUDGET,
        'methods': per_method,
        'probabilistic_com_error_m': _mean(com_errors),
        'truth_in_support_fraction': _mean(in_support),
        **(
            {
                'tracked_poses': {
                    'hz': TRACKED.hz,
                    'sigma_m': TRACKED.sigma_m,
                    'sigma_rad': TRACKED.sigma_rad,
                    'probabilistic_add_error_m': float(np.mean(tracked['add'])),
                    'probabilistic_com_error_m': _mean(tracked['com']),
                }
            }
            if tracked['add']
            else {}
        ),
        **(
            {
                'no_com_spread': {
                    'models_mean': float(np.mean(alone_rows['models'])),
                    'probabilistic_add_error_m': float(np.mean(alone_rows['add'])),
                    'probabilistic_com_error_m': _mean(alone_rows['com']),
                    'truth_in_support_fraction': _mean(alone_rows['in']),
                    **alone_balance,
                }
            }
            if alone_rows['add']
            else {}
        ),
        **(
            {
                'no_push_moment': {
                    'probabilistic_add_error_m': float(np.mean(flat['add'])),
                    'probabilistic_com_error_m': _mean(flat['com']),
                    'tracked_add_error_m': float(np.mean(flat['tracked_add'])),
                    'tracked_com_error_m': _mean(flat['tracked_com']),
                    **flat_balance,
                }
            }
            if flat['add']
            else {}
        ),
        'edge_balance': {
            **balance,
            'stable_that_stayed_fraction': (
                balance['stable_and_stayed'] / balance['predicted_stable']
                if balance['predicted_stable']
                else None
            ),
        },
    }
    if png is not None:
        result['png'] = str(draw_losses(png, curves))
    return result


def draw_losses(path: Path, curves: dict[str, list[tuple[list[int], list[float], float]]]) -> Path:
    """Draw each method's training loss against simulations to ``path`` (PNG): per method,
    runs of (simulations used, loss at each, best loss of all methods on that object), the
    best so far over the floor, averaged over the runs that have a loss by then."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    grid = np.unique(np.round(np.logspace(0, math.log10(BUDGET), 40)).astype(int))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, runs in curves.items():
        rel = []
        for used, losses, floor in runs:
            if not used:
                continue
            best = np.minimum.accumulate(losses)
            idx = np.searchsorted(used, grid, side='right') - 1
            vals = np.where(idx >= 0, best[np.maximum(idx, 0)], np.nan)
            rel.append(vals / floor)
        if rel:
            R = np.array(rel)
            seen = np.isfinite(R).any(axis=0)  # before its first evaluation no run has a loss
            ax.plot(grid[seen], np.nanmean(R[:, seen], axis=0), label=method)
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('simulations (hypothesis evaluations)')
    ax.set_ylabel('training loss / best of all methods (mean over objects)')
    ax.set_title('identification: loss against simulations')
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:  # as every other picture: nothing half-written, no folder left on failure
        write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, format='png'))
    finally:
        plt.close(fig)
    return path
