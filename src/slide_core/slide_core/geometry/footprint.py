"""An object's footprint at a pose in the table frame: the support polygon at the edge,
the overhang, the cells under given points, and centre-of-mass margins.

The table frame W has its free edge on the line x = 0 and the table at x >= 0.
"""

from __future__ import annotations

import math

from matplotlib.path import Path
from matplotlib.transforms import Bbox
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import ConvexHull, QhullError

from slide_core.geometry.grid import Grid, check_object_cells
from slide_core.geometry.outline import check_outline, signed_area
from slide_core.geometry.se2 import (
    FloatArray,
    GridError,
    check_pose,
    rotation,
    to_frame,
    to_world,
)


def cell_corners(grid: Grid) -> FloatArray:
    """(n, 4, 2) corners of every cell square, counter-clockwise, object frame [m]."""
    h = grid.cell_size / 2
    d = np.array([[-h, -h], [h, -h], [h, h], [-h, h]])
    return np.asarray(grid.p_OC[:, None, :] + d[None, :, :])


def boundary_rings(grid: Grid) -> FloatArray:
    """The footprint's boundary as closed rings (R, V, 2), counter-clockwise, object frame
    [m]: the grid's real outline (R = 1) when it has one, else every cell's square."""
    if grid.outline is not None:
        return np.asarray(grid.outline, dtype=float)[None]
    return cell_corners(grid)


def boundary_segments(grid: Grid) -> tuple[FloatArray, FloatArray]:
    """The footprint's boundary as segments from (S, 2) to (S, 2), object frame [m]: the
    real outline's sides when the grid has one, else the cells' sides with no occupied
    neighbour across."""
    if grid.outline is not None:
        return np.asarray(grid.outline, dtype=float), np.roll(grid.outline, -1, axis=0)
    _, mid, n_out = grid.outline_sides()
    half = grid.cell_size / 2 * np.column_stack((-n_out[:, 1], n_out[:, 0]))
    return np.asarray(mid - half, dtype=float), np.asarray(mid + half, dtype=float)


CORNER = math.radians(30.0)
"""A turn of the outline sharper than this [rad] is a corner: pieces of the outline end
there (a piece across it would push at the corner)."""
SAME_NORMAL = math.radians(10.0)
"""A piece of the outline whose normal is within this [rad] of a cell side's, and whose
middle is within half a cell of that side's, is pushed by the side already."""


def push_sides(grid: Grid) -> tuple[FloatArray, FloatArray, FloatArray, NDArray[np.int64]]:
    """Where a fingertip can push the object: middles (S, 2), outward unit normals (S, 2)
    and half-lengths (S,) [m] of pieces of its boundary, object frame, and the cell whose
    side each is (S,), -1 for a piece of the real outline.

    First the cells' free sides (:meth:`Grid.outline_sides`, in its order), along the
    grid's axes: the papers' candidates. Where the grid's real outline runs across its
    cells (a curved or slanted rim), those push it obliquely, which turns it; the
    outline's own pieces (:func:`outline_pieces`) follow, pushing it along its normals,
    each unless a cell side already pushes there (:data:`SAME_NORMAL`)."""
    w = grid.cell_size
    cells, mid, n_out = grid.outline_sides()
    half = np.full(len(mid), w / 2)
    if grid.outline is None:
        return mid, n_out, half, cells
    p_mid, p_n, p_half = outline_pieces(grid.outline, w)
    near = np.linalg.norm(p_mid[:, None, :] - mid[None], axis=2) <= w / 2 + 1e-12
    same = near & (p_n @ n_out.T >= math.cos(SAME_NORMAL))
    new = ~same.any(axis=1)
    return (
        np.concatenate((mid, p_mid[new])),
        np.concatenate((n_out, p_n[new])),
        np.concatenate((half, p_half[new])),
        np.concatenate((cells, np.full(int(new.sum()), -1, dtype=np.int64))),
    )


