"""Load every compiled kernel before a benchmark times anything (numba's first call in a
process loads the machine code from its disk cache, or compiles it: 0.1 s to a minute)."""

from __future__ import annotations


def warm_up() -> None:
    """Load the physics, quasi-static, planning, identification and perception kernels."""
    from slide_core.identification import kernels as identification_kernels
    from slide_core.perception import kernels as perception_kernels
    from slide_core.physics import kernels, kernels_quasistatic, kernels_rollout
    from slide_core.planning import kernels as planning_kernels

    for module in (
        kernels,
        kernels_rollout,
        kernels_quasistatic,
        planning_kernels,
        identification_kernels,
        perception_kernels,
    ):
        module.warm_up()
