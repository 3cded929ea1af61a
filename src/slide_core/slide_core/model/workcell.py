"""The workcell: table, fingertip, gripper, obstacles and camera, read from one file.

``config/workcell.yaml`` is the only place a dimension of the workcell is written. The twin,
the planner, the command line and the nodes all read it through :func:`load_workcell`;
nothing in code carries a default for a length of the workcell.

The file is found by :func:`workcell_path`: an explicit path, else ``$SLIDE_CONFIG_DIR``,
else ``share/slide_bringup/config`` of a sourced ROS workspace (``AMENT_PREFIX_PATH``).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
import os
from pathlib import Path
import re
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from slide_core.errors import SlideInputError
from slide_core.files import read_yaml
from slide_core.geometry import FloatArray, Grid
from slide_core.model.objects import FRICTION_MAX
from slide_core.model.values import finite_number, shown

WORKCELL_FILE = 'workcell.yaml'
FRAME_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*')
"""A frame name as tf2 and URDF take it."""
URDF_ROOT = 'world'
"""The root link of the workcell's URDF (``urdf/workcell.urdf.in``): the table hangs from it."""


class WorkcellError(SlideInputError):
    """A workcell file that is missing, unreadable, or describes no possible workcell."""


@dataclass(frozen=True)
class Table:
    """The table top in the table frame W: free edge x = 0, 0 <= x <= depth, |y| <= width/2.

    Attributes:
        frame_id: name of the table frame in ROS messages.
        depth, width, thickness [m]; height: of the top above the robot base plane [m].
    """

    frame_id: str
    depth: float
    width: float
    thickness: float
    height: float


@dataclass(frozen=True)
class Fingertip:
    """The pushing fingertip, a vertical cylinder.

    Attributes:
        radius: [m]; length: along its axis [m]; mu: Coulomb friction against objects [-];
        height: of its centre above the table top while pushing [m] (its bottom clears the
        table by ``height - length / 2``).
    """

    radius: float
    length: float
    mu: float
    height: float

    @property
    def clearance(self) -> float:
        """Gap [m] between the fingertip's bottom and the table top while pushing."""
        return self.height - self.length / 2

    def force_height(self, object_height: float) -> float:
        """Height [m] above the table at which a push on a side ``object_height`` [m] tall
        acts: the middle of the part of the side the fingertip covers (its centre for a side
        taller than the fingertip's top; half the side for one lower than its bottom)."""
        if not (math.isfinite(object_height) and object_height > 0.0):
            raise SlideInputError(f'an object height must be positive, got {object_height}')
        lo, hi = max(self.clearance, 0.0), min(self.clearance + self.length, object_height)
        return (lo + hi) / 2 if hi > lo else object_height / 2

    def force_heights(self, grid: Grid) -> FloatArray:
        """(n,) :meth:`force_height` [m] on each of ``grid``'s cells, from the cell's height
        (0 on a cell of height 0: a flat grid, whose pushes have no moment)."""
        z = grid.heights[grid.occupancy]
        return np.array([self.force_height(float(h)) if h > 0.0 else 0.0 for h in z])

    def push_heights(self, grid: Grid, moment: bool) -> FloatArray:
        """(n,) heights [m] at which the pushes act on ``grid``'s cells, for the fits and
        simulators (``push_height=``): :meth:`force_heights` with the push's moment, zeros
        (no moment) without it."""
        return self.force_heights(grid) if moment else np.zeros(grid.n)


@dataclass(frozen=True)
class Gripper:
    """A parallel gripper that grasps the overhang, approaching across the edge.

    Attributes:
        max_opening: distance between the open fingers [m].
        finger_depth, finger_width: size of the finger pads [m].
        clearance: horizontal gap between the pads' front end and the table edge [m].
        min_grip: object length the pads must hold [m].
        height_margin: room left above and below the object in the open gripper [m].
        force: squeezing force per finger [N].
    """

    max_opening: float
    finger_depth: float
    finger_width: float
    clearance: float
    min_grip: float
    height_margin: float
    force: float


@dataclass(frozen=True)
class Obstacle:
    """An axis-aligned box on the table: centre (x, y) and half sizes [m], table frame;
    its height above the table top [m], or None when the file does not say (then no tool
    passes over it: the fingertip goes around it, and the robot's planning scene gets a
    column :data:`UNKNOWN_HEIGHT` tall)."""

    centre: tuple[float, float]
    half_size: tuple[float, float]
    height: float | None = None

    @property
    def top(self) -> float:
        """The height [m] that anything passing over the box must keep above."""
        return UNKNOWN_HEIGHT if self.height is None else self.height

    def distance(self, p_W: ArrayLike) -> FloatArray:
        """(N,) distance [m] in the table plane from points p_W (N, 2) to the box (0
        inside it)."""
        p = np.asarray(p_W, dtype=float).reshape(-1, 2)
        out = np.maximum(np.abs(p - np.asarray(self.centre)) - np.asarray(self.half_size), 0.0)
        return np.asarray(np.linalg.norm(out, axis=1), dtype=float)


