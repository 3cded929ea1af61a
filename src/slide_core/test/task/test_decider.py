import pytest

from slide_core.errors import SlideInputError
from slide_core.task import IdentificationSettings


def test_settings_that_cannot_identify_are_refused_when_made():
    with pytest.raises(SlideInputError, match='unknown identification method'):
        IdentificationSettings(method='gradient-descent')
    with pytest.raises(SlideInputError, match='K must be 1 to 64 models, got 0'):
        IdentificationSettings(K=0)
    # A goal's million models took the warm start beyond any cancel.
    with pytest.raises(SlideInputError, match='K must be 1 to 64 models, got 65'):
        IdentificationSettings(K=65, budget=10**6)
    with pytest.raises(SlideInputError, match='budget of 7 simulations .* each of the 8'):
        IdentificationSettings(K=8, budget=7)
    with pytest.raises(SlideInputError, match='com_directions must be 0 to 32, got 33'):
        IdentificationSettings(com_directions=33)  # the node's cap, now the settings' too
    assert IdentificationSettings(method='analytic', K=8, budget=7).budget == 7
    assert IdentificationSettings(K=8, budget=8).K == 8


def test_a_retried_exploratory_push_is_another_push():
    # From the same pose under the same belief the most distinctive push is the same one:
    # each retry after the world refused it (an off-outline contact) sent it again.
    import numpy as np

    from slide_core.model import Belief, load_object, load_workcell
    from slide_core.task import exploration_push

    spec, cell = load_object('box'), load_workcell()
    belief = Belief.create(spec.grid, spec.mass, spec.friction)
    X = np.array([0.4, 0.0, 0.3])

    def draw(attempt: int) -> object:
        return exploration_push(
            spec.grid, X, belief, 2, 'most-distinctive', 7, cell, 0.05, attempt
        )

    first, again = draw(0), draw(0)
    assert (first.p_OA == again.p_OA).all()  # the same stream, the same push
    tries = [draw(k) for k in (1, 2, 3)]
    assert all(not np.allclose(t.p_OA, first.p_OA) for t in tries)
    assert len({tuple(np.round(t.p_OA, 6)) for t in tries}) == 3
    with pytest.raises(SlideInputError, match='attempt must not be negative'):
        draw(-1)


def test_an_object_taller_than_the_gripper_takes_is_refused_from_its_grid():
    import dataclasses

    from slide_core.model import load_object, load_workcell
    from slide_core.planning import planner_config
    from slide_core.task import LocalDecider

    spec, cell = load_object('box'), load_workcell()
    decider = LocalDecider(planner_config(cell), cell)
    assert decider.refusal(spec.grid) is None
    tall = float(spec.grid.heights[spec.grid.occupancy].max())
    narrow = dataclasses.replace(cell.gripper, max_opening=0.001, height_margin=0.0)
    decider = LocalDecider(dataclasses.replace(planner_config(cell), gripper=narrow), cell)
    assert decider.refusal(spec.grid) == (
        f'the object is {tall * 100:.1f} cm tall and the gripper takes 0.1 cm (its opening '
        'less 0.0 cm of room above and below)'
    )
