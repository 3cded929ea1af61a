"""``slide objects``: the object library and object specification files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

NAME = 'objects'
HELP = 'list the object library, or show one object (library name or YAML file)'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from slide_bringup.cli import add_json_flag

    sub = parser.add_subparsers(dest='action', metavar='ACTION', required=True)
    listing = sub.add_parser('list', help='the library objects, one line each')
    add_json_flag(listing, nested=True)
    show = sub.add_parser('show', help='summary of one object; --png draws its maps')
    add_json_flag(show, nested=True)
    show.add_argument('object', help='library name (see: slide objects list) or a .yaml file')
    show.add_argument('--png', type=Path, help='write the mass and friction maps to this PNG')


def run(args: argparse.Namespace) -> dict[str, Any]:
    from slide_core.files import check_output
    from slide_core.model import library_dir, library_names, load_object

    if args.action == 'list':
        objects = [load_object(name).summary() for name in library_names()]
        return {'library': str(library_dir()), 'objects': objects}
    if args.png is not None:
        check_output(args.png, ('.png',), '--png')
    spec = load_object(args.object)
    result: dict[str, Any] = {'object': spec.summary()}
    if args.png is not None:
        from slide_core.io.plot import object_figure

        title = f'{spec.name}: {spec.grid.n} cells, {spec.total_mass:.3f} kg'
        result['png'] = str(object_figure(args.png, spec.grid, spec.mass, spec.friction, title))
    return result


def format_text(result: dict[str, Any]) -> str:
    if 'objects' in result:
        lines = [f'{"name":12s} {"cells":>5s} {"mass kg":>8s} {"size m":>13s}  description']
        for o in result['objects']:
            size = f'{o["size_m"][0]:.2f} x {o["size_m"][1]:.2f}'
            head = f'{o["name"]:12s} {o["cells"]:5d} {o["mass_kg"]:8.3f} {size:>13s}'
            lines.append(f'{head}  {o["description"]}')
        return '\n'.join(lines)
    o = result['object']
    lines = [f'{k}: {v}' for k, v in o.items()]
    if 'png' in result:
        lines.append(f'picture: {result["png"]}')
    return '\n'.join(lines)
