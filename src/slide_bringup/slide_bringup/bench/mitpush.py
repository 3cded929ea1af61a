"""Real pushes from the MIT pushing dataset: loading, open-loop prediction, evaluation.

The data (``shared/data/mit-push``, see its README) are homogeneous steel objects pushed
on ABS by a point tip. Conventions, as established from the data: an object's pose is
the origin of its outline with yaw + pi/2; the tip is a disc of 4.70 mm radius; scores are
taken at the last time stamp all three streams share. The tip's tracking is offset from
the objects' by about 1.2 mm along the world's x (found on the train pushes: a pushing tip's
recorded gap to the outline is its radius plus the offset along the outline's normal), and
the offset is taken off the tip's path. Each push is replayed open loop from the tip's
path, starting from the object's first recorded pose, with:

- the planar physics core (:mod:`slide_core.physics`, kinematic fingertip mode), its
  object a grid of 1 cm cells over the outline with uniform density (each cell its covered
  share) and friction, the fingertip touching the real outline; the tip friction is fitted
  on train pushes, the support friction fixed (uniform support friction does not change
  quasi-static motion);
- the quasi-static ellipsoidal limit-surface model (:mod:`slide_core.physics.limit_surface`), its
  tip friction fitted on the train split;
- no motion at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
import contextlib
from dataclasses import dataclass, replace
from pathlib import Path
import re
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from slide_bringup.bench.pool import initializer, processes
from slide_core.errors import SlideInputError
from slide_core.geometry import Grid, polygon_coverage, rotation, wrap_angle
from slide_core.identification import fit_contact_offset
from slide_core.physics import FingertipPush, MlcpError, RigidModel, limit_surface, simulate

FloatArray = NDArray[np.float64]

TIP_RADIUS = 0.0047  # m
YAW_OFFSET = np.pi / 2
DT = 0.004  # s, the replay's time step
CELL = 0.01  # m, the replay's cell size
START_CLEARANCE = 1e-6
"""m between the tip and the object where a replay's start has them overlap. The data's
pushes start at contact (test_butter: gap median 0.08 mm, overlaps to 0.27 mm from the
tracking): the tip is moved out of the object, no further, or the push would be shortened
(0.5 mm of clearance had the core place the butter 0.06 mm worse)."""
MOVES_OUT = 20
"""Moves along the normal that :func:`clear_start` makes at most."""


@dataclass(frozen=True, eq=False)
class RealPush:
    """One recorded push on a common time base (step DT).

    Attributes:
        name: file name.
        shape: object shape name.
        t: (T,) seconds from the first common time stamp.
        X_WO: (T, 3) object pose (outline origin, yaw with the pi/2 offset applied).
        p_WT: (T, 2) tip centre.
    """

    name: str
    shape: str
    t: FloatArray
    X_WO: FloatArray
    p_WT: FloatArray


@dataclass(frozen=True, eq=False)
class Shape:
    """An object of the dataset: outline (M, 2) in its frame [m], mass [kg] and thickness
    [m] (its mesh's extent in z)."""

    name: str
    outline: FloatArray
    mass: float
    thickness: float


def load_shape(root: Path, name: str) -> Shape:
    outline = np.load(root / 'obj' / f'{name}_ext.npy')
    urdf = (root / 'obj' / f'{name}.urdf').read_text()
    # The dataset stores the mass in the object link's ixx (its README says so).
    section = urdf[urdf.index('link_object') :]
    m = re.search(r'ixx="([^"]+)"', section)
    if m is None:
        raise SlideInputError(f'{name}.urdf: no ixx (mass) in link_object')
    z = [
        float(line.split()[3])
        for line in (root / 'obj' / f'{name}.obj').read_text().splitlines()
        if line.startswith('v ')
    ]
    if not z:
        raise SlideInputError(f'{name}.obj: no vertices (the thickness comes from the mesh)')
    return Shape(name, np.asarray(outline, dtype=float), float(m.group(1)), max(z) - min(z))


def load_push(path: Path) -> RealPush:
    """Read one .h5 push and resample its tip and object streams onto one time base."""
    import h5py  # type: ignore[import-untyped]

    try:
        f = h5py.File(path, 'r')
    except OSError as exc:
        raise SlideInputError(f'{path.name}: not a readable HDF5 push ({exc})') from None
    with f:
        try:
            tip = np.asarray(f['tip_pose'], dtype=float)
            obj = np.asarray(f['object_pose'], dtype=float)
            ft = np.asarray(f['ft_wrench'], dtype=float)
        except KeyError as exc:
            raise SlideInputError(f'{path.name}: missing dataset {exc}') from None
    # Rows of (time, x, y, yaw, ...); the wrench's time stamps bound the common span.
    for name, a, columns in (('tip_pose', tip, 3), ('object_pose', obj, 4), ('ft_wrench', ft, 1)):
        if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < columns:
            raise SlideInputError(
                f'{path.name}: {name} has shape {a.shape}; expected rows of at least '
                f'{columns} columns (time first), two rows or more'
            )
    t0 = max(tip[0, 0], obj[0, 0], ft[0, 0])
    t1 = min(tip[-1, 0], obj[-1, 0], ft[-1, 0])
    if not t1 > t0:
        raise SlideInputError(f'{path.name}: the streams share no time span')
    t = np.arange(0.0, t1 - t0 + 1e-9, DT)
    tt = t + t0

    def resample(a: FloatArray, cols: Sequence[int]) -> FloatArray:
        return np.column_stack([np.interp(tt, a[:, 0], a[:, c]) for c in cols])

    yaw = np.interp(tt, obj[:, 0], np.unwrap(obj[:, 3])) + YAW_OFFSET
    X = np.column_stack((resample(obj, (1, 2)), yaw))
    shape = re.search(r'shape=([a-z0-9]+)', path.name)
    return RealPush(path.name, shape.group(1) if shape else '', t, X, resample(tip, (1, 2)))


def load_split(root: Path, split: str) -> list[RealPush]:
    files = sorted((root / 'abs' / split).glob('*.h5'))
    if not files:
        raise SlideInputError(f'no .h5 pushes in {root / "abs" / split}')
    return [load_push(f) for f in files]


TIP_REACH = 0.009
"""m: a tip centre this close to the outline while the object moves counts as touching it
(the tip's radius plus the tracking's wander, 1.6 mm by the data's README, with room)."""
PUSHED_SPEED = 0.01  # m/s: the object moves; below it, the tip may touch without pushing


def tip_offset_samples(shapes: dict[str, Shape], pushes: Sequence[RealPush]) -> FloatArray:
    """Rows (gap - TIP_RADIUS, n_W) (N, 3) [m, -] of every time step at which a tip pushes
    its object: the object moves, the tip's centre lies within TIP_REACH of the outline and
    moves into it. ``gap`` is the tip centre's signed distance to the outline, ``n_W`` the
    outline's outward normal at the closest point, in the world."""
    rows = []
    for push in pushes:
        outline = shapes[push.shape].outline
        v_WO = np.linalg.norm(np.gradient(push.X_WO[:, :2], DT, axis=0), axis=1)
        v_WT = np.gradient(push.p_WT, DT, axis=0)
        for k in np.nonzero(v_WO > PUSHED_SPEED)[0]:
            R = rotation(float(push.X_WO[k, 2]))
            _, gap, n_O = limit_surface.closest_on_outline(
                outline, R.T @ (push.p_WT[k] - push.X_WO[k, :2])
            )
            n_W = R @ n_O
            if gap < TIP_REACH and float(v_WT[k] @ n_W) < 0.0:
                rows.append((gap - TIP_RADIUS, *n_W))
    return np.array(rows, dtype=float).reshape(-1, 3)


def fit_tip_offset(shapes: dict[str, Shape], pushes: Sequence[RealPush]) -> FloatArray:
    """The tip tracking's offset from the objects' (2,) [m], in the world: the recorded tip
    centre less the true one, the same for every push (a calibration of the rig).

    While a tip pushes, its true centre lies TIP_RADIUS off the outline, so a recorded gap
    reads ``gap - TIP_RADIUS = n_W . offset`` plus the tracking's noise: the product's own
    check of a cell's calibration (:func:`slide_core.identification.fit_contact_offset`,
    robust least squares), here without a same-on-every-side term. The pushes must touch
    their objects from two directions at least, or the offset is not determined."""
    rows = tip_offset_samples(shapes, pushes)
    return fit_contact_offset(rows[:, 0], rows[:, 1:], bias=False, pushes=len(pushes)).p_offset_W


def calibrated(push: RealPush, offset: FloatArray) -> RealPush:
    """The push with its tip's recorded path less the tracking's offset (2,) [m]."""
    return replace(push, p_WT=push.p_WT - offset)


@dataclass(frozen=True, eq=False)
class CoreObject:
    """The physics core's model of a shape: a grid over the outline, uniform density; each
    cell carries the area of it the outline covers (the grid's coverage: mass and share of
    the support), and the fingertip touches the outline itself (``outline_O``, in the
    grid's object frame), or the cells' squares when it is None. ``push_height``: where
    the tip's force acts above the surface (its moment tips the pressure towards the push;
    0: not modelled)."""

    grid: Grid
    mass: FloatArray
    p_outline_O: FloatArray  # outline origin in the grid's object frame
    outline_O: FloatArray | None = None
    push_height: float = 0.0

    def model(self) -> RigidModel:
        return RigidModel.of(self.grid, outline=self.outline_O)


def core_object(
    shape: Shape,
    cell: float = CELL,
    fractional: bool = True,
    outline: bool = True,
    push_moment: bool = True,
) -> CoreObject:
    grid = Grid.from_polygon(shape.outline, cell)
    lo, hi = shape.outline.min(axis=0), shape.outline.max(axis=0)
    p_outline_O = -(lo + hi) / 2
    outline_O = shape.outline + p_outline_O
    if fractional:
        covered = grid.to_map(polygon_coverage(grid, outline_O), fill=0.0)
        grid = Grid(grid.cell_size, grid.occupancy, grid.heights, covered)
    mass = shape.mass * grid.area / grid.area.sum()
    # The tip (a 63 mm cylinder) covers the whole side: its force acts at mid-thickness.
    height = shape.thickness / 2 if push_moment else 0.0
    return CoreObject(grid, mass, p_outline_O, outline_O if outline else None, height)


def predict_core(
    obj: CoreObject, push: RealPush, mu_support: FloatArray, mu_tip: float
) -> FloatArray:
    """Final outline-origin poses (K, 3) for K support frictions, open loop."""
    X0 = push.X_WO[0]
    R0 = rotation(X0[2])
    # The grid frame sits at the outline's bounding box centre.
    X_grid0 = np.array([*(X0[:2] - R0 @ obj.p_outline_O), X0[2]])
    path = clear_start(obj, X_grid0, push.p_WT)
    tip = FingertipPush.create(path, TIP_RADIUS, mu_tip, DT)
    mu = np.asarray(mu_support, dtype=float).reshape(-1, 1) * np.ones((1, obj.grid.n))
    m = np.tile(obj.mass, (mu.shape[0], 1))
    X = simulate(
        obj.grid,
        m,
        mu,
        tip,
        X_grid0,
        outline=obj.outline_O,
        push_height=obj.push_height,
    ).X_WO[:, -1]
    R = rotation(X[:, 2])
    return np.column_stack((X[:, :2] + np.einsum('kij,j->ki', R, obj.p_outline_O), X[:, 2]))


def clear_start(obj: CoreObject, X_grid0: FloatArray, p_WT: FloatArray) -> FloatArray:
    """The tip path, moved away from the object where it (its real outline, or the grid's
    square cells, which reach past the outline by up to half a cell) would overlap the
    tip's start: along the normal there by the overlap plus START_CLEARANCE, again from
    where that lands while it still overlaps (beside a vertex of a curved outline the normal
    turns as the tip moves: one move left a tip 4 um inside the butter)."""
    R = rotation(X_grid0[2])
    model = obj.model()
    path = p_WT
    for _ in range(MOVES_OUT):
        p_O = R.T @ (path[0] - X_grid0[:2])
        _, n_B, signed = model.contact((p_O - model.p_OG)[None, :])
        gap = float(signed[0]) - TIP_RADIUS
        if gap >= START_CLEARANCE / 2:
            return path
        if float(signed[0]) > 1e-9 or obj.outline_O is not None:
            n_O = n_B[0]
        else:  # the tip's centre inside a cell: back along its travel
            travel = R.T @ (p_WT[-1] - p_WT[0])
            n_O = -travel / max(float(np.linalg.norm(travel)), 1e-12)
        path = np.asarray(path + (R @ n_O) * (START_CLEARANCE - gap), dtype=float)
    raise SlideInputError(
        f'the tip could not be moved out of the object at its start in {MOVES_OUT} moves '
        f"(still {-gap * 1000:.4f} mm in): check the push's poses"
    )


def errors(X_pred: FloatArray, X_true: FloatArray) -> tuple[float, float]:
    """Final position error [m] and absolute yaw error [rad]."""
    return (
        float(np.linalg.norm(X_pred[:2] - X_true[:2])),
        float(abs(wrap_angle(X_pred[2] - X_true[2]))),
    )


@dataclass(frozen=True)
class Fit:
    mu_support: float
    mu_tip: float
    train_position_error_m: float


def _core_errors(job: tuple[CoreObject, RealPush, FloatArray, float]) -> FloatArray | str:
    """Final position errors (K,) of one push replayed by the core with K support
    frictions, or why it could not be replayed (a worker's job: a module function)."""
    obj, push, mu_supports, mu_tip = job
    try:
        finals = predict_core(obj, push, mu_supports, mu_tip)
    except MlcpError as exc:
        return f'{push.name}: {exc}'
    return np.array([errors(x, push.X_WO[-1])[0] for x in finals])


def _limit_surface_errors(
    job: tuple[limit_surface.LimitSurfaceObject, RealPush, float],
) -> FloatArray:
    """Final position error (1,) of one push replayed by the limit surface."""
    obj, push, mu_tip = job
    X = limit_surface.simulate(obj, push.X_WO[0], push.p_WT, TIP_RADIUS, mu_tip)[-1]
    return np.array([errors(X, push.X_WO[-1])[0]])


Job = TypeVar('Job')


def _total(
    pool: Executor | None,
    fn: Callable[[Job], FloatArray | str],
    jobs: Sequence[Job],
    bound: float,
) -> FloatArray | str:
    """The sum over ``jobs`` of ``fn``'s non-negative errors (K,), or why there is none:
    a job that failed, or every entry's partial sum above ``bound`` (it cannot be the
    least; the jobs left are not run). Serial without a pool."""
    total: FloatArray | None = None
    results: Iterator[FloatArray | str]
    futures = []
    if pool is None:
        results = map(fn, jobs)
    else:
        futures = [pool.submit(fn, job) for job in jobs]
        results = (f.result() for f in as_completed(futures))
    try:
        for done, result in enumerate(results, start=1):
            if isinstance(result, str):
                return f'left out: {result}'
            total = result if total is None else total + result
            if float(total.min()) > bound:
                return f'above the best after {done} of {len(jobs)} pushes'
    finally:
        for f in futures:
            f.cancel()
    if total is None:
        raise SlideInputError('no pushes to fit on')
    return total


def fit_core(
    root: Path,
    train: list[RealPush],
    mu_tips: Sequence[float] = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4),
    mu_supports: Sequence[float] = (0.15, 0.25, 0.35),
    progress: Callable[[str], None] = lambda _: None,
    pool: Executor | None = None,
) -> Fit:
    """Grid search of the support and tip friction minimising the train position error
    (the support frictions run as one batch per tip friction). A tip friction under which
    some train push cannot be replayed (the contact problem does not settle) is not
    chosen: its error is unknown. A tip friction stops being replayed once its partial
    error passes the least total so far: the search finds the same minimum as the whole
    grid (the errors are non-negative), in less time."""
    objects = {s: core_object(load_shape(root, s)) for s in {p.shape for p in train}}
    supports = np.array(mu_supports, dtype=float)
    totals = np.full((len(mu_tips), len(mu_supports)), np.inf)
    for i, mu_tip in enumerate(mu_tips):
        jobs = [(objects[p.shape], p, supports, float(mu_tip)) for p in train]
        total = _total(pool, _core_errors, jobs, float(totals.min()))
        what = f'fit: tip friction {mu_tip:.3f} ({i + 1}/{len(mu_tips)})'
        if isinstance(total, str):
            progress(f'{what}: {total}')
            continue
        totals[i] = total
        progress(f'{what}: train error {total.min() / len(train) * 1000:.2f} mm')
    if not np.isfinite(totals).any():
        raise SlideInputError('no tip friction of the grid replays every train push')
    best_i, best_j = (int(v) for v in np.unravel_index(int(np.argmin(totals)), totals.shape))
    return Fit(
        float(mu_supports[best_j]),
        float(mu_tips[best_i]),
        float(totals[best_i, best_j] / len(train)),
    )


