"""Balance at the edge: margins of the belief's centres of mass inside the support
polygon, the probability that the object stays, and the poses the object may pass through.

The test is the rigid-body one whatever support model the belief's maps were identified
under: a rigid object at rest on the table's edge stays exactly when its centre of mass is
over the part of the footprint the table carries, which is where the rigid support model
(:mod:`slide_core.physics.support`) can balance it with loads that press, not pull. Under
that model the mass map enters only through the centre of mass, which is what this uses.

While a push moves it, the object is not at rest: the fingertip's force F acts at a height
above the table, which friction, in the table plane, cannot balance, and it moves the
centre of pressure towards the push by that height times ``|F| / (M g)``
(:mod:`slide_core.physics.support`); sliding, ``|F|`` is at most the friction it
overcomes, ``sum_i mu_i N_i``. Which height: the vertical fingertip touches the side along a
line, and as soon as the object starts to tip over the edge the top of the pushed side
moves away from the fingertip, so the force drops to the fingertip's lower end, its
clearance above the table. A model's *lean* is therefore that clearance times its
load-weighted mean friction at rest (:func:`push_leans`; the mass drops out), not the
force height the identification uses for the pressure while nothing tips (17 mm here).
Measured on the twin, a 16 x 8 cm box 6 cm tall with friction 0.9 pushed 3 cm straight
over the edge, with the fingertip's bottom raised to 12 mm (lean 10.8 mm; 24 mm at the
force height) and frictionless: it fell when the push left its centre of mass 2 mm inside,
tilted 7 degrees and settled back at 6 mm, and stayed level (0.3 degrees) at 10 to 18 mm.
With the fingertip's friction (0.3) nothing tipped even at 2 mm: friction on the pushed side
holds it down. With this workcell's 2 mm clearance the lean is at most 2 mm. The poses a push
passes through and ends at, goals included, need each model's centre of mass
``balance_margin`` plus its lean inside the support (:func:`needed_margins`), whichever way
the push goes; a pose's stay probability at rest (:func:`stay_probability`) needs the
margin alone.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any
import weakref

import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import (
    FloatArray,
    Grid,
    check_pose,
    rotation,
    to_world,
)
from slide_core.model import Belief, Fingertip
from slide_core.physics import Support
from slide_core.planning import kernels
from slide_core.planning.config import PlannerConfig

_OUTLINES: weakref.WeakKeyDictionary[Grid, tuple[FloatArray, NDArray[np.int64]]] = (
    weakref.WeakKeyDictionary()
)
_COMS: weakref.WeakKeyDictionary[Belief, FloatArray] = weakref.WeakKeyDictionary()
_LEANS: weakref.WeakKeyDictionary[Belief, dict[Fingertip, FloatArray]] = (
    weakref.WeakKeyDictionary()
)


def outline_of(grid: Grid) -> tuple[FloatArray, NDArray[np.int64]]:
    """The grid's outline corners and sides (:func:`kernels.outline`), computed once per
    grid: an episode's pushes, paths and goals all reuse it."""
    found = _OUTLINES.get(grid)
    if found is None:
        found = _OUTLINES[grid] = kernels.outline(grid)
    return found


def _com(belief: Belief) -> FloatArray:
    found = _COMS.get(belief)
    if found is None:
        found = _COMS[belief] = np.ascontiguousarray(belief.com(), dtype=float)
    return found


def push_leans(belief: Belief, fingertip: Fingertip) -> FloatArray:
    """(K,) the most [m] a push by ``fingertip`` moves each model's centre of pressure
    towards the edge it tips over: the fingertip's clearance above the table (no more than
    the object is tall) times the model's mean friction weighted by its loads at rest under
    its support model (see the module docstring). Zero on a flat grid. Cached per belief."""
    by_tip = _LEANS.setdefault(belief, {})
    found = by_tip.get(fingertip)
    if found is None:
        grid = belief.grid
        h = min(max(fingertip.clearance, 0.0), float(grid.heights[grid.occupancy].max()))
        loads = Support.of(grid, belief.support).loads(belief.mass)
        mu_bar = (loads * belief.friction).sum(axis=1) / loads.sum(axis=1)
        found = by_tip[fingertip] = np.ascontiguousarray(h * mu_bar, dtype=float)
    return found


