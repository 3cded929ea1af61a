"""The twin: a MuJoCo workcell with one object and a position-driven fingertip pusher.

Pushes are executed as a position-controlled arm would: the pusher lifts, moves above the
start point, lowers to the push height, drives a straight line at a commanded speed
(stiff position servo, so it lags a little under load), retracts and lifts. The 6-axis
force/torque sensor sits at the fingertip's mount (site ``ft``); it reads the force the
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
from numpy.typing import NDArray

from slide_core.errors import SlideInputError
from slide_core.model import ObjectSpec
from slide_core.physics import RigidModel
from slide_sim.scene import FINGER_KP, Workcell, default_pose, object_extent, workcell_xml

FloatArray = NDArray[np.float64]

LIFT_Z = 0.12  # pusher travel height above the table [m]


@dataclass
class PushRecording:
    """What one push produced, sampled every physics step.

    Attributes:
        t: (N,) seconds since the twin started.
        X_WO: (N, 3) object pose.
        p_WF: (N, 3) fingertip centre (its axis at the push height).
        wrench_W: (N, 6) F/T reading: force [N] and torque [N m] the pusher applied, world
            frame axes (the sensor does not rotate).
        contact_O, direction_O: the commanded contact point and direction (object frame at
            the start of the push).
        travel, speed: commanded travel [m] and speed [m/s].
        start, end: indices in the arrays where the pusher's straight stroke began and ended.
        fell: whether the object had fallen off the table by the end of the push.
    """

    t: FloatArray
    X_WO: FloatArray
    p_WF: FloatArray
    wrench_W: FloatArray
    contact_O: FloatArray
    direction_O: FloatArray
    travel: float
    speed: float
    start: int
    end: int
    fell: bool = False


class Twin:
    """One object on the table of the workcell.

    Args:
        spec: the object.
        X_WO: initial object pose (x, y, yaw) in the table frame; inside the table by default.
        cell: workcell dimensions and pusher settings.
    """

    def __init__(
        self,
        spec: ObjectSpec,
        X_WO: tuple[float, float, float] | None = None,
        cell: Workcell | None = None,
    ) -> None:
        self.spec = spec
        self.cell = cell or Workcell()
        pose = X_WO or default_pose(spec, self.cell)
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
        self.tip_z = self.cell.fingertip_clearance + self.cell.fingertip_length / 2
        self._tip_weight = float(m.body_mass[self._tip]) * -float(m.opt.gravity[2])
        # Park the pusher off the table, lifted.
        park = np.array([-0.25, 0.0, LIFT_Z])
        for q, v in zip(self._q, park, strict=True):
            self.data.qpos[q] = v
        self.data.ctrl[:3] = park
        self.data.ctrl[3:5] = self.cell.gripper_opening / 2  # gripper open
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

    def push(
        self,
        contact_O: tuple[float, float] | FloatArray,
        direction_O: tuple[float, float] | FloatArray,
        travel: float,
        speed: float = 0.05,
        approach: float = 0.02,
        retract: float = 0.02,
        on_step: Callable[[], None] | None = None,
    ) -> PushRecording:
        """Push once: ``contact_O`` and ``direction_O`` in the object frame at the start.

        The fingertip starts ``approach`` metres plus its radius before the contact point,
        drives ``approach + travel`` along the direction at ``speed`` m/s, pulls back by
        ``retract`` and lifts. ``on_step`` is called after every physics step while the
        fingertip pushes and the object comes to rest (to render camera frames, say).
        Raises SlideInputError on a non-positive travel or speed.
        """
        if not (travel > 0 and speed > 0 and approach >= 0):
            raise SlideInputError('travel and speed must be positive and approach >= 0')
        c = np.asarray(contact_O, dtype=float)
        u = np.asarray(direction_O, dtype=float)
        if (
            c.shape != (2,)
            or u.shape != (2,)
            or not np.isfinite(c).all()
            or np.linalg.norm(u) == 0
        ):
            raise SlideInputError(
                'contact_O and direction_O must be finite 2-vectors, direction non-zero'
            )
        u = u / np.linalg.norm(u)
        X = self.object_pose()
        R = np.array([[math.cos(X[2]), -math.sin(X[2])], [math.sin(X[2]), math.cos(X[2])]])
        c_W, u_W = X[:2] + R @ c, R @ u
        start = c_W - u_W * (approach + self.cell.fingertip_radius)
        end = start + u_W * (approach + travel)
        log: list[tuple] = []
        lift = LIFT_Z - self.tip_z
        self._move(np.array([*start, lift]), 0.3)
        self._move(np.array([*start, 0.0]), 0.1)
        self.settle(0.05)
        i0 = len(log)
        log.append(self._sample())
        self._move(np.array([*end, 0.0]), speed, log, on_step)
        i1 = len(log) - 1
        # Let the object come to rest before retracting (free sliding is data too).
        for _ in range(int(0.3 / self.model.opt.timestep)):
            mujoco.mj_step(self.model, self.data)
            log.append(self._sample())
            if on_step is not None:
                on_step()
        back = end - u_W * retract
        self._move(np.array([*back, 0.0]), speed, log)
        self._move(np.array([*back, lift]), 0.1)
        t, X_WO, p, w = (np.array(v) for v in zip(*log, strict=True))
        return PushRecording(t, X_WO, p, w, c, u, float(travel), float(speed), i0, i1, self.fell())

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
        origin = front - d * self.cell.finger_depth
        z0 = self.object_height()
        self.data.ctrl[3:5] = self.cell.gripper_opening / 2
        self.data.mocap_quat[self._hand] = _yaw_quat(yaw)
        self._move_hand(np.array([*(origin - d * 0.08), 0.3]), 0.5)
        self._move_hand(np.array([*(origin - d * 0.08), z_mid]), 0.3)
        self._move_hand(np.array([*origin, z_mid]), 0.1)
        # Close at a finger speed of 8 cm/s (a sudden set point would drive the light
        # fingers through the object), then squeeze.
        # As a real parallel gripper's grasp(width, force): the set point lies just inside
        # the object, so the servo squeezes with the configured force at its surfaces
        # (a set point far inside drove the pads through the object once it was lifted).
        open_ = self.cell.gripper_opening / 2
        target = max(0.0, z_mid - self.cell.gripper_force / FINGER_KP)
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

    def random_push(self, rng: np.random.Generator) -> PushRecording:
        """An exploratory push: a point on the contour, along the inward normal plus a random
        angle (within 30 degrees), 3 to 7 cm at 3 to 6 cm/s. Safe: a candidate that would
        carry the object out of the middle of the table is drawn again."""
        X = self.object_pose()
        margin = object_extent(self.spec) + 0.08
        lo = np.array([margin, -self.cell.table_width / 2 + margin])
        hi = np.array([self.cell.table_depth - margin, self.cell.table_width / 2 - margin])
        for _ in range(50):
            contact, normal_in = contour_point(self.spec, rng)
            a = rng.uniform(-math.radians(30), math.radians(30))
            direction = np.array(
                [
                    math.cos(a) * normal_in[0] - math.sin(a) * normal_in[1],
                    math.sin(a) * normal_in[0] + math.cos(a) * normal_in[1],
                ]
            )
            travel = rng.uniform(0.03, 0.07)
            # The fingertip comes down beside the object, not on it (a concave outline can
            # put the approach over another part).
            start = contact - direction * (0.02 + self.cell.fingertip_radius)
            if _distance_to_cells(self.spec, start) < self.cell.fingertip_radius + 0.003:
                continue
            c, s = math.cos(X[2]), math.sin(X[2])
            moved = X[:2] + travel * np.array(
                [c * direction[0] - s * direction[1], s * direction[0] + c * direction[1]]
            )
            if np.all(moved >= lo) and np.all(moved <= hi):
                break
        return self.push(contact, direction, travel, rng.uniform(0.03, 0.06))


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


def _distance_to_cells(spec: ObjectSpec, p_O: FloatArray) -> float:
    """Distance [m] from a point of the object frame to the nearest cell square."""
    model = RigidModel.of(spec.grid)
    return float(model.closest_point((p_O - model.p_OG)[None, :])[1][0])


def contour_point(spec: ObjectSpec, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
    """A random point on the object's outline (object frame) and the inward normal there."""
    g = spec.grid
    half = g.cell_size / 2
    cells, _, normals = g.outline_sides()
    k = int(rng.integers(len(cells)))
    i, n_out = int(cells[k]), normals[k]
    along = np.array([-n_out[1], n_out[0]]) * rng.uniform(-0.8, 0.8) * half
    return g.p_OC[i] + n_out * half + along, -n_out


def exploration(
    spec: ObjectSpec,
    pushes: int,
    seed: int,
    X_WO: tuple[float, float, float] | None = None,
) -> tuple[Twin, list[PushRecording]]:
    """A twin with the object and ``pushes`` random exploratory pushes, reproducible."""
    if pushes < 1:
        raise SlideInputError(f'pushes must be at least 1, got {pushes}')
    rng = np.random.default_rng(seed)
    twin = Twin(spec, X_WO)
    return twin, [twin.random_push(rng) for _ in range(pushes)]
