"""``slide bench identification``: every identification method on twin bags of the library.

Per object: 10 random exploratory pushes recorded in the twin (seeded); pushes 0-4 train,
5-9 test. ``--seeds`` repeats it with the pushes of more seeds, and the figures are the
means over all: one draw of five training pushes is a small sample (the library's
centre-of-mass error was 5.2, 8.8 and 9.2 mm with seeds 0, 1 and 2). Every method gets
the same training steps, bounds and simulation budget. Figures:
held-out ``add_error_m`` (replay of the recorded fingertip with the most probable model),
wall time, the training loss reached against simulations used (the papers' Fig. 4, drawn to
a PNG, with the held-out loss at the end), the simulations each method needs to come within
10% of the best loss any method reached, and paper 2's edge-balance test: random poses
over the table edge, the belief's probability that the object stays against what the twin
does when it is left there.

The same pushes are also recorded with the object poses a camera tracker would give
(``tracking``, by default :data:`TRACKED`: perception's median tracking error, at its 30
Hz, as white noise) and identified with the probabilistic method: the held-out error,
centre of mass and the truth's place in the models' hull there say what the twin's perfect
100 Hz poses hide. On them the fingertip's contact offset is measured too
(:func:`slide_core.identification.contact_offset`, ``contact_offset_m``: with a camera off
by ``--pose-offset``, minus that), and the fit and its held-out replays repeated with it
taken off (``calibrated_*``). The probabilistic belief holds the default
centre-of-mass spread (:mod:`slide_core.identification.spread`); ``no_com_spread`` gives its
figures with the K models alone (whether the true centre of mass lies in the models' hull,
and the edge-balance poses it calls stable).

Every fit has the push's moment shifting the loads, as the product identifies
(``TrainingSet.push_height`` at the fingertip's force height on each cell; the beliefs
record it and the held-out replays add it); ``no_push_moment`` gives the probabilistic
figures of the fit and replays without it (the papers' loads). The rollout refinement
(``--refine-budget``) refines the probabilistic fit, with the moment, and compares with it.

``over_the_edge``: the probabilistic fit with :data:`EDGE_STARTS` x :data:`EDGE_PUSHES`
more training pushes made with part of the object over the table's edge (started with
:data:`EDGE_SHARE` of its cells past it, at a random yaw; a start at which the twin's
object falls is left out), scored on the same held-out pushes. On the table the pushes see
the centre of mass and the friction map only through their products; over the edge the
carried cells' loads depend on the centre of mass otherwise, and these pushes tell the two
apart (:class:`slide_core.identification.TrainingSet`). The task gets such pushes as it
pushes the object to its goal and identifies again (``TaskSettings.relearn_every``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
import math
from pathlib import Path
import tempfile
from typing import Any

import numpy as np

from slide_bringup.signals import Terminated
from slide_core.files import check_output, write_atomic
from slide_core.geometry import FloatArray, Grid, cell_positions
from slide_core.identification import (
    DEFAULT_BUDGET,
    METHODS,
    Evaluation,
    IdentificationError,
    PushData,
    TrainingSet,
    contact_offset,
    evaluate,
    identify,
    offset_pushes,
    refine,
)
from slide_core.io import read_ground_truth, read_pushes
from slide_core.model import (
    Belief,
    ObjectSpec,
    Workcell,
    library_names,
    load_object,
    load_workcell,
)
from slide_core.physics import DEFAULT_SUPPORT, check_support
from slide_core.planning import stay_probability
from slide_sim.record import record
from slide_sim.tracker import PERCEPTION, TRUTH, Tracking
from slide_sim.twin import Twin

Progress = Callable[[str], None]
STABLE_P = 0.9
TRACKED = PERCEPTION
"""Poses as perception tracks them (:data:`slide_sim.tracker.PERCEPTION`)."""
STABLE_KEYS = ('predicted_stable', 'stable_and_stayed')
BALANCE_KEYS = ('poses', *STABLE_KEYS, 'agree')


EDGE_STARTS = 3
EDGE_PUSHES = 2
EDGE_SHARE = 0.2
"""``over_the_edge``: starts, random pushes from each, and the share of the cells past the
table's edge at each start."""


