"""Active exploration: which push to make next (the papers' strategies).

Candidates are straight fingertip pushes at points of the object's outline along the inward
normal (:func:`candidates`). Strategies:

- ``random``: any candidate, uniformly.
- ``most-different``: the candidate farthest from the pushes already made, measured on the
  contact point (object frame) and the direction (paper 1's exploration baseline).
- ``most-distinctive``: the candidate on which the belief's models disagree most: the
  probability-weighted spread of the cells' predicted final positions (paper 2). Every
  candidate is rolled out with every model, batched, by the planner's quasi-static model
  (:mod:`slide_core.physics.quasistatic`): the dynamic core's general solver took minutes
  for a ring's choice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import math

import numpy as np
from numpy.typing import NDArray

from slide_core.errors import NoSolutionError, SlideInputError
from slide_core.geometry import (
    FloatArray,
    Grid,
    cell_positions,
    distance_to_footprint,
    push_sides,
    reach,
    rotation,
)
from slide_core.model import (
    Belief,
    Fingertip,
    Obstacle,
    Primitive,
    Table,
    approach_clear,
    side_met,
    stroke_clear,
)
from slide_core.physics import PhysicsError, quasistatic

STRATEGIES = ('random', 'most-different', 'most-distinctive')
EXPLORATION_MARGIN = 0.08
"""Table [m] an exploratory push must leave around the object (beyond its reach)."""


@dataclass(frozen=True)
class Candidate:
    """A straight push in the object frame: fingertip start p_OF (2,), direction (2,),
    travel [m] and the contact point p_OA (2,) on the outline."""

    p_OF: FloatArray
    direction_O: FloatArray
    travel: float
    p_OA: FloatArray

    def primitive(self, speed: float) -> Primitive:
        """This push as a primitive for the arm."""
        return Primitive.create(self.p_OA, self.direction_O, self.travel, speed)


def candidates(
    belief: Belief, fingertip: Fingertip, travel: float = 0.04, clearance: float = 0.005
) -> list[Candidate]:
    """One push per piece of the outline (:func:`slide_core.geometry.push_sides`: every
    outline cell's free sides, and pieces of the real outline where it runs across the
    cells), at its middle, inward; only those whose fingertip starts clear of the object
    and comes down clear of it (at a concave corner the start can lie on a neighbouring
    part)."""
    return grid_candidates(belief.grid, fingertip, travel, clearance)


def grid_candidates(
    g: Grid, fingertip: Fingertip, travel: float = 0.04, clearance: float = 0.005
) -> list[Candidate]:
    """:func:`candidates` of the object ``g``, before any belief."""
    mid, n_out, _, cells = push_sides(g)
    # The cells' sides cell by cell (the order seeded draws from the pool have used), then
    # the outline's own pieces.
    order = np.argsort(np.where(cells >= 0, cells, g.n), kind='stable')
    mid, n_out = mid[order], n_out[order]
    out = []
    for contact, n in zip(mid, n_out, strict=True):
        start = contact + n * (fingertip.radius + clearance)
        if distance_to_footprint(g, start) < fingertip.radius + clearance / 2:
            continue
        if not approach_clear(g, contact, -n, fingertip) or not side_met(g, contact, fingertip):
            continue
        out.append(Candidate(start, -n, travel, contact))
    return out


def on_table(
    pool: list[Candidate],
    grid: Grid,
    X_WO: FloatArray,
    table: Table,
    fingertip: Fingertip | None = None,
    obstacles: Sequence[Obstacle] = (),
) -> list[Candidate]:
    """The candidates whose push leaves the object in the middle of the table (as
    :func:`random_push` asks of its draws), and, with ``obstacles`` (and the
    ``fingertip``), keeps the fingertip and the object clear of them
    (:func:`avoids_obstacles`)."""
    margin = reach(grid) + EXPLORATION_MARGIN
    lo = np.array([margin, -table.width / 2 + margin])
    hi = np.array([table.depth - margin, table.width / 2 - margin])
    R = rotation(float(X_WO[2]))
    out = []
    for c in pool:
        moved = X_WO[:2] + c.travel * (R @ c.direction_O)
        if not (np.all(moved >= lo) and np.all(moved <= hi)):
            continue
        if obstacles and fingertip is not None:
            if not avoids_obstacles(
                grid, X_WO, c.p_OA, c.direction_O, c.travel, fingertip, obstacles
            ):
                continue
        out.append(c)
    return out


def side_push(
    grid: Grid,
    X_WO: FloatArray,
    n_W: FloatArray,
    table: Table,
    fingertip: Fingertip,
    speed: float,
    obstacles: Sequence[Obstacle] = (),
    rank: int = 0,
) -> Primitive:
    """A push into the side of the object that faces ``n_W`` (2,) (table frame): of
    :func:`grid_candidates` that keep it in the middle of the table and clear of
    ``obstacles`` (:func:`on_table`), the one whose outward normal lies nearest ``n_W``, and
    of those (the cells' sides along one side of a box) the one whose line passes nearest
    the cells' centroid, which moves the object straightest. ``rank``: the rank-th best
    (a retry after the world refused the ones before). What the task asks for when the
    pushes so far touched the object from too few directions to tell a contact
    offset (:meth:`ContactOffset.kept`). NoSolutionError when no side facing within 90
    degrees of ``n_W`` can be pushed."""
    n = np.asarray(n_W, dtype=float)
    X = np.asarray(X_WO, dtype=float)
    if n.shape != (2,) or not np.isfinite(n).all() or float(np.linalg.norm(n)) < 1e-9:
        raise SlideInputError(f'n_W must be a finite non-zero 2-vector, got {n}')
    if X.shape != (3,) or not np.isfinite(X).all():
        raise SlideInputError(f'X_WO must be a finite pose [x, y, yaw], got {X}')
    if rank < 0:
        raise SlideInputError(f'rank must not be negative, got {rank}')
    n_O = rotation(float(X[2])).T @ (n / np.linalg.norm(n))
    pool = on_table(grid_candidates(grid, fingertip), grid, X, table, fingertip, obstacles)
    p_OG = grid.p_OC.mean(axis=0)
    ranked = []
    for i, c in enumerate(pool):
        facing = float(-c.direction_O @ n_O)  # its outward normal . n_O
        if facing > 0.0:
            d = c.direction_O
            off_line = abs(float(d[0] * (p_OG - c.p_OA)[1] - d[1] * (p_OG - c.p_OA)[0]))
            ranked.append((-round(facing, 6), off_line, i))
    ranked.sort()
    if not ranked:
        raise NoSolutionError(
            'no side of the object facing the direction asked for can be pushed: each '
            'push would come down on the object, carry it out of the middle of the table'
            + ', or meet an obstacle'
            * bool(obstacles)
        )
    return pool[ranked[min(rank, len(ranked) - 1)][2]].primitive(speed)


DRAWS = 50
"""Random pushes :func:`random_push` draws at most."""
OBSTACLE_MARGIN = 0.01
"""Room [m] an exploratory push leaves between the object's cells and an obstacle."""


def avoids_obstacles(
    grid: Grid,
    X_WO: FloatArray,
    p_OA: FloatArray,
    d_O: FloatArray,
    travel: float,
    fingertip: Fingertip,
    obstacles: Sequence[Obstacle],
) -> bool:
    """Whether an exploratory push at contact p_OA along d_O (object frame) keeps the
    fingertip clear of every obstacle (:func:`slide_core.model.stroke_clear`), and the
    object too, carried ``travel`` [m] along the push without turning, at each cell's
    width of the way: its cells' half widths and OBSTACLE_MARGIN from every box, or no
    nearer than they are now where they are nearer already (no model predicts an
    exploratory push's turn; the margin is for it)."""
    if not obstacles:
        return True
    stroke = Primitive.create(p_OA, d_O, travel, 0.05)  # (the speed moves no point)
    if not stroke_clear(stroke, X_WO, fingertip, obstacles):
        return False
    R = rotation(float(X_WO[2]))
    d_W = R @ np.asarray(d_O, dtype=float)
    p_WC = X_WO[:2] + grid.p_OC @ R.T
    room = 0.5 * grid.cell_size + OBSTACLE_MARGIN
    least = [min(room, float(ob.distance(p_WC).min())) for ob in obstacles]
    for s in np.linspace(0.0, travel, max(2, math.ceil(travel / grid.cell_size) + 1))[1:]:
        moved = p_WC + s * d_W
        near = (float(ob.distance(moved).min()) for ob in obstacles)
        if any(d < a - 1e-9 for d, a in zip(near, least, strict=True)):
            return False
    return True


def choose(
    belief: Belief,
    X_WO: FloatArray,
    strategy: str,
    rng: np.random.Generator,
    fingertip: Fingertip,
    done: list[Candidate] | None = None,
    pool: list[Candidate] | None = None,
    max_candidates: int = 12,
    progress: Callable[[float], None] | None = None,
) -> tuple[Candidate, FloatArray]:
    """The next push by ``strategy`` and the scores (C,) of the candidates considered.

    ``progress``, when given, is called with the fraction [0, 1] of the candidates rolled
    out (most-distinctive: each is a quasi-static rollout of every model); an exception it
    raises stops the choice and reaches the caller (a cancel)."""
    if strategy not in STRATEGIES:
        raise SlideInputError(f'unknown strategy {strategy!r}; choose from {STRATEGIES}')
    pool = pool if pool is not None else candidates(belief, fingertip)
    if not pool:
        raise SlideInputError('the object has no outline to push')
    if len(pool) > max_candidates:
        pool = [pool[i] for i in rng.choice(len(pool), max_candidates, replace=False)]
    if strategy == 'random':
        scores = rng.random(len(pool))
    elif strategy == 'most-different':
        if not done:
            scores = rng.random(len(pool))
        else:
            scale = float(np.abs(belief.grid.p_OC).max()) or 1.0
            scores = np.array(
                [
                    min(
                        np.linalg.norm(c.p_OF - d.p_OF) / scale
                        + np.linalg.norm(c.direction_O - d.direction_O)
                        for d in done
                    )
                    for c in pool
                ]
            )
    else:
        scores = np.full(len(pool), -np.inf)
        height = belief.push_heights(fingertip)
        X = np.asarray(X_WO, dtype=float)
        R = rotation(float(X[2]))
        for j, cand in enumerate(pool):
            if progress is not None:
                progress(j / len(pool))
            # The planner's quasi-static model, every model in one call: the dynamic core
            # fell back to its general solver on a ring's identified models, and one choice
            # took 84 s, another 181 s (0.04 s here).
            try:
                rollout = quasistatic.push(
                    belief.grid,
                    belief.mass,
                    belief.friction,
                    X,
                    X[:2] + R @ cand.p_OF,
                    R @ cand.direction_O,
                    cand.travel,
                    fingertip.radius,
                    fingertip.mu,
                    support=belief.support,
                    push_height=height,
                )
            except (SlideInputError, PhysicsError):
                continue  # a push the model cannot roll out is not chosen
            final = rollout.X_WO[:, -1]
            cells = cell_positions(belief.grid, final)  # (K, n, 2)
            mean = np.einsum('k,kni->ni', belief.weight, cells)
            spread = np.linalg.norm(cells - mean[None], axis=2).mean(axis=1)
            scores[j] = float(belief.weight @ spread)
    if not np.any(np.isfinite(scores)):
        raise NoSolutionError('no candidate push could be simulated with the belief')
    if progress is not None:
        progress(1.0)
    return pool[int(np.argmax(scores))], scores


def outline_point(
    grid: Grid,
    rng: np.random.Generator,
    sides: tuple[FloatArray, FloatArray, FloatArray, NDArray[np.int64]] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """A random point on the object's outline (object frame) and the inward normal there:
    on one of the sides pushes start on (:func:`slide_core.geometry.push_sides`, a cell's
    free side or a piece of the real outline; ``sides``, when already found), drawn
    uniformly, within 80% of its half-length of its middle."""
    mid, normals, half, _ = push_sides(grid) if sides is None else sides
    k = int(rng.integers(len(mid)))
    n_out = normals[k]
    along = np.array([-n_out[1], n_out[0]]) * rng.uniform(-0.8, 0.8) * half[k]
    return mid[k] + along, -n_out


def random_push(
    grid: Grid,
    X_WO: FloatArray,
    table: Table,
    fingertip: Fingertip,
    rng: np.random.Generator,
    obstacles: Sequence[Obstacle] = (),
) -> Primitive:
    """An exploratory push as the robot pokes an unknown object: a random point on the
    outline, along the inward normal turned by up to 30 degrees, 3 to 7 cm at 3 to 6 cm/s.
    Safe: a candidate whose fingertip would come down on the object, pass over a part of
    it lower than the fingertip's bottom (:func:`slide_core.model.side_met`), take the
    fingertip or the object into an obstacle (:func:`avoids_obstacles`), or carry the
    object out of the middle of the table, is drawn again (DRAWS tries). When no draw
    keeps the object in the middle (it lies near an edge), the one that ends nearest the
    middle is taken, which pushes it back towards it; NoSolutionError when no draw's
    approach is clear of the object and the obstacles, or the object is nowhere taller
    than the fingertip's bottom. ``X_WO``: (3,) the object's pose [m, m, rad]."""
    X_WO = np.asarray(X_WO, dtype=float)
    if X_WO.shape != (3,) or not np.isfinite(X_WO).all():
        raise SlideInputError(f'X_WO must be a finite pose [x, y, yaw], got {X_WO}')
    margin = reach(grid) + EXPLORATION_MARGIN
    lo = np.array([margin, -table.width / 2 + margin])
    hi = np.array([table.depth - margin, table.width / 2 - margin])
    R = rotation(float(X_WO[2]))
    sides = push_sides(grid)
    best: tuple[float, FloatArray, FloatArray, float] | None = None
    low = 0  # draws whose contact is lower than the fingertip's bottom
    for _ in range(DRAWS):
        contact, normal_in = outline_point(grid, rng, sides)
        a = rng.uniform(-math.radians(30), math.radians(30))
        direction = rotation(a) @ normal_in
        travel = rng.uniform(0.03, 0.07)
        if not side_met(grid, contact, fingertip):
            low += 1
            continue
        if not approach_clear(grid, contact, direction, fingertip):
            continue
        if not avoids_obstacles(grid, X_WO, contact, direction, travel, fingertip, obstacles):
            continue
        moved = X_WO[:2] + travel * (R @ direction)
        # How far the push would carry the object out of the middle [m] (0: it stays in).
        outside = float(np.linalg.norm(np.maximum(lo - moved, 0) + np.maximum(moved - hi, 0)))
        if best is None or outside < best[0]:
            best = (outside, contact, direction, travel)
        if outside == 0.0:
            break
    if best is None and low == DRAWS:
        raise NoSolutionError(
            f"the object stands no higher than the fingertip's bottom "
            f'({fingertip.clearance * 1000:.1f} mm above the table) wherever a push was '
            'drawn: the fingertip would pass over it (lower fingertip.height in the workcell '
            "file, or check the grid's heights)"
        )
    if best is None:
        raise NoSolutionError(
            'no exploratory push found whose fingertip comes down clear of the object'
            + ', and which keeps the fingertip and the object clear of the obstacles'
            * bool(obstacles)
            + f' ({DRAWS} random draws on its outline)'
        )
    _, contact, direction, travel = best
    return Primitive.create(contact, direction, travel, rng.uniform(0.03, 0.06))
