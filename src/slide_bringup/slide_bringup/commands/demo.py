"""``slide demo``: the main job, one whole pre-grasp episode by the ROS graph on the twin.

Starts the graph's nodes as separate processes (twin, F/T driver, perception, executor,
identification, planner, behaviour), as ``slide launch pregrasp exit_on_done:=true`` does.
The hammer (by default) lies at a random pose; the robot pokes it (the first push at
random, then the pushes the belief's models disagree most about), the identification node
identifies a belief over its mass and friction maps, the planner chooses a goal at the
table edge where the handle sticks out and stays balanced with high probability and pushes
it there in closed loop (observe through perception, replan, push), and the executor
grasps the overhang and lifts it. It prints what happened stage by stage, writes a picture
(``out/demo.png``), keeps the last belief with the node logs (``belief.yaml``, to plan
from it again offline), and scores the episode with the twin's ground truth (read only here,
never by the graph). ``slide episode`` runs the same task in one process, for benchmarks.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
import sys
import tempfile
import threading
import time
from typing import Any

from slide_bringup.args import seed

NAME = 'demo'
LIFTED_M = 0.05
"""The object rose at least this much [m] (the grasp lifts 0.1 m): it was really lifted."""
TRUTH_MAX_AGE_S = 2.0
"""The latest ground truth is at most this old [s] when the episode is scored."""
HELP = 'one whole pre-grasp episode by the ROS graph on the twin, with a picture (the main job)'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--object', default='hammer', help='library name or .yaml file')
    parser.add_argument('--seed', type=seed, default=0, help='episode seed (start pose, pushes)')
    parser.add_argument('--png', type=Path, default=Path('out/demo.png'), help='the picture')
    parser.add_argument(
        '--timeout', type=float, default=1200.0, help='give up after this many seconds'
    )
    parser.add_argument(
        '--log-dir', type=Path, default=None, help='node logs (default out/demo/TIME)'
    )
    parser.add_argument(
        '--ft-offset',
        type=float,
        nargs=6,
        default=(0.0,) * 6,
        metavar=('FX', 'FY', 'FZ', 'TX', 'TY', 'TZ'),
        help="what the twin's F/T sensor reads with nothing touching, as an untared one does "
        '[N, N m, its frame]',
    )


class Watcher:
    """Listens to the behaviour's state (prints its history as it grows) and keeps the
    twin's latest ground truth, in a thread of its own."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        from slide_interfaces.msg import GroundTruth, TaskState
        from slide_ros.qos import LATCHED

        self.context = Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node('slide_demo', context=self.context)
        self.truth: Any = None
        self.first_truth: Any = None
        self.grasp_truth: Any = None  # the truth when the grasp stage began
        self.truth_count = 0
        self.truth_at = 0.0  # when the latest truth arrived (monotonic)
        self.printed = 0
        self.node.create_subscription(TaskState, '/behaviour/state', self._state, LATCHED)
        self.node.create_subscription(GroundTruth, '/ground_truth', self._truth, LATCHED)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except Exception:  # noqa: BLE001 - the context was shut down under us, or a
                # callback failed once: only the first ends the watch (a dead watcher would
                # score the episode with a stale ground truth)
                if not self.context.ok():
                    return

    def _state(self, msg: Any) -> None:
        if msg.stage == 'grasp' and self.grasp_truth is None:
            self.grasp_truth = self.truth
        for line in msg.history[self.printed :] if len(msg.history) > self.printed else []:
            print(f'[{time.strftime("%H:%M:%S")}] {line}', file=sys.stderr, flush=True)
        self.printed = max(self.printed, len(msg.history))

    def _truth(self, msg: Any) -> None:
        if self.first_truth is None:
            self.first_truth = msg
        self.truth = msg
        self.truth_count += 1
        self.truth_at = time.monotonic()

    def close(self) -> None:
        self.context.try_shutdown()
        self.thread.join(timeout=2.0)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from slide_bringup.graph import GraphError, pregrasp
    from slide_bringup.ros_check import domain_problem
    from slide_bringup.runner import Graph, fresh_log_dir
    from slide_core.files import check_folder, check_output
    from slide_core.geometry import overhang
    from slide_core.io import grid_from_msg
    from slide_core.model import load_object

    check_output(args.png, ('.png',), '--png')
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ValueError(f'--timeout must be a positive number of seconds, got {args.timeout}')
    load_object(args.object)  # a bad object is bad input, before anything starts
    if args.log_dir is not None:
        check_folder(args.log_dir, '--log-dir')
    t0, started = time.perf_counter(), time.time()
    specs = pregrasp(
        {
            'object': str(args.object),
            'seed': str(args.seed),
            'exit_on_done': 'true',
            'ft_offset': ','.join(repr(float(v)) for v in args.ft_offset),
        }
    )  # the arguments are checked before anything of an earlier run is touched
    problem = domain_problem()  # before this process's own node: DDS would end it
    if problem:
        raise GraphError(problem)
    log_dir = args.log_dir or fresh_log_dir(Path('out/demo'))
    # A --log-dir used before may hold an older run's beliefs, which would be mixed with
    # this run's (the last, and those its planned pushes were decided under, belief.N.yaml);
    # they were deleted, and with them any file of the user's named so.
    belief_file = log_dir / 'belief.yaml'
    older = sorted(p.name for p in (belief_file, *log_dir.glob('belief.*.yaml')) if p.exists())
    if older:
        raise ValueError(
            f'--log-dir {log_dir} holds belief files already ({", ".join(older[:3])}'
            f'{", ..." if len(older) > 3 else ""}): give a new or empty folder, the demo '
            'writes its own there'
        )
    with tempfile.TemporaryDirectory() as tmp:
        result_file = Path(tmp) / 'result.json'
        for spec in specs:
            if spec.name == 'behaviour':
                spec.parameters.update(
                    {
                        'result_file': str(result_file),
                        'png': str(args.png.resolve()),
                        'belief_file': str(belief_file.resolve()),
                    }
                )
        graph = Graph(specs, log_dir)
        watcher = Watcher()
        graph.start()
        print(
            f'slide demo: {len(specs)} nodes started ({", ".join(s.name for s in specs)}); '
            f'logs in {log_dir}',
            file=sys.stderr,
        )

        def died(name: str, exit_code: int) -> None:
            # Said here, not only in the log: the logs may be gone with a CI machine.
            print(f'slide demo: {graph.death_notice(name, exit_code, 30)}', file=sys.stderr)

        try:
            code = graph.wait_for('behaviour', args.timeout, on_exit=died)
            time.sleep(0.5)  # the latest ground truth after the lift
        finally:
            truth, first, at_grasp = watcher.truth, watcher.first_truth, watcher.grasp_truth
            truth_age = time.monotonic() - watcher.truth_at
            codes = graph.stop(on_exit=died)  # and one that did not end cleanly
            watcher.close()
        episode = json.loads(result_file.read_text()) if result_file.exists() else None
    out: dict[str, Any] = {
        'object': str(args.object),
        'seed': args.seed,
        'nodes': [s.name for s in specs],
        'exit_codes': codes,
        'logs': str(log_dir),
        'total_s': round(time.perf_counter() - t0, 2),
    }
    if episode is None:
        out.update(
            success=False,
            fell=False,
            outcome='no_result',
            reason=f'the behaviour node ended without a result (exit {code}); see {log_dir}',
            stages={},
            exploration_pushes=0,
            pushes=0,
            ok=False,
        )
        return out
    out.update(episode)
    out['episode_s'] = episode['total_s']
    out['total_s'] = round(time.perf_counter() - t0, 2)
    out['fell'] = bool(truth.fell) if truth is not None else False
    if truth is not None:
        # Where the object lay when the grasp began: a held object's 'overhang' means nothing.
        grid, X = grid_from_msg((at_grasp or truth).grid)
        out['X_final_true'] = [round(float(v), 4) for v in X]
        out['overhang_m'] = round(overhang(grid, X), 4)
        out['lifted_true_m'] = round(float(truth.height - first.height), 4)
        out['tilt_true_deg'] = round(math.degrees(truth.tilt), 1)  # in the grip, once held
        # The twin publishes its truth at 5 Hz: an old one would score a stale world.
        out['truth_messages'] = watcher.truth_count
        out['truth_age_s'] = round(truth_age, 2)
    # This run's picture only: an older run's at the same path was reported as this one's
    # when the episode ended before its first belief.
    drawn = args.png.exists() and args.png.stat().st_mtime >= started
    out['png'] = str(args.png) if drawn else None
    out['belief'] = str(belief_file) if belief_file.exists() else None
    # The graph's word (the gripper holds after the lift), checked against the twin's truth.
    out['ok'] = bool(
        episode['success']
        and not out['fell']
        and out.get('lifted_true_m', 0.0) > LIFTED_M
        and out.get('truth_age_s', math.inf) < TRUTH_MAX_AGE_S
    )
    if episode['success'] and not out['ok']:
        # The gripper held after its lift; the twin says the object did not come up with
        # it (the text said 'lifted and held' and gave no reason).
        if out.get('truth_age_s', math.inf) >= TRUTH_MAX_AGE_S:
            why = 'no recent truth from the twin to check it by'
        elif out['fell']:
            why = 'the twin says the object fell'
        else:
            why = (
                f'the twin says the object rose {out.get("lifted_true_m", 0.0) * 100:.1f} cm '
                f'(at least {LIFTED_M * 100:.0f} cm is a lift)'
            )
        out['reason'] = f'the graph reported a grasp that held, but {why}'
    return out


