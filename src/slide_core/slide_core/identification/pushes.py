"""Recorded pushes on one time step: what identification and evaluation replay.

A push is the time series the robot (or the twin) observed: object poses, fingertip
centres and the force the fingertip applied, all in the table frame, from the stroke's
start to :data:`SETTLE_S` after its end (the object slides on; the fingertip has not yet
retracted). :func:`build_push` resamples them on steps of :data:`STEP_S`, the one step
identification and evaluation use (the pose rate of the camera and the twin), the object
poses smoothed on the way (:func:`smoothed_poses`): identification differentiates them.

Forces are taken as the F/T sensor's reading less its offset during the push
(:func:`sensor_offset`): a real sensor reads a few newtons at rest until it is tared, and
drifts after. Every stroke starts :data:`slide_core.model.APPROACH` short of the object,
so its first part is a measurement of that offset, and of the sensor's noise, which the
force must stand out from to count as a touch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import hashlib

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.interpolate import BSpline, make_smoothing_spline
from scipy.optimize import brentq
from scipy.stats import median_abs_deviation

from slide_core.geometry import (
    FloatArray,
    Grid,
    distance_to_footprint,
    grid_radius,
    rotation,
)
from slide_core.identification.errors import IdentificationError
from slide_core.model import APPROACH
from slide_core.physics import RigidModel, WrenchPush, contact_cell

STEP_S = 0.01
"""The step [s] on which pushes are read: identification, evaluation and replays."""
SETTLE_S = 0.3
"""Seconds after the stroke's end that still belong to the push (free sliding)."""
CONTACT_FORCE_N = 0.05
"""Below this force [N] the fingertip is taken as not touching (or below NOISE_SIGMAS of
the sensor's noise, when that is more)."""
PRE_STROKE_S = 0.05
"""Seconds before the stroke's start whose forces may count as free air: the fingertip
stands at the start point then (the lower waypoint's dwell)."""
MIN_FREE_AIR_SAMPLES = 5
"""Fewer force samples than this in free air give no offset (the sensor taken as tared)."""
NOISE_SIGMAS = 5.0
"""A touch is a force this many standard deviations of the free-air noise from zero."""
MAX_WRENCH_GAP_S = 0.25
"""The longest a push's forces may be missing [s] (a 1 kHz stream; about 1 cm of stroke at
5 cm/s), its edges included: the steps of a gap would be taken as motion without force. (The
executor stops a live push at 0.5 s of silence, ``max_wrench_gap_s``: there the arm is at
stake, here the data.)"""
MAX_POSE_SPEED = 1.0
"""[m/s] twice the fastest push (0.5 m/s): an object pose further from the last one than
this allows is a tracking glitch (:func:`build_push`)."""
MAX_TURN_RATE = 20.0
"""[rad/s] twice a 0.5 m/s push's turn of an object 5 cm across about its far end."""
MOVED_UNFELT_M = 0.01
"""How far [m] (its points at the object's radius) an object may move in a push whose
force never stands above the sensor's noise (the pose's noise; else the wrench was lost)."""
MAX_CONTACT_GAP_M = 0.05
"""How far [m] the fingertip's centre may lie from the object's outline, at the median of
a push's steps that feel a force: a fingertip a few centimetres across and the tracking's
error stay well inside it; beyond, the fingertip's and the object's poses are not in one
frame (a path 30 cm off was fitted, and the fit blamed the F/T sensor)."""
MAX_POSE_GAP_S = 1.0
"""The longest a push's object poses may be missing [s], its window's ends included: the
smoothing would draw the motion of a gap as a straight line, or the push would end early
(a camera at 10 Hz that loses a few frames to a loaded machine stays well within it)."""
MAX_TIP_GAP_S = 0.5
"""The longest a push's pusher (fingertip) poses may be missing [s] while its object poses
run: the fingertip would be drawn in a straight line across the gap, wherever it pushed.
The executor refuses a stroke with a longer one (``max_tip_gap_s``, 0.5 s) but its bag keeps
the push; read from the bag, it is refused here too."""


