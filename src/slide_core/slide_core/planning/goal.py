"""The goal: a pose at the edge where the object sticks out far enough to be grasped and
stays balanced for 1 - epsilon of the belief, while the last push brings it there too
(:func:`slide_core.planning.balance.needed_margins`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
import math
from typing import Any

import numpy as np

from slide_core.geometry import (
    FloatArray,
    Grid,
    boundary_rings,
    check_pose,
    rotation,
    se2_distance,
    to_world,
    turn_sweep,
    wrap_angle,
)
from slide_core.model import Belief, Table
from slide_core.planning.balance import (
    com_margins_of,
    in_workspace,
    is_valid,
    least_weight,
    margin_quantile,
    needed_margins,
    push_leans,
    staying_weight,
    workspace_problem,
)
from slide_core.planning.config import PlannerConfig, PlanningError, UncertainBeliefError
from slide_core.planning.grasp import (
    Grasp,
    grasp_at,
    grasp_here,
    hold_floor,
    hold_ratios,
    too_tall_to_grasp,
)


@dataclass(frozen=True)
class Goal:
    """A goal pose at the edge and what was judged about it.

    Attributes:
        X_WO: (3,) goal pose; stay_probability: of the belief, with the margin a push
        needs (:func:`slide_core.planning.balance.needed_margins`);
        margin: balance margin [m] that 1 - epsilon of the belief has; overhang: how far
        [m] the object sticks out past the edge; effort: SE(2) distance from the start [m];
        grasp: the grasp planned there; yaw_free: the camera cannot see the object turn
        (its outline is round, :func:`yaw_seen`), so the goal's yaw is not steered to;
        hold: the hold ratio that 1 - epsilon of the belief stays under
        (:func:`slide_core.planning.grasp.hold_ratios`; 1: the pads at their limit; at
        most ``PlannerConfig.hold_max``); staging: a staging pose (:func:`select_staging`),
        where the object is pushed to learn from, not grasped: the closed loop steers to
        it and judges it under :func:`staging_config`.
    """

    X_WO: FloatArray
    stay_probability: float
    margin: float
    overhang: float
    effort: float
    grasp: Grasp
    yaw_free: bool = False
    hold: float = 0.0
    staging: bool = False

    def toward(self, X_WO: Any) -> FloatArray:
        """The pose (3,) the closed loop steers to from X_WO: the goal's, or, when its yaw
        is free, the goal's position at X_WO's yaw. Steering a yaw the camera cannot see
        would push a round object round and round after a tracked yaw that only drifts."""
        if not self.yaw_free:
            return np.asarray(self.X_WO, dtype=float)
        return np.array([self.X_WO[0], self.X_WO[1], check_pose(X_WO, 'X_WO')[2]])

    def to_dict(self) -> dict[str, Any]:
        return {
            'X_WO': [float(v) for v in self.X_WO],
            'stay_probability': self.stay_probability,
            'margin_m': self.margin,
            'overhang_m': self.overhang,
            'effort_m': self.effort,
            'grasp': self.grasp.to_dict(),
            'yaw_free': self.yaw_free,
            'hold_ratio': self.hold,
            'staging': self.staging,
        }


def yaw_seen(grid: Grid, config: PlannerConfig) -> bool:
    """Whether the camera sees the object turn: some turn moves its outline by more than
    ``config.seen_turn`` (:func:`slide_core.geometry.turn_sweep`); always when that is 0."""
    return config.seen_turn <= 0.0 or turn_sweep(grid) > config.seen_turn


def goal_acceptable(
    belief: Belief, X_WO: Any, config: PlannerConfig, landed: bool = False
) -> Grasp | None:
    """The grasp if X_WO would do as a goal (graspable, valid, balanced, held), else None.
    ``landed``: X_WO is where the object was pushed to, and its grasp may come in square
    to the object's sides (:func:`slide_core.planning.grasp.grasp_here`); goals are
    planned with grasps square to the edge."""
    return _judge_goal(belief, X_WO, config, landed)[0]


def goal_refusal(belief: Belief, X_WO: Any, config: PlannerConfig) -> str | None:
    """Why X_WO would not do as a goal (the first condition of :func:`goal_acceptable`
    that fails, in words), or None when it would."""
    return _judge_goal(belief, X_WO, config)[1] or None


def _judge_goal(
    belief: Belief, X_WO: Any, config: PlannerConfig, landed: bool = False
) -> tuple[Grasp | None, str]:
    if not is_valid(belief, X_WO, config):
        problem = workspace_problem(belief.grid, X_WO, config)
        if problem:
            return None, problem
        return None, 'less than 1 - epsilon of the belief stays balanced there, with its margin'
    find = grasp_here if landed else grasp_at
    grasp = find(belief.grid, X_WO, config.gripper, belief.com()[belief.best])
    if grasp is None:
        return None, (
            f'no grasp of its overhang holds {config.gripper.min_grip * 100:.1f} cm of it '
            'between the pads'
        )
    hold = hold_quantile(belief, X_WO, grasp, config)
    if hold > config.hold_max:
        return None, (
            f'the pads would be asked {hold:.2f} of what they resist (at most {config.hold_max})'
        )
    both = _staying_and_held(belief, X_WO, grasp, config)
    if both < least_weight(config):
        return None, (
            f'only {_apart(both, 1.0 - config.epsilon)} of the belief both stays and is held '
            f'there, not {1.0 - config.epsilon:.2f}'
        )
    return grasp, ''


def _apart(value: float, bound: float) -> str:
    """``value`` with two decimals, or as many more (up to 6) as tell it from ``bound``
    written with two: 0.9499 of the belief was said as 'at most 0.95 ..., not 0.95'.
    Closer still, by how much it falls short: a staging pose refused for a model of weight
    1e-7 was said as 'at most 1.000000 ..., not 1.00'."""
    for digits in range(2, 7):
        text = f'{value:.{digits}f}'
        if float(text) != round(bound, 2):
            return text
    return f'{bound:.2f} less {bound - value:.1g}'


def _staying_and_held(belief: Belief, X_WO: Any, grasp: Grasp, config: PlannerConfig) -> float:
    """The weight of the belief that both stays balanced at X_WO (each model with
    :func:`slide_core.planning.balance.needed_margins`) and whose hold ratio at ``grasp``
    is within ``config.hold_max``: the models the task lifts. Each condition alone can
    hold for 1 - epsilon while together they hold for less (one model falls, another
    slips from the pads)."""
    held = hold_ratios(belief, X_WO, grasp, config.gripper) <= config.hold_max
    margins = np.where(held, com_margins_of(belief, X_WO), -np.inf)
    return staying_weight(belief, margins, needed_margins(belief, config))


def hold_quantile(belief: Belief, X_WO: Any, grasp: Grasp, config: PlannerConfig) -> float:
    """The hold ratio (:func:`slide_core.planning.grasp.hold_ratios`) that 1 - epsilon of
    the belief stays under: above ``config.hold_max``, more than epsilon of it asks more
    of the pads than they are trusted with."""
    ratios = hold_ratios(belief, X_WO, grasp, config.gripper)
    return -margin_quantile(belief, -ratios, config.epsilon)


ROBUST_YAW_OFFSETS = (0.0, 0.5, 0.25, 0.75)
"""Where, as a fraction of the yaw step, goals whose grasp survives the landing turn are
looked for: at the sampled yaws, then halfway and a quarter of the way between them."""


def select_goal(
    belief: Belief,
    X_WO: Any,
    config: PlannerConfig,
    progress: Callable[[float], None] | None = None,
) -> Goal:
    """The goal pose at the edge for an object now at X_WO (see the module docstring).

    Goals whose grasp still holds with the object turned by :func:`landing_turn` either way
    come first, looked for at the sampled yaws and then between them
    (``ROBUST_YAW_OFFSETS``): the closed loop stops wherever the object does as a goal,
    and its last pushes, at least ``push_min`` long, land about that far from the goal's
    yaw. A goal only the exact yaw makes graspable (a narrow tip sticking out) is taken
    only when no other goal exists. The goal's yaw is free when the camera cannot see the
    object turn (:func:`yaw_seen`): the closed loop then steers its position alone, and
    goals are looked for at X_WO's yaw alone.

    Raises PlanningError when no sampled pose is graspable and balanced, saying which
    condition failed (:func:`_no_goal`); UncertainBeliefError when the only condition
    failed is that too little of the belief stays; PlanningError too when X_WO puts no
    cell of the object over the table (no object rests there: a pose in another frame, or
    of something else).

    ``progress``, when given, is called with the fraction [0, 1] of the longest search
    done after each yaw it has tried (a failing search of a large object takes tens of
    seconds); an exception it raises stops the search and reaches the caller (a cancel)."""
    X0 = check_pose(X_WO, 'X_WO')
    try:
        check_on_table(belief.grid, X0, config.table)
    except PlanningError as exc:
        raise PlanningError(f'no goal: {exc}') from None
    turn = landing_turn(belief, config)
    step = 2.0 * np.pi / config.goal_yaws
    # The yaws at which such a grasp holds can lie between the sampled ones (a window
    # narrower than the yaw step): before giving up on them, the yaws halfway and a quarter
    # of the way between are tried too.
    free = not yaw_seen(belief.grid, config)
    grasps = _Grasps(belief, config)
    # A free yaw is not steered to: the object arrives at the yaw it has (a ring's goal at
    # a yaw 0.35 rad from it was refused where the object came, at its own yaw, and the
    # loop gave up). Its goals are looked for at that yaw alone.
    offsets = (0.0,) if free else ROBUST_YAW_OFFSETS
    # The passes: one per robust offset, the goal without the landing turn, why no goal.
    tick = _Ticks(len(offsets) + 2, len(_goal_yaws(X0, config, free)), progress)
    for offset in offsets:
        goal = _best_goal(belief, X0, config, grasps, turn, offset * step, tick, free)
        if goal is not None:
            tick.finish()
            return replace(goal, yaw_free=free)
    goal = _best_goal(belief, X0, config, grasps, 0.0, tick=tick, free=free)
    if goal is None:
        error = _no_goal(belief, X0, config, grasps, tick, free)
        tick.finish()
        raise error
    tick.finish()
    return replace(goal, yaw_free=free)


def staging_config(config: PlannerConfig) -> PlannerConfig:
    """The settings a staging pose is chosen, steered to and judged under
    (:func:`select_staging`): all the belief but ``config.staging_epsilon`` (0 by default:
    every model; ``epsilon`` where that is less) stays balanced, with the margins a push
    needs, on the way too; and the pads are asked at most what they resist (hold_max 1: no
    safety factor, since nothing is lifted there; a pose no grasp could ever use is not
    worth reaching)."""
    return replace(config, epsilon=min(config.staging_epsilon, config.epsilon), hold_max=1.0)


def select_staging(
    belief: Belief,
    X_WO: Any,
    config: PlannerConfig,
    progress: Callable[[float], None] | None = None,
) -> Goal:
    """A staging pose at the edge for a belief too uncertain for a goal
    (:class:`UncertainBeliefError`): the goal :func:`select_goal` chooses under
    :func:`staging_config`, marked ``staging``.

    Why: on the table every cell is carried, and a push measures the friction forces
    mu_i N_i. The loads N_i of a rigid object depend on its centre of mass, but a friction
    map scaled cell by cell matches the same forces for a range of centres of mass, so
    more pushes there narrow that range little (a hammer's belief stayed at 0.94 held
    through five more). With part of the object past the edge, the table carries only the
    cells over it, and their loads shift with the centre of mass otherwise than on the
    table, so the pushes that bring the object there, each followed by an identification,
    can tell what the pushes on the table left open; and the object is brought towards
    the edge meanwhile, where the goal will be. (Measured on the graph's hammer: of four
    runs that staged, one found its goal after pushes with the object 3 and 6 cm past the
    edge, three after pushes towards it still on the table.) All the belief but
    ``config.staging_epsilon`` stays balanced there, so the object is as safe there as the
    belief can say.

    Raises PlanningError (as :func:`select_goal`) when no pose keeps that much of the
    belief balanced and graspable."""
    return replace(select_goal(belief, X_WO, staging_config(config), progress), staging=True)


class _Ticks:
    """Counts the yaws a goal search has tried, out of ``passes`` passes of ``yaws``
    each, for a progress callback (none: counts nothing)."""

    def __init__(self, passes: int, yaws: int, progress: Callable[[float], None] | None) -> None:
        self.total, self.done, self.progress = max(passes * yaws, 1), 0, progress

    def __call__(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(min(self.done / self.total, 1.0))

    def finish(self) -> None:
        if self.progress is not None:
            self.progress(1.0)


class _Grasps:
    """:func:`grasp_at` for the most probable model of ``belief``, each pose's computed
    once in a goal search: its last passes (the goal without the landing turn, and why no
    goal) try the first pass's poses again (a goal search that found no goal for a 95 cm
    square of 0.18 kg took 49 s, 2 ms a grasp)."""

    def __init__(self, belief: Belief, config: PlannerConfig) -> None:
        self.grid, self.gripper = belief.grid, config.gripper
        self.com_O = belief.com()[belief.best]
        self.known: dict[tuple[float, float, float], Grasp | None] = {}

    def __call__(self, X_WO: FloatArray) -> Grasp | None:
        key = (float(X_WO[0]), float(X_WO[1]), float(X_WO[2]))
        if key not in self.known:
            self.known[key] = grasp_at(self.grid, X_WO, self.gripper, self.com_O)
        return self.known[key]


def check_on_table(grid: Grid, X_WO: FloatArray, table: Table) -> None:
    """PlanningError unless some cell centre of ``grid`` at X_WO lies over the table top.
    Not its centre of mass: the closed loop asks from wherever the object is, and a model
    of the belief may put that past the edge. The planner's goals and pushes, and the
    executor's pushes, are refused with it."""
    t = table
    p_WC = to_world(X_WO, grid.p_OC)
    over = (p_WC[:, 0] >= 0.0) & (p_WC[:, 0] <= t.depth) & (np.abs(p_WC[:, 1]) <= t.width / 2)
    if not over.any():
        raise PlanningError(
            f'the object pose {np.round(X_WO, 4).tolist()} puts no part of the '
            f'object over the table (x 0 to {t.depth} m, |y| up to {t.width / 2} m, table '
            'frame): no object rests there (is the pose in the table frame?)'
        )


