"""The object's grid of cells from its segmented points (acquisition)."""

from __future__ import annotations

from dataclasses import dataclass
import math
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import ndimage
from scipy.spatial import ConvexHull, QhullError

from slide_core.geometry import (
    FloatArray,
    Grid,
    GridError,
    check_object_grid,
    rotation,
    trace_outline,
)
from slide_core.perception.cloud import (
    CameraView,
    KeepOut,
    PerceptionConfig,
    PerceptionError,
    PerceptionStatus,
    Segmentation,
    TablePlane,
    segment,
)

MAX_SUBDIVISION = 20
"""The finest sub-cells coverage is measured on: a twentieth of a cell's edge."""

LATTICE_REACH = 1.5
"""Sub-cells (about sample spacings) by which a footprint must reach past a whole number of
cells for the grid to take one cell more (the image's edge lies up to one past the object's:
:func:`_reaches_into`)."""

RASTER_BORDER = 2
"""Empty sub-cells around a grid's footprint image: more than the closing's radius (one
sub-cell), so that no edge of the object is eroded."""


@dataclass(frozen=True)
class ObjectEstimate:
    """An acquired object: its grid, the pose X_WO (3,) of its frame in T, the top-surface
    model points p_O (M, 3) (z = height above the table) for tracking, the table plane."""

    grid: Grid
    X_WO: FloatArray
    model_O: FloatArray
    table: TablePlane


OPEN_HOLE_SEEN = 0.3
"""Share of an enclosed gap in a footprint that points at the table's height must cover for
the gap to be an opening in the object (a ring's middle); less, and it is filled as the
camera's dropout on its top (a shiny patch), or a floor too thin to stand above the
table's noise (a tray's)."""


def _pixels(
    xy: FloatArray, origin: FloatArray, shape: tuple[int, int], pitch: float
) -> NDArray[np.bool_]:
    rows, cols = shape
    c = np.floor((xy[:, 0] - origin[0]) / pitch).astype(int)
    r = rows - 1 - np.floor((xy[:, 1] - origin[1]) / pitch).astype(int)
    ok = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
    image = np.zeros(shape, dtype=bool)
    image[r[ok], c[ok]] = True
    return image


def footprint_image(
    xy: FloatArray,
    origin: FloatArray,
    shape: tuple[int, int],
    pitch: float,
    gap: float = 0.0,
    table_xy: FloatArray | None = None,
    keep_all: bool = False,
) -> NDArray[np.bool_]:
    """Covered sub-cells (rows, cols) of points xy (M, 2); row 0 at +y, pixel (0, 0)'s
    lower-left corner at origin + (0, (rows - 1) * pitch). Gaps between samples up to
    ``gap`` [m] wide (at least one pixel) are closed: a surface sampled every few
    millimetres covers the space between its samples. The image keeps ``gap`` of empty
    border, or its edge pixels are eroded.

    A gap the footprint encloses is filled, unless the table was seen in it: points at the
    table's height ``table_xy`` (K, 2) cover :data:`OPEN_HOLE_SEEN` of it (then it is an
    opening: a frame filled in had the pads grasp 4 cm of a 3 cm rim). Of pieces apart, the
    largest is kept (``keep_all``: every one)."""
    k = max(1, math.ceil(gap / pitch / 2))
    i, j = np.mgrid[-k : k + 1, -k : k + 1]
    disk = i**2 + j**2 <= k * k + k  # a digital disc of radius k (3 x 3 for k = 1)
    image = ndimage.binary_closing(_pixels(xy, origin, shape, pitch), disk, border_value=0)
    filled = ndimage.binary_fill_holes(image)
    if table_xy is not None and table_xy.shape[0] > 0 and (filled & ~image).any():
        seen = ndimage.binary_closing(
            _pixels(table_xy, origin, shape, pitch), disk, border_value=0
        )
        holes, n = ndimage.label(filled & ~image)
        share = ndimage.mean(seen, holes, range(1, n + 1))
        opening = np.flatnonzero(np.asarray(share) >= OPEN_HOLE_SEEN) + 1
        filled &= ~np.isin(holes, opening)
    return np.asarray(filled if keep_all else _pieces(filled)[0], dtype=bool)


def _pieces(image: NDArray[np.bool_]) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """The largest of ``image``'s pieces apart (the first of equals), and every piece's
    pixel count, largest first."""
    labels, count = ndimage.label(image)
    sizes = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    if count < 2:
        return image, sizes
    order = np.argsort(-sizes, kind='stable')
    return labels == 1 + int(order[0]), sizes[order]


