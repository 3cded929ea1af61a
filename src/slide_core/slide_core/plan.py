"""Pre-grasp planning against a belief: balance at the edge, goal, grasp, path and pushes.

Paper 1 (Algorithms 2, 3) and paper 2 (Algorithms 3, 4), written for this workcell:

- Frames: W is the table frame of ``config/workcell.yaml``: z up, the free edge is the
  line x = 0, the table covers 0 <= x <= depth, |y| <= width / 2. O is the object frame of
  the grid (:mod:`slide_core.geometry`). Poses are X_WO = (x, y, theta) [m, m, rad].
- Balance (:func:`com_margins`): a rigid object resting on the table stays if its centre
  of mass lies inside the support polygon, the convex hull of the part of its footprint
  that is over the table (its cell squares clipped at the edge). The margin is the signed
  distance [m] of the centre of mass inside that polygon. Every model of the belief has its
  own centre of mass; the probability that the object stays (:func:`stay_probability`) is
  the weight of the models whose margin is at least the safety margin.
- Grasp (:func:`grasp_at`): a parallel gripper approaches along +x (towards the table),
  fingers above and below the object, pads' front end at least ``clearance`` short of the
  edge (the lower finger passes under the table top). The pads must hold at least
  ``min_grip`` metres of object along their depth (area covered / pad width) and the
  object must fit the opening.
- Goal (:func:`select_goal`): poses along the edge at sampled yaws and overhangs; kept when
  a grasp exists, the pose is free of obstacles and the stay probability is at least
  1 - epsilon; chosen by pushing effort minus the margin that 1 - epsilon of the belief
  enjoys and minus the width of edge along which the grasp would hold (a long side
  parallel to the edge tolerates pose errors, a corner does not).
- Path (:func:`plan_path`): OMPL's RRT* in SE(2) (distance sqrt(dx^2 + dy^2 + (rho
  dtheta)^2), rho the object's radius) through poses that keep the object on the table,
  clear of obstacles and balanced; resampled to waypoints.
- Push (:func:`select_push`): paper 2's multiverse rule. Candidates are straight fingertip
  pushes at the object's outline sides along the inward normal; each is simulated with
  every model at once (:mod:`slide_core.physics.quasistatic`, the quasi-static limit of the core's
  per-cell model with a kinematic fingertip, batched as hypotheses that each start in
  their own push frame) and the push length is read off the rollout at every step. The
  cost is the probability-weighted SE(2) distance to the waypoint. The best candidate's
  contact point is refined by finite differences along its side (paper 1); the
  exhaustive ablation instead tries several points per side and does not refine.
  Pushes after which more than epsilon of the belief would fall are rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
import math
from pathlib import Path
import time
from typing import Any

import numpy as np
from scipy.spatial import ConvexHull, QhullError
import yaml

from slide_core.errors import SlideInputError
from slide_core.evaluate import uniform_maps
from slide_core.geometry import FloatArray, Grid, check_pose, rotation, wrap_angle
from slide_core.identify import Belief
from slide_core.model import ObjectSpec
from slide_core.physics import RigidModel, quasistatic

TIP_GAP = 0.0005  # m between fingertip and object at the start of a simulated push


class PlanningError(SlideInputError):
    """No goal, path or push satisfies the constraints (the message says which and why)."""


# -- configuration ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Table:
    """The table top in its own frame: edge x = 0, 0 <= x <= depth, |y| <= width / 2 [m]."""

    depth: float = 0.80
    width: float = 1.20


@dataclass(frozen=True)
class Gripper:
    """A parallel gripper approaching the overhang horizontally.

    Attributes:
        max_opening: distance between the open fingers [m].
        finger_depth: length of the finger pads [m].
        finger_width: width of the finger pads [m].
        clearance: horizontal gap between the pads' front end and the table edge [m].
        min_grip: object length the pads must hold [m].
        height_margin: room left above and below the object in the open gripper [m].
    """

    max_opening: float = 0.08
    finger_depth: float = 0.04
    finger_width: float = 0.02
    clearance: float = 0.005
    min_grip: float = 0.04
    height_margin: float = 0.005


@dataclass(frozen=True)
class Obstacle:
    """An axis-aligned box on the table: centre (x, y) and half sizes [m], table frame."""

    centre: tuple[float, float]
    half_size: tuple[float, float]


@dataclass(frozen=True)
class PlannerConfig:
    """Everything the planner needs to know about the task and its tolerances.

    Attributes:
        epsilon: the fall probability a goal or an intermediate pose may have.
        balance_margin: distance [m] the centre of mass must keep inside the support.
        grasp_margin: overhang [m] a goal has beyond what the grasp needs (slack for
            the last push).
        push_speed: fingertip speed [m/s]; push_max: longest push [m]; push_min: shortest.
        sim_step: fingertip travel per step of the planner's push model [m].
        tip_radius, tip_mu: the fingertip's radius [m] and friction against objects.
        waypoint_step: spacing of the path's waypoints [m] (SE(2) distance).
        lookahead: a push aims at the farthest waypoint this close [m] (the next one at
            least).
        rrt_iterations: RRT* iterations per path; rrt_range: its longest edge [m].
        refine_iterations: finite-difference steps on the contact point.
        exhaustive_per_side: contact points per outline side in the exhaustive search.
        margin_weight: metres of pushing effort one metre of balance margin is worth.
        grasp_weight: ... one metre of graspable edge is worth (both capped at 5 cm).
        overhang_weight: ... one metre more overhang is worth (0: just what the grasp
            needs; large: as far out as balance allows, as the papers' goals ask).
        goal_yaws: yaws tried per goal search; goal_y_step: spacing along the edge [m].
    """

    table: Table = field(default_factory=Table)
    gripper: Gripper = field(default_factory=Gripper)
    obstacles: tuple[Obstacle, ...] = ()
    epsilon: float = 0.05
    balance_margin: float = 0.01
    grasp_margin: float = 0.01
    push_speed: float = 0.05
    push_max: float = 0.08
    push_min: float = 0.005
    sim_step: float = 0.002
    tip_radius: float = 0.008
    tip_mu: float = 0.3
    waypoint_step: float = 0.02
    lookahead: float = 0.06
    rrt_iterations: int = 600
    rrt_range: float = 0.06
    refine_iterations: int = 3
    exhaustive_per_side: int = 5
    margin_weight: float = 1.0
    grasp_weight: float = 1.0
    overhang_weight: float = 0.0
    goal_yaws: int = 36
    goal_y_step: float = 0.05

    def __post_init__(self) -> None:
        checks = {
            'epsilon': 0.0 <= self.epsilon < 1.0,
            'balance_margin': self.balance_margin >= 0.0,
            'grasp_margin': self.grasp_margin >= 0.0,
            'push_speed': self.push_speed > 0.0,
            'push_max': self.push_max > self.push_min > 0.0,
            'sim_step': 0.0 < self.sim_step <= 0.01,
            'tip_radius': self.tip_radius > 0.0,
            'tip_mu': self.tip_mu >= 0.0,
            'waypoint_step': self.waypoint_step > 0.0,
            'lookahead': self.lookahead > 0.0,
            'rrt_iterations': self.rrt_iterations >= 10,
            'rrt_range': self.rrt_range > 0.0,
            'refine_iterations': self.refine_iterations >= 0,
            'exhaustive_per_side': self.exhaustive_per_side >= 1,
            'goal_yaws': self.goal_yaws >= 1,
            'goal_y_step': self.goal_y_step > 0.0,
            'overhang_weight': self.overhang_weight >= 0.0,
            'table': self.table.depth > 0 and self.table.width > 0,
            'gripper': min(
                self.gripper.max_opening, self.gripper.finger_depth, self.gripper.finger_width
            )
            > 0
            and self.gripper.clearance >= 0
            and 0 < self.gripper.min_grip <= self.gripper.finger_depth,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise SlideInputError(
                f'planner settings out of range: {", ".join(bad)} (see PlannerConfig)'
            )


def load_config(path: str | Path, **overrides: Any) -> PlannerConfig:
    """Planner settings from a workcell YAML (``config/workcell.yaml``) and its optional
    ``planner:`` and ``obstacles:`` sections; keyword overrides win."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SlideInputError(f'cannot read the workcell file {path}: {exc}') from exc
    try:
        t = doc.get('table', {})
        g = doc.get('gripper', {})
        fingertip = doc.get('fingertip', {})
        table = Table(float(t.get('depth', 0.8)), float(t.get('width', 1.2)))
        gripper = Gripper(
            max_opening=float(g.get('max_opening', 0.08)),
            finger_depth=float(g.get('finger_depth', 0.04)),
            finger_width=float(g.get('finger_width', 0.02)),
            clearance=float(g.get('clearance_under_table', 0.005)),
            min_grip=float(g.get('min_grip', 0.04)),
        )
        obstacles = tuple(
            Obstacle(
                (float(o['centre'][0]), float(o['centre'][1])),
                (float(o['half_size'][0]), float(o['half_size'][1])),
            )
            for o in doc.get('obstacles', []) or []
        )
        settings = dict(doc.get('planner', {}) or {})
        settings.update(overrides)
        if 'radius' in fingertip:
            settings.setdefault('tip_radius', float(fingertip['radius']))
        return PlannerConfig(table=table, gripper=gripper, obstacles=obstacles, **settings)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise SlideInputError(f'{path}: bad planner or workcell setting: {exc}') from exc


# -- the belief as the planner sees it ----------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Models:
    """K weighted (mass, friction) models of one object.

    Attributes:
        grid: the object's cells.
        mass, friction: (K, n) per-cell maps [kg], [-].
        weight: (K,) probabilities, summing to 1.
    """

    grid: Grid
    mass: FloatArray
    friction: FloatArray
    weight: FloatArray

    @classmethod
    def create(cls, grid: Grid, mass: Any, friction: Any, weight: Any | None = None) -> Models:
        m = np.atleast_2d(np.asarray(mass, dtype=float))
        mu = np.atleast_2d(np.asarray(friction, dtype=float))
        if m.shape != mu.shape or m.shape[1] != grid.n:
            raise SlideInputError(
                f'mass {m.shape} and friction {mu.shape} must both be (K, {grid.n})'
            )
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(mu))):
            raise SlideInputError('the maps contain NaN or infinite values')
        if np.any(m < 0) or np.any(mu < 0) or np.any(m.sum(axis=1) <= 0):
            raise SlideInputError('masses and frictions must be >= 0, total masses > 0')
        w = np.full(m.shape[0], 1.0 / m.shape[0]) if weight is None else np.asarray(weight)
        w = np.asarray(w, dtype=float)
        if w.shape != (m.shape[0],) or np.any(w < 0) or not np.isfinite(w.sum()) or w.sum() <= 0:
            raise SlideInputError(f'weights must be (K,) = ({m.shape[0]},), >= 0, not all 0')
        return cls(grid, m, mu, w / w.sum())

    @property
    def K(self) -> int:
        return int(self.mass.shape[0])

    def com(self) -> FloatArray:
        """(K, 2) centres of mass, object frame [m]."""
        return np.asarray(self.mass @ self.grid.p_OC / self.mass.sum(axis=1, keepdims=True))

    def radius(self) -> float:
        """Largest distance [m] from the grid centroid to a cell corner (rho of the metric)."""
        return _radius(self.grid)


