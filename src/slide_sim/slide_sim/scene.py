"""MJCF of the workcell: table with a free edge, the object, a fingertip pusher with F/T.

Frames: the world frame is the table frame of ``config/workcell.yaml``: z up, origin on
the table top at the middle of the edge, x inwards. The table covers ``0 <= x <= depth``,
``|y| <= width / 2``; past ``x < 0`` the object overhangs and can fall to the floor.

Friction (the trap in ``shared/ros2-from-pip.md``): MuJoCo combines two geoms' friction
by taking the larger one, and a geom's default is 1.0. The table's friction is therefore
0 and the object's cell geoms have ``priority="1"``, so each cell slides with exactly its
specified coefficient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slide_core.model import ObjectSpec

FINGER_KP = 10000.0  # N/m, the finger position servos


@dataclass(frozen=True)
class Workcell:
    """Dimensions [m] and pusher settings of the twin."""

    table_depth: float = 0.8
    table_width: float = 1.2
    table_thickness: float = 0.04
    table_height: float = 0.75
    fingertip_radius: float = 0.008
    fingertip_mu: float = 0.3
    fingertip_clearance: float = 0.002  # fingertip bottom above the table top
    fingertip_length: float = 0.03
    pusher_kp: float = 4000.0  # N/m: a stiff position-controlled arm
    pusher_kv: float = 200.0  # N s/m
    timestep: float = 0.002  # s
    gripper_opening: float = 0.08  # Franka Hand: 8 cm between the fingers
    finger_depth: float = 0.04  # how far the finger pads reach
    finger_width: float = 0.02
    gripper_force: float = 70.0  # N per finger, at most


def object_xml(spec: ObjectSpec, X_WO: tuple[float, float, float]) -> str:
    """The object body: a free joint and one box geom per cell (mass, friction, height)."""
    g = spec.grid
    half = g.cell_size / 2.0
    heights = g.heights[g.occupancy]
    geoms = []
    for i, (p, h) in enumerate(zip(g.p_OC, heights, strict=True)):
        geoms.append(
            f'<geom name="cell{i}" type="box" size="{half:.6f} {half:.6f} {h / 2:.6f}" '
            f'pos="{p[0]:.6f} {p[1]:.6f} {h / 2:.6f}" mass="{spec.mass[i]:.6f}" '
            f'friction="{spec.friction[i]:.6f} 0.005 0.0001" priority="1" condim="3" '
            f'rgba="0.3 0.45 0.8 1"/>'
        )
    x, y, yaw = X_WO
    return (
        f'<body name="object" pos="{x:.6f} {y:.6f} 0" euler="0 0 {yaw:.6f}">'
        '<freejoint name="object"/>' + ''.join(geoms) + '</body>'
    )


def workcell_xml(spec: ObjectSpec, X_WO: tuple[float, float, float], cell: Workcell) -> str:
    """The whole scene."""
    d, w, t = cell.table_depth, cell.table_width, cell.table_thickness
    r, length = cell.fingertip_radius, cell.fingertip_length
    z_tip = cell.fingertip_clearance + length / 2
    return f"""
