r"""How the table carries the object: each cell's normal load, from the mass map.

Two support models, chosen per run (``support=`` of the simulators, the losses, the planner
and identification; a belief records the one its maps were identified under):

``'cell-mass'`` (the papers'): cell ``i`` presses on the table with its own weight,
``N_i = m_i g``. That is right for a bag of loose cells, not for a rigid object.

``'rigid'`` (the default): the cells are one rigid body resting on a slightly compliant
table (an elastic, Winkler, foundation). A rigid body can only sink and tilt, so the
table's pressure is linear across the footprint where it touches and zero where the body
would lift off:

    ``N_i = a_i max(0, z_0 + z_1 d_ix + z_2 d_iy)``,  ``d_i = r_i - r_bar``,

with ``a_i`` the cell's supported area fraction (1 for a whole cell) and ``r_bar`` the
supported cells' area centroid. The three unknowns follow from force and moment balance
about the table,

    ``sum_i N_i = M g``,  ``sum_i N_i d_i = M g (c - r_bar)``,

with ``M = sum_j m_j`` and ``c`` the centre of mass. Without lift-off this is linear,
``z = H^-1 b`` with ``H = sum_i a_i D_i D_i^T``, ``D_i = (1, d_i)``, ``b = g sum_j m_j E_j``,
``E_j = (1, r_j - r_bar)`` over all cells (unsupported ones weigh too). When some ``N_i``
would be negative the balance with lift-off is the stationary point of the convex
``F(z) = 1/2 sum_i a_i max(0, D_i . z)^2 - b . z``, found by Newton's method on the active
cells (a few iterations). Among all load distributions that balance the body this is the
one of minimum weighted norm on the active cells (the elastic-foundation / minimum-norm
distribution). Loads are per cell centre: for a whole square cell under a linear pressure,
the integral over the cell is its area times the pressure at the centre.

Friction of cell ``i`` is ``mu_i N_i``. The loads depend on the mass map only through
``M`` and ``c``: ``N = P m`` with ``P = g diag(a * active) D H_A^-1 E^T`` of rank 3, so
``dN/dm = P`` on a fixed active set, which is what the gradients use.

A push tips the pressure: its force F acts at the fingertip's height h above the table,
where friction, in the table plane, cannot balance its moment, so the moment balance reads
``sum_i N_i d_i = M g (c - r_bar) + h F`` and the pressure shifts towards the push by
``h |F| / (M g)`` (4 to 10 mm for mu = 0.3 to 0.6 and h = 17 mm). It is on by default
everywhere a fingertip pushes, with h the middle of the part of the touched cell's side the
fingertip covers (:meth:`slide_core.model.Fingertip.force_heights`):

- the simulators (``simulate(push_height=)``, the planner's ``quasistatic.push``) tip each
  step's loads with the push force of the step before (a fingertip's force is the step's
  unknown) by :meth:`Support.tipping_basis`: the linear change on the cells the static
  loads keep in contact, clipped at zero where it would lift one more off;
- identification (``TrainingSet.push_height``) tips each step's loads by the measured
  force with :meth:`Support.tipping_loads`, the no-lift-off linear change, so that its loss
  stays a quadratic form in the masses (the two agree unless a hypothesis lifts cells off);
- a belief records whether its maps were fitted with it (``Belief.push_moment``), and the
  simulators that replay and plan with the belief follow it.

Measured: with the library's true maps the core predicts the twin's pushes to 0.8 mm with
the moment against 1.8 mm without it; identification finds the centre of mass to about
6 mm against 11 mm (26 and 32 mm to 3 and 7 mm on novel objects with a heavy end), because
without it the fit moves the centre of mass to explain a pressure that the push, not the
mass, had moved. The rollout gradients (:mod:`slide_core.physics.grad`, the optional
refinement) follow it: each step's tipped loads, clipped where a cell lifts off, their
mass derivatives on the cells still in contact, and their turning with the body (the
body-frame force, hence the tipping, depends on the yaw).

What pushes can identify under it: the dynamics see the mass map only through its total
``M``, centre of mass ``c`` and rotational inertia about it, and the friction only through
each loaded cell's friction force ``mu_i N_i``. With a free friction coefficient per cell,
a shifted centre of mass and a compensating friction map give the same friction forces, so
``M`` and ``c`` are left to the accelerations, which slow pushes barely excite: measured on
the twin, the fit finds ``c`` to 0.8 to 5.6 mm when the friction map is known and only to
about 1 cm when it is free. Neither the per-cell mass map beyond those moments nor the
friction of a cell that carries no load (lifted off, or over the edge) is identifiable.
Beliefs carry mass maps, which are one representative of each identifiable class.

Over the table's edge the degeneracy breaks: with part of the object off the table the
carried cells' loads follow the centre of mass otherwise than the whole object's do
(:func:`moment_loads`), while the friction coefficients stay those of the same cells, so a
shifted centre of mass no longer has a friction map that explains both kinds of push
(identification carries each step's carried cells: ``TrainingSet.supported``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from slide_core.geometry import FloatArray, Grid
from slide_core.physics.inputs import PhysicsError

GRAVITY = 9.81
"""Standard gravity [m/s^2]."""

SupportKind = Literal['rigid', 'cell-mass']
SUPPORT_MODELS: tuple[SupportKind, ...] = ('rigid', 'cell-mass')
DEFAULT_SUPPORT: SupportKind = 'rigid'

_NEWTON_ITERATIONS = 50


def check_support(support: str) -> SupportKind:
    """``support`` as a support model name; PhysicsError naming the choices if unknown."""
    if support not in SUPPORT_MODELS:
        raise PhysicsError(
            f'unknown support model {support!r}: choose one of {", ".join(SUPPORT_MODELS)}'
        )
    return support


def moment_loads(r: ArrayLike, area: ArrayLike) -> FloatArray:
    """(S, n, 3) the rigid support's normal loads, without lift-off, per unit of the
    weight's moments ``g (M, M c_x, M c_y)`` about the origin of r's frame, for S sets of
    supported areas ``area`` (S, n) of cells that the table carries at r (n, 2) or, per
    set, (S, n, 2) [m]: ``N = L @ (g F^T m)`` with ``F = (1, r_j)`` of the cells' centres,
    whatever the masses m and however much of the object the table carries
    (``L = diag(a) D H^-1 T``, T moving the moments to the carried centroid). A cell
    partly over the table's edge is carried at the centroid of its part on the table
    (:func:`slide_core.geometry.edge_support`): its load, the integral of the linear
    pressure over that part, is its area times the pressure there. Columns 1 and 2 are
    also the loads per unit table-plane moment of a push (:meth:`Support.tipping_loads`),
    which adds to the weight's moment. Each set is one step of a push over the table's
    edge, whose carried cells change as it slides."""
    p = np.asarray(r, dtype=float)
    a = np.atleast_2d(np.asarray(area, dtype=float))
    if p.ndim == 2:
        p = np.broadcast_to(p[None], (a.shape[0],) + p.shape)
    if p.ndim != 3 or p.shape != a.shape + (2,):
        raise PhysicsError(
            f'r must be (n, 2) or (S, n, 2) and area (S, n), got {np.shape(r)}, {a.shape}'
        )
    if not np.all(np.isfinite(a)) or np.any(a < 0.0) or np.any(a.sum(axis=1) <= 0.0):
        raise PhysicsError('supported areas must be finite, >= 0, and not all zero')
    if not np.all(np.isfinite(p)):
        raise PhysicsError('cell positions must be finite')
    r_bar = np.einsum('sn,snj->sj', a, p) / a.sum(axis=1, keepdims=True)  # (S, 2)
    E = np.concatenate((np.ones(a.shape + (1,)), p - r_bar[:, None, :]), axis=2)  # (S, n, 3)
    H = np.einsum('sni,snj->sij', E * a[..., None], E)
    T = np.repeat(np.eye(3)[None], a.shape[0], axis=0)
    T[:, 1:, 0] = -r_bar
    return np.asarray((E * a[..., None]) @ (np.linalg.pinv(H) @ T), dtype=float)


@dataclass(frozen=True, eq=False)
class Support:
    """The normal loads of a grid's cells under one support model.

    Attributes:
        kind: ``'rigid'`` or ``'cell-mass'`` (see the module docstring).
        r: (n, 2) cell centres [m] in any frame fixed to the object.
        area: (n,) supported area fraction of each cell (0 for a cell that the table does
            not carry, e.g. over the edge; 1 for a whole cell on the table).
    """

    kind: SupportKind
    r: FloatArray
    area: FloatArray
    _E: FloatArray = field(init=False, repr=False)  # (n, 3) rows (1, r_j - r_bar)
    _H_all: FloatArray = field(init=False, repr=False)  # (3, 3) H with every cell active
    _L: FloatArray = field(init=False, repr=False)  # (n, 3) moment_loads of the areas
    _P_all: FloatArray = field(init=False, repr=False)  # (n, n) dN/dm without lift-off

    def __post_init__(self) -> None:
        kind = check_support(self.kind)
        r = np.asarray(self.r, dtype=float)
        area = np.asarray(self.area, dtype=float)
        if r.ndim != 2 or r.shape[1] != 2 or area.shape != (r.shape[0],):
            raise PhysicsError(f'r must be (n, 2) and area (n,), got {r.shape}, {area.shape}')
        if not np.all(np.isfinite(area)) or np.any(area < 0.0) or area.sum() <= 0.0:
            raise PhysicsError('supported areas must be finite, >= 0, and not all zero')
        r_bar = area @ r / area.sum()
        E = np.column_stack((np.ones(r.shape[0]), r - r_bar))
        object.__setattr__(self, 'kind', kind)
        object.__setattr__(self, 'r', r)
        object.__setattr__(self, 'area', area)
        H = (E * area[:, None]).T @ E
        # Without lift-off the loads are linear in the weight's moments about r's origin,
        # g F^T m with F = (1, r_j): one formula, moment_loads, for the whole table and for
        # the steps over its edge.
        L = moment_loads(r, area[None])[0]
        if kind == 'cell-mass':
            P = np.diag(GRAVITY * (area > 0.0))
        else:
            P = GRAVITY * L @ np.column_stack((np.ones(r.shape[0]), r)).T
        object.__setattr__(self, '_E', E)
        object.__setattr__(self, '_H_all', H)
        object.__setattr__(self, '_L', L)
        object.__setattr__(self, '_P_all', P)

    @classmethod
    def of(cls, grid: Grid, kind: str = DEFAULT_SUPPORT, area: ArrayLike | None = None) -> Support:
        """The support of ``grid``'s cells: by default each on the table with the share of
        its square the object covers (:attr:`Grid.area`), else with ``area`` (n,)."""
        a = grid.area if area is None else np.asarray(area, dtype=float)
        return cls(check_support(kind), grid.p_OC, a)

    @property
    def n(self) -> int:
        return int(self.r.shape[0])

    def _active_solution(self, b: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
        """z (3,) and the active cells (n,) of the balance with lift-off for b (3,)."""
        E, a = self._E, self.area
        z = np.asarray(np.linalg.lstsq(self._H_all, b, rcond=None)[0], dtype=float)
        carried = a > 0.0

        def objective(z: FloatArray) -> float:
            p = np.maximum(E @ z, 0.0)
            return float(0.5 * np.sum(a * p * p) - b @ z)

        for _ in range(_NEWTON_ITERATIONS):
            active = carried & (E @ z > 0.0)
            if not active.any():
                break  # the balance is out of reach: said below
            Ea = E[active] * a[active, None]
            grad = Ea.T @ (E[active] @ z) - b
            if np.abs(grad).max() <= 1e-12 * max(abs(b[0]), 1e-300):
                return z, active
            step = np.asarray(np.linalg.lstsq(Ea.T @ E[active], grad, rcond=None)[0], dtype=float)
            f0, t = objective(z), 1.0
            while t > 1e-8 and objective(z - t * step) > f0 - 1e-4 * t * (grad @ step):
                t *= 0.5
            z = np.asarray(z - t * step, dtype=float)
        active = carried & (E @ z > 0.0)
        residual = (E[active] * a[active, None]).T @ (E[active] @ z) - b
        if np.abs(residual).max() > 1e-6 * max(abs(b[0]), 1e-300):
            raise PhysicsError(
                'the supported cells cannot balance the object (its centre of mass is '
                'outside them: it would tip)'
            )
        return z, active

    def _lifting(self, m: FloatArray, linear: FloatArray) -> list[int]:
        """Hypotheses whose linear loads put some supported cell in tension (they lift
        off). A hypothesis with a negative mass (an optimiser's trial point outside the
        physical range) keeps the linear loads, which extend smoothly past it."""
        tension = np.any((linear < 0.0) & (self.area > 0.0), axis=1)
        return [int(k) for k in np.nonzero(tension & np.all(m >= 0.0, axis=1))[0]]

    def _masses(self, mass: ArrayLike) -> FloatArray:
        m = np.atleast_2d(np.asarray(mass, dtype=float))
        if m.shape[1] != self.n:
            raise PhysicsError(f'mass must have {self.n} cells per hypothesis, got {m.shape}')
        return m

    def loads(self, mass: ArrayLike) -> FloatArray:
        """Normal loads N (K, n) [N] of masses (K, n) or (n,) [kg] (returns (K, n))."""
        m = self._masses(mass)
        out = m @ self._P_all.T  # no lift-off (and the cell-mass loads): linear in m
        if self.kind == 'cell-mass':
            return np.asarray(out, dtype=float)
        b = GRAVITY * m @ self._E  # (K, 3)
        for k in self._lifting(m, out):
            z, active = self._active_solution(b[k])  # some cells lift off
            out[k] = np.where(active, self.area * (self._E @ z), 0.0)
        return np.asarray(out, dtype=float)

    def loads_and_jacobian(self, mass: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """:meth:`loads` (K, n) and dN/dm (K, n, n), ``[k, i, j]`` the change of cell i's
        load per kg at cell j (on the active cells), from one balance per hypothesis."""
        m = self._masses(mass)
        K = m.shape[0]
        N = m @ self._P_all.T
        dN = np.repeat(self._P_all[None], K, axis=0)
        if self.kind == 'cell-mass':
            return np.asarray(N, dtype=float), dN
        b = GRAVITY * m @ self._E
        for k in self._lifting(m, N):
            z, active = self._active_solution(b[k])
            N[k] = np.where(active, self.area * (self._E @ z), 0.0)
            dN[k] = 0.0
            dN[k, active] = GRAVITY * self._load_map(active) @ self._E.T
        return np.asarray(N, dtype=float), dN

    def _load_map(self, active: NDArray[np.bool_]) -> FloatArray:
        """(n_a, 3) ``a_i D_i^T H_A^-1`` of the active cells: their loads for a right-hand
        side b (3,) of the balance are this times b."""
        E_a = self._E[active]
        weighted = E_a * self.area[active, None]
        return np.asarray(weighted @ np.linalg.pinv(weighted.T @ E_a), dtype=float)

    def load_jacobian(self, mass: ArrayLike) -> FloatArray:
        """dN/dm (K, n, n) of :meth:`loads_and_jacobian`."""
        return self.loads_and_jacobian(mass)[1]

    def tipping_loads(self, moment: ArrayLike) -> FloatArray:
        """Load changes (S, n) [N] that table-plane moments ``moment`` (S, 2) [N m] cause:
        a horizontal push force F at height h above the table adds ``h F`` to the right of
        the moment balance, ``sum_i N_i d_i = M g (c - r_bar) + h F``, so the pressure
        shifts towards the push by ``h |F| / (M g)`` (friction acts in the table plane and
        adds no such moment). The change is the no-lift-off linear one,
        ``a_i D_i . H^-1 (0, h F)``, whatever the masses: it sums to zero, and where the
        static loads lift a cell off it is not clipped. Zero under ``'cell-mass'``."""
        mom = np.atleast_2d(np.asarray(moment, dtype=float))
        if mom.ndim != 2 or mom.shape[1] != 2 or not np.all(np.isfinite(mom)):
            raise PhysicsError(f'moments must be finite and (S, 2), got shape {mom.shape}')
        if self.kind == 'cell-mass':
            return np.zeros((mom.shape[0], self.n))
        return np.asarray(mom @ self._L[:, 1:].T, dtype=float)  # moment_loads' columns 1, 2

    def tipping_basis(self, mass: ArrayLike) -> FloatArray:
        """Load changes (K, 2, n) [N per N m] per unit table-plane moment along x and y
        (:meth:`tipping_loads`) for masses (K, n) or (n,) [kg]: on the cells each
        hypothesis's static loads keep in contact (a cell they lift off stays off), so
        they sum to zero and balance the moment. Zero under ``'cell-mass'``."""
        m = self._masses(mass)
        K = m.shape[0]
        out = np.repeat(self.tipping_loads(np.eye(2))[None], K, axis=0)  # nothing lifted off
        if self.kind == 'cell-mass':
            return out
        b = GRAVITY * m @ self._E
        for k in self._lifting(m, m @ self._P_all.T):
            active = self._active_solution(b[k])[1]
            out[k] = 0.0
            out[k][:, active] = self._load_map(active)[:, 1:].T  # columns (0, moment)
        return out