METHODS = ('probabilistic', 'deterministic', 'uniform', 'ground-truth')


def models_for(method: str, spec: ObjectSpec, belief: Belief | None) -> Models:
    """The models the planner gets under ``method``:

    - ``probabilistic``: the K weighted models of the probabilistic identification
      (paper 2).
    - ``deterministic``: only its most probable model (paper 1).
    - ``uniform``: uniform maps with that model's total mass and mean friction (no
      identification of the distribution).
    - ``ground-truth``: the object's true maps (``spec``; an upper bound, twin only).
    """
    grid = spec.grid
    if method == 'ground-truth':
        return Models.create(grid, spec.mass, spec.friction)
    if belief is None:
        raise SlideInputError(f'method {method!r} needs an identified belief')
    if method == 'probabilistic':
        return Models.create(grid, belief.mass, belief.friction, belief.weight)
    best = belief.best
    if method == 'deterministic':
        return Models.create(grid, belief.mass[best], belief.friction[best])
    if method == 'uniform':
        m, mu = uniform_maps(grid, belief.mass[best], belief.friction[best])
        return Models.create(grid, m, mu)
    raise SlideInputError(f'unknown method {method!r}; choose from {", ".join(METHODS)}')


def _radius(grid: Grid) -> float:
    r = grid.p_OC - grid.p_OC.mean(axis=0)
    return float(np.linalg.norm(r, axis=1).max() + grid.cell_size / math.sqrt(2))


