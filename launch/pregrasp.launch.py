"""The pre-grasp graph: ``ros2 launch slide_bringup pregrasp.launch.py``.

    ros2 launch slide_bringup pregrasp.launch.py backend:=twin object:=hammer
    ros2 launch slide_bringup pregrasp.launch.py backend:=fr3 robot_ip:=172.16.0.2 \\
        sensor_address:=192.168.1.1 rviz:=true record:=/data/episode_07

The node list, parameters and remappings come from :func:`slide_bringup.graph.pregrasp`,
the one description that the pip-only runner (``slide launch pregrasp``) reads too. On
the robot PC this file adds what only exists there: realsense2_camera, the arm vendor's
MoveIt bring-up, RViz with ``config/slide.rviz``, the table -> camera transform from the
extrinsics file (tf2_ros), the twin's workcell for RViz (robot_state_publisher), and
``ros2 bag record`` of the episode topics for ``record:=``.

``launch`` and ``launch_ros`` are imported only when the launch file runs
(:func:`generate_launch_description`); :func:`node_actions` is plain Python, so tests
compare it with the runner's commands on machines without them.
"""

from __future__ import annotations

from typing import Any


def node_actions(arguments: dict[str, str]) -> list[dict[str, Any]]:
    """The launch_ros ``Node`` keyword arguments of every node of the graph (plain data)."""
    from slide_bringup.graph import pregrasp

    out = []
    for spec in pregrasp(arguments):
        if spec.package == 'slide_ros' and spec.executable == 'recorder_node':
            continue  # on the robot PC, ros2 bag record records (see generate_launch_description)
        action: dict[str, Any] = {
            'package': spec.package,
            'executable': spec.executable,
            'name': spec.name,
            'parameters': [dict(spec.parameters)],
            'remappings': list(spec.remappings),
            'output': 'screen',
        }
        if spec.namespace:
            action['namespace'] = spec.namespace
        if spec.arguments:
            action['arguments'] = list(spec.arguments)
        out.append(action)
    return out


def generate_launch_description() -> Any:
    from launch import LaunchDescription
    from launch.actions import (
        DeclareLaunchArgument,
        ExecuteProcess,
        IncludeLaunchDescription,
        OpaqueFunction,
        RegisterEventHandler,
        Shutdown,
    )
    from launch.event_handlers import OnProcessExit
    from launch.launch_description_sources import PythonLaunchDescriptionSource
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node
    from launch_ros.parameter_descriptions import ParameterValue

    from slide_bringup.graph import ARGUMENTS, ARMS, arguments, camera_extrinsics, config_dir
    from slide_ros.topics import EPISODE_TOPICS

    def typed(parameters: dict[str, Any]) -> dict[str, Any]:
        # launch_ros reads a plain string parameter as YAML: object:=123 reached the twin
        # as an integer, and 'true' as a bool. Strings stay strings.
        return {
            k: ParameterValue(v, value_type=str) if isinstance(v, str) else v
            for k, v in parameters.items()
        }

    def setup(context: Any) -> list[Any]:
        given = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
        a = arguments(given)
        nodes = {
            kwargs['name']: Node(**{**kwargs, 'parameters': [typed(kwargs['parameters'][0])]})
            for kwargs in node_actions(a)
        }
        actions: list[Any] = list(nodes.values())
        cfg = config_dir(a['config_dir'])
        if a['backend'] != 'twin':
            from ament_index_python.packages import get_package_share_directory

            arm = ARMS[a['backend']]
            share = get_package_share_directory(str(arm['moveit_package']))
            moveit_arguments = {
                k: str(v).format(**a) for k, v in dict(arm['moveit_arguments']).items()
            }
            actions.append(
                IncludeLaunchDescription(
                    PythonLaunchDescriptionSource(f'{share}/launch/{arm["moveit_launch"]}'),
                    launch_arguments=moveit_arguments.items(),
                )
            )
        actions.append(_camera_tf(Node, camera_extrinsics(cfg)))
        if a['backend'] == 'twin':
            # The workcell's table for RViz's Robot display (on the robot the arm vendor's
            # bring-up publishes its own robot_description).
            from slide_bringup.description import urdf_template, workcell_urdf
            from slide_core.model import load_workcell

            urdf = workcell_urdf(load_workcell(cfg / 'workcell.yaml'), urdf_template(cfg))
            actions.append(
                Node(
                    package='robot_state_publisher',
                    executable='robot_state_publisher',
                    parameters=[{'robot_description': ParameterValue(urdf, value_type=str)}],
                )
            )
        if a['exit_on_done'] == 'true':
            # The behaviour node exits when the episode ends; the graph goes with it.
            actions.append(
                RegisterEventHandler(
                    OnProcessExit(
                        target_action=nodes['behaviour'],
                        on_exit=[Shutdown(reason='the episode ended')],
                    )
                )
            )
        if a['record']:
            topics = [t.name for t in EPISODE_TOPICS if a['backend'] == 'twin' or not t.twin_only]
            actions.append(
                ExecuteProcess(
                    cmd=['ros2', 'bag', 'record', '-s', 'mcap', '-o', a['record'], *topics],
                    output='screen',
                )
            )
        return actions

    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in ARGUMENTS.items()
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=setup)])


def _camera_tf(node: Any, extrinsics: Any) -> Any:
    """tf2_ros' static transform table -> camera optical frame from the extrinsics file."""
    from slide_core.perception import read_extrinsics

    e = read_extrinsics(extrinsics)  # checked as the graph and perception check it
    t, q = e.p_WK.tolist(), e.q_WK.tolist()
    return node(
        package='tf2_ros',
        executable='static_transform_publisher',
        arguments=[
            '--x',
            str(t[0]),
            '--y',
            str(t[1]),
            '--z',
            str(t[2]),
            '--qx',
            str(q[0]),
            '--qy',
            str(q[1]),
            '--qz',
            str(q[2]),
            '--qw',
            str(q[3]),
            '--frame-id',
            e.parent_frame,
            '--child-frame-id',
            e.child_frame,
        ],
    )
