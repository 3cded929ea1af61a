"""The behaviour node: the pre-grasp task coordinated over the graph's actions.

The task is the core's (:class:`slide_core.task.Task`): its stages run as leaves of a
py_trees behaviour tree, composed with py_trees' own composites and decorators::

    Sequence pregrasp
    ├── perceive
    ├── Repeat x N: explore once     (the planner's exploration choice, the executor's push)
    ├── identify                      (the identification node)
    ├── goal                          (the planner)
    ├── closed loop                   (one iteration per tick until done: plan, push)
    └── grasp                         (the planner's grasp, the executor)

Only the leaf is ours (:class:`StageLeaf`: a stage in a worker thread). The world is
perception and the executor, the decider the planner and identification nodes
(:mod:`slide_ros.ros_task`); the order, the push budget, the retries (a failed push is
planned again once, a lost pose looked for again) and the stop conditions are the core's.

Services ``~/start`` and ``~/abort`` (std_srvs/Trigger). ``/behaviour/state``
(slide_interfaces/TaskState, latched) says where the task is, with its history. Abort, or
an F/T limit during a push, stops the task: the goal in flight is cancelled, the executor
retracts the arm, and the outcome says which stage ended it and why. A node that dies
fails the call waiting on it, with a reason. With ``exit_on_done`` the node exits when the
episode ends: 0 when the object was lifted, 3 otherwise (as the ``slide`` command line).
"""

from __future__ import annotations

from collections.abc import Callable
import json
from pathlib import Path
import threading
import time
import traceback
from typing import Any

import py_trees
from py_trees.common import Status
from std_srvs.srv import Trigger

from slide_core.files import check_output, write_text_atomic
from slide_core.identification import (
    COM_DIRECTIONS,
    DEFAULT_BUDGET,
    MAX_BUDGET,
    MAX_MODELS,
    METHODS,
    check_settings,
)
from slide_core.model import load_workcell, save_belief
from slide_core.planning import planner_config
from slide_core.task import (
    CONTACT_OFFSET_MODES,
    SEED_MAX,
    Aborted,
    Outcome,
    Stage,
    Task,
    TaskFailure,
    TaskResult,
    TaskSettings,
    WorldError,
)
from slide_interfaces.msg import TaskState
from slide_ros.lifecycle import LIFECYCLE_PARAMS, NotReady, SlideNode, remote_state, run
from slide_ros.params import MAX_POSE_AGE, Param, declare
from slide_ros.qos import LATCHED
from slide_ros.ros_task import Caller, RosDecider, RosWorld

