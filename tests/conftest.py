"""Make every test file's Hypothesis examples independent of what ran before it.

Two things made the examples of a derandomized test depend on the run order:

* Tests without ``derandomize`` drew fresh random examples and replayed failures from the
  example database in ``.hypothesis/``. The ``skflow`` profile below makes every test
  derandomized (the examples are a function of the test alone) with no database; a test's
  own ``@settings`` still sets its ``max_examples`` and the like.
* Hypothesis (6.131 and later) also draws, now and then, constants harvested from the
  *local* modules that are in ``sys.modules`` when a test runs (here: the ``skflow``
  modules; test files are excluded). Which ``skflow`` modules a test run has imported
  depends on the files it collected and the tests that ran before, so the same test saw
  different examples alone and in the whole suite. Importing every ``skflow`` module here,
  before any test runs, gives every order the same set of constants.

``HYPOTHESIS_PROFILE=random python -m pytest ...`` draws fresh random examples instead (for
deeper local runs; CI uses the default profile).

**Fixtures** shared by the test files: ``gaussian_support`` (a factory of a standard normal
support and queries, the data most field tests build) and ``one_torch_thread`` (one Torch
intra-op thread for a module of tiny tensors). The brute-force NW reference is a module,
``tests/nw_reference.py``, imported by the tests that compare with it.

**Threads.** Torch, NumPy's BLAS and OpenMP start one thread per core by default; beside
other work (another test run, a build) those threads oversubscribe the cores and a test that
takes seconds alone takes minutes. The suite therefore runs with a deliberate thread count,
``SKFLOW_TEST_THREADS`` (default 1): Torch's intra-op threads, every BLAS/OpenMP pool of this
process (threadpoolctl) and, through ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
``OPENBLAS_NUM_THREADS``, the subprocesses the tests start (joblib's loky workers set their
own share of the cores). The tests pass with 1 and with 2 threads; to check both::

    SKFLOW_TEST_THREADS=1 python -m pytest tests
    SKFLOW_TEST_THREADS=2 python -m pytest tests
"""

from __future__ import annotations

import importlib
import os
import pkgutil

import numpy as np
import pytest
import torch
from hypothesis import settings
from threadpoolctl import threadpool_limits

import skflow

settings.register_profile("skflow", derandomize=True, database=None, deadline=None)
settings.register_profile("random", derandomize=False, database=None, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "skflow"))


def _test_threads() -> int:
    value = os.environ.get("SKFLOW_TEST_THREADS", "1")
    if not value.isdigit() or int(value) < 1:
        raise pytest.UsageError(f"SKFLOW_TEST_THREADS must be a positive integer, got {value!r}")
    return int(value)


def _set_threads(n_threads: int) -> None:
    torch.set_num_threads(n_threads)
    threadpool_limits(limits=n_threads)  # holds for the whole session (never restored)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(n_threads)


_set_threads(_test_threads())


def _import_all_skflow_modules() -> None:
    for info in pkgutil.walk_packages(skflow.__path__, prefix="skflow."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            # an optional dependency that is missing: the same on every run of this machine
            continue


_import_all_skflow_modules()


@pytest.fixture
def gaussian_support():
    """Factory ``(m, n, d, seed=0) -> (support, x)``: standard normal draws of shapes (m, d)
    and (n, d), the support first, from ``np.random.default_rng(seed)``."""

    def make(m: int, n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        return rng.normal(size=(m, d)), rng.normal(size=(n, d))

    return make


@pytest.fixture(scope="module")
def one_torch_thread():
    """One Torch intra-op thread for the module, restored after it: on a busy CPU, thread
    hand-offs would dominate the run time of tiny tensors."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
