import os

import pytest

from slide_bringup.bench.pool import processes
from slide_core.errors import SlideInputError


def test_no_count_is_one_process_per_core():
    assert processes(None) == max(1, os.cpu_count() or 1)


def test_a_count_is_kept():
    assert processes(1) == 1
    assert processes(3) == 3


@pytest.mark.parametrize('count', [0, -2])
def test_a_count_under_one_is_refused_not_taken_as_the_default(count):
    with pytest.raises(SlideInputError, match=f'--jobs must be at least 1 process, got {count}'):
        processes(count)
