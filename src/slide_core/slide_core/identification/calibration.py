"""The fingertip's recorded contacts as a check of the workcell's calibration.

While the fingertip pushes, its centre F lies its radius r from the object's outline. The
fingertip's pose comes from the arm's kinematics and the object's from the camera, each
turned into the table frame W by a calibration (the arm's base, the camera's extrinsics).
When those disagree, every recorded fingertip centre sits off the true one, relative to the
object, by the same vector ``p_offset_W`` (2,) [m]; a rotation error of a few tenths of a
degree does the same over a workspace of a few decimetres. Then, on every step the F/T
feels the fingertip, its recorded signed distance d to the outline (outward normal n_W at
the closest point) reads

    d - r = n_W . p_offset_W + b + noise

with ``b`` [m] what the same on every side adds: an outline drawn wider than the object
(perception's grid), a fingertip whose radius is not the workcell's, how far it presses in.
Pushes into the object from three directions at least (normals that, as points on the unit
circle, do not all lie on one line) determine p_offset_W and b by least squares; from two
that are not opposite, p_offset_W alone with b taken as 0; from one, or from opposite sides
alone, neither (the offset along the sides they touch is not seen). The fit is robust
(soft-L1 at :data:`NOISE_SCALE_M`): the steps of a touch and of a release, where the
fingertip and the object part, are few.

What the offset does: identification places each push force at the outline's point
closest to the recorded fingertip, so the offset's part along the outline moves every
force's point by as much (its moment about the centre of mass, which the fit reads the
centre of mass from); replays and planned pushes start the fingertip that much off. An
offset above :data:`WARN_OFFSET_M` is said (:meth:`ContactOffset.problem`), and
:func:`offset_pushes` takes a measured one off the fingertip's path
(:func:`calibrated_pushes`: both, as ``slide identify`` and the identification node do).
Only one measured with its bias is taken off (:meth:`ContactOffset.kept`): from touches in
two directions (or in several near one line), the bias is read as an offset along their
normals' sum (an outline drawn 0.84 mm wide, as perception's is on the twin's box, reads as
1.2 mm), and taking that off would move every force's point along the outline by as much;
one more push, into the side that :func:`third_side` names, tells them apart (the task
makes it).

Measured on real pushes (MIT's push dataset, the tip's tracking against the objects'):
(-1.24, +0.03) mm from the 50 training pushes, which took the spread of the pushing tip's
distance to the outline from 1.06 to 0.47 mm RMS (``slide bench mit-push``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares, minimize_scalar

from slide_core.geometry import FloatArray, Grid, rotation
from slide_core.identification.errors import IdentificationError
from slide_core.identification.pushes import PushData, on_cells
from slide_core.physics import RigidModel, WrenchPush

NOISE_SCALE_M = 5e-4
"""The soft-L1 loss's scale [m]: residuals beyond it count less than squared (a tracker's
noise of 0.15 mm and the outline's of a few tenths lie inside it)."""
WARN_OFFSET_M = 1e-3
"""An offset [m] above which the calibration is said to be off: well above what the check
finds in a calibrated cell (within 0.17 mm on perception's tracked poses, ``slide bench
identification``), and a millimetre of every push force's point along the outline."""
MIN_SPREAD = 0.05
"""The least eigenvalue of the normals' mean outer product ([n, 1] with the bias) for a fit
to count as determined: below it the pushes touch from too few directions."""
REACH_M = 0.005
"""How far [m] beyond its radius a felt fingertip's recorded centre may lie from the outline
and count (a tracking glitch or a touch that the force reads before the poses do lies
further)."""


