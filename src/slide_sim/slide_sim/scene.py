"""MJCF of the workcell: table with a free edge, the object, a fingertip pusher with F/T.

Frames: the world frame is the table frame of ``config/workcell.yaml``: z up, origin on
the table top at the middle of the edge, x inwards. The table covers ``0 <= x <= depth``,
``|y| <= width / 2``; past ``x < 0`` the object overhangs and can fall to the floor.

Friction (the trap in ``shared/ros2-from-pip.md``): MuJoCo combines two geoms' friction
by taking the larger one, and a geom's default is 1.0. The table's friction is therefore
0 and the object's cell geoms have ``priority="1"``, so a contact's parameters are the
cell's. Against the table and the floor the cells have ``condim="1"``: MuJoCo gives the
normal force only, and the twin adds each cell's Coulomb friction itself
(:mod:`slide_sim.friction` says why). The fingertip and the gripper's pads have a higher
priority and their own condim, so their contacts with the object keep MuJoCo's friction.

The gripper is a parallel gripper's mechanism: its two fingers are coupled (an equality
constraint, as a Franka Hand's rack or a Robotiq's linkage couples them) and squeezed by
force-limited servos, so a lifted object's weight rests on the mechanism and only a moment
beyond what the pads' pressure resists opens them (the planner's hold ratio,
:mod:`slide_core.planning.grasp`). Measured (a bar held at its end, 4 cm in the pads,
70 N): with 0.28, 0.84 and 0.99 of that moment it hangs level (0.6 degrees at most); with
1.19, 1.36 and 2.7 it turns out of the grip. The hand is a body welded to its mocap set
point (the arm), not the mocap body itself: a mocap body has no velocity for the contact
solver, and the pads of a hand moved that way chattered at 125 Hz while they lifted (the
upper pad off the object one physics step in four) and slid a hammer held at 0.21 of its
moment out of the grip. The pads' friction is ``PAD_MU``, not a rubber pad's 1: in
MuJoCo's convex contact model a sliding contact's friction pushes the surfaces apart, and
at 0.5 and more it pried the pads open while a held object turned (measured with the mocap
hand: a tee drooped 12 degrees at 0.5, 20 with rolling friction on, and uncoupled fingers
let a 0.47 kg book droop 6 to 12 degrees and stay put while the hand turned 40 degrees).
Friction does not carry a hanging object's weight (the pads are horizontal; the lower
pad's normal force does).
"""

from __future__ import annotations

import math

from matplotlib.path import Path
from matplotlib.transforms import Bbox
import numpy as np

from slide_core.errors import SlideInputError
from slide_core.geometry import FloatArray, cell_corners, reach, to_world
from slide_core.model import ObjectSpec, Table, Workcell
from slide_core.perception import load_extrinsics

CAMERA_FOVY_DEG = 58.0  # the D435's vertical field of view
FINGER_KP = 10000.0  # N/m, the finger position servos
PAD_MU = 0.3  # the gripper pads' friction (module docstring)
PAD_THICKNESS = 0.01  # m: each finger pad's, inside the opening's faces
PALM_SOLREF = '0.004 1'
"""The weld of the hand to its set point (the arm's stiffness): 2 physics steps' time
constant, as stiff as MuJoCo allows."""
CARRIAGE_REACH = 2.0
"""How far [m] the tools' carriage reaches from the table frame's origin along x and y, at
least (:func:`carriage_range`)."""
CARRIAGE_SPARE = 1.0
"""How far [m] past the table's far end and sides the carriage reaches, at least."""
CARRIAGE_Z = (-1.0, 2.0)
"""The carriage's lowest and highest z [m]."""

PUSHER_KP = 4000.0  # N/m: a stiff position-controlled arm
PUSHER_KV = 200.0  # N s/m
TIMESTEP = 0.002  # s


def carriage_range(table: Table) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """Where the tools' carriage can go [m] (x, y, z, lowest then highest): its joints'
    control range, over the whole ``table`` and ``CARRIAGE_SPARE`` past it (a fixed 2 m
    left a 4 m table's far half out of reach, refused only when a push went there); the
    fingertip's centre is ``fingertip.height`` above it."""
    r = max(CARRIAGE_REACH, table.depth + CARRIAGE_SPARE, table.width / 2 + CARRIAGE_SPARE)
    return (-r, -r, CARRIAGE_Z[0]), (r, r, CARRIAGE_Z[1])


WHOLE = 1.0 - 1e-6
"""A cell whose covered share is at least this is built as its whole square."""
SOLREF_TIMECONST = 0.02
"""MuJoCo's default contact time constant [s], the box cells' (a piece's is scaled)."""