def needed_margins(belief: Belief, config: PlannerConfig) -> FloatArray:
    """(K,) margin [m] each model's centre of mass needs inside the support at a pose a
    push passes through or ends at: ``balance_margin`` plus the model's
    :func:`push_leans`."""
    return config.balance_margin + push_leans(belief, config.fingertip)


def com_margins_of(belief: Belief, X_WO: Any) -> FloatArray:
    """(K,) margins of every model at X_WO (see :func:`slide_core.geometry.com_margins`;
    compiled, :mod:`slide_core.planning.kernels`)."""
    X = check_pose(X_WO, 'X_WO')
    corners, sides = outline_of(belief.grid)
    out = np.empty(belief.K)
    kernels.support_margins(corners, sides, X[0], X[1], X[2], _com(belief), out)
    return out


def stay_probability(belief: Belief, X_WO: Any, margin: float | FloatArray = 0.0) -> float:
    """Probability that the object stays at X_WO: the weight of the belief whose centre
    of mass is at least ``margin`` metres inside the support polygon (one number, or (K,)
    one per model: :func:`needed_margins` while pushed)."""
    return staying_weight(belief, com_margins_of(belief, X_WO), margin)


def staying_weight(belief: Belief, margins: FloatArray, margin: float | FloatArray) -> float:
    """The weight of the belief whose margins (K,) [m] are at least ``margin`` (one number,
    or (K,) one per model), at most 1 (weights that sum to 1 add up to 1.0000000000000002 at
    times)."""
    return min(1.0, float(belief.weight @ (margins >= margin)))


WEIGHT_TOLERANCE = 1e-12
"""Belief weight that decides nothing: the conditions 'at least 1 - epsilon of the belief'
(and 'at most epsilon falls') allow this much (sums of weights round), and the quantiles
skip models this light.
With epsilon 0 (every model: a staging pose's ``staging_epsilon`` set to 0), a model of
weight 1e-55 had decided the quantile while the weight sums ignored it, and the goal search
said no pose was in the workspace."""


def least_weight(config: PlannerConfig) -> float:
    """The belief weight that 'at least 1 - epsilon of the belief' asks for: what a
    condition's weight sum is compared with (``>=``), less :data:`WEIGHT_TOLERANCE`."""
    return 1.0 - config.epsilon - WEIGHT_TOLERANCE


def margin_quantile(belief: Belief, margins: FloatArray, epsilon: float) -> float:
    """The margin [m] that belief of probability 1 - epsilon at least have (models of
    less weight than ``WEIGHT_TOLERANCE`` in all below it left out)."""
    order = np.argsort(margins)
    cum = np.cumsum(belief.weight[order])
    k = int(np.searchsorted(cum, epsilon + WEIGHT_TOLERANCE, side='right'))
    return float(margins[order][min(k, len(order) - 1)])


def in_workspace(grid: Grid, X_WO: Any, config: PlannerConfig) -> bool:
    """True when no cell leaves the table except over the free edge and none overlaps an
    obstacle (:func:`cells_overlap_box`)."""
    return not workspace_problem(grid, X_WO, config)


def workspace_problem(grid: Grid, X_WO: Any, config: PlannerConfig) -> str:
    """Why X_WO is not in the workspace (:func:`in_workspace`), in words: the table's
    side it would leave past, or the obstacle it would overlap; '' when it is."""
    X = check_pose(X_WO, 'X_WO')
    t = config.table
    corners, _ = outline_of(grid)  # the footprint's extremes are outline corners
    if not kernels.on_table(corners, X[0], X[1], X[2], t.depth, t.width / 2):
        p = to_world(X, corners)
        sides = [
            name
            for name, out in (
                (f'its far side (x > {t.depth:g} m)', p[:, 0].max() > t.depth),
                (f'a side (|y| > {t.width / 2:g} m)', np.abs(p[:, 1]).max() > t.width / 2),
            )
            if out
        ]
        return f'the object would reach off the table past {" and ".join(sides)}'
    if not config.obstacles:
        return ''
    p_WC = to_world(X, grid.p_OC)
    for k, ob in enumerate(config.obstacles):
        if cells_overlap_box(p_WC, float(X[2]), grid.cell_size, ob.centre, ob.half_size):
            return (
                f'the object would overlap obstacle {k} (centre '
                f'{ob.centre[0]:g}, {ob.centre[1]:g} m, half size '
                f'{ob.half_size[0]:g} x {ob.half_size[1]:g} m)'
            )
    return ''