@dataclass(frozen=True)
class ContactOffset:
    """The fingertip's recorded offset from the object, measured on the steps of pushes in
    which the F/T felt it (see the module docstring).

    Attributes:
        p_offset_W: (2,) [m] the recorded fingertip centre less the true one, relative to the
            object, in the table frame (take it off the fingertip's path, or add it to the
            object's poses).
        bias_m: [m] what the gap adds on every side (0 when not determined: ``with_bias``).
        with_bias: whether the pushes' directions determined the bias too.
        rms_m: [m] RMS of the gaps' residuals after the fit; ``raw_rms_m``: before it (the
            gaps less the radius).
        steps: the touching steps measured, from ``pushes`` pushes.
    """

    p_offset_W: FloatArray
    bias_m: float
    with_bias: bool
    rms_m: float
    raw_rms_m: float
    steps: int
    pushes: int

    @property
    def size_m(self) -> float:
        """|p_offset_W| [m]."""
        return float(np.linalg.norm(self.p_offset_W))

    def problem(self) -> str:
        """What to check when the offset is above :data:`WARN_OFFSET_M`, else ''."""
        if self.size_m <= WARN_OFFSET_M:
            return ''
        return (
            f'{self.describe()}: the camera and the arm disagree by more than '
            f'{WARN_OFFSET_M * 1e3:g} mm (check the camera extrinsics and the arm base to '
            'table transform)'
        )

    def kept(self) -> str:
        """Why the offset must not be taken off the pushes, '' when it may: the pushes did
        not determine the bias with it, so an outline drawn wider or narrower than the
        object is read as part of the offset."""
        if self.with_bias:
            return ''
        return (
            'the pushes touch the object from two directions only, or from near one line, '
            'where an outline drawn wider or narrower than the object reads as such an offset: '
            'push into a third side to tell them apart'
        )

    def left_on(self) -> str:
        """The warning for an offset above :data:`WARN_OFFSET_M` that :meth:`kept` keeps
        on the pushes, with why; '' when there is none."""
        problem, kept = self.problem(), self.kept()
        return f'{problem}; not taken off: {kept}' if problem and kept else ''

    def describe(self) -> str:
        """One line: the offset, the bias and how well they explain the gaps."""
        x, y = (1e3 * self.p_offset_W).tolist()
        bias = f', {1e3 * self.bias_m:+.2f} mm on every side' if self.with_bias else ''
        return (
            f"the fingertip's recorded contacts sit ({x:+.2f}, {y:+.2f}) mm off the object's "
            f'outline{bias} (gap spread {1e3 * self.raw_rms_m:.2f} -> {1e3 * self.rms_m:.2f} '
            f'mm RMS over {self.steps} touching steps of {self.pushes} push(es))'
        )


def fit_contact_offset(
    gaps: FloatArray, n_W: FloatArray, bias: bool = True, pushes: int = 0
) -> ContactOffset:
    """The offset that explains gaps (N,) [m] (a touching fingertip's recorded distance to
    the outline less its radius) along the outline's outward normals n_W (N, 2) there, and
    the same-on-every-side bias when ``bias`` and the normals determine it; ``pushes``: how
    many pushes the steps came from (for the report). Raises IdentificationError when the
    normals do not determine the offset."""
    d = np.asarray(gaps, dtype=float).reshape(-1)
    n = np.asarray(n_W, dtype=float).reshape(-1, 2)
    if len(d) != len(n) or not (np.isfinite(d).all() and np.isfinite(n).all()):
        raise IdentificationError(
            f'{len(d)} gaps and {len(n)} normals, or values not finite: one of each per step'
        )

    def spread(A: FloatArray) -> float:
        return float(np.linalg.eigvalsh(A.T @ A / len(A))[0]) if len(A) >= A.shape[1] else 0.0

    if spread(n) < MIN_SPREAD:
        raise IdentificationError(
            f'{pushes or "the"} push(es) touch the object from too few directions ({len(d)} '
            "touching steps) to tell the fingertip's offset: it needs pushes into two sides "
            'at least, not parallel'
        )
    A = np.column_stack((n, np.ones(len(n))))
    with_bias = bias and spread(A) >= MIN_SPREAD
    if not with_bias:
        A = n

    def residuals(x: FloatArray) -> FloatArray:
        return np.asarray(d - A @ x, dtype=float)

    fit = least_squares(residuals, np.zeros(A.shape[1]), loss='soft_l1', f_scale=NOISE_SCALE_M)
    x = np.asarray(fit.x, dtype=float)
    left = d - A @ x
    return ContactOffset(
        p_offset_W=x[:2],
        bias_m=float(x[2]) if with_bias else 0.0,
        with_bias=with_bias,
        rms_m=float(np.sqrt(np.mean(left**2))),
        raw_rms_m=float(np.sqrt(np.mean(d**2))),
        steps=len(d),
        pushes=pushes,
    )