<mujoco model="slide_workcell">
  <compiler angle="radian"/>
  <option timestep="{cell.timestep}" cone="elliptic" impratio="10" integrator="implicitfast"/>
  <visual><global offwidth="640" offheight="480"/></visual>
  <worldbody>
    <light pos="0.4 0 1.5" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="3 3 0.1" pos="0 0 {-cell.table_height:.4f}"
          friction="0 0 0" rgba="0.6 0.6 0.6 1"/>
    <geom name="table" type="box" size="{d / 2} {w / 2} {t / 2}" pos="{d / 2} 0 {-t / 2}"
          friction="0 0 0" rgba="0.72 0.58 0.42 1"/>
    <camera name="rgbd" pos="0.35 0 0.9" xyaxes="0 -1 0 1 0 0" fovy="58"/>
    {object_xml(spec, X_WO)}
    <body name="carriage" pos="0 0 0" gravcomp="1">
      <joint name="pusher_x" type="slide" axis="1 0 0" ref="0" damping="0"/>
      <joint name="pusher_y" type="slide" axis="0 1 0" damping="0"/>
      <joint name="pusher_z" type="slide" axis="0 0 1" damping="0"/>
      <geom type="sphere" size="0.005" mass="0.5" contype="0" conaffinity="0"/>
      <body name="fingertip" pos="0 0 {z_tip:.6f}" gravcomp="1">
        <site name="ft" pos="0 0 0"/>
        <geom name="fingertip" type="cylinder" size="{r} {length / 2}" mass="0.02"
              friction="{cell.fingertip_mu} 0.005 0.0001" priority="2" condim="3"
              rgba="0.1 0.1 0.1 1"/>
      </body>
    </body>
    <body name="hand" mocap="true" pos="-0.6 0 0.4">
      <geom type="box" size="0.01 0.04 0.05" pos="-0.01 0 0" contype="0" conaffinity="0"
            rgba="0.9 0.9 0.9 1"/>
      <!-- Fingers of 0.5 kg (weight compensated): MuJoCo scales contact stiffness by the
           bodies' mass, and 50 g pads sank through light objects under 70 N. Pads resist
           rolling (condim 6), as a flat pad's pressure distribution resists tipping. -->
      <body name="finger_top" gravcomp="1">
        <joint name="finger_top" type="slide" axis="0 0 1" range="0 {cell.gripper_opening / 2}"
               damping="20"/>
        <geom name="finger_top" type="box"
              size="{cell.finger_depth / 2} {cell.finger_width / 2} 0.005"
              pos="{cell.finger_depth / 2} 0 0.005" mass="0.5" friction="1.0 0.02 0.02"
              priority="3" condim="6" solref="0.004 1" solimp="0.95 0.99 0.001"
              rgba="0.2 0.2 0.2 1"/>
      </body>
      <body name="finger_bottom" gravcomp="1">
        <joint name="finger_bottom" type="slide" axis="0 0 -1"
               range="0 {cell.gripper_opening / 2}" damping="20"/>
        <geom name="finger_bottom" type="box"
              size="{cell.finger_depth / 2} {cell.finger_width / 2} 0.005"
              pos="{cell.finger_depth / 2} 0 -0.005" mass="0.5" friction="1.0 0.02 0.02"
              priority="3" condim="6" solref="0.004 1" solimp="0.95 0.99 0.001"
              rgba="0.2 0.2 0.2 1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="pusher_x" joint="pusher_x" kp="{cell.pusher_kp}" kv="{cell.pusher_kv}"
              ctrlrange="-2 2"/>
    <position name="pusher_y" joint="pusher_y" kp="{cell.pusher_kp}" kv="{cell.pusher_kv}"
              ctrlrange="-2 2"/>
    <position name="pusher_z" joint="pusher_z" kp="{cell.pusher_kp}" kv="{cell.pusher_kv}"
              ctrlrange="-1 2"/>
    <position name="finger_top" joint="finger_top" kp="{FINGER_KP}" kv="40"
              forcerange="{-cell.gripper_force} {cell.gripper_force}" ctrlrange="0 0.04"/>
    <position name="finger_bottom" joint="finger_bottom" kp="{FINGER_KP}" kv="40"
              forcerange="{-cell.gripper_force} {cell.gripper_force}" ctrlrange="0 0.04"/>
  </actuator>
  <sensor>
    <force name="ft_force" site="ft"/>
    <torque name="ft_torque" site="ft"/>
  </sensor>
</mujoco>
"""


def default_pose(spec: ObjectSpec, cell: Workcell) -> tuple[float, float, float]:
    """A pose well inside the table for the object."""
    return (min(0.35, cell.table_depth / 2), 0.0, 0.0)


def object_extent(spec: ObjectSpec) -> float:
    """Radius [m] of the circle around O that contains every cell."""
    g = spec.grid
    return float(np.linalg.norm(g.p_OC, axis=1).max() + g.cell_size / np.sqrt(2))
