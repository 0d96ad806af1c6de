"""``median_nn_distance`` against a float64 brute force (the spacing ``spread`` is relative to).

The oracle: every pairwise distance by :func:`scipy.spatial.distance.cdist` (differences, not
the expanded ``|q|^2 - 2 q.b + |b|^2`` of the function), the diagonal excluded, the minimum
per query row and :func:`numpy.median`. The data are skewed (exponential gaps on a line, a
cluster with far outliers) so a mean would differ from the median by far more than the
tolerance: ``1e-9`` relative plus ``1e-6`` of the data's scale, the rounding of the expanded
form on squared distances (``|sqrt(a) - sqrt(b)| <= sqrt(|a - b|)``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import cdist

from skflow.samplers._kernel_geometry import median_nn_distance


def _nn_distances(X: np.ndarray, rows: np.ndarray) -> np.ndarray:
    D = cdist(X[rows].astype(np.float64), X.astype(np.float64))
    D[np.arange(rows.size), rows] = np.inf  # a row is not its own neighbour
    return D.min(axis=1)


def _tolerance(X: np.ndarray) -> float:
    return 1e-6 * float(np.abs(X - X.mean(axis=0)).max() + 1e-300)


def _skewed(m: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    line = np.cumsum(rng.exponential(size=m))[:, None] * np.ones((1, d))
    return line + 1e-3 * rng.normal(size=(m, d))


@pytest.mark.parametrize("m,d", [(7, 1), (51, 3), (255, 8)])
def test_odd_supports_give_the_median_of_the_nearest_neighbour_distances(m, d):
    X = _skewed(m, d, seed=m)
    nn = _nn_distances(X, np.arange(m))
    assert abs(np.mean(nn) - np.median(nn)) > 0.05 * np.median(nn)  # a mean would show
    assert median_nn_distance(X) == pytest.approx(np.median(nn), rel=1e-9, abs=_tolerance(X))


def test_a_cluster_with_outliers_gives_the_clusters_spacing():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(scale=0.1, size=(40, 2)), [[50.0, 0.0], [0.0, 80.0], [-90, 9]]])
    nn = _nn_distances(X, np.arange(len(X)))
    assert np.mean(nn) > 3 * np.median(nn)
    assert median_nn_distance(X) == pytest.approx(np.median(nn), rel=1e-9, abs=_tolerance(X))


def test_large_supports_use_evenly_spaced_query_rows():
    X = _skewed(20_001, 2, seed=3)  # more rows than queried: 256 evenly spaced queries
    rows = np.unique(np.linspace(0, len(X) - 1, 256).astype(np.intp))
    nn = _nn_distances(X, rows)
    assert median_nn_distance(X) == pytest.approx(np.median(nn), rel=1e-9, abs=_tolerance(X))


def test_duplicates_count_and_tiny_supports_give_nan():
    X = np.repeat(np.arange(5.0)[:, None], 2, axis=0)  # every row has a copy
    assert median_nn_distance(X) == 0.0
    assert np.isnan(median_nn_distance(np.ones((1, 3))))


def test_the_result_is_relative_to_the_data_under_an_offset():
    X = _skewed(31, 2, seed=4)
    want = median_nn_distance(X)
    assert median_nn_distance(X + 1e6) == pytest.approx(want, rel=1e-6)  # centred first


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(2, 40), st.integers(1, 4)),
        elements=st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False),
    )
)
def test_any_support_matches_the_brute_force(X):
    nn = np.sort(_nn_distances(X, np.arange(len(X))))
    got = median_nn_distance(X)
    tol = _tolerance(X) + 1e-9 * nn.max()
    k = len(nn) // 2
    if len(nn) % 2:  # odd: the middle distance itself
        assert got == pytest.approx(nn[k], abs=tol)
    else:  # even: a median, between the two middle distances
        assert nn[k - 1] - tol <= got <= nn[k] + tol
