"""Grasps of the overhang with a parallel gripper approaching across the edge, and how
much of what the pads can hold the object's weight asks of them.

Holding the weight (:func:`hold_ratios`). Lifted by its overhang, the object hangs from the
pads: its weight W acts at the centre of mass, a horizontal lever L from the middle H of the
held part. A parallel gripper's fingers are coupled and close with force F each, so the
lower pad carries N_b = F + W/2 and the upper N_t = F - W/2 (N_t + N_b = 2F; W > 2F
cannot be held). Each pad's pressure can shift anywhere in its contact, a rectangle of the
grip g (along the approach) by the pad width w, so the pair resists at most
(N_t + N_b) g / 2 = F g about the axis across the approach and F w about the approach:
the hold ratio max(W |L_along| / (F g), W |L_across| / (F w)) is the part of that the
weight uses. At 1 even rigid pads let the object turn out of the grip; compliant pads
begin to open at a third of it (an elastic pad's pressure stays positive only while its
centre lies in the middle third of the contact), and the object droops in them from there.
The goal search refuses goals whose ratio exceeds 1 for more than epsilon of the belief and
prefers the smaller ratio below that (``PlannerConfig.hold_weight``): of two overhangs that
both balance, the one nearer the centre of mass is held more surely.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from slide_core.geometry import (
    FloatArray,
    Grid,
    boundary_rings,
    check_pose,
    covered,
    tallest_under,
    to_world,
)
from slide_core.model import Belief, Gripper, Waypoint
from slide_core.physics import GRAVITY


@dataclass(frozen=True)
class Grasp:
    """A grasp of the overhang: the gripper comes along ``yaw`` (0: along +x, towards the
    table) level with the object's mid-height; its pads' front end E is at ``p_WE``.

    Attributes:
        p_WE: (2,) pads' front end, table frame [m]; z: mid-height of the held part [m].
        yaw: approach direction [rad]; grip: object length between the pads [m];
        width: how wide [m] the stretch of edge is along which a grasp would hold.
    """

    p_WE: FloatArray
    z: float
    yaw: float
    grip: float
    width: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            'p_WE': [float(v) for v in self.p_WE],
            'z': self.z,
            'yaw': self.yaw,
            'grip_m': self.grip,
            'graspable_width_m': self.width,
        }


_LINE_STEP = 0.001  # m between samples along the pads


def grasp_at(
    grid: Grid, X_WO: Any, gripper: Gripper, com_O: FloatArray | None = None
) -> Grasp | None:
    """The grasp of the overhang at X_WO nearest the centre of mass, or None.

    Bands of the pads' width across the edge are tried every 5 mm. In each, the pads
    reach as far in as the clearance to the edge allows, or less when the object sticks
    out further than the pads are deep (the palm must not touch it). The grip of a band
    is the object length under the pads along three lines across their width (both sides
    and the middle), the shortest of the three: a corner that only the middle of a pad
    touches does not count as held. Bands holding at least ``min_grip`` qualify; of those
    whose neighbours 1 cm either side qualify too (if any), the one nearest the centre of
    mass is taken (the least roll torque on the pads).
    """
    X = check_pose(X_WO, 'X_WO')
    height = float(grid.heights[grid.occupancy].max())
    if height > gripper.max_opening - 2 * gripper.height_margin:
        return None
    corners = to_world(X, boundary_rings(grid).reshape(-1, 2))
    front_max = -gripper.clearance
    if corners[:, 0].min() >= front_max:
        return None
    half_w = gripper.finger_width / 2
    xs = np.arange(corners[:, 0].min(), front_max + 1e-9, _LINE_STEP)
    centres = np.arange(corners[:, 1].min() + half_w, corners[:, 1].max() - half_w + 1e-9, 0.005)
    if len(centres) == 0:
        return None
    offsets = np.array([-0.9, 0.0, 0.9]) * half_w
    lines_y = centres[:, None] + offsets[None, :]  # (B, 3)
    pts = np.stack(np.broadcast_arrays(xs[None, None, :], lines_y[..., None]), axis=-1)
    cov: NDArray[np.bool_] = np.asarray(covered(grid, X, pts), dtype=bool)  # (B, 3, Nx)
    com_y = float(to_world(X, com_O)[1]) if com_O is not None else float(corners[:, 1].mean())
    # Per band (all at once): the pads reach from the first covered sample along x.
    covered_x: NDArray[np.bool_] = np.any(cov, axis=1)  # (B, Nx)
    has: NDArray[np.bool_] = np.any(covered_x, axis=1)
    first = xs[np.argmax(covered_x, axis=1)]
    fronts = np.where(has, np.minimum(front_max, first + gripper.finger_depth), 0.0)
    pads = (xs[None, :] >= fronts[:, None] - gripper.finger_depth - 1e-9) & (
        xs[None, :] <= fronts[:, None] + 1e-9
    )
    held_samples = (cov & pads[:, None, :]).sum(axis=2).min(axis=1)
    grips = np.where(has, held_samples * _LINE_STEP, 0.0)
    ok = grips >= gripper.min_grip
    if not ok.any():
        return None
    # Prefer bands whose neighbours 1 cm either side hold too (tolerant of pose errors).
    robust = ok & np.roll(ok, 2) & np.roll(ok, -2)
    robust[:2] = robust[-2:] = False
    pick = robust if robust.any() else ok
    i = int(np.argmin(np.where(pick, np.abs(centres - com_y), np.inf)))
    held = covered(grid, X, pts[i][:, pads[i]]).any(axis=0)
    z = tallest_under(grid, X, pts[i][:, pads[i]][:, held]) / 2
    return Grasp(
        np.array([fronts[i], float(centres[i])]), z, 0.0, float(grips[i]), float(ok.sum() * 0.005)
    )


def hold_ratios(belief: Belief, X_WO: Any, grasp: Grasp, gripper: Gripper) -> FloatArray:
    """(K,) the hold ratio of each model of the belief for ``grasp`` of the object at X_WO
    (module docstring): the weight's moment about the middle of the held part over what
    the pads can resist, the larger of the two axes; inf when the weight exceeds twice the
    fingers' force. The held part's middle H lies half the grip behind the pads' front end
    along the approach."""
    X = check_pose(X_WO, 'X_WO')
    u = np.array([math.cos(grasp.yaw), math.sin(grasp.yaw)])  # along the approach
    v = np.array([-u[1], u[0]])
    p_WH = np.asarray(grasp.p_WE, dtype=float) - 0.5 * grasp.grip * u
    L_W = to_world(X, belief.com()) - p_WH  # (K, 2) levers, table frame
    W = GRAVITY * belief.mass.sum(axis=1)  # (K,) [N]
    F = gripper.force
    along = W * np.abs(L_W @ u) / (F * max(grasp.grip, 1e-9))
    across = W * np.abs(L_W @ v) / (F * gripper.finger_width)
    ratio = np.maximum(along, across)
    return np.asarray(np.where(W > 2.0 * F, np.inf, ratio), dtype=float)


PRE_GRASP_BACK = 0.08
"""How far [m] before the overhang, along the approach, the gripper comes down."""
PRE_GRASP_HEIGHT = 0.3
"""Height [m] of the pads above the table on the way to the pre-grasp."""


def grasp_waypoints(grasp: Grasp, lift: float) -> tuple[list[Waypoint], list[Waypoint]]:
    """The gripper's motion for ``grasp`` (pads' front end E, table frame): above and in
    front of the overhang, down to the held part's mid-height, in along the approach
    (then the fingers close); and the lift by ``lift`` metres, held half a second."""
    d = np.array([math.cos(grasp.yaw), math.sin(grasp.yaw)])
    front = np.asarray(grasp.p_WE, dtype=float)
    pre = front - d * PRE_GRASP_BACK
    approach = [
        Waypoint(np.array([*pre, PRE_GRASP_HEIGHT]), 0.5, 0.0, 'pre_grasp', grasp.yaw),
        Waypoint(np.array([*pre, grasp.z]), 0.3, 0.0, 'lower', grasp.yaw),
        Waypoint(np.array([*front, grasp.z]), 0.1, 0.0, 'reach', grasp.yaw),
    ]
    up = [Waypoint(np.array([*front, grasp.z + lift]), 0.1, 0.5, 'lift', grasp.yaw)]
    return approach, up