def outline_pieces(outline: ArrayLike, length: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """A closed counter-clockwise outline (V, 2) [m] cut into pieces: their middles (S, 2),
    on the outline, the outward unit normals of their chords (S, 2) and half-lengths (S,).
    The outline runs from corner to corner (:data:`CORNER`; a ring without corners from
    its first vertex); each run is cut into equal pieces no more than 10% longer than
    ``length``. Runs shorter than a quarter of ``length`` (a corner the tracing bevelled)
    are left out: a push there meets a corner. Raises GridError for a bad outline or
    length."""
    if not (math.isfinite(length) and length > 0.0):
        raise GridError(f'the pieces need a positive length [m], got {length}')
    ring = check_outline(outline)
    ring = ring[np.any(np.roll(ring, -1, axis=0) != ring, axis=1)]  # no repeated vertex
    d = np.roll(ring, -1, axis=0) - ring  # side i runs from vertex i to vertex i + 1
    u = d / np.linalg.norm(d, axis=1)[:, None]
    u_in = np.roll(u, 1, axis=0)  # the side that arrives at vertex i
    turn = np.arctan2(u_in[:, 0] * u[:, 1] - u_in[:, 1] * u[:, 0], np.sum(u_in * u, axis=1))
    corners = np.flatnonzero(np.abs(turn) > CORNER)
    if len(corners) == 0:
        corners = np.array([0])
    V = len(ring)
    mids, normals, halves = [np.zeros((0, 2))], [np.zeros((0, 2))], [np.zeros(0)]
    for k, c0 in enumerate(corners):
        c1 = corners[(k + 1) % len(corners)]
        path = ring[np.arange(c0, c0 + (c1 - c0 - 1) % V + 2) % V]  # vertex c0 to c1
        s = np.concatenate(([0.0], np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))))
        if s[-1] < length / 4:
            continue
        m = max(1, int(np.ceil(s[-1] / length - 0.1)))
        at = np.linspace(0.0, s[-1], 2 * m + 1)  # piece ends and middles, alternately
        points = np.column_stack((np.interp(at, s, path[:, 0]), np.interp(at, s, path[:, 1])))
        chord = points[2::2] - points[:-1:2]
        chord_length = np.linalg.norm(chord, axis=1)
        mids.append(points[1::2])
        normals.append(np.column_stack((chord[:, 1], -chord[:, 0])) / chord_length[:, None])
        halves.append(chord_length / 2)
    return np.concatenate(mids), np.concatenate(normals), np.concatenate(halves)


def grid_radius(grid: Grid) -> float:
    """Largest distance [m] from the cells' centroid to a cell corner (the rho that weighs
    rotation against translation in SE(2) distances)."""
    r = grid.p_OC - grid.p_OC.mean(axis=0)
    return float(np.linalg.norm(r, axis=1).max() + grid.cell_size / math.sqrt(2))


def footprint_centroid(grid: Grid) -> FloatArray:
    """The centroid p_O (2,) [m] of the footprint's area: of the real outline's polygon
    when the grid has one, else of the cells' covered squares."""
    if grid.outline is None:
        return np.asarray(grid.area @ grid.p_OC / grid.area.sum(), dtype=float)
    v = np.asarray(grid.outline, dtype=float)
    w = np.roll(v, -1, axis=0)
    cross = v[:, 0] * w[:, 1] - w[:, 0] * v[:, 1]
    return np.asarray((v + w).T @ cross / (3.0 * cross.sum()), dtype=float)


def turn_sweep(grid: Grid, turns: int = 16, spacing: float = 0.001) -> float:
    """How far [m] a turn moves the footprint's boundary: the largest, over ``turns`` turns
    evenly spread over (0, pi] about its centroid (:func:`footprint_centroid`), of the RMS
    distance from the turned boundary (sampled every ``spacing`` m) to the boundary itself.

    A camera sees an object turn only through its outline: a disc's is the same at every
    yaw (its sweep is the perceived outline's own noise, 1 to 4 mm), an ellipse of
    8 x 7.5 cm or an octagon of 8 cm sweeps 3 to 4 mm, a box of a few centimetres tens.
    Turns of a whole period of a shape (a square's quarter turn) sweep nothing, so the
    largest over the turns is taken, not the first."""
    a, b = boundary_segments(grid)
    lengths = np.linalg.norm(b - a, axis=1)
    k = np.maximum(1, np.ceil(lengths / spacing).astype(int))
    seg = np.repeat(np.arange(len(a)), k)
    t = (np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)) / np.repeat(k, k)
    p = a[seg] + t[:, None] * (b - a)[seg]
    c = footprint_centroid(grid)
    sweep = 0.0
    for angle in np.linspace(math.pi / turns, math.pi, turns):
        q = c + (p - c) @ rotation(float(angle)).T
        sweep = max(sweep, float(np.sqrt(np.mean(boundary_distance(grid, q) ** 2))))
    return sweep


