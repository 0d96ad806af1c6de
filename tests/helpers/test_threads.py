"""Deliberate thread counts: the test session's setting, limit_threads, parallel_map and the
sampling calls' thread policy (work items by size, one thread per item, items side by side)."""

import os
import threading
import time

import pytest
import torch
from joblib import cpu_count, parallel_config
from thread_counts import on_threads
from threadpoolctl import threadpool_info, threadpool_limits

from skflow.threads import (
    ITEM_WORK,
    MIN_ITEM_ROWS,
    MIN_ITEMS,
    limit_threads,
    map_on_threads,
    parallel_map,
    rows_per_item,
    worker_threads,
)


@pytest.fixture
def all_cores():
    """Torch and the BLAS pools at one thread per core (the library defaults) for one test."""
    saved = torch.get_num_threads()
    torch.set_num_threads(cpu_count())
    with threadpool_limits(limits=cpu_count()):
        yield cpu_count()
    torch.set_num_threads(saved)


def _pools():
    return [lib["num_threads"] for lib in threadpool_info()]


def test_the_session_runs_with_the_requested_thread_count():
    n = int(os.environ.get("SKFLOW_TEST_THREADS", "1"))
    assert torch.get_num_threads() == n
    assert os.environ["OMP_NUM_THREADS"] == str(n)


def test_limit_threads_lowers_and_restores(all_cores):
    with limit_threads(1):
        assert torch.get_num_threads() == 1
        assert set(_pools()) == {1}
    assert torch.get_num_threads() == all_cores
    assert set(_pools()) == {all_cores}


def test_limit_threads_never_raises_a_count():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1), limit_threads(cpu_count() + 3):
            assert torch.get_num_threads() == 1
            assert max(_pools()) == 1
    finally:
        torch.set_num_threads(saved)


def test_worker_threads_share_the_cores():
    assert worker_threads(1) == cpu_count()
    assert worker_threads(2) == max(1, cpu_count() // 2)
    assert worker_threads(-1) == 1
    assert worker_threads(10 * cpu_count()) == 1


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_parallel_workers_times_threads_fit_the_cores(all_cores, backend):
    n_jobs = 2
    with parallel_config(backend=backend):
        seen = parallel_map(torch.get_num_threads, [()] * 4, n_jobs=n_jobs)
    assert len(seen) == 4
    assert max(seen) * n_jobs <= max(all_cores, n_jobs)
    assert torch.get_num_threads() == all_cores  # the caller's setting is back


def test_parallel_map_keeps_order():
    assert parallel_map(divmod, [(7, 2), (9, 4), (1, 1)], n_jobs=2) == [(3, 1), (2, 1), (1, 0)]


def test_items_depend_on_the_problem_size_only():
    assert rows_per_item(10, 16, 4096, 4096) == 4096  # a few-shot call: one item
    assert rows_per_item(1 << 24, 64, 4096, 4096) == MIN_ITEM_ROWS
    assert rows_per_item(65536, 16, 4096) == ITEM_WORK // (65536 * 16)
    assert rows_per_item(4096, 64, 4096, 4096) == 4096 // MIN_ITEMS  # cut for the cores
    assert rows_per_item(1000, 16, 100) == 100


def test_every_item_runs_on_one_torch_thread_and_items_spread():
    seen = []

    def item(i):
        seen.append((threading.get_ident(), torch.get_num_threads()))
        time.sleep(0.002)  # long enough that the pool hands items to several threads
        return i * i

    out = on_threads(3, lambda: map_on_threads(item, [(i,) for i in range(40)]))
    assert out == [i * i for i in range(40)]  # in order
    assert {n for _, n in seen} == {1}
    assert len({ident for ident, _ in seen}) >= 2
    seen.clear()
    caller = threading.get_ident()
    on_threads(1, lambda: map_on_threads(item, [(i,) for i in range(5)]))  # budget 1: in place
    assert {ident for ident, _ in seen} == {caller}


_THREAD_MARK = threading.local()  # a thread's number, given at its first item
_MARKS = iter(range(1 << 30))


def _spread_items(seen):
    def item(i):
        if not hasattr(_THREAD_MARK, "number"):  # a fresh thread (idents can be reused)
            _THREAD_MARK.number = next(_MARKS)
        seen.add(_THREAD_MARK.number)
        time.sleep(0.002)  # long enough that the pool hands items to both threads
        return i

    return on_threads(2, lambda: map_on_threads(item, [(i,) for i in range(20)]))


def test_the_item_threads_are_kept_across_calls():
    """A fresh thread pays for its Torch and BLAS state at its first products: later calls
    run on the threads of the first (and never on the caller)."""
    first, second = set(), set()
    assert _spread_items(first) == list(range(20)) == _spread_items(second)
    assert second == first and len(first) == 2


def test_a_call_from_inside_an_item_runs_inline():
    """An item that maps again must not wait on the pool it occupies: its call runs on its own
    thread (a pool of two threads whose both items wait would never finish)."""
    inner = []

    def outer(i):
        here = threading.get_ident()
        got = map_on_threads(lambda j: (j, threading.get_ident()), [(j,) for j in range(3)], 2)
        inner.append(all(ident == here for _, ident in got))
        time.sleep(0.002)
        return [j for j, _ in got]

    result = []
    caller = threading.Thread(
        target=lambda: result.append(
            on_threads(2, lambda: map_on_threads(outer, [(i,) for i in range(4)]))
        ),
        daemon=True,
    )
    caller.start()
    caller.join(30)
    assert not caller.is_alive(), "the nested call waited on its own pool"
    assert result == [[[0, 1, 2]] * 4] and inner == [True] * 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_makes_its_own_item_threads():
    _spread_items(set())  # the parent's threads exist
    pid = os.fork()
    if pid == 0:  # the child: its parent's threads are gone, a call must still finish
        code = 1
        try:
            import signal

            signal.alarm(60)
            code = 0 if _spread_items(set()) == list(range(20)) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_one_item_runs_on_the_calling_thread():
    caller, seen = threading.get_ident(), []
    on_threads(3, lambda: map_on_threads(lambda: seen.append(threading.get_ident()), [()]))
    assert seen == [caller]
