"""Grasps of the overhang with a parallel gripper approaching across the edge, and how
much of what the pads can hold the object's weight asks of them.

Holding the weight (:func:`hold_ratios`). Lifted by its overhang, the object hangs from the
pads. A parallel gripper's fingers are coupled and close with force F each, so the upper
pad presses down with N_t = F - W/2 and the lower carries N_b = F + W/2 (N_t + N_b = 2F;
W > 2F cannot be held). The upper pad presses only the tallest part under it (within
``PAD_REACH``), the lower one all it covers (the object's underside is flat on the table).
Along the approach, with the upper pad's resultant at s_t and the lower one's at s_b, the
weight at s_w: force and moment balance give N_t (s_b - s_t) = W (s_w - s_b), which
contact points exist for while W |L| <= F g, g the span from the outermost point the upper
pad presses to the innermost the lower one does, L the lever from the middle H of that span
to the centre of mass (for pads pressing all they hold, g is the grip). Across the approach
the same holds with the pads' width for g. The hold ratio W |L_along| / (F g) +
W |L_across| / (F g_across) is the part of that the weight uses. Rigid pads could take
each axis to 1 at once (their pressure's centre in a corner of the contact), but pads are
compliant: an elastic pad's pressure stays positive only while its centre lies in the
contact's kern, which for a rectangle is the rhombus |e_along| / (g / 6) + |e_across| /
(g_across / 6) <= 1, so the pads begin to open where the sum of the two ratios reaches a
third, and the object droops in them from there; the two moments add.

The twin's pads are stiff, nearly rigid: a bar held at its end hangs level up to 0.99
along and turns out at 1.19; a 2 kg block 14 x 10 x 5 cm held 5.5 cm out hangs level at
0.35 along and 0.63 across (0.98 summed), and a 4 kg one at 0.70 and 0.95 (1.65); at 0.70
and 1.26 (the pads reaching 5 mm past its side) they slip and do not lift it. (These are
with the twin's hand welded to the arm's set point. Moved as a mocap body, the hand had no
velocity for MuJoCo's contact solver: its pads chattered while they lifted, the 2 kg block
turned out at 0.83 summed and a hammer at 0.21. That 0.83 was taken for the twin's limit
and the reason to sum the two ratios; it was the artefact. The sum stands on the kern
alone.) The goal search refuses goals whose ratio exceeds ``PlannerConfig.hold_max`` (0.5:
a safety factor of 2 for rigid pads, 2 to 3 for the twin's; compliant pads droop a little
from a third) for more than epsilon of the belief and prefers the smaller ratio
below that (``PlannerConfig.hold_weight``): of two overhangs that both balance, the one
nearer the centre of mass is held more surely.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import (
    FloatArray,
    Grid,
    boundary_rings,
    boundary_segments,
    cells_under,
    check_pose,
    covered,
    rotation,
    tallest_under,
    to_world,
)
from slide_core.model import Belief, Gripper, Waypoint, check_position
from slide_core.physics import GRAVITY


@dataclass(frozen=True)
class Grasp:
    """A grasp of the overhang: the gripper comes along ``yaw`` (0: along +x, towards the
    table) level with the object's mid-height; its pads' front end E is at ``p_WE``.

    Attributes:
        p_WE: (2,) pads' front end, table frame [m]; z: mid-height of the held part [m].
        yaw: approach direction [rad]; grip: object length between the pads [m];
        width: how wide [m] the stretch of edge is along which a grasp would hold.
        span, span_across: the pads' levers against the weight's moment [m], along the
            approach and across it: from the outermost point the upper pad touches (the
            tallest part under it) to the innermost the lower pad touches, and the same
            across the pads' width (0: the grip and the pad width, the pads touching all
            they cover); hold_back: how far [m] behind E along the approach the middle of
            ``span`` lies (0: half the grip). :func:`hold_ratios` reads them.
    """

    p_WE: FloatArray
    z: float
    yaw: float
    grip: float
    width: float = 0.0
    span: float = 0.0
    span_across: float = 0.0
    hold_back: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            'p_WE': [float(v) for v in self.p_WE],
            'z': self.z,
            'yaw': self.yaw,
            'grip_m': self.grip,
            'graspable_width_m': self.width,
            'span_m': self.span,
            'span_across_m': self.span_across,
        }


_LINE_STEP = 0.001  # m between samples along the pads
BAND_STEP_MIN = 0.001
BAND_STEP_MAX = 0.005
MAX_BANDS = 100
"""The bands' centres lie every BAND_STEP_MIN to BAND_STEP_MAX [m] across the edge, as
finely as MAX_BANDS bands over the object's width allow. At 5 mm everywhere a narrow part
(a handle 2.2 cm wide under 18 mm of pad lines leaves a window of a few mm) held at some
yaws and not at a tenth of a degree beside them, as the lattice fell in its window or not:
the goal search found goals only the exact yaw made graspable, and the closed loop circled
one for its whole push budget. Every millimetre for every object took a 95 cm square's goal
search from 16 to 41-49 s."""
_ROBUST_SHIFT = 0.01  # m: a band is robust when the bands this far either side hold too
PAD_REACH = 0.003
"""How much lower [m] than the tallest part under the upper pad a part may be and still be
pressed by it: a rubber pad's give and the camera's height noise."""


def too_tall_to_grasp(grid: Grid, gripper: Gripper) -> str | None:
    """Why ``gripper`` can hold no part of the object ``grid`` whatever its maps and pose
    (its tallest cell does not fit in the open gripper less ``height_margin`` above and
    below), or None when it fits. Known from the perceived grid alone, before any push."""
    height = float(grid.heights[grid.occupancy].max())
    room = gripper.max_opening - 2 * gripper.height_margin
    if height <= room:
        return None
    return (
        f'the object is {height * 100:.1f} cm tall and the gripper takes '
        f'{room * 100:.1f} cm (its opening less {gripper.height_margin * 100:.1f} cm of room '
        'above and below)'
    )


MAX_APPROACH_YAW = math.radians(15.0)
"""How far [rad] from square to the table's edge a grasp may come in (:func:`grasp_here`)."""