def cells_overlap_box(
    p_WC: FloatArray, yaw: float, cell_size: float, centre: Any, half_size: Any
) -> bool:
    """Whether any cell square (centres p_WC (n, 2) [m], sides ``cell_size`` along the
    object's axes at ``yaw``) overlaps or touches the box of ``centre`` and ``half_size``
    [m] along the table's axes (:func:`rectangles_overlap_box`). (Cell corners and centres
    tested against the box, and the box's corners against the cells, missed a 4 mm rail
    crossing the object between them: goals lay across it.)"""
    h = cell_size / 2
    return rectangles_overlap_box(p_WC, yaw, (h, h), centre, half_size)


def rectangles_overlap_box(
    p_WR: Any, yaw: float, rectangle_half_size: Any, centre: Any, half_size: Any
) -> bool:
    """Whether any rectangle (centres p_WR (n, 2) [m], half sides ``rectangle_half_size``
    (2,) [m] along axes turned by ``yaw``) overlaps or touches the box of ``centre`` and
    ``half_size`` [m] along the table's axes: separating-axis test on both frames' axes,
    exact for rectangles."""
    c, s_ = abs(math.cos(yaw)), abs(math.sin(yaw))
    rx, ry = float(rectangle_half_size[0]), float(rectangle_half_size[1])
    hx, hy = float(half_size[0]), float(half_size[1])
    d_W = np.asarray(centre, dtype=float)[None] - np.atleast_2d(np.asarray(p_WR, dtype=float))
    d_R = d_W @ rotation(yaw)  # the offsets along the rectangles' axes
    tol = 1e-12
    apart = (
        (np.abs(d_W[:, 0]) > hx + rx * c + ry * s_ + tol)
        | (np.abs(d_W[:, 1]) > hy + rx * s_ + ry * c + tol)
        | (np.abs(d_R[:, 0]) > rx + hx * c + hy * s_ + tol)
        | (np.abs(d_R[:, 1]) > ry + hx * s_ + hy * c + tol)
    )
    return not bool(apart.all())


def is_valid(belief: Belief, X_WO: Any, config: PlannerConfig) -> bool:
    """A pose a push may move the object through or to: on the table, clear of obstacles,
    balanced while pushed with probability at least 1 - epsilon (each model with
    :func:`needed_margins`)."""
    return in_workspace(belief.grid, X_WO, config) and stay_probability(
        belief, X_WO, needed_margins(belief, config)
    ) >= least_weight(config)


def fall_probability(belief: Belief, X_K: FloatArray, config: PlannerConfig) -> float:
    """Weight of the belief that would not stay balanced while pushed (each model with
    :func:`needed_margins`) at their own predicted poses X_K (K, 3)."""
    return float(belief.weight @ falls(belief, X_K, config))


def falls(belief: Belief, X_K: FloatArray, config: PlannerConfig) -> NDArray[np.bool_]:
    """(K,) which models would not stay balanced while pushed at their own predicted poses
    X_K (K, 3) (:func:`fall_probability`)."""
    com = _com(belief)
    need = needed_margins(belief, config)
    corners, sides = outline_of(belief.grid)
    out = np.empty(1)
    fell = np.zeros(belief.K, dtype=bool)
    for k in range(belief.K):
        X = X_K[k]
        kernels.support_margins(
            corners, sides, float(X[0]), float(X[1]), float(X[2]), com[k : k + 1], out
        )
        fell[k] = out[0] < need[k]
    return fell


YAW_BINS = 720
"""Yaw bins of the footprint's extents (:func:`extents_by_yaw`): 0.5 degree each."""