def reach(grid: Grid) -> float:
    """Radius [m] of the circle around the object frame's origin that holds every cell."""
    return float(np.linalg.norm(grid.p_OC, axis=1).max() + grid.cell_size / math.sqrt(2))


def distance_to_cells(grid: Grid, p_O: FloatArray) -> float:
    """Distance [m] from a point p_O (2,) of the object frame to the nearest cell square
    (0 inside one)."""
    half = grid.cell_size / 2
    d = np.abs(p_O[None, :] - grid.p_OC) - half
    outside = np.linalg.norm(np.maximum(d, 0.0), axis=1)
    return float(outside.min())


def distance_to_footprint(grid: Grid, p_O: FloatArray) -> float:
    """Distance [m] from a point p_O (2,) of the object frame to the object (0 on it): to
    its real outline when it has one, else to its cell squares."""
    if grid.outline is None:
        return distance_to_cells(grid, p_O)
    p = np.asarray(p_O, dtype=float)
    if Path(grid.outline).contains_point((float(p[0]), float(p[1]))):
        return 0.0
    return float(boundary_distance(grid, p)[0])


def boundary_distance(grid: Grid, p_O: ArrayLike) -> FloatArray:
    """Distances [m] (P,) from points p_O (P, 2) of the object frame to the footprint's
    boundary (:func:`boundary_segments`), inside or out."""
    p = np.atleast_2d(np.asarray(p_O, dtype=float))
    a, b = boundary_segments(grid)
    d = b - a
    along = np.einsum('psk,sk->ps', p[:, None, :] - a[None], d)
    t = np.clip(along / np.maximum(np.einsum('sk,sk->s', d, d), 1e-300), 0.0, 1.0)
    closest = a[None] + t[..., None] * d[None]
    return np.asarray(np.linalg.norm(p[:, None, :] - closest, axis=2).min(axis=1), dtype=float)


def support_polygon(grid: Grid, X_WO: ArrayLike) -> FloatArray | None:
    """Vertices (V, 2) of the support polygon in the table frame: the convex hull of the
    footprint (its real outline, when the grid has one: :func:`boundary_rings`) clipped to
    the table (x >= 0); None when less than a sliver rests on it."""
    X = check_pose(X_WO, 'X_WO')
    A = boundary_rings(grid) @ rotation(float(X[2])).T + X[:2]
    B = np.roll(A, -1, axis=1)
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


def com_margins(grid: Grid, p_OBcm: FloatArray, X_WO: ArrayLike) -> FloatArray:
    """Signed distance [m] (K,) of centres of mass p_OBcm (K, 2) inside the support polygon
    at X_WO (negative outside; an object wholly on the table gets +inf: it cannot tip)."""
    X = check_pose(X_WO, 'X_WO')
    corners_W = boundary_rings(grid).reshape(-1, 2) @ rotation(float(X[2])).T + X[:2]
    if corners_W[:, 0].min() >= 0.0:
        return np.full(len(p_OBcm), np.inf)
    poly = support_polygon(grid, X)
    if poly is None:
        return np.full(len(p_OBcm), -np.inf)
    p_WBcm = p_OBcm @ rotation(float(X[2])).T + X[:2]
    edges = np.roll(poly, -1, axis=0) - poly
    normals = np.column_stack((edges[:, 1], -edges[:, 0]))  # outward for counter-clockwise
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    out = np.einsum('kvj,vj->kv', p_WBcm[:, None, :] - poly[None], normals)
    return np.asarray(-out.max(axis=1))


def overhang(grid: Grid, X_WO: ArrayLike) -> float:
    """How far [m] the object's footprint (its real outline, when it has one) reaches past
    the edge (0 when it does not)."""
    X = check_pose(X_WO, 'X_WO')
    x = to_world(X, boundary_rings(grid).reshape(-1, 2))[:, 0]
    return float(max(0.0, -x.min()))