def square_approach(X_WO: Any) -> float:
    """The approach yaw [rad] square to the sides of the object's cells at X_WO: its yaw
    reduced to [-pi/4, pi/4)."""
    theta = float(check_pose(X_WO, 'X_WO')[2])
    return float((theta + math.pi / 4) % (math.pi / 2) - math.pi / 4)


def grasp_here(
    grid: Grid, X_WO: Any, gripper: Gripper, com_O: FloatArray | None = None
) -> Grasp | None:
    """The grasp at a pose the object was pushed to: coming in square to the edge (yaw 0,
    as goals are planned), else square to the object's sides when that approach lies
    within ``MAX_APPROACH_YAW`` (:func:`square_approach`). The pads are as deep as the grip
    they must hold, so across the edge a grip needs the object's outer side square to
    them: a goal whose side was a degree off square held only at its exact yaw, and the
    closed loop, landing 0.3 degrees from it, circled it until it stalled and found no
    grasp. Come in square to the side, the same overhang holds whatever that degree."""
    grasp = grasp_at(grid, X_WO, gripper, com_O)
    if grasp is not None:
        return grasp
    yaw = square_approach(X_WO)
    if not 1e-9 < abs(yaw) <= MAX_APPROACH_YAW:
        return None
    return grasp_at(grid, X_WO, gripper, com_O, yaw)