def cell_pieces(spec: ObjectSpec) -> dict[int, FloatArray]:
    """The cells the object's real outline cuts (by number): the part of each square
    inside the outline, a polygon (k, 2) [m] in the object frame (matplotlib's clipping).
    MuJoCo collides a mesh as its convex hull, so a piece of a concave rim is built
    convex: a cell cut on a concave corner is slightly fuller in the twin."""
    g = spec.grid
    if g.outline is None:
        return {}
    outline = Path(np.vstack((g.outline, g.outline[:1])), closed=True)
    half = g.cell_size / 2.0
    pieces = {}
    for i in np.flatnonzero(g.area < WHOLE):
        lo, hi = g.p_OC[i] - half, g.p_OC[i] + half
        clipped = outline.clip_to_bbox(Bbox([lo, hi]), inside=True).vertices
        v = np.unique(np.round(clipped, 9), axis=0)
        pieces[int(i)] = np.asarray(v, dtype=float)
    return pieces


def object_assets_xml(spec: ObjectSpec, pieces: dict[int, FloatArray]) -> str:
    """Meshes of the cells the real outline cuts: prisms of their ``pieces``
    (:func:`cell_pieces`), the cell's height tall (vertices in the object frame)."""
    heights = spec.grid.heights[spec.grid.occupancy]
    meshes = []
    for i, piece in pieces.items():
        prism = [(x, y, z) for z in (0.0, heights[i]) for x, y in piece]
        vertex = ' '.join(f'{v:.6f}' for p in prism for v in p)
        meshes.append(f'<mesh name="piece{i}" vertex="{vertex}"/>')
    return f'<asset>{"".join(meshes)}</asset>' if meshes else ''


def object_xml(
    spec: ObjectSpec, X_WO: tuple[float, float, float], pieces: dict[int, FloatArray]
) -> str:
    """The object body: a free joint and one geom per cell (mass, friction, height): its
    square as a box, or, where the real outline cuts it (``pieces``, :func:`cell_pieces`),
    the piece inside as a mesh (:func:`object_assets_xml`)."""
    g = spec.grid
    half = g.cell_size / 2.0
    heights = g.heights[g.occupancy]
    geoms = []
    for i, (p, h) in enumerate(zip(g.p_OC, heights, strict=True)):
        if i in pieces:
            # Contact stiffness goes as 1 / timeconst^2: a piece's, as its share of the
            # square, so its support per area is a box cell's (the rigid pressure).
            timeconst = SOLREF_TIMECONST / math.sqrt(float(g.area[i]))
            shape = f'type="mesh" mesh="piece{i}" solref="{timeconst:.6f} 1"'
        else:
            shape = (
                f'type="box" size="{half:.6f} {half:.6f} {h / 2:.6f}" '
                f'pos="{p[0]:.6f} {p[1]:.6f} {h / 2:.6f}"'
            )
        geoms.append(
            f'<geom name="cell{i}" {shape} mass="{spec.mass[i]:.9g}" '
            f'friction="{spec.friction[i]:.6f} 0.005 0.0001" priority="1" condim="1" '
            f'rgba="0.3 0.45 0.8 1"/>'
        )
    x, y, yaw = X_WO
    return (
        f'<body name="object" pos="{x:.6f} {y:.6f} 0" euler="0 0 {yaw:.6f}">'
        '<freejoint name="object"/>' + ''.join(geoms) + '</body>'
    )


def camera_xml(R_WK: FloatArray, p_WK: FloatArray) -> str:
    """The ``rgbd`` camera at the calibrated optical frame X_WK (z forward, x right, y down;
    a MuJoCo camera looks along its -z with y up)."""
    x_axis, y_axis = R_WK[:, 0], -R_WK[:, 1]
    pos = ' '.join(f'{v:.6f}' for v in p_WK)
    axes = ' '.join(f'{v:.6f}' for v in (*x_axis, *y_axis))
    return f'<camera name="rgbd" pos="{pos}" xyaxes="{axes}" fovy="{CAMERA_FOVY_DEG}"/>'


OBSTACLE_HEIGHT = 0.1
"""How tall [m] the twin builds a workcell obstacle whose height the file does not give."""


def obstacles_xml(cell: Workcell) -> str:
    """The workcell's obstacles as fixed boxes on the table, as tall as the file says (or
    ``OBSTACLE_HEIGHT``): the twin had none, so the camera never saw one and nothing
    stopped an object sliding into one."""
    geoms = []
    for i, o in enumerate(cell.obstacles):
        h = (OBSTACLE_HEIGHT if o.height is None else o.height) / 2
        geoms.append(
            f'<geom name="obstacle_{i}" type="box" size="{o.half_size[0]} {o.half_size[1]} '
            f'{h}" pos="{o.centre[0]} {o.centre[1]} {h}" rgba="0.35 0.35 0.4 1"/>'
        )
    return '\n    '.join(geoms)