PARAMS = (
    Param('workcell_file', '', 'workcell YAML (default: config/workcell.yaml)'),
    Param('seed', 0, 'the episode seed (exploration draws, paths)', low=0, high=SEED_MAX),
    Param('exploration_pushes', 5, 'exploratory pushes', low=1, high=20),
    Param(
        'extra_exploration',
        TaskSettings.extra_exploration,
        'while the belief is too uncertain for any goal: a staging pose at the edge first, '
        'then more exploratory pushes, one at a time with a new identification (the staging '
        'pose counted as one)',
        low=0,
        high=20,
    ),
    Param(
        'interim_beliefs',
        True,
        'identify a belief after each exploratory push, for the planner to choose the next '
        'under it (its most-distinctive exploration needs one)',
    ),
    Param('push_budget', 25, 'planned pushes allowed', low=1, high=200),
    Param(
        'stall_pushes',
        TaskSettings.stall_pushes,
        'pushes in a row that bring the object no nearer the goal before the loop stops '
        'and tries the grasp',
        low=1,
        high=25,
    ),
    Param(
        'regoals',
        TaskSettings.regoals,
        'times the closed loop chooses a new goal from where the object is when no path or '
        'safe push leads to its goal from there',
        low=0,
        high=10,
    ),
    Param(
        'relearn_every',
        TaskSettings.relearn_every,
        'identify again from every push so far on which the object stayed on the table, '
        'after this many planned pushes (0: never)',
        low=0,
        high=25,
    ),
    Param(
        'contact_offset',
        TaskSettings.contact_offset,
        "the fingertip's offset from the object measured on the exploratory pushes (the "
        "camera's and the arm's calibrations apart), said, with a warning above 1 mm: auto "
        'also takes one above 1 mm, told from three push directions or more, off every pose '
        'the episode observes (the camera taken as off), with one more exploratory push '
        'into another side when the pushes cannot tell it (parallel sides alone; two '
        'directions, or near one line, and above 1 mm); check only says it',
        choices=CONTACT_OFFSET_MODES,
    ),
    Param('identification_method', 'probabilistic', 'identification method', choices=METHODS),
    Param('models', 8, 'models in the belief', low=1, high=MAX_MODELS),
    Param('budget', DEFAULT_BUDGET, 'identification budget [simulations]', low=1, high=MAX_BUDGET),
    Param(
        'pose_timeout_s',
        5.0,
        'no fresh object pose for this long: the object is lost',
        low=0.1,
        high=60.0,
    ),
    MAX_POSE_AGE,
    Param('start_on_activate', False, 'start an episode as soon as the node is active'),
    Param('exit_on_done', False, 'exit when the episode ends (0 lifted, 3 failed)'),
    Param('result_file', '', 'write the episode result as JSON here (atomically)'),
    Param('png', '', 'draw the episode to this PNG'),
    Param(
        'belief_file',
        '',
        'write the last belief of an episode here as YAML (atomically; the format of slide '
        'identify), to plan from it again offline',
    ),
    Param('tick_hz', 10.0, 'behaviour tree ticks per second', low=1.0, high=100.0),
    *LIFECYCLE_PARAMS,
)
HISTORY = 100
STOP_WAIT_S = 1.0
"""How long [s] a node being stopped mid-episode waits for the running stage to see the
abort before it saves the episode's result."""
EXIT_FAILED = 3
OUTPUTS: dict[str, tuple[str, ...]] = {
    'result_file': (),
    'belief_file': ('.yaml', '.yml'),
    'png': ('.png',),
}
"""The files an episode leaves, and the suffixes each must have."""


