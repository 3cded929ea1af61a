"""The twin: a MuJoCo workcell with one object, a position-driven fingertip and a gripper.

It is hardware and nothing more. The fingertip follows Cartesian waypoints at commanded
speeds as a position-controlled arm would (stiff servo, so it lags a little under load);
which waypoints make a push is decided above it (:func:`slide_core.model.push_waypoints`).
The 6-axis force/torque sensor sits at the fingertip's mount (site ``ft``); it reads the force the
mount applies to the fingertip, which is the force the fingertip applies to the object
(the fingertip's own weight is compensated). Ground truth: the object's pose, whether it
fell, and its true maps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math

import mujoco
import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray
from slide_core.model import LIFT, ObjectSpec, Primitive, Waypoint, Workcell, push_waypoints
from slide_sim.scene import FINGER_KP, workcell_xml


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
    """

    t: FloatArray
    X_WO: FloatArray
    p_WF: FloatArray
    wrench_W: FloatArray
    primitive: Primitive
    start: int
    end: int
    fell: bool = False


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
        pose = X_WO or (min(0.35, cell.table.depth / 2), 0.0, 0.0)
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

    def object_height(self) -> float:
        return float(self.data.xpos[self._obj][2])

    def tilt(self) -> float:
        """Angle [rad] between the object's z axis and the vertical."""
        R = self.data.xmat[self._obj].reshape(3, 3)
        return float(math.acos(max(-1.0, min(1.0, R[2, 2]))))

    def fell(self) -> bool:
        """True once the object has dropped below the table top or tipped over."""
        return self.object_height() < -0.02 or self.tilt() > math.radians(20)

    def fingertip(self) -> FloatArray:
        """Fingertip centre (3,) [m] (on its axis, at mid-length)."""
        return np.array(self.data.xpos[self._tip])

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

    def ground_truth(self) -> dict[str, object]:
        """True maps and state, for evaluation only."""
        return {
            'name': self.spec.name,
            'mass': self.spec.mass.tolist(),
            'friction': self.spec.friction.tolist(),
            'X_WO': self.object_pose().tolist(),
            'fell': self.fell(),
        }

    # -- motion -----------------------------------------------------------------------------
    def settle(self, seconds: float) -> None:
        for _ in range(int(round(seconds / self.model.opt.timestep))):
            mujoco.mj_step(self.model, self.data)

    def _move(
        self,
        target: FloatArray,
        speed: float,
        log: list[tuple] | None = None,
        on_step: Callable[[], None] | None = None,
    ) -> None:
        """Drive the pusher's set point in a straight line to ``target`` at ``speed``."""
        start = np.array(self.data.ctrl[:3], dtype=float)
        distance = float(np.linalg.norm(target - start))
        h = self.model.opt.timestep
        steps = max(1, int(math.ceil(distance / speed / h)))
        for k in range(1, steps + 1):
            self.data.ctrl[:3] = start + (target - start) * (k / steps)
            mujoco.mj_step(self.model, self.data)
            if log is not None:
                log.append(self._sample())
            if on_step is not None:
                on_step()

    def _sample(self) -> tuple:
        return (self.time, self.object_pose(), self.fingertip(), self.wrench())

    def follow(
        self,
        waypoints: list[Waypoint],
        record: str = 'stroke',
        on_step: Callable[[], None] | None = None,
    ) -> tuple[list[tuple], int, int]:
        """Drive the fingertip's set point through ``waypoints`` (centres in the table
        frame), each in a straight line at its speed, then held for its dwell.

        Samples (time, object pose, fingertip, wrench) are logged every physics step from
        the start of the waypoint whose phase is ``record`` to the end of the next one;
        returns them with the indices where that waypoint's motion began and ended.
        ``on_step`` is called after every logged step (to render camera frames, say)."""
        log: list[tuple] = []
        start = end = -1
        logging = False
        for wp in waypoints:
            p = np.asarray(wp.p_WF, dtype=float)
            if p.shape != (3,) or not np.isfinite(p).all() or not wp.speed > 0:
                raise SlideInputError(f'waypoint {wp.phase}: bad position {p} or speed')
            target = np.array([p[0], p[1], p[2] - self.tip_z])
            if wp.phase == record:
                logging = True
                start = len(log)
                log.append(self._sample())
            self._move(target, wp.speed, log if logging else None, on_step if logging else None)
            if wp.phase == record:
                end = len(log) - 1
            for _ in range(int(round(wp.dwell_s / self.model.opt.timestep))):
                mujoco.mj_step(self.model, self.data)
                if logging:
                    log.append(self._sample())
                    if on_step is not None:
                        on_step()
            if logging and wp.phase != record:
                logging = False
        return log, start, end

    def push(
        self,
        primitive: Primitive,
        X_WO: FloatArray | None = None,
        on_step: Callable[[], None] | None = None,
    ) -> PushRecording:
        """One push, resolved at X_WO (the object's true pose by default) into the
        workcell's fingertip waypoints. The log runs from the stroke's start through the
        settle pause and the retract."""
        X = self.object_pose() if X_WO is None else np.asarray(X_WO, dtype=float)
        waypoints = push_waypoints(primitive, X, self.cell.fingertip)
        log, i0, i1 = self.follow(waypoints, 'stroke', on_step)
        # The retract belongs to the log as well (the fingertip leaves the object).
        t, X_WO_, p, w = (np.array(v) for v in zip(*log, strict=True))
        return PushRecording(t, X_WO_, p, w, primitive, i0, i1, self.fell())

    def _move_hand(self, target: FloatArray, speed: float) -> None:
        start = np.array(self.data.mocap_pos[self._hand], dtype=float)
        steps = max(
            1, int(math.ceil(np.linalg.norm(target - start) / speed / self.model.opt.timestep))
        )
        for k in range(1, steps + 1):
            self.data.mocap_pos[self._hand] = start + (target - start) * (k / steps)
            mujoco.mj_step(self.model, self.data)

    def grasp(
        self,
        p_W: tuple[float, float],
        yaw: float = 0.0,
        lift: float = 0.1,
        z: float | None = None,
    ) -> GraspResult:
        """Grasp an overhang with the parallel gripper and lift it.

        The hand comes level with ``z`` (the held part's mid-height; the object's by
        default), fingers open (8 cm) one above and one below it, pointing along ``yaw``;
        the finger pads' front ends at ``p_W``.
        It closes, lifts by ``lift`` metres and holds for half a second. Success: both
        fingers still hold the object, it no longer touches the table and it rose with the
        hand (see :class:`GraspResult`).
        """
        d = np.array([math.cos(yaw), math.sin(yaw)])
        z_mid = float(self.spec.grid.heights.max()) / 2 if z is None else float(z)
        front = np.asarray(p_W, dtype=float)
        origin = front - d * self.cell.gripper.finger_depth
        z0 = self.object_height()
        self.data.ctrl[3:5] = self.cell.gripper.max_opening / 2
        self.data.mocap_quat[self._hand] = _yaw_quat(yaw)
        self._move_hand(np.array([*(origin - d * 0.08), 0.3]), 0.5)
        self._move_hand(np.array([*(origin - d * 0.08), z_mid]), 0.3)
        self._move_hand(np.array([*origin, z_mid]), 0.1)
        # Close at a finger speed of 8 cm/s (a sudden set point would drive the light
        # fingers through the object), then squeeze.
        # As a real parallel gripper's grasp(width, force): the set point lies just inside
        # the object, so the servo squeezes with the configured force at its surfaces
        # (a set point far inside drove the pads through the object once it was lifted).
        open_ = self.cell.gripper.max_opening / 2
        target = max(0.0, z_mid - self.cell.gripper.force / FINGER_KP)
        steps = int(0.5 / self.model.opt.timestep)
        for k in range(1, steps + 1):
            self.data.ctrl[3:5] = open_ + (target - open_) * k / steps
            mujoco.mj_step(self.model, self.data)
        self.settle(0.3)
        self._move_hand(np.array([*origin, z_mid + lift]), 0.1)
        self.settle(0.5)
        lifted = self.object_height() - z0
        held = self._touches('finger_top') and self._touches('finger_bottom')
        off_table = not self._touches('table')
        return GraspResult(
            success=held and off_table and lifted > 0.5 * lift,
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
