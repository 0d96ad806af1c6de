"""Deliberate thread counts: the test session's setting, limit_threads and parallel_map."""

import os

import pytest
import torch
from joblib import cpu_count, parallel_config
from threadpoolctl import threadpool_info, threadpool_limits

from skflow.threads import limit_threads, parallel_map, worker_threads


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