def sample_spacing(xy: FloatArray) -> float:
    """Median distance [m] from each of the points xy (M, 2) to its nearest neighbour: the
    footprint's sampling step (it grows with the distance to the camera)."""
    if xy.shape[0] < 2:
        return 0.0
    from slide_core.perception import kernels  # compiled: a k-d tree took 5 to 15 ms

    return float(np.median(kernels.nearest_distances(np.ascontiguousarray(xy, dtype=float))))


@dataclass(frozen=True)
class _Raster:
    origin: FloatArray  # (2,) lower-left corner of the grid in the rotated frame
    rows: int
    cols: int
    coverage: FloatArray  # (rows, cols) covered share of each cell
    sub: int  # sub-cells per cell edge
    pitch: float  # a sub-cell's edge [m]
    image: NDArray[np.bool_]  # (rows * sub, cols * sub) the covered sub-cells, row 0 at +y


def _lattice(xy_P: FloatArray, w: float, reach: float) -> tuple[FloatArray, int, int]:
    """The lower-left corner (2,), rows and columns of cells of edge w over the bounding
    box of points xy_P (M, 2). Along each axis, the nearest whole number of cells centred
    on the box (a box's sides then lie on cell sides); where the box is longer than those
    cells by more than ``reach`` [m], one cell more, from the box's lower side: what is left
    over then lies in one cell at the upper end and carries its share, where centred cells
    would cut up to half a cell off both ends."""
    lo, hi = xy_P.min(axis=0), xy_P.max(axis=0)
    n = np.maximum(1, np.round((hi - lo) / w))
    over = hi - lo - n * w > reach
    corner = np.where(over, lo, (lo + hi - n * w) / 2)
    cols, rows = (int(v) for v in n + over)
    return corner, rows, cols


def _raster(
    xy_P: FloatArray,
    lattice: tuple[FloatArray, int, int],
    w: float,
    sub: int,
    table_P: FloatArray | None = None,
    one_piece: bool = False,
) -> _Raster:
    """The covered share of each cell of ``lattice`` (:func:`_lattice`) by the points xy_P
    (M, 2), on sub-cells of w / sub; the table seen at table_P (K, 2) keeps an enclosed gap
    open (:func:`footprint_image`). Of pieces apart the largest is taken; with
    ``one_piece``, PerceptionError(SEVERAL_OBJECTS) when another is large
    (:data:`SECOND_PIECE`)."""
    origin, rows, cols = lattice
    # The image reaches RASTER_BORDER sub-cells past the grid: footprint_image's closing
    # erodes the pixels on its border, which took a whole sub-cell off every edge cell.
    pad, pitch = RASTER_BORDER, w / sub
    image = footprint_image(
        xy_P,
        origin - pad * pitch,
        (rows * sub + 2 * pad, cols * sub + 2 * pad),
        pitch,
        table_xy=table_P,
        keep_all=True,
    )
    image, sizes = _pieces(image)
    if one_piece and len(sizes) > 1:
        _refuse_pieces(np.asarray(sizes * pitch * pitch, dtype=float), w)
    fine = image[pad:-pad, pad:-pad]
    coverage = fine.reshape(rows, sub, cols, sub).mean(axis=(1, 3))
    return _Raster(origin, rows, cols, coverage, sub, pitch, fine)


SECOND_PIECE = 0.2
"""A piece of the footprint apart from its largest, on the finest sub-cells, at least this
share of the largest's area (and of a cell), is another object or a gap in what the camera
saw: :func:`build_grid` refuses it."""


def _refuse_pieces(areas: FloatArray, w: float) -> None:
    """PerceptionError(SEVERAL_OBJECTS) when the second of the footprint's pieces apart,
    their areas (P,) [m^2] largest first, is large (:data:`SECOND_PIECE`). Two boxes 8 mm
    apart, one cluster to the segmentation, were taken for one object whose cells the
    coarse raster joined and the fine one, keeping its largest piece, covered half of."""
    if areas[1] >= max(SECOND_PIECE * areas[0], w * w):
        raise PerceptionError(
            PerceptionStatus.SEVERAL_OBJECTS,
            f'the footprint is in {len(areas)} pieces apart (the two largest '
            f'{areas[0] * 1e4:.0f} and {areas[1] * 1e4:.0f} cm^2): two objects side by side, '
            'or a band of the object the camera did not see; move them apart',
        )


