"""Parameters of every node, declared from one table per node.

A :class:`Param` carries the name, default, description, whether it may change at run
time, and its range or choices; :func:`declare` declares a table on a node with matching
descriptors (ranges that ROS checks, read-only flags) and validates choices and ranges in
an on-set callback, so a bad ``--ros-args -p`` value is refused with a reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import json
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter

Value = bool | int | float | str | list[float] | list[str]


@dataclass(frozen=True)
class Param:
    """One parameter: name, default, description; ``read_only`` when it cannot change
    while the node runs; ``low``/``high`` bounds of a number; ``choices`` of a string."""

    name: str
    default: Value
    description: str
    read_only: bool = True
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def descriptor(self) -> ParameterDescriptor:
        d = ParameterDescriptor(description=self.description, read_only=self.read_only)
        if self.choices:
            d.additional_constraints = 'one of: ' + ', '.join(self.choices)
        if self.low is not None and self.high is not None:
            if isinstance(self.default, bool):
                pass
            elif isinstance(self.default, int):
                d.integer_range = [
                    IntegerRange(from_value=int(self.low), to_value=int(self.high), step=1)
                ]
            elif isinstance(self.default, float):
                d.floating_point_range = [
                    FloatingPointRange(from_value=float(self.low), to_value=float(self.high))
                ]
        return d

    def check(self, value: Any) -> str:
        """'' when ``value`` is acceptable, else the reason."""
        if self.choices and value not in self.choices:
            return f'{self.name} must be one of {", ".join(self.choices)}, got {value!r}'
        if isinstance(value, int | float) and not isinstance(value, bool):
            if self.low is not None and value < self.low:
                return f'{self.name} must be >= {self.low}, got {value}'
            if self.high is not None and value > self.high:
                return f'{self.name} must be <= {self.high}, got {value}'
        return ''


class ParameterError(ValueError):
    """A parameter value the node cannot run with (the message says which and why)."""


MAX_POSE_AGE = Param(
    'max_pose_age_s',
    3.0,
    'the oldest object pose a push is resolved at [s]',
    read_only=False,
    low=0.01,
    high=60.0,
)
"""Shared by the executor (refuses older poses) and the behaviour (waits for a younger one)."""


def declare(node: Node, table: Sequence[Param]) -> dict[str, Any]:
    """Declare ``table`` on ``node`` and return the values; raise ParameterError (one line)
    on a bad initial value. Later changes are validated by the same rules."""
    by_name = {p.name: p for p in table}
    values: dict[str, Any] = {}
    for p in table:
        try:
            values[p.name] = node.declare_parameter(p.name, p.default, p.descriptor()).value
        except ParameterException as exc:
            raise ParameterError(f'parameter {p.name}: {exc}') from None
        reason = p.check(values[p.name])
        if reason:
            raise ParameterError(reason)

    def on_set(params: list[Parameter]) -> SetParametersResult:
        for param in params:
            spec = by_name.get(param.name)
            reason = spec.check(param.value) if spec is not None else ''
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)
    return values


def ros_args(
    parameters: dict[str, Value], remappings: Sequence[tuple[str, str]] = ()
) -> list[str]:
    """Command-line ``--ros-args`` for a node with these parameters and remappings."""
    args = ['--ros-args']
    for name, value in parameters.items():
        args += ['-p', f'{name}:={_literal(value)}']
    for src, dst in remappings:
        args += ['-r', f'{src}:={dst}']
    return args


def _literal(value: Value) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, list):
        return '[' + ','.join(_literal(v) for v in value) + ']'
    if isinstance(value, str):
        # Quoted: ROS reads a -p value as YAML, so a bare 123, true, on or a path with a
        # '#' was another type or cut short (record:=123 became an integer bag name and
        # killed the recorder). A JSON string is a YAML double-quoted one.
        return json.dumps(value)
    return repr(value)