def grasp_at(
    grid: Grid,
    X_WO: Any,
    gripper: Gripper,
    com_O: FloatArray | None = None,
    yaw: float = 0.0,
) -> Grasp | None:
    """The grasp of the overhang at X_WO that holds the weight most surely, or None.

    The gripper comes in along ``yaw`` [rad] (0: along +x, square to the edge; at most
    ``MAX_APPROACH_YAW`` either way): the search runs in the frame A of that approach, and
    the pads' front corners stay ``clearance`` before the edge. Bands of the pads' width
    across the approach are tried every 1 to 5 mm (``MAX_BANDS``).
    In each, the pads reach as far in as the clearance to the edge allows, or less when
    the object sticks out further than the pads are deep (the palm must not touch it). The
    grip of a band is the object length under the pads along three lines across their
    width (both sides and the middle), the shortest of the three: a corner that only the
    middle of a pad touches does not count as held. Bands holding at least ``min_grip``
    qualify; of those whose neighbours 1 cm either side qualify too (if any), the one
    whose levers hold the centre of mass ``com_O`` (object frame) best is taken: the least
    of the weight's moment over what the pads resist along and across the approach
    (module docstring; the weight itself does not change the order), or without
    ``com_O`` the one nearest the footprint's middle.
    """
    X_W = check_pose(X_WO, 'X_WO')
    if not (math.isfinite(yaw) and abs(yaw) <= MAX_APPROACH_YAW + 1e-12):
        raise ValueError(
            f'an approach yaw of {yaw} rad: grasps come in at most {MAX_APPROACH_YAW:.3f} rad '
            'from square to the edge'
        )
    if too_tall_to_grasp(grid, gripper):
        return None
    c_yaw, s_yaw = math.cos(yaw), math.sin(yaw)
    # The object in the approach's frame A (the table frame turned by yaw): from here on
    # X, corners, samples and lines are in A; p_WE turns back at the end.
    R_WA = rotation(yaw)
    X = np.array([*(R_WA.T @ X_W[:2]), X_W[2] - yaw])
    corners = to_world(X, boundary_rings(grid).reshape(-1, 2))
    half_w = gripper.finger_width / 2
    room = float(np.ptp(corners[:, 1])) - 2 * half_w  # the span the centres may take
    if room < -1e-9:
        return None
    # The bands' lines lie on one lattice across the edge, every ``step``: band b's lines
    # (at -0.9, 0 and 0.9 of the half width) are lattice lines b, b + k and b + 2k, so
    # each line is sampled once for the three bands it belongs to.
    reach = 0.9 * half_w
    wanted = max(BAND_STEP_MIN, room / MAX_BANDS)
    k_off = max(math.ceil(reach / BAND_STEP_MAX - 1e-9), math.floor(reach / wanted + 1e-9), 1)
    step = reach / k_off
    y0 = corners[:, 1].min() + half_w - reach
    n_bands = math.floor(max(room, 0.0) / step + 1e-9) + 1
    ys = y0 + step * np.arange(n_bands + 2 * k_off)  # (L,) the lattice's lines
    line_of = np.arange(n_bands)[:, None] + k_off * np.arange(3)[None, :]  # (B, 3)
    centres = ys[line_of[:, 1]]
    lines_y = ys[line_of]  # (B, 3)
    # (B,) how far along the approach each band's pads may reach: their front corners
    # (front, centre +- half_w) in A lie at x_W = c front - s y in the table frame.
    front_max = (-gripper.clearance + s_yaw * centres - abs(s_yaw) * half_w) / c_yaw
    if corners[:, 0].min() >= front_max.max():
        return None
    xs = np.arange(corners[:, 0].min(), front_max.max() + 1e-9, _LINE_STEP)
    if len(xs) <= FULL_SAMPLING_MAX:  # a short overhang: every sample at once is cheapest
        line_pts = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None]), axis=-1)
        cov_all: NDArray[np.bool_] = np.asarray(covered(grid, X, line_pts), dtype=bool)[
            line_of
        ]  # (B, 3, Nx)
        pts = np.stack(np.broadcast_arrays(xs[None, None, :], lines_y[..., None]), axis=-1)
        covered_x: NDArray[np.bool_] = np.any(cov_all, axis=1)  # (B, Nx)
        first_i = np.where(np.any(covered_x, axis=1), np.argmax(covered_x, axis=1), -1)
    else:
        first_line = _first_covered(grid, X, xs, ys[:, None])  # (L,)
        first_line = np.where(first_line >= 0, first_line, len(xs))[line_of].min(axis=1)
        first_i = np.where(first_line < len(xs), first_line, -1)
    # Per band: the pads reach from the first covered sample along x (any of its lines).
    has: NDArray[np.bool_] = first_i >= 0
    first = xs[np.maximum(first_i, 0)]
    fronts = np.where(has, np.minimum(front_max, first + gripper.finger_depth), 0.0)
    pads = (xs[None, :] >= fronts[:, None] - gripper.finger_depth - 1e-9) & (
        xs[None, :] <= fronts[:, None] + 1e-9
    )
    pads &= has[:, None]
    if len(xs) <= FULL_SAMPLING_MAX:
        valid = pads
        cov = cov_all & pads[:, None, :]
    else:  # only the samples between the pads matter from here: a window of xs per band
        lo = np.argmax(pads, axis=1)
        count = pads.sum(axis=1)
        k = np.arange(max(int(count.max()), 1))
        valid = k[None, :] < count[:, None]
        xs_win = xs[np.minimum(lo[:, None] + k[None, :], len(xs) - 1)]  # (B, Nw)
        pts = np.stack(np.broadcast_arrays(xs_win[:, None, :], lines_y[..., None]), axis=-1)
        cov = _window_cover(grid, X, xs, ys, line_of, lo, count) & valid[:, None, :]
    held_samples = cov.sum(axis=2).min(axis=1)  # (B,): samples between the pads, per line
    grips = np.where(has, held_samples * _LINE_STEP, 0.0)
    ok = grips >= gripper.min_grip
    if not ok.any():
        return None
    # Prefer bands whose neighbours 1 cm either side hold too (tolerant of pose errors).
    shift = max(round(_ROBUST_SHIFT / step), 1)
    robust = ok & np.roll(ok, shift) & np.roll(ok, -shift)
    robust[:shift] = robust[-shift:] = False
    pick = robust if robust.any() else ok
    span, across, back = _levers(grid, X, pts, cov, fronts, half_w)
    if com_O is None:
        cost = np.abs(centres - float(corners[:, 1].mean()))
    else:
        p_WC = to_world(X, com_O)
        with np.errstate(divide='ignore', invalid='ignore'):
            cost = np.maximum(
                np.abs(p_WC[0] - (fronts - back)) / span, np.abs(p_WC[1] - centres) / across
            )
    i = int(np.argmin(np.where(pick & np.isfinite(cost), cost, np.inf)))
    held = cov[i][:, valid[i]].any(axis=0)
    z = tallest_under(grid, X, pts[i][:, valid[i]][:, held]) / 2
    return Grasp(
        R_WA @ np.array([fronts[i], float(centres[i])]),
        z,
        float(yaw),
        float(grips[i]),
        float(ok.sum() * step),
        float(span[i]),
        float(across[i]),
        float(back[i]),
    )


