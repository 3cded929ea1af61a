"""Show the slide workcell in RViz: robot_state_publisher with urdf/workcell.urdf.

Runs on a machine with ROS 2 Jazzy from apt (launch, launch_ros, rviz2 are not on PyPI):
    ros2 launch slide_bringup display.launch.py [rviz:=false]
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    share = get_package_share_directory('slide_bringup')
    with open(os.path.join(share, 'urdf', 'workcell.urdf')) as f:
        robot_description = f.read()
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
                condition=IfCondition(LaunchConfiguration('rviz')),
            ),
        ]
    )
