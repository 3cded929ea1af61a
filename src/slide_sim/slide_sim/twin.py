"""The twin: a MuJoCo workcell with one object, a position-driven fingertip and a gripper.

It is hardware and nothing more. The fingertip follows Cartesian waypoints at commanded
speeds as a position-controlled arm would (stiff servo, so it lags a little under load);
which waypoints make a push is decided above it (:func:`slide_core.model.push_waypoints`).
The 6-axis force/torque sensor sits at the fingertip's mount (site ``ft``); it reads the force the
mount applies to the fingertip, which is the force the fingertip applies to the object
(the fingertip's own weight is compensated). The table carries the object with MuJoCo's
compliant normal contact, and its friction is Coulomb's law applied by the twin
(:mod:`slide_sim.friction`: MuJoCo's own sliding friction chattered and moved the load onto
grippy cells). Ground truth: the object's pose, whether it fell, and its true maps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import math

from ati_netft.filters import LimitMonitor
import mujoco
import numpy as np

from slide_core.errors import SlideError, SlideInputError
from slide_core.geometry import FloatArray
from slide_core.model import (
    LIFT,
    ObjectSpec,
    Primitive,
    Waypoint,
    Workcell,
    over_obstacles,
    push_waypoints,
    retract_waypoints,
)
from slide_core.planning import Grasp, grasp_waypoints, rectangles_overlap_box
from slide_sim.friction import TableFriction
from slide_sim.scene import (
    FINGER_KP,
    PAD_THICKNESS,
    carriage_range,
    default_pose,
    workcell_xml,
)

MIN_SPEED = 1e-4
"""Slowest a tool moves [m/s] (0.1 mm/s: slower is no motion an arm is asked for)."""
TIPPED = math.radians(20)
"""An object not held that leans more than this [rad] has tipped over (off the edge)."""


class ForceLimitExceeded(SlideError):  # noqa: N818 - a condition of the push, as the driver's
    """A push's force went over its limit: the fingertip stopped, pulled back and lifted."""

    def __init__(self, force: float, limit: float) -> None:
        super().__init__(
            f'the force reached {force:.1f} N, over the {limit:g} N limit: stopped and retracted'
        )
        self.force = force
        self.limit = limit


@dataclass
class PushRecording:
    """What one push produced, sampled every physics step.

    Attributes:
        t: (N,) seconds since the twin started.
        X_WO: (N, 3) object pose.
        p_WF: (N, 3) fingertip centre (its axis at the push height).
        wrench_W: (N, 6) F/T reading: force [N] and torque [N m] the pusher applied, world
            frame axes (the sensor does not rotate).
        primitive: the push.
        start, end: indices in the arrays where the pusher's straight stroke began and ended.
        fell: whether the object had fallen off the table by the end of the push.
        q_WO: (N, 4) the object's whole orientation (w, x, y, z): X_WO's yaw, and how far it
            leant when it tipped over (a camera tracker that sees it lean would say so).
    """

    t: FloatArray
    X_WO: FloatArray
    p_WF: FloatArray
    wrench_W: FloatArray
    primitive: Primitive
    start: int
    end: int
    fell: bool = False
    q_WO: FloatArray = field(default_factory=lambda: np.zeros((0, 4)))