def workcell_xml(spec: ObjectSpec, X_WO: tuple[float, float, float], cell: Workcell) -> str:
    """The whole scene: the workcell's dimensions, the object, the camera where the
    extrinsics file puts it."""
    t_, f, g = cell.table, cell.fingertip, cell.gripper
    d, w, t = t_.depth, t_.width, t_.thickness
    r, length = f.radius, f.length
    z_tip = f.height
    lo, hi = carriage_range(t_)
    R_WK, p_WK = load_extrinsics(cell.camera_extrinsics)
    pieces = cell_pieces(spec)  # clipped once, for the meshes and the geoms
    return f"""
<mujoco model="slide_workcell">
  <compiler angle="radian"/>
  <option timestep="{TIMESTEP}" cone="elliptic" impratio="10" integrator="implicitfast"/>
  <visual><global offwidth="640" offheight="480"/></visual>
  {object_assets_xml(spec, pieces)}
  <worldbody>
    <light pos="0.4 0 1.5" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="3 3 0.1" pos="0 0 {-t_.height:.4f}"
          friction="0 0 0" rgba="0.6 0.6 0.6 1"/>
    <geom name="table" type="box" size="{d / 2} {w / 2} {t / 2}" pos="{d / 2} 0 {-t / 2}"
          friction="0 0 0" rgba="0.72 0.58 0.42 1"/>
    {obstacles_xml(cell)}
    {camera_xml(R_WK, p_WK)}
    {object_xml(spec, X_WO, pieces)}
    <body name="carriage" pos="0 0 0" gravcomp="1">
      <joint name="pusher_x" type="slide" axis="1 0 0" ref="0" damping="0"/>
      <joint name="pusher_y" type="slide" axis="0 1 0" damping="0"/>
      <joint name="pusher_z" type="slide" axis="0 0 1" damping="0"/>
      <geom type="sphere" size="0.005" mass="0.5" contype="0" conaffinity="0"/>
      <body name="fingertip" pos="0 0 {z_tip:.6f}" gravcomp="1">
        <site name="ft" pos="0 0 0"/>
        <geom name="fingertip" type="cylinder" size="{r} {length / 2}" mass="0.02"
              friction="{f.mu} 0.005 0.0001" priority="2" condim="3"
              rgba="0.1 0.1 0.1 1"/>
      </body>
    </body>
    <body name="hand" mocap="true" pos="-0.6 0 0.4"/>
    <!-- The hand is a body of its own welded to the mocap set point: a mocap body has no
         velocity for the contact solver, and the pads of a hand moved as one chattered
         while they lifted and turned a hammer out of the grip (module docstring). -->
    <body name="palm" pos="-0.6 0 0.4" gravcomp="1">
      <freejoint name="palm"/>
      <geom type="box" size="0.01 0.04 0.05" pos="-0.01 0 0" contype="0" conaffinity="0"
            mass="1" rgba="0.9 0.9 0.9 1"/>
      <!-- Fingers of 0.5 kg (weight compensated): MuJoCo scales contact stiffness by the
           bodies' mass, and 50 g pads sank through light objects under 70 N. Coupled
           below; a flat pad's pressure resists tipping through its contact points. -->
      <body name="finger_top" gravcomp="1">
        <joint name="finger_top" type="slide" axis="0 0 1" range="0 {g.max_opening / 2}"
               damping="20"/>
        <geom name="finger_top" type="box"
              size="{g.finger_depth / 2} {g.finger_width / 2} {PAD_THICKNESS / 2}"
              pos="{g.finger_depth / 2} 0 {PAD_THICKNESS / 2}" mass="0.5"
              friction="{PAD_MU} 0.02 0.02"
              priority="3" condim="3" solref="0.004 1" solimp="0.95 0.99 0.001"
              rgba="0.2 0.2 0.2 1"/>
      </body>
      <body name="finger_bottom" gravcomp="1">
        <joint name="finger_bottom" type="slide" axis="0 0 -1"
               range="0 {g.max_opening / 2}" damping="20"/>
        <geom name="finger_bottom" type="box"
              size="{g.finger_depth / 2} {g.finger_width / 2} {PAD_THICKNESS / 2}"
              pos="{g.finger_depth / 2} 0 {-PAD_THICKNESS / 2}" mass="0.5"
              friction="{PAD_MU} 0.02 0.02"
              priority="3" condim="3" solref="0.004 1" solimp="0.95 0.99 0.001"
              rgba="0.2 0.2 0.2 1"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <weld name="palm" body1="palm" body2="hand" solref="{PALM_SOLREF}"/>
    <joint name="fingers" joint1="finger_bottom" joint2="finger_top" polycoef="0 1 0 0 0"
           solref="0.004 1"/>
  </equality>
  <actuator>
    <position name="pusher_x" joint="pusher_x" kp="{PUSHER_KP}" kv="{PUSHER_KV}"
              ctrlrange="{lo[0]} {hi[0]}"/>
    <position name="pusher_y" joint="pusher_y" kp="{PUSHER_KP}" kv="{PUSHER_KV}"
              ctrlrange="{lo[1]} {hi[1]}"/>
    <position name="pusher_z" joint="pusher_z" kp="{PUSHER_KP}" kv="{PUSHER_KV}"
              ctrlrange="{lo[2]} {hi[2]}"/>
    <position name="finger_top" joint="finger_top" kp="{FINGER_KP}" kv="40"
              forcerange="{-g.force} {g.force}" ctrlrange="0 {g.max_opening / 2}"/>
    <position name="finger_bottom" joint="finger_bottom" kp="{FINGER_KP}" kv="40"
              forcerange="{-g.force} {g.force}" ctrlrange="0 {g.max_opening / 2}"/>
  </actuator>
  <sensor>
    <force name="ft_force" site="ft"/>
    <torque name="ft_torque" site="ft"/>
  </sensor>
</mujoco>
"""