def edge_support(grid: Grid, X_WO: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """The part of each cell's square on the table side of the free edge (x >= 0) at
    poses X_WO (N, 3): its share of the square (N, n) and its centroid p_OC_carried
    (N, n, 2) in the object frame (the cell's centre where the whole square is on the
    table; where none of it is, the centre too). For one pose (3,): (n,) and (n, 2).
    Exact: each square clipped by the edge's line (at most five corners), its area and
    centroid by the shoelace formula."""
    X = check_pose(X_WO, 'X_WO')
    one = X.ndim == 1
    X = np.atleast_2d(X)
    corners_O = cell_corners(grid)  # (n, 4, 2), counter-clockwise
    R = rotation(X[:, 2])  # (N, 2, 2)
    x_W = X[:, None, None, 0] + (
        R[:, None, None, 0, 0] * corners_O[None, ..., 0]
        + R[:, None, None, 0, 1] * corners_O[None, ..., 1]
    )  # (N, n, 4): the corners' distances behind the edge
    P = np.broadcast_to(corners_O[None], x_W.shape + (2,))
    P_next, x_next = np.roll(P, -1, axis=2), np.roll(x_W, -1, axis=2)
    crossing = (x_W >= 0.0) != (x_next >= 0.0)
    t = np.where(crossing, x_W / np.where(crossing, x_W - x_next, 1.0), 0.0)
    cut = P + t[..., None] * (P_next - P)
    # Sutherland-Hodgman against one line: per side, the corner when it is kept, then the
    # crossing when the side crosses; the slots left empty repeat the slot before them,
    # which adds nothing to the shoelace sums.
    slots = np.stack((P, cut), axis=3).reshape(x_W.shape[:2] + (8, 2))
    valid = np.stack((x_W >= 0.0, crossing), axis=3).reshape(x_W.shape[:2] + (8,))
    index = np.where(valid, np.arange(8), -1)
    index = np.maximum.accumulate(index, axis=2)
    last = index[..., -1:]
    index = np.where(index < 0, last, index)
    index = np.maximum(index, 0)
    V = np.take_along_axis(slots, index[..., None], axis=2)  # (N, n, 8, 2)
    V_next = np.roll(V, -1, axis=2)
    cross = V[..., 0] * V_next[..., 1] - V_next[..., 0] * V[..., 1]
    area = 0.5 * cross.sum(axis=2)
    moment = (cross[..., None] * (V + V_next)).sum(axis=2) / 6.0
    share = np.clip(area / grid.cell_size**2, 0.0, 1.0)
    share[share < COVERAGE_ROUNDING] = 0.0
    share[share > 1.0 - COVERAGE_ROUNDING] = 1.0
    partial = (share > 0.0) & (share < 1.0)
    centroid = np.broadcast_to(grid.p_OC[None], share.shape + (2,)).copy()
    centroid[partial] = moment[partial] / area[partial][:, None]
    if one:
        return np.asarray(share[0]), np.asarray(centroid[0])
    return np.asarray(share), np.asarray(centroid)


def cells_under(
    grid: Grid, X_WO: FloatArray, p_W: FloatArray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row, column and in-grid mask (...) of the grid squares under table-frame points
    p_W (..., 2) with the object at X_WO."""
    p_O = to_frame(X_WO, p_W)
    rows, cols = grid.shape
    w = grid.cell_size
    c = np.floor((p_O[..., 0] + cols * w / 2) / w).astype(np.int64)
    r = np.floor((rows * w / 2 - p_O[..., 1]) / w).astype(np.int64)
    return r, c, (c >= 0) & (c < cols) & (r >= 0) & (r < rows)


def covered(grid: Grid, X_WO: FloatArray, p_W: FloatArray) -> np.ndarray:
    """Whether table-frame points p_W (..., 2) lie on the object at X_WO: on its cells,
    and inside its real outline when it has one."""
    r, c, inside = cells_under(grid, X_WO, p_W)
    out = np.zeros(r.shape, dtype=bool)
    out[inside] = grid.occupancy[r[inside], c[inside]]
    if grid.outline is not None and out.any():
        p_O = to_frame(X_WO, p_W[out])
        out[out] = Path(grid.outline).contains_points(p_O.reshape(-1, 2))
    return out


def tallest_under(grid: Grid, X_WO: FloatArray, p_W: FloatArray) -> float:
    """Tallest cell [m] under table-frame points p_W (..., 2) on the object (0 if none)."""
    r, c, inside = cells_under(grid, X_WO, p_W.reshape(-1, 2))
    return float(grid.heights[r[inside], c[inside]].max()) if inside.any() else 0.0


def polygon_coverage(grid: Grid, vertices_O: ArrayLike) -> FloatArray:
    """(n,) the fraction of each occupied cell's square that a simple polygon (k, 2) [m,
    object frame] covers (a cell on a curved or slanted outline is partly the object's:
    its mass and its share of the support go with the covered area). Exact: the polygon
    clipped to each square (matplotlib's ``Path.clip_to_bbox``; a concave polygon may
    leave several pieces in one square), so a thin part of the polygon that a square
    holds only a sliver of still counts. Shares within ``COVERAGE_ROUNDING`` of 0 or 1
    are those (a side lying on a cell's side)."""
    v = np.asarray(vertices_O, dtype=float)
    if v.ndim != 2 or v.shape[1] != 2 or v.shape[0] < 3 or not np.all(np.isfinite(v)):
        raise ValueError(f'a polygon needs (k>=3, 2) finite vertices, got {v.shape}')
    polygon = Path(np.vstack((v, v[:1])), closed=True)
    half = grid.cell_size / 2
    lo, hi = v.min(axis=0), v.max(axis=0)
    cover = np.zeros(grid.n)
    for i, c in enumerate(grid.p_OC):
        if np.any(c + half <= lo) or np.any(c - half >= hi):
            continue  # the square lies beside the polygon's bounding box
        clipped = polygon.clip_to_bbox(Bbox([c - half, c + half]), inside=True)
        cover[i] = _path_area(clipped) / grid.cell_size**2
    cover[cover < COVERAGE_ROUNDING] = 0.0
    cover[cover > 1.0 - COVERAGE_ROUNDING] = 1.0
    return cover


COVERAGE_ROUNDING = 1e-9
"""A share of a cell's square this near 0 or 1 is that: floating-point remains of a
polygon side that lies on a cell side."""


def _path_area(path: Path) -> float:
    """The area [m^2] of a path of closed polygons (each from a MOVETO), their signed
    areas summed without sign (clipping keeps the polygon's orientation)."""
    vertices = np.asarray(path.vertices, dtype=float).reshape(-1, 2)
    if len(vertices) == 0:
        return 0.0
    codes = np.full(len(vertices), Path.LINETO) if path.codes is None else np.asarray(path.codes)
    starts = [*np.nonzero(codes == Path.MOVETO)[0].tolist(), len(codes)]
    total = 0.0
    for s, e in zip(starts[:-1], starts[1:], strict=True):
        ring = vertices[s:e][codes[s:e] != Path.CLOSEPOLY]
        if len(ring) >= 3:
            total += signed_area(ring)
    return abs(total)


def outline_grid(outline: ArrayLike, cell_size: float, height: float = 0.0) -> Grid:
    """The grid of a known outline (k, 2) [m], a simple polygon: every cell it covers
    some of (:func:`polygon_coverage`) with that share, laid over the polygon's bounding
    box, and the polygon as the grid's outline. The grid's frame is the bounding box's
    centre (the outline is moved into it)."""
    v = np.asarray(outline, dtype=float)
    if v.ndim != 2 or v.shape[1] != 2 or v.shape[0] < 3 or not np.all(np.isfinite(v)):
        raise GridError(f'an outline needs (k>=3, 2) finite vertices, got {v.shape}')
    check_object_cells(cell_size, 1, 1)  # 0 overflowed; 1e-5 m ran for minutes
    lo, hi = v.min(axis=0), v.max(axis=0)
    cols, rows = (max(1, int(c)) for c in np.ceil((hi - lo) / cell_size - 1e-9))
    check_object_cells(cell_size, rows, cols)
    full = Grid.from_occupancy(np.ones((rows, cols)), cell_size, height)
    ring = v - (lo + hi) / 2
    cover = full.to_map(polygon_coverage(full, ring), fill=0.0)
    return Grid(cell_size, cover > 0, full.heights, cover, ring)