class Twin:
    """One object on the table of the workcell.

    Args:
        spec: the object.
        cell: the workcell (``config/workcell.yaml``).
        X_WO: initial object pose (x, y, yaw) in the table frame; inside the table by default.
    """

    def __init__(
        self,
        spec: ObjectSpec,
        cell: Workcell,
        X_WO: tuple[float, float, float] | None = None,
    ) -> None:
        self.spec = spec
        self.cell = cell
        pose = X_WO or default_pose(cell)
        if not all(math.isfinite(v) for v in pose):
            raise SlideInputError(f'initial pose must be finite, got {pose}')
        self.model = mujoco.MjModel.from_xml_string(workcell_xml(spec, pose, self.cell))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self._obj = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'object')
        self._tip = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'fingertip')
        self._tip_geom = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, 'fingertip')
        self._q = [
            m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)]
            for n in ('pusher_x', 'pusher_y', 'pusher_z')
        ]
        self._force = m.sensor_adr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, 'ft_force')]
        self._torque = m.sensor_adr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, 'ft_torque')]
        # The carriage's joints are offsets of the fingertip's centre from (0, 0, tip_z).
        self.tip_z = self.cell.fingertip.height
        self._tip_weight = float(m.body_mass[self._tip]) * -float(m.opt.gravity[2])
        # Park the pusher off the table, lifted.
        park = np.array([-0.25, 0.0, LIFT])
        for q, v in zip(self._q, park, strict=True):
            self.data.qpos[q] = v
        self.data.ctrl[:3] = park
        self.data.ctrl[3:5] = self.cell.gripper.max_opening / 2  # gripper open
        self._hand = m.body_mocapid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'hand')]
        self._palm = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'palm')
        self._finger_q = [
            m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)]
            for n in ('finger_top', 'finger_bottom')
        ]
        self._paths: dict[str, _Path | None] = {'fingertip': None, 'gripper': None}
        self.paths_started = {'fingertip': 0, 'gripper': 0}
        """How many paths each tool was given (a caller sees its own begin, however short)."""
        self._fingers: tuple[FloatArray, float, int, int] | None = None
        first = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, 'cell0')
        self._friction = TableFriction(
            m,
            self._obj,
            first + np.arange(spec.grid.n),
            spec.friction,
            [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in ('table', 'floor')],
        )
        mujoco.mj_forward(self.model, self.data)
        self.settle(0.2)

    # -- state ------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        return float(self.data.time)

    def object_pose(self) -> FloatArray:
        """(x, y, yaw) of the object frame in the table frame."""
        pos = self.data.xpos[self._obj]
        R = self.data.xmat[self._obj].reshape(3, 3)
        return np.array([pos[0], pos[1], math.atan2(R[1, 0], R[0, 0])])

    def object_orientation(self) -> FloatArray:
        """(w, x, y, z) unit quaternion of the object frame in the table frame."""
        return np.array(self.data.xquat[self._obj], dtype=float)

    def object_height(self) -> float:
        return float(self.data.xpos[self._obj][2])

    def tilt(self) -> float:
        """Angle [rad] between the object's z axis and the vertical."""
        R = self.data.xmat[self._obj].reshape(3, 3)
        return float(math.acos(max(-1.0, min(1.0, R[2, 2]))))

    def fell(self) -> bool:
        """True once the object has dropped below the table top, or tipped over while the
        gripper does not hold it: tilted in the grip is held, not fallen (how far it turned
        there is :meth:`tilt`)."""
        if self.object_height() < -0.02:
            return True
        return self.tilt() > TIPPED and not self.holding()

    def fingertip(self) -> FloatArray:
        """Fingertip centre (3,) [m] (on its axis, at mid-length)."""
        return np.array(self.data.xpos[self._tip])

    def gripper_pose(self) -> FloatArray:
        """The gripper's pads' front end E (x, y, z) [m] and its approach yaw [rad] (4,):
        where the hand is, which follows its set point through a stiff weld (the arm)."""
        pos = self.data.xpos[self._palm]
        R = self.data.xmat[self._palm].reshape(3, 3)
        yaw = math.atan2(float(R[1, 0]), float(R[0, 0]))
        d = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        return np.array([*(pos + d * self.cell.gripper.finger_depth), yaw])

    def wrench(self) -> FloatArray:
        """F/T reading (6,): force [N] and torque [N m] the mount applies to the fingertip,
        the fingertip's weight removed (as a tared, gravity-compensated tool), in the sensor
        frame, whose axes are the world's (the pusher only translates). While the fingertip
        moves steadily this is the force it applies to the object."""
        d = self.data.sensordata
        w = np.concatenate((d[self._force : self._force + 3], d[self._torque : self._torque + 3]))
        w[2] -= self._tip_weight
        return w

    def contact_force(self) -> FloatArray:
        """Sum (3,) of the contact forces the fingertip exerts on the object, world frame."""
        total = np.zeros(3)
        f6 = np.zeros(6)
        for i in range(self.data.ncon):
            c = self.data.contact[i]
            g1, g2 = c.geom1, c.geom2
            if self._tip_geom not in (g1, g2):
                continue
            other = g2 if g1 == self._tip_geom else g1
            if self.model.geom_bodyid[other] != self._obj:
                continue
            mujoco.mj_contactForce(self.model, self.data, i, f6)
            # f6 is in the contact frame (normal first) and acts on geom2 from geom1.
            f_world = c.frame.reshape(3, 3).T @ f6[:3]
            total += f_world if g1 == self._tip_geom else -f_world
        return total

    def table_loads(self) -> FloatArray:
        """Normal forces (n,) [N] that what carries the object (the table; the floor once it
        fell) exerts on each of its cells in the last step (the sum over each cell geom's
        contacts; for evaluation, like :meth:`contact_force`). Steady while the object
        slides: friction is the twin's own Coulomb law (:mod:`slide_sim.friction`)."""
        return self._friction.normal_forces(self.data)

    def ground_truth(self) -> dict[str, object]:
        """True maps and state, for evaluation only."""
        return {
            'name': self.spec.name,
            'mass': self.spec.mass.tolist(),
            'friction': self.spec.friction.tolist(),
            'X_WO': self.object_pose().tolist(),
            'fell': self.fell(),
            'tilt': self.tilt(),
        }

    # -- motion -----------------------------------------------------------------------------
    # -- motion: tools follow waypoints, one physics step at a time ------------------------
    def start_path(self, tool: str, waypoints: list[Waypoint]) -> None:
        """Start moving ``tool`` ('fingertip' or 'gripper': the pads' front end E) through
        ``waypoints`` (table frame), replacing any path it was on. :meth:`step` advances it."""
        self.check_path(tool, waypoints)
        path = _Path(list(waypoints))
        self._paths[tool] = path
        self._begin(tool, path)
        self.paths_started[tool] += 1

    def check_path(self, tool: str, waypoints: list[Waypoint]) -> None:
        """SlideInputError naming the first waypoint ``tool`` cannot go to, as an arm's
        controller would refuse it: not finite, slower than MIN_SPEED (a speed of 5e-324
        overflowed the step count and the set point jumped), the fingertip out of the
        carriage's reach or its bottom under the table top (a goal at x = 3.5 m was
        clamped to 2 m and SUCCEEDED), or for the gripper its hand out of the arm's reach or
        its open pads under the table top where they would be over it."""
        if tool not in self._paths:
            raise SlideInputError(f"unknown tool {tool!r}: 'fingertip' or 'gripper'")
        t = self.cell.table
        bottom = self.cell.fingertip.length / 2
        for wp in waypoints:
            p = np.asarray(wp.p_W, dtype=float)
            if p.shape != (3,) or not np.isfinite(p).all() or not wp.speed >= MIN_SPEED:
                raise SlideInputError(
                    f'waypoint {wp.phase}: bad position {p} or speed {wp.speed} (at least '
                    f'{MIN_SPEED} m/s)'
                )
            if not (math.isfinite(wp.dwell_s) and wp.dwell_s >= 0 and math.isfinite(wp.yaw)):
                raise SlideInputError(f'waypoint {wp.phase}: bad dwell or yaw')
            lo, hi = carriage_range(t)
            carriage = p - np.array([0.0, 0.0, self.tip_z if tool == 'fingertip' else 0.0])
            if np.any(carriage < lo) or np.any(carriage > hi):
                raise SlideInputError(
                    f'waypoint {wp.phase}: {np.round(p, 3).tolist()} is out of the '
                    f"{tool}'s reach (the arm's carriage moves {lo} to {hi} m)"
                )
            if tool == 'fingertip':
                over = 0.0 <= p[0] <= t.depth and abs(p[1]) <= t.width / 2
                under = bottom - p[2]
            else:
                # The pads reach finger_depth behind their front end, finger_width across,
                # and the lower one, open wide, PAD_THICKNESS under half the opening: a hand
                # sent 10 cm into the table went through it and shoved the object.
                g = self.cell.gripper
                d = np.array([math.cos(wp.yaw), math.sin(wp.yaw)])
                over = rectangles_overlap_box(
                    p[:2] - d * g.finger_depth / 2,  # p is the pads' front end E
                    wp.yaw,
                    (g.finger_depth / 2, g.finger_width / 2),
                    (t.depth / 2, 0.0),
                    (t.depth / 2, t.width / 2),
                )
                under = g.max_opening / 2 + PAD_THICKNESS - p[2]
            if over and under > 1e-3:
                raise SlideInputError(
                    f'waypoint {wp.phase}: the {tool} would be {under * 1000:.1f} mm into '
                    'the table'
                )

    def stop(self, tool: str) -> None:
        """Stop ``tool`` where its set point is now (a cancelled motion)."""
        self._paths[tool] = None

    def moving(self, tool: str) -> bool:
        """Whether ``tool``'s set point is still on its path."""
        return self._paths[tool] is not None

    def tool_lag(self, tool: str) -> float:
        """Distance [m] from ``tool`` to its set point: the fingertip's carriage follows it
        through position controllers, behind it while moving and short of it when something
        holds it back; the gripper's hand through a stiff weld (a fraction of a
        millimetre)."""
        if tool != 'fingertip':
            return float(np.linalg.norm(self.data.xpos[self._palm] - self._setpoint(tool)))
        p_set = self._setpoint('fingertip') + np.array([0.0, 0.0, self.tip_z])
        return float(np.linalg.norm(self.fingertip() - p_set))

    def waypoint(self, tool: str) -> int:
        """Index of the waypoint ``tool`` is moving to or resting at (-1 when idle)."""
        path = self._paths[tool]
        return -1 if path is None else path.index

    def check_gripper(self, width: float, max_effort: float = 0.0) -> None:
        """SlideInputError when the gripper cannot be asked for ``width`` [m] apart with
        ``max_effort`` [N], as a real gripper refuses it: not finite, negative, or wider
        than it opens (clamped to the opening, it SUCCEEDED)."""
        if not (math.isfinite(width) and width >= 0 and math.isfinite(max_effort)):
            raise SlideInputError(f'width must be >= 0 and finite, got {width}')
        opening = self.cell.gripper.max_opening
        if width > opening + 1e-6:
            raise SlideInputError(
                f'width {width:g} m is beyond the gripper opening {opening:g} m (workcell '
                'gripper.max_opening)'
            )

    def command_gripper(self, width: float, max_effort: float = 0.0, ramp_s: float = 0.5) -> None:
        """Move the fingers to ``width`` [m] apart over ``ramp_s`` seconds; with
        ``max_effort`` [N] > 0 the set point lies that force inside ``width`` (the object's
        thickness), so the fingers squeeze it with that force, as a parallel gripper's
        grasp(width, force) does (a set point far inside drove the pads through light
        objects once lifted)."""
        self.check_gripper(width, max_effort)
        target = width / 2
        if max_effort > 0:
            force = min(max_effort, self.cell.gripper.force)
            target = max(0.0, target - force / FINGER_KP)
            self.model.actuator_forcerange[3:5] = (-force, force)
        steps = max(1, int(ramp_s / self.model.opt.timestep))
        self._fingers = (np.array(self.data.ctrl[3:5], dtype=float), target, steps, 0)

    def hold_fingers(self) -> None:
        """Stop the fingers where they are (a cancelled gripper command: they had closed on
        to the end)."""
        self._fingers = None
        self.data.ctrl[3:5] = [self.data.qpos[q] for q in self._finger_q]

    def gripper_width(self) -> float:
        """Opening between the pads [m]."""
        return float(sum(self.data.qpos[q] for q in self._finger_q))

    def holding(self) -> bool:
        """Both fingers touch the object."""
        return self._touches('finger_top') and self._touches('finger_bottom')

    def step(self) -> list[tuple[str, int, str]]:
        """One physics step: advance every tool's path and the fingers, then simulate.

        Returns events (tool, waypoint index, 'reached' | 'left'): a waypoint's straight
        move ended this step, or its dwell did (the path moved on or finished)."""
        events: list[tuple[str, int, str]] = []
        for tool, path in self._paths.items():
            if path is None:
                continue
            if path.k < path.steps:
                path.k += 1
                self._set(tool, path.start + (path.target - path.start) * (path.k / path.steps))
                if path.k == path.steps:
                    events.append((tool, path.index, 'reached'))
            elif path.dwell > 0:
                path.dwell -= 1
            if path.k == path.steps and path.dwell == 0:
                events.append((tool, path.index, 'left'))
                path.index += 1
                if path.index < len(path.waypoints):
                    self._begin(tool, path)
                else:
                    self._paths[tool] = None
        if self._fingers is not None:
            start, target, steps, k = self._fingers
            k += 1
            self.data.ctrl[3:5] = start + (target - start) * (k / steps)
            self._fingers = None if k >= steps else (start, target, steps, k)
        self._friction.apply(self.data)
        mujoco.mj_step(self.model, self.data)
        self._friction.stepped(self.data)
        return events

    def _set(self, tool: str, p: FloatArray) -> None:
        if tool == 'fingertip':
            self.data.ctrl[:3] = p
        else:
            self.data.mocap_pos[self._hand] = p

    def _setpoint(self, tool: str) -> FloatArray:
        if tool == 'fingertip':
            return np.array(self.data.ctrl[:3], dtype=float)
        return np.array(self.data.mocap_pos[self._hand], dtype=float)

    def _begin(self, tool: str, path: _Path) -> None:
        """Start the straight move to the path's current waypoint from the set point."""
        wp = path.waypoints[path.index]
        p = np.asarray(wp.p_W, dtype=float)
        if tool == 'fingertip':
            # The carriage's joints are offsets of the fingertip's centre from tip_z.
            target = np.array([p[0], p[1], p[2] - self.tip_z])
        else:
            d = np.array([math.cos(wp.yaw), math.sin(wp.yaw), 0.0])
            target = p - d * self.cell.gripper.finger_depth  # the hand's origin behind E
            self.data.mocap_quat[self._hand] = _yaw_quat(wp.yaw)
        path.start = self._setpoint(tool)
        path.target = target
        h = self.model.opt.timestep
        path.steps = max(
            1, int(math.ceil(float(np.linalg.norm(target - path.start)) / wp.speed / h))
        )
        path.k = 0
        path.dwell = int(round(wp.dwell_s / h))

    def settle(self, seconds: float) -> None:
        for _ in range(int(round(seconds / self.model.opt.timestep))):
            self.step()

    def _sample(self) -> tuple:
        return (
            self.time,
            self.object_pose(),
            self.fingertip(),
            self.wrench(),
            self.object_orientation(),
        )

    def follow(
        self,
        waypoints: list[Waypoint],
        record: str = 'stroke',
        on_step: Callable[[], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> tuple[list[tuple], int, int]:
        """Drive the fingertip through ``waypoints`` and wait until it is there, or until
        ``should_stop()``, asked after every step, says to stop it where it is.

        Samples (time, object pose, fingertip, wrench, object orientation) are logged every
        physics step from the start of the waypoint whose phase is ``record`` to the end of
        the next one; returns them with the indices where that waypoint's motion began and ended.
        ``on_step`` is called after every logged step (to render camera frames, say)."""
        phases = [wp.phase for wp in waypoints]
        r = phases.index(record) if record in phases else -1
        log: list[tuple] = []
        start = end = -1
        logging = False
        self.start_path('fingertip', waypoints)
        while self.moving('fingertip'):
            if start < 0 and self.waypoint('fingertip') == r:
                logging, start = True, len(log)
                log.append(self._sample())
            events = self.step()
            if logging:
                log.append(self._sample())
                if on_step is not None:
                    on_step()
            if ('fingertip', r, 'reached') in events:
                end = len(log) - 1
            if ('fingertip', r + 1, 'left') in events:
                logging = False
            if should_stop is not None and should_stop():
                self.stop('fingertip')
        return log, start, end

    def push(
        self,
        primitive: Primitive,
        X_WO: FloatArray | None = None,
        on_step: Callable[[], None] | None = None,
        force_limit: float = 0.0,
    ) -> PushRecording:
        """One push, resolved at X_WO (the object's true pose by default) into the
        workcell's fingertip waypoints. The log runs from the stroke's start through the
        settle pause and the retract.

        ``force_limit`` [N] (0: none): when the F/T reading's force goes over it, the
        fingertip stops, pulls back along the stroke and lifts, as the graph's executor does
        on its F/T driver's limit (the same monitor), and ForceLimitExceeded is raised."""
        X = self.object_pose() if X_WO is None else np.asarray(X_WO, dtype=float)
        waypoints = over_obstacles(
            self.fingertip(),
            push_waypoints(primitive, X, self.cell.fingertip),
            self.cell.obstacles,
            self.cell.fingertip.radius,
        )
        monitor = LimitMonitor(force_limit, 0.0)
        over: list[float] = []

        def too_much() -> bool:
            w = self.wrench()
            if monitor.exceeded(w.tolist()):
                over.append(float(np.linalg.norm(w[:3])))
                return True
            return False

        # (asked every physics step: not at all without a limit)
        log, i0, i1 = self.follow(
            waypoints, 'stroke', on_step, too_much if monitor.active else None
        )
        if over:
            back = primitive.back_W(X) if i0 >= 0 else None
            self.follow(retract_waypoints(self.fingertip(), 0.0, back), record='')
            raise ForceLimitExceeded(over[0], force_limit)
        t, X_WO_, p, w, q = (np.array(v) for v in zip(*log, strict=True))
        return PushRecording(t, X_WO_, p, w, primitive, i0, i1, self.fell(), q)

    def move_gripper(self, waypoints: list[Waypoint]) -> None:
        """Drive the gripper through ``waypoints`` and wait until it is there."""
        self.start_path('gripper', waypoints)
        while self.moving('gripper'):
            self.step()

    def grasp(self, grasp: Grasp, lift: float = 0.1) -> GraspResult:
        """Grasp an overhang with the parallel gripper and lift it (the motion of
        :func:`slide_core.planning.grasp_waypoints`): open, come down in front of the
        overhang, reach in level with the held part's mid-height, close on it with the
        gripper's force, lift and hold half a second. Success: both fingers still hold the
        object, it no longer touches the table and it rose with the hand."""
        approach, up = grasp_waypoints(grasp, lift, self.cell.gripper)
        z0 = self.object_height()
        self.command_gripper(self.cell.gripper.max_opening, ramp_s=0.0)
        self.move_gripper(approach)
        self.command_gripper(2 * grasp.z, self.cell.gripper.force)
        self.settle(0.5 + 0.3)
        self.move_gripper(up)
        lifted = self.object_height() - z0
        off_table = not self._touches('table')
        return GraspResult(
            success=self.holding() and off_table and lifted > 0.5 * lift,
            lifted_m=float(lifted),
            fell=lifted < -0.02,
            tilt=self.tilt(),
        )

    def _touches(self, geom: str) -> bool:
        """Whether the object is in contact with the named geom now."""
        g = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, geom)
        body = self.model.geom_bodyid
        for c in self.data.contact[: self.data.ncon]:
            pair = (int(c.geom1), int(c.geom2))
            if g in pair and self._obj in (body[pair[0]], body[pair[1]]):
                return True
        return False


@dataclass
class _Path:
    """A tool's path: its waypoints, the one being approached (index), the straight move to
    it (start, target set points, steps, k done) and the dwell steps left after it."""

    waypoints: list[Waypoint]
    index: int = 0
    start: FloatArray = field(default_factory=lambda: np.zeros(3))
    target: FloatArray = field(default_factory=lambda: np.zeros(3))
    steps: int = 1
    k: int = 0
    dwell: int = 0


@dataclass
class GraspResult:
    """Outcome of a grasp. success: held by both fingers, clear of the table and carried
    up at least half the lift; lifted_m: how far the object's origin rose; fell: it
    dropped; tilt: its angle to the vertical at the end [rad] (it may pivot in the grip)."""

    success: bool
    lifted_m: float
    fell: bool
    tilt: float = 0.0


def _yaw_quat(yaw: float) -> FloatArray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
