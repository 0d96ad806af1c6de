"""``benchmarks/bench_small_support.py``: the calibration of ``backend="auto"`` (the support
sizes where NumPy wins) and the table of ``skflow/_array.py`` it reads back."""

from __future__ import annotations

import pytest

from skflow._array import AUTO_NUMPY_SUPPORT_CPU


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_small_support")


def test_numpy_support_ranges_keeps_numpy_only_where_it_wins(bench):
    grid = {
        10: [(1.0, 2.0), (1.0, 1.5)],
        50: [(1.0, 2.0), (1.0, 1.2)],
        200: [(1.0, 1.0), (1.0, 3.0)],
        1000: [(1.0, 3.0), (1.0, 3.0)],
        4000: [(5.0, 1.0), (5.0, 1.0)],
    }
    # 10 and 50 win at both n, 200 ties at one n (Torch), 1000 wins, 4000 loses
    assert bench.numpy_support_ranges(grid) == ((1, 100), (447, 2000))
    torch_everywhere = {m: [(2.0, 1.0), (1.0, 1.0)] for m in (10, 50, 200, 1000, 4000)}
    assert bench.numpy_support_ranges(torch_everywhere) == ()
    assert bench.numpy_support_ranges({10: [(1.0, 2.0)]}) == ((1, 2**62),)


def test_the_code_table_is_read_from_the_source(bench):
    assert bench.code_table() == tuple(AUTO_NUMPY_SUPPORT_CPU)