def contact_gaps(
    grid: Grid, pushes: Sequence[PushData], radius: float
) -> tuple[FloatArray, FloatArray]:
    """The recorded gaps (N,) [m] of a fingertip of ``radius`` [m] to the object's outline,
    less the radius, and the outline's outward normals (N, 2) in the table frame there, on
    every step of ``pushes`` that felt the fingertip with its centre within
    :data:`REACH_M` of where it would touch. The outline is the grid's own, or its cells'
    squares when it has none (the twin's objects are made of them; on a curved object
    they reach past it by up to half a cell, which the fit's residuals then show).
    Raises IdentificationError for a radius that is not positive."""
    if not (np.isfinite(radius) and radius > 0.0):
        raise IdentificationError(f"the fingertip's radius must be positive, got {radius} m")
    model = RigidModel.of(grid)
    gaps: list[FloatArray] = []
    normals: list[FloatArray] = []
    for pd in pushes:
        s = np.flatnonzero(pd.felt)
        if s.size == 0:
            continue
        X = (pd.X_steps[s] + pd.X_steps[s + 1]) / 2
        p_WF = (pd.p_WF[s] + pd.p_WF[s + 1]) / 2
        R = rotation(X[:, 2])  # (S, 2, 2)
        p_OF = np.einsum('sji,sj->si', R, p_WF - X[:, :2])
        _, n_B, signed = model.contact(p_OF - model.p_OG)
        gap = signed - radius
        near = np.abs(gap) < REACH_M
        gaps.append(gap[near])
        normals.append(np.einsum('sij,sj->si', R[near], n_B[near]))
    if not gaps:
        return np.zeros(0), np.zeros((0, 2))
    return np.concatenate(gaps), np.concatenate(normals)


def contact_offset(grid: Grid, pushes: Sequence[PushData], radius: float) -> ContactOffset:
    """The fingertip's recorded offset from the object over ``pushes`` (see the module
    docstring). Raises IdentificationError when they cannot tell it (touches from too few
    directions) or the radius is not positive."""
    gaps, n_W = contact_gaps(grid, pushes, radius)
    used = sum(1 for pd in pushes if pd.felt.any())
    return fit_contact_offset(gaps, n_W, pushes=used)


def third_side(grid: Grid, pushes: Sequence[PushData], radius: float) -> FloatArray:
    """The outward normal (2,) in the table frame of the side one more push should go into
    so that the offset and the bias are both told best, where ``pushes`` did not tell them
    apart (:meth:`ContactOffset.kept`): of the directions a degree apart (refined between
    its neighbours), the one that, with as many touching steps as the pushes' mean, gives
    the touching steps' [n, 1] the largest least eigenvalue of their mean outer product
    (the spread that :func:`fit_contact_offset` asks :data:`MIN_SPREAD` of). Not merely
    away from the pushes: on the pregrasp bench's hammer, five pushes touched from
    directions all within 20 degrees of one line (two of them opposite), the side facing
    away from them all lay on that line too, and after a push into it the offset was still
    kept; the best side is across the line. Raises IdentificationError when no push
    touched the object."""
    per_push = [contact_gaps(grid, [pd], radius)[1] for pd in pushes]
    touched = sum(1 for n in per_push if len(n))
    if not touched:
        raise IdentificationError(
            'no push touched the object within reach of its outline: no side to tell the '
            "fingertip's offset from"
        )
    n_W = np.concatenate(per_push)
    A = np.column_stack((n_W, np.ones(len(n_W))))
    total, steps = A.T @ A, len(A)
    added = steps / touched

    def spread(angle: float) -> float:
        a = np.array([np.cos(angle), np.sin(angle), 1.0])
        return float(np.linalg.eigvalsh((total + added * np.outer(a, a)) / (steps + added))[0])

    angles = np.radians(np.arange(360.0))
    k = int(np.argmax([spread(a) for a in angles]))
    step = float(angles[1])
    best = minimize_scalar(
        lambda a: -spread(a),
        bounds=(angles[k] - step, angles[k] + step),
        method='bounded',
        options={'xatol': 1e-6},
    )
    angle = float(best.x) if -best.fun > spread(float(angles[k])) else float(angles[k])
    return np.array([np.cos(angle), np.sin(angle)])