FULL_SAMPLING_MAX = 150
"""Up to this many 1 mm samples along x (15 cm of overhang past the clearance) a band's
lines are sampled all at once; beyond, from where they meet the object
(:func:`_first_covered`) and then only between the pads. Measured per grasp: the same
time near 13 cm (hammer, book, spray gun, a 60 x 40 cm tray; 0.5 to 1.6 ms), the full
sampling 1.5 to 2x faster at 5 cm, the windowed 3 to 5x at 30 cm. Goal searches that find
no goal (the whole lattice tried): a 60 x 40 cm tray of 1.2 kg 19.2 -> 8.9 s, a 95 cm
square of 3.6 kg 42 -> 11 s, of 0.18 kg 171 -> 49 s (the planner action allows 120 s)."""
_FIRST_CHUNK = 8
"""Samples along x per line looked at first, from where a band's lines first cross the
footprint's boundary; the chunks double from there."""


def _first_covered(
    grid: Grid, X: FloatArray, xs: FloatArray, lines_y: FloatArray
) -> NDArray[np.int64]:
    """(B,) the index into ``xs`` of the first sample along x at which any of a band's
    lines (``lines_y`` (B, J), table frame) lies on the object at X, or -1 where none does.
    The same 1 mm samples as looking at all of them, but walked from where the band's
    lines first cross the footprint's boundary (no sample before that can lie on the
    object), by chunks that stop once every band has met it: sampling the whole overhang
    for every band was 75% of a heavy tray's goal search."""
    a_O, b_O = boundary_segments(grid)
    a_W, b_W = to_world(X, a_O), to_world(X, b_O)
    y = lines_y.reshape(-1, 1)  # (L, 1)
    y_lo = np.minimum(a_W[:, 1], b_W[:, 1]) - 1e-9
    y_hi = np.maximum(a_W[:, 1], b_W[:, 1]) + 1e-9
    dy = b_W[:, 1] - a_W[:, 1]
    flat = np.abs(dy) < 1e-12
    with np.errstate(divide='ignore', invalid='ignore'):
        t = np.clip((y - a_W[:, 1]) / np.where(flat, 1.0, dy), 0.0, 1.0)
    x = np.where(flat, np.minimum(a_W[:, 0], b_W[:, 0]), a_W[:, 0] + t * (b_W[:, 0] - a_W[:, 0]))
    x = np.where((y >= y_lo) & (y <= y_hi), x, np.inf).min(axis=1).reshape(lines_y.shape)
    entry = x.min(axis=1)  # (B,): no line of the band meets the object before this
    first = np.full(len(lines_y), -1, dtype=np.int64)
    start = np.maximum(np.searchsorted(xs, entry - 1e-9) - 1, 0)
    todo = np.flatnonzero(np.isfinite(entry))
    size = _FIRST_CHUNK
    while len(todo):
        k = start[todo, None] + np.arange(size)[None, :]  # (b, n)
        inside = k < len(xs)
        chunk = xs[np.minimum(k, len(xs) - 1)]
        pts = np.stack(np.broadcast_arrays(chunk[:, None, :], lines_y[todo][..., None]), axis=-1)
        hit = np.asarray(covered(grid, X, pts), dtype=bool).any(axis=1) & inside
        met = hit.any(axis=1)
        first[todo[met]] = start[todo[met]] + np.argmax(hit[met], axis=1)
        start[todo] += size
        todo = todo[~met & (start[todo] < len(xs))]
        size *= 2
    return first


