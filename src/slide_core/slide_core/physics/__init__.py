r"""Planar grid-of-cells physics: a pushed object sliding on a table, with mass and friction
gradients.

The object is a grid of ``n`` square cells (:class:`slide_core.geometry.Grid`) rigidly attached
to each other; cell ``i`` has mass ``m_i`` [kg] and Coulomb friction ``mu_i`` [-] against
the table. Two simulators share one discrete model (below): the *reference* one
(:mod:`slide_core.physics.reference`) keeps the paper's per-cell 3-DOF state and weld
constraints; the *fast* one here reduces the welded cells to one rigid body in SE(2),
vectorised over a batch of (mass, friction) hypotheses.

The discrete model (a consistent version of Song & Boularias 2020, Fig. 2)
-------------------------------------------------------------------------
Time step ``h`` [s]; semi-implicit Euler: velocities ``v+`` from the contact problem, then
positions ``x+ = x + h v+``. Per step:

1. **Impulses, not forces.** The paper bounds the friction magnitudes ``lambda_f`` (an
   impulse, N s) by ``mu diag(M)`` (kg, or kg m^2 for the rotational entries): the units
   do not match and the bound lacks gravity and the step. Here a cell's support friction
   impulse is bounded by ``L_i = mu_i N_i h`` with ``N_i`` the cell's normal load. The
   papers take ``N_i = m_i g`` (``support='cell-mass'``); a rigid object's table pressure is
   linear across its footprint instead, set by its total mass and centre of mass
   (``support='rigid'``, the default; derivation in :mod:`slide_core.physics.support`).
2. **Rotation rows.** The paper gives each cell a friction row on its own rotation, bounded
   like the translational one. The kernels keep that row, as one torsion of the welded body
   with the limit ``L_tau = SPIN_ARM w sum_i mu_i N_i h``, and ``SPIN_ARM`` is 0: a cell
   resists spinning about its own centre only when the body turns about a point in or
   near it, while the merged row resists every rotation (with the uniformly loaded square's
   lever 0.383 the core kept the twin's objects from turning: 3.07 mm against 1.76 mm
   without, :data:`SPIN_ARM` has the figures). Cells are thus Coulomb points at their
   centres, exact as cells get smaller. Cell inertia is ``I_i = m_i w^2 / 6`` as in the
   paper.
3. **Welds.** The paper's ``J_e`` has two rows per adjacent pair, which pins the pair like
   a hinge (a 2x2 block of cells would then be a four-bar linkage, not rigid). We weld each
   pair with three rows (equal spin, equal velocity of the shared edge's midpoint) over a
   spanning tree of the adjacency graph: exactly ``3(n-1)`` independent rows, so the cells
   move as one rigid body and ``J_e M^-1 J_e^T`` is invertible. Loop-closing pairs are
   implied by the tree and left out.
4. **Friction directions (J_f from the previous velocity).** As in the paper, a sliding
   cell's friction acts along ``-d_i`` with ``d_i`` the direction of its velocity at the
   start of the step, magnitude ``lambda_i in [0, L_i]``, complementary to the cell still
   moving forward along ``d_i`` (Fig. 2: it can stop the cell along ``d_i`` but never push
   it backwards). The paper leaves ``d_i`` undefined for a cell at rest. A cell whose speed
   is below ``MOVING_SPEED`` gets the polygonal Coulomb cone of Stewart and Trinkle instead:
   ``N_PYRAMID`` directions fixed to the cell, the sum of their magnitudes bounded by
   ``L_i``. Static friction (sticking) is thereby exact up to the polygon, which is what a
   push below the friction limit needs. Rotation rows likewise: one row against the
   previous spin, or +-1 when not spinning.
5. **Complementarity** as in Fig. 2, generalised to groups (see :mod:`slide_core.physics.mlcp`).
   The problem is the KKT system of
   ``min_v 1/2 |v - v*|_M^2 + sum_groups L_g max(0, max_r g_r . v)`` subject to the
   welds, whose solution velocity is unique.
6. **Pushing.** (a) A given external force ``f_W`` (and optional torque) at a material point
   of the object (the F/T-measured push the identification uses), added to ``v*``.
   (b) A kinematic fingertip: a disc of radius ``r_F`` whose centre follows a given path;
   unilateral contact with the object's nearest cell square, or with its real outline when
   it has one (:attr:`slide_core.geometry.Grid.outline`, which perception traces, or
   ``simulate(outline=)``: a polygon, its closest point and outward normal; square cells
   misplace a curved outline by up to half a cell), position-stabilised so the gap after
   the step is non-negative, with Coulomb friction ``mu_F`` (two tangential rows, limit
   ``mu_F lambda_n``). The fast simulator, its Python steps, the reference simulator and
   the quasi-static planning model all touch the outline; the gradients take measured
   wrenches, with no fingertip to touch anything.

Sign conventions: frames and angles as in :mod:`slide_core.geometry` (z up, counter-clockwise
positive). Generalised coordinates per cell and for the rigid body are ``(x, y, theta)``
(the paper lists the mass diagonal as ``(I, M, M)`` but the state as ``(x, y, theta)``;
we use ``(x, y, theta)`` for both).

The rigid reduction
-------------------
Welded cells move with one twist; with the body frame B at the cells' (unweighted)
centroid G with the object's orientation, cell offsets ``r_i`` are constant and the mass
matrix in B is ``M_B = sum_i m_i (J_i^T J_i + e_3 e_3^T w^2/6)`` with
``J_i = [[1, 0, -r_iy], [0, 1, r_ix]]``; the torsion rows of all cells share one direction
and merge into one group. A step is solved in B at the orientation at the start of the
step, so nothing in it depends on the orientation except the applied force. When every
cell and the spin were moving and all friction stays saturated (the usual case while
sliding), the solution is explicit:
``v+ = v + M_B^-1 (P - sum_i L_i J_i^T d_i - L_tau s e_3)``, checked against the
complementarity conditions; otherwise (breakaway, stopping, cells near the instantaneous
centre that turn back, a fingertip contact that sticks or slips) the same MLCP as the
reference is solved, exactly, by a compiled primal active-set method over the friction
groups' pieces in the three body velocities (:mod:`slide_core.physics.kernels`, a few
microseconds), and by the QP solver only if that does not settle. A rollout without
gradients runs wholly compiled, every hypothesis and step in one call
(:func:`slide_core.physics.kernels_rollout.rollout`); with gradients the steps are solved in
Python as above and the general steps' solutions kept for the step Jacobians.
Positions are integrated at the centre of mass C, and the twist carried from one
step to the next is that of C (linear momentum), so a body sliding freely keeps its
momentum exactly whatever it spins; the reference simulator's re-projection onto the
rigid shape keeps the same two quantities (mass-weighted mean position and momentum),
which makes the two simulators agree to round-off.

Gradients
---------
For wrench-driven pushes the loss gradients with respect to every ``m_i`` and ``mu_i`` come
from the optimality conditions of each step's MLCP (the paper's section V), generalised:
on the active set of the solution (rows with ``lambda > 0``, groups at their limit) the
KKT conditions are linear equations, and differentiating them gives the step's Jacobians
with respect to the parameters and to the state entering the step. In the explicit case
this is the paper's ``W_M``/``W_mu`` formula with ``X = M^-1`` of the rigid body. Unlike
the paper (which keeps ``J_f`` constant because it uses observed states), a rollout loss
also differentiates the friction directions: ``d d_i / d v = (I - d_i d_i^T) / |u_i|``.
Forward-mode sensitivities are propagated through the rollout.

Where the model is not differentiable the gradient is one-sided, never NaN:
a cell at exactly zero friction or mass differentiates as if it were infinitesimally
positive; a step whose solution sits on a switching point (a row with zero impulse and zero
velocity, a group exactly at its limit with zero slip) uses the active set the solver
returned (an element of the generalised Jacobian); a sticking step (velocity zero with
friction inside its limits) has zero sensitivity, which is its true derivative; a cell or
spin below the moving threshold uses the fixed pyramid directions (derivative of the
directions zero).
"""

