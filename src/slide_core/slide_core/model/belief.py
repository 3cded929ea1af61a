"""The belief: K weighted (mass, friction) models of one object, from identification to
planning to messages, and its YAML file.

One type serves every stage: identification returns it, the planner reads it, the nodes
send it as ``slide_interfaces/ModelBelief`` (see :mod:`slide_core.io`), and ``slide
identify`` writes it as YAML. Its maps are validated once, here, at the boundary: finite,
masses positive and below what the densest material could put in a cell, friction within
[0, FRICTION_MAX], weights non-negative and summing to 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
import yaml

from slide_core.errors import SlideInputError
from slide_core.files import read_yaml, write_text_atomic
from slide_core.geometry import FloatArray, Grid, GridError, check_object_grid, grid_radius
from slide_core.model.objects import FRICTION_MAX, MAX_DENSITY, MIN_DENSITY
from slide_core.model.values import finite_number, shown
from slide_core.model.workcell import Fingertip
from slide_core.physics import DEFAULT_SUPPORT, SUPPORT_MODELS

BELIEF_KIND = 'slide/belief'


class BeliefError(SlideInputError):
    """A belief whose maps or weights cannot describe an object."""


def max_cell_mass(grid: Grid) -> FloatArray:
    """(n,) the most mass [kg] a cell can hold: its volume (of its covered part,
    :attr:`Grid.area`) of the densest material (a cell of unknown height counts as a
    cube)."""
    h = grid.heights[grid.occupancy]
    w = grid.cell_size
    return np.asarray(MAX_DENSITY * w * w * grid.area * np.where(h > 0, h, w), dtype=float)


@dataclass(frozen=True, eq=False)
class Belief:
    """K models of one object with their probabilities.

    Attributes:
        grid: the object's cells (n occupied).
        mass: (K, n) per-cell masses [kg]; friction: (K, n) Coulomb coefficients [-].
        weight: (K,) probabilities, summing to 1.
        loss: (K,) training losses [N^2] (wrench residual of identification), NaN when
            unknown (a ground truth, a uniform model).
        method: how the models were found ('' when unknown).
        support: the support model the maps hold under (how the table carries the cells:
            ``'rigid'`` or the papers' ``'cell-mass'``, :mod:`slide_core.physics.support`).
            Under ``'rigid'`` the mass map matters only through its total, centre of mass
            and inertia: each map is one representative of the masses the pushes allow.
        push_moment: whether the maps hold with the push's moment tipping the loads towards
            the push (a fingertip's force acts above the table;
            :meth:`slide_core.physics.Support.tipping_basis`): the simulators that replay
            and plan pushes with these maps add it when True. Maps identified without it
            (and files from before it was recorded) are False.
    """

    grid: Grid
    mass: FloatArray
    friction: FloatArray
    weight: FloatArray
    loss: FloatArray
    method: str = ''
    support: str = DEFAULT_SUPPORT
    push_moment: bool = True

    @classmethod
    def create(
        cls,
        grid: Grid,
        mass: ArrayLike,
        friction: ArrayLike,
        weight: ArrayLike | None = None,
        loss: ArrayLike | None = None,
        method: str = '',
        support: str = DEFAULT_SUPPORT,
        push_moment: bool = True,
    ) -> Belief:
        """Validate and build a belief; (n,) maps make one model. Weights are normalised
        (uniform when omitted). Raises BeliefError saying what is wrong."""
        try:  # copies: a caller's buffer reused later must not change a validated belief
            m = np.atleast_2d(np.array(mass, dtype=float))
            mu = np.atleast_2d(np.array(friction, dtype=float))
        except (TypeError, ValueError):
            raise BeliefError('mass and friction must be arrays of numbers') from None
        if m.ndim != 2 or m.shape != mu.shape or m.shape[1] != grid.n or m.shape[0] < 1:
            raise BeliefError(
                f'mass {m.shape} and friction {mu.shape} must both be (K, {grid.n}), K >= 1'
            )
        K = m.shape[0]
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(mu))):
            raise BeliefError('the maps contain NaN or infinite values')
        if np.any(m <= 0):
            raise BeliefError('every cell of every model needs a positive mass')
        heavy = m > max_cell_mass(grid)[None] * (1 + 1e-6)  # (a file's digits)
        if heavy.any():
            k, i = np.argwhere(heavy)[0]
            raise BeliefError(
                f'model {k}, cell {i}: {m[k, i]:.4g} kg is more than its volume of the '
                f'densest material ({MAX_DENSITY:g} kg/m^3) can weigh'
            )
        if np.any(mu < 0) or np.any(mu > FRICTION_MAX):
            raise BeliefError(f'friction coefficients must lie in [0, {FRICTION_MAX}]')
        w = np.full(K, 1.0 / K) if weight is None else np.asarray(weight, dtype=float)
        if w.shape != (K,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise BeliefError(f'weights must be ({K},) finite, >= 0 and not all 0')
        lo = np.full(K, np.nan) if loss is None else np.array(loss, dtype=float)
        if lo.shape != (K,):
            raise BeliefError(f'losses must be ({K},), got {lo.shape}')
        if support not in SUPPORT_MODELS:
            raise BeliefError(
                f'unknown support model {support!r}: one of {", ".join(SUPPORT_MODELS)}'
            )
        return cls(grid, m, mu, w / w.sum(), lo, str(method), str(support), bool(push_moment))

    # -- queries ----------------------------------------------------------------------------
    @property
    def K(self) -> int:
        """Number of models."""
        return int(self.mass.shape[0])

    @property
    def best(self) -> int:
        """Index of the most probable model."""
        return int(np.argmax(self.weight))

    def com(self) -> FloatArray:
        """(K, 2) centres of mass p_OBcm of the models, object frame [m]."""
        return np.asarray(self.mass @ self.grid.p_OC / self.mass.sum(axis=1, keepdims=True))

    def push_heights(self, fingertip: Fingertip) -> FloatArray:
        """(n,) heights [m] at which ``fingertip``'s pushes act on each cell, for the
        simulators that replay and plan with these maps (``push_height=``):
        :meth:`Fingertip.push_heights` with the moment when the maps hold with it."""
        return fingertip.push_heights(self.grid, self.push_moment)

    def radius(self) -> float:
        """The object's radius [m] (see :func:`slide_core.geometry.grid_radius`)."""
        return grid_radius(self.grid)

    # -- derived beliefs --------------------------------------------------------------------
    def most_probable(self) -> Belief:
        """The most probable model alone (paper 1's deterministic planner)."""
        k = self.best
        return Belief.create(
            self.grid,
            self.mass[k],
            self.friction[k],
            loss=self.loss[k : k + 1],
            method=self.method,
            support=self.support,
            push_moment=self.push_moment,
        )

    def uniform(self) -> Belief:
        """Uniform maps with the most probable model's total mass and total friction force
        (no identification of how they are distributed)."""
        m, mu = uniform_maps(self.mass[self.best], self.friction[self.best], self.grid.area)
        return Belief.create(
            self.grid, m, mu, method='uniform', support=self.support, push_moment=self.push_moment
        )


def uniform_maps(
    mass: FloatArray, friction: FloatArray, area: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Uniform maps (n,) with the same total mass and total friction force as (mass,
    friction) (n,): a uniform density over the cells' covered ``area`` (n,) (whole cells
    when omitted), and one friction coefficient."""
    a = np.ones(mass.size) if area is None else np.asarray(area, dtype=float)
    total = float(mass.sum())
    mu = float(np.sum(mass * friction) / total)
    return total * a / a.sum(), np.full(mass.size, mu)


# -- YAML ---------------------------------------------------------------------------------------
def belief_to_dict(
    belief: Belief, name: str = '', provenance: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The YAML document of a belief: the grid, then each model's maps, weight and loss;
    ``provenance`` (what it was identified from) is kept as it is."""
    g = belief.grid

    def rows(values: FloatArray) -> list[list[float]]:
        # Nine significant digits, not seven decimals: a 5 mm cell of a thin object weighs
        # under 1e-7 kg, which rounded to 0 (a file its own reader refused) or 16% off.
        return [[float(f'{v:.9g}') for v in row] for row in g.to_map(values, fill=0.0)]

    doc: dict[str, Any] = {
        'kind': BELIEF_KIND,
        'name': name,
        'method': belief.method,
        'support': belief.support,
        'push_moment': belief.push_moment,
        'provenance': dict(provenance or {}),
        'cell_size': float(g.cell_size),
        'occupancy': g.occupancy.astype(int).tolist(),
        # (rounded to 10 um, a cell's volume shrank and a mass at the density bound that
        # Belief.create took was refused when read back)
        'heights': [[float(f'{v:.9g}') for v in row] for row in g.heights],
        'models': [
            {
                'weight': float(belief.weight[k]),
                'loss': float(belief.loss[k]),
                'mass': rows(belief.mass[k]),
                'friction': rows(belief.friction[k]),
            }
            for k in range(belief.K)
        ],
    }
    if not g.whole:  # cells the object covers in part (absent: every cell whole)
        doc['coverage'] = rows(g.area)
    if g.outline is not None:  # the real outline (absent: the cells' squares)
        doc['outline'] = [[float(x), float(y)] for x, y in g.outline]
    return doc


BELIEF_KEYS = frozenset(
    {
        'kind',
        'name',
        'method',
        'support',
        'push_moment',
        'provenance',
        'cell_size',
        'occupancy',
        'heights',
        'models',
        'coverage',
        'outline',
    }
)
"""The keys of a belief file; ``MODEL_KEYS`` those of each of its models."""
MODEL_KEYS = frozenset({'weight', 'loss', 'mass', 'friction'})


def _is_belief_doc(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get('kind') == BELIEF_KIND


def is_belief_file(path: str | Path) -> bool:
    """Whether ``path`` is a YAML file that says it is a slide belief (one a new belief
    may replace; whether it is a valid one is :func:`load_belief`'s to say)."""
    try:
        return _is_belief_doc(read_yaml(path, BeliefError, 'belief file'))
    except BeliefError:
        return False


def belief_from_dict(doc: Any, source: str = '<belief>') -> Belief:
    """A belief from its YAML document (raises BeliefError naming what is wrong, and an
    unknown key: ``push_momnet: true`` was read as a belief without the push's moment)."""
    if not _is_belief_doc(doc):
        raise BeliefError(
            f'{source}: not a slide belief (kind: {BELIEF_KIND}); write one with slide identify'
        )
    unknown = sorted(str(k) for k in set(doc) - BELIEF_KEYS)
    if unknown:
        raise BeliefError(
            f'{source}: unknown key {unknown[0]!r}: the keys are {", ".join(sorted(BELIEF_KEYS))}'
        )
    models = doc.get('models')
    for k, m in enumerate(models if isinstance(models, list) else []):
        extra = sorted(str(key) for key in set(m) - MODEL_KEYS) if isinstance(m, dict) else []
        if extra:
            raise BeliefError(
                f'{source}: model {k}: unknown key {extra[0]!r}: the keys are '
                f'{", ".join(sorted(MODEL_KEYS))}'
            )
    try:
        coverage = doc.get('coverage')
        outline = doc.get('outline')
        # Checked as an object file's are (a string cell size and an occupancy of 2 were
        # taken).
        cell_size = doc['cell_size']
        if not finite_number(cell_size):
            raise BeliefError(f'{source}: cell_size must be a number [m], got {shown(cell_size)}')
        occupancy = np.asarray(doc['occupancy'])
        if occupancy.dtype == object or not np.isin(occupancy, (0, 1)).all():
            raise BeliefError(f'{source}: occupancy must hold 0 and 1 only')
        grid = Grid(
            float(cell_size),
            occupancy.astype(bool),
            np.asarray(doc['heights'], dtype=float),
            None if coverage is None else np.asarray(coverage, dtype=float),
            None if outline is None else np.asarray(outline, dtype=float),
        )
        check_object_grid(grid)
        models = doc['models']
        if not isinstance(models, list) or not models:
            raise BeliefError(f'{source}: models must be a non-empty list')
        for k, m in enumerate(models):
            for key in ('mass', 'friction', 'weight'):
                if not isinstance(m, dict) or key not in m:
                    raise BeliefError(f'{source}: model {k} lacks {key}')
            if isinstance(m['weight'], bool) or not isinstance(m['weight'], int | float):
                raise BeliefError(f'{source}: model {k}: weight must be a number')
        mass = np.stack([grid.from_map(np.asarray(m['mass'], float), 'mass') for m in models])
        friction = np.stack(
            [grid.from_map(np.asarray(m['friction'], float), 'friction') for m in models]
        )
        weight = np.asarray([float(m['weight']) for m in models])
        loss = np.asarray([float(m.get('loss', np.nan)) for m in models])
    except BeliefError:
        raise
    except (KeyError, TypeError, ValueError, OverflowError, GridError) as exc:
        raise BeliefError(f'{source}: malformed belief ({exc})') from None
    if abs(weight.sum() - 1.0) > 1e-6:
        raise BeliefError(f'{source}: the weights sum to {weight.sum():.6g}, not 1')
    # Identification keeps every cell above a thousandth of its bound (thousands of times
    # this): a lighter one is a file in other units or written by hand.
    volume = max_cell_mass(grid) / MAX_DENSITY
    light = np.isfinite(mass) & (mass < MIN_DENSITY * volume[None])
    if light.any():
        k, i = (int(v) for v in np.argwhere(light)[0])
        raise BeliefError(
            f'{source}: model {k}, cell {i}: {mass[k, i]:.4g} kg is less than its '
            f'{volume[i] * 1e6:.3g} cm^3 of {MIN_DENSITY:g} kg/m^3 (a hundredth of air) '
            'weighs: are the masses in kg?'
        )
    try:
        # Files from before the support model was recorded were identified with m_i g,
        # and those from before the push's moment was recorded without it.
        support = str(doc.get('support', 'cell-mass'))
        push_moment = doc.get('push_moment', False)
        if not isinstance(push_moment, bool):
            raise BeliefError(f'push_moment must be true or false, got {push_moment!r}')
        return Belief.create(
            grid, mass, friction, weight, loss, str(doc.get('method', '')), support, push_moment
        )
    except BeliefError as exc:
        raise BeliefError(f'{source}: {exc}') from None


def save_belief(
    belief: Belief, path: str | Path, name: str = '', provenance: dict[str, Any] | None = None
) -> Path:
    """Write a belief as YAML, atomically (a failed write leaves any old file intact)."""
    text = '# slide belief: K models (per-cell mass [kg] and friction maps) and probabilities\n'
    doc = belief_to_dict(belief, name, provenance)
    text += yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    return write_text_atomic(path, text)


def load_belief(path: str | Path) -> Belief:
    """Read a belief written by :func:`save_belief` (raises BeliefError)."""
    return belief_from_dict(read_yaml(path, BeliefError, 'belief file'), str(path))


def load_provenance(path: str | Path) -> dict[str, Any]:
    """What a belief file says it was identified from (empty when it does not say)."""
    doc = read_yaml(path, BeliefError, 'belief file')
    value = doc.get('provenance') if isinstance(doc, dict) else None
    return dict(value) if isinstance(value, dict) else {}