def format_text(result: dict[str, Any]) -> str:
    if not result.get('success'):
        verdict = f'FAILED ({result["outcome"]})'
    elif result.get('ok') is False:
        verdict = "NOT LIFTED by the twin's truth"
    else:
        verdict = 'lifted and held'
    lines = [f'{result["object"]}, seed {result["seed"]}: {verdict}']
    for stage, seconds in result.get('stages', {}).items():
        lines.append(f'  {stage:10s} {seconds:7.1f} s')
    lines.append(
        f'  {result.get("exploration_pushes", 0)} exploratory pushes, '
        f'{result.get("pushes", 0)} planned pushes; fell: {result.get("fell")}'
    )
    if 'lifted_true_m' in result:
        lines.append(
            f'  twin truth: lifted {result["lifted_true_m"] * 100:.1f} cm, '
            f'{result.get("overhang_m", 0.0) * 100:.1f} cm over the table edge, '
            f'tilted {result.get("tilt_true_deg", 0.0):.0f} degrees at the end'
        )
    if not result.get('success') or result.get('ok') is False:
        lines.append(f'  why: {result.get("reason")}')
    lines.append(f'  nodes: {", ".join(result["nodes"])}; logs {result["logs"]}')
    lines.append(f'  total {result["total_s"]:.1f} s')
    if result.get('png'):
        lines.append(f'picture: {result["png"]}')
    if result.get('belief'):
        lines.append(f'belief: {result["belief"]}')
    return '\n'.join(lines)
