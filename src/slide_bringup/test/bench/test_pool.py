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


def blas_threads() -> list[int]:
    import numpy  # noqa: F401  (its BLAS loaded)
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    return [int(lib['num_threads']) for lib in threadpool_info() if lib['user_api'] == 'blas']


def test_a_workers_blas_gets_its_share_of_the_cores():
    # Each worker's BLAS started one thread per core: two workers on two cores ran four.
    from concurrent.futures import ProcessPoolExecutor

    from slide_bringup.bench.pool import initializer, threads_each

    cores = max(1, os.cpu_count() or 1)
    assert threads_each(cores) == 1 and threads_each(1) == cores and threads_each(10 * cores) == 1
    with ProcessPoolExecutor(max_workers=1, initializer=initializer(cores)) as pool:
        seen = pool.submit(blas_threads).result(timeout=120)
    assert seen and all(n == 1 for n in seen)
