"""Show the slide workcell in RViz: robot_state_publisher with the workcell's URDF
(urdf/workcell.urdf.in with the dimensions of config/workcell.yaml).

Runs on a machine with ROS 2 Jazzy from apt (launch, launch_ros, rviz2 are not on PyPI):
    ros2 launch slide_bringup display.launch.py [rviz:=false]
"""

from __future__ import annotations

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from slide_bringup.description import urdf_template, workcell_urdf
from slide_bringup.graph import config_dir, rviz_config
from slide_core.model import load_workcell


def generate_launch_description() -> LaunchDescription:
    cfg = config_dir()  # $SLIDE_CONFIG_DIR, else the installed share/slide_bringup/config
    robot_description = workcell_urdf(load_workcell(cfg / 'workcell.yaml'), urdf_template(cfg))
    return LaunchDescription(
        [
            DeclareLaunchArgument('rviz', default_value='true', description='start RViz'),
            Node(
                package='robot_state_publisher',
                executable='robot_state_publisher',
                parameters=[{'robot_description': robot_description}],
            ),
            Node(
                package='rviz2',
                executable='rviz2',
                # (without it RViz opened on a 'map' frame that nothing publishes)
                arguments=['-d', str(rviz_config(cfg))],
                condition=IfCondition(LaunchConfiguration('rviz')),
            ),
        ]
    )