def fit_limit_surface(
    root: Path,
    train: list[RealPush],
    mu_tips: Sequence[float] = tuple(np.arange(0.05, 0.61, 0.025)),
    pool: Executor | None = None,
) -> tuple[float, float]:
    """Tip friction of the limit-surface model minimising the train position error
    (searched as :func:`fit_core` searches), and that error [m]."""
    objects = {
        s: limit_surface.LimitSurfaceObject.from_outline(load_shape(root, s).outline)
        for s in {p.shape for p in train}
    }
    best = (np.inf, 0.0)
    for mu_tip in mu_tips:
        jobs = [(objects[p.shape], p, float(mu_tip)) for p in train]
        total = _total(pool, _limit_surface_errors, jobs, best[0] * len(train))
        if not isinstance(total, str):
            best = min(best, (float(total[0]) / len(train), float(mu_tip)))
    return best[1], best[0]


def _test_row(
    job: tuple[CoreObject, limit_surface.LimitSurfaceObject, RealPush, Fit, float],
) -> tuple[float, ...]:
    """Position and yaw errors of one test push: core, limit surface, no motion."""
    core, ls, p, fit, mu_ls = job
    X_true = p.X_WO[-1]
    X_core = predict_core(core, p, np.array([fit.mu_support]), fit.mu_tip)[0]
    X_ls = limit_surface.simulate(ls, p.X_WO[0], p.p_WT, TIP_RADIUS, mu_ls)[-1]
    return (*errors(X_core, X_true), *errors(X_ls, X_true), *errors(p.X_WO[0], X_true))


