"""Identification's parameter bounds, and what a fit pressed against them."""

from __future__ import annotations

import numpy as np

from slide_core.geometry import Grid
from slide_core.identification import Bounds


def test_a_fit_that_sits_on_a_bound_says_so() -> None:
    # An object of friction 1.5 came out 64% heavy at the friction bound of 1, one of
    # 20000 kg/m^3 at the density bound, and nothing said so.
    grid = Grid(0.02, np.ones((2, 4), bool), np.full((2, 4), 0.02))
    bounds = Bounds.from_grid(grid)
    mass = 0.3 * bounds.mass_max
    assert bounds.pressed(mass, np.full(8, 0.4)) == []
    friction = np.full(8, 0.4)
    friction[:3] = bounds.friction_max  # 3 of 8 cells: more than a quarter
    (line,) = bounds.pressed(mass, friction)
    assert line.startswith('38% of the cells sit at the friction bound (1)')
    heavy = mass.copy()
    heavy[:2] = bounds.mass_max[:2]
    (line,) = bounds.pressed(heavy, np.full(8, 0.4))
    assert line.startswith('25% of the cells sit at the mass bound')
    assert len(bounds.pressed(bounds.mass_max, np.full(8, bounds.friction_max))) == 2
