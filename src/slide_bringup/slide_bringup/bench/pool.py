"""How many processes a benchmark suite runs its jobs in."""

from __future__ import annotations

from collections.abc import Callable
import functools
import os

from slide_core.errors import SlideInputError


def processes(workers: int | None) -> int:
    """``workers``, or one per core when None (``--jobs`` not given); SlideInputError when it
    is under 1."""
    if workers is None:
        return max(1, os.cpu_count() or 1)
    if workers < 1:
        raise SlideInputError(f'--jobs must be at least 1 process, got {workers}')
    return workers


def threads_each(workers: int) -> int:
    """The BLAS threads each of ``workers`` processes gets: its share of the cores, at
    least one."""
    return max(1, (os.cpu_count() or 1) // workers)


def start_worker(threads: int) -> None:
    """A worker process's start: the compiled kernels loaded
    (:func:`slide_bringup.bench.warmup.warm_up`, which loads numpy's and scipy's BLAS
    too), then BLAS limited to ``threads`` threads (a limit reaches only the libraries
    loaded). Each process's BLAS started one thread per core, so two workers on two cores
    ran four: measured in the pregrasp bench, the book's identification took 22 s per
    episode instead of 16 and 9."""
    from threadpoolctl import threadpool_limits

    from slide_bringup.bench.warmup import warm_up

    warm_up()
    threadpool_limits(limits=threads, user_api='blas')


def initializer(workers: int) -> Callable[[], None]:
    """The initializer of a pool of ``workers`` processes (:func:`start_worker`)."""
    return functools.partial(start_worker, threads_each(workers))