@dataclass(frozen=True)
class Workcell:
    """Everything slide knows about the cell it works in.

    Attributes:
        table, fingertip, gripper, obstacles: as above.
        camera_extrinsics: the camera calibration file (X_WK), absolute path.
        planner: the ``planner:`` section (settings of ``slide_core.planning``).
        source: the file it was read from.
        p_EF: (3,) the fingertip's centre in the arm's end-effector link [m]
            (``fingertip.mount``: where the robot backends put the link to put the
            fingertip at a waypoint; the twin moves the fingertip itself).
    """

    table: Table
    fingertip: Fingertip
    gripper: Gripper
    obstacles: tuple[Obstacle, ...]
    camera_extrinsics: Path
    planner: dict[str, Any]
    source: Path
    p_EF: tuple[float, float, float]


def check_config_dir(path: str | Path, given: str) -> Path:
    """``path`` when it is a folder holding ``workcell.yaml``; WorkcellError saying so
    otherwise (``given``: how it was given, e.g. 'SLIDE_CONFIG_DIR='). A workcell file
    given for it read as '.../my_cell.yaml/workcell.yaml: cannot read the workcell file
    (Not a directory)'."""
    folder = Path(path)
    if folder.is_dir() and (folder / WORKCELL_FILE).is_file():
        return folder
    if folder.is_file():
        why = 'is a file'
    elif folder.is_dir():
        why = f'holds no {WORKCELL_FILE}'
    else:
        why = 'does not exist'
    raise WorkcellError(
        f'{given}{folder} {why}: it must be a folder holding the workcell as '
        f'{WORKCELL_FILE}, with the camera extrinsics file that one names (copy config/ '
        'and edit the copy)'
    )


def config_dir() -> Path:
    """The folder of slide's configuration files (see the module docstring)."""
    env = os.environ.get('SLIDE_CONFIG_DIR')
    if env:
        return check_config_dir(env, 'SLIDE_CONFIG_DIR=')
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        candidate = Path(prefix) / 'share' / 'slide_bringup' / 'config'
        if prefix and (candidate / WORKCELL_FILE).is_file():
            return candidate
    raise WorkcellError(
        "cannot find the configuration folder: set SLIDE_CONFIG_DIR to the repository's "
        'config/ folder, or source the workspace (scripts/run.sh does both)'
    )


def workcell_path(path: str | Path | None = None) -> Path:
    """``path`` if given, else ``workcell.yaml`` of :func:`config_dir`."""
    return Path(path) if path is not None else config_dir() / WORKCELL_FILE


MAX_MOUNT = 0.5
"""The farthest [m] the fingertip's centre may be from the arm's end-effector link."""
UNKNOWN_HEIGHT = 1.0
"""How tall [m] an obstacle of unknown height is taken to be wherever the arm's moves are
checked against it: taller than the arm passes over the table."""
MAX_OBSTACLE_HEIGHT = 3.0
"""The tallest [m] an obstacle's height may be given (a height in mm is refused)."""
MAX_GRIP_FORCE = 400.0
"""The most [N] a workcell's gripper may squeeze with, per finger."""


def _number(
    section: dict[str, Any],
    key: str,
    where: str,
    positive: bool = True,
    most: float | None = None,
    unit: str = 'm',
) -> float:
    """``section[key]``: finite, positive (or not negative), and at most ``most`` [unit]
    (a bound that catches a length in mm or cm: a fingertip 17 m above the table, a
    gripper opening 80 m, loaded)."""
    if key not in section:
        raise WorkcellError(f'{where}.{key}: missing')
    value = section[key]
    if not finite_number(value):
        hint = ''
        if isinstance(value, str):
            try:
                float(value)
                # (PyYAML reads 8e-3 as text: YAML 1.1 wants the dot)
                hint = ': YAML read it as text; write it with a dot (0.008 or 8.0e-3)'
            except ValueError:
                pass
        raise WorkcellError(f'{where}.{key}: must be a finite number, got {shown(value)}{hint}')
    if positive and value <= 0:
        raise WorkcellError(f'{where}.{key}: must be positive, got {value}')
    if not positive and value < 0:
        raise WorkcellError(f'{where}.{key}: must not be negative, got {value}')
    if most is not None and value > most:
        raise WorkcellError(
            f'{where}.{key}: {value} {unit} is more than a workcell has ({most} {unit} at most)'
            + (': is it in m?' if unit == 'm' else '')
        )
    return float(value)


