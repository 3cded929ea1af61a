"""Pictures of objects, maps and pushes (matplotlib, written to files; no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use('Agg')
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Circle, Polygon  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from slide_core.grid import FloatArray, Grid, rotation  # noqa: E402


def draw_map(ax: Axes, grid: Grid, values: FloatArray, title: str, unit: str, cmap: str) -> None:
    """A per-cell map (n,) as an image in the object frame, empty cells blank."""
    rows, cols = grid.shape
    w = grid.cell_size
    extent = (-cols * w / 2, cols * w / 2, -rows * w / 2, rows * w / 2)
    image = ax.imshow(grid.to_map(values), cmap=cmap, extent=extent, origin='upper')
    ax.set_title(title)
    ax.set_xlabel('x_O [m]')
    ax.set_ylabel('y_O [m]')
    plt.colorbar(image, ax=ax, label=unit, shrink=0.8)


def draw_object(ax: Axes, grid: Grid, X_WO: FloatArray, color: str, alpha: float) -> None:
    """The object's cells as squares at pose X_WO (3,)."""
    R = rotation(X_WO[2])
    half = grid.cell_size / 2
    corners = np.array([[-half, -half], [half, -half], [half, half], [-half, half]])
    for p in grid.p_OC:
        ax.add_patch(
            Polygon((p + corners) @ R.T + X_WO[:2], closed=True, fc=color, ec='none', alpha=alpha)
        )


@dataclass(frozen=True)
class Track:
    """One trajectory of the object in a push panel: X_WO (T+1, 3), drawn as its path and
    its final cell centres (``filled``: the final cells as squares instead)."""

    label: str
    X_WO: FloatArray
    color: str
    filled: bool = False


def push_figure(
    path: str | Path,
    grid: Grid,
    mass: FloatArray,
    friction: FloatArray,
    panels: Sequence[tuple[str, Sequence[Track], FloatArray | None]],
    title: str,
) -> Path:
    """Mass and friction maps, then one panel per push: (title, tracks, fingertip path
    (T+1, 2) or None). The first track's start pose is drawn in grey."""
    fig, axes = _maps_figure(grid, mass, friction, len(panels), 4.2)
    for ax, (label, tracks, tip) in zip(axes[2:], panels, strict=True):
        draw_object(ax, grid, tracks[0].X_WO[0], 'tab:gray', 0.35)
        for track in tracks:
            X = track.X_WO
            if track.filled:
                draw_object(ax, grid, X[-1], track.color, 0.55)
            else:
                cells = grid.p_OC @ rotation(X[-1, 2]).T + X[-1, :2]
                ax.scatter(*cells.T, s=4, color=track.color)
            ax.plot(*X[:, :2].T, color=track.color, lw=1.2, label=track.label)
        if tip is not None:
            ax.plot(*tip.T, color='k', lw=2, label='fingertip')
            ax.add_patch(Circle((float(tip[-1, 0]), float(tip[-1, 1])), 0.008, fc='k'))
        ax.set_aspect('equal')
        ax.autoscale_view()
        ax.set_title(label, fontsize=9)
        ax.set_xlabel('x_W [m]')
        ax.legend(loc='lower left', fontsize=6)
    return _save(fig, path, title)


def object_figure(
    path: str | Path, grid: Grid, mass: FloatArray, friction: FloatArray, title: str
) -> Path:
    """Mass and friction maps of one object, side by side, with its centre of mass."""
    fig, axes = _maps_figure(grid, mass, friction, 0, 4.5)
    com = mass @ grid.p_OC / mass.sum()
    for ax in axes:
        ax.plot(*com, marker='+', color='red', ms=14, mew=2, label='centre of mass')
        ax.legend(loc='lower left', fontsize=7)
    return _save(fig, path, title)


def _maps_figure(
    grid: Grid, mass: FloatArray, friction: FloatArray, extra: int, size: float
) -> tuple[Figure, Any]:
    """A figure whose first two panels are the mass and friction maps, then ``extra``."""
    fig, axes = plt.subplots(1, 2 + extra, figsize=(size * (2 + extra), size))
    draw_map(axes[0], grid, mass * 1000, 'mass per cell', 'g', 'viridis')
    draw_map(axes[1], grid, friction, 'friction per cell', 'mu', 'magma')
    return fig, axes


def _save(fig: Figure, path: str | Path, title: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def belief_figure(path: str | Path, belief: Any, title: str) -> Path:
    """Every model of a belief (slide_core.identify.Belief): mass maps on top, friction
    maps below, each titled with its probability; centres of mass marked."""
    K = belief.K
    fig, axes = plt.subplots(2, K, figsize=(3.2 * K, 6.0), squeeze=False)
    coms = belief.com()
    for k in range(K):
        draw_map(
            axes[0, k],
            belief.grid,
            belief.mass[k] * 1000,
            f'p = {belief.weight[k]:.2f}',
            'g',
            'viridis',
        )
        draw_map(axes[1, k], belief.grid, belief.friction[k], 'friction', 'mu', 'magma')
        for ax in axes[:, k]:
            ax.plot(*coms[k], marker='+', color='red', ms=12, mew=2)
    return _save(fig, path, title)
