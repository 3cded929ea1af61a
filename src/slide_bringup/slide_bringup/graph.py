"""The pre-grasp graph: one description of its nodes, read by ``launch/pregrasp.launch.py``
and by the pip-only runner ``slide launch pregrasp`` (no second list anywhere).

:func:`pregrasp` turns the launch arguments into the node list: package, executable, node
name, parameters and remappings. With ``backend:=twin`` the twin node stands in for the
camera, the F/T sensor and the arm; with ``fr3`` or ``lbr`` the robot's drivers do
(realsense2_camera, the F/T driver at the sensor's address, the vendor's MoveIt bring-up,
which the launch file includes on the robot PC) and the executor uses MoveIt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
import math
import os
from pathlib import Path
import random
import socket
from typing import TYPE_CHECKING, Any

from ati_netft.filters import FORCE_LIMIT_MAX_N

from slide_core.task import SEED_MAX

if TYPE_CHECKING:
    from slide_core.model import Workcell

FORCE_LIMIT_N = 25.0
"""The force [N] at which a push stops and retracts, by default: the graph's F/T driver
limit, and ``slide episode``'s in the twin."""

ARGUMENTS: dict[str, tuple[str, str]] = {
    'backend': ('twin', 'twin, fr3 or lbr'),
    'object': ('hammer', 'twin: library object name or object .yaml file'),
    'seed': ('0', 'seed of the episode (twin start pose, exploration, paths)'),
    'exploration': (
        'most-distinctive',
        'exploratory pushes after the first: most-distinctive (under a belief of the pushes '
        'so far, paper 2) or random',
    ),
    'support': (
        'rigid',
        "how the table carries the object's cells in identification and planning: rigid (a "
        "rigid body's linear pressure) or cell-mass (each cell's own weight, the papers')",
    ),
    'rviz': ('false', 'start RViz with config/slide.rviz (robot PC)'),
    'record': ('', 'record the episode topics to this bag folder'),
    'exit_on_done': (
        'false',
        'stop every node when the episode ends (under slide launch its outcome is the exit code)',
    ),
    'sensor_address': ('192.168.1.1', 'fr3/lbr: the Net F/T sensor'),
    'robot_ip': ('', "fr3: the arm's controller, for the vendor's bring-up (required there)"),
    'config_dir': (
        '',
        "folder with workcell.yaml and the camera extrinsics (default: the package's)",
    ),
    'start_episode': ('true', 'start the episode as soon as the graph is up'),
    'ft_ports': ('auto', 'twin: ports of the emulated sensor (RDT,TCP,HTTP), or auto: free ones'),
    'force_limit': (
        f'{FORCE_LIMIT_N:g}',
        'the F/T driver raises a limit and the executor stops and retracts the push when the '
        'force exceeds this [N] (the sensor is tared before each push); 0: off. Sliding an '
        'object of 2 kg on a friction of 1.2 takes 24 N',
    ),
    'ft_offset': (
        '0,0,0,0,0,0',
        'twin: what the emulated F/T sensor reads with nothing touching, as an untared one '
        'does: fx,fy,fz [N],tx,ty,tz [N m] in its frame',
    ),
}
BACKENDS = ('twin', 'fr3', 'lbr')
CLOUD_TOPIC = '/camera/camera/depth/color/points'
ARM_SENSOR_MOUNT = [1.0, 0.0, 0.0, 0.0]
"""The executor's ``sensor_mount`` on an arm: the F/T sensor square on the flange, whose z
axis points at the table (``slide_ros.moveit_backend.link_pose``), in the tool frame the
executor turns wrenches by (z up, x along the tool's yaw): a half turn about x. The
twin's sensor has the world's axes (the default, identity); with identity on the arm, Fy
and Fz came out mirrored."""