def edge_pushes(
    spec: ObjectSpec, cell: Workcell, seed: int, folder: Path, rng: np.random.Generator
) -> list[PushData]:
    """The pushes over the table's edge (:data:`EDGE_STARTS` bags in ``folder``), renumbered
    after the bench's 10; none from a start at which the twin's object fell."""
    pushes: list[PushData] = []
    for j in range(EDGE_STARTS):
        X = np.array([0.0, rng.uniform(-0.15, 0.15), rng.uniform(-math.pi, math.pi)])
        X[0] = -np.quantile(cell_positions(spec.grid, X)[:, 0], EDGE_SHARE)
        bag = folder / f'start{j}'
        start = (float(X[0]), float(X[1]), float(X[2]))
        if not _record(spec, cell, seed + 100 + j, bag, pushes=EDGE_PUSHES, X_WO=start):
            continue
        for pd in read_pushes(bag).pushes:
            pushes.append(replace(pd, index=10 + len(pushes)))
    return pushes


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
    spec: ObjectSpec,
    cell: Workcell,
    seed: int,
    bag: Path,
    tracking: Tracking | None = None,
    pushes: int = 10,
    X_WO: tuple[float, float, float] | None = None,
) -> bool:
    """The bench's ``pushes`` (10) of ``spec`` into ``bag``, a temporary folder, from
    ``X_WO`` (the twin's default pose); False when the object fell. An interrupt's or a
    failure's note that the bag keeps the pushes made is dropped, since the bag goes with
    the bench (the message named a folder that no longer existed)."""
    try:
        summary = record(spec, cell, pushes, seed, bag, X_WO, tracking=tracking or TRUTH)
    except (KeyboardInterrupt, OSError) as exc:
        exc.__notes__ = [n for n in getattr(exc, '__notes__', []) if str(bag) not in n]
        raise
    return bool(summary['ok'])


def _seeded(progress: Progress, seed: int) -> Progress:
    """``progress`` with each line saying its seed."""
    return lambda message: progress(f'seed {seed}: {message}')


def _mean(values: Sequence[float]) -> float | None:
    """The mean of ``values``, None when there are none (no ground truth to compare)."""
    return float(np.mean(values)) if values else None


def _calibration_figures(lists: dict[str, list[float]], tracking: Tracking) -> dict[str, Any]:
    """The tracked poses' contact offsets and calibrated fits (:func:`_calibrated`), and the
    camera's offset they were recorded with; nothing when none was measured."""
    x, y = lists['offset_x'], lists['offset_y']
    if not x:
        return {}
    return {
        'offset_m': list(tracking.offset_m),
        'contact_offset_m': [_mean(x), _mean(y)],
        'contact_offset_spread_m': _spread(x, y),
        'calibrated_add_error_m': _mean(lists['calibrated_add']),
        'calibrated_com_error_m': _mean(lists['calibrated_com']),
        'calibrated_truth_in_support_fraction': _mean(lists['calibrated_in']),
    }


