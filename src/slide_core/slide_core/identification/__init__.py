"""Identification: per-cell mass and friction maps from a few recorded pushes.

Data on one time step (:mod:`.pushes`), the loss in regression form (:mod:`.training`), bounds
(:mod:`.bounds`), optimisers (:mod:`.optimisers`), :func:`identify`, the choice of the next
exploratory push (:mod:`.explore`), the models for the centre of mass the pushes leave open
(:mod:`.spread`), held-out evaluation (:mod:`.evaluate`) and the fingertip's recorded contacts
as a check of the workcell's calibration (:mod:`.calibration`).

The loss: the one-step model in impulse space
---------------------------------------------
Paper 1 (Eq. 1) scores a hypothesis by simulating one step ahead from each observed state
with the measured force and comparing the predicted pose with the observed one. For slow
pushes that step is stiff: the push force nearly balances friction, so a hypothesis whose
friction is a little too high stops the object inside the step, and every such step needs
the general MLCP (measured: 80% of steps, 13 s per loss evaluation for 8 hypotheses and 5
pushes). We use the same step equation in its other form. Over a step in which the object
slides, every cell's friction acts against its velocity, so Newton-Euler about the object
origin O, in the object frame, reads

    w_push(t) = sum_i m_i Q_i(t) + sum_i c_i G_i(t),       c_i = mu_i N_i(m)

with, for cell i at r_i (velocity v_i and acceleration a_i from the observed poses):

    Q_i = [a_i ; (r_i x a_i + w^2/6 alpha) / rho]             inertia of the cell
    G_i = [v_i / |v_i|_e ; (r_i x v_i / |v_i|_e + k_s w s(omega)) / rho]   unit friction

where ``|v|_e = sqrt(|v|^2 + e^2)`` regularises the direction of nearly still cells,
``s(omega) = tanh(omega / omega_e)`` the sign of the spin (the simulator's spin row with
its lever ``k_s w``, ``k_s = SPIN_ARM``, 0 today: point cells), and ``rho`` turns torques
into forces (the cells' RMS radius).
w_push is the F/T force at the contact point (its torque about O included). The loss is
the mean squared residual over every step of the training pushes where the object moves
(still steps say nothing: static friction can be anything below its limit):

    L(m, mu) = mean_t | w_push(t) - Q(t) m - G(t) c |^2     [N^2]

with ``N(m)`` the cells' normal loads under the support model (:mod:`slide_core.physics.
support`: ``m_i g`` for the papers' loose cells, the rigid body's linear pressure by
default, which depends on the masses only through the total mass and centre of mass).
Its gradient is exact and cheap: dL/dm_j = -2 mean_t r_t . (Q_j + sum_i mu_i G_i dN_i/dm_j)
and dL/dmu_i = -2 mean_t r_t . (N_i G_i). One evaluation for K hypotheses is a few
matrix products (microseconds per hypothesis), so identification takes well under a second
and every optimiser below can be given thousands of evaluations. Because L is a convex
quadratic in (m, c) and the bounds are linear in (m, c), it has no spurious local minima
in those coordinates: what differs between models is how they split c into mass and
friction, which slow pushes only weakly observe (through inertia), as paper 2 says.

One "simulation" below is one evaluation of the loss for one hypothesis over all training
pushes (gradients come with it, as in the papers' analytic method).

Beyond the papers
-----------------
- Step control: spectral projected gradient (Barzilai-Borwein steps with a non-monotone
  Armijo backtracking on the projection arc) instead of a fixed learning rate.
- Warm start: the friction distribution c by bounded least squares (scipy ``lsq_linear``)
  at the initial masses, before the gradient steps.
- The F/T wrench's absolute scale is in the loss (not only the motion).
- The free-sliding phase after the fingertip stops is data like any other moving step.
- The steps up to and including the one in which the fingertip touches the object are
  not: it rests before the touch and slides for only part of that step, though the smoothed
  velocities say it moves (on the twin's pushes those steps held most of the true maps'
  loss, and with them in the fit the total mass came out 20 to 30% light and the centre of
  mass drawn towards the footprint's middle).
- Nor are the steps at a stroke's end, once the fingertip that the F/T still feels has
  slowed for good below a quarter of its speed (``SLOW_TIP``), or while it stands: the
  object comes to rest against it, held by static friction below its limit at the last.
  Tracked poses smoothed through that stop leave a speed of a few mm/s in random
  directions, which passed for sliding (on the twin's library pushes tracked at 30 Hz, the
  1% of the moving steps with the fingertip standing held half the true maps' loss).
  Measured on the library (8 objects x 3 draws of 5 training pushes), held-out error and
  centre of mass: tracked at 30 Hz 2.82 -> 1.75 mm and 11.8 -> 5.5 mm; at 10 Hz (the twin
  graph's camera) 3.49 -> 1.96 mm and 13.9 -> 7.8 mm; the twin's 100 Hz poses 1.21 -> 1.24
  mm and 2.68 -> 2.69 mm. (Leaving out only the standing steps: 2.19 and 6.4 mm at 30 Hz.)
- Both sides of the balance pass one filter. The accelerations are the Savitzky-Golay
  second derivative of the poses, a smoothing of the second differences over 5 steps; the
  forces had passed the same window's far lighter smoothing (its zeroth derivative), and
  least squares then gave inertia a share of each change of force that the smoothed
  accelerations lacked: the mass came out heavy (a block pushed by a force jumping between
  1.5 and 0.5 N, simulated without error: 9.5%; the twin's library pushes, 8 objects x 3
  draws: 16% with the twin's poses, 12% tracked at 30 Hz). The measured wrench and the
  friction wrenches now pass the accelerations' own filter (:class:`TrainingSet`), the
  friction none before the touch and, in the touch step, only for its share after the
  first force felt (:attr:`PushData.touch_share`: with the whole step, the mass came out
  4% light, with half of it 10% heavy). Measured on the same draws (``bench
  identification --seeds 3``): held-out 1.24 -> 1.19 mm, centre of mass 2.8 -> 2.75 mm,
  tracked 1.75 -> 1.65 mm and 5.55 -> 5.50 mm, total mass 16 -> 10% heavy (tracked 12 ->
  13%: not mended there), the true centre of mass in the models' hull on 22 of 24 (24
  before; seed 2: 6 of 8).
- The table's edge: on a step with part of the object over it, only the cells' parts on
  the table carry loads, at their centroids (:func:`slide_core.geometry.edge_support`), so
  pushes made near the goal, which the task identifies again from, tell the centre of mass
  from the friction map (:class:`TrainingSet`; on the table only their products act).
- The papers' final stage, as an option (:func:`refine`): the models refined on the
  simulator's own pose error over short windows of the training pushes, with its exact
  gradient, warm-started from the wrench-space solution. It costs a minute per object
  where identification costs a tenth of a second, so it is off unless asked for.

Bounds: per-cell mass at most ``density_max`` times the cell's volume (steel by default),
friction at most ``friction_max``. Paper 2's schedule for K models: for k <= K/2 the
friction bound is 2k/K of the maximum and the mass bound the maximum; above, friction at
its maximum and mass at (2k/K - 1) of it; each model starts at half its bounds.
"""