def longest_gap(times: ArrayLike, t0: float, t1: float) -> tuple[float, float]:
    """The longest stretch [s] of the window [t0, t1] with no sample of a series stamped
    ``times`` [s] (any order; those outside the window left out), and when it begins [s].
    What identification refuses a push across (:func:`build_push`), and the executor a
    stroke."""
    t = np.asarray(times, dtype=float)
    inside = np.concatenate(([t0], np.sort(t[(t > t0) & (t < t1)]), [t1]))
    gaps = np.diff(inside)
    k = int(np.argmax(gaps))
    return float(gaps[k]), float(inside[k])


@dataclass(frozen=True)
class SensorOffset:
    """The F/T sensor during one push: its offset f0 (2,) [N] in the table frame (subtracted
    from every reading), its noise's standard deviation [N] and the free-air samples they
    come from (0: none, the sensor taken as tared and noiseless)."""

    f0: FloatArray
    sigma: float
    samples: int

    @property
    def touch_n(self) -> float:
        """The least force [N] that counts as the fingertip touching."""
        return max(CONTACT_FORCE_N, NOISE_SIGMAS * self.sigma)


def sensor_offset(
    wrench: FloatArray, tips: FloatArray, grid: Grid, X_WO: FloatArray, t_start: float
) -> SensorOffset:
    """The sensor's offset and noise during a push whose stroke starts at ``t_start`` [s]
    with the object at X_WO (3,), from the forces (L, 3) rows (t, fx, fy) measured while the
    fingertip was in free air: from PRE_STROKE_S before the start until its centre (tips
    (M, 3) rows (t, x, y)) first comes within APPROACH of the object's footprint (the stroke
    starts APPROACH plus the fingertip's radius short of it; columns past y are not
    read). The median force, and the median absolute deviation (as a standard deviation)
    of the noisier axis."""
    t_from = t_start - PRE_STROKE_S
    near = tips[tips[:, 0] >= t_from]
    R = rotation(float(X_WO[2]))
    t_near = np.inf
    for t, p_WF in zip(near[:, 0], near[:, 1:3], strict=True):
        if distance_to_footprint(grid, R.T @ (p_WF - X_WO[:2])) < APPROACH:
            t_near = float(t)
            break
    free = wrench[(wrench[:, 0] >= t_from) & (wrench[:, 0] < t_near), 1:3]
    if len(free) < MIN_FREE_AIR_SAMPLES:
        return SensorOffset(np.zeros(2), 0.0, 0)
    f0 = np.median(free, axis=0)
    sigma = float(median_abs_deviation(free, axis=0, scale='normal').max())
    return SensorOffset(np.asarray(f0, dtype=float), sigma, len(free))


@dataclass(frozen=True, eq=False)
class PushData:
    """One recorded push as the physics core replays it.

    Attributes:
        index: the push's index in the bag.
        push: forces and contact points per step.
        X_WO0: (3,) observed pose at the first step.
        obs_steps: (J,) steps at which the pose was observed; X_obs: (J, 3) those poses.
        p_WF: (T+1, 2) the fingertip centre at the step boundaries (for kinematic replays,
            and to tell the steps in which the object rests against a still fingertip).
        X_steps: (T+1, 3) the observed poses at the step boundaries, smoothed
            (:func:`smoothed_poses`).
        touch_share: the share of the touch step (:attr:`touch_step`) from the first
            force sample that felt the fingertip to the step's end: the part of it in which
            the object can slide (1: from its start, or not known).
    """

    index: int
    push: WrenchPush
    X_WO0: FloatArray
    obs_steps: NDArray[np.int64]
    X_obs: FloatArray
    p_WF: FloatArray
    X_steps: FloatArray
    touch_share: float = 1.0

    @property
    def felt(self) -> NDArray[np.bool_]:
        """(T,) whether the F/T felt the fingertip on each step (:func:`build_push` zeroes
        the force of each step below the sensor's touch threshold)."""
        return np.asarray(np.any(self.push.f_W != 0.0, axis=1))

    @property
    def fingertip_speed(self) -> FloatArray:
        """(T,) the fingertip centre's mean speed over each step [m/s], from
        :attr:`p_WF`."""
        return np.asarray(np.linalg.norm(np.diff(self.p_WF, axis=0), axis=1) / self.push.dt)

    @property
    def touch_step(self) -> int | None:
        """The step in which the fingertip touches the object: the first whose force is
        felt (:func:`build_push` zeroes each step whose mean force is below the sensor's
        touch threshold), or None when no step feels one."""
        felt = np.flatnonzero(self.felt)
        return int(felt[0]) if felt.size else None