def _corners_O(grid: Grid) -> FloatArray:
    """(n, 4, 2) corners of every cell square, counter-clockwise, object frame."""
    h = grid.cell_size / 2
    d = np.array([[-h, -h], [h, -h], [h, h], [-h, h]])
    return np.asarray(grid.p_OC[:, None, :] + d[None, :, :])


def _to_world(X_WO: FloatArray, p_O: FloatArray) -> FloatArray:
    return np.asarray(X_WO[:2] + p_O @ rotation(float(X_WO[2])).T)


# -- balance ---------------------------------------------------------------------------------
def support_polygon(grid: Grid, X_WO: Any) -> FloatArray | None:
    """Vertices (V, 2) of the support polygon in the table frame: the convex hull of the
    footprint clipped to the table (x >= 0); None when less than a sliver rests on it."""
    X = check_pose(X_WO, 'X_WO')
    C = _corners_O(grid) @ rotation(float(X[2])).T + X[:2]
    A, B = C, np.roll(C, -1, axis=1)
    keep = A[..., 0] >= 0.0
    crossing = (A[..., 0] < 0.0) != (B[..., 0] < 0.0)
    t = np.where(crossing, -A[..., 0] / np.where(crossing, B[..., 0] - A[..., 0], 1.0), 0.0)
    P = A + t[..., None] * (B - A)
    points = np.concatenate((A[keep], P[crossing]))
    if len(points) < 3:
        return None
    try:
        hull = ConvexHull(points)
    except QhullError:
        return None
    return np.asarray(points[hull.vertices])


def com_margins(grid: Grid, com_O: FloatArray, X_WO: Any) -> FloatArray:
    """Signed distance [m] (K,) of centres of mass com_O (K, 2) inside the support polygon
    at X_WO (negative outside; an object wholly on the table gets +inf: it cannot tip)."""
    X = check_pose(X_WO, 'X_WO')
    corners_W = _corners_O(grid).reshape(-1, 2) @ rotation(float(X[2])).T + X[:2]
    if corners_W[:, 0].min() >= 0.0:
        return np.full(len(com_O), np.inf)
    poly = support_polygon(grid, X)
    if poly is None:
        return np.full(len(com_O), -np.inf)
    com_W = com_O @ rotation(float(X[2])).T + X[:2]
    edges = np.roll(poly, -1, axis=0) - poly
    normals = np.column_stack((edges[:, 1], -edges[:, 0]))  # outward for counter-clockwise
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    out = np.einsum('kvj,vj->kv', com_W[:, None, :] - poly[None], normals)
    return np.asarray(-out.max(axis=1))


def com_margins_of(models: Models, X_WO: Any) -> FloatArray:
    """(K,) margins of every model at X_WO (see :func:`com_margins`)."""
    return com_margins(models.grid, models.com(), X_WO)


def stay_probability(models: Models, X_WO: Any, margin: float = 0.0) -> float:
    """Probability that the object stays at X_WO: the weight of the models whose centre
    of mass is at least ``margin`` metres inside the support polygon."""
    return float(models.weight @ (com_margins_of(models, X_WO) >= margin))