SECTIONS: dict[str, tuple[str, ...]] = {
    'table': ('frame_id', 'depth', 'width', 'thickness', 'height'),
    'fingertip': ('radius', 'length', 'mu', 'height', 'mount'),
    'gripper': (
        'max_opening',
        'finger_depth',
        'finger_width',
        'clearance_under_table',
        'min_grip',
        'height_margin',
        'force',
    ),
    'camera': ('extrinsics',),
}
"""The keys of each section of a workcell file; ``obstacles`` and ``planner`` besides."""
OBSTACLE_KEYS = ('centre', 'half_size', 'height')


def _known(keys: Any, known: tuple[str, ...], where: str) -> None:
    """WorkcellError naming a key that is not one of ``known`` (a misspelt key was silently
    left out: ``obstacle:`` for ``obstacles:`` meant no obstacles)."""
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise WorkcellError(
            f'{where}unknown key {shown(unknown[0])}: the keys are {", ".join(known)}'
        )


def _section(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise WorkcellError(f'{key}: missing section (a mapping)')
    _known(value, SECTIONS[key], f'{key}: ')
    return value


def _pair(value: Any, where: str) -> tuple[float, float]:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(finite_number(v) for v in value)
    ):
        raise WorkcellError(f'{where}: must be two finite numbers [x, y], got {shown(value)}')
    return (float(value[0]), float(value[1]))


def parse_workcell(doc: Any, source: Path) -> Workcell:
    """Validate a parsed workcell document (raises WorkcellError naming the field)."""
    if not isinstance(doc, dict):
        raise WorkcellError(f'{source}: a workcell file is a YAML mapping')
    _known(doc, (*SECTIONS, 'obstacles', 'planner'), f'{source}: ')
    t = _section(doc, 'table')
    frame_id = t.get('frame_id', 'table')
    if not isinstance(frame_id, str) or not FRAME_NAME.fullmatch(frame_id):
        # ('/table' was taken, which tf2 refuses; 'world' made the workcell's URDF a link
        # joined to itself)
        raise WorkcellError(
            f'table.frame_id: {frame_id!r} is not a frame name tf2 takes (letters, digits '
            "and _, parts joined by /, no leading /): e.g. 'table'"
        )
    if frame_id == URDF_ROOT:
        raise WorkcellError(
            f"table.frame_id: {URDF_ROOT!r} is the workcell URDF's root link, which the "
            "table's frame hangs from: name the table's frame otherwise, e.g. 'table'"
        )
    table = Table(
        frame_id,
        _number(t, 'depth', 'table', most=5.0),
        _number(t, 'width', 'table', most=5.0),
        _number(t, 'thickness', 'table', most=0.5),
        _number(t, 'height', 'table', most=2.0),
    )
    f = _section(doc, 'fingertip')
    fingertip = Fingertip(
        _number(f, 'radius', 'fingertip', most=0.1),
        _number(f, 'length', 'fingertip', most=0.5),
        _number(f, 'mu', 'fingertip', positive=False, most=FRICTION_MAX, unit='(Coulomb)'),
        _number(f, 'height', 'fingertip', most=0.3),
    )
    if 2 * fingertip.radius >= min(table.depth, table.width):
        raise WorkcellError(
            f'fingertip.radius: {fingertip.radius} m is as wide as the table ({table.depth} x '
            f'{table.width} m): it could not come down beside an object on it (is it in m?)'
        )
    if fingertip.clearance <= 0:
        # (0 was taken: the bottom on the table top, dragged over it by any height error)
        raise WorkcellError(
            f'fingertip.height: {fingertip.height} m puts the fingertip on or into the table '
            f'(its length is {fingertip.length} m); give more than half its length'
        )
    mount = f.get('mount')
    if (
        not isinstance(mount, list | tuple)
        or len(mount) != 3
        or not all(finite_number(v) and abs(float(v)) <= MAX_MOUNT for v in mount)
    ):
        # (it was the executor's fingertip_offset parameter, which no launch argument or
        # file set: an arm ran with a fingertip assumed 10 cm along the link's z)
        raise WorkcellError(
            f"fingertip.mount: must be the fingertip centre in the arm's end-effector link, "
            f'three numbers [x, y, z] of at most {MAX_MOUNT} m, got {shown(mount)}'
        )
    g = _section(doc, 'gripper')
    gripper = Gripper(
        _number(g, 'max_opening', 'gripper', most=0.5),
        _number(g, 'finger_depth', 'gripper', most=0.3),
        _number(g, 'finger_width', 'gripper', most=0.3),
        _number(g, 'clearance_under_table', 'gripper', positive=False, most=0.5),
        _number(g, 'min_grip', 'gripper', most=0.3),
        _number(g, 'height_margin', 'gripper', positive=False, most=0.1),
        # (2000 N took 700 for 70.0, and the planner chose goals the real pads could not
        # hold; parallel grippers squeeze 70 N (Franka Hand) to 235 N (Robotiq 2F-85))
        _number(g, 'force', 'gripper', most=MAX_GRIP_FORCE, unit='N'),
    )
    if gripper.min_grip > gripper.finger_depth:
        raise WorkcellError(
            f'gripper.min_grip: {gripper.min_grip} m is longer than the pads '
            f'({gripper.finger_depth} m)'
        )
    if gripper.max_opening <= 2 * gripper.height_margin:
        raise WorkcellError(
            f'gripper.max_opening: {gripper.max_opening} m leaves no room for an object '
            f'inside its height_margin of {gripper.height_margin} m above and below'
        )
    raw = doc.get('obstacles') or []
    if not isinstance(raw, list):
        raise WorkcellError(
            'obstacles: must be a list of {centre: [x, y], half_size: [hx, hy]}, each with '
            'an optional height'
        )
    obstacles = []
    for i, o in enumerate(raw):
        if not isinstance(o, dict):
            raise WorkcellError(f'obstacles[{i}]: must be a mapping with centre and half_size')
        _known(o, OBSTACLE_KEYS, f'obstacles[{i}]: ')
        half = _pair(o.get('half_size'), f'obstacles[{i}].half_size')
        if min(half) <= 0:
            raise WorkcellError(f'obstacles[{i}].half_size: must be positive, got {half}')
        centre = _pair(o.get('centre'), f'obstacles[{i}].centre')
        if (
            centre[0] + half[0] <= 0.0
            or centre[0] - half[0] >= table.depth
            or abs(centre[1]) - half[1] >= table.width / 2
        ):
            raise WorkcellError(
                f'obstacles[{i}]: centre {list(centre)}, half_size {list(half)} lies wholly '
                f'off the table (x from 0 at the free edge to {table.depth} m, y within '
                f'+-{table.width / 2:g} m): is it in the table frame?'
            )
        height = (
            _number(o, 'height', f'obstacles[{i}]', most=MAX_OBSTACLE_HEIGHT)
            if o.get('height') is not None
            else None
        )
        obstacles.append(Obstacle(centre, half, height))
    blocked = _edge_blocked_by(obstacles, table.width)
    if blocked:
        which = 'it covers' if len(blocked) == 1 else 'together they cover'
        raise WorkcellError(
            f'obstacles{blocked}: {which} the whole free edge (x = 0, y within '
            f'+-{table.width / 2:g} m), so no object can be pushed out over it: move or '
            'shrink one'
        )
    camera = _section(doc, 'camera')
    extrinsics = camera.get('extrinsics')
    if not isinstance(extrinsics, str) or not extrinsics:
        raise WorkcellError('camera.extrinsics: must name the calibration file (X_WK)')
    planner = doc.get('planner') or {}
    if not isinstance(planner, dict):
        raise WorkcellError('planner: must be a mapping of planner settings')
    named = [k for k in planner if not isinstance(k, str)]
    if named:
        raise WorkcellError(f'planner: setting names are words, got {shown(named[0])}')
    return Workcell(
        table,
        fingertip,
        gripper,
        tuple(obstacles),
        (source.parent / extrinsics).resolve(),
        dict(planner),
        source,
        (float(mount[0]), float(mount[1]), float(mount[2])),
    )


