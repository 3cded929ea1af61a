"""Object specifications: the YAML format users and tests write, and the object library.

One object per file::

    name: hammer
    cell_size: 0.02      # m, edge of a square cell
    height: 0.03         # m, thickness; optional per-cell `heights` map of the same shape
    mass:                # kg per cell, row-major; row 0 is the object's +y edge,
      - [0.0, 0.05, 0.05]  # column 0 its -x edge
      - [0.02, 0.02, 0.0]
    friction:            # Coulomb coefficient of that cell against the table
      - [0.0, 0.5, 0.5]
      - [0.3, 0.3, 0.0]

A cell with mass 0 is empty. The object frame's origin is the centre of the grid's bounding
box, x along columns, y towards row 0 (as :mod:`slide_core.geometry`). Every validation error
names the field and the problem.

An object whose rim is not the cells' squares (a disc, a rounded end) gives its real
``outline``: a simple polygon, ``[x, y]`` vertices [m] in the object frame, each on an
occupied cell. Each cell then is the part of its square inside the outline (its mass and
support go with that part; the twin builds it so), and every cell with mass needs some
of it::

    outline: [[-0.05, -0.01], [0.05, -0.01], [0.05, 0.01], [-0.05, 0.01]]
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from slide_core.errors import SlideInputError
from slide_core.files import read_yaml, write_text_atomic
from slide_core.geometry import (
    FloatArray,
    Grid,
    GridError,
    check_object_cells,
    check_outline,
    polygon_coverage,
)
from slide_core.model.values import finite_number, shown

FRICTION_MAX = 2.0
"""Largest Coulomb coefficient slide accepts for a cell against the table [-]."""
MAX_DENSITY = 22_600.0
"""Densest material (osmium) [kg/m^3]: no cell weighs more than its volume of it."""
MIN_DENSITY = 0.01
"""[kg/m^3], a hundredth of air's: a cell lighter than its volume of this is a typo, not a
part of an object resting on the table (a foam tray's floor under its rim's height is
about 2 kg/m^3, a cell a sheet of paper covers in part under a declared 2 cm height
about 0.05). A cell of 1e-300 kg had been taken, and the twin's MuJoCo refused the scene."""
MAX_HEIGHT = 0.5
"""Tallest cell [m]."""
MAX_CELLS = 2500
"""Most occupied cells of an object (simulation and planning cost grow with them)."""
FIELDS = {'name', 'cell_size', 'height', 'heights', 'mass', 'friction', 'description', 'outline'}


class SpecError(SlideInputError):
    """An object specification that cannot describe an object."""


