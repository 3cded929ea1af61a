"""Objects as grids of square cells.

Conventions (shared with the object specification files and slide_interfaces/ObjectGrid):

- A grid has ``rows x cols`` square cells of edge ``cell_size`` (``w``, metres). Row 0 is
  the object's +y edge, column 0 its -x edge.
- The object frame O has its origin at the centre of the grid's bounding box, x along the
  columns, y towards row 0, z up. Cell (r, c) has its centre at
  ``p_OC = ((c - (cols - 1) / 2) w, ((rows - 1) / 2 - r) w)``.
- Occupied cells are numbered 0..n-1 in row-major order; per-cell arrays (mass, friction,
  positions) have shape (n,) or (n, 2) in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from matplotlib.path import Path
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import ndimage

from slide_core.geometry.outline import check_outline
from slide_core.geometry.se2 import FloatArray, GridError, check_pose, rotation

CELL_SIZE_RANGE = (0.001, 0.1)
"""Cell edges slide accepts for an object's grid [m] (object files, belief files,
perception)."""
MAX_EXTENT = 1.0
"""Longest side [m] of an object's grid (the table is 0.8 m deep)."""


def check_object_grid(grid: Grid) -> None:
    """GridError unless ``grid``'s cells are within :data:`CELL_SIZE_RANGE` and its sides
    within :data:`MAX_EXTENT` (what an object on the table can be)."""
    rows, cols = grid.occupancy.shape
    check_object_cells(grid.cell_size, rows, cols)


def check_object_cells(cell_size: float, rows: int, cols: int) -> None:
    """:func:`check_object_grid` for ``rows`` x ``cols`` cells of ``cell_size`` [m], before
    a grid is made of them (object files)."""
    lo, hi = CELL_SIZE_RANGE
    if not lo <= cell_size <= hi:
        raise GridError(f'cell_size: {cell_size} m is outside [{lo}, {hi}] m')
    longest = max(rows, cols) * cell_size
    if longest > MAX_EXTENT:
        raise GridError(
            f'{rows} x {cols} cells of {cell_size} m make an object {longest:.3g} m '
            f'long; at most {MAX_EXTENT} m fits the workcell'
        )


