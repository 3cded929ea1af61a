"""Held-out evaluation of identified models: replay recorded pushes with the recorded
fingertip motion (kinematic fingertip, the simulator's contact model) and compare where the
cells end up.

``add_error_m`` is the papers' metric: the mean over pushes of the mean distance between
each cell's predicted and observed position at the push's end, for the most probable
model. ``uniform_add_error_m`` replays with uniform maps of the same total mass and the
same total friction force (no identification). With the ground truth (twin bags only):
``com_error_m`` of the most probable model, and ``truth_in_support``: whether the true
centre of mass lies in the convex hull of the models' centres of mass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial import ConvexHull, QhullError

from slide_core.geometry import FloatArray, Grid, cell_positions
from slide_core.identification.errors import IdentificationError
from slide_core.identification.pushes import PushData
from slide_core.model import Belief, Fingertip, uniform_maps
from slide_core.physics import DEFAULT_SUPPORT, FingertipPush, simulate


@dataclass(frozen=True)
class Evaluation:
    """Figures of a belief on held-out pushes; distances in metres."""

    add_error_m: float
    uniform_add_error_m: float
    expected_add_error_m: float
    per_push_m: list[float]
    uniform_per_push_m: list[float]
    moved_m: float
    com_error_m: float | None = None
    truth_in_support: bool | None = None


def final_errors(grid: Grid, X_final: FloatArray, pushes: list[PushData]) -> FloatArray:
    """(K, P) mean cell distance at the end, predicted X_final (K, P, 3) vs observed."""
    out = np.empty(X_final.shape[:2])
    for j, pd in enumerate(pushes):
        observed = cell_positions(grid, pd.X_steps[-1])
        predicted = cell_positions(grid, X_final[:, j])
        out[:, j] = np.linalg.norm(predicted - observed[None], axis=2).mean(axis=1)
    return out


def replay(
    grid: Grid,
    mass: FloatArray,
    friction: FloatArray,
    pushes: list[PushData],
    fingertip: Fingertip,
    progress: Callable[[int, int], None] | None = None,
    support: str = DEFAULT_SUPPORT,
    push_height: ArrayLike = 0.0,
) -> FloatArray:
    """Final poses (K, P, 3) of K models (K, n) replaying each push's fingertip path, under
    the support model ``support``, the push's moment at ``push_height`` [m], one or (n,)
    per cell (:meth:`Fingertip.force_heights`; 0: none)."""
    m, mu = np.atleast_2d(mass), np.atleast_2d(friction)
    out = np.empty((m.shape[0], len(pushes), 3))
    for j, pd in enumerate(pushes):
        tip = FingertipPush.create(pd.p_WF, fingertip.radius, fingertip.mu, pd.push.dt)
        out[:, j] = simulate(
            grid, m, mu, tip, pd.X_WO0, None, support, push_height=push_height
        ).X_WO[:, -1]
        if progress:
            progress(j + 1, len(pushes))
    return out


def in_hull(points: FloatArray, p: FloatArray, tol: float = 1e-3) -> bool:
    """Whether p (2,) lies in the convex hull of points (K, 2), within tol [m]."""
    try:
        hull = ConvexHull(points)
    except QhullError:
        pass  # fewer than 3 points or all on a line: the segment they span
    else:
        if float(np.max(hull.equations[:, :2] @ p + hull.equations[:, 2])) <= 0.0:
            return True
        # Outside: its distance to the nearest edge (the tolerance was applied only to
        # the degenerate hulls below).
        corners = points[hull.vertices]
        a, b = corners, np.roll(corners, -1, axis=0)
        d = b - a
        t = np.clip(np.einsum('ij,ij->i', p - a, d) / np.einsum('ij,ij->i', d, d), 0.0, 1.0)
        return bool(np.min(np.linalg.norm(a + t[:, None] * d - p, axis=1)) <= tol)
    start = points[0]
    far = points[int(np.argmax(np.linalg.norm(points - start, axis=1)))]
    d = far - start
    if float(np.linalg.norm(d)) <= tol:
        return bool(np.linalg.norm(p - start) <= tol)
    t_all = (points - start) @ d / (d @ d)
    t = float(np.clip((p - start) @ d / (d @ d), t_all.min(), t_all.max()))
    return bool(np.linalg.norm(start + t * d - p) <= tol)


def evaluate(
    belief: Belief,
    pushes: list[PushData],
    fingertip: Fingertip,
    truth_mass: FloatArray | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Evaluation:
    """Replay held-out pushes with every model of the belief and with uniform maps."""
    if not pushes:
        raise IdentificationError('evaluation needs at least one test push')
    grid = belief.grid
    k = belief.best
    um, umu = uniform_maps(belief.mass[k], belief.friction[k], grid.area)
    masses = np.vstack((belief.mass, um[None]))
    frictions = np.vstack((belief.friction, umu[None]))
    finals = replay(
        grid,
        masses,
        frictions,
        pushes,
        fingertip,
        progress,
        belief.support,
        belief.push_heights(fingertip),
    )
    errors = final_errors(grid, finals, pushes)  # (K + 1, P)
    moved = np.mean(
        [
            np.linalg.norm(
                cell_positions(grid, pd.X_steps[-1]) - cell_positions(grid, pd.X_WO0), axis=1
            ).mean()
            for pd in pushes
        ]
    )
    com_error = in_support = None
    if truth_mass is not None:
        if truth_mass.shape != (grid.n,):
            raise IdentificationError('the ground truth is for another grid than the belief')
        true_com = truth_mass @ grid.p_OC / truth_mass.sum()
        coms = belief.com()
        com_error = float(np.linalg.norm(coms[k] - true_com))
        in_support = in_hull(coms, true_com)
    return Evaluation(
        add_error_m=float(errors[k].mean()),
        uniform_add_error_m=float(errors[-1].mean()),
        expected_add_error_m=float(belief.weight @ errors[:-1].mean(axis=1)),
        per_push_m=errors[k].tolist(),
        uniform_per_push_m=errors[-1].tolist(),
        moved_m=float(moved),
        com_error_m=com_error,
        truth_in_support=in_support,
    )
