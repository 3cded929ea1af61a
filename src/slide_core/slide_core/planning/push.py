"""Push selection: paper 2's multiverse rule over the outline's sides, refined along the
chosen side by finite differences (paper 1)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import (
    FloatArray,
    Grid,
    check_pose,
    polygon_coverage,
    push_sides,
    rotation,
    se2_distance,
    to_world,
    wrap_angle,
)
from slide_core.model import Belief, Primitive, Table, approach_clear, side_met, stroke_clear
from slide_core.physics import PhysicsError, RigidModel, Support, quasistatic
from slide_core.planning.balance import WEIGHT_TOLERANCE, fall_probability, falls, in_workspace
from slide_core.planning.config import PlannerConfig, PlanningError

TIP_GAP = 0.0005  # m between fingertip and object at the start of a simulated push


@dataclass(frozen=True)
class PushPlan:
    """A chosen push and what the belief predicts of it.

    Attributes:
        primitive: the push (contact point on the outline, inward normal, travel, speed;
            object frame at the start).
        p_WF0: (2,) fingertip centre where the simulated push starts (touching), table
            frame [m].
        predicted_X_WO: (K, 3) each model's final pose; expected_distance: their weighted
            SE(2) distance to the target [m]; fall_probability: weight of the models that
            end unbalanced; simulations: model rollouts spent choosing it.
    """

    primitive: Primitive
    p_WF0: FloatArray
    predicted_X_WO: FloatArray
    expected_distance: float
    fall_probability: float
    simulations: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.primitive.to_dict(),
            'expected_distance_m': self.expected_distance,
            'fall_probability': self.fall_probability,
            'simulations': self.simulations,
        }


def carried_area(belief: Belief, X_WO: FloatArray, table: Table) -> FloatArray | None:
    """(n,) the fraction of each cell's square the table carries at pose X_WO (cells over
    its edge carry nothing; a cell the object covers in part carries that part,
    :attr:`Grid.area`), or None when the whole object is on the table, or when some model
    of the belief could not stand on the carried part (it says the object tips where it
    is: the balance test, not the push model, deals with that)."""
    corners_W = np.array(
        [[0.0, -table.width / 2], [table.depth, -table.width / 2],
         [table.depth, table.width / 2], [0.0, table.width / 2]]
    )  # fmt: skip
    R = rotation(float(X_WO[2]))
    corners_O = (corners_W - X_WO[:2]) @ R  # R^T (p_W - p_WO), row by row
    on_table = polygon_coverage(belief.grid, corners_O)
    if np.all(on_table >= 1.0):
        return None
    area = on_table * belief.grid.area
    try:
        Support.of(belief.grid, belief.support, area).loads(belief.mass)
    except PhysicsError:
        return None
    return area


@dataclass(frozen=True)
class Side:
    """A piece of the outline a push can start on (object frame): its middle, inward
    normal, tangent and half-length [m] (contacts lie within 85% of it)."""

    mid_O: FloatArray
    n_in: FloatArray
    tangent: FloatArray
    half: float


class PushEvaluator:
    """Simulates batches of candidate pushes (side, offset) with every model at once."""

    def __init__(
        self,
        belief: Belief,
        X_WO: FloatArray,
        target: FloatArray,
        config: PlannerConfig,
        travel: float,
    ) -> None:
        self.belief, self.X, self.target, self.config = belief, X_WO, target, config
        self.rho = belief.radius()
        # Cells over the table's edge carry nothing while this push runs (from its start).
        self.area = carried_area(belief, X_WO, config.table)
        self.model = RigidModel.of(belief.grid, belief.support, self.area)
        # The fingertip's force, above the table, tips the loads towards the push.
        self.height = belief.push_heights(config.fingertip)
        self.travel = travel
        self.simulations = 0
        self.min_step = max(1, int(math.ceil(config.push_min / config.sim_step)))

    def start(self, side: Side, offset: float) -> tuple[FloatArray, FloatArray] | None:
        """Contact point and fingertip start (object frame), or None when the fingertip
        would start on the object (a concave outline)."""
        c_O = side.mid_O + side.tangent * offset
        p_OF = c_O - side.n_in * (self.config.fingertip.radius + TIP_GAP)
        _, dist = self.model.closest_point((p_OF - self.model.p_OG)[None, :])
        if dist[0] < self.config.fingertip.radius + 0.5 * TIP_GAP:
            return None
        if not approach_clear(self.belief.grid, c_O, side.n_in, self.config.fingertip):
            return None  # the arm could not come down where the push begins
        if not side_met(self.belief.grid, c_O, self.config.fingertip):
            return None  # a part lower than the fingertip's bottom: it would pass over
        if self.config.obstacles:
            stroke = Primitive.create(c_O, side.n_in, self.travel, self.config.push_speed)
            if not stroke_clear(stroke, self.X, self.config.fingertip, self.config.obstacles):
                return None  # the fingertip would come down on, or push into, an obstacle
        return c_O, p_OF

    def run(
        self, sides: Sequence[Side], offsets: Sequence[float]
    ) -> tuple[FloatArray, FloatArray]:
        """Expected distance to the target (C, S+1) and poses (C, K, S+1, 3) per candidate
        and fingertip step (inf where the fingertip cannot start or has not gone far)."""
        K, C = self.belief.K, len(sides)
        cfg = self.config
        X_PO = np.zeros((C, 3))
        R_WP = np.zeros((C, 2, 2))
        p_WP = np.zeros((C, 2))
        ok = np.ones(C, dtype=bool)
        R_WO = rotation(float(self.X[2]))
        for j, (side, off) in enumerate(zip(sides, offsets, strict=True)):
            s = self.start(side, off)
            if s is None:
                ok[j] = False
                continue
            d_W = R_WO @ side.n_in
            p_WP[j] = self.X[:2] + R_WO @ s[1]
            R_WP[j] = np.column_stack((d_W, [-d_W[1], d_W[0]]))
            # Object pose in the push frame P (origin at the fingertip start, x along d).
            X_PO[j, :2] = R_WP[j].T @ (self.X[:2] - p_WP[j])
            X_PO[j, 2] = self.X[2] - math.atan2(d_W[1], d_W[0])
        # Whole steps within the travel (rounded up, a push went past push_max: 0.084 m).
        S = max(1, int(math.floor(self.travel / cfg.sim_step + 1e-9)))
        cost = np.full((C, S + 1), np.inf)
        X_W = np.zeros((C, K, S + 1, 3))
        idx = np.nonzero(ok)[0]
        if len(idx) == 0:
            return cost, X_W
        roll = quasistatic.push(
            self.belief.grid,
            np.tile(self.belief.mass, (len(idx), 1)),
            np.tile(self.belief.friction, (len(idx), 1)),
            np.repeat(X_PO[idx], K, axis=0),
            [0.0, 0.0],
            [1.0, 0.0],
            S * cfg.sim_step,
            cfg.fingertip.radius,
            cfg.fingertip.mu,
            cfg.sim_step,
            support=self.belief.support,
            area=self.area,
            push_height=self.height,
        ).X_WO.reshape(len(idx), K, S + 1, 3)
        self.simulations += len(idx) * K
        for a, j in enumerate(idx.tolist()):
            p = roll[a, :, :, :2] @ R_WP[j].T + p_WP[j]
            yaw = roll[a, :, :, 2] + math.atan2(R_WP[j][1, 0], R_WP[j][0, 0])
            X_W[j] = np.concatenate((p, yaw[..., None]), axis=2)
            cost[j] = self.belief.weight @ se2_distance(X_W[j], self.target, self.rho)
        cost[:, : self.min_step] = np.inf
        return cost, X_W


def outline_sides(grid: Grid) -> list[Side]:
    """The pieces of the outline pushes start on (:func:`slide_core.geometry.push_sides`)."""
    mid, n_out, half, _ = push_sides(grid)
    return [
        Side(m, -n, np.array([-n[1], n[0]]), float(a))
        for m, n, a in zip(mid, n_out, half, strict=True)
    ]


def select_push(
    belief: Belief,
    X_WO: Any,
    target: Any,
    config: PlannerConfig,
    exhaustive: bool = False,
    check: Callable[[], None] | None = None,
) -> PushPlan:
    """The push that brings the object from X_WO closest to ``target`` in expectation over
    the belief (see the module docstring). Raises PlanningError when every candidate
    would make the object fall with probability above epsilon.

    ``check``, when given, is called before each candidate is refined and checked; an
    exception it raises stops the choice and reaches the caller (a cancel: the candidates
    of a large belief took seconds each)."""
    X = check_pose(X_WO, 'X_WO')
    Xt = check_pose(target, 'target')
    grid = belief.grid
    rho = belief.radius()
    gap = float(se2_distance(X, Xt, rho))
    travel = min(config.push_max, max(2 * config.push_min, gap + 0.02))
    ev = PushEvaluator(belief, X, Xt, config, travel)
    sides = outline_sides(grid)
    # Sides whose push direction points against the wanted translation cannot help unless
    # the object mostly has to turn.
    dp = Xt[:2] - X[:2]
    every = sides
    if np.linalg.norm(dp) > 0.5 * rho * abs(float(wrap_angle(Xt[2] - X[2]))) + 1e-9:
        R = rotation(float(X[2]))
        u = dp / np.linalg.norm(dp)
        sides = [s for s in sides if float((R @ s.n_in) @ u) > 0.0] or sides
    if exhaustive:
        offsets = np.linspace(-0.8, 0.8, config.exhaustive_per_side)
    else:
        offsets = np.array([0.0])
    cand = [(s, float(o) * s.half) for s in sides for o in offsets]
    cost, X_W = ev.run([c[0] for c in cand], [c[1] for c in cand])
    if not np.isfinite(cost).any() and len(sides) < len(every):
        # No fingertip fits where the sides that face the way to go start (the object's
        # back against a box): the others can still turn or slide it.
        cand = [(s, float(o) * s.half) for s in every for o in offsets]
        cost, X_W = ev.run([c[0] for c in cand], [c[1] for c in cand])
    if not np.isfinite(cost).any():
        tip = config.fingertip
        if not any(side_met(grid, s.mid_O + o * s.tangent, tip) for s, o in cand):
            # (said as no room to come down beside it, around an object on an open table)
            raise PlanningError(
                "no push can start: the object stands no higher than the fingertip's bottom "
                f'({tip.clearance * 1000:.1f} mm above the table) where a push would meet '
                'it: the fingertip would pass over it (lower fingertip.height in the '
                "workcell file, or check the grid's heights)"
            )
        raise PlanningError(
            'no push can start: the fingertip has no room to come down beside the object '
            f'(obstacles, or the table, around it; target {np.round(Xt, 3).tolist()})'
        )
    # Best step of each candidate; try them best first until one keeps the object safe.
    best_t = np.argmin(cost, axis=1)
    best_c = cost[np.arange(len(cand)), best_t]
    chosen: tuple[Side, float, int, float, FloatArray] | None = None
    for j in np.argsort(best_c)[:10]:
        if not np.isfinite(best_c[j]):
            break
        if check is not None:
            check()
        side, off = cand[j]
        cj, Xj, tj = float(best_c[j]), X_W[j], int(best_t[j])
        if not exhaustive:
            side, off, tj, cj, Xj = refine(ev, side, off, tj, cj, Xj)
        if lost_probability(belief, Xj[:, : tj + 1], config) <= config.epsilon + WEIGHT_TOLERANCE:
            chosen = (side, off, tj, cj, Xj)
            break
    if chosen is None:
        raise PlanningError(
            'every candidate push risks a fall, or carries the object off the table or into '
            f'an obstacle, with probability above {config.epsilon:.2f} (target '
            f'{np.round(Xt, 3).tolist()})'
        )
    side, off, tj, cj, Xj = chosen
    start = ev.start(side, off)
    assert start is not None  # the candidate was simulated, so its start was free
    c_O, p_OF = start
    return PushPlan(
        primitive=Primitive.create(c_O, side.n_in, tj * config.sim_step, config.push_speed),
        p_WF0=to_world(X, p_OF[None])[0],
        predicted_X_WO=Xj[:, tj].copy(),
        expected_distance=cj,
        fall_probability=fall_probability(belief, Xj[:, tj], config),
        simulations=ev.simulations,
    )


def leave_probability(belief: Belief, X_W: FloatArray, config: PlannerConfig) -> float:
    """The weight of the models whose predicted pose X_W (K, 3), or any pose of their
    predicted path (K, T, 3), leaves the workspace: a cell beyond the table's sides or far
    edge, or on an obstacle (:func:`in_workspace`; over the free edge is the balance
    test's)."""
    return float(belief.weight @ _leaves(belief, X_W, config))


def _leaves(belief: Belief, X_W: FloatArray, config: PlannerConfig) -> NDArray[np.bool_]:
    path = np.asarray(X_W, dtype=float).reshape(belief.K, -1, 3)
    return np.array(
        [any(not in_workspace(belief.grid, X, config) for X in poses) for poses in path]
    )


def lost_probability(belief: Belief, X_path: FloatArray, config: PlannerConfig) -> float:
    """The weight of the models a push loses: those that would not stay balanced at the
    end of their predicted path X_path (K, T, 3), or that leave the workspace anywhere on
    it. (Only the end was checked: a push carried the object through a 6 mm post it ended
    clear of; and falls and leaves were each allowed epsilon, together twice that.)"""
    lost = falls(belief, X_path[:, -1], config) | _leaves(belief, X_path, config)
    return float(belief.weight @ lost)


def refine(
    ev: PushEvaluator,
    side: Side,
    off: float,
    t: int,
    cost: float,
    X: FloatArray,
) -> tuple[Side, float, int, float, FloatArray]:
    """Finite-difference descent of the expected distance along the contact's side; the
    push length is re-chosen from each rollout (paper 1's refinement of both)."""
    h = side.half
    delta, step = 0.15 * h, 0.5 * h
    limit = 0.85 * h
    for _ in range(ev.config.refine_iterations):
        lo, hi = max(-limit, off - delta), min(limit, off + delta)
        c, X_W = ev.run([side, side], [lo, hi])
        e = c.min(axis=1)
        if not np.all(np.isfinite(e)):
            break
        grad = (e[1] - e[0]) / (hi - lo)
        if grad == 0.0:
            break
        trial = float(
            np.clip(off - step * np.sign(grad) * min(1.0, abs(grad) * h / 0.01), -limit, limit)
        )
        # Take the best of the probes and the step.
        c2, X2 = ev.run([side], [trial])
        options = [
            (cost, off, t, X),
            (float(e[0]), lo, int(np.argmin(c[0])), X_W[0]),
            (float(e[1]), hi, int(np.argmin(c[1])), X_W[1]),
            (float(c2[0].min()), trial, int(np.argmin(c2[0])), X2[0]),
        ]
        new = min(options, key=lambda o: o[0])
        if new[1] == off:
            step *= 0.5
        cost, off, t, X = new
    return side, off, t, cost, X