def extents_by_yaw(grid: Grid) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Per yaw bin of [-pi, pi) (YAW_BINS of them), bounds on the footprint's extent
    relative to the object frame's origin that hold for every yaw in the bin: the least
    and largest x of any corner (lower bounds of both), their upper bounds, and the
    largest |y|'s upper bound; (YAW_BINS,) each, [m]. Each corner's coordinates change
    with the yaw at most at its distance from the origin, so the values at a bin's centre
    widened by that distance times half the bin hold across it. Cached per grid."""
    found = _EXTENTS.get(grid)
    if found is not None:
        return found
    corners, _ = outline_of(grid)
    width = 2.0 * np.pi / YAW_BINS
    centres = -np.pi + (np.arange(YAW_BINS) + 0.5) * width
    c, s = np.cos(centres)[:, None], np.sin(centres)[:, None]
    x = c * corners[:, 0] - s * corners[:, 1]  # (bins, U)
    y = s * corners[:, 0] + c * corners[:, 1]
    slack = float(np.linalg.norm(corners, axis=1).max()) * width / 2 + 1e-12
    found = (
        x.min(axis=1) - slack,
        x.max(axis=1) - slack,
        x.max(axis=1) + slack,
        np.abs(y).max(axis=1) + slack,
    )
    _EXTENTS[grid] = found
    return found


_EXTENTS: weakref.WeakKeyDictionary[
    Grid, tuple[FloatArray, FloatArray, FloatArray, FloatArray]
] = weakref.WeakKeyDictionary()


def motion_validity(
    belief: Belief, config: PlannerConfig
) -> Callable[[float, float, float, float, float, float, int], bool] | None:
    """The sampling planner's motion check as one compiled call per motion
    (:func:`kernels.motion_valid`: the end pose and ``nd - 1`` poses between, OMPL's
    discrete check), or None with obstacles (then OMPL checks pose by pose)."""
    if config.obstacles:
        return None
    corners, sides = outline_of(belief.grid)
    com = _com(belief)
    weight = np.ascontiguousarray(belief.weight, dtype=float)
    depth, half_width = config.table.depth, config.table.width / 2
    threshold = least_weight(config)
    need = np.ascontiguousarray(needed_margins(belief, config))
    valid = kernels.motion_valid

    def check(x1: float, y1: float, t1: float, x2: float, y2: float, t2: float, nd: int) -> bool:
        return bool(
            valid(
                corners,
                sides,
                x1,
                y1,
                t1,
                x2,
                y2,
                t2,
                nd,
                depth,
                half_width,
                com,
                weight,
                need,
                threshold,
            )  # fmt: skip
        )

    return check


def validity(belief: Belief, config: PlannerConfig) -> Callable[[float, float, float], bool]:
    """:func:`is_valid` as a fast closure for the sampling planner (called ~1e4 times per
    path). A pose whose yaw bin's extents (:func:`extents_by_yaw`) put the footprint wholly
    on the table, or certainly past its far side or a side, is decided in Python without
    further work; the others (near the edge or a border) take one compiled call
    (:func:`kernels.pose_valid`). Both give exactly :func:`is_valid`'s answer."""
    grid = belief.grid
    corners, sides = outline_of(grid)
    com = _com(belief)
    weight = np.ascontiguousarray(belief.weight, dtype=float)
    depth, half_width = config.table.depth, config.table.width / 2
    threshold = least_weight(config)
    need = np.ascontiguousarray(needed_margins(belief, config))
    obstacles = bool(config.obstacles)
    valid = kernels.pose_valid
    x_min_lo, x_max_lo, x_max_hi, y_abs_hi = (a.tolist() for a in extents_by_yaw(grid))
    scale = YAW_BINS / (2.0 * math.pi)
    bins = YAW_BINS

    def check(x: float, y: float, theta: float) -> bool:
        if obstacles and not in_workspace(grid, np.array([x, y, theta]), config):
            return False
        if -math.pi <= theta < math.pi:
            k = min(int((theta + math.pi) * scale), bins - 1)
            if x + x_max_lo[k] > depth:
                return False  # past the far side whatever the yaw in the bin
            if (
                x + x_min_lo[k] >= 0.0
                and x + x_max_hi[k] <= depth
                and abs(y) + y_abs_hi[k] <= half_width
            ):
                return True  # wholly on the table: nothing can tip
        return bool(
            valid(corners, sides, x, y, theta, depth, half_width, com, weight, need, threshold)
        )

    return check