@dataclass(frozen=True)
class Calibrated:
    """What :func:`calibrated_pushes` found and did: the offset measured (None when the
    pushes cannot tell it: ``unknown`` says why), the pushes to fit, whether the offset was
    taken off them, and why one above :data:`WARN_OFFSET_M` was not when it was to be
    (``kept``: :meth:`ContactOffset.kept`)."""

    found: ContactOffset | None
    pushes: list[PushData]
    taken_off: bool
    unknown: str = ''
    kept: str = ''

    def problems(self) -> list[str]:
        """The warning to give, one line, when the offset is above :data:`WARN_OFFSET_M`
        (saying whether it was taken off, or why not); none else."""
        found = self.found
        if found is None or not found.problem():
            return []
        if self.taken_off:
            return [found.problem() + '; taken off the fingertip before the fit']
        return [found.left_on() if self.kept else found.problem()]


def calibrated_pushes(
    grid: Grid, pushes: Sequence[PushData], radius: float, take_off: bool = True
) -> Calibrated:
    """The fingertip's offset from the object measured on ``pushes`` (a fingertip of
    ``radius`` [m]), and the pushes with it taken off (:func:`offset_pushes`) when
    ``take_off`` and it is above :data:`WARN_OFFSET_M`, as the task takes it off its poses;
    below, when the pushes cannot tell it, or when they touch from too few directions
    (:meth:`ContactOffset.kept`), the pushes as they are."""
    try:
        found = contact_offset(grid, pushes, radius)
    except IdentificationError as exc:
        return Calibrated(None, list(pushes), False, str(exc))
    if not (take_off and found.problem()):
        return Calibrated(found, list(pushes), False)
    if found.kept():
        return Calibrated(found, list(pushes), False, kept=found.kept())
    return Calibrated(found, offset_pushes(grid, pushes, found.p_offset_W), True)


def offset_pushes(
    grid: Grid, pushes: Sequence[PushData], p_offset_W: FloatArray
) -> list[PushData]:
    """``pushes`` with ``p_offset_W`` (2,) [m] taken off the fingertip's path, and each felt
    step's force placed again at the object's point closest to the fingertip there, as
    :func:`slide_core.identification.build_push` places it."""
    offset = np.asarray(p_offset_W, dtype=float).reshape(2)
    if not np.isfinite(offset).all():
        raise IdentificationError(f'the contact offset must be finite, got {offset} m')
    model = RigidModel.of(grid)
    out = []
    for pd in pushes:
        p_WF = pd.p_WF - offset
        p_OA = pd.push.p_OA.copy()
        s = np.flatnonzero(pd.felt)
        if s.size:
            X = (pd.X_steps[s] + pd.X_steps[s + 1]) / 2
            R = rotation(X[:, 2])
            p_OF = np.einsum('sji,sj->si', R, (p_WF[s] + p_WF[s + 1]) / 2 - X[:, :2])
            q_B, _ = model.closest_point(p_OF - model.p_OG)
            p_OA[s] = [on_cells(grid, q) for q in q_B + model.p_OG]
            # Steps that feel nothing keep the last felt contact (as build_push keeps them).
            last = np.maximum.accumulate(np.where(pd.felt, np.arange(len(p_OA)), -1))
            p_OA = np.where((last >= 0)[:, None], p_OA[np.maximum(last, 0)], p_OA)
        push = WrenchPush.create(grid, p_OA, pd.push.f_W, pd.push.dt, pd.push.tau)
        out.append(replace(pd, push=push, p_WF=p_WF))
    return out