FINGERPRINT_RESOLUTION_M = 1e-4
"""Positions [m] (and yaws [rad]) are rounded to this in :func:`push_fingerprint`."""


def push_fingerprint(pd: PushData) -> str:
    """A short digest of what was recorded of a push: the object's first pose and the
    fingertip's path, rounded to :data:`FINGERPRINT_RESOLUTION_M`. The same push read from
    any copy of its bag, or by another path to it, has the same one; another push has
    another. (Held-out checks compare these: a bag's name says nothing about its pushes.)"""
    values = np.concatenate((pd.X_WO0.ravel(), pd.p_WF.ravel()))
    rounded = np.round(values / FINGERPRINT_RESOLUTION_M).astype(np.int64)
    return hashlib.sha256(rounded.tobytes()).hexdigest()[:16]


def push_from_samples(
    grid: Grid,
    index: int,
    t: ArrayLike,
    X_WO: ArrayLike,
    p_WF: ArrayLike,
    f_W: ArrayLike,
    t_start: float,
    t_end: float,
    dt: float = STEP_S,
) -> PushData:
    """A push from time series sampled in memory, as :func:`read_pushes` makes it from a bag.

    t: (N,) times [s]; X_WO: (N, 3) object poses; p_WF: (N, >=2) fingertip centres;
    f_W: (N, >=2) force the fingertip applies [N]; the push runs from ``t_start`` to
    ``t_end`` (the stroke's end) plus SETTLE_S.
    """
    tt = np.asarray(t, dtype=float)
    X, p, f = (np.asarray(a, dtype=float) for a in (X_WO, p_WF, f_W))
    if (
        tt.ndim != 1
        or X.shape != (len(tt), 3)
        or any(a.ndim != 2 or a.shape[0] != len(tt) or a.shape[1] < 2 for a in (p, f))
    ):
        raise IdentificationError(
            f't (N,), X_WO (N, 3), p_WF and f_W (N, 2+) must agree in length; got '
            f'{tt.shape}, {X.shape}, {p.shape} and {f.shape}'
        )
    return build_push(
        grid,
        index,
        t_start,
        t_end + SETTLE_S,
        np.column_stack((tt, X)),
        np.column_stack((tt, p[:, :2])),
        np.column_stack((tt, f[:, :2])),
        'the push record',
        dt,
    )


