"""``slide bench pregrasp``: the whole task over the library, and paper 1's planning bench.

Episodes: every object x seeds x methods (:mod:`slide_bringup.episode`), run in parallel
processes; ``overhang_weight`` > 0 asks for goals as far out as balance allows (the
papers' setting, where the belief's accuracy decides whether the object stays). Per
method: success rate (lifted and held), falls, planned pushes per episode, planning and
total time, and how often the chosen goal would have let the true object fall
(``unsafe_goals``: the true centre of mass outside the support polygon at the goal), and
how far the last belief's most probable centre of mass lies from the truth
(``com_error_m_mean``: the belief identified again after the planned pushes, those over
the edge included, when the task relearns). ``tracking``: the object poses the episodes
observe and identify from, as a camera tracker gives them (``--pose-rate``,
``--pose-noise``; default the twin's truth at 100 Hz; ``pose_tracking`` in the result;
``--pose-offset`` a camera off by that: ``contact_offsets_measured`` and
``contact_offsets_taken_off`` count the episodes whose exploratory pushes told the
fingertip's offset and those that took it off their poses).

Planning (pure simulation, paper 1's benchmark): per object, random maps (cell masses and
frictions drawn within the identification bounds), random start and goal poses on the
table; the planner knows the maps (one model) and the world is the quasi-static model with
the same maps. Success: the object ends within ``GOAL_TOL_M`` and ``GOAL_TOL_RAD`` of the
goal within ``MAX_PUSHES`` pushes. Figures: success rate, pushes, model rollouts and
seconds per plan, for the refined contact search (finite differences) and the exhaustive
ablation (several contact points per side, no refinement).

Every worker process loads the compiled kernels before its first job, so no episode or
plan is timed with numba's cache loading. Planning time is the task's planning stages
(goal and plan: path and push choice); per push it is an episode's planning time over its
planned pushes, summarised by the median over episodes (and the mean).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
import math
import multiprocessing
import time
from typing import Any

import numpy as np

from slide_bringup.bench.pool import initializer, processes
from slide_bringup.episode import run_episode
from slide_bringup.signals import Terminated
from slide_core.geometry import rotation, wrap_angle
from slide_core.identification import Bounds
from slide_core.model import Belief, library_names, load_object, load_workcell
from slide_core.physics import DEFAULT_SUPPORT, check_support, quasistatic
from slide_core.planning import (
    PlannerConfig,
    PlanningError,
    in_workspace,
    next_waypoint,
    plan_path,
    planner_config,
    select_push,
    step_seed,
)
from slide_core.task import MODEL_SOURCES as METHODS
from slide_core.task import TaskSettings
from slide_sim.tracker import TRUTH, Tracking

Progress = Callable[[str], None]
GOAL_TOL_M = 0.02
GOAL_TOL_RAD = 0.2
MAX_PUSHES = 30


def _episode(job: tuple[str, int, str, float, str, Tracking, str]) -> dict[str, Any]:
    name, seed, method, overhang_weight, support, tracking, contact_offset = job
    try:
        config = planner_config(load_workcell(), overhang_weight=overhang_weight)
        return run_episode(
            load_object(name),
            seed,
            method,
            config=config,
            support=support,
            tracking=tracking,
            contact_offset=contact_offset,
        ).to_dict()
    except Exception as exc:  # noqa: BLE001 - a crash is a failed episode, with its reason
        return {'object': name, 'seed': seed, 'method': method, 'error': repr(exc)}


def _random_pose(models: Belief, config: PlannerConfig, rng: np.random.Generator) -> np.ndarray:
    rho = models.radius()
    for _ in range(1000):
        X = np.array(
            [
                rng.uniform(rho + 0.05, config.table.depth - rho - 0.05),
                rng.uniform(
                    -config.table.width / 2 + rho + 0.05, config.table.width / 2 - rho - 0.05
                ),
                rng.uniform(-math.pi, math.pi),
            ]
        )
        if in_workspace(models.grid, X, config):
            return X
    raise RuntimeError('no free pose on the table')


def _plan_trial(job: tuple[str, int, bool]) -> dict[str, Any]:
    """One planning trial: random maps, start and goal; push until there or out of pushes."""
    name, seed, exhaustive = job
    spec = load_object(name)
    grid = spec.grid
    rng = np.random.default_rng(seed)
    bounds = Bounds.from_grid(grid)
    mass = rng.uniform(0.1, 1.0, grid.n) * bounds.mass_max
    friction = rng.uniform(0.2, 0.8, grid.n)
    models = Belief.create(grid, mass, friction)
    config = planner_config(load_workcell())
    X = _random_pose(models, config, rng)
    goal = X
    while np.linalg.norm(goal[:2] - X[:2]) < 0.1:
        goal = _random_pose(models, config, rng)
    rho = models.radius()
    sims, pushes, t0 = 0, 0, time.perf_counter()
    ok = False
    error = ''
    while pushes < MAX_PUSHES:
        if (
            np.linalg.norm(X[:2] - goal[:2]) <= GOAL_TOL_M
            and abs(float(wrap_angle(X[2] - goal[2]))) <= GOAL_TOL_RAD
        ):
            ok = True
            break
        try:
            path = plan_path(models, X, goal, config, seed=step_seed(seed, pushes))
            target = next_waypoint(path.waypoints, X, config.lookahead, rho)
            push = select_push(models, X, target, config, exhaustive=exhaustive)
        except PlanningError as exc:
            error = str(exc)
            break
        sims += push.simulations
        d = rotation(float(X[2])) @ push.primitive.d_O
        tip = config.fingertip
        X = quasistatic.push(
            grid,
            mass,
            friction,
            X,
            push.p_WF0,
            d,
            push.primitive.travel,
            tip.radius,
            tip.mu,
            push_height=tip.force_heights(grid),  # the world has the push's moment
        ).X_WO[0, -1]
        pushes += 1
    return {
        'object': name,
        'seed': seed,
        'exhaustive': exhaustive,
        'success': ok,
        'pushes': pushes,
        'simulations': sims,
        'seconds': time.perf_counter() - t0,
        'distance_m': float(np.linalg.norm(X[:2] - goal[:2])),
        'error': error,
    }


Advance = Callable[[str, int, int], None]
"""Called with (what, jobs done, jobs) as jobs finish (the command's progress bar)."""


class Stopped(Exception):  # noqa: N818 - a Ctrl-C or SIGTERM, with what was done
    """A Ctrl-C or SIGTERM (``stop``) stopped the jobs; ``rows`` holds those done."""

    def __init__(self, rows: list[dict[str, Any]], stop: KeyboardInterrupt) -> None:
        super().__init__(str(stop))
        self.rows, self.stop = rows, stop


def map_jobs(
    fn: Callable[[Any], dict[str, Any]],
    jobs: list[Any],
    workers: int,
    progress: Progress,
    what: str,
    advance: Advance | None = None,
) -> list[dict[str, Any]]:
    """``fn`` of every job in ``workers`` processes, in order; Stopped with the rows done
    when a Ctrl-C or SIGTERM comes (the workers are ended, the jobs not begun dropped)."""
    out: list[dict[str, Any]] = []
    if advance is not None:
        advance(what, 0, len(jobs))
    pool = ProcessPoolExecutor(max_workers=workers, initializer=initializer(workers))
    try:
        for i, row in enumerate(pool.map(fn, jobs)):
            out.append(row)
            progress(f'{what} {i + 1}/{len(jobs)}: {row}')
            if advance is not None:
                advance(what, i + 1, len(jobs))
    except KeyboardInterrupt as stop:
        # (every episode done was lost with the interrupt, up to 19 minutes of them, and
        # a SIGTERM, which only this process hears, waited for the episodes running)
        pool.shutdown(wait=False, cancel_futures=True)
        for child in multiprocessing.active_children():
            child.kill()  # (its own SIGTERM handler would make it an exception)
        raise Stopped(out, stop) from None
    except BaseException:  # (a worker's fault: the jobs not begun are not started)
        pool.shutdown(cancel_futures=True)
        raise
    pool.shutdown()
    return out


def run(
    objects: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    seeds: int = 3,
    seed: int = 0,
    planning_trials: int = 2,
    workers: int | None = None,
    progress: Progress | None = None,
    overhang_weight: float = 0.0,
    advance: Advance | None = None,
    support: str | None = None,
    tracking: Tracking = TRUTH,
    contact_offset: str = TaskSettings.contact_offset,
) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    support = check_support(support or DEFAULT_SUPPORT)
    names = list(objects or library_names())
    methods = list(methods or METHODS)
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f'unknown methods {bad}; choose from {", ".join(METHODS)}')
    if seeds < 1 or planning_trials < 0:
        raise ValueError('seeds must be >= 1 and planning trials >= 0')
    # Refused now: an episode's own error was counted in the result, exit 0.
    for name in names:
        load_object(name)
    planner_config(load_workcell(), overhang_weight=overhang_weight)
    workers = processes(workers)
    jobs = [
        (n, seed + s, m, overhang_weight, support, tracking, contact_offset)
        for n in names
        for s in range(seeds)
        for m in methods
    ]
    stopped: KeyboardInterrupt | None = None
    try:
        rows = map_jobs(_episode, jobs, workers, say, 'episode', advance)
    except Stopped as stop:  # the episodes done are the result
        rows, stopped = stop.rows, stop.stop
    per_method: dict[str, Any] = {}
    for m in methods:
        r = [x for x in rows if x['method'] == m]
        done = [x for x in r if 'error' not in x]
        per_method[m] = {
            'episodes': len(r),
            'success_rate': _mean([x['success'] for x in done], len(r)),
            'falls': sum(bool(x['fell']) for x in done),
            'unsafe_goals': sum(bool(x['goal']) and not x['goal_truly_balanced'] for x in done),
            'no_goal': sum(not x['goal'] for x in done),
            'com_error_m_mean': _avg(
                [x['com_error_m'] for x in done if x['com_error_m'] is not None]
            ),
            'errors': len(r) - len(done),
            'contact_offsets_measured': sum(x['contact_offset_m'] is not None for x in done),
            'contact_offsets_taken_off': sum(
                x['contact_offset_taken_off_m'] is not None for x in done
            ),
            'pushes_mean': _avg([x['pushes'] for x in done]),
            'planning_s_mean': _avg([x['planning_s'] for x in done]),
            'planning_s_median': _median([x['planning_s'] for x in done]),
            'planning_s_per_push': _avg(
                [x['planning_s'] / x['pushes'] for x in done if x['pushes']]
            ),
            'planning_s_per_push_median': _median(
                [x['planning_s'] / x['pushes'] for x in done if x['pushes']]
            ),
            'identification_s_mean': _avg([x['identification_s'] for x in done]),
            'interim_identification_s_mean': _avg([x['interim_identification_s'] for x in done]),
            'total_s_mean': _avg([x['total_s'] for x in done]),
        }
    planning: dict[str, Any] = {}
    if planning_trials and stopped is None:
        for exhaustive in (False, True):
            label = 'exhaustive' if exhaustive else 'refined'
            trials = [
                (n, seed + 1000 + k, exhaustive) for n in names for k in range(planning_trials)
            ]
            try:
                res = map_jobs(_plan_trial, trials, workers, say, f'planning ({label})', advance)
            except Stopped as stop:
                res, stopped = stop.rows, stop.stop
            planning[label] = {
                'trials': len(res),
                'success_rate': _mean([x['success'] for x in res], len(res)),
                'pushes_mean': _avg([x['pushes'] for x in res if x['success']]),
                'simulations_per_plan': _avg([x['simulations'] for x in res]),
                'seconds_per_plan': _avg([x['seconds'] for x in res]),
                'seconds_per_plan_median': _median([x['seconds'] for x in res]),
                'seconds_per_push': _avg([x['seconds'] / x['pushes'] for x in res if x['pushes']]),
            }
            if stopped is not None:
                break
    kept: dict[str, Any] = {}
    if stopped is not None:
        how = 'terminated' if isinstance(stopped, Terminated) else 'interrupted'
        kept = {'interrupted': how, 'episodes_planned': len(jobs)}
    crashed = [x for x in rows if 'error' in x]
    if crashed:
        # An episode that crashed is the bench's own fault, not a figure (every episode
        # crashing read as a run that went well: exit 0).
        kept['ok'] = False
        kept['reason'] = (
            f'{len(crashed)} of {len(rows)} episode(s) ended in an error, the first: '
            f'{crashed[0]["error"]}'
        )
    return {
        **kept,
        'objects': names,
        'seeds': seeds,
        'overhang_weight': overhang_weight,
        'support': support,
        'pose_tracking': tracking.figures(),
        'contact_offset': contact_offset,
        'methods': per_method,
        'planning': planning,
        'episodes': [{k: v for k, v in x.items() if k not in ('goal',)} for x in rows],
    }


def _mean(flags: list[bool], total: int) -> float:
    return float(sum(bool(f) for f in flags) / total) if total else 0.0


def _avg(values: list[float]) -> float:
    return float(np.mean(values)) if values else float('nan')


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else float('nan')