def _edge_blocked_by(obstacles: list[Obstacle], width: float) -> list[int]:
    """The indices of the obstacles that, standing on the free edge (x = 0) together, cover
    it across the table's whole ``width`` [m]; empty when some of it is left free. (A goal
    leaves part of the object on the table next to the edge: where an obstacle stands on
    the edge, none can be.)"""
    on_edge = sorted(
        (o.centre[1] - o.half_size[1], o.centre[1] + o.half_size[1], i)
        for i, o in enumerate(obstacles)
        if o.centre[0] - o.half_size[0] <= 0.0 < o.centre[0] + o.half_size[0]
    )
    reach, used = -width / 2, list[int]()
    for lo, hi, i in on_edge:
        if lo > reach:
            return []  # a gap from reach to lo
        if hi > reach:
            reach, used = hi, [*used, i]
        if reach >= width / 2:
            return sorted(used)
    return []


def load_workcell(path: str | Path | None = None) -> Workcell:
    """Read and validate the workcell file (:func:`workcell_path` finds the default); a
    WorkcellError names the file (the one a command read need not be the one in mind)."""
    p = workcell_path(path)
    doc = read_yaml(p, WorkcellError, 'workcell file')
    try:
        return parse_workcell(doc, p)
    except WorkcellError as exc:
        if str(exc).startswith(str(p)):
            raise
        raise WorkcellError(f'{p}: {exc}') from None