def _window_cover(
    grid: Grid,
    X: FloatArray,
    xs: FloatArray,
    ys: FloatArray,
    line_of: NDArray[np.int64],
    lo: NDArray[np.int64],
    count: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """(B, 3, Nw) whether the samples between each band's pads lie on the object at X: band
    b's line j is lattice line ``line_of[b, j]`` (``ys`` (L,), table frame), its pads cover
    ``count[b]`` samples of ``xs`` from ``lo[b]``. Each line is sampled once, over the
    windows of all the bands it belongs to (three bands share a line)."""
    n_x = len(xs)
    lo_l = np.full(len(ys), n_x)
    hi_l = np.zeros(len(ys), dtype=np.int64)
    used = count > 0
    np.minimum.at(lo_l, line_of[used].ravel(), np.repeat(lo[used], line_of.shape[1]))
    np.maximum.at(hi_l, line_of[used].ravel(), np.repeat((lo + count)[used], line_of.shape[1]))
    lo_l = np.minimum(lo_l, hi_l)  # a line of no band: an empty window
    width = max(int((hi_l - lo_l).max()), 1)
    on_line = np.minimum(lo_l[:, None] + np.arange(width)[None, :], n_x - 1)  # (L, W)
    line_pts = np.stack(np.broadcast_arrays(xs[on_line], ys[:, None]), axis=-1)
    cov_line = np.asarray(covered(grid, X, line_pts), dtype=bool)  # (L, W)
    k = np.arange(max(int(count.max()), 1))
    col = (lo[:, None] - lo_l[line_of])[..., None] + k[None, None, :]  # (B, 3, Nw)
    return np.asarray(cov_line[line_of[..., None], np.clip(col, 0, width - 1)], dtype=bool)


def _levers(
    grid: Grid,
    X: FloatArray,
    pts: FloatArray,
    held: NDArray[np.bool_],
    fronts: FloatArray,
    half_w: float,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(span, span_across, hold_back) of :class:`Grasp`, each (B,), for B bands: ``pts``
    (B, 3, Nx, 2) the samples along their three lines (offsets -0.9, 0, 0.9 of the half
    width, standing for the pads' whole width), ``held`` (B, 3, Nx) those between the pads
    on the object, ``fronts`` (B,) the pads' front ends (x). A band holding nothing gets
    NaN."""
    r, c, inside = cells_under(grid, X, pts)
    on = held & inside
    h = np.where(on, grid.heights[np.where(on, r, 0), np.where(on, c, 0)], 0.0)
    tallest = h.max(axis=(1, 2))
    top = on & (h >= tallest[:, None, None] - PAD_REACH)  # where the upper pad presses
    x = pts[..., 0]
    with np.errstate(invalid='ignore'):
        outer = np.where(top, x, np.inf).min(axis=(1, 2))
        inner = np.where(on, x, -np.inf).max(axis=(1, 2))
        lines = np.array([-1.0, 0.0, 1.0]) * half_w
        t_any, b_any = top.any(axis=2), on.any(axis=2)  # (B, 3)
        t_hi = np.where(t_any, lines, -np.inf).max(axis=1)
        t_lo = np.where(t_any, lines, np.inf).min(axis=1)
        b_hi = np.where(b_any, lines, -np.inf).max(axis=1)
        b_lo = np.where(b_any, lines, np.inf).min(axis=1)
        span = inner - outer
        across = np.maximum(t_hi - b_lo, b_hi - t_lo)
        back = fronts - 0.5 * (outer + inner)
    none = ~on.any(axis=(1, 2))
    span[none] = across[none] = back[none] = np.nan
    return span, across, back


def hold_ratios(belief: Belief, X_WO: Any, grasp: Grasp, gripper: Gripper) -> FloatArray:
    """(K,) the hold ratio of each model of the belief for ``grasp`` of the object at X_WO
    (module docstring): the weight's moment about the middle of the held part over what
    the pads can resist, summed over the two axes; inf when the weight exceeds twice the
    fingers' force. The held part's middle H lies half the grip behind the pads' front end
    along the approach."""
    X = check_pose(X_WO, 'X_WO')
    u = np.array([math.cos(grasp.yaw), math.sin(grasp.yaw)])  # along the approach
    v = np.array([-u[1], u[0]])
    span = grasp.span if grasp.span > 0.0 else grasp.grip
    span_across = grasp.span_across if grasp.span_across > 0.0 else gripper.finger_width
    back = grasp.hold_back if grasp.hold_back > 0.0 else 0.5 * grasp.grip
    p_WH = np.asarray(grasp.p_WE, dtype=float) - back * u
    L_W = to_world(X, belief.com()) - p_WH  # (K, 2) levers, table frame
    W = GRAVITY * belief.mass.sum(axis=1)  # (K,) [N]
    F = gripper.force
    along = W * np.abs(L_W @ u) / (F * max(span, 1e-9))
    across = W * np.abs(L_W @ v) / (F * max(span_across, 1e-9))
    ratio = along + across
    return np.asarray(np.where(W > 2.0 * F, np.inf, ratio), dtype=float)


def hold_floor(belief: Belief, X_WO: Any, gripper: Gripper) -> FloatArray:
    """(K,) a floor under :func:`hold_ratios` of every grasp :func:`grasp_at` can make at
    X_WO, from the along ratio alone: its pads come along +x with their front end at most
    at the clearance before the edge (x = -clearance), so the held part's middle H lies
    there or further out, and the span is at most the pads' depth; a model whose centre
    of mass is c_x inside the edge asks at least W (c_x + clearance) / (F depth) (inf
    where W > 2F, as there). Cheap: the goal search skips the grasp where even this floor
    asks more than the pads are trusted with (a heavy tray's 84 overhangs x 36 yaws of
    grasps took 30 s)."""
    X = check_pose(X_WO, 'X_WO')
    c_x = to_world(X, belief.com())[:, 0]
    W = GRAVITY * belief.mass.sum(axis=1)
    F = gripper.force
    lever = np.maximum(c_x + gripper.clearance, 0.0)
    floor = W * lever / (F * gripper.finger_depth)
    return np.asarray(np.where(W > 2.0 * F, np.inf, floor), dtype=float)


PRE_GRASP_ROOM = 0.04
"""Room [m] between the object's outermost point and the pads' front end where the
gripper comes down (the pads' front end then stands their depth and this much before
its place in the grasp: the object ends at most the pads' depth behind it)."""
PRE_GRASP_HEIGHT = 0.3
"""Height [m] of the pads above the table on the way to the pre-grasp."""


def grasp_waypoints(
    grasp: Grasp, lift: float, gripper: Gripper
) -> tuple[list[Waypoint], list[Waypoint]]:
    """The gripper's motion for ``grasp`` (pads' front end E, table frame): above and in
    front of the overhang (E the pads' depth and PRE_GRASP_ROOM before its place: a fixed
    8 cm brought pads 12 cm deep down on the object), down to the held part's mid-height,
    in along the approach (then the fingers close); and the lift by ``lift`` metres, held
    half a second."""
    d = np.array([math.cos(grasp.yaw), math.sin(grasp.yaw)])
    front = np.asarray(grasp.p_WE, dtype=float)
    pre = front - d * (gripper.finger_depth + PRE_GRASP_ROOM)
    approach = [
        Waypoint(np.array([*pre, PRE_GRASP_HEIGHT]), 0.5, 0.0, 'pre_grasp', grasp.yaw),
        Waypoint(np.array([*pre, grasp.z]), 0.3, 0.0, 'lower', grasp.yaw),
        Waypoint(np.array([*front, grasp.z]), 0.1, 0.0, 'reach', grasp.yaw),
    ]
    up = [Waypoint(np.array([*front, grasp.z + lift]), 0.1, 0.5, 'lift', grasp.yaw)]
    return approach, up


WITHDRAW_SLACK = 0.001
"""m: a gripper this close (horizontally) to its pre-grasp line is not moved back first."""


def grasp_withdrawal(grasp: Grasp, gripper: Gripper, p_W: Any) -> list[Waypoint]:
    """The open gripper's way out of a grasp stopped part-way (a cancel, a fault), from its
    pads' front end at ``p_W`` (3,): back along the approach to the pre-grasp place at the
    height it is at, then up to the approach's height. Lifting straight up from under an
    overhang would catch it on the lower pad, so the gripper leaves the way it came in.
    Empty when it stands there already (a gripper stopped on its way to the pre-grasp,
    above everything, stays where it is)."""
    p = check_position(p_W)
    d = np.array([math.cos(grasp.yaw), math.sin(grasp.yaw)])
    pre = np.asarray(grasp.p_WE, dtype=float) - d * (gripper.finger_depth + PRE_GRASP_ROOM)
    if p[2] >= PRE_GRASP_HEIGHT - WITHDRAW_SLACK:
        return []
    out = []
    if float(np.linalg.norm(p[:2] - pre)) > WITHDRAW_SLACK:
        out.append(Waypoint(np.array([*pre, p[2]]), 0.1, 0.0, 'withdraw', grasp.yaw))
    out.append(Waypoint(np.array([*pre, PRE_GRASP_HEIGHT]), 0.3, 0.0, 'raise', grasp.yaw))
    return out