def margin_quantile(models: Models, margins: FloatArray, epsilon: float) -> float:
    """The margin [m] that models of probability 1 - epsilon at least have."""
    order = np.argsort(margins)
    cum = np.cumsum(models.weight[order])
    k = int(np.searchsorted(cum, epsilon, side='right'))
    return float(margins[order][min(k, len(order) - 1)])


# -- grasp -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grasp:
    """A grasp of the overhang: the gripper comes along ``yaw`` (0: along +x, towards the
    table) level with the object's mid-height; its pads' front end is at ``p_W``.

    Attributes:
        p_W: (2,) pads' front end, table frame [m]; z: mid-height of the held part [m].
        yaw: approach direction [rad]; grip: object length between the pads [m];
        width: how wide [m] the stretch of edge is along which a grasp would hold.
    """

    p_W: FloatArray
    z: float
    yaw: float
    grip: float
    width: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            'p_W': [float(v) for v in self.p_W],
            'z': self.z,
            'yaw': self.yaw,
            'grip_m': self.grip,
            'graspable_width_m': self.width,
        }


def _cells_at(
    grid: Grid, X_WO: FloatArray, p_W: FloatArray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row, column and in-grid mask (...) of the grid squares under table-frame points
    p_W (..., 2) with the object at X_WO."""
    p_O = (p_W - X_WO[:2]) @ rotation(float(X_WO[2]))
    rows, cols = grid.shape
    w = grid.cell_size
    c = np.floor((p_O[..., 0] + cols * w / 2) / w).astype(np.int64)
    r = np.floor((rows * w / 2 - p_O[..., 1]) / w).astype(np.int64)
    return r, c, (c >= 0) & (c < cols) & (r >= 0) & (r < rows)


def covered(grid: Grid, X_WO: FloatArray, p_W: FloatArray) -> np.ndarray:
    """Whether table-frame points p_W (..., 2) lie on the object's cells at X_WO."""
    r, c, inside = _cells_at(grid, X_WO, p_W)
    out = np.zeros(r.shape, dtype=bool)
    out[inside] = grid.occupancy[r[inside], c[inside]]
    return out


_LINE_STEP = 0.001  # m between samples along the pads


def _held_height(grid: Grid, X_WO: FloatArray, p_W: FloatArray) -> float:
    """Tallest cell [m] under table-frame points p_W (..., 2) on the object."""
    r, c, inside = _cells_at(grid, X_WO, p_W.reshape(-1, 2))
    return float(grid.heights[r[inside], c[inside]].max()) if inside.any() else 0.0


def grasp_at(
    grid: Grid, X_WO: Any, gripper: Gripper, com_O: FloatArray | None = None
) -> Grasp | None:
    """The grasp of the overhang at X_WO nearest the centre of mass, or None.

    Bands of the pads' width across the edge are tried every 5 mm. In each, the pads
    reach as far in as the clearance to the edge allows, or less when the object sticks
    out further than the pads are deep (the palm must not touch it). The grip of a band
    is the object length under the pads along three lines across their width (both sides
    and the middle), the shortest of the three: a corner that only the middle of a pad
    touches does not count as held. Bands holding at least ``min_grip`` qualify; of those
    whose neighbours 1 cm either side qualify too (if any), the one nearest the centre of
    mass is taken (the least roll torque on the pads).
    """
    X = check_pose(X_WO, 'X_WO')
    height = float(grid.heights[grid.occupancy].max())
    if height > gripper.max_opening - 2 * gripper.height_margin:
        return None
    corners = _to_world(X, _corners_O(grid).reshape(-1, 2))
    front_max = -gripper.clearance
    if corners[:, 0].min() >= front_max:
        return None
    half_w = gripper.finger_width / 2
    xs = np.arange(corners[:, 0].min(), front_max + 1e-9, _LINE_STEP)
    centres = np.arange(corners[:, 1].min() + half_w, corners[:, 1].max() - half_w + 1e-9, 0.005)
    if len(centres) == 0:
        return None
    offsets = np.array([-0.9, 0.0, 0.9]) * half_w
    lines_y = centres[:, None] + offsets[None, :]  # (B, 3)
    pts = np.stack(np.broadcast_arrays(xs[None, None, :], lines_y[..., None]), axis=-1)
    cov = covered(grid, X, pts)  # (B, 3, Nx)
    com_y = float(_to_world(X, com_O)[1]) if com_O is not None else float(corners[:, 1].mean())
    fronts = np.zeros(len(centres))
    grips = np.zeros(len(centres))
    pads = []
    for i in range(len(centres)):
        hit = np.nonzero(cov[i].any(axis=0))[0]
        front = min(front_max, float(xs[hit[0]]) + gripper.finger_depth) if len(hit) else 0.0
        pad = (xs >= front - gripper.finger_depth - 1e-9) & (xs <= front + 1e-9)
        fronts[i] = front
        grips[i] = float(cov[i][:, pad].sum(axis=1).min()) * _LINE_STEP if len(hit) else 0.0
        pads.append(pad)
    ok = grips >= gripper.min_grip
    if not ok.any():
        return None
    # Prefer bands whose neighbours 1 cm either side hold too (tolerant of pose errors).
    robust = ok & np.roll(ok, 2) & np.roll(ok, -2)
    robust[:2] = robust[-2:] = False
    pick = robust if robust.any() else ok
    i = int(np.argmin(np.where(pick, np.abs(centres - com_y), np.inf)))
    held = covered(grid, X, pts[i][:, pads[i]]).any(axis=0)
    z = _held_height(grid, X, pts[i][:, pads[i]][:, held]) / 2
    return Grasp(
        np.array([fronts[i], float(centres[i])]), z, 0.0, float(grips[i]), float(ok.sum() * 0.005)
    )


# -- validity --------------------------------------------------------------------------------
def in_workspace(grid: Grid, X_WO: Any, config: PlannerConfig) -> bool:
    """True when no cell leaves the table except over the free edge and none overlaps an
    obstacle (cell squares tested by their corners and centres)."""
    X = check_pose(X_WO, 'X_WO')
    pts = _to_world(X, np.concatenate((_corners_O(grid).reshape(-1, 2), grid.p_OC)))
    t = config.table
    if pts[:, 0].max() > t.depth or np.abs(pts[:, 1]).max() > t.width / 2:
        return False
    for ob in config.obstacles:
        inside = np.all(np.abs(pts - np.asarray(ob.centre)) <= np.asarray(ob.half_size), axis=1)
        if inside.any():
            return False
        # A thin obstacle between sample points: test its corners against the cells.
        c = np.asarray(ob.centre) + np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * ob.half_size
        c_O = (c - X[:2]) @ rotation(float(X[2]))
        if np.any(np.all(np.abs(c_O[:, None] - grid.p_OC[None]) <= grid.cell_size / 2, axis=2)):
            return False
    return True


def is_valid(models: Models, X_WO: Any, config: PlannerConfig) -> bool:
    """A pose the object may pass through: on the table, clear of obstacles, balanced with
    probability at least 1 - epsilon (with the safety margin)."""
    return (
        in_workspace(models.grid, X_WO, config)
        and stay_probability(models, X_WO, config.balance_margin) >= 1.0 - config.epsilon - 1e-12
    )


# -- goal ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Goal:
    """A goal pose at the edge and what was judged about it.

    Attributes:
        X_WO: (3,) goal pose; stay_probability: of the belief, with the safety margin;
        margin: balance margin [m] that 1 - epsilon of the belief has; overhang: how far
        [m] the object sticks out past the edge; effort: SE(2) distance from the start [m];
        grasp: the grasp planned there.
    """

    X_WO: FloatArray
    stay_probability: float
    margin: float
    overhang: float
    effort: float
    grasp: Grasp

    def to_dict(self) -> dict[str, Any]:
        return {
            'X_WO': [float(v) for v in self.X_WO],
            'stay_probability': self.stay_probability,
            'margin_m': self.margin,
            'overhang_m': self.overhang,
            'effort_m': self.effort,
            'grasp': self.grasp.to_dict(),
        }


def se2_distance(X_a: FloatArray, X_b: FloatArray, rho: float) -> FloatArray:
    """sqrt(dx^2 + dy^2 + (rho dtheta)^2) [m] between poses (..., 3)."""
    d = np.asarray(X_a, dtype=float) - np.asarray(X_b, dtype=float)
    return np.asarray(
        np.sqrt(d[..., 0] ** 2 + d[..., 1] ** 2 + (rho * wrap_angle(d[..., 2])) ** 2)
    )


def overhang(grid: Grid, X_WO: Any) -> float:
    """How far [m] the object's footprint reaches past the edge (0 when it does not)."""
    X = check_pose(X_WO, 'X_WO')
    x = _to_world(X, _corners_O(grid).reshape(-1, 2))[:, 0]
    return float(max(0.0, -x.min()))


def goal_acceptable(models: Models, X_WO: Any, config: PlannerConfig) -> Grasp | None:
    """The grasp if X_WO would do as a goal (graspable, valid, balanced), else None."""
    if not is_valid(models, X_WO, config):
        return None
    return grasp_at(models.grid, X_WO, config.gripper, models.com()[int(np.argmax(models.weight))])


def select_goal(models: Models, X_WO: Any, config: PlannerConfig) -> Goal:
    """The goal pose at the edge for an object now at X_WO (see the module docstring).

    Raises PlanningError when no sampled pose is graspable and balanced."""
    X0 = check_pose(X_WO, 'X_WO')
    grid = models.grid
    rho = models.radius()
    corners = _corners_O(grid).reshape(-1, 2)
    g = config.gripper
    need = g.clearance + g.min_grip + config.grasp_margin
    best: tuple[float, Goal] | None = None
    yaws = wrap_angle(X0[2] + np.linspace(-np.pi, np.pi, config.goal_yaws, endpoint=False))
    y_half = config.table.width / 2 - rho
    ys = np.arange(-y_half, y_half + 1e-9, config.goal_y_step)
    ys = ys[np.argsort(np.abs(ys - X0[1]))]
    com = models.com()
    for yaw in yaws:
        R = rotation(float(yaw))
        x_min = float((corners @ R.T)[:, 0].min())
        x_ext = float((corners @ R.T)[:, 0].max()) - x_min
        for o in np.arange(need, 0.7 * x_ext, 0.005):
            X = np.array([-x_min - o, 0.0, yaw])
            margins = com_margins(grid, com, X)
            p_stay = float(models.weight @ (margins >= config.balance_margin))
            if p_stay < 1.0 - config.epsilon - 1e-12:
                continue
            grasp = grasp_at(grid, X, g, com[int(np.argmax(models.weight))])
            if grasp is None:
                continue
            margin = margin_quantile(models, margins, config.epsilon)
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
                )
                if best is None or score < best[0]:
                    shifted = replace(grasp, p_W=grasp.p_W + np.array([0.0, y]))
                    best = (score, Goal(Xy, p_stay, margin, float(o), effort, shifted))
                break  # the nearest free y is the least effort for this yaw and overhang
    if best is None:
        raise PlanningError(
            'no goal at the edge is both graspable and balanced with probability '
            f'>= {1 - config.epsilon:.2f}: the object may be too thick for the gripper, too '
            'small to stick out safely, or the belief too uncertain (explore more)'
        )
    return best[1]