from __future__ import annotations

from slide_core.identification.bounds import (
    DENSITY_MAX,
    FRICTION_BOUND,
    Bounds,
    check_limits,
    schedule,
)
from slide_core.identification.calibration import (
    WARN_OFFSET_M,
    Calibrated,
    ContactOffset,
    calibrated_pushes,
    contact_gaps,
    contact_offset,
    fit_contact_offset,
    offset_pushes,
    third_side,
)
from slide_core.identification.errors import (
    IdentificationCancelledError,
    IdentificationError,
    IdentificationFailedError,
    OffTableError,
)
from slide_core.identification.evaluate import Evaluation, evaluate, final_errors, in_hull, replay
from slide_core.identification.explore import (
    STRATEGIES,
    Candidate,
    avoids_obstacles,
    candidates,
    choose,
    grid_candidates,
    on_table,
    outline_point,
    random_push,
    side_push,
)
from slide_core.identification.identify import (
    DEFAULT_BUDGET,
    MAX_BUDGET,
    MAX_MODELS,
    METHODS,
    Identification,
    check_settings,
    fit_problems,
    identify,
    softmax_weights,
)
from slide_core.identification.optimisers import OPTIMISERS, Progress
from slide_core.identification.pushes import (
    CONTACT_FORCE_N,
    MAX_POSE_GAP_S,
    MAX_TIP_GAP_S,
    SETTLE_S,
    STEP_S,
    PushData,
    PushSamples,
    SensorOffset,
    build_push,
    longest_gap,
    on_cells,
    push_fingerprint,
    push_from_samples,
    sensor_offset,
    smoothed_poses,
    tracking_noise,
)
from slide_core.identification.refine import WINDOW_S, refine
from slide_core.identification.spread import (
    COM_DIRECTIONS,
    MAX_COM_DIRECTIONS,
    com_spread,
    shift_com,
)
from slide_core.identification.training import TrainingSet

__all__ = [
    'COM_DIRECTIONS',
    'MAX_COM_DIRECTIONS',
    'CONTACT_FORCE_N',
    'MAX_POSE_GAP_S',
    'MAX_TIP_GAP_S',
    'DENSITY_MAX',
    'FRICTION_BOUND',
    'DEFAULT_BUDGET',
    'MAX_BUDGET',
    'MAX_MODELS',
    'METHODS',
    'OPTIMISERS',
    'SETTLE_S',
    'STEP_S',
    'STRATEGIES',
    'Bounds',
    'Candidate',
    'Evaluation',
    'Identification',
    'IdentificationCancelledError',
    'IdentificationError',
    'IdentificationFailedError',
    'OffTableError',
    'Progress',
    'PushData',
    'PushSamples',
    'SensorOffset',
    'TrainingSet',
    'WINDOW_S',
    'build_push',
    'Calibrated',
    'ContactOffset',
    'WARN_OFFSET_M',
    'calibrated_pushes',
    'contact_gaps',
    'contact_offset',
    'fit_contact_offset',
    'offset_pushes',
    'third_side',
    'longest_gap',
    'sensor_offset',
    'candidates',
    'grid_candidates',
    'check_limits',
    'avoids_obstacles',
    'on_table',
    'choose',
    'com_spread',
    'evaluate',
    'final_errors',
    'identify',
    'check_settings',
    'fit_problems',
    'in_hull',
    'on_cells',
    'outline_point',
    'push_fingerprint',
    'push_from_samples',
    'random_push',
    'side_push',
    'refine',
    'replay',
    'schedule',
    'shift_com',
    'smoothed_poses',
    'tracking_noise',
    'softmax_weights',
]
