"""``slide demo``: the best end-to-end thing available today.

An object (the hammer by default) is pushed in the MuJoCo twin with random exploratory
pushes, as the robot will explore an unknown object. Each push is then replayed with the
planar physics core from the observed start pose along the observed fingertip path, once
with the object's true mass and friction maps and once with uniform maps of the same total
mass: how well the model predicts a world it did not simulate, and the gap that
identification (a later capability) has to close. Writes a PNG of the maps and the pushes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import time
from typing import Any

NAME = 'demo'
HELP = 'push an object in the MuJoCo twin and predict it with the physics core, with a picture'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--object', default='hammer', help='library name or .yaml file')
    parser.add_argument('--pushes', type=int, default=4, help='exploratory pushes (1 to 8)')
    parser.add_argument('--seed', type=int, default=0, help='random seed')
    parser.add_argument(
        '--png', type=Path, default=Path('out/demo.png'), help='where to write the picture'
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from slide_core.grid import cell_positions
    from slide_core.objects import load_object
    from slide_core.physics import FingertipPush, simulate
    from slide_core.plot import Track, push_figure
    from slide_sim.twin import Twin

    if args.png.suffix.lower() != '.png':
        raise ValueError(f'--png must name a .png file, got {args.png}')
    if not 1 <= args.pushes <= 8:
        raise ValueError(f'--pushes must be between 1 and 8, got {args.pushes}')
    spec = load_object(args.object)
    grid = spec.grid
    uniform_m = np.full(grid.n, spec.total_mass / grid.n)
    uniform_mu = np.full(grid.n, float(spec.friction.mean()))
    twin = Twin(spec, (0.35, 0.0, 0.3))
    rng = np.random.default_rng(args.seed)
    panels = []
    pushes = []
    for i in range(args.pushes):
        rec = twin.random_push(rng)
        # From the stroke's start until the object has come to rest (before the retract).
        last = min(len(rec.t) - 1, rec.end + int(0.3 / twin.model.opt.timestep))
        path = rec.p_WF[rec.start : last + 1, :2]
        tip = FingertipPush.create(
            path, twin.cell.fingertip_radius, twin.cell.fingertip_mu, twin.model.opt.timestep
        )
        X0 = rec.X_WO[rec.start]
        t0 = time.perf_counter()
        true_maps = simulate(grid, spec.mass, spec.friction, tip, X0).X_WO[0]
        sim_s = time.perf_counter() - t0
        uniform = simulate(grid, uniform_m, uniform_mu, tip, X0).X_WO[0]
        observed = rec.X_WO[rec.start : last + 1]
        final = cell_positions(grid, observed[-1])

        def add(X: np.ndarray, final: np.ndarray = final) -> float:
            return float(np.linalg.norm(cell_positions(grid, X[-1]) - final, axis=1).mean())

        moved = float(np.linalg.norm(final - cell_positions(grid, X0), axis=1).mean())
        pushes.append(
            {
                'push': i,
                'moved_m': round(moved, 4),
                'turned_deg': round(float(np.degrees(observed[-1, 2] - X0[2])), 2),
                'add_true_maps_m': round(add(true_maps), 4),
                'add_uniform_maps_m': round(add(uniform), 4),
                'simulation_s': round(sim_s, 4),
                'peak_ft_force_n': round(
                    float(np.linalg.norm(rec.wrench_W[:, :2], axis=1).max()), 3
                ),
            }
        )
        panels.append(
            (
                f'push {i}: moved {100 * moved:.1f} cm',
                [
                    Track('twin (MuJoCo)', observed, 'tab:blue', filled=True),
                    Track('core, true maps', true_maps, 'tab:green'),
                    Track('core, uniform maps', uniform, 'tab:orange'),
                ],
                path,
            )
        )
    png = push_figure(
        args.png,
        grid,
        spec.mass,
        spec.friction,
        panels,
        f'slide demo: {spec.name} pushed in the twin, replayed by the planar physics core',
    )
    mean = {
        key: round(float(np.mean([p[key] for p in pushes])), 4)
        for key in ('add_true_maps_m', 'add_uniform_maps_m', 'moved_m')
    }
    return {'object': spec.name, 'cells': grid.n, 'pushes': pushes, 'mean': mean, 'png': str(png)}


def format_text(result: dict[str, Any]) -> str:
    lines = [f'{result["object"]} ({result["cells"]} cells), pushed in the MuJoCo twin:']
    for p in result['pushes']:
        lines.append(
            f'  push {p["push"]}: moved {100 * p["moved_m"]:.1f} cm, '
            f'turned {p["turned_deg"]:6.1f} deg;'
            f' core prediction off by {100 * p["add_true_maps_m"]:.1f} cm with the true maps,'
            f' {100 * p["add_uniform_maps_m"]:.1f} cm with uniform maps'
        )
    m = result['mean']
    lines.append(
        f'mean cell error: {100 * m["add_true_maps_m"]:.2f} cm (true maps), '
        f'{100 * m["add_uniform_maps_m"]:.2f} cm (uniform maps), '
        f'for {100 * m["moved_m"]:.1f} cm moves'
    )
    lines.append(f'picture: {result["png"]}')
    return '\n'.join(lines)