def run(
    root: Path,
    fit_pushes: int | None = None,
    mu_tips: Sequence[float] = tuple(np.arange(0.05, 0.61, 0.025)),
    mu_support: float = 0.25,
    progress: Callable[[str], None] = lambda _: None,
    workers: int | None = None,
    calibrate_tip: bool = True,
) -> dict[str, object]:
    """The real-data benchmark: fit on the train split, predict every test_butter push.

    With ``calibrate_tip``, the tip tracking's offset from the objects' is found on the
    train pushes (:func:`fit_tip_offset`) and taken off every recorded tip path, train and
    test, for both models. The core's tip friction is chosen from ``mu_tips`` (the limit
    surface's grid) on every train push, or ``fit_pushes`` of them spread over the split;
    its support friction is fixed (uniform friction does not change quasi-static motion,
    only coasting). Pushes are replayed in ``workers`` processes (default: one per core;
    1: in this one).
    """
    if not (root / 'abs').is_dir():
        raise SlideInputError(f'{root}: not the mit-push data folder (no abs/ inside)')
    workers = processes(workers)
    train = load_split(root, 'train')
    test = load_split(root, 'test_butter')
    offset = np.zeros(2)
    if calibrate_tip:
        offset = fit_tip_offset({s: load_shape(root, s) for s in {p.shape for p in train}}, train)
        progress(
            f'tip tracking offset ({offset[0] * 1000:+.2f}, {offset[1] * 1000:+.2f}) mm, '
            'from the train pushes; taken off every tip path'
        )
        train = [calibrated(p, offset) for p in train]
        test = [calibrated(p, offset) for p in test]
    progress(
        f'{len(train)} train and {len(test)} test pushes; replays in '
        f'{"1 process" if workers == 1 else f"{workers} processes"}'
    )
    replays: contextlib.AbstractContextManager[Executor | None] = (
        ProcessPoolExecutor(max_workers=workers, initializer=initializer(workers))
        if workers > 1
        else contextlib.nullcontext()
    )
    with replays as pool:
        mu_ls, ls_train = fit_limit_surface(root, train, pool=pool)
        progress(f'limit surface: tip friction {mu_ls:.3f} (train error {ls_train * 1000:.1f} mm)')
        count = len(train) if fit_pushes is None else max(1, min(fit_pushes, len(train)))
        subset = train[:: max(1, len(train) // count)][:count]
        fit = fit_core(root, subset, mu_tips, (mu_support,), progress, pool)
        progress(
            f'core: tip friction {fit.mu_tip} '
            f'(train error {fit.train_position_error_m * 1000:.1f} mm)'
        )
        butter = load_shape(root, 'butter')
        core = core_object(butter)
        ls = limit_surface.LimitSurfaceObject.from_outline(butter.outline)
        jobs = [(core, ls, p, fit, mu_ls) for p in test]
        rows = []
        for i, row in enumerate(
            map(_test_row, jobs) if pool is None else pool.map(_test_row, jobs)
        ):
            rows.append(row)
            progress(f'test {i + 1}/{len(test)}: core {row[0] * 1000:.1f} mm')
    e = np.asarray(rows)
    return {
        'test_pushes': len(test),
        'test_position_error_m': float(e[:, 0].mean()),
        'test_position_error_median_m': float(np.median(e[:, 0])),
        'test_yaw_error_rad': float(e[:, 1].mean()),
        'limit_surface_position_error_m': float(e[:, 2].mean()),
        'limit_surface_yaw_error_rad': float(e[:, 3].mean()),
        'no_motion_position_error_m': float(e[:, 4].mean()),
        'no_motion_yaw_error_rad': float(e[:, 5].mean()),
        'core_tip_friction': fit.mu_tip,
        'core_support_friction': fit.mu_support,
        'core_fit_pushes': len(subset),
        'limit_surface_tip_friction': mu_ls,
        'tip_tracking_offset_m': [float(v) for v in offset],
        'processes': workers,
    }