def landing_turn(belief: Belief, config: PlannerConfig) -> float:
    """How far [rad] from a goal's yaw the closed loop lands: half the turn of the shortest
    push (``push_min``) applied at the object's radius."""
    return 0.5 * config.push_min / belief.radius()


def _best_goal(
    belief: Belief,
    X0: FloatArray,
    config: PlannerConfig,
    grasps: _Grasps,
    turn: float,
    offset: float = 0.0,
    tick: Callable[[], None] | None = None,
    free: bool = False,
) -> Goal | None:
    """The best-scoring goal whose grasp holds at its yaw and at ``turn`` [rad] either
    side of it (0: at its yaw alone), at the sampled yaws turned by ``offset`` [rad] (X0's
    yaw alone when the yaw is ``free``), or None. ``tick`` is called after each yaw."""
    grid = belief.grid
    rho = belief.radius()
    corners = boundary_rings(grid).reshape(-1, 2)
    g = config.gripper
    need = g.clearance + g.min_grip + config.grasp_margin
    best: tuple[float, Goal] | None = None
    yaws = wrap_angle(_goal_yaws(X0, config, free) + offset)
    half_width = config.table.width / 2
    anchor = -(half_width - rho)
    need_k = needed_margins(belief, config)
    for yaw in yaws:
        if tick is not None:
            tick()
        R = rotation(float(yaw))
        turned = corners @ R.T
        x_min = float(turned[:, 0].min())
        x_ext = float(turned[:, 0].max()) - x_min
        # The y at which the footprint, turned so, stays between the table's sides (a
        # bound of the object's radius either way left a narrow bench no goal at all), on
        # the lattice the goals were sampled on within that bound.
        lo = -half_width - float(turned[:, 1].min())
        hi = half_width - float(turned[:, 1].max())
        step = config.goal_y_step
        k = np.arange(
            math.ceil((lo - anchor) / step - 1e-9), math.floor((hi - anchor) / step + 1e-9) + 1
        )
        ys = anchor + step * k
        ys = ys[np.argsort(np.abs(ys - X0[1]))]
        for o in np.arange(need, 0.7 * x_ext, 0.005):
            X = np.array([-x_min - o, 0.0, yaw])
            margins = com_margins_of(belief, X)
            p_stay = staying_weight(belief, margins, need_k)
            if p_stay < least_weight(config):
                continue
            margin = margin_quantile(belief, margins, config.epsilon)
            if best is not None:
                # The best score this yaw and overhang could reach: no sideways effort, the
                # widest grasp that counts. When that cannot beat the best, skip the grasp.
                least = (
                    float(se2_distance(np.array([X[0], X0[1], yaw]), X0, rho))
                    - config.margin_weight * min(margin, 0.05)
                    - config.grasp_weight * 0.05
                    - config.overhang_weight * o
                )
                if least >= best[0]:
                    continue
            if -margin_quantile(belief, -hold_floor(belief, X, g), config.epsilon) > (
                config.hold_max
            ):
                continue  # no grasp here could be trusted with the weight
            grasp = grasps(X)
            if grasp is None:
                continue
            ratios = hold_ratios(belief, X, grasp, g)
            hold = -margin_quantile(belief, -ratios, config.epsilon)  # hold_quantile's
            if hold > config.hold_max:
                continue
            held = ratios <= config.hold_max
            both = staying_weight(belief, np.where(held, margins, -np.inf), need_k)
            if both < least_weight(config):
                continue  # enough stay and enough are held, but not the same ones
            if turn > 0.0 and any(
                grasps(X + np.array([0.0, 0.0, d])) is None for d in (-turn, turn)
            ):
                continue
            for y in ys:
                Xy = np.array([X[0], y, yaw])
                if not in_workspace(grid, Xy, config):
                    continue
                effort = float(se2_distance(Xy, X0, rho))
                score = (
                    effort
                    - config.margin_weight * min(margin, 0.05)
                    - config.grasp_weight * min(grasp.width, 0.05)
                    - config.overhang_weight * o
                    + config.hold_weight * hold
                )
                if best is None or score < best[0]:
                    shifted = replace(grasp, p_WE=grasp.p_WE + np.array([0.0, y]))
                    best = (
                        score,
                        Goal(Xy, p_stay, margin, float(o), effort, shifted, hold=hold),
                    )
                break  # the nearest free y is the least effort for this yaw and overhang
    return None if best is None else best[1]