@dataclass(frozen=True, eq=False)
class Grid:
    """The presumed shape of an object: occupied square cells on a regular grid.

    Attributes:
        cell_size: edge ``w`` of a square cell [m].
        occupancy: (rows, cols) bool, True where the cell belongs to the object.
        heights: (rows, cols) height of the top surface above the table [m] (0 where empty).
        coverage: (rows, cols) the fraction of each cell's square the object covers, in
            (0, 1] where occupied (a cell on a curved or slanted outline is partly the
            object's), 0 where empty; None when built: every occupied cell is whole.
        outline: (V, 2) the object's real outline in the object frame [m], a simple
            polygon counter-clockwise (:mod:`slide_core.geometry.outline`) whose vertices
            lie on the occupied cells: where the fingertip touches the object and what the
            table supports; None: the cells' squares are the outline (a staircase).
    """

    cell_size: float
    occupancy: NDArray[np.bool_]
    heights: FloatArray
    coverage: FloatArray | None = None
    outline: FloatArray | None = None
    _p_OC: FloatArray = field(init=False, repr=False)
    _area: FloatArray = field(init=False, repr=False)
    _index: NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        occ = np.asarray(self.occupancy)
        if occ.ndim != 2:
            raise GridError(f'occupancy must be a 2-D array, got shape {occ.shape}')
        occ = occ.astype(bool)
        if not occ.any():
            raise GridError('the grid has no occupied cell: an object needs at least one')
        w = float(self.cell_size)
        if not np.isfinite(w) or w <= 0.0:
            raise GridError(f'cell_size must be a positive length in metres, got {w}')
        heights = np.asarray(self.heights, dtype=float)
        if heights.shape != occ.shape:
            raise GridError(f'heights has shape {heights.shape}, occupancy {occ.shape}')
        if not np.all(np.isfinite(heights)) or np.any(heights < 0):
            raise GridError('heights must be finite and non-negative')
        if self.coverage is None:
            cover = occ.astype(float)
        else:
            cover = np.asarray(self.coverage, dtype=float)
            if cover.shape != occ.shape:
                raise GridError(f'coverage has shape {cover.shape}, occupancy {occ.shape}')
            if not np.all(np.isfinite(cover)) or np.any(cover < 0.0) or np.any(cover > 1.0):
                raise GridError('coverage must be a fraction in [0, 1] for every cell')
            if np.any(cover[occ] <= 0.0):
                raise GridError('an occupied cell needs a positive coverage: leave it out')
            cover = np.where(occ, cover, 0.0)
        rows, cols = occ.shape
        r, c = np.nonzero(occ)
        p_OC = np.column_stack(((c - (cols - 1) / 2.0) * w, ((rows - 1) / 2.0 - r) * w))
        index = -np.ones(occ.shape, dtype=np.int64)
        index[r, c] = np.arange(r.size)
        occ.setflags(write=False)
        heights = np.where(occ, heights, 0.0)
        heights.setflags(write=False)
        p_OC.setflags(write=False)
        index.setflags(write=False)
        area = cover[occ]
        cover.setflags(write=False)
        if self.outline is not None:
            poly = check_outline(self.outline)
            half = w / 2 * (1.0 + 1e-6)
            off = np.abs(poly[:, None, :] - p_OC[None]).max(axis=2).min(axis=1) > half
            if off.any():
                k = int(np.argmax(off))
                raise GridError(
                    f'outline vertex {k} at {poly[k].round(4).tolist()} m lies on no occupied '
                    'cell: an outline bounds the cells (trace it from their footprint)'
                )
            object.__setattr__(self, 'outline', poly)
        area.setflags(write=False)
        object.__setattr__(self, 'cell_size', w)
        object.__setattr__(self, 'occupancy', occ)
        object.__setattr__(self, 'heights', heights)
        object.__setattr__(self, 'coverage', cover)
        object.__setattr__(self, '_p_OC', p_OC)
        object.__setattr__(self, '_area', area)
        object.__setattr__(self, '_index', index)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_occupancy(
        cls, image: ArrayLike, cell_size: float, heights: ArrayLike | float = 0.0
    ) -> Grid:
        """Build a grid from an occupancy image (non-zero = occupied), row 0 at +y."""
        occ = np.asarray(image) != 0
        h = np.broadcast_to(np.asarray(heights, dtype=float), occ.shape).copy()
        return cls(cell_size, occ, h)

    @classmethod
    def from_polygon(cls, vertices_O: ArrayLike, cell_size: float, height: float = 0.0) -> Grid:
        """Rasterise a footprint polygon (k, 2) [m]: a cell belongs if its centre is inside.

        The grid is laid out over the polygon's bounding box; the object frame of the
        result is the centre of that grid (not necessarily the polygon's own origin).
        """
        v = np.asarray(vertices_O, dtype=float)
        if v.ndim != 2 or v.shape[1] != 2 or v.shape[0] < 3:
            raise GridError(f'a footprint polygon needs (k>=3, 2) vertices, got {v.shape}')
        if not np.all(np.isfinite(v)):
            raise GridError('footprint polygon vertices must be finite')
        w = float(cell_size)
        if not np.isfinite(w) or w <= 0.0:
            raise GridError(f'cell_size must be a positive length in metres, got {w}')
        lo, hi = v.min(axis=0), v.max(axis=0)
        cols = max(1, int(np.ceil((hi[0] - lo[0]) / w - 1e-9)))
        rows = max(1, int(np.ceil((hi[1] - lo[1]) / w - 1e-9)))
        centre = (lo + hi) / 2.0
        cx = centre[0] + (np.arange(cols) - (cols - 1) / 2.0) * w
        cy = centre[1] + ((rows - 1) / 2.0 - np.arange(rows)) * w
        X, Y = np.meshgrid(cx, cy)
        inside = Path(v).contains_points(np.column_stack((X.ravel(), Y.ravel())))
        occ = inside.reshape(rows, cols)
        if not occ.any():
            raise GridError('the polygon is smaller than one cell: use a smaller cell_size')
        return cls(w, occ, np.full(occ.shape, float(height)))

    # -- queries ------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of the grid."""
        return (int(self.occupancy.shape[0]), int(self.occupancy.shape[1]))

    @property
    def n(self) -> int:
        """Number of occupied cells."""
        return int(self._p_OC.shape[0])

    @property
    def p_OC(self) -> FloatArray:
        """(n, 2) centres of the occupied cells in the object frame [m]."""
        return self._p_OC

    @property
    def area(self) -> FloatArray:
        """(n,) the fraction of each occupied cell's square the object covers (1 for a
        whole cell): its share of the support, and of the mass of a uniform object."""
        return self._area

    @property
    def whole(self) -> bool:
        """True when every occupied cell is covered whole."""
        return bool(np.all(self._area >= 1.0))

    @property
    def cell_rc(self) -> NDArray[np.int64]:
        """(n, 2) (row, col) of each occupied cell."""
        return np.argwhere(self.occupancy)

    def nearest_cells(self, p_O: ArrayLike) -> NDArray[np.int64]:
        """(P,) the occupied cell whose centre is nearest each point p_O (P, 2) [m], object
        frame."""
        p = np.atleast_2d(np.asarray(p_O, dtype=float))
        d = np.linalg.norm(p[:, None, :] - self._p_OC[None], axis=2)
        return np.asarray(np.argmin(d, axis=1), dtype=np.int64)

    def index_of(self, row: int, col: int) -> int:
        """Cell number of (row, col); raises GridError if that cell is empty or outside."""
        rows, cols = self.shape
        if not (0 <= row < rows and 0 <= col < cols) or self._index[row, col] < 0:
            raise GridError(f'cell ({row}, {col}) is not an occupied cell of this grid')
        return int(self._index[row, col])

    def check_cell(self, i: int) -> int:
        """Return ``i`` if it numbers an occupied cell, else raise GridError."""
        if not (0 <= int(i) < self.n):
            raise GridError(f'cell {i} does not exist: the grid has {self.n} cells')
        return int(i)

    def same_cells(self, other: Grid) -> bool:
        """Whether ``other`` has the same cells: their size, the grid's shape and which are
        occupied (a belief is about this object's grid only then)."""
        return bool(
            self.shape == other.shape
            and abs(self.cell_size - other.cell_size) < 1e-9
            and np.array_equal(self.occupancy, other.occupancy)
        )

    def is_connected(self) -> bool:
        """True when the occupied cells form one 4-connected piece."""
        _, count = ndimage.label(self.occupancy)
        return bool(count == 1)

    def outer_cells(self) -> NDArray[np.bool_]:
        """(n,) True for cells with an empty or outside 4-neighbour (the contour)."""
        padded = np.pad(self.occupancy, 1)
        inner = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
        return np.asarray(~inner[self.occupancy])

    def outline_sides(self) -> tuple[NDArray[np.int64], FloatArray, FloatArray]:
        """The free sides of the contour cells: cell numbers (S,), side midpoints (S, 2) and
        outward unit normals (S, 2), object frame [m] (row index grows along -y)."""
        padded = np.pad(self.occupancy, 1)
        r, c = self.cell_rc[:, 0] + 1, self.cell_rc[:, 1] + 1
        cells, normals = [], []
        for dr, dc, n_out in ((-1, 0, (0, 1)), (1, 0, (0, -1)), (0, -1, (-1, 0)), (0, 1, (1, 0))):
            free = np.flatnonzero(~padded[r + dr, c + dc])
            cells.append(free)
            normals.append(np.broadcast_to(np.asarray(n_out, dtype=float), (len(free), 2)))
        idx = np.concatenate(cells).astype(np.int64)
        n = np.concatenate(normals)
        return idx, self.p_OC[idx] + n * (self.cell_size / 2), n

    def adjacent_pairs(self) -> NDArray[np.int64]:
        """(m, 2) cell numbers of 4-adjacent occupied pairs, each pair once."""
        idx = self._index
        right = (idx[:, :-1] >= 0) & (idx[:, 1:] >= 0)
        down = (idx[:-1, :] >= 0) & (idx[1:, :] >= 0)
        pairs = np.concatenate(
            (
                np.column_stack((idx[:, :-1][right], idx[:, 1:][right])),
                np.column_stack((idx[:-1, :][down], idx[1:, :][down])),
            )
        )
        return pairs.astype(np.int64)

    def to_map(self, values: ArrayLike, fill: float = np.nan) -> FloatArray:
        """Scatter per-cell values (n,) into a (rows, cols) image, ``fill`` where empty."""
        v = np.asarray(values, dtype=float)
        if v.shape != (self.n,):
            raise GridError(f'expected {self.n} per-cell values, got shape {v.shape}')
        out = np.full(self.shape, fill, dtype=float)
        out[self.occupancy] = v
        return out

    def from_map(self, image: ArrayLike, name: str = 'map') -> FloatArray:
        """Gather a (rows, cols) image into per-cell values (n,)."""
        a = np.asarray(image, dtype=float)
        if a.shape != self.shape:
            raise GridError(f'{name} has shape {a.shape}, the grid is {self.shape}')
        return np.asarray(a[self.occupancy], dtype=float)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        rows, cols = self.shape
        return {'rows': rows, 'cols': cols, 'cells': self.n, 'cell_size_m': self.cell_size}


def cell_positions(grid: Grid, X_WO: ArrayLike) -> FloatArray:
    """World positions (..., n, 2) of the cell centres for object poses X_WO (..., 3)."""
    X = check_pose(X_WO, 'X_WO')
    R = rotation(X[..., 2])
    return np.asarray(np.einsum('...ij,nj->...ni', R, grid.p_OC) + X[..., None, :2], dtype=float)