# -- path ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Path2:
    """An SE(2) path: waypoints (N, 3) from the start to the goal, and planning time [s]."""

    waypoints: FloatArray
    seconds: float
    exact: bool


def plan_path(models: Models, X_start: Any, X_goal: Any, config: PlannerConfig) -> Path2:
    """RRT* (OMPL) from X_start to X_goal through valid poses (:func:`is_valid`).

    A start that is itself not valid (pushed too far, say) is connected straight to the
    goal. Raises PlanningError when the goal is not valid or RRT* finds no path."""
    from ompl import base as ob
    from ompl import geometric as og
    from ompl import util as ou

    t0 = time.perf_counter()
    Xs, Xg = check_pose(X_start, 'X_start').copy(), check_pose(X_goal, 'X_goal').copy()
    Xs[2], Xg[2] = wrap_angle(Xs[2]), wrap_angle(Xg[2])  # OMPL's SE(2) yaw is in [-pi, pi]
    rho = models.radius()
    if not is_valid(models, Xg, config):
        raise PlanningError(f'the goal {np.round(Xg, 4).tolist()} is not a valid pose')
    if not is_valid(models, Xs, config):
        return Path2(_resample(np.stack((Xs, Xg)), rho, config.waypoint_step), 0.0, True)
    ou.setLogLevel(ou.LogLevel.LOG_WARN)
    space = ob.SE2StateSpace()
    bounds = ob.RealVectorBounds(2)
    bounds.setLow(0, -rho)
    bounds.setHigh(0, config.table.depth)
    bounds.setLow(1, -config.table.width / 2)
    bounds.setHigh(1, config.table.width / 2)
    space.setBounds(bounds)
    space.setSubspaceWeight(1, rho)
    si = ob.SpaceInformation(space)

    check = _validity(models, config)

    def valid(state: Any) -> bool:
        return check(state.getX(), state.getY(), state.getYaw())

    si.setStateValidityChecker(valid)
    # Check motions every centimetre (the resolution is a fraction of the space's extent).
    si.setStateValidityCheckingResolution(0.01 / space.getMaximumExtent())
    si.setup()
    start, goal = space.allocState(), space.allocState()
    for s, X in ((start, Xs), (goal, Xg)):
        s.setX(float(X[0]))
        s.setY(float(X[1]))
        s.setYaw(float(X[2]))
    pdef = ob.ProblemDefinition(si)
    pdef.setStartAndGoalStates(start, goal, 1e-3)
    planner = og.RRTstar(si)
    planner.setRange(config.rrt_range)
    planner.setProblemDefinition(pdef)
    planner.setup()
    count = [0]

    def done() -> bool:
        count[0] += 1
        return count[0] > config.rrt_iterations

    solved = planner.solve(ob.PlannerTerminationCondition(done))
    if not solved:
        raise PlanningError(
            f'RRT* found no path in {config.rrt_iterations} iterations from '
            f'{np.round(Xs, 3).tolist()} to {np.round(Xg, 3).tolist()}'
        )
    path = pdef.getSolutionPath()
    og.PathSimplifier(si).simplifyMax(path)  # shortcuts: RRT*'s tree wiggles in yaw
    X = np.array(
        [
            (path.getState(i).getX(), path.getState(i).getY(), path.getState(i).getYaw())
            for i in range(path.getStateCount())
        ]
    )
    exact = bool(pdef.hasExactSolution())
    return Path2(_resample(X, rho, config.waypoint_step), time.perf_counter() - t0, exact)