ARMS = {
    'fr3': {
        'planning_group': 'fr3_arm',
        'end_effector_link': 'fr3_hand_tcp',
        'gripper_action': '/fr3_gripper/gripper_action',
        'gripper_held': 'reached_goal',
        'joint_states_topic': '/joint_states',
        'sensor_mount': ARM_SENSOR_MOUNT,
        'moveit_package': 'franka_fr3_moveit_config',
        'moveit_launch': 'moveit.launch.py',
        # Its launch arguments ({name} from ours); it requires robot_ip, and starts RViz of
        # its own unless told not to (rviz:=true starts slide's).
        'moveit_arguments': {'robot_ip': '{robot_ip}', 'use_rviz': 'false'},
    },
    'lbr': {
        'planning_group': 'arm',
        'end_effector_link': 'link_ee',
        'gripper_action': '/gripper_controller/gripper_cmd',
        'gripper_held': 'stalled',
        'joint_states_topic': '/lbr/joint_states',  # (lbr_bringup's nodes are under /lbr)
        'sensor_mount': ARM_SENSOR_MOUNT,
        'moveit_package': 'lbr_bringup',
        'moveit_launch': 'move_group.launch.py',
        'moveit_arguments': {},
    },
}


class GraphError(ValueError):
    """A launch argument that does not describe a graph (the message says which)."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph."""

    package: str
    executable: str
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    robot_only: bool = False  # started by the launch file on the robot PC only
    namespace: str = ''  # '' : the root namespace
    arguments: tuple[str, ...] = ()  # command-line arguments before --ros-args


def config_dir(value: str = '') -> Path:
    """The configuration folder: ``value``, else ``$SLIDE_CONFIG_DIR``, else the installed
    ``share/slide_bringup/config``; a given folder must hold ``workcell.yaml``."""
    from slide_core.model import WorkcellError, check_config_dir

    env = os.environ.get('SLIDE_CONFIG_DIR')
    try:
        if value:
            return check_config_dir(value, 'config_dir:=')
        if env:
            return check_config_dir(env, 'SLIDE_CONFIG_DIR=')
    except WorkcellError as exc:
        raise GraphError(str(exc)) from None
    shipped = installed_config()
    if shipped is not None:
        return shipped
    raise GraphError('cannot find the config folder: pass config_dir:=DIR or set SLIDE_CONFIG_DIR')


def installed_config() -> Path | None:
    """The installed ``share/slide_bringup/config`` (None when it is not installed)."""
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        candidate = Path(prefix) / 'share' / 'slide_bringup' / 'config'
        if prefix and candidate.is_dir():
            return candidate
    return None


RVIZ_CONFIG = 'slide.rviz'


def rviz_config(cfg: Path) -> Path:
    """RViz's configuration: ``cfg``'s own, else the one slide ships (a config_dir:= with
    only the workcell and the extrinsics in it started RViz with no displays)."""
    own = cfg / RVIZ_CONFIG
    shipped = installed_config()
    if own.is_file() or shipped is None:
        return own
    return shipped / RVIZ_CONFIG


def arguments(given: Mapping[str, str]) -> dict[str, str]:
    """The launch arguments with defaults filled in; GraphError on an unknown or bad one."""
    unknown = sorted(set(given) - set(ARGUMENTS))
    if unknown:
        raise GraphError(
            f'unknown argument {unknown[0]!r} (known: {", ".join(sorted(ARGUMENTS))})'
        )
    out = {k: v for k, (v, _) in ARGUMENTS.items()}
    out.update(given)
    if out['backend'] not in BACKENDS:
        raise GraphError(f'backend must be one of {", ".join(BACKENDS)}, got {out["backend"]!r}')
    for flag in ('rviz', 'exit_on_done', 'start_episode'):
        if out[flag] not in ('true', 'false'):
            raise GraphError(f'{flag} must be true or false, got {out[flag]!r}')
    if out['exploration'] not in ('random', 'most-distinctive'):
        raise GraphError(
            f'exploration must be random or most-distinctive, got {out["exploration"]!r}'
        )
    if out['support'] not in ('rigid', 'cell-mass'):
        raise GraphError(f'support must be rigid or cell-mass, got {out["support"]!r}')
    try:
        seed = int(out['seed'])
    except ValueError:
        raise GraphError(f'seed must be an integer, got {out["seed"]!r}') from None
    if not 0 <= seed <= SEED_MAX:  # the nodes refuse it later, one by one
        raise GraphError(f'seed must be 0 to {SEED_MAX}, got {seed}')
    ft_offset(out['ft_offset'])
    force_limit(out['force_limit'])
    if out['backend'] == 'fr3' and not out['robot_ip']:
        raise GraphError("backend fr3 needs robot_ip:=ADDRESS (the arm's controller)")
    # Said by the twin and the recorder as they started, every other node came up, and
    # the launch ran on without them.
    if out['backend'] == 'twin':
        from slide_core.errors import SlideInputError
        from slide_core.model import load_object

        try:
            load_object(out['object'])
        except SlideInputError as exc:
            raise GraphError(f'object: {exc}') from None
    if out['record']:
        record_target(out['record'])
    return out


