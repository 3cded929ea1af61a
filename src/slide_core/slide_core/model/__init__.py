"""What slide knows before and after it pokes: the workcell, objects and beliefs.

- the workcell (:func:`load_workcell`, from ``config/workcell.yaml``: the only place its
  dimensions are written);
- object specifications and the object library (:func:`load_object`; YAML format in
  :mod:`slide_core.model.objects`);
- push primitives and the fingertip waypoints that execute them (:class:`Primitive`);
- the belief (:class:`Belief`): K weighted (mass, friction) models, the one type used from
  identification to planning to messages, with its YAML file (:func:`save_belief`).
"""

from __future__ import annotations

from slide_core.model.belief import (
    BELIEF_KIND,
    Belief,
    BeliefError,
    belief_from_dict,
    belief_to_dict,
    is_belief_file,
    load_belief,
    load_provenance,
    max_cell_mass,
    save_belief,
    uniform_maps,
)
from slide_core.model.objects import (
    FRICTION_MAX,
    MAX_DENSITY,
    ObjectSpec,
    SpecError,
    library_dir,
    library_names,
    load_object,
    load_spec,
    parse_spec,
    save_spec,
)
from slide_core.model.primitive import (
    APPROACH,
    APPROACH_CLEARANCE,
    LIFT,
    MIN_PUSH_SPEED,
    RETRACT,
    Primitive,
    PrimitiveError,
    Waypoint,
    approach_clear,
    check_position,
    over_obstacles,
    push_waypoints,
    retract_waypoints,
    side_met,
    stroke_clear,
)
from slide_core.model.workcell import (
    UNKNOWN_HEIGHT,
    Fingertip,
    Gripper,
    Obstacle,
    Table,
    Workcell,
    WorkcellError,
    check_config_dir,
    config_dir,
    load_workcell,
    parse_workcell,
    workcell_path,
)

__all__ = [
    'UNKNOWN_HEIGHT',
    'APPROACH',
    'APPROACH_CLEARANCE',
    'LIFT',
    'MIN_PUSH_SPEED',
    'RETRACT',
    'BELIEF_KIND',
    'FRICTION_MAX',
    'MAX_DENSITY',
    'Belief',
    'BeliefError',
    'Fingertip',
    'Gripper',
    'ObjectSpec',
    'Primitive',
    'PrimitiveError',
    'Waypoint',
    'Obstacle',
    'SpecError',
    'Table',
    'Workcell',
    'WorkcellError',
    'belief_from_dict',
    'approach_clear',
    'check_position',
    'over_obstacles',
    'belief_to_dict',
    'check_config_dir',
    'config_dir',
    'library_dir',
    'library_names',
    'is_belief_file',
    'load_belief',
    'load_object',
    'load_provenance',
    'load_spec',
    'load_workcell',
    'max_cell_mass',
    'parse_spec',
    'parse_workcell',
    'push_waypoints',
    'retract_waypoints',
    'save_belief',
    'save_spec',
    'side_met',
    'stroke_clear',
    'uniform_maps',
    'workcell_path',
]
