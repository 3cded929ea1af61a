import pytest

from slide_core.errors import SlideInputError
from slide_core.task import IdentificationSettings


def test_settings_that_cannot_identify_are_refused_when_made():
    with pytest.raises(SlideInputError, match='unknown identification method'):
        IdentificationSettings(method='gradient-descent')
    with pytest.raises(SlideInputError, match='K >= 1'):
        IdentificationSettings(K=0)
    # A goal's million models took the warm start beyond any cancel.
    with pytest.raises(SlideInputError, match='at most 64'):
        IdentificationSettings(K=65, budget=10**6)
    with pytest.raises(SlideInputError, match='budget of 7 simulations .* each of the 8'):
        IdentificationSettings(K=8, budget=7)
    assert IdentificationSettings(method='analytic', K=8, budget=7).budget == 7
    assert IdentificationSettings(K=8, budget=8).K == 8
