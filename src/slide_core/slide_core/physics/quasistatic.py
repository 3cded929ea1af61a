"""Quasi-static pushing of a grid of cells: the planner's batched push model.

The dynamic core (:mod:`slide_core.physics`) solves one complementarity problem per step;
where cells near the instantaneous centre of rotation keep reversing, its explicit active
sets fail and every step falls back to the general solver (seconds per push and model).
The planner simulates hundreds of candidate pushes for every model of the belief, so it
uses the quasi-static limit of the same model instead: at pushing speeds (5 cm/s) the
object's kinetic energy is negligible next to what friction dissipates, and the motion
of each small fingertip displacement is the one that minimises the dissipated power
(the maximum-dissipation principle behind limit surfaces, Goyal et al. 1991, here exact
for the cells' point supports rather than an ellipsoid fit):

    D(nu) = sum_i c_i |J_i nu| + c_tau |omega|,   c_i = mu_i N_i,
    c_tau = SPIN_ARM w sum_i c_i  (the core's merged torsion; 0 with SPIN_ARM = 0)

where ``nu = (dx, dy, dtheta)`` is a body displacement at the cell centroid G, ``J_i``
the cell's velocity Jacobian and ``N_i`` the cell's normal load under the chosen support
model (:mod:`slide_core.physics.support`; ``m_i g`` under ``'cell-mass'``). Per step
(``step`` metres of fingertip travel):

- No contact (the fingertip does not reach the object within the step): it stays.
- Sticking contact at the object point q: the contact point follows the fingertip
  (tangentially) and is pushed out of penetration (normally), ``J_q nu = dc``; one degree
  of freedom is left (a rotation about q), found by bisection on the convex D.
- The contact force is the gradient of D with respect to dc. If it leaves the friction
  cone ``|f_t| <= mu_tip f_n``, the contact slides: nu keeps the normal constraint, the
  tangential slip beta and the rotation alpha minimise ``D - sigma mu_tip f_n beta`` (the
  friction force does work on the cone's edge), with f_n updated from the solution a few
  times (a fixed point; each inner problem is convex, solved by coordinate bisection:
  alpha, then beta, then a line search along the round's change of both, since on a
  curved outline rotation and slip are coupled and the alternation alone zigzags).

Each one-dimensional problem is 22 bisection steps on the derivative of D; the compiled
kernel (:mod:`slide_core.physics.kernels_quasistatic`) locates the sign change by
safeguarded Newton steps and replays the bisection from it, so it returns the bisection's
answer at a third of the passes over the cells, for every hypothesis of a batch in one call.

Only the products c_i = mu_i N_i matter for the motion (quasi-statically, mass
distribution acts through friction alone: under the rigid support through the total mass
and the centre of mass); the centre of mass matters for balance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, Grid, check_pose, rotation
from slide_core.physics import kernels_quasistatic
from slide_core.physics.rigid import SPIN_ARM, RigidModel, push_heights, tipping_limits
from slide_core.physics.simulate import check_fingertip_start
from slide_core.physics.support import DEFAULT_SUPPORT


@dataclass(frozen=True, eq=False)
class QuasiStaticRollout:
    """Poses X_WO (B, S+1, 3) after each fingertip step; touching and slipping (B, S)."""

    X_WO: FloatArray
    touching: np.ndarray
    slipping: np.ndarray


def push(
    grid: Grid,
    mass: ArrayLike,
    friction: ArrayLike,
    X_WO0: ArrayLike,
    p_WF0: ArrayLike,
    direction_W: ArrayLike,
    travel: float,
    radius: float,
    mu_tip: float,
    step: float = 0.002,
    support: str = DEFAULT_SUPPORT,
    area: ArrayLike | None = None,
    push_height: ArrayLike = 0.0,
) -> QuasiStaticRollout:
    """Push B hypotheses with a fingertip disc moving straight from ``p_WF0`` along
    ``direction_W`` for ``travel`` metres, in steps of ``step`` metres.

    Args:
        grid: the object's cells.
        mass, friction: (B, n) or (n,) per-cell maps [kg], [-].
        X_WO0: (3,) or (B, 3) start poses, table frame.
        p_WF0: (2,) fingertip centre at the start, outside the object [m].
        direction_W: (2,) push direction (normalised here).
        travel: push length [m]; radius: fingertip radius [m]; mu_tip: its friction.
        support, area: the support model and each cell's carried area fraction (0 for a
            cell over the table's edge; the grid's own, :attr:`Grid.area`, when omitted), held
            for the push.
        push_height: the fingertip force's height above the table [m], one or (n,) per
            cell (:meth:`slide_core.model.Fingertip.force_heights`): its moment tips the cells'
            loads towards the push, step by step with the force of the step before; 0: no
            moment.
    """
    m = np.atleast_2d(np.asarray(mass, dtype=float))
    mu = np.atleast_2d(np.asarray(friction, dtype=float))
    if m.shape[-1] != grid.n or mu.shape[-1] != grid.n:
        raise SlideInputError(f'mass and friction must have {grid.n} values per hypothesis')
    if m.shape[0] != mu.shape[0] and 1 not in (m.shape[0], mu.shape[0]):
        raise SlideInputError(
            f'mass and friction give {m.shape[0]} and {mu.shape[0]} hypotheses: give as many '
            'of each, or one of either'
        )
    m, mu = np.broadcast_arrays(m, mu)
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(mu))) or np.any(m < 0) or np.any(mu < 0):
        raise SlideInputError('mass and friction must be finite and non-negative')
    B = m.shape[0]
    X0 = check_pose(X_WO0, 'X_WO0')
    if X0.shape not in ((3,), (B, 3)):
        raise SlideInputError(f'X_WO0 must be (3,) or ({B}, 3), got {X0.shape}')
    d = np.asarray(direction_W, dtype=float)
    p0 = np.asarray(p_WF0, dtype=float)
    if d.shape != (2,) or p0.shape != (2,) or not np.all(np.isfinite(np.r_[d, p0])):
        raise SlideInputError('p_WF0 and direction_W must be finite 2-vectors')
    if np.linalg.norm(d) == 0 or not (travel > 0 and step > 0 and radius > 0 and mu_tip >= 0):
        raise SlideInputError('direction non-zero; travel, step, radius > 0; mu_tip >= 0')
    d = d / np.linalg.norm(d)
    model = RigidModel.of(grid, support, area)
    c = mu * model.loads(m)  # (B, n) friction force of each cell [N]: mu_i N_i
    # With no friction anywhere the least-dissipation motion is not unique: a 6 mm push
    # along -x was predicted to move the object 4 cm sideways and turn it 0.5 rad.
    bare = np.flatnonzero(~(c.sum(axis=1) > 0))
    if bare.size:
        raise SlideInputError(
            f'hypothesis {int(bare[0])} has no friction under it (mass or friction zero on '
            'every supported cell): a quasi-static push cannot say where it goes'
        )
    # (It passed through, the object stayed and every step read as touching.)
    X0b = np.broadcast_to(X0, (B, 3))
    p_WG = X0b[:, :2] + np.einsum('kij,j->ki', rotation(X0b[:, 2]), model.p_OG)
    check_fingertip_start(model, p0, radius, p_WG, X0b[:, 2])
    h_push = push_heights(model, push_height)
    c_tip = tipping_limits(model, m, mu, 1.0, h_push)  # per second: forces [N per N m]
    S = max(1, int(np.ceil(travel / step)))
    X = np.zeros((B, S + 1, 3))
    touching = np.zeros((B, S), dtype=bool)
    slipping = np.zeros((B, S), dtype=bool)
    kernels_quasistatic.push_batch(
        np.ascontiguousarray(c, dtype=float),
        SPIN_ARM * grid.cell_size * c.sum(axis=1),
        model.r_B,
        model.p_OG,
        grid.cell_size / 2,
        np.array(np.broadcast_to(X0, (B, 3)), dtype=float),  # writable: one compiled signature
        p0,
        d,
        travel / S,
        S,
        float(radius),
        float(mu_tip),
        X,
        touching,
        slipping,
        c_tip,
        h_push,
        model.outline_B,
    )
    return QuasiStaticRollout(X, touching, slipping)
