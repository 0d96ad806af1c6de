"""Thread counts of Torch and of the BLAS/OpenMP pools, set deliberately.

Torch, NumPy's BLAS and OpenMP each start one thread per core by default. Two situations need
fewer:

* **Parallel workers.** ``n_jobs`` joblib workers that each run Torch on every core put
  ``n_jobs x cores`` threads on ``cores`` cores; the oversubscribed threads spin and wait on
  each other. :func:`parallel_map` holds each worker to ``cores // n_workers`` threads.
* **Reproducibility.** Some reductions (matrix products, parallel sums) split their work by
  the thread count, so their last bits change with it; a chaotic optimisation (a stochastic
  gradient descent run for hundreds of steps) amplifies those bits into a different result.
  :func:`limit_threads` with ``1`` makes such a computation independent of the thread count.

The limits only ever lower a pool's thread count (never raise one a user or a test has
lowered) and are restored on exit. ``torch.set_num_threads`` is process-wide: a limit set in
one Python thread applies to all threads of the process while it holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["limit_threads", "parallel_map", "worker_threads"]


@contextmanager
def limit_threads(n_threads: int) -> Iterator[None]:
    """Run a block with at most ``n_threads`` Torch intra-op threads and BLAS/OpenMP threads.

    Torch's intra-op pool (which also sets its MKL and OpenMP threads) and every pool that
    :mod:`threadpoolctl` finds (NumPy's OpenBLAS, OpenMP runtimes, MKL, BLIS) are lowered to
    ``n_threads`` if they use more; the previous counts are restored on exit.

    Parameters
    ----------
    n_threads : int
        Most threads per pool (at least 1).

    Examples
    --------
    >>> import torch
    >>> from skflow.threads import limit_threads
    >>> before = torch.get_num_threads()
    >>> with limit_threads(1):
    ...     inside = torch.get_num_threads()
    >>> inside, torch.get_num_threads() == before
    (1, True)
    """
    import torch
    from threadpoolctl import ThreadpoolController

    n_threads = max(1, int(n_threads))
    saved_torch = torch.get_num_threads()
    if saved_torch > n_threads:
        torch.set_num_threads(n_threads)
    # after Torch's own setting, so the OpenMP pool it shares is already at the limit
    lowered = []
    for lib in ThreadpoolController().lib_controllers:
        if lib.num_threads > n_threads:
            lowered.append((lib, lib.num_threads))
            lib.set_num_threads(n_threads)
    try:
        yield
    finally:
        for lib, saved in reversed(lowered):
            lib.set_num_threads(saved)
        if torch.get_num_threads() != saved_torch:
            torch.set_num_threads(saved_torch)


def worker_threads(n_jobs: int | None) -> int:
    """Threads per joblib worker so that ``workers x threads <= cores``.

    Parameters
    ----------
    n_jobs : int or None
        joblib's ``n_jobs`` (None: the active ``joblib.parallel_config``, 1 by default).

    Returns
    -------
    n_threads : int
        ``max(1, cores // n_workers)``, with ``n_workers = joblib.effective_n_jobs(n_jobs)``.

    Examples
    --------
    >>> from joblib import cpu_count
    >>> from skflow.threads import worker_threads
    >>> worker_threads(1) == cpu_count(), worker_threads(4 * cpu_count())
    (True, 1)
    """
    from joblib import cpu_count, effective_n_jobs

    return max(1, cpu_count() // max(1, effective_n_jobs(n_jobs)))


def _call_limited(func: Callable, args: tuple, n_threads: int, parent: int) -> Any:
    # In the calling process (threading or sequential backend) the caller's limit already
    # holds; setting the process-wide count again from worker threads would race.
    if os.getpid() == parent:
        return func(*args)
    with limit_threads(n_threads):
        return func(*args)


def parallel_map(
    func: Callable,
    arguments: Iterable[tuple],
    n_jobs: int | None,
    on_result: Callable[[Any], None] | None = None,
) -> list:
    """``[func(*args) for args in arguments]`` on joblib workers, each held to its share of cores.

    Each worker runs with at most :func:`worker_threads` ``(n_jobs)`` threads per pool (Torch
    and BLAS), so ``n_jobs`` workers never put more threads than cores on the machine. Process
    workers (loky, multiprocessing, Dask) set the limit themselves around each call; thread
    workers share the calling process's pools, which are limited for the whole call.

    Parameters
    ----------
    func : callable
        A picklable function (for process workers).
    arguments : iterable of tuple
        Positional arguments of each call.
    n_jobs : int or None
        joblib's ``n_jobs``.
    on_result : callable, optional
        Called with each result as it arrives, in order (e.g. to advance a progress bar).

    Returns
    -------
    results : list
        The results, in the order of ``arguments``.

    Examples
    --------
    >>> from operator import add
    >>> from skflow.threads import parallel_map
    >>> parallel_map(add, [(1, 2), (3, 4)], n_jobs=1)
    [3, 7]
    """
    from joblib import Parallel, delayed

    n_threads = worker_threads(n_jobs)
    parent = os.getpid()
    results = []
    with limit_threads(n_threads):
        parallel = Parallel(n_jobs=n_jobs, return_as="generator")
        calls = (delayed(_call_limited)(func, tuple(args), n_threads, parent) for args in arguments)
        for result in parallel(calls):
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results
