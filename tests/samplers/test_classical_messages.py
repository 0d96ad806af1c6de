"""The classical samplers' errors say what is wrong and name the fix (issue 63).

Rows whose covariance overflows float64, missing labels, and fits on a single row are refused
at ``fit`` with a ``ValueError`` that names the problem and the remedy, before any arithmetic
produces NaN or a ``LinAlgError``; magnitudes whose covariance float64 still holds work.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.covariance import LedoitWolf

from skflow.samplers import (
    BICGaussianMixtureSampler,
    EmpiricalBayesGaussianSampler,
    LedoitWolfSampler,
    PooledGaussianSampler,
)
from skflow.samplers.classical import _ledoit_wolf_covariance

ARMS = [
    LedoitWolfSampler,
    PooledGaussianSampler,
    EmpiricalBayesGaussianSampler,
    BICGaussianMixtureSampler,
]
IDS = [a.__name__ for a in ARMS]


@pytest.fixture(scope="module")
def classes():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 10)
    return rng.normal(size=(6, 3))[y] + rng.normal(size=(60, 3)), y


@pytest.mark.parametrize("arm", ARMS, ids=IDS)
def test_rows_whose_covariance_overflows_are_refused_with_the_rescaling(arm, classes):
    X, y = classes
    with pytest.raises(ValueError, match=r"overflow float64 in the covariance.*Rescale"):
        arm(random_state=0).fit(X * 1e200, y)
    with pytest.raises(ValueError, match="MaxAbsScaler"):
        arm(random_state=0).fit(X * 1e200, y)


@pytest.mark.parametrize("arm", [LedoitWolfSampler, BICGaussianMixtureSampler])
def test_a_support_whose_covariance_overflows_is_refused_at_sample(arm, classes):
    X, y = classes
    s = arm(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="values of the support overflow float64"):
        s.sample(3, support=X[:10] * 1e200)


@pytest.mark.parametrize("arm", ARMS, ids=IDS)
@pytest.mark.parametrize("scale", [1e80, 1e150])
def test_large_magnitudes_whose_covariance_fits_in_float64_work(arm, scale, classes):
    X, y = classes
    with np.errstate(over="raise", invalid="raise"):  # no overflow on the way either
        s = arm(random_state=0).fit(X * scale, y)
        out = s.sample(5, support=X[:10] * scale)
    assert np.all(np.isfinite(out))
    assert 0.1 * scale < np.abs(out).max() < 100 * scale


def test_the_ledoit_wolf_covariance_is_bit_identical_to_sklearns():
    rng = np.random.default_rng(1)
    for shape, scale in [((5, 3), 1e-5), ((40, 7), 1.0), ((200, 2), 3.7e6)]:
        S = scale * (rng.normal(size=shape) + 10 * rng.normal())
        np.testing.assert_array_equal(_ledoit_wolf_covariance(S), LedoitWolf().fit(S).covariance_)


@pytest.mark.parametrize("arm", ARMS, ids=IDS)
@pytest.mark.parametrize("missing", [np.nan, None])
def test_missing_labels_are_refused(arm, missing, classes):
    X, y = classes
    labels = y.astype(float) if missing is not None else y.astype(object)
    labels[-1] = missing
    with pytest.raises(ValueError, match=r"y contains 1 missing label.*Drop those rows"):
        arm(random_state=0).fit(X, labels)


@pytest.mark.parametrize("arm", ARMS, ids=IDS)
def test_one_row_without_labels_is_refused_at_fit(arm, classes):
    X, _ = classes
    with pytest.raises(ValueError, match=r"at least 2 rows.*n_samples = 1"):
        arm(random_state=0).fit(X[:1])


def test_pooled_classes_of_one_row_each_are_refused(classes):
    X, _ = classes
    with pytest.raises(ValueError, match=r"class of at least 2 rows.*all 5 classes have 1 row"):
        PooledGaussianSampler().fit(X[:5], np.arange(5))
    # one class of 2 rows is enough: its scatter is the within-class covariance
    s = PooledGaussianSampler().fit(X[:5], [0, 0, 1, 2, 3])
    assert np.any(s.within_covariance_ != 0)