def _validity(models: Models, config: PlannerConfig) -> Callable[[float, float, float], bool]:
    """:func:`is_valid` as a fast closure for the sampling planner (called ~1e5 times):
    the expensive balance test only runs for poses that reach past the edge."""
    grid = models.grid
    pts = np.concatenate((_corners_O(grid).reshape(-1, 2), grid.p_OC))
    depth, half_width = config.table.depth, config.table.width / 2
    threshold = 1.0 - config.epsilon - 1e-12

    def check(x: float, y: float, theta: float) -> bool:
        c, s = math.cos(theta), math.sin(theta)
        px = x + c * pts[:, 0] - s * pts[:, 1]
        if px.max() > depth:
            return False
        py = y + s * pts[:, 0] + c * pts[:, 1]
        if np.abs(py).max() > half_width:
            return False
        X = np.array([x, y, theta])
        if config.obstacles and not in_workspace(grid, X, config):
            return False
        if px.min() >= 0.0:
            return True
        return stay_probability(models, X, config.balance_margin) >= threshold

    return check


def _resample(X: FloatArray, rho: float, step: float) -> FloatArray:
    """Waypoints every ``step`` metres (SE(2) distance) along a polyline of poses."""
    X = X.copy()
    X[:, 2] = np.unwrap(X[:, 2])
    seg = se2_distance(X[1:], X[:-1], rho)
    s = np.concatenate(([0.0], np.cumsum(seg)))
    if s[-1] <= 0:
        return X[[0, -1]]
    n = max(1, int(math.ceil(s[-1] / step)))
    at = np.linspace(0.0, s[-1], n + 1)
    out = np.column_stack([np.interp(at, s, X[:, j]) for j in range(3)])
    out[:, 2] = wrap_angle(out[:, 2])
    return out