class StageLeaf(py_trees.behaviour.Behaviour):
    """One stage of the core's task, run in a worker thread while the tree ticks.

    RUNNING while the stage runs; SUCCESS when it returns (with ``until_true``, only when it
    returns True: a False return runs it again on the next tick); FAILURE when it raises
    the task's failure or abort, which :attr:`ended_by` keeps."""

    def __init__(
        self, name: str, stage: Any, task_stage: Callable[[], Stage], until_true: bool = False
    ) -> None:
        super().__init__(name)
        self.stage, self.until_true = stage, until_true
        self.task_stage = task_stage  # the task's stage now (where a failure happened)
        self._thread: threading.Thread | None = None
        self._result: Any = None
        self.ended_by: TaskFailure | Aborted | None = None

    def _run(self) -> None:
        try:
            self._result = self.stage()
        except (TaskFailure, Aborted) as exc:
            self.ended_by = exc
        except WorldError as exc:
            # Raised past the task's own handling: a node it needs is gone (NodeGone).
            self.ended_by = TaskFailure(Outcome.ERROR, self.task_stage(), str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must end the episode, not pass
            self.logger.error(traceback.format_exc())
            self.ended_by = TaskFailure(
                Outcome.ERROR, self.task_stage(), f'internal error: {type(exc).__name__}: {exc}'
            )

    @property
    def thread(self) -> threading.Thread | None:
        """The thread running the stage now (None before it first ran)."""
        return self._thread

    def initialise(self) -> None:
        self.ended_by, self._result = None, None
        self._thread = threading.Thread(target=self._run, name=f'stage-{self.name}', daemon=True)
        self._thread.start()

    def update(self) -> Status:
        assert self._thread is not None
        if self._thread.is_alive():
            return Status.RUNNING
        if self.ended_by is not None:
            return Status.FAILURE
        if self.until_true and self._result is False:
            self.initialise()
            return Status.RUNNING
        return Status.SUCCESS


def decision_belief_file(belief_file: str | Path, pushes: int) -> Path:
    """Where the behaviour keeps the belief identified from ``pushes`` pushes, beside the
    last one (``belief.yaml`` -> ``belief.5.yaml``): with a planned push's ``goal``,
    ``index`` and the episode's seed, ``slide plan`` makes its decision again."""
    path = Path(belief_file)
    return path.with_name(f'{path.stem}.{pushes}{path.suffix}')


class BehaviourNode(SlideNode):
    """The episode's coordinator (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('behaviour', **kwargs)
        self.p = declare(self, PARAMS)
        # Refused now, not at the first identification after the exploratory pushes, nor
        # (a file that cannot be written) as a warning when the episode has ended.
        check_settings(
            str(self.p['identification_method']),
            int(self.p['models']),
            int(self.p['budget']),
            COM_DIRECTIONS,
            {'method': 'identification_method', 'K': 'models'},
        )
        for key, suffixes in OUTPUTS.items():
            if self.p[key]:
                check_output(self.p[key], suffixes, key)
        self.cell = load_workcell(self.p['workcell_file'] or None)
        self.config = planner_config(self.cell)
        self.pub_state = self.create_publisher(TaskState, '/behaviour/state', LATCHED)
        self.create_service(Trigger, '~/start', self._start)
        self.create_service(Trigger, '~/abort', self._abort)
        self._abort_flag = threading.Event()
        self._start_pending = False  # begin an episode once the last one has stopped
        self._lock = threading.Lock()
        self.history: list[str] = []
        self.task: Task | None = None
        self.tree: py_trees.trees.BehaviourTree | None = None
        self.leaves: list[StageLeaf] = []
        self.result: TaskResult | None = None
        self._first_push = 0  # the executor's index of the episode's first push
        # The node's end (Ctrl-C, SIGTERM) stops the goal in flight as an abort does:
        # cancelled, while run() still spins the node to hear how it ended.
        caller = Caller(self, lambda: self._abort_flag.is_set() or self.stopping.is_set())
        self.world = RosWorld(
            self,
            caller,
            self.cell,
            float(self.p['pose_timeout_s']),
            lambda: float(self.get_parameter('max_pose_age_s').value),
        )
        self.decider = RosDecider(
            self,
            caller,
            self.cell,
            int(self.p['seed']),
            {
                'method': self.p['identification_method'],
                'models': self.p['models'],
                'budget': self.p['budget'],
            },
            self._progress,
        )
        self.create_timer(1.0 / float(self.p['tick_hz']), self._tick)
        self._publish('idle', 'waiting for ~/start')
        self.start_up(self.p)

    # -- lifecycle and services ---------------------------------------------------------------
    def configure(self) -> None:
        """Ready when every action the task calls has its server and perception sees the
        object (NotReady saying what is missing; the start-up retries)."""
        problem = self._not_ready()
        if problem:
            raise NotReady(problem)

    def _not_ready(self) -> str:
        """What the graph lacks for an episode ('' when nothing): a server of an action the
        task calls, a node not active, perception without the object. Asked at start-up
        and at each ``~/start``: a start with the identification node gone pushed the
        object once before the episode failed on it."""
        missing = [
            name
            for name, client in (
                ('executor push', self.world.push_client),
                ('executor grasp', self.world.grasp_client),
                ('planner', self.decider.step_client),
                ('identification', self.decider.identify_client),
            )
            if not client.wait_for_server(timeout_sec=0.5)
        ]
        if missing:
            return f'waiting for {", ".join(missing)}'
        inactive = [
            name
            for name in ('/executor', '/planner', '/identification')
            if remote_state(self, name) != 'active'
        ]
        if inactive:
            return f'waiting for {", ".join(inactive)} to be active'
        if not self.world.ready():
            return 'waiting for perception to acquire the object'
        return ''

    def activate(self) -> None:
        if not self.p['start_on_activate']:
            return
        if self._episode_running():
            # Deactivated a moment ago: the last episode is still stopping. Begun now, it
            # would clear the abort its push is still to see, and both would run at once
            # (the old push completed beside the new one's).
            self._start_pending = True
            self.get_logger().info('the last episode is still stopping: it begins after it')
            return
        self._begin()

    def deactivate(self) -> None:
        self._start_pending = False
        self._abort_flag.set()

    def idle(self) -> bool:
        """No stage of an episode is running (run() spins the node a while for it to stop
        once the node is ending)."""
        return not any(leaf.thread is not None and leaf.thread.is_alive() for leaf in self.leaves)

    def _episode_running(self) -> bool:
        return self.tree is not None and self.result is None

    def _start(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if not self.active:
            res.success, res.message = False, 'the behaviour node is not active'
        elif self._episode_running() or self._start_pending:
            res.success, res.message = False, 'an episode is running'
        elif problem := self._not_ready():
            res.success, res.message = False, f'not started: {problem}'
        else:
            self._begin()
            res.success, res.message = True, 'episode started'
        return res

    def _abort(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if self.tree is None or self.result is not None:
            res.success, res.message = False, 'no episode is running'
            return res
        self._abort_flag.set()
        res.success, res.message = True, 'aborting: the goal in flight is cancelled'
        return res

    # -- the episode --------------------------------------------------------------------------
    def _begin(self) -> None:
        self._abort_flag.clear()
        self._first_push = len(self.world.records)
        self.result, self.history = None, []
        settings = TaskSettings(
            exploration_pushes=int(self.p['exploration_pushes']),
            extra_exploration=int(self.p['extra_exploration']),
            push_budget=int(self.p['push_budget']),
            stall_pushes=int(self.p['stall_pushes']),
            regoals=int(self.p['regoals']),
            relearn_every=int(self.p['relearn_every']),
            interim_beliefs=bool(self.p['interim_beliefs']),
            fingertip_radius=self.cell.fingertip.radius,
            contact_offset=str(self.p['contact_offset']),
        )
        task = Task(
            self.world,
            self.decider,
            settings,
            events=self._event,
            should_stop=lambda: self._abort_flag.is_set() or self.stopping.is_set(),
        )

        def stage() -> Stage:
            return task.state.stage

        self.leaves = [
            StageLeaf('perceive', task.perceive, stage),
            StageLeaf('explore once', task.explore_once, stage),
            StageLeaf('tell offset', task.tell_offset, stage),
            StageLeaf('identify', task.identify, stage),
            StageLeaf('goal', task.choose_goal, stage),
            StageLeaf('closed loop', task.closed_loop_step, stage, until_true=True),
            StageLeaf('grasp', task.final_grasp, stage),
        ]
        perceive, explore, tell_offset, identify, goal, loop, grasp = self.leaves
        root = py_trees.composites.Sequence(
            'pregrasp',
            memory=True,
            children=[
                perceive,
                py_trees.decorators.Repeat('explore', explore, settings.exploration_pushes),
                tell_offset,
                identify,
                goal,
                loop,
                grasp,
            ],
        )
        self.task = task
        self.tree = py_trees.trees.BehaviourTree(root)
        self._event(Stage.PERCEIVE, 'episode started')

    def _tick(self) -> None:
        if self._start_pending and not self._episode_running():
            self._start_pending = False
            if self.active:
                self._begin()
            return
        if self.tree is None or self.result is not None or self.task is None:
            return
        self.tree.tick()
        status = self.tree.root.status
        if status == Status.RUNNING:
            return
        ended_by = next((leaf.ended_by for leaf in self.leaves if leaf.ended_by), None)
        if status == Status.FAILURE and ended_by is None:
            ended_by = Aborted('the behaviour tree failed without a reason')
        self.result = self.task.result(ended_by)
        self._finish(self.result)

    def _finish(self, result: TaskResult) -> None:
        status = 'succeeded' if result.success else result.outcome.value
        line = f'[{result.stage.value}] {status}: {result.reason or "the object was lifted"}'
        with self._lock:  # (the history ended at the last event, without how it ended)
            self.history = (self.history + [line])[-HISTORY:]
        self._publish(status, result.reason or 'the object was lifted')
        self.get_logger().info(
            f'episode {status} at {result.stage.value}: {result.reason or "the object was lifted"}'
        )
        self.save(result)
        if self.p['exit_on_done']:
            self.exit_code = 0 if result.success else EXIT_FAILED  # ends the node's run

    def destroy_node(self) -> None:
        self._save_unfinished()
        super().destroy_node()

    def _save_unfinished(self) -> None:
        """An episode the node's end stops (Ctrl-C, SIGTERM, the demo's timeout) keeps
        what it had: its result, aborted, and its last belief (they were written only when
        the tree finished, so an interrupted episode left no file)."""
        if self.task is None or self.result is not None:
            return
        self._abort_flag.set()
        # The stage's thread sees the abort within milliseconds (a goal in flight waits for
        # its cancel): its result is read once it has stopped updating the task's state,
        # or after STOP_WAIT_S at most.
        end = time.monotonic() + STOP_WAIT_S
        for leaf in self.leaves:
            thread = leaf.thread
            if thread is not None:
                thread.join(max(0.0, end - time.monotonic()))
        try:
            result = self.task.result(Aborted('the behaviour node was stopped mid-episode'))
            self.result = result
            self.save(result)
        except Exception as exc:  # noqa: BLE001 - the node is going: say it and go on
            self.get_logger().warning(f'the stopped episode left no files: {exc}')

    def save(self, result: TaskResult) -> None:
        """Write what the episode left to the files the parameters name: the result
        (``result_file``), the last belief (``belief_file``) and beside it every belief a
        planned push was decided under (:func:`decision_belief_file`; the result's planned
        pushes name theirs by ``belief_pushes``), and the picture (``png``). A file that
        cannot be written is a warning; the episode's outcome stands."""
        status = 'succeeded' if result.success else result.outcome.value
        if self.p['result_file']:
            try:
                # The executor numbers pushes over the node's life (a bag of several
                # episodes keeps one index per push): where this episode's began.
                summary = dict(self.summary(result), first_push_index=self._first_push)
                write_text_atomic(self.p['result_file'], json.dumps(summary) + '\n')
            except OSError as exc:
                self.get_logger().warning(f'no result file: {exc}')
        provenance = {
            'source': 'behaviour node episode',
            'outcome': result.outcome.value,
            'exploration_pushes': result.exploration_pushes,
            'pushes': result.pushes,
        }
        last = self.p['belief_file']
        beliefs = [(last, result.state.belief)] if last else []
        if last:
            beliefs += [
                (decision_belief_file(last, n), b) for n, b in result.state.beliefs.items()
            ]
        for path, belief in beliefs:
            if belief is None:
                continue
            try:
                save_belief(belief, path, provenance=provenance)
            except OSError as exc:
                self.get_logger().warning(f'no belief file {path}: {exc}')
        if self.p['png'] and result.state.belief is not None and result.state.grid is not None:
            from slide_core.io.plot import episode_figure

            try:
                episode_figure(
                    self.p['png'],
                    result.state.grid,
                    result.state.belief,
                    result.state.trace,
                    self.config,
                    f'{status}: {result.pushes} pushes',
                )
            except (OSError, ValueError, KeyError) as exc:
                self.get_logger().warning(f'no picture: {exc}')

    @staticmethod
    def summary(result: TaskResult) -> dict[str, Any]:
        st = result.state
        return {
            'success': result.success,
            'outcome': result.outcome.value,
            'stage': result.stage.value,
            'reason': result.reason,
            'exploration_pushes': result.exploration_pushes,
            'pushes': result.pushes,
            'regoals': st.regoals,
            'relearned': st.relearned,
            'staged': st.staged,
            'reached': result.reached,
            'stages': {k: round(v, 3) for k, v in result.stage_s.items()},
            'total_s': round(result.total_s, 3),
            'goal': None if st.goal is None else [float(v) for v in st.goal.X_WO],
            'X_final': st.trace.get('X_final'),
            'explored': [p.to_dict() for p in st.explored],
            # Each planned push as it was decided (the pose it started from, the waypoint it
            # aimed at): with the belief file, enough to plan any of them again offline.
            'planned': [
                {k: v for k, v in push.items() if k != 'path'} for push in st.trace['pushes']
            ],
            'simulations': st.simulations,
        }

    # -- state --------------------------------------------------------------------------------
    def _event(self, stage: Stage, message: str) -> None:
        line = f'[{stage.value}] {message}'
        with self._lock:
            self.history = (self.history + [line])[-HISTORY:]
        self.get_logger().info(line)
        self._publish('running', message)

    def _progress(self, message: str) -> None:
        self._publish('running', message, history=False)

    def _publish(self, status: str, message: str, history: bool = True) -> None:
        msg = TaskState()
        msg.header.stamp = self.get_clock().now().to_msg()
        task = self.task
        msg.stage = task.state.stage.value if task is not None else 'idle'
        msg.status, msg.message = status, message
        if task is not None:
            msg.exploration_pushes = len(task.state.explored)
            msg.pushes = task.state.planned
            seconds = task.stage_seconds()  # the stage running now counts too
            msg.stage_names = list(seconds)
            msg.stage_seconds = [float(v) for v in seconds.values()]
        with self._lock:
            msg.history = list(self.history)
        self.pub_state.publish(msg)


def main() -> int:
    return run(BehaviourNode, 'behaviour_node')


if __name__ == '__main__':
    raise SystemExit(main())
