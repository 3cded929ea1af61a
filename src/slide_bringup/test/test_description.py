"""The workcell's URDF: the table drawn where the workcell file puts it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
import xml.etree.ElementTree as ET

import pytest

from slide_bringup.description import urdf_template, workcell_urdf
from slide_core.errors import SlideInputError
from slide_core.model import load_workcell

ROOT = Path(__file__).resolve().parents[3]


def test_the_table_is_drawn_with_the_workcell_files_dimensions() -> None:
    # The URDF had its own numbers, which a changed workcell file left behind.
    cell = load_workcell(ROOT / 'config' / 'workcell.yaml')
    bench = dataclasses.replace(
        cell.table, frame_id='bench', depth=0.5, width=0.3, thickness=0.03, height=0.9
    )
    robot = ET.fromstring(
        workcell_urdf(dataclasses.replace(cell, table=bench), urdf_template(ROOT / 'config'))
    )
    link = robot.find("link[@name='bench']")
    assert link is not None
    for part in ('visual', 'collision'):
        box = link.find(f'{part}/geometry/box')
        origin = link.find(f'{part}/origin')
        assert box is not None and origin is not None
        assert [float(v) for v in box.get('size', '').split()] == [0.5, 0.3, 0.03]
        assert [float(v) for v in origin.get('xyz', '').split()] == [0.25, 0.0, -0.015]
    joint = robot.find("joint[@name='world_to_table']")
    assert joint is not None
    assert joint.find('child').get('link') == 'bench'  # type: ignore[union-attr]
    assert joint.find('origin').get('xyz') == '0 0 0.9'  # type: ignore[union-attr]


def test_a_missing_template_is_named() -> None:
    cell = load_workcell(ROOT / 'config' / 'workcell.yaml')
    with pytest.raises(SlideInputError, match='cannot read the workcell URDF template'):
        workcell_urdf(cell, ROOT / 'nowhere' / 'workcell.urdf.in')