# -- push ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PushPlan:
    """A chosen push and what the belief predicts of it.

    Attributes:
        contact_O, direction_O: (2,) contact point on the outline and push direction
            (inward normal), object frame at the start [m].
        p_WF0: (2,) fingertip centre where the push starts (touching), table frame [m].
        travel, speed: push length [m] and fingertip speed [m/s].
        predicted_X_WO: (K, 3) each model's final pose; expected_distance: their weighted
            SE(2) distance to the target [m]; fall_probability: weight of the models
            that end unbalanced; simulations: model rollouts spent choosing it.
    """

    contact_O: FloatArray
    direction_O: FloatArray
    p_WF0: FloatArray
    travel: float
    speed: float
    predicted_X_WO: FloatArray
    expected_distance: float
    fall_probability: float
    simulations: int

    def to_dict(self) -> dict[str, Any]:
        return {
            'contact_O': [float(v) for v in self.contact_O],
            'direction_O': [float(v) for v in self.direction_O],
            'travel_m': self.travel,
            'speed_mps': self.speed,
            'expected_distance_m': self.expected_distance,
            'fall_probability': self.fall_probability,
            'simulations': self.simulations,
        }


@dataclass(frozen=True)
class _Side:
    cell: int
    mid_O: FloatArray
    n_in: FloatArray  # inward normal
    tangent: FloatArray


class _Evaluator:
    """Simulates batches of candidate pushes (side, offset) with every model at once."""

    def __init__(
        self,
        models: Models,
        X_WO: FloatArray,
        target: FloatArray,
        config: PlannerConfig,
        travel: float,
    ) -> None:
        self.models, self.X, self.target, self.config = models, X_WO, target, config
        self.rho = models.radius()
        self.model = RigidModel.of(models.grid)
        self.travel = travel
        self.simulations = 0
        self.min_step = max(1, int(math.ceil(config.push_min / config.sim_step)))

    def start(self, side: _Side, offset: float) -> tuple[FloatArray, FloatArray] | None:
        """Contact point and fingertip start (object frame), or None when the fingertip
        would start on the object (a concave outline)."""
        c_O = side.mid_O + side.tangent * offset
        p_OF = c_O - side.n_in * (self.config.tip_radius + TIP_GAP)
        _, dist = self.model.closest_point((p_OF - self.model.p_OG)[None, :])
        if dist[0] < self.config.tip_radius + 0.5 * TIP_GAP:
            return None
        return c_O, p_OF

    def run(
        self, sides: Sequence[_Side], offsets: Sequence[float]
    ) -> tuple[FloatArray, FloatArray]:
        """Expected distance to the target (C, S+1) and poses (C, K, S+1, 3) per candidate
        and fingertip step (inf where the fingertip cannot start or has not gone far)."""
        K, C = self.models.K, len(sides)
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
        S = max(1, int(math.ceil(self.travel / cfg.sim_step)))
        cost = np.full((C, S + 1), np.inf)
        X_W = np.zeros((C, K, S + 1, 3))
        idx = np.nonzero(ok)[0]
        if len(idx) == 0:
            return cost, X_W
        roll = quasistatic.push(
            self.models.grid,
            np.tile(self.models.mass, (len(idx), 1)),
            np.tile(self.models.friction, (len(idx), 1)),
            np.repeat(X_PO[idx], K, axis=0),
            [0.0, 0.0],
            [1.0, 0.0],
            S * cfg.sim_step,
            cfg.tip_radius,
            cfg.tip_mu,
            cfg.sim_step,
        ).X_WO.reshape(len(idx), K, S + 1, 3)
        self.simulations += len(idx) * K
        for a, j in enumerate(idx.tolist()):
            p = roll[a, :, :, :2] @ R_WP[j].T + p_WP[j]
            yaw = roll[a, :, :, 2] + math.atan2(R_WP[j][1, 0], R_WP[j][0, 0])
            X_W[j] = np.concatenate((p, yaw[..., None]), axis=2)
            cost[j] = self.models.weight @ se2_distance(X_W[j], self.target, self.rho)
        cost[:, : self.min_step] = np.inf
        return cost, X_W


def _sides(grid: Grid) -> list[_Side]:
    cells, mid, n_out = grid.outline_sides()
    return [
        _Side(int(c), m, -n, np.array([-n[1], n[0]]))
        for c, m, n in zip(cells, mid, n_out, strict=True)
    ]