def _goal_yaws(X0: FloatArray, config: PlannerConfig, free: bool = False) -> FloatArray:
    """The yaws goals are looked for at from X0: ``config.goal_yaws`` of them round the
    circle from X0's, or X0's alone when the yaw is ``free`` (not steered to)."""
    if free:
        return np.array([float(X0[2])])
    return wrap_angle(X0[2] + np.linspace(-np.pi, np.pi, config.goal_yaws, endpoint=False))


def _no_goal(
    belief: Belief,
    X_WO: Any,
    config: PlannerConfig,
    grasps: _Grasps,
    tick: Callable[[], None] | None = None,
    free: bool = False,
) -> PlanningError:
    """Why :func:`select_goal` finds no goal for an object at X_WO: the first of its
    conditions that no pose it tries meets, in the order a person would fix them (the
    gripper's opening; sticking out far enough for the most probable model; a hold for the
    pads where it stays; pads that can carry its weight there; enough of the belief staying
    and held there, an UncertainBeliefError; room on the table)."""
    X0 = check_pose(X_WO, 'X_WO')
    grid = belief.grid
    g = config.gripper
    tall = too_tall_to_grasp(grid, g)
    if tall:
        return PlanningError(f'no goal: {tall}')
    need = g.clearance + g.min_grip + config.grasp_margin
    corners = boundary_rings(grid).reshape(-1, 2)
    i_best = int(np.argmax(belief.weight))
    need_k = needed_margins(belief, config)
    stays_best = held = lifted = 0
    least_hold = math.inf  # the most probable model's smallest hold ratio where it is held
    p_held = 0.0  # the most of the belief that stays and is held at one pose
    for yaw in _goal_yaws(X0, config, free):
        if tick is not None:
            tick()
        R = rotation(float(yaw))
        x = (corners @ R.T)[:, 0]
        for o in np.arange(need, 0.7 * float(np.ptp(x)), 0.005):
            X = np.array([-float(x.min()) - o, 0.0, yaw])
            stays = com_margins_of(belief, X) >= need_k
            if not stays[i_best]:
                continue
            stays_best += 1
            floor = float(hold_floor(belief, X, g)[i_best])
            if held and floor >= least_hold and floor > config.hold_max:
                continue  # it could change neither the reason nor its figures
            grasp = grasps(X)
            if grasp is None:
                continue
            held += 1
            ratios = hold_ratios(belief, X, grasp, g)
            least_hold = min(least_hold, float(ratios[i_best]))
            if ratios[i_best] > config.hold_max:
                continue
            lifted += 1
            p_held = max(p_held, float(belief.weight @ (stays & (ratios <= config.hold_max))))
    if stays_best == 0:
        return PlanningError(
            f'no goal: at no yaw does the object stick out the {need * 100:.1f} cm a grasp '
            f'needs (clearance, grip and margin) with its centre of mass '
            f'{need_k[i_best] * 100:.1f} cm inside the edge (the balance margin '
            f'{config.balance_margin * 100:.1f} cm and the lean of a push, '
            f'{push_leans(belief, config.fingertip)[i_best] * 100:.1f} cm), even for the most '
            'probable model: it is too short or too narrow, or its centre of mass too near '
            'its side'
        )
    if held == 0:
        return PlanningError(
            f'no goal: where the object would stay, the pads hold less than '
            f'{g.min_grip * 100:.1f} cm of it (what sticks out is too narrow: a corner or a '
            'thin part)'
        )
    if lifted == 0:
        weight = float(belief.mass[i_best].sum())
        return PlanningError(
            f'no goal: wherever the pads would hold it, the weight of {weight:.2f} kg pulls '
            f"on them with {least_hold:.2f} of the moment they can resist (the fingers' "
            f'{g.force:.0f} N over the held length and the pad width), more than the '
            f'{config.hold_max:.2f} they are trusted with: its centre of mass is too far from '
            'any overhang it can stick out; a stronger grip or longer pads would be needed'
        )
    if p_held < least_weight(config):
        return UncertainBeliefError(
            f'no goal: where the pads would hold it, at most '
            f'{_apart(p_held, 1.0 - config.epsilon)} of the belief stays and is held, not '
            f'{1.0 - config.epsilon:.2f}: the belief is too uncertain (explore more)'
        )
    return PlanningError(
        'no goal: every balanced pose the pads would hold puts the object outside its '
        'workspace (obstacles, or the table too narrow)'
    )
