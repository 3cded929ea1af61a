"""slide_core is free of ROS: it imports and works where rclpy does not exist."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import slide_core

PACKAGE_DIR = pathlib.Path(slide_core.__file__).parent

# Run in a fresh interpreter in which any attempt to import ROS fails loudly.
_BLOCK_ROS = r"""
import importlib, pkgutil, sys
BLOCKED = ('rclpy', 'rosidl', 'rmw', 'slide_interfaces', 'std_msgs', 'geometry_msgs',
           'sensor_msgs', 'launch', 'launch_ros')
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError(f'ROS import of {name} from slide_core')
        return None
sys.meta_path.insert(0, Block())
import slide_core
names = [m.name for m in pkgutil.walk_packages(slide_core.__path__, 'slide_core.')]
for name in names:
    importlib.import_module(name)
print(len(names) + 1)
"""


def test_imports_every_module_with_ros_absent() -> None:
    out = subprocess.run(
        [sys.executable, '-c', _BLOCK_ROS], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) >= 1


def test_no_source_file_mentions_a_ros_import() -> None:
    offenders = []
    for path in PACKAGE_DIR.rglob('*.py'):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(('import rclpy', 'from rclpy', 'from slide_interfaces')):
                offenders.append(f'{path.name}: {stripped}')
    assert offenders == []


def test_version_is_exposed() -> None:
    assert slide_core.__version__.count('.') == 2