def _spread(x: Sequence[float], y: Sequence[float]) -> float | None:
    """RMS distance [m] of points (x, y) from their mean (None without any)."""
    if not x:
        return None
    p = np.column_stack((x, y))
    return float(np.sqrt(np.mean(np.sum((p - p.mean(axis=0)) ** 2, axis=1))))


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def run(
    objects: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    seed: int = 0,
    png: Path | None = None,
    progress: Progress | None = None,
    support: str | None = None,
    refine_budget: int = 0,
    seeds: int = 1,
    tracking: Tracking = TRACKED,
) -> dict[str, Any]:
    """The bench over ``objects`` (default: the library), each with the pushes of ``seeds``
    seeds from ``seed`` (every figure is the mean over the objects and seeds: one seed's
    ten pushes are one draw, and the figures of one draw differ from the next's by more
    than the changes they are read for). A Ctrl-C or SIGTERM keeps the objects done: the
    result has them, with ``interrupted`` ('interrupted' or 'terminated') and
    ``objects_planned``; the object being identified is dropped."""
    if seeds < 1:
        raise ValueError(f'seeds must be at least 1, got {seeds}')
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
    done = _Tally(methods)
    by_seed: dict[int, _Tally] = {}
    cell = load_workcell()
    stopped: KeyboardInterrupt | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(seed, seed + seeds):
            said = progress
            if progress is not None and seeds > 1:
                said = _seeded(progress, s)
            for k, name in enumerate(names):
                one = _Tally(methods)
                try:
                    _object(
                        one,
                        name,
                        k,
                        Path(tmp) / f'seed{s}',
                        cell,
                        methods,
                        s,
                        support,
                        refine_budget,
                        said,
                        tracking,
                    )
                except KeyboardInterrupt as stop:
                    # (every object done was lost with the interrupt, up to 4 minutes of them)
                    stopped = stop
                    break
                done.add(one)
                by_seed.setdefault(s, _Tally(methods)).add(one)
            if stopped is not None:
                break
    result = _summary(done, support, tracking)
    result = {**result, 'seeds': sorted(by_seed), 'runs': len(done.objects)}
    if len(by_seed) > 1:
        result['per_seed'] = {str(s): _headline(t, support, tracking) for s, t in by_seed.items()}
    if stopped is not None:
        how = 'terminated' if isinstance(stopped, Terminated) else 'interrupted'
        result = {'interrupted': how, 'objects_planned': names, **result}
    if png is not None and done.objects:
        result['png'] = str(draw_losses(png, done.curves))
    return result


@dataclass
class _Tally:
    """The figures of the objects identified so far (one object's are added whole, so an
    interrupt keeps only objects done)."""

    methods: list[str]
    objects: list[str] = field(default_factory=list)
    rows: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    curves: dict[str, list[tuple[list[int], list[float], float]]] = field(default_factory=dict)
    balance: Counter[str] = field(default_factory=Counter)
    alone_balance: Counter[str] = field(default_factory=Counter)
    flat_balance: Counter[str] = field(default_factory=Counter)
    lists: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    refined: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for m in self.methods:
            self.rows.setdefault(
                m, {'add': [], 'uniform': [], 's': [], 'sims_to_target': [], 'test_loss': []}
            )
            self.curves.setdefault(m, [])

    def add(self, other: _Tally) -> None:
        self.objects += other.objects
        for m in self.methods:
            for key, values in other.rows[m].items():
                self.rows[m][key] += values
            self.curves[m] += other.curves[m]
        self.balance.update(other.balance)
        self.alone_balance.update(other.alone_balance)
        self.flat_balance.update(other.flat_balance)
        for key, values in other.lists.items():
            self.lists[key] += values
        self.refined.update(other.refined)


