"""The workcell's robot description (URDF) for robot_state_publisher and RViz.

``urdf/workcell.urdf.in`` holds its structure; the table's dimensions and frame come from
``config/workcell.yaml``, the one place they are written (a URDF with its own numbers
drew the table where the planner did not put it once the workcell file changed).
"""

from __future__ import annotations

from pathlib import Path

from slide_bringup.graph import installed_config
from slide_core.errors import SlideInputError
from slide_core.model import Workcell

TEMPLATE = 'workcell.urdf.in'


def urdf_template(cfg: Path) -> Path:
    """The template beside the configuration folder ``cfg``: ``urdf/`` next to
    ``config/`` at the repository root, as in the installed ``share/slide_bringup``; for a
    folder of one's own with no ``urdf/`` beside it, the installed one."""
    own = cfg.parent / 'urdf' / TEMPLATE
    shipped = installed_config()
    if own.is_file() or shipped is None:
        return own
    return shipped.parent / 'urdf' / TEMPLATE


def workcell_urdf(cell: Workcell, template: Path) -> str:
    """The URDF of ``cell``'s table from ``template`` (SlideInputError when it cannot be
    read)."""
    try:
        text = template.read_text()
    except OSError as exc:
        raise SlideInputError(
            f'cannot read the workcell URDF template {template}: {exc}'
        ) from None
    t = cell.table
    return text.format(
        frame=t.frame_id,
        depth=f'{t.depth:g}',
        width=f'{t.width:g}',
        thickness=f'{t.thickness:g}',
        height=f'{t.height:g}',
        half_depth=f'{t.depth / 2:g}',
        minus_half_thickness=f'{-t.thickness / 2:g}',
    )
