"""Thread counts of Torch and of the BLAS/OpenMP pools, set deliberately.

Torch, NumPy's BLAS and OpenMP each start one thread per core by default. Three situations need
fewer:

* **Small calls, busy machines.** Torch splits each operation over its intra-op threads and
  joins them at a barrier; a small operation gains nothing from that, and when other
  processes hold the cores every barrier waits for a descheduled thread (a prior's few-shot
  ``sample`` measured 0.75 s on one thread and 40-90 s on two, at load average 3-5).
  :func:`map_on_threads` is the sampling calls' policy: the work is cut into items by its
  size alone (:func:`rows_per_item`), every item runs on **one** Torch/BLAS thread, and the
  items of a large call run side by side on up to :func:`thread_budget` Python threads. A
  small call is one item on one thread; a large call uses the cores; and since no item
  depends on how many threads there are, the same seed gives the same samples on any
  thread count.

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
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

__all__ = [
    "ITEM_WORK",
    "MIN_ITEMS",
    "SPLIT_WORK",
    "limit_threads",
    "map_on_threads",
    "parallel_map",
    "rows_per_item",
    "thread_budget",
    "worker_threads",
]

#: Most work of one item of a sampling call, in query-key-feature products per field
#: evaluation (about 10 ms on one core): the per-item Python cost of an evaluation (about
#: 0.5 ms) stays under 5 % of it, and one fused kernel call per item keeps its speed
#: (``benchmarks/bench_field.py --default-path``; 16 items of 256 rows at (4096, 4096, 64)
#: cost 1.26x one SDPA call, 4 items of 1024 rows 1.11x, on one thread).
ITEM_WORK = 2**28

#: Calls of more work than this are cut into at least :data:`MIN_ITEMS` items, so that they
#: use the cores; smaller calls are one item: threads cost more than they bring
#: (``benchmarks/bench_threads.py`` measures both sides).
SPLIT_WORK = 2**24

#: Fewest items of a call above :data:`SPLIT_WORK` (shares for two to four cores).
MIN_ITEMS = 4

#: Fewest rows of an item.
MIN_ITEM_ROWS = 64


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

    n_threads = max(1, int(n_threads))
    saved_torch = torch.get_num_threads()
    if saved_torch > n_threads:
        torch.set_num_threads(n_threads)
    # after Torch's own setting, so the OpenMP pool it shares is already at the limit
    lowered = []
    for lib in _controller(len(sys.modules)).lib_controllers:
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


def thread_budget() -> int:
    """Threads a call may use: Torch's intra-op thread count at the time of the call.

    One per core by default; lowered by ``torch.set_num_threads``, by :func:`limit_threads`,
    and inside each worker of :func:`parallel_map` (its share of the cores), so that joblib
    workers never oversubscribe the machine.

    Examples
    --------
    >>> from skflow.threads import limit_threads, thread_budget
    >>> with limit_threads(1):
    ...     thread_budget()
    1
    """
    import torch

    return max(1, torch.get_num_threads())


def rows_per_item(n_keys: int, n_features: int, most: int, n_rows: int | None = None) -> int:
    """Rows of one work item of a call of ``n_rows`` queries on ``n_keys`` support rows.

    With ``w = n_keys * n_features`` products per query row: a call of at most
    :data:`SPLIT_WORK` products (``n_rows * w``) is one item; a larger one gets items of
    ``min(ITEM_WORK // w, ceil(n_rows / MIN_ITEMS))`` rows (at least :data:`MIN_ITEM_ROWS`),
    so at least :data:`MIN_ITEMS` items of at most :data:`ITEM_WORK` products. Always at most
    ``most`` rows. It depends on the problem's size only, never on the thread count, so the
    items (and the samples) are the same on any machine.

    Parameters
    ----------
    n_keys, n_features : int
        Support rows and features.
    most : int
        Largest item (rows).
    n_rows : int, optional
        Query rows of the call; None: the call is taken as large (items of ``ITEM_WORK``).

    Returns
    -------
    rows : int

    Examples
    --------
    >>> from skflow.threads import rows_per_item
    >>> rows_per_item(10, 16, 4096, n_rows=4096), rows_per_item(4096, 64, 4096, n_rows=4096)
    (4096, 1024)
    """
    per_row = max(1, int(n_keys) * int(n_features))
    rows = ITEM_WORK // per_row
    if n_rows is not None:
        n_rows = max(1, int(n_rows))
        split = MIN_ITEMS if n_rows * per_row > SPLIT_WORK else 1
        rows = min(rows, -(-n_rows // split))
    return int(min(most, max(MIN_ITEM_ROWS, rows)))


def map_on_threads(func: Callable, arguments: list[tuple], n_threads: int | None = None) -> list:
    """``[func(*args) for args in arguments]``, each call on one Torch/BLAS thread.

    Calls run on the calling thread when there is one, else side by side on up to
    ``n_threads`` Python threads (Torch and NumPy release the interpreter lock while they
    compute), made at the first such call and kept for the process's later ones; a call from
    inside an item runs inline. Every call sees one intra-op thread, so its result does not
    depend on how many threads run, and no call waits at an intra-op barrier for a thread
    another process holds.

    Parameters
    ----------
    func : callable
        Thread-safe: calls may run concurrently.
    arguments : list of tuple
        Positional arguments of each call.
    n_threads : int, optional
        Most Python threads (default :func:`thread_budget`, read before the limit).

    Returns
    -------
    results : list
        In the order of ``arguments``.

    Examples
    --------
    >>> from operator import mul
    >>> from skflow.threads import map_on_threads
    >>> map_on_threads(mul, [(2, 3), (4, 5)], n_threads=2)
    [6, 20]
    """
    workers = min(len(arguments), thread_budget() if n_threads is None else int(n_threads))
    with limit_threads(1):
        if workers <= 1 or getattr(_ITEM_THREAD, "active", False):  # nested: run inline
            return [func(*args) for args in arguments]
        return list(_item_pool(workers).map(lambda args: _one_item(func, args), arguments))


#: Marks a thread while it runs an item of :func:`map_on_threads` (a nested call runs inline:
#: an item waiting on a pool whose threads all wait would never finish).
_ITEM_THREAD = threading.local()
_POOLS: dict[int, Any] = {}
_POOLS_LOCK = threading.Lock()


def _item_pool(workers: int) -> Any:
    """The ``workers`` item threads of this process, made once and kept: a fresh thread pays
    for its Torch and BLAS state at its first products, which cost a large call about as much
    as its Python work (``benchmarks/bench_field.py --default-path``). A forked child starts
    without them (:func:`_reset_pools_in_child`) and makes its own."""
    from concurrent.futures import ThreadPoolExecutor

    key = int(workers)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = ThreadPoolExecutor(workers, thread_name_prefix="skflow")
    return pool


def _reset_pools_in_child() -> None:
    """A forked child has none of its parent's threads (nor a lock a parent thread held)."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pools_in_child)


def _one_item(func: Callable, args: tuple) -> Any:
    """One item in a pool thread, on the process's current Torch thread count (one)."""
    _hold_this_thread()
    _ITEM_THREAD.active = True
    try:
        return func(*args)
    finally:
        _ITEM_THREAD.active = False


def _hold_this_thread() -> None:
    """Give this thread the process's Torch thread count for its own pools too.

    OpenMP's and MKL's thread counts are per OS thread: ``torch.set_num_threads`` sets them
    for the thread that calls it only, and a new thread starts at the library defaults (one
    per core). Without this, a worker's matrix products ran on every core under a limit of
    one, oversubscribing the machine, and MKL's conditional-reproducibility modes
    (``MKL_CBWR``) then gave other last bits than on the calling thread. Storing the count
    already in force changes nothing for the other threads; a kept pool thread stores it
    again for each item (the count of the call in force, not of the call that made it).
    """
    import torch

    torch.set_num_threads(torch.get_num_threads())


@lru_cache(maxsize=1)
def _controller(n_modules: int) -> Any:
    """threadpoolctl's view of the loaded thread pools (1 ms to build, so kept): built again
    when modules were imported since, as an import is what loads a new pool."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


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
        if threading.current_thread() is not threading.main_thread():
            _hold_this_thread()  # a joblib thread worker: its own OpenMP/MKL counts
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
