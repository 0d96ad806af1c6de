"""The work items of a sampling call depend on the problem alone, never on the thread count.

Same seed, same samples on any thread count (SPEC section 4) needs the partition of a call
into items to be a function of its size only: :func:`skflow.threads.rows_per_item` gives the
same rows at 1, 2, 3 and 8 threads (closed form: one item up to ``SPLIT_WORK`` products, else
``min(ITEM_WORK // (n_keys * n_features), ceil(n_rows / MIN_ITEMS))`` rows, within
``[MIN_ITEM_ROWS, most]``), and :func:`skflow.threads.map_on_threads` returns the same
results whatever the number of threads that run the items.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from thread_counts import on_threads

from skflow.threads import (
    ITEM_WORK,
    MIN_ITEM_ROWS,
    MIN_ITEMS,
    SPLIT_WORK,
    map_on_threads,
    rows_per_item,
)

THREAD_COUNTS = (1, 2, 3, 8)
#: (n_keys, n_features, most, n_rows): one item, the floor, the work cap, the MIN_ITEMS split,
#: the cap, a tiny call, no n_rows.
PROBLEMS = [
    (10, 16, 4096, 4096),
    (1 << 20, 64, 4096, 4096),
    (65536, 64, 4096, 4096),
    (4096, 64, 4096, 4096),
    (1000, 16, 100, 4096),
    (1, 1, 7, 3),
    (1000, 16, 4096, None),
]


def _boundaries(n_rows: int, rows: int) -> list[tuple[int, int]]:
    return [(s, min(s + rows, n_rows)) for s in range(0, n_rows, rows)]


@pytest.mark.parametrize("n_threads", THREAD_COUNTS)
@pytest.mark.parametrize("problem", PROBLEMS)
def test_item_rows_are_the_closed_form_at_any_thread_count(n_threads, problem):
    n_keys, n_features, most, n_rows = problem
    per_row = n_keys * n_features
    rows = ITEM_WORK // per_row
    if n_rows is not None:
        split = MIN_ITEMS if n_rows * per_row > SPLIT_WORK else 1
        rows = min(rows, -(-n_rows // split))
    want = min(most, max(MIN_ITEM_ROWS, rows))
    assert on_threads(n_threads, lambda: rows_per_item(*problem)) == want


def test_large_calls_get_at_least_min_items_and_small_ones_one():
    assert rows_per_item(4096, 64, 4096, 4096) * MIN_ITEMS <= 4096
    assert rows_per_item(50, 16, 4096, 256) == 256  # 204,800 products: one item
    assert -(-10_000 // rows_per_item(2000, 8, 4096, 10_000)) >= MIN_ITEMS


def test_item_boundaries_are_the_same_for_1_2_3_and_8_threads():
    n_rows = 10_000
    parts = {
        n: on_threads(n, lambda: _boundaries(n_rows, rows_per_item(2000, 8, 4096, n_rows)))
        for n in THREAD_COUNTS
    }
    assert len(parts[1]) > 1  # the problem is cut into several items
    assert all(p == parts[1] for p in parts.values())


def test_items_give_the_same_results_on_any_thread_count():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(600, 32))
    rows = rows_per_item(600, 32, 4096)
    items = [(A[s:e],) for s, e in _boundaries(len(A), 64)]

    def item(block):
        return block @ A.T  # a BLAS call: on one thread inside every item

    out = {n: np.vstack(map_on_threads(item, items, n_threads=n)) for n in THREAD_COUNTS}
    for n in THREAD_COUNTS:
        np.testing.assert_array_equal(out[n], out[1])  # one process: bit-identical
    assert rows == on_threads(8, lambda: rows_per_item(600, 32, 4096))


def _native_thread_counts():
    """This OS thread's OpenMP and MKL thread counts, read from Torch's own libraries
    (both are per-thread settings that ``torch.get_num_threads`` does not show)."""
    import ctypes
    import pathlib

    probes = {}
    for path in sorted((pathlib.Path(torch.__file__).parent / "lib").glob("libtorch_cpu.*")):
        lib = ctypes.CDLL(str(path))
        for name in ("omp_get_max_threads", "mkl_get_max_threads"):
            if hasattr(lib, name):
                probes[name] = getattr(lib, name)
    return {name: int(probe()) for name, probe in probes.items()}


def test_every_item_runs_its_native_pools_on_one_thread():
    if not _native_thread_counts():
        pytest.skip("this Torch build exposes neither OpenMP's nor MKL's thread count")
    seen = map_on_threads(lambda _: _native_thread_counts(), [(i,) for i in range(6)], 3)
    # a new thread starts at the libraries' defaults (one per core) unless it is set again
    assert all(set(counts.values()) == {1} for counts in seen), seen


def test_joblib_thread_workers_hold_their_share_of_the_cores():
    import joblib

    from skflow.threads import parallel_map, worker_threads

    if not _native_thread_counts():
        pytest.skip("this Torch build exposes neither OpenMP's nor MKL's thread count")
    with joblib.parallel_config(backend="threading"):
        seen = parallel_map(lambda _: _native_thread_counts(), [(i,) for i in range(4)], 2)
        share = worker_threads(2)
    assert all(max(counts.values()) <= share for counts in seen), (seen, share)
