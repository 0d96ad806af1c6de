"""``sample_trajectories`` refuses, before integrating, paths that cannot fit in memory.

The output ``(T, n, d)`` is ``T`` times the starting points: a call that asks for more than
the memory available names the size and the fix (fewer samples, fewer saved times, or
``sample``) at once instead of integrating for minutes and failing to allocate.
"""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager

import numpy as np
import pytest

from skflow import NWFlowSampler, SolverOptions
from skflow.samplers._base import available_memory, check_trajectory_memory


@contextmanager
def _deadline(seconds: float):
    """Fail (``TimeoutError``) a block still running after ``seconds``: a refusal that came only
    after integrating would otherwise make the test hang instead of fail."""

    def _expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: the call integrated first")

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


NO_ALARM = not hasattr(signal, "SIGALRM")


@pytest.fixture(scope="module")
def sampler():
    return NWFlowSampler(sigma_min=0.1).fit(np.random.default_rng(0).normal(size=(20, 4)))


def test_the_check_compares_the_output_size_with_the_memory():
    x0 = np.zeros((1000, 4))  # 32 000 bytes per saved time
    check_trajectory_memory(32, x0, available=32 * 32_000)  # exactly fits
    with pytest.raises(ValueError, match=r"101 states of 1000 samples x 4 features"):
        check_trajectory_memory(101, x0, available=32 * 32_000)
    with pytest.raises(ValueError, match=r"x 3 supports .*fewer samples.*sample\(\)"):
        check_trajectory_memory(101, np.zeros((3, 1000, 4), np.float32), available=10**6)


def test_available_memory_is_positive_where_known():
    m = available_memory()
    assert m is None or m > 0


@pytest.mark.skipif(available_memory() is None, reason="the memory available is not known")
@pytest.mark.skipif(NO_ALARM, reason="the deadline needs SIGALRM")
def test_too_long_trajectories_fail_before_integrating(sampler):
    # 2 * 10**5 samples x 4 features x 10**6 saved steps: 6.4 TB, beyond any machine; the
    # starting points are only 6.4 MB, so the refusal comes at once
    s = NWFlowSampler(sigma_min=0.1, solver=SolverOptions(method="euler", n_steps=10**6))
    s.fit(sampler.support_)
    start = time.perf_counter()
    with _deadline(10.0), pytest.raises(ValueError, match=r"GiB of float64\), more than the"):
        s.sample_trajectories(2 * 10**5, random_state=0)
    assert time.perf_counter() - start < 5.0  # no integration (a step alone takes longer)


@pytest.mark.skipif(available_memory() is None, reason="the memory available is not known")
@pytest.mark.skipif(NO_ALARM, reason="the deadline needs SIGALRM")
def test_adaptive_saved_times_count_too(sampler):
    s = NWFlowSampler(sigma_min=0.1, solver=SolverOptions(method="dopri5"))
    s.fit(sampler.support_)
    start = time.perf_counter()
    with _deadline(10.0), pytest.raises(ValueError, match=r"save fewer times \(n_points"):
        s.sample_trajectories(2 * 10**5, n_points=10**6, random_state=0)
    assert time.perf_counter() - start < 5.0


def test_small_trajectories_are_unchanged(sampler):
    t, X = sampler.sample_trajectories(5, random_state=0)
    assert t.shape == (101,) and X.shape == (101, 5, 4)  # heun, 100 steps: every step
    # the same arithmetic as sample in one process: bit-identical end points
    np.testing.assert_array_equal(X[-1], sampler.sample(5, random_state=0))