@dataclass(frozen=True, eq=False)
class ObjectSpec:
    """A heterogeneous object: its cells and per-cell mass [kg] and friction [-] (n,)."""

    name: str
    grid: Grid
    mass: FloatArray
    friction: FloatArray
    description: str = ''

    @property
    def total_mass(self) -> float:
        return float(self.mass.sum())

    @property
    def p_OCom(self) -> FloatArray:
        """Centre of mass in the object frame [m]."""
        return np.asarray(self.mass @ self.grid.p_OC / self.mass.sum(), dtype=float)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready description."""
        rows, cols = self.grid.shape
        occupied = self.grid.occupancy
        used_rows = np.flatnonzero(occupied.any(axis=1))
        used_cols = np.flatnonzero(occupied.any(axis=0))
        w = self.grid.cell_size

        def figures(v: float) -> float:  # (fixed decimals showed a 6.7 mg cell as 0.0)
            return float(f'{v:.4g}')

        return {
            'name': self.name,
            'description': self.description,
            'cells': self.grid.n,
            'grid': [rows, cols],
            'cell_size_m': w,
            # The occupied cells' extent (empty border rows and columns are not the object).
            'size_m': [
                round(float(np.ptp(used_cols) + 1) * w, 4),
                round(float(np.ptp(used_rows) + 1) * w, 4),
            ],
            'mass_kg': figures(self.total_mass),
            'com_O_m': [round(float(v), 5) for v in self.p_OCom],
            'mass_per_cell_kg': [figures(float(self.mass.min())), figures(float(self.mass.max()))],
            'friction': [
                round(float(self.friction.min()), 3),
                round(float(self.friction.max()), 3),
            ],
            'max_height_m': round(float(self.grid.heights.max()), 4),
            'outline_vertices': None if self.grid.outline is None else len(self.grid.outline),
        }

    def to_dict(self) -> dict[str, Any]:
        """The YAML document of this object (round-trips through :func:`parse_spec`)."""
        doc: dict[str, Any] = {'name': self.name}
        if self.description:
            doc['description'] = self.description
        doc['cell_size'] = self.grid.cell_size
        heights = self.grid.heights[self.grid.occupancy]
        if np.allclose(heights, heights[0]):
            doc['height'] = float(heights[0])
        else:
            doc['heights'] = _rows(self.grid.heights)
        doc['mass'] = _rows(self.grid.to_map(self.mass, fill=0.0))
        doc['friction'] = _rows(self.grid.to_map(self.friction, fill=0.0))
        if self.grid.outline is not None:
            doc['outline'] = [[float(x), float(y)] for x, y in self.grid.outline]
        return doc


def _rows(image: FloatArray) -> list[list[float]]:
    # Exact values: rounding lost cells lighter than the last kept decimal.
    return [[float(v) for v in row] for row in image]


def _matrix(doc: dict[str, Any], key: str) -> FloatArray:
    value = doc[key]
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        raise SpecError(f'{key}: must be a list of rows (a list of lists of numbers)')
    widths = {len(r) for r in value}
    if len(widths) != 1 or 0 in widths:
        raise SpecError(f'{key}: every row must have the same, non-zero number of values')
    for r, row in enumerate(value):
        for c, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise SpecError(f'{key}: row {r}, column {c} is {shown(v)}, not a number')
    try:
        a = np.array(value, dtype=float)
    except OverflowError:  # an integer past any float
        a = np.array([np.inf])
    if not np.all(np.isfinite(a)):
        raise SpecError(f'{key}: values must be finite numbers')
    return a


def _positive(doc: dict[str, Any], key: str) -> float:
    value = doc[key]
    if not finite_number(value):
        raise SpecError(f'{key}: must be a finite number, got {shown(value)}')
    if value <= 0:
        raise SpecError(f'{key}: must be positive, got {value}')
    return float(value)


def parse_spec(doc: Any, source: str = '<spec>') -> ObjectSpec:
    """Validate a parsed YAML document and build the object (raises SpecError)."""
    if not isinstance(doc, dict):
        raise SpecError(f'{source}: an object specification is a YAML mapping')
    unknown = sorted(set(doc) - FIELDS, key=str)
    if unknown:
        # Quoted: a name with a line break or of another type stays one readable line.
        raise SpecError(f'{unknown[0]!r}: unknown field (known: {", ".join(sorted(FIELDS))})')
    for key in ('name', 'cell_size', 'mass', 'friction'):
        if key not in doc:
            raise SpecError(f'{key}: missing')
    name = doc['name']
    if not isinstance(name, str) or not name.strip():
        raise SpecError('name: must be a non-empty string')
    cell_size = _positive(doc, 'cell_size')
    mass = _matrix(doc, 'mass')
    try:  # as belief files and perception's grids are checked
        check_object_cells(cell_size, *mass.shape)
    except GridError as exc:
        raise SpecError(str(exc)) from None
    friction = _matrix(doc, 'friction')
    if friction.shape != mass.shape:
        raise SpecError(f'friction: shape {friction.shape} differs from mass {mass.shape}')
    if np.any(mass < 0):
        r, c = np.argwhere(mass < 0)[0]
        raise SpecError(f'mass: negative mass {mass[r, c]} at row {r}, column {c}')
    occupied = mass > 0
    if not occupied.any():
        raise SpecError('mass: no cells (every mass is 0)')
    if occupied.sum() > MAX_CELLS:
        raise SpecError(
            f'mass: {int(occupied.sum())} cells; at most {MAX_CELLS} (use larger cells)'
        )
    bad = occupied & ((friction < 0) | (friction > FRICTION_MAX))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise SpecError(
            f'friction: {friction[r, c]} at row {r}, column {c} is outside [0, {FRICTION_MAX}]'
        )
    if 'heights' in doc and 'height' in doc:
        raise SpecError('heights: give either height or heights, not both')
    if 'heights' in doc:
        heights = _matrix(doc, 'heights')
        if heights.shape != mass.shape:
            raise SpecError(f'heights: shape {heights.shape} differs from mass {mass.shape}')
        if np.any(heights[occupied] <= 0):
            raise SpecError('heights: every occupied cell needs a positive height')
    else:
        heights = np.full(mass.shape, _positive(doc, 'height') if 'height' in doc else 0.02)
    if np.any(heights[occupied] > MAX_HEIGHT):
        raise SpecError(f'heights: a cell is taller than {MAX_HEIGHT} m')
    grid = Grid(cell_size, occupied, np.where(occupied, heights, 0.0))
    if not grid.is_connected():
        raise SpecError('mass: the cells are disconnected (an object is one 4-connected piece)')
    if 'outline' in doc:
        grid = _with_outline(grid, doc['outline'])
    # A cell's volume: its square's, or its part inside the outline.
    volume = cell_size**2 * heights * grid.to_map(grid.area, fill=1.0)
    for bad, than, what in (
        (mass > MAX_DENSITY * volume, 'more', f'the densest material ({MAX_DENSITY:g} kg/m^3)'),
        (mass < MIN_DENSITY * volume, 'less', f'{MIN_DENSITY:g} kg/m^3 (a hundredth of air)'),
    ):
        if (occupied & bad).any():
            r, c = np.argwhere(occupied & bad)[0]
            raise SpecError(
                f'mass: {mass[r, c]:.4g} kg at row {r}, column {c} is {than} than its '
                f'{volume[r, c] * 1e6:.3g} cm^3 of {what} weighs'
            )
    description = doc.get('description', '')
    if not isinstance(description, str):
        raise SpecError('description: must be a string')
    return ObjectSpec(
        name.strip(), grid, grid.from_map(mass), grid.from_map(friction), description
    )


EMPTY_INSIDE_MAX = 0.02
"""The largest share of an empty cell's square an object file's outline may enclose (a
vertex drawn a fraction of a millimetre off a cell's corner)."""


def _with_outline(grid: Grid, value: Any) -> Grid:
    """``grid`` with the real outline ``value`` ([x, y] vertices) and each cell's share of
    its square inside it (SpecError naming what is wrong)."""
    if not isinstance(value, list) or not all(
        isinstance(v, list)
        and len(v) == 2
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
        for v in value
    ):
        raise SpecError('outline: must be a list of [x, y] vertices (numbers, metres)')
    try:
        outline = check_outline(value)
        # Every square's share inside it, the empty cells' too: an outline over a hole, or a
        # concave corner, claims material the cells do not have (the twin builds the cells,
        # and the planner pushed at an L's hull where the twin had nothing).
        every = Grid(grid.cell_size, np.ones(grid.shape, dtype=bool), np.ones(grid.shape))
        shares = every.to_map(polygon_coverage(every, outline))
        cover = grid.from_map(shares)
        claimed = np.where(grid.occupancy, 0.0, shares)
    except GridError as exc:
        raise SpecError(f'outline: {exc}') from None
    if not np.all(cover > 0.0):
        r, c = grid.cell_rc[int(np.argmin(cover))]
        raise SpecError(
            f'outline: the cell at row {r}, column {c} has mass but lies outside the outline '
            '(leave it out, or widen the outline)'
        )
    if claimed.max() > EMPTY_INSIDE_MAX:
        r, c = np.unravel_index(int(np.argmax(claimed)), claimed.shape)
        raise SpecError(
            f'outline: {claimed.max():.0%} of the empty cell at row {r}, column {c} lies '
            'inside the outline: trace the outline around the occupied cells (over a hole or '
            'a concave corner it claims material that is not there), or give that cell its '
            'mass'
        )
    coverage = grid.to_map(cover, fill=0.0)
    return Grid(grid.cell_size, grid.occupancy, grid.heights, coverage, outline)


def load_spec(path: str | Path) -> ObjectSpec:
    """Read and validate an object specification file (errors name it)."""
    doc = read_yaml(path, SpecError, 'object file')
    try:
        return parse_spec(doc, str(path))
    except SpecError as exc:
        if str(exc).startswith(f'{path}:'):
            raise
        # ('name: missing' alone left the user to guess which file, of a demo's several)
        raise SpecError(f'{path}: {exc}') from None


def save_spec(spec: ObjectSpec, path: str | Path) -> Path:
    """Write an object specification file, atomically."""
    text = yaml.safe_dump(spec.to_dict(), sort_keys=False, default_flow_style=None)
    return write_text_atomic(path, text)


def library_dir() -> Path:
    """Folder of the object library shipped with slide_core."""
    return Path(str(resources.files('slide_core.model') / 'library'))


def library_names() -> list[str]:
    return sorted(p.stem for p in library_dir().glob('*.yaml'))


def load_object(name_or_path: str | Path) -> ObjectSpec:
    """A library object by name, or a specification file by path (a folder of that name,
    such as a bag recorded as ``--out hammer``, does not hide the library's hammer)."""
    candidate = Path(name_or_path)
    if candidate.suffix in ('.yaml', '.yml') or candidate.is_file():
        return load_spec(candidate)
    path = library_dir() / f'{name_or_path}.yaml'
    if not path.exists():
        raise SpecError(
            f'no library object {str(name_or_path)!r} (known: {", ".join(library_names())}); '
            'give a .yaml file to load your own'
        )
    return load_spec(path)