def build_push(
    grid: Grid,
    index: int,
    t_start: float,
    t_next: float,
    poses: FloatArray,
    tips: FloatArray,
    wrench: FloatArray,
    source: str,
    dt: float,
) -> PushData:
    """One push from whole series: object poses (N, 4) rows (t, x, y, yaw), fingertip
    centres (M, 3) rows (t, x, y), forces on the object (L, 3) rows (t, fx, fy) in the
    table frame; the push is the window [t_start, t_next). ``source`` names the data in
    errors. Forces are averaged per step of ``dt``; each is applied at the point of the
    object's cells closest to the fingertip's centre at that instant. Each series is taken
    in time order, whatever order its rows come in (series merged from several sources),
    without its rows that hold a value that is not finite (a sensor's glitch anywhere in a
    long recording must not cost every push). Raises IdentificationError when the push
    cannot be used: too short, series that do not overlap in time, a gap longer than
    MAX_POSE_GAP_S in its poses, MAX_TIP_GAP_S in its pusher poses or MAX_WRENCH_GAP_S in
    its forces, a pose that jumps
    (:func:`_check_jumps`), or an object that moved with no force felt."""
    if not (np.isfinite(dt) and dt > 0):
        raise IdentificationError(f'{source}: the time step must be positive, got {dt} s')
    if not (np.isfinite(t_start) and t_next > t_start):
        raise IdentificationError(
            f'{source}: push {index} runs from {t_start} to {t_next} s: not a time window'
        )
    series = []
    for a in (poses, tips, wrench):
        a = np.asarray(a, dtype=float)
        a = a[np.isfinite(a).all(axis=1)]
        series.append(a[np.argsort(a[:, 0], kind='stable')])
    poses, tips, wrench = series
    sel = (poses[:, 0] >= t_start - 1e-9) & (poses[:, 0] < t_next)
    P = poses[sel]
    if len(P) < 3:
        raise IdentificationError(
            f'{source}: push {index} has {len(P)} object poses: not a complete push'
        )
    tip_sel = (tips[:, 0] >= P[0, 0] - 0.05) & (tips[:, 0] <= P[-1, 0] + 0.05)
    W = wrench[(wrench[:, 0] >= P[0, 0]) & (wrench[:, 0] < P[-1, 0])]
    if tip_sel.sum() < 2 or len(W) == 0:
        raise IdentificationError(
            f'{source}: push {index}: pusher poses or wrenches do not overlap the object '
            'poses in time'
        )
    Tp = tips[tip_sel]
    for what, (gap, since), limit in (
        ('object pose', longest_gap(P[:, 0], t_start, t_next), MAX_POSE_GAP_S),
        ('wrench', longest_gap(W[:, 0], P[0, 0], P[-1, 0]), MAX_WRENCH_GAP_S),
        ('pusher pose', longest_gap(Tp[:, 0], P[0, 0], P[-1, 0]), MAX_TIP_GAP_S),
    ):
        if gap > limit:
            raise IdentificationError(
                f'{source}: push {index}: no {what} for {gap:.2f} s from '
                f'{since - t_start:.2f} s after its start (at most {limit:g} s): the '
                'push is not read across a gap' + _UNITS * bool(t_next - t_start > LONGEST_PUSH_S)
            )
    # (the whole series up to the push's end: the free air starts before its first pose)
    sensor = sensor_offset(
        wrench[wrench[:, 0] < P[-1, 0]], tips[tips[:, 0] <= P[-1, 0]], grid, P[0, 1:4], t_start
    )
    W = np.column_stack((W[:, 0], W[:, 1:3] - sensor.f0))
    touch = sensor.touch_n
    steps = int(np.floor((P[-1, 0] - P[0, 0]) / dt))
    if steps < 2:
        short = bool(P[-1, 0] - P[0, 0] < 0.01 * dt)
        raise IdentificationError(
            f'{source}: push {index} lasts less than two steps' + _UNITS * short
        )
    _check_jumps(P, t_start, source, index)
    t = P[0, 0] + dt * np.arange(steps + 1)
    yaw = np.unwrap(P[:, 3])
    touching = W[np.hypot(W[:, 1], W[:, 2]) >= touch, 0]
    t_contact = float(touching[0]) if len(touching) else None
    moved = float(np.hypot(*(P[-1, 1:3] - P[0, 1:3]))) + float(
        abs(yaw[-1] - yaw[0]) * grid_radius(grid)
    )
    if t_contact is None and moved > MOVED_UNFELT_M:
        # Its steps were fitted as a push of 0 N: a dead channel made a 1.6 g hammer.
        raise IdentificationError(
            f'{source}: push {index}: the object moved {moved * 100:.1f} cm while the F/T '
            f'never read a touch (above {touch:.2g} N): is its wrench read, and was it tared '
            'in free air?'
        )
    X = smoothed_poses(P[:, 0], np.column_stack((P[:, 1:3], yaw)), t, t_contact)
    mid = t[:-1] + dt / 2
    tip = np.column_stack([np.interp(mid, Tp[:, 0], Tp[:, 1]), np.interp(mid, Tp[:, 0], Tp[:, 2])])
    k = np.clip(((W[:, 0] - t[0]) // dt).astype(int), 0, steps - 1)
    counts = np.bincount(k, minlength=steps)
    sums = np.column_stack([np.bincount(k, W[:, c], minlength=steps) for c in (1, 2)])
    f = np.asarray(sums / np.maximum(counts, 1)[:, None], dtype=float)
    f[counts == 0] = 0.0
    X_mid = (X[:-1] + X[1:]) / 2
    contact = np.zeros((steps, 2))
    last = grid.p_OC[0]
    model = RigidModel.of(grid)
    apart: list[float] = []  # fingertip centre to the outline [m], at steps that feel a force
    for s in range(steps):
        if np.linalg.norm(f[s]) < touch:
            f[s] = 0.0
            contact[s] = last
            continue
        p_O = rotation(X_mid[s, 2]).T @ (tip[s] - X_mid[s, :2])
        # The point of the object closest to the fingertip (RigidModel works at G): on its
        # real outline when it has one, which can cut a concave corner across an empty
        # cell (perception's simplified outline does, by a fraction of a millimetre); the
        # force then acts at the nearest point of the cells' squares.
        q_B, _ = model.closest_point((p_O - model.p_OG)[None, :])
        q_O = q_B[0] + model.p_OG
        apart.append(float(np.linalg.norm(p_O - q_O)))
        contact[s] = last = on_cells(grid, q_O)
    if apart and float(np.median(apart)) > MAX_CONTACT_GAP_M:
        raise IdentificationError(
            f'{source}: push {index}: the fingertip is {np.median(apart) * 100:.1f} cm from the '
            f'object (median of the {len(apart)} steps that feel a force of {touch:.2g} N or '
            "more): the fingertip's and the object's poses are not in one frame, or one is "
            "off (the camera extrinsics, the arm's base to table transform)"
        )
    push = WrenchPush.create(grid, contact, f, dt)
    obs_steps = np.clip(np.round((P[:, 0] - t[0]) / dt).astype(np.int64), 0, steps)
    X_obs = np.column_stack((P[:, 1:3], yaw))
    p_WF = np.column_stack([np.interp(t, Tp[:, 0], Tp[:, c]) for c in (1, 2)])
    pd = PushData(index, push, X[0], obs_steps, X_obs, p_WF, X)
    felt = pd.touch_step
    if felt is None or t_contact is None:
        return pd
    return replace(pd, touch_share=float(np.clip((t[felt + 1] - t_contact) / dt, 0.0, 1.0)))


def on_cells(grid: Grid, q_O: FloatArray) -> FloatArray:
    """The point q_O (2,) [m], object frame, or where it lies off every cell (an outline can
    cut a concave corner across an empty cell), the nearest point of the cells' squares:
    where a push's force acts."""
    if contact_cell(grid, q_O) >= 0:
        return q_O
    on = np.clip(q_O, grid.p_OC - grid.cell_size / 2, grid.p_OC + grid.cell_size / 2)
    return np.asarray(on[np.argmin(np.linalg.norm(on - q_O, axis=1))], dtype=float)


_UNITS = ' (are its times in seconds?)'
"""Said where a push's times look scaled: a gap in a push longer than LONGEST_PUSH_S, or a
push of less than a hundredth of a step (milliseconds or microseconds read as seconds)."""
LONGEST_PUSH_S = 300.0
"""[s] no push lasts this long (50 cm at 2 mm/s): a longer one's times are not seconds."""


def _check_jumps(P: FloatArray, t_start: float, source: str, index: int) -> None:
    """IdentificationError when two successive object poses of P (N, 4) rows (t, x, y,
    yaw), at different times, lie further apart than :data:`MAX_POSE_SPEED` or
    :data:`MAX_TURN_RATE` allow: a tracker's glitch or a flip of a symmetric outline (a
    yaw that jumped by pi mid-push was smoothed into a turn and fitted)."""
    dt = np.diff(P[:, 0])
    later = dt > 0
    step = np.hypot(np.diff(P[:, 1]), np.diff(P[:, 2]))
    turn = np.abs(np.diff(np.unwrap(P[:, 3])))
    with np.errstate(divide='ignore', invalid='ignore'):
        fast = later & ((step > MAX_POSE_SPEED * dt) | (turn > MAX_TURN_RATE * dt))
    if fast.any():
        k = int(np.argmax(fast))
        raise IdentificationError(
            f'{source}: push {index}: the object pose jumps {step[k] * 1000:.0f} mm and '
            f'{turn[k]:.2f} rad in {dt[k] * 1000:.0f} ms at {P[k, 0] - t_start:.2f} s, faster '
            f'than a push moves it (at most {MAX_POSE_SPEED:g} m/s, {MAX_TURN_RATE:g} rad/s): '
            "a tracking glitch, or a flip of the object's outline; the push is not read"
        )


SMOOTHING_BIN_S = 0.02
"""Poses closer in time than this [s] are averaged before smoothing (a twin logging every
physics step gives hundreds a second; the smoothing's cost grows with their number, and
identification's derivatives span 70 ms)."""
NOISE_POSES_MIN = 10
"""Poses that give the tracker's noise (:func:`tracking_noise`); with fewer,
cross-validation chooses the smoothing."""
LOG_LAM_RANGE = (-14.0, 2.0)
"""log10 of the smoothing splines' roughness weights searched (times in seconds): from
interpolation to a straight line across a push."""


def _binned(
    t_obs: FloatArray, X_obs: FloatArray, width: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Poses averaged over bins of ``width`` seconds: times (B,), poses (B, 3), counts."""
    k = np.floor((t_obs - t_obs.min()) / width).astype(np.int64)
    _, bin_of, counts = np.unique(k, return_inverse=True, return_counts=True)
    t_b = np.bincount(bin_of, t_obs) / counts
    X_b = np.column_stack([np.bincount(bin_of, X_obs[:, c]) for c in range(3)]) / counts[:, None]
    return t_b, X_b, counts.astype(float)


def tracking_noise(t_obs: FloatArray, X_obs: FloatArray) -> FloatArray | None:
    """The variance (3,) of a tracker's noise in poses X_obs (J, 3) at times t_obs (J,),
    from how far each pose lies off the straight line through its neighbours (robustly: the
    median, so that the few poses where the motion turns sharply do not count); None with
    fewer than :data:`NOISE_POSES_MIN` poses."""
    order = np.argsort(t_obs, kind='stable')
    t, X = t_obs[order], X_obs[order]
    h0, h1 = np.diff(t)[:-1], np.diff(t)[1:]
    ok = (h0 > 0.0) & (h1 > 0.0)
    if ok.sum() < NOISE_POSES_MIN:
        return None
    h0, h1 = h0[ok][:, None], h1[ok][:, None]
    a, b = h1 / (h0 + h1), h0 / (h0 + h1)
    off = (X[1:-1][ok] - a * X[:-2][ok] - b * X[2:][ok]) / np.sqrt(1.0 + a**2 + b**2)
    # A normal's sigma from the median absolute offset (about the line: 0).
    sigma = median_abs_deviation(off, axis=0, center=lambda _o, axis: 0.0, scale='normal')
    return np.asarray(sigma**2, dtype=float)


def _spline(x: FloatArray, y: FloatArray, w: FloatArray, noise: float | None) -> BSpline:
    """The cubic smoothing spline through y (B,) at x (B,) [s], weights w (B,) (the poses
    each value averages): generalised cross-validation's, unless it leaves residuals
    beyond the tracker's noise variance ``noise`` per pose; then the smoothest that stays
    within it (Morozov's discrepancy principle; 0: as near interpolation as
    :data:`LOG_LAM_RANGE` goes). None: cross-validation's."""
    if noise is None:
        return make_smoothing_spline(x, y, w=w)

    def excess(spline: BSpline) -> float:
        return float(np.mean(w * (y - spline(x)) ** 2)) - noise

    def at(log_lam: float) -> BSpline:
        return make_smoothing_spline(x, y, w=w, lam=10.0**log_lam)

    lo, hi = LOG_LAM_RANGE
    tight = at(lo)
    if excess(tight) >= 0.0:
        # Even the least smoothing leaves that much (a perfect tracker's poses): whatever
        # cross-validation chose smooths more (the residual grows with lam).
        return tight
    fit = make_smoothing_spline(x, y, w=w)
    if excess(fit) <= 0.0:
        return fit  # it smooths no more than the noise asks
    smooth = at(hi)
    if excess(smooth) <= 0.0:
        return smooth  # the noise hides the motion: as smooth as the range goes
    return at(float(brentq(lambda v: excess(at(v)), lo, hi, xtol=0.05)))


def smoothed_poses(
    t_obs: FloatArray, X_obs: FloatArray, t: FloatArray, t_contact: float | None = None
) -> FloatArray:
    """Observed poses X_obs (J, 3) (yaw unwrapped) at times t_obs (J,) [s], at the times t
    (T,) inside their span, smoothed so that tracking noise is not differentiated into the
    velocities and accelerations that identification fits.

    Per coordinate, a cubic smoothing spline (scipy's ``make_smoothing_spline``) through
    the poses averaged over bins of :data:`SMOOTHING_BIN_S` (each weighted as the poses it
    holds). The object is at rest until the fingertip touches it at ``t_contact`` (when
    known), and its velocity jumps there: a spline across the jump would round it off into
    motion before the contact. So the poses before ``t_contact`` give one rest pose (their
    mean, weighted as their number), held until then, and the spline runs from it through
    the poses after.

    How smooth: cross-validation's choice, unless it leaves residuals beyond the tracker's
    noise (:func:`tracking_noise` of the poses after the contact, or of all without one):
    then the smoothest spline within it (:func:`_spline`). So a perfect tracker's poses are
    interpolated, and a noisy one's smoothed as cross-validation finds. (Measured on the
    twin's noise-free poses, library pushes: cross-validation alone rounded off each push's
    start and stop, and the wrench loss at the true maps was 1.16 to 1.43 times the one
    with this cap.) The poses at rest are not used for the noise: a tracker may hold its
    output while the object stands still. With fewer than five bins to fit, or a spline
    that fails, straight lines between them."""
    rest = None
    moving = np.ones(t_obs.shape, dtype=bool)
    if t_contact is not None and t_obs.min() <= t_contact < t_obs.max():
        before = t_obs <= t_contact
        moving = ~before
        rest = X_obs[before].mean(axis=0)
        t_u, X_u, weight = _binned(t_obs[~before], X_obs[~before], SMOOTHING_BIN_S)
        t_u = np.concatenate(([t_contact], t_u))
        X_u = np.vstack((rest, X_u))
        weight = np.concatenate(([float(before.sum())], weight))
    else:
        t_u, X_u, weight = _binned(t_obs, X_obs, SMOOTHING_BIN_S)
    out = np.column_stack([np.interp(t, t_u, X_u[:, c]) for c in range(3)])
    noise = tracking_noise(t_obs[moving], X_obs[moving])
    if len(t_u) >= 5:
        try:
            # Times from the first pose: the spline's matrices stay well scaled.
            smooth = np.column_stack(
                [
                    _spline(t_u - t_u[0], X_u[:, c], weight, None if noise is None else noise[c])(
                        t - t_u[0]
                    )
                    for c in range(3)
                ]
            )
            if np.all(np.isfinite(smooth)):
                out = smooth
        except (ValueError, np.linalg.LinAlgError):
            pass
    if rest is not None:
        out[t < t_u[0]] = rest
    return np.asarray(out, dtype=float)


@dataclass(frozen=True, eq=False)
class PushSamples:
    """What the world measured during one push, in the table frame.

    Attributes:
        t_X, X_WO: (N,) times [s] and (N, 3) object poses.
        t_F, p_WF: (M,) times and (M, 2) fingertip centres.
        t_f, f_W: (L,) times and (L, 2) force the fingertip applied to the object [N].
        t_start, t_end: when the stroke began and ended [s].
    """

    t_X: FloatArray
    X_WO: FloatArray
    t_F: FloatArray
    p_WF: FloatArray
    t_f: FloatArray
    f_W: FloatArray
    t_start: float
    t_end: float

    def to_data(self, grid: Grid, index: int) -> PushData:
        """The push on identification's time step (see
        :func:`slide_core.identification.build_push`); raises IdentificationError when it
        is too short or its series do not overlap."""
        return build_push(
            grid,
            index,
            self.t_start,
            self.t_end + SETTLE_S,
            np.column_stack((self.t_X, self.X_WO)),
            np.column_stack((self.t_F, self.p_WF[:, :2])),
            np.column_stack((self.t_f, self.f_W[:, :2])),
            'the push record',
            STEP_S,
        )
