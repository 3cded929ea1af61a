"""The papers' final stage: the models refined on the simulator's own pose error.

The wrench-space loss (:mod:`slide_core.identification.training`) is an equation-error fit:
the maps it finds explain the measured wrenches step by step, and can still disagree with
what the simulator then predicts. This stage minimises what the simulator predicts instead:
the training pushes are cut into windows of ``window_s`` seconds over which the object
moves; each window is simulated from its observed pose and velocity with the measured
force (:func:`slide_core.physics.rollout_loss`, short enough that a force-driven rollout
does not drift away from the fingertip it lost), and the loss is the mean squared cell
position error at the window's end, with its exact gradient through every step. The
models of a belief are refined together by the same spectral projected gradient as
identification, each within its own bounds, warm-started from the wrench-space solution,
and re-weighted by the softmax of their new losses. Maps identified with the push's moment
(``Belief.push_moment``) are refined with it: the windows tip the loads as the simulators
do, at the heights the pushes acted at, and the gradients follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import time

import numpy as np
from numpy.typing import ArrayLike

from slide_core.geometry import FloatArray, Grid, cell_positions, edge_support
from slide_core.identification.bounds import Bounds, schedule
from slide_core.identification.errors import IdentificationError
from slide_core.identification.identify import Identification, softmax_weights
from slide_core.identification.optimisers import Counter, Progress, spg
from slide_core.identification.pushes import PushData
from slide_core.identification.training import TrainingSet, checked_heights
from slide_core.model import Belief
from slide_core.physics import WrenchPush, rollout_loss, simulate

WINDOW_S = 0.1
"""Length [s] of the simulated windows."""
MIN_TRAVEL = 1e-3
"""A window counts when the object's origin moves at least this far [m] over it."""


@dataclass(frozen=True)
class _Window:
    push: WrenchPush
    X0: FloatArray
    V0: FloatArray
    X_end: FloatArray


def windows(
    pushes: list[PushData], window_s: float = WINDOW_S, edge_of: Grid | None = None
) -> list[_Window]:
    """The moving windows of the pushes: force, start pose and twist, end pose. With
    ``edge_of`` (the object's grid; poses in the table frame) those in which some of it is
    over the table's edge, at either end, are left out: the rollout gradients carry one
    support for the whole window and know no edge."""
    out = []
    for pd in pushes:
        dt = pd.push.dt
        W = max(2, int(round(window_s / dt)))
        X = pd.X_steps.copy()
        X[:, 2] = np.unwrap(X[:, 2])
        for t0 in range(1, pd.push.steps - W, W):
            t1 = t0 + W
            if np.linalg.norm(X[t1, :2] - X[t0, :2]) < MIN_TRAVEL:
                continue
            if edge_of is not None and np.any(edge_support(edge_of, X[[t0, t1]])[0] < 1.0):
                continue
            V0 = (X[t0] - X[t0 - 1]) / dt  # the step into t0, as the simulator carries it
            sl = slice(t0, t1)
            push = WrenchPush(pd.push.p_OA[sl], pd.push.f_W[sl], pd.push.tau[sl], dt)
            out.append(_Window(push, X[t0], V0, X[t1]))
    return out


