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


SUBPACKAGES = (
    'geometry',
    'model',
    'physics',
    'perception',
    'identification',
    'planning',
    'task',
    'io',
)


def test_every_stage_has_a_public_face_that_resolves() -> None:
    import importlib

    for name in SUBPACKAGES:
        module = importlib.import_module(f'slide_core.{name}')
        assert module.__doc__, name
        exported = getattr(module, '__all__', None)
        assert exported, f'slide_core.{name} has no __all__'
        for attr in exported:
            assert hasattr(module, attr), f'slide_core.{name}.{attr}'


def test_no_module_imports_another_modules_private_names() -> None:
    import ast

    offenders = []
    for path in PACKAGE_DIR.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('slide_core'):
                private = [a.name for a in node.names if a.name.startswith('_')]
                if private:
                    offenders.append(f'{path.relative_to(PACKAGE_DIR)}: {private}')
    assert offenders == []


def test_stages_import_each_other_only_through_their_public_faces() -> None:
    import ast

    offenders = []
    for path in PACKAGE_DIR.rglob('*.py'):
        own = path.relative_to(PACKAGE_DIR).parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('slide_core.'):
                parts = node.module.split('.')
                if len(parts) > 2 and parts[1] != own and parts[1] in SUBPACKAGES:
                    offenders.append(f'{path.relative_to(PACKAGE_DIR)}: {node.module}')
    assert offenders == []