def _reaches_into(ras: _Raster) -> NDArray[np.bool_]:
    """(rows, cols) cells the footprint reaches into past its blurred edge: those holding a
    covered sub-cell whose four neighbours are covered too. A sub-cell is covered whole when
    a sample falls in it, so the image's edge lies up to one sub-cell past the object's, and
    a neighbour of a straight side reads up to a strip of sub-cells it does not have. Taking
    one sub-cell off the image's edge takes that strip off; a round rim's corner cell keeps
    what reaches deeper into it, however small a share of the cell that is."""
    inner = ndimage.binary_erosion(ras.image)
    return np.asarray(inner.reshape(ras.rows, ras.sub, ras.cols, ras.sub).any(axis=(1, 3)))


def _outline(
    ras: _Raster, occupancy: NDArray[np.bool_], origin_O: FloatArray
) -> FloatArray | None:
    """The footprint's real outline in O (:func:`trace_outline`, within half a pitch of
    the covered sub-cells) clipped to the occupied cells, whose lower-left corner is origin_O
    (2,); None (the cells' squares) when those cells cut the footprint into pieces, which
    one outline cannot bound, or when the traced polygon is not simple."""
    mask = ras.image & np.kron(occupancy, np.ones((ras.sub, ras.sub), dtype=bool))
    _, pieces = ndimage.label(mask)
    if pieces != 1:
        return None
    try:
        return trace_outline(mask, origin_O, ras.pitch, ras.pitch / 2)
    except GridError:
        return None


def _lattice_angle(xy: FloatArray) -> float:
    """The rotation in [0, pi/2) of the footprint's minimum-area bounding rectangle.

    One of its sides lies on a side of the convex hull of the points xy (M, 2), so only the
    hull's edge directions are tried. For a box (book, tray) this puts the sides along the
    cells; for other shapes it is a well-defined, repeatable choice.
    """
    try:
        hull = xy[ConvexHull(xy).vertices]
    except (QhullError, ValueError):
        return 0.0
    edges = np.diff(np.vstack((hull, hull[:1])), axis=0)
    angles = np.arctan2(edges[:, 1], edges[:, 0]) % (math.pi / 2)
    c, s = np.cos(angles), np.sin(angles)
    u = hull @ np.vstack((c, s))  # (h, k) coordinates along each candidate's axes
    v = hull @ np.vstack((-s, c))
    area = (u.max(axis=0) - u.min(axis=0)) * (v.max(axis=0) - v.min(axis=0))
    return float(angles[int(np.argmin(area))])


