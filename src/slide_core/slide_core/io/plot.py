"""Pictures of objects, maps and pushes (matplotlib, written to files; no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use('Agg')
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Polygon  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from slide_core.files import write_atomic  # noqa: E402
from slide_core.geometry import FloatArray, Grid, rotation  # noqa: E402
from slide_core.model import Belief  # noqa: E402
from slide_core.planning import PlannerConfig  # noqa: E402


def draw_map(ax: Axes, grid: Grid, values: FloatArray, title: str, unit: str, cmap: str) -> None:
    """A per-cell map (n,) as an image in the object frame, empty cells blank."""
    rows, cols = grid.shape
    w = grid.cell_size
    extent = (-cols * w / 2, cols * w / 2, -rows * w / 2, rows * w / 2)
    image = ax.imshow(grid.to_map(values), cmap=cmap, extent=extent, origin='upper')
    if grid.outline is not None:  # the real outline over the cells
        ring = np.vstack((grid.outline, grid.outline[:1]))
        ax.plot(ring[:, 0], ring[:, 1], color='black', linewidth=1.0)
    ax.set_title(title)
    ax.set_xlabel('x_O [m]')
    ax.set_ylabel('y_O [m]')
    plt.colorbar(image, ax=ax, label=unit, shrink=0.8)


def draw_object(ax: Axes, grid: Grid, X_WO: FloatArray, color: str, alpha: float) -> None:
    """The object at pose X_WO (3,): its real outline, or its cells as squares."""
    R = rotation(X_WO[2])
    if grid.outline is not None:
        ax.add_patch(
            Polygon(grid.outline @ R.T + X_WO[:2], closed=True, fc=color, ec='none', alpha=alpha)
        )
        return
    half = grid.cell_size / 2
    corners = np.array([[-half, -half], [half, -half], [half, half], [-half, half]])
    for p in grid.p_OC:
        ax.add_patch(
            Polygon((p + corners) @ R.T + X_WO[:2], closed=True, fc=color, ec='none', alpha=alpha)
        )


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
    """Write the figure as PNG, atomically (no half-written picture on failure)."""
    fig.suptitle(title)
    fig.tight_layout()
    try:
        return write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, format='png'))
    finally:
        plt.close(fig)


def belief_figure(path: str | Path, belief: Belief, title: str) -> Path:
    """Every model of a belief: mass maps on top, friction
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


def _draw_table(ax: Axes, depth: float, width: float) -> None:
    ax.add_patch(
        Polygon(
            [[0, -width / 2], [depth, -width / 2], [depth, width / 2], [0, width / 2]],
            closed=True,
            fc='0.93',
            ec='0.5',
        )
    )
    ax.axvline(0.0, color='k', lw=2)
    ax.text(0.0, width / 2, ' edge', va='top', ha='left')


def plan_axes(
    ax: Axes,
    grid: Grid,
    com_O: FloatArray,
    trace: dict[str, Any],
    config: PlannerConfig,
) -> None:
    """Top view of a planned episode: table and edge, start and goal poses, each push's
    path (dotted), target waypoint (x) and fingertip stroke (arrow), the final pose, the
    grasp's finger pads, and the most probable model's centre of mass at start and end."""
    _draw_table(ax, config.table.depth, config.table.width)
    # Where planning started; an episode that ended in exploration has only its first pose
    # (drawing it raised KeyError, and slide episode lost the whole result).
    start = np.asarray(trace['X_start'] if 'X_start' in trace else trace['X_initial'])
    draw_object(ax, grid, start, 'tab:blue', 0.35)
    ax.annotate('start', (float(start[0]), float(start[1])), color='tab:blue')
    if 'goal' in trace:
        goal = np.asarray(trace['goal'])
        draw_object(ax, grid, goal, 'tab:green', 0.3)
        ax.annotate('goal', (float(goal[0]), float(goal[1])), color='tab:green')
    for k, p in enumerate(trace.get('pushes', [])):
        path = np.asarray(p['path'])
        ax.plot(path[:, 0], path[:, 1], ':', color='tab:green', lw=1, alpha=0.6)
        if p.get('target') is not None:
            ax.plot(*p['target'][:2], 'x', color='tab:green', ms=6)
        a = np.asarray(p['p_WF0'])
        d = np.asarray(p['direction_W']) * p['travel']
        ax.annotate(
            '',
            (float(a[0] + d[0]), float(a[1] + d[1])),
            (float(a[0]), float(a[1])),
            arrowprops={'arrowstyle': '->', 'color': 'tab:red', 'lw': 1.5},
        )
        ax.text(float(a[0]), float(a[1]), str(k + 1), color='tab:red', fontsize=7)
    if 'X_final' in trace:
        final = np.asarray(trace['X_final'])
        draw_object(ax, grid, final, 'tab:orange', 0.6)
        c = com_O @ rotation(final[2]).T + final[:2]
        ax.plot(c[:, 0], c[:, 1], '+', color='k', ms=12, mew=2)
    if 'grasp' in trace:
        g = trace['grasp']
        front = np.asarray(g['p_WE'])
        w = config.gripper.finger_width / 2
        depth = config.gripper.finger_depth
        # The pads in the approach's frame (yaw 0: along +x), turned into the table's.
        pad_A = np.array([[-depth, -w], [0.0, -w], [0.0, w], [-depth, w]])
        pad = front + pad_A @ rotation(float(g.get('yaw', 0.0))).T
        ax.add_patch(Polygon(pad, closed=True, fc='none', ec='k', lw=1.5, ls='--'))
        ax.annotate('grasp', (float(front[0]), float(front[1])), color='k')
    pts = [start[:2]] + [np.asarray(p['p_WF0']) for p in trace.get('pushes', [])]
    if 'X_final' in trace:
        pts.append(np.asarray(trace['X_final'])[:2])
    pts_a = np.asarray(pts)
    r = float(np.linalg.norm(grid.p_OC, axis=1).max()) + 0.05
    ax.set_xlim(min(-0.1, pts_a[:, 0].min() - r), pts_a[:, 0].max() + r)
    ax.set_ylim(pts_a[:, 1].min() - r, pts_a[:, 1].max() + r)
    ax.set_aspect('equal')
    ax.set_xlabel('x (table frame) [m]')
    ax.set_ylabel('y [m]')
    ax.set_title('plan and pushes')


def episode_figure(
    path: str | Path,
    grid: Grid,
    belief: Belief,
    trace: dict[str, Any],
    config: PlannerConfig,
    title: str,
) -> Path:
    """The most probable model's maps beside the top view of the episode (:func:`plan_axes`)."""
    best = belief.best
    fig, axes = _maps_figure(grid, belief.mass[best], belief.friction[best], 1, 4.2)
    fig.set_size_inches(4.2 * 2 + 7.5, 5.5)
    com = belief.com()[best]
    for ax in axes[:2]:
        ax.plot(*com, marker='+', color='red', ms=12, mew=2)
    plan_axes(axes[2], grid, com[None, :], trace, config)
    return _save(fig, path, title)
