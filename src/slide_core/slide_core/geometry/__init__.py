"""Geometry: planar poses, the object's grid of cells, and its footprint on the table.

Frames and notation (the one place they are written; every module of slide follows it)
--------------------------------------------------------------------------------------
Drake's monogram notation: ``X_AB`` is the pose of frame B in frame A (planar: (x, y, theta)
[m, m, rad]); ``p_AQ`` the position of point Q from A's origin, expressed in A;
``p_AQ_E`` the same vector expressed in frame E where that differs; ``R_AB`` a rotation;
``V_AB`` a twist (vx, vy, omega); ``f_..._W`` a force expressed in W. One letter per frame
or point across the code:

====  =========================================================================
W     the table frame (the world): z up, origin on the top surface at the middle of the
      free edge, x inwards; the edge is x = 0 and the table covers x >= 0
      (``config/workcell.yaml``, ``table.frame_id``).
O     the object frame: origin at the centre of the grid's bounding box, x along the
      grid's columns, y towards row 0, z up (``ObjectGrid`` message).
B     the object's body frame of the physics: origin at the cells' centroid G, axes of O.
G     the centroid of the cells (unweighted), a point.
Bcm   the object's centre of mass, a point (``p_OBcm``: in the object frame).
C     a cell centre (per-cell arrays ``p_OC`` (n, 2)).
A     the point where a push is applied: the contact on the object's outline.
F     the fingertip: its centre on its axis (``p_WF``).
P     a push frame of the planner: origin at the fingertip's start, x along the push.
K     the camera's optical frame (z forward, x right, y down); ``X_WK`` its extrinsics.
S     the force/torque sensor frame.
E     the gripper: its pads' front end, between the fingers (``p_WE``).
====  =========================================================================
"""

from __future__ import annotations

from slide_core.geometry.footprint import (
    boundary_distance,
    boundary_rings,
    boundary_segments,
    cell_corners,
    cells_under,
    com_margins,
    covered,
    distance_to_cells,
    distance_to_footprint,
    edge_support,
    footprint_centroid,
    grid_radius,
    outline_grid,
    outline_pieces,
    overhang,
    polygon_coverage,
    push_sides,
    reach,
    support_polygon,
    tallest_under,
    turn_sweep,
)
from slide_core.geometry.grid import (
    CELL_SIZE_RANGE,
    MAX_EXTENT,
    Grid,
    cell_positions,
    check_object_cells,
    check_object_grid,
)
from slide_core.geometry.outline import check_outline, signed_area, simplify, trace_outline
from slide_core.geometry.se2 import (
    FloatArray,
    GridError,
    check_pose,
    quaternion_of_yaw,
    rotation,
    se2_distance,
    to_frame,
    to_world,
    wrap_angle,
    yaw_of_quaternion,
)

__all__ = [
    'FloatArray',
    'CELL_SIZE_RANGE',
    'MAX_EXTENT',
    'Grid',
    'GridError',
    'boundary_distance',
    'boundary_rings',
    'boundary_segments',
    'cell_corners',
    'cell_positions',
    'check_object_cells',
    'check_object_grid',
    'cells_under',
    'check_outline',
    'check_pose',
    'com_margins',
    'covered',
    'distance_to_cells',
    'distance_to_footprint',
    'edge_support',
    'footprint_centroid',
    'grid_radius',
    'outline_grid',
    'outline_pieces',
    'overhang',
    'polygon_coverage',
    'push_sides',
    'quaternion_of_yaw',
    'reach',
    'rotation',
    'se2_distance',
    'signed_area',
    'simplify',
    'support_polygon',
    'tallest_under',
    'turn_sweep',
    'to_frame',
    'to_world',
    'trace_outline',
    'wrap_angle',
    'yaw_of_quaternion',
]