from __future__ import annotations

from slide_core.physics import limit_surface, quasistatic
from slide_core.physics.grad import LossGrad, one_step_loss, rollout_loss
from slide_core.physics.inputs import (
    FingertipPush,
    PhysicsError,
    Push,
    Rollout,
    WrenchPush,
    check_params,
    contact_cell,
)
from slide_core.physics.mlcp import MlcpError, MlcpSolution, solve_mlcp
from slide_core.physics.reference import simulate_reference, weld_tree
from slide_core.physics.rigid import MOVING_SPEED, N_PYRAMID, SPIN_ARM, RigidModel
from slide_core.physics.simulate import simulate
from slide_core.physics.support import (
    DEFAULT_SUPPORT,
    GRAVITY,
    SUPPORT_MODELS,
    Support,
    SupportKind,
    check_support,
    moment_loads,
)

__all__ = [
    'DEFAULT_SUPPORT',
    'GRAVITY',
    'MOVING_SPEED',
    'N_PYRAMID',
    'SPIN_ARM',
    'SUPPORT_MODELS',
    'FingertipPush',
    'LossGrad',
    'MlcpError',
    'MlcpSolution',
    'PhysicsError',
    'Push',
    'RigidModel',
    'Rollout',
    'Support',
    'SupportKind',
    'WrenchPush',
    'check_params',
    'check_support',
    'moment_loads',
    'contact_cell',
    'limit_surface',
    'one_step_loss',
    'quasistatic',
    'rollout_loss',
    'simulate',
    'simulate_reference',
    'solve_mlcp',
    'weld_tree',
]
