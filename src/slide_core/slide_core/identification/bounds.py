"""Box bounds of the identified parameters and paper 2's schedule of K bound pairs."""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from slide_core.geometry import FloatArray, Grid
from slide_core.identification.errors import IdentificationError
from slide_core.model import FRICTION_MAX, MAX_DENSITY

DENSITY_MAX = 8000.0  # kg/m^3: steel; no cell is heavier than its volume of it
FRICTION_BOUND = 1.0  # the largest friction coefficient identification tries
MASS_FLOOR = 1e-3  # of a cell's mass bound: masses stay positive (the simulator needs it)
FLOOR_SHARE = 0.9  # cells at the mass floor beyond which a fit found nothing (Bounds.pressed)


@dataclass(frozen=True)
class Bounds:
    """Box bounds of the parameters: per-cell mass (n,) [kg] and friction (scalar)."""

    mass_max: FloatArray
    friction_max: float
    friction_min: float = 0.01

    @classmethod
    def from_grid(
        cls, grid: Grid, density_max: float = DENSITY_MAX, friction_max: float = FRICTION_BOUND
    ) -> Bounds:
        """Each cell at most ``density_max`` times its volume (its covered part's,
        :attr:`Grid.area`); friction up to the maximum (:func:`check_limits`)."""
        check_limits(density_max, friction_max)
        heights = grid.heights[grid.occupancy]
        if np.any(heights <= 0):
            raise IdentificationError(
                'every cell needs a positive height to bound its mass (grid heights are 0)'
            )
        volume = grid.cell_size**2 * grid.area * heights
        return cls(density_max * volume, float(friction_max))

    @property
    def mass_min(self) -> FloatArray:
        return np.asarray(MASS_FLOOR * self.mass_max, dtype=float)

    def lower(self) -> FloatArray:
        """(2n,) lower bounds of theta = (m, mu)."""
        n = self.mass_max.size
        return np.concatenate((self.mass_min, np.full(n, self.friction_min)))

    def upper(self) -> FloatArray:
        n = self.mass_max.size
        return np.concatenate((self.mass_max, np.full(n, self.friction_max)))

    def project(self, theta: FloatArray) -> FloatArray:
        return np.asarray(np.clip(theta, self.lower(), self.upper()), dtype=float)

    def middle(self) -> FloatArray:
        return (self.lower() + self.upper()) / 2

    def pressed(self, mass: FloatArray, friction: FloatArray, share: float = 0.25) -> list[str]:
        """What a model's per-cell ``mass`` and ``friction`` (n,) press against: one line
        for each of the mass and friction bounds that at least ``share`` of the cells sit
        on (within 1%). Such a fit found what the bounds allowed, not what the pushes say:
        an object of friction 1.5 came out 64% heavy at the friction bound of 1, one of
        20000 kg/m^3 at the density bound, both without a word."""
        lines = []
        on_mass = float(np.mean(mass >= 0.99 * self.mass_max))
        if on_mass >= share:
            lines.append(
                f'{on_mass:.0%} of the cells sit at the mass bound (their volume of the '
                'densest material allowed): the object may be denser than the bound, and '
                'its maps are not what the pushes say'
            )
        on_friction = float(np.mean(friction >= 0.99 * self.friction_max))
        if on_friction >= share:
            lines.append(
                f'{on_friction:.0%} of the cells sit at the friction bound '
                f'({self.friction_max:g}): the object may be grippier than that, and its '
                'masses are then off too'
            )
        # Nearly every cell at its floor: the fit found nothing to push against (a wrench
        # that reads about 0 N, or the wrong way, came out as a 1.6 g hammer, unreported).
        on_floor = float(np.mean(mass <= 1.01 * self.mass_min))
        if on_floor >= FLOOR_SHARE:
            lines.append(
                f'{on_floor:.0%} of the cells sit at the mass floor (a thousandth of the '
                'bound): the pushes show almost no force moving the object; does the F/T '
                'wrench read the push, in the right frame and sign?'
            )
        return lines


def check_limits(density_max: float, friction_max: float) -> None:
    """IdentificationError unless the density bound [kg/m^3] is positive and at most the
    densest material a belief may hold (:data:`slide_core.model.MAX_DENSITY`), and the
    friction bound above the friction floor (0.01) and at most a belief's largest
    coefficient (:data:`slide_core.model.FRICTION_MAX`): models beyond them were fitted for
    the whole budget, then refused as a belief."""
    if not (math.isfinite(density_max) and 0 < density_max <= MAX_DENSITY):
        raise IdentificationError(
            f'density_max must be above 0 and at most {MAX_DENSITY:g} kg/m^3, got {density_max}'
        )
    if not (math.isfinite(friction_max) and 0.01 < friction_max <= FRICTION_MAX):
        raise IdentificationError(
            f'friction_max must be above 0.01 and at most {FRICTION_MAX:g}, got {friction_max}'
        )


def schedule(bounds: Bounds, K: int) -> list[Bounds]:
    """Paper 2's K bound pairs: low friction bounds first, then low mass bounds."""
    if K < 1:
        raise IdentificationError(f'K must be at least 1, got {K}')
    out = []
    for k in range(1, K + 1):
        if k <= K / 2:
            mu_max, m_scale = 2 * k / K * bounds.friction_max, 1.0
        else:
            mu_max, m_scale = bounds.friction_max, 2 * k / K - 1
        mu_max = max(mu_max, 2 * bounds.friction_min)
        out.append(Bounds(bounds.mass_max * max(m_scale, 2 * MASS_FLOOR), mu_max))
    return out