def default_pose(cell: Workcell) -> tuple[float, float, float]:
    """Where the twin puts an object unless told: 35 cm in from the free edge (at most
    the table's middle), on the centre line, square."""
    return (min(0.35, cell.table.depth / 2), 0.0, 0.0)


def check_on_table(spec: ObjectSpec, cell: Workcell, X_WO: tuple[float, float, float]) -> None:
    """SlideInputError unless every cell of ``spec`` at X_WO lies on the table top."""
    p_W = to_world(np.asarray(X_WO, dtype=float), cell_corners(spec.grid).reshape(-1, 2))
    t = cell.table
    lo, hi = p_W.min(axis=0), p_W.max(axis=0)
    if lo[0] < 0.0 or hi[0] > t.depth or max(-lo[1], hi[1]) > t.width / 2:
        raise SlideInputError(
            f'{spec.name} at {list(X_WO)} spans x {lo[0]:.3f} to {hi[0]:.3f} m and y '
            f'{lo[1]:.3f} to {hi[1]:.3f} m, past the table (x 0 to {t.depth} m, |y| up to '
            f'{t.width / 2} m): it would start over the edge'
        )


START_MARGIN = 0.15
"""Table [m] a random start leaves around the object where the table allows."""
START_MARGIN_MIN = 0.05
"""The least table [m] a random start leaves around the object."""


START_DRAWS = 200
"""Random starts drawn at most before one clear of the obstacles is given up on."""


def random_start(spec: ObjectSpec, cell: Workcell, seed: int) -> tuple[float, float, float]:
    """A random pose well inside the table (START_MARGIN of table around the object, or as
    much as the table leaves, START_MARGIN_MIN at least) and START_MARGIN_MIN clear of the
    workcell's obstacles, from the seed's own stream (``[seed, 0]``)."""
    rng = np.random.default_rng([abs(int(seed)), 0])
    r = reach(spec.grid)
    t = cell.table
    # A 40 x 30 cm tray on the 0.8 m table had exactly 15 cm around it, and was refused.
    margin = min(START_MARGIN, min(t.depth, t.width) / 2 - r)
    if margin < START_MARGIN_MIN:
        room = min(t.depth, t.width) / 2 - START_MARGIN_MIN
        raise SlideInputError(
            f'{spec.name} reaches {r * 100:.1f} cm from its centre, and a random start leaves '
            f'{START_MARGIN_MIN * 100:.0f} cm of table around it: on this table ({t.depth} x '
            f'{t.width} m) it may reach {room * 100:.1f} cm at most'
        )
    lo = np.array([r + margin, -t.width / 2 + r + margin])
    hi = np.array([t.depth - r - margin, t.width / 2 - r - margin])
    hi = np.minimum(hi, [0.6, 0.3])
    for _ in range(START_DRAWS):
        x, y = rng.uniform(lo, np.maximum(hi, lo + 1e-3))
        yaw = float(rng.uniform(-math.pi, math.pi))
        # Clear of the obstacles by the margin too (a start inside a box on the table).
        if all(float(o.distance([x, y])[0]) >= r + START_MARGIN_MIN for o in cell.obstacles):
            return (float(x), float(y), yaw)
    raise SlideInputError(
        f'no random start for {spec.name} leaves {START_MARGIN_MIN * 100:.0f} cm between it and '
        f'the workcell obstacles ({START_DRAWS} draws): give the start pose, or move them'
    )