def build_grid(seg: Segmentation, config: PerceptionConfig) -> ObjectEstimate:
    """Rasterise a segmented object into its cell grid and the pose of its frame in T.

    A cell belongs to the object when the footprint covers ``fill_fraction`` of it, or, on
    a rim, reaches into it past the footprint's blurred edge (:func:`_reaches_into`), and
    carries the share it covers (:attr:`Grid.area`: its part of the support and of a uniform mass),
    measured on sub-cells of the points' sample spacing (a fifth of its edge, or finer).

    The cell lattice is turned to the angle at which the footprint fills whole cells best
    (a box's sides then lie on cell sides); of the four lattice directions, the object's x
    axis is the one nearest the footprint's major principal axis, pointing to +x of T.
    """
    w = config.cell_size
    sub = 5  # coverage is measured on sub-cells of w / 5
    pitch = w / sub
    xy = seg.points_W[:, :2]
    # Principal axes of the covered area (not of the points: their density varies).
    lo = xy.min(axis=0) - 2 * pitch
    n_px = np.ceil((xy.max(axis=0) + 2 * pitch - lo) / pitch).astype(int)
    table_xy = seg.table_W[:, :2]
    cover = footprint_image(xy, lo, (int(n_px[1]), int(n_px[0])), pitch, table_xy=table_xy)
    rr, cc = np.nonzero(cover)
    centres = np.column_stack(
        (lo[0] + (cc + 0.5) * pitch, lo[1] + (cover.shape[0] - 1 - rr + 0.5) * pitch)
    )
    mean = centres.mean(axis=0)
    cov = np.cov((centres - mean).T) if centres.shape[0] > 2 else np.eye(2)
    evals, evecs = np.linalg.eigh(cov)
    major = evecs[:, int(np.argmax(evals))]
    base = _lattice_angle(xy)
    directions = base + np.arange(4) * math.pi / 2
    yaw = float(
        directions[int(np.argmax(np.cos(directions) * major[0] + np.sin(directions) * major[1]))]
    )
    if math.cos(yaw) < 0 or (abs(math.cos(yaw)) < 1e-12 and math.sin(yaw) < 0):
        yaw += math.pi
    yaw = math.atan2(math.sin(yaw), math.cos(yaw))
    R = rotation(yaw)
    # Points in the lattice frame P (origin at the area centroid, axes along the cells).
    xy_P = (xy - mean) @ R
    table_P = (table_xy - mean) @ R
    # Each cell's covered share is measured on sub-cells about one sample spacing wide: a
    # sample then stands for about one sub-cell, so the outline is neither grown by half of
    # a coarser sub-cell (the fifths read up to 0.17 over on a disc's rim) nor shrunk by
    # the gaps between the samples of a finer one. The spacing is the footprint's area per
    # point (nearest-neighbour distances shrink with depth noise).
    spacing = math.sqrt(float(cover.sum()) * pitch * pitch / xy.shape[0])
    fine = int(np.clip(round(w / spacing), sub, MAX_SUBDIVISION))
    lattice = _lattice(xy_P, w, LATTICE_REACH * w / fine)
    ras = _raster(xy_P, lattice, w, sub, table_P, one_piece=fine == sub)
    rows, cols, origin = ras.rows, ras.cols, ras.origin
    centre_P = origin + np.array([cols, rows]) * w / 2
    fine_ras = _raster(xy_P, lattice, w, fine, table_P, one_piece=True) if fine > sub else ras
    # A cell belongs when the fifths see it covered to the fill fraction, or when the fine
    # sub-cells see the footprint reach into it past its blurred edge: a round rim's cells
    # then carry their share instead of being cut off with the outline's part over them.
    occupancy = (ras.coverage >= config.fill_fraction) | _reaches_into(fine_ras)
    if not occupancy.any():
        raise PerceptionError(
            PerceptionStatus.NO_OBJECT,
            f'the object covers no {w * 100:.0f} cm cell to {config.fill_fraction:.0%}; '
            'use a smaller cell_size',
        )
    # Heights: a robust top of the points falling in each cell.
    c = np.floor((xy_P[:, 0] - origin[0]) / w).astype(int)
    r = int(rows) - 1 - np.floor((xy_P[:, 1] - origin[1]) / w).astype(int)
    ok = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
    heights = np.zeros((rows, cols))
    flat = r[ok] * int(cols) + c[ok]
    h_ok = seg.heights[ok]
    order = np.argsort(flat, kind='stable')
    flat, h_ok = flat[order], h_ok[order]
    starts = np.searchsorted(flat, np.arange(int(rows) * int(cols)))
    ends = np.searchsorted(flat, np.arange(int(rows) * int(cols)), side='right')
    for k in np.flatnonzero(occupancy.ravel()):
        if ends[k] > starts[k]:
            heights.flat[k] = float(np.percentile(h_ok[starts[k] : ends[k]], 75))
    missing = occupancy & (heights <= 0)
    if missing.any():  # a covered cell without its own points: its neighbours' median
        known = np.where(occupancy & (heights > 0), heights, np.nan)
        with warnings.catch_warnings():  # a cell with none known about it: the overall one
            warnings.simplefilter('ignore', RuntimeWarning)
            fill = ndimage.generic_filter(
                known, np.nanmedian, size=3, mode='constant', cval=np.nan
            )
        heights[missing] = np.nan_to_num(fill[missing], nan=float(np.nanmedian(known)))
    # Each kept cell carries the share of its square the fine sub-cells cover. A cell kept
    # on the fifths' evidence that the finer sub-cells barely see (a few stray samples)
    # keeps the least coverage they can tell.
    area = np.where(occupancy, np.maximum(fine_ras.coverage, 1.0 / fine**2), 0.0)
    # The real outline, from the same sub-cells: the fingertip touches it, not the cells'
    # staircase. O's origin is the grid's centre, centre_P in P (the axes are P's).
    outline = _outline(fine_ras, occupancy, origin - centre_P)
    grid = Grid(w, occupancy, heights, area, outline)
    try:
        # (a grid over 1 m was published with status ok, and every node refused it)
        check_object_grid(grid)
    except GridError as exc:
        raise PerceptionError(
            PerceptionStatus.TOO_LARGE, f'{exc} (one object, or several touching?)'
        ) from None
    p_WO = mean + R @ centre_P
    X_WO = np.array([p_WO[0], p_WO[1], yaw])
    model_xy = (xy - p_WO) @ R
    model = np.column_stack((model_xy, seg.heights))
    return ObjectEstimate(grid, X_WO, model, seg.table)


def acquire(
    points_W: ArrayLike,
    config: PerceptionConfig,
    keep_out: tuple[KeepOut, ...] = (),
    view: CameraView | None = None,
) -> ObjectEstimate:
    """Segment a table-frame cloud p_W (N, 3) and build the object's grid and pose
    (``view``: the camera's, :func:`segment`)."""
    cloud = np.asarray(points_W, dtype=float)
    return build_grid(segment(cloud, config, keep_out, view=view), config)


# -- tracking -------------------------------------------------------------------------------
