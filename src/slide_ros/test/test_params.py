"""Parameters on a node's command line reach it with the types they have here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from slide_ros.params import ros_args

NODE = textwrap.dedent(
    """
    import json
    import sys

    import rclpy
    from rclpy.node import Node

    rclpy.init(args=sys.argv)
    node = Node('typed')
    names = json.loads(sys.argv[1])
    for name, default in names.items():
        node.declare_parameter(name, default)
    print(json.dumps({name: node.get_parameter(name).value for name in names}))
    """
)


@pytest.mark.ros
def test_strings_stay_strings_on_the_command_line() -> None:
    # ROS reads a -p value as YAML: record:=123 made the bag name an integer (the recorder
    # died), and 'true', 'on' or a path with '#' changed type or were cut.
    values = {
        'bag': '123',
        'flag_like': 'true',
        'path': '/tmp/run #2/bag',
        'empty': '',
        'quoted': 'it\'s "q" \u00fc',
        'count': 3,
        'ratio': 0.5,
        'on': True,
        'pose': [0.1, -0.2, 3.0],
        'names': ['/ft/wrench', 'yes'],
    }
    defaults = {k: ('x' if isinstance(v, str) else v) for k, v in values.items()}
    out = subprocess.run(
        [sys.executable, '-c', NODE, json.dumps(defaults), *ros_args(values)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == values
