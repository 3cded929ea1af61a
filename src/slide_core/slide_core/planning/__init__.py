"""Pre-grasp planning against a belief: balance at the edge, goal, grasp, path and pushes.

Modules in the order the planner uses them: :mod:`.config`, :mod:`.balance`, :mod:`.grasp`,
:mod:`.goal`, :mod:`.path`, :mod:`.push` and the closed loop :mod:`.loop`.

Paper 1 (Algorithms 2, 3) and paper 2 (Algorithms 3, 4), written for this workcell:

- Frames (:mod:`slide_core.geometry`): W the table frame, O the object frame; poses are
  X_WO = (x, y, theta) [m, m, rad].
- Balance (:func:`com_margins`): a rigid object resting on the table stays if its centre
  of mass lies inside the support polygon, the convex hull of the part of its footprint
  that is over the table (its cell squares clipped at the edge). The margin is the signed
  distance [m] of the centre of mass inside that polygon. Every model of the belief has its
  own centre of mass; the probability that the object stays (:func:`stay_probability`) is
  the weight of the models whose margin is at least the safety margin. While a push moves
  it, a model also needs its *lean* (:func:`push_leans`): the fingertip's force moves the
  centre of pressure towards the push, by up to the fingertip's clearance above the table
  (where the force acts once the object starts to tip) times the model's mean friction;
  the poses a path passes through and the goal need both (:func:`needed_margins`).
- Grasp (:func:`grasp_at`): a parallel gripper approaches along +x (towards the table),
  fingers above and below the object, pads' front end at least ``clearance`` short of the
  edge (the lower finger passes under the table top). The pads must hold at least
  ``min_grip`` metres of object along their depth (area covered / pad width) and the
  object must fit the opening. Lifted, the object hangs from the pads; its weight's moment
  about the held part over what the pads resist, along the approach and across it summed,
  is the hold ratio (:func:`hold_ratios`), which a goal keeps at most ``hold_max`` (0.5,
  half the pads' limit) for 1 - epsilon of the belief. Where the closed loop has brought
  the object, the grasp may also come in square to the object's sides, up to
  ``MAX_APPROACH_YAW`` from square to the edge (:func:`grasp_here`): pads as deep as the
  grip must sit square to the side they hold.
- Goal (:func:`select_goal`): poses along the edge at sampled yaws and overhangs; kept when
  a grasp exists, the pose is free of obstacles and the stay probability is at least
  1 - epsilon; chosen by pushing effort minus the margin that 1 - epsilon of the belief
  enjoys and minus the width of edge along which the grasp would hold (a long side
  parallel to the edge tolerates pose errors, a corner does not), plus its hold ratio
  (weighted). Goals whose grasp also holds with the object turned by :func:`landing_turn`
  either way (where the closed loop's shortest pushes land) come first; the others only
  when there is no such goal. A round object's yaw is free (:func:`yaw_seen`: no turn
  moves its outline by more than the camera's noise): the closed loop steers the goal's
  position and leaves the yaw it tracks, which only drifts, alone (:meth:`Goal.toward`);
  its goals are looked for at that yaw alone, where the loop will judge them.
- Staging (:func:`select_staging`): when the belief is too uncertain for a goal, a pose at
  the edge that every model keeps balanced (all but ``staging_epsilon`` of the belief)
  (:func:`staging_config`), pushed to so that identification sees the table carry only
  part of the object, which tells its centre of mass where pushes on the table do not.
- Path (:func:`plan_path`): OMPL's RRT* in SE(2) (distance sqrt(dx^2 + dy^2 + (rho
  dtheta)^2), rho the object's radius) through poses that keep the object on the table,
  clear of obstacles and balanced; resampled to waypoints. OMPL's generator is seeded
  per call, so an episode's seed fixes every path.
- Push (:func:`select_push`): paper 2's multiverse rule. Candidates are straight fingertip
  pushes at the object's outline sides along the inward normal; each is simulated with
  every model at once (:mod:`slide_core.physics.quasistatic`, the quasi-static limit of the core's
  per-cell model with a kinematic fingertip, batched as hypotheses that each start in
  their own push frame) and the push length is read off the rollout at every step; cells
  over the table's edge at the push's start carry nothing in it (:func:`carried_area`). The
  cost is the probability-weighted SE(2) distance to the waypoint. The best candidate's
  contact point is refined by finite differences along its side (paper 1); the
  exhaustive ablation instead tries several points per side and does not refine.
  Pushes after which more than epsilon of the belief would fall are rejected.
"""

from __future__ import annotations

from slide_core.planning.balance import (
    cells_overlap_box,
    com_margins_of,
    fall_probability,
    in_workspace,
    is_valid,
    margin_quantile,
    needed_margins,
    push_leans,
    rectangles_overlap_box,
    stay_probability,
    workspace_problem,
)
from slide_core.planning.config import (
    PlannerConfig,
    PlannerSettingsError,
    PlanningError,
    UncertainBeliefError,
    planner_config,
)
from slide_core.planning.goal import (
    Goal,
    check_on_table,
    goal_acceptable,
    goal_refusal,
    hold_quantile,
    landing_turn,
    select_goal,
    select_staging,
    staging_config,
    yaw_seen,
)
from slide_core.planning.grasp import (
    MAX_APPROACH_YAW,
    PRE_GRASP_HEIGHT,
    Grasp,
    grasp_at,
    grasp_here,
    grasp_waypoints,
    grasp_withdrawal,
    hold_floor,
    hold_ratios,
    square_approach,
    too_tall_to_grasp,
)
from slide_core.planning.loop import (
    Step,
    final_grasp,
    next_step,
    next_waypoint,
    reached,
    step_seed,
)
from slide_core.planning.path import SE2Path, plan_path, resample
from slide_core.planning.push import (
    TIP_GAP,
    PushPlan,
    carried_area,
    leave_probability,
    lost_probability,
    select_push,
)

__all__ = [
    'MAX_APPROACH_YAW',
    'PRE_GRASP_HEIGHT',
    'TIP_GAP',
    'Goal',
    'Grasp',
    'PlannerConfig',
    'PlannerSettingsError',
    'PlanningError',
    'PushPlan',
    'SE2Path',
    'Step',
    'UncertainBeliefError',
    'carried_area',
    'check_on_table',
    'com_margins_of',
    'fall_probability',
    'final_grasp',
    'goal_acceptable',
    'goal_refusal',
    'grasp_at',
    'grasp_here',
    'grasp_waypoints',
    'grasp_withdrawal',
    'hold_quantile',
    'hold_floor',
    'hold_ratios',
    'too_tall_to_grasp',
    'in_workspace',
    'cells_overlap_box',
    'rectangles_overlap_box',
    'workspace_problem',
    'is_valid',
    'landing_turn',
    'margin_quantile',
    'needed_margins',
    'next_step',
    'next_waypoint',
    'plan_path',
    'planner_config',
    'reached',
    'resample',
    'leave_probability',
    'lost_probability',
    'select_push',
    'select_goal',
    'select_staging',
    'staging_config',
    'push_leans',
    'square_approach',
    'stay_probability',
    'step_seed',
    'yaw_seen',
]