def select_push(
    models: Models,
    X_WO: Any,
    target: Any,
    config: PlannerConfig,
    exhaustive: bool = False,
) -> PushPlan:
    """The push that brings the object from X_WO closest to ``target`` in expectation over
    the belief (see the module docstring). Raises PlanningError when every candidate
    would make the object fall with probability above epsilon."""
    X = check_pose(X_WO, 'X_WO')
    Xt = check_pose(target, 'target')
    grid = models.grid
    h = grid.cell_size / 2
    rho = models.radius()
    gap = float(se2_distance(X, Xt, rho))
    travel = min(config.push_max, max(2 * config.push_min, gap + 0.02))
    ev = _Evaluator(models, X, Xt, config, travel)
    sides = _sides(grid)
    # Sides whose push direction points against the wanted translation cannot help unless
    # the object mostly has to turn.
    dp = Xt[:2] - X[:2]
    if np.linalg.norm(dp) > 0.5 * rho * abs(float(wrap_angle(Xt[2] - X[2]))) + 1e-9:
        R = rotation(float(X[2]))
        u = dp / np.linalg.norm(dp)
        sides = [s for s in sides if float((R @ s.n_in) @ u) > 0.0] or sides
    if exhaustive:
        offsets = np.linspace(-0.8, 0.8, config.exhaustive_per_side) * h
    else:
        offsets = np.array([0.0])
    cand = [(s, float(o)) for s in sides for o in offsets]
    cost, X_W = ev.run([c[0] for c in cand], [c[1] for c in cand])
    # Best step of each candidate; try them best first until one keeps the object safe.
    best_t = np.argmin(cost, axis=1)
    best_c = cost[np.arange(len(cand)), best_t]
    chosen: tuple[_Side, float, int, float, FloatArray] | None = None
    for j in np.argsort(best_c)[:10]:
        if not np.isfinite(best_c[j]):
            break
        side, off = cand[j]
        cj, Xj, tj = float(best_c[j]), X_W[j], int(best_t[j])
        if not exhaustive:
            side, off, tj, cj, Xj = _refine(ev, side, off, tj, cj, Xj, h)
        if _fall_probability(models, Xj[:, tj], config) <= config.epsilon + 1e-12:
            chosen = (side, off, tj, cj, Xj)
            break
    if chosen is None:
        raise PlanningError(
            'every candidate push risks a fall with probability above '
            f'{config.epsilon:.2f} (target {np.round(Xt, 3).tolist()})'
        )
    side, off, tj, cj, Xj = chosen
    start = ev.start(side, off)
    assert start is not None  # the candidate was simulated, so its start was free
    c_O, p_OF = start
    return PushPlan(
        contact_O=c_O,
        direction_O=side.n_in.copy(),
        p_WF0=_to_world(X, p_OF[None])[0],
        travel=float(tj * config.sim_step),
        speed=config.push_speed,
        predicted_X_WO=Xj[:, tj].copy(),
        expected_distance=cj,
        fall_probability=_fall_probability(models, Xj[:, tj], config),
        simulations=ev.simulations,
    )


def _fall_probability(models: Models, X_K: FloatArray, config: PlannerConfig) -> float:
    """Weight of the models that would not stay balanced (with the safety margin) at their
    own predicted poses X_K (K, 3)."""
    com = models.com()
    fall = 0.0
    for k in range(models.K):
        if com_margins(models.grid, com[k : k + 1], X_K[k])[0] < config.balance_margin:
            fall += float(models.weight[k])
    return fall


def _refine(
    ev: _Evaluator,
    side: _Side,
    off: float,
    t: int,
    cost: float,
    X: FloatArray,
    h: float,
) -> tuple[_Side, float, int, float, FloatArray]:
    """Finite-difference descent of the expected distance along the contact's side; the
    push length is re-chosen from each rollout (paper 1's refinement of both)."""
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


def reached(models: Models, X_WO: Any, goal: Goal, config: PlannerConfig) -> bool:
    """True when the object is at a pose that does as a goal: graspable (the pads hold at
    least ``min_grip``) and balanced with probability 1 - epsilon. The goal itself asks
    ``grasp_margin`` more overhang, so that a push falling a little short still does."""
    return goal_acceptable(models, check_pose(X_WO, 'X_WO'), config) is not None


def next_waypoint(waypoints: FloatArray, X_WO: Any, lookahead: float, rho: float) -> FloatArray:
    """The waypoint a push aims at: the farthest of ``waypoints`` (N, 3) within
    ``lookahead`` (SE(2) distance) of X_WO, at least the one after the start."""
    X = check_pose(X_WO, 'X_WO')
    if len(waypoints) < 2:
        return np.asarray(waypoints[-1], dtype=float)
    d = se2_distance(waypoints[1:], X[None, :], rho)
    within = np.nonzero(d <= lookahead)[0]
    return np.asarray(waypoints[1 + (int(within.max()) if len(within) else 0)], dtype=float)


@dataclass(frozen=True)
class Step:
    """One decision of the closed loop: done (at the goal), or the path from the observed
    pose, the waypoint aimed at and the push to make; with the time it took [s]."""

    done: bool
    path: Path2 | None
    target: FloatArray | None
    push: PushPlan | None
    seconds: float


def next_step(
    models: Models, X_WO: Any, goal: Goal, config: PlannerConfig, exhaustive: bool = False
) -> Step:
    """Paper 2's Algorithm 4, one iteration: stop if the observed pose has reached the goal,
    else plan a path from it (RRT*), aim at the next waypoint and choose the push."""
    t0 = time.perf_counter()
    X = check_pose(X_WO, 'X_WO')
    if reached(models, X, goal, config):
        return Step(True, None, None, None, time.perf_counter() - t0)
    path = plan_path(models, X, goal.X_WO, config)
    target = next_waypoint(path.waypoints, X, config.lookahead, models.radius())
    push = select_push(models, X, target, config, exhaustive=exhaustive)
    return Step(False, path, target, push, time.perf_counter() - t0)
