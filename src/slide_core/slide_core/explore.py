"""Active exploration: which push to make next (the papers' strategies).

Candidates are straight fingertip pushes at points of the object's outline along the inward
normal (:func:`candidates`). Strategies:

- ``random``: any candidate, uniformly.
- ``most-different``: the candidate farthest from the pushes already made, measured on the
  contact point (object frame) and the direction (paper 1's exploration baseline).
- ``most-distinctive``: the candidate on which the belief's models disagree most: the
  probability-weighted spread of the cells' predicted final positions (paper 2). Every
  candidate is simulated with every model, batched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, cell_positions, rotation
from slide_core.identify import Belief
from slide_core.physics import FingertipPush, simulate

STRATEGIES = ('random', 'most-different', 'most-distinctive')


@dataclass(frozen=True)
class Candidate:
    """A straight push in the object frame: fingertip start p_OF (2,) and direction (2,)."""

    p_OF: FloatArray
    direction_O: FloatArray
    travel: float

    def in_world(
        self, X_WO: FloatArray, speed: float, dt: float, radius: float, mu: float
    ) -> FingertipPush:
        R = rotation(float(X_WO[2]))
        return FingertipPush.straight(
            X_WO[:2] + R @ self.p_OF, R @ self.direction_O, self.travel, speed, dt, radius, mu
        )


def candidates(
    belief: Belief, travel: float = 0.04, radius: float = 0.008, clearance: float = 0.005
) -> list[Candidate]:
    """One push per free side of every outline cell, at the side's middle, inward."""
    g = belief.grid
    occ = np.pad(g.occupancy, 1)
    out = []
    half = g.cell_size / 2
    for (r, c), p in zip(g.cell_rc, g.p_OC, strict=True):
        for dr, dc, n_out in ((-1, 0, (0, 1)), (1, 0, (0, -1)), (0, -1, (-1, 0)), (0, 1, (1, 0))):
            if occ[r + 1 + dr, c + 1 + dc]:
                continue
            n = np.array(n_out, dtype=float)
            start = p + n * (half + radius + clearance)
            out.append(Candidate(start, -n, travel))
    return out


def choose(
    belief: Belief,
    X_WO: FloatArray,
    strategy: str,
    rng: np.random.Generator,
    done: list[Candidate] | None = None,
    pool: list[Candidate] | None = None,
    max_candidates: int = 12,
    speed: float = 0.05,
    dt: float = 0.01,
    radius: float = 0.008,
    mu: float = 0.3,
) -> tuple[Candidate, FloatArray]:
    """The next push by ``strategy`` and the scores (C,) of the candidates considered."""
    if strategy not in STRATEGIES:
        raise SlideInputError(f'unknown strategy {strategy!r}; choose from {STRATEGIES}')
    pool = pool if pool is not None else candidates(belief, radius=radius)
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
        scores = np.empty(len(pool))
        for j, cand in enumerate(pool):
            push = cand.in_world(np.asarray(X_WO, dtype=float), speed, dt, radius, mu)
            final = simulate(belief.grid, belief.mass, belief.friction, push, X_WO).X_WO[:, -1]
            cells = cell_positions(belief.grid, final)  # (K, n, 2)
            mean = np.einsum('k,kni->ni', belief.weight, cells)
            spread = np.linalg.norm(cells - mean[None], axis=2).mean(axis=1)
            scores[j] = float(belief.weight @ spread)
    return pool[int(np.argmax(scores))], scores