def record_target(text: str) -> Path:
    """The ``record`` argument's bag folder; GraphError when it exists or cannot be made
    (the recorder's own refusals, said before any node starts)."""
    from slide_core.errors import SlideInputError
    from slide_core.files import check_bag_folder, check_output

    try:
        bag = check_bag_folder(Path(text).expanduser(), 'record:')
        return check_output(bag, (), 'record:', directory=True)
    except SlideInputError as exc:
        raise GraphError(str(exc)) from None


def force_limit(text: str) -> float:
    """The ``force_limit`` argument [N]; GraphError unless 0 (off) to the F/T driver's
    largest limit."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= FORCE_LIMIT_MAX_N):
        raise GraphError(
            f'force_limit must be newtons from 0 (off) to {FORCE_LIMIT_MAX_N:g}, got {text!r}'
        )
    return value


def ft_offset(text: str) -> list[float]:
    """The six numbers of the ``ft_offset`` argument (fx,fy,fz,tx,ty,tz); GraphError when
    it is not six finite numbers."""
    try:
        values = [float(v) for v in text.split(',')]
    except ValueError:
        values = []
    if len(values) != 6 or not all(math.isfinite(v) for v in values):
        raise GraphError(f'ft_offset must be six numbers fx,fy,fz,tx,ty,tz [N, N m], got {text!r}')
    return values


def dds_ports(domain_id: int) -> range:
    """The UDP ports DDS (RTPS's default port mapping, as Fast DDS and Cyclone DDS use it)
    gives ROS domain ``domain_id``: 7400 + 250 d and the 249 after it. Its participants bind
    them as they start, so a port handed out before then may be taken by then."""
    base = 7400 + 250 * domain_id
    return range(base, base + 250)


def ros_domain_ports() -> range:
    """:func:`dds_ports` of this process's ``ROS_DOMAIN_ID`` (0 when unset, as rcl takes
    it; one that is not a number, which rcl refuses, as 0 too)."""
    try:
        domain = int(os.environ.get('ROS_DOMAIN_ID', '0') or 0)
    except ValueError:
        domain = 0
    return dds_ports(domain)


def ephemeral_ports() -> range:
    """The ports the kernel gives a socket bound to port 0 (Linux's ip_local_port_range;
    IANA's 49152 to 65535 where that cannot be read)."""
    try:
        low, high = (int(v) for v in Path(EPHEMERAL_RANGE_FILE).read_text().split())
    except (OSError, ValueError):
        low, high = 49152, 65535
    return range(low, high + 1)


EPHEMERAL_RANGE_FILE = '/proc/sys/net/ipv4/ip_local_port_range'
FIRST_PORT = 10000
"""The lowest port :func:`free_ports` hands out (below it lie services' fixed ports)."""


def free_ports(count: int) -> list[int]:
    """``count`` ports that are free for both UDP and TCP on loopback now, and that nothing
    else takes before their user binds them: outside the kernel's ephemeral range (any socket
    bound to port 0 meanwhile, DDS's senders among them, could get one there) and outside the
    ROS domain's DDS ports (:func:`ros_domain_ports`). Random among those, so two graphs
    started at once seldom pick the same; where no such range is left, the kernel's picks
    outside the domain's ports."""
    ephemeral, domain = ephemeral_ports(), ros_domain_ports()
    pool = [p for p in range(FIRST_PORT, 65536) if p not in ephemeral and p not in domain]
    rng = random.SystemRandom()
    ports: list[int] = []
    held = []
    for _ in range(100 * count):
        if len(ports) == count:
            break
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            udp.bind(('127.0.0.1', rng.choice(pool) if len(pool) > 100 * count else 0))
            port = udp.getsockname()[1]
            if port in domain:  # (the kernel's pick)
                raise OSError(f"port {port} is the ROS domain's")
            tcp.bind(('127.0.0.1', port))
        except OSError:
            udp.close()
            tcp.close()
            continue
        held += [udp, tcp]
        ports.append(port)
    for s in held:
        s.close()
    if len(ports) < count:
        raise GraphError(f'found {len(ports)} of {count} free ports on 127.0.0.1: free some')
    return ports


def ft_ports(value: str) -> tuple[int, int, int]:
    """The twin sensor's (RDT, TCP, HTTP) ports from the ``ft_ports`` argument."""
    if value == 'auto':
        rdt, tcp, http = free_ports(3)
        return rdt, tcp, http
    try:
        rdt, tcp, http = (int(v) for v in value.split(','))
    except ValueError:
        raise GraphError(f'ft_ports must be auto or RDT,TCP,HTTP, got {value!r}') from None
    if not all(0 < p < 65536 for p in (rdt, tcp, http)):
        raise GraphError(f'ft_ports must be ports (1 to 65535), got {value!r}')
    return rdt, tcp, http


def camera_extrinsics(cfg: Path) -> Path:
    """The camera's extrinsics file (X_WK): the one ``cfg/workcell.yaml`` names under
    ``camera: extrinsics:``, for the twin and the robot alike. (The robot backends read a
    ``camera.yaml`` that nothing documented or shipped, while the workcell file, which the
    twin's camera and offline identification read, says where the hand-eye result is.)"""
    from slide_core.model import load_workcell

    return _extrinsics(load_workcell(cfg / 'workcell.yaml'))


def _extrinsics(cell: Workcell) -> Path:
    """``cell``'s camera extrinsics file; GraphError unless it gives the camera in the
    workcell's table frame."""
    from slide_core.errors import SlideInputError
    from slide_core.perception import read_extrinsics

    path = cell.camera_extrinsics
    try:
        parent = read_extrinsics(path).parent_frame
    except SlideInputError as exc:
        raise GraphError(str(exc)) from None
    if parent != cell.table.frame_id:
        # (the camera's transform hung off a frame nothing else used, and perception's
        # cloud was mapped into a table frame the rest of the graph did not call its own)
        raise GraphError(
            f"{path}: parent_frame {parent!r} is not the workcell's table frame "
            f'{cell.table.frame_id!r} ({cell.source}): the extrinsics must give the camera '
            'in the table frame'
        )
    return path


def pregrasp(given: Mapping[str, str]) -> list[NodeSpec]:
    """The nodes of the pre-grasp graph for these launch arguments."""
    a = arguments(given)
    rdt, tcp, http = ft_ports(a['ft_ports']) if a['backend'] == 'twin' else (0, 0, 0)
    cfg = config_dir(a['config_dir'])
    workcell = str(cfg / 'workcell.yaml')
    from slide_core.model import load_workcell

    cell = load_workcell(cfg / 'workcell.yaml')
    extrinsics = str(_extrinsics(cell))
    # The table frame's name is the workcell's (the twin and perception took their own).
    frame = cell.table.frame_id
    from slide_core.io.perceive import pusher_keep_out
    from slide_core.perception import workspace_box

    box = workspace_box(cell.table.depth, cell.table.width)
    keep_out = pusher_keep_out(cell.fingertip.radius)
    seed = int(a['seed'])
    twin = a['backend'] == 'twin'
    nodes: list[NodeSpec] = []
    if twin:
        nodes.append(
            NodeSpec(
                'slide_sim',
                'twin_node',
                'twin',
                {
                    'object': a['object'],
                    'workcell_file': workcell,
                    'table_frame': frame,
                    'seed': seed,
                    # A 500 Hz sensor and 30 Hz tool poses leave the CPU to perception.
                    'ft_rate_hz': 500.0,
                    'tool_rate_hz': 30.0,
                    'rdt_port': rdt,
                    'tcp_port': tcp,
                    'http_port': http,
                    'ft_offset': ft_offset(a['ft_offset']),
                },
            )
        )
    else:
        nodes.append(
            NodeSpec(
                'realsense2_camera',
                'realsense2_camera_node',
                'camera',
                # The cloud in the colour optical frame, and no TF of its own: the launch
                # file publishes that frame from the hand-eye extrinsics (a second parent,
                # camera_link, broke the tree).
                {'pointcloud.enable': True, 'align_depth.enable': True, 'publish_tf': False},
                robot_only=True,
                # Its topics are private (~/depth/color/points): in the namespace 'camera',
                # as realsense2_camera's own rs_launch.py starts it, the cloud is CLOUD_TOPIC.
                namespace='camera',
            )
        )
    nodes += [
        NodeSpec(
            'ati_netft',
            'netft_node',
            'netft',
            {
                'address': '127.0.0.1' if twin else a['sensor_address'],
                'frame_id': 'ft_sensor',
                'configure_retries': -1,
                'retry_backoff_s': 0.5,
                'retry_backoff_max_s': 2.0,
                # Identification reads pushes on 10 ms steps; block means of the records at
                # 250 Hz lose nothing it needs (the limit monitor still sees every record).
                'max_publish_rate_hz': 250.0,
                'force_limit_n': force_limit(a['force_limit']),
                **({'rdt_port': rdt, 'http_port': http, 'tcp_port': tcp} if twin else {}),
            },
        ),
        NodeSpec(
            'slide_perception',
            'perception_node',
            'perception',
            {
                'extrinsics_file': extrinsics,
                'table_frame': frame,
                'workcell_file': workcell,  # its obstacles
                # The workcell's table and fingertip (its defaults fit the 0.8 x 1.2 m
                # table alone: on a larger one the object was 'no object there').
                'workspace_min': list(box[0]),
                'workspace_max': list(box[1]),
                'pusher_keep_out': [keep_out[0], -keep_out[1], keep_out[1]],
            },
            (('points', CLOUD_TOPIC),),
        ),
        NodeSpec(
            'slide_ros',
            'executor_node',
            'executor',
            {
                'backend': 'twin' if twin else 'moveit_py',
                'workcell_file': workcell,
                # Configure waits for the arm and the F/T stream.
                'configure_retries': -1,
                'retry_backoff_s': 0.5,
                'retry_backoff_max_s': 2.0,
                **(
                    {}
                    if twin
                    else {
                        k: v for k, v in ARMS[a['backend']].items() if not k.startswith('moveit_')
                    }
                ),
            },
            (
                ('ft_wrench', '/netft/wrench'),
                ('ft_limit', '/netft/limit_exceeded'),
                ('ft_bias', '/netft/bias'),
            ),
        ),
        NodeSpec(
            'slide_ros',
            'identification_node',
            'identification',
            {
                'workcell_file': workcell,
                'support': a['support'],
                # (for bag goals whose wrenches are in the sensor's frame)
                **({} if twin else {'sensor_mount': ARM_SENSOR_MOUNT}),
            },
        ),
        NodeSpec(
            'slide_ros',
            'planner_node',
            'planner',
            {'workcell_file': workcell, 'exploration': a['exploration']},
        ),
        NodeSpec(
            'slide_ros',
            'behaviour_node',
            'behaviour',
            {
                'workcell_file': workcell,
                'seed': seed,
                'start_on_activate': a['start_episode'] == 'true',
                'exit_on_done': a['exit_on_done'] == 'true',
                'interim_beliefs': a['exploration'] != 'random',
                # Configure waits for the other nodes and a perceived object.
                'configure_retries': -1,
                'retry_backoff_s': 0.5,
                'retry_backoff_max_s': 2.0,
            },
        ),
    ]
    if a['record']:
        nodes.append(NodeSpec('slide_ros', 'recorder_node', 'recorder', {'bag': a['record']}))
    if a['rviz'] == 'true':
        rviz = ('-d', str(rviz_config(cfg)))
        nodes.append(NodeSpec('rviz2', 'rviz2', 'rviz', {}, robot_only=True, arguments=rviz))
    return nodes


def select(specs: list[NodeSpec], names: Sequence[str]) -> list[NodeSpec]:
    """The named nodes of ``specs``, in the graph's order (a part of the graph to run)."""
    unknown = set(names) - {s.name for s in specs}
    if unknown:
        raise GraphError(
            f'no node {", ".join(sorted(unknown))} in this graph; it has '
            f'{", ".join(s.name for s in specs)}'
        )
    return [s for s in specs if s.name in names]