class RolloutProblem:
    """The windows' pose loss [m^2] and its gradient, in the shape the optimisers take."""

    def __init__(
        self,
        grid: Grid,
        pushes: list[PushData],
        support: str,
        window_s: float,
        push_height: ArrayLike = 0.0,
        table_edge: bool = False,
    ):
        self.grid = grid
        self.support = support
        self.push_height = push_height
        self.windows = windows(pushes, window_s, grid if table_edge else None)
        if not self.windows:
            raise IdentificationError(
                'the training pushes have no window in which the object moves wholly on the '
                'table: nothing to refine on'
            )

    def quick_loss_grad(
        self, m: FloatArray, mu: FloatArray, grad: bool = True
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Losses (K,) [m^2] of hypotheses (K, n) and, with ``grad``, their gradients;
        without, zero gradients and the compiled rollouts (no sensitivities to carry)."""
        K, n = m.shape
        loss, g_m, g_mu = np.zeros(K), np.zeros((K, n)), np.zeros((K, n))
        s = 1.0 / len(self.windows)
        if not grad:
            for w in self.windows:
                X = simulate(
                    self.grid,
                    m,
                    mu,
                    w.push,
                    w.X0,
                    w.V0,
                    self.support,
                    push_height=self.push_height,
                ).X_WO[:, -1]
                err = cell_positions(self.grid, X) - cell_positions(self.grid, w.X_end)[None]
                loss += np.einsum('kni,kni->k', err, err) / n
            return loss * s, g_m, g_mu
        for w in self.windows:
            r = rollout_loss(
                self.grid,
                m,
                mu,
                w.push,
                w.X0,
                [w.push.steps],
                w.X_end[None],
                w.V0,
                self.support,
                push_height=self.push_height,
            )
            loss += r.loss
            g_m += r.d_mass
            g_mu += r.d_friction
        return loss * s, g_m * s, g_mu * s


def refine(
    found: Identification,
    train: TrainingSet,
    pushes: list[PushData],
    bounds: Bounds | None = None,
    budget: int = 200,
    window_s: float = WINDOW_S,
    temperature: float = 0.05,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    push_height: ArrayLike | None = None,
) -> Identification:
    """``found``'s models refined on the simulator's pose error over ``pushes``, the pushes
    ``train`` was built from, each within the bounds it was identified in
    (``found.bounds``; when ``bounds`` is given or ``found`` does not say, ``bounds`` split
    by the probabilistic schedule for K > 1); ``budget`` counts model evaluations, as there.
    The belief keeps each model's wrench-space loss, recomputed.

    Maps identified with the push's moment (``belief.push_moment``) need ``push_height``,
    the heights [m] the pushes acted at, one or (n,) per cell (those ``train`` was built
    with: :meth:`slide_core.model.Fingertip.force_heights`); maps without it refine without
    it (``push_height`` must then be None or 0)."""
    t0 = time.perf_counter()
    belief = found.belief
    grid, K, n = belief.grid, belief.K, belief.grid.n
    if belief.push_moment and push_height is None:
        raise IdentificationError(
            "these maps were identified with the push's moment: pass push_height, the "
            'heights the pushes acted at (Fingertip.force_heights of the grid)'
        )
    given = 0.0 if push_height is None else push_height
    if not belief.push_moment and np.any(np.asarray(given, dtype=float) != 0.0):
        raise IdentificationError(
            "these maps were identified without the push's moment: refine them without push_height"
        )
    heights = checked_heights(given, n, 'cell')
    if bounds is None and len(found.bounds) == K:
        boxes = list(found.bounds)
    else:
        base = bounds or Bounds.from_grid(grid)
        boxes = schedule(base, K) if K > 1 else [base]
    # Windows over the edge only where ``train`` saw it (its poses in the table frame).
    problem = RolloutProblem(
        grid, pushes, belief.support, window_s, heights, train.supported is not None
    )
    counter = Counter(problem, budget, progress, should_stop)
    theta0 = np.concatenate((belief.mass, belief.friction), axis=1)
    theta0 = np.stack([b.project(t) for b, t in zip(boxes, theta0, strict=True)])
    theta = spg(counter, boxes, theta0, np.random.default_rng(0))
    losses, _, _ = problem.quick_loss_grad(theta[:, :n], theta[:, n:], grad=False)
    weight = softmax_weights(losses, temperature) if K > 1 else np.ones(1)
    refined = Belief.create(
        grid,
        theta[:, :n].copy(),
        theta[:, n:].copy(),
        weight,
        train.loss(theta[:, :n], theta[:, n:]),
        f'{belief.method}+rollout',
        belief.support,
        push_moment=belief.push_moment,
    )
    return Identification(
        refined, found.simulations + counter.used, found.seconds + time.perf_counter() - t0,
        found.trace, tuple(boxes),
    )  # fmt: skip