def _object(
    t: _Tally,
    name: str,
    k: int,
    tmp: Path,
    cell: Workcell,
    methods: Sequence[str],
    seed: int,
    support: str,
    refine_budget: int,
    progress: Progress | None,
    tracking: Tracking = TRACKED,
) -> None:
    """Record, identify and score one object (the ``k``-th) into ``t``; its tracked-pose
    figures with ``tracking``."""
    spec = load_object(name)
    # (by its place: a file's path as the name put the bag at that path)
    bag = tmp / f'object{k}'
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
        beliefs[method] = identify(train, method, budget=DEFAULT_BUDGET, seed=seed)
    best_loss = min(float(r.belief.loss.min()) for r in beliefs.values())
    lists = t.lists
    for method, found in beliefs.items():
        belief = found.belief
        ev = evaluate(belief, test_pd, cell.fingertip, mass)
        r = t.rows[method]
        r['add'].append(ev.add_error_m)
        r['uniform'].append(ev.uniform_add_error_m)
        r['s'].append(found.seconds)
        best = belief.best
        r['test_loss'].append(float(test.loss(belief.mass[best], belief.friction[best])[0]))
        used = [u for u, _ in found.trace]
        losses = [float(train.loss(x[: grid.n], x[grid.n :])[0]) for _, x in found.trace]
        t.curves[method].append((used, losses, best_loss))
        hit = [u for u, f in zip(used, losses, strict=True) if f <= 1.1 * best_loss]
        r['sims_to_target'].append(float(hit[0]) if hit else math.inf)
        if method == 'probabilistic' and truth is not None and ev.com_error_m is not None:
            lists['com'].append(ev.com_error_m)
            lists['in_support'].append(float(bool(ev.truth_in_support)))
        if progress:
            progress(
                f'{name} {method}: add {100 * ev.add_error_m:.2f} cm (uniform '
                f'{100 * ev.uniform_add_error_m:.2f}), {found.seconds:.2f} s'
            )
    if 'probabilistic' in beliefs:
        # The papers' fit, without the push's moment, compared.
        train_flat = TrainingSet.from_pushes(grid, train_pd, support)
        papers = identify(train_flat, 'probabilistic', budget=DEFAULT_BUDGET, seed=seed)
        if refine_budget > 0:
            fit = beliefs['probabilistic']
            after = refine(fit, train, train_pd, budget=refine_budget, push_height=height)
            ev0 = evaluate(fit.belief, test_pd, cell.fingertip, mass)
            ev1 = evaluate(after.belief, test_pd, cell.fingertip, mass)
            t.refined[name] = {
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
        seen = tmp / f'object{k}-tracked'
        _record(spec, cell, seed, seen, tracking)
        grid_t, train_t = read_pushes(seen, list(range(5)))
        _, test_t = read_pushes(seen, list(range(5, 10)))
        found_t = identify(
            TrainingSet.from_pushes(grid_t, train_t, support, height),
            'probabilistic',
            budget=DEFAULT_BUDGET,
            seed=seed,
        )
        ev = _score(lists, 'tracked', found_t.belief, test_t, cell, mass)
        if ev.com_error_m is not None:
            lists['tracked_in'].append(float(bool(ev.truth_in_support)))
        if progress:
            progress(f'{name} probabilistic, tracked poses: add {100 * ev.add_error_m:.2f} cm')
        _calibrated(lists, name, grid_t, train_t, test_t, cell, support, seed, mass, progress)
        alone = identify(
            train, 'probabilistic', budget=DEFAULT_BUDGET, seed=seed, com_directions=0
        ).belief
        ev = _score(lists, 'alone', alone, test_pd, cell, mass)
        lists['alone_models'].append(alone.K)
        if ev.com_error_m is not None:
            lists['alone_in'].append(float(bool(ev.truth_in_support)))
        _score(lists, 'flat', papers.belief, test_pd, cell, mass)
        found_tt = identify(
            TrainingSet.from_pushes(grid_t, train_t, support),
            'probabilistic',
            budget=DEFAULT_BUDGET,
            seed=seed,
        )
        _score(lists, 'flat_tracked', found_tt.belief, test_t, cell, mass)
        over = edge_pushes(
            spec, cell, seed, tmp / f'object{k}-edge', np.random.default_rng([seed, k])
        )
        if over:
            with_edge = TrainingSet.from_pushes(grid, train_pd + over, support, height)
            found_e = identify(with_edge, 'probabilistic', budget=DEFAULT_BUDGET, seed=seed).belief
            ev = _score(lists, 'edge', found_e, test_pd, cell, mass)
            lists['edge_pushes'].append(len(over))
            if ev.com_error_m is not None:
                lists['edge_in'].append(float(bool(ev.truth_in_support)))
            if progress:
                com = (
                    ''
                    if ev.com_error_m is None
                    else f', centre of mass {1000 * ev.com_error_m:.2f} mm'
                )
                progress(
                    f'{name} probabilistic, {len(over)} pushes over the edge added: add '
                    f'{100 * ev.add_error_m:.2f} cm{com}'
                )
        rng = np.random.default_rng(seed)
        balance = t.balance
        for X in edge_poses(spec, 12, rng):
            p = stay_probability(beliefs['probabilistic'].belief, X)
            stayed = twin_stays(spec, cell, X)
            balance['poses'] += 1
            balance['agree'] += int((p >= 0.5) == stayed)
            if p >= STABLE_P:
                balance['predicted_stable'] += 1
                balance['stable_and_stayed'] += int(stayed)
            if stay_probability(alone, X) >= STABLE_P:
                t.alone_balance['predicted_stable'] += 1
                t.alone_balance['stable_and_stayed'] += int(stayed)
            if stay_probability(papers.belief, X) >= STABLE_P:
                t.flat_balance['predicted_stable'] += 1
                t.flat_balance['stable_and_stayed'] += int(stayed)
    t.objects.append(name)


def _calibrated(
    lists: dict[str, list[float]],
    name: str,
    grid: Grid,
    train: list[PushData],
    test: list[PushData],
    cell: Workcell,
    support: str,
    seed: int,
    mass: FloatArray | None,
    progress: Progress | None,
) -> None:
    """The fingertip's contact offset measured on the tracked ``train`` pushes (into
    ``lists``: offset_x, offset_y), and the probabilistic fit's held-out figures with it
    taken off the train and test pushes (calibrated_add, calibrated_com, calibrated_in).
    Pushes from too few directions to tell it add nothing."""
    try:
        found = contact_offset(grid, train, cell.fingertip.radius)
    except IdentificationError:
        return
    lists['offset_x'].append(float(found.p_offset_W[0]))
    lists['offset_y'].append(float(found.p_offset_W[1]))
    fixed = identify(
        TrainingSet.from_pushes(
            grid,
            offset_pushes(grid, train, found.p_offset_W),
            support,
            cell.fingertip.force_heights(grid),
        ),
        'probabilistic',
        budget=DEFAULT_BUDGET,
        seed=seed,
    )
    held_out = offset_pushes(grid, test, found.p_offset_W)
    ev = _score(lists, 'calibrated', fixed.belief, held_out, cell, mass)
    if ev.com_error_m is not None:
        lists['calibrated_in'].append(float(bool(ev.truth_in_support)))
    if progress:
        x, y = (1e3 * found.p_offset_W).tolist()
        progress(
            f'{name} tracked poses: contact offset ({x:+.2f}, {y:+.2f}) mm; taken off, add '
            f'{100 * ev.add_error_m:.2f} cm'
        )


def _score(
    lists: dict[str, list[float]],
    key: str,
    belief: Belief,
    pushes: list[PushData],
    cell: Workcell,
    mass: FloatArray | None,
) -> Evaluation:
    """``belief``'s held-out figures on ``pushes``, added to ``lists`` under ``key``_add and
    ``key``_com (with the truth's ``mass`` only)."""
    ev = evaluate(belief, pushes, cell.fingertip, mass)
    lists[f'{key}_add'].append(ev.add_error_m)
    if ev.com_error_m is not None:
        lists[f'{key}_com'].append(ev.com_error_m)
    return ev


def _headline(t: _Tally, support: str, tracking: Tracking = TRACKED) -> dict[str, Any]:
    """One seed's main figures: each method's held-out error, the probabilistic fit's
    centre of mass, and its figures with tracked poses and over the edge (when run)."""
    whole = _summary(t, support, tracking)
    out: dict[str, Any] = {
        'add_error_m': {m: f['add_error_m'] for m, f in whole['methods'].items()}
    }
    out['com_error_m'] = whole['probabilistic_com_error_m']
    out['truth_in_support_fraction'] = whole['truth_in_support_fraction']
    for part in ('tracked_poses', 'over_the_edge'):
        if part in whole:
            out[part] = {
                k: whole[part][k]
                for k in ('probabilistic_add_error_m', 'probabilistic_com_error_m')
            }
    return out


def _summary(t: _Tally, support: str, tracking: Tracking = TRACKED) -> dict[str, Any]:
    """The bench's figures over the objects in ``t``: a method's figure is None (null) with
    no object done; ``simulations_to_within_10pct`` is the median over the objects, None
    when the median object did not come within 10% of the best loss in the budget
    (``within_10pct_runs`` says how many did); a centre-of-mass figure is None where no
    object has its ground truth."""
    lists = t.lists
    per_method = {
        m: {
            'add_error_m': _mean(r['add']),
            'uniform_add_error_m': _mean(r['uniform']),
            'heldout_loss_n2': _mean(r['test_loss']),
            'seconds': _mean(r['s']),
            'simulations_to_within_10pct': _finite(np.median(r['sims_to_target']))
            if r['sims_to_target']
            else None,
            'within_10pct_runs': sum(math.isfinite(v) for v in r['sims_to_target']),
        }
        for m, r in t.rows.items()
    }
    balance = {key: t.balance[key] for key in BALANCE_KEYS}
    result: dict[str, Any] = {
        'objects': list(dict.fromkeys(t.objects)),
        'support': support,
        **({'rollout_refinement': t.refined} if t.refined else {}),
        'budget_simulations': DEFAULT_BUDGET,
        'methods': per_method,
        'probabilistic_com_error_m': _mean(lists['com']),
        'truth_in_support_fraction': _mean(lists['in_support']),
        **(
            {
                'tracked_poses': {
                    'hz': tracking.hz,
                    'sigma_m': tracking.sigma_m,
                    'sigma_rad': tracking.sigma_rad,
                    'probabilistic_add_error_m': _mean(lists['tracked_add']),
                    'probabilistic_com_error_m': _mean(lists['tracked_com']),
                    'truth_in_support_fraction': _mean(lists['tracked_in']),
                    **_calibration_figures(lists, tracking),
                }
            }
            if lists['tracked_add']
            else {}
        ),
        **(
            {
                'no_com_spread': {
                    'models_mean': _mean(lists['alone_models']),
                    'probabilistic_add_error_m': _mean(lists['alone_add']),
                    'probabilistic_com_error_m': _mean(lists['alone_com']),
                    'truth_in_support_fraction': _mean(lists['alone_in']),
                    **{key: t.alone_balance[key] for key in STABLE_KEYS},
                }
            }
            if lists['alone_add']
            else {}
        ),
        **(
            {
                'no_push_moment': {
                    'probabilistic_add_error_m': _mean(lists['flat_add']),
                    'probabilistic_com_error_m': _mean(lists['flat_com']),
                    'tracked_add_error_m': _mean(lists['flat_tracked_add']),
                    'tracked_com_error_m': _mean(lists['flat_tracked_com']),
                    **{key: t.flat_balance[key] for key in STABLE_KEYS},
                }
            }
            if lists['flat_add']
            else {}
        ),
        **(
            {
                'over_the_edge': {
                    'pushes_mean': _mean(lists['edge_pushes']),
                    'probabilistic_add_error_m': _mean(lists['edge_add']),
                    'probabilistic_com_error_m': _mean(lists['edge_com']),
                    'truth_in_support_fraction': _mean(lists['edge_in']),
                }
            }
            if lists['edge_add']
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
    return result


def draw_losses(path: Path, curves: dict[str, list[tuple[list[int], list[float], float]]]) -> Path:
    """Draw each method's training loss against simulations to ``path`` (PNG): per method,
    runs of (simulations used, loss at each, best loss of all methods on that object), the
    best so far over the floor, averaged over the runs that have a loss by then."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    grid = np.unique(np.round(np.logspace(0, math.log10(DEFAULT_BUDGET), 40)).astype(int))
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
