"""FlowOverSampler under ``X -> a X + b`` (issue 63): the new rows of ``a X + b`` are ``a``
times those of ``X`` plus ``b`` (same seed), to a tolerance relative to ``a * scale`` of the
class; a class without spread gets copies of its row, with a warning naming the fix."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("imblearn")

from skflow.exceptions import MemorizationWarning  # noqa: E402
from skflow.oversampling import FlowOverSampler  # noqa: E402

EPS, EPS32 = float(np.finfo(np.float64).eps), float(np.finfo(np.float32).eps)
#: Same budget as tests/samplers/test_scale_equivariance.py: the offset is stored to
#: ``eps |b|`` (``eps r`` of the class's scale, ``r = |b| / (a scale)``), which the PCA
#: projection, the flow (sensitivity ``<= 1 / sigma`` in its frame) and each of the 20 Heun
#: steps carry on: about ``50 eps r``; 1000 leaves a margin of 20 (measured: 25 eps r). The
#: generators run in float32 (skflow's fast path, the prior's network), so at ``b = 0`` the
#: rounding of the frame's inputs flips float32 roundings: measured 5 eps32, accepted 100.
GROWTH, BASE32 = 1e3, 1e2 * EPS32
#: Offset over spread beyond which the class may be refused (float64 keeps < 6 digits).
MAX_OFFSET_RATIO = 1e10


def class_scale(A: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.var(A, axis=0, ddof=1))))


@functools.lru_cache(maxsize=4)
def imbalanced(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.vstack([3 * rng.normal(size=(40, 4)), 2 + rng.normal(size=(8, 4))])
    return X, np.r_[np.zeros(40, int), np.ones(8, int)]


GENERATORS = {"nw": {}, "nw-float-spread": {"spread": 0.5}, "pretrained": {}}


def new_rows(name: str, X: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    params = {"generator": name.split("-")[0], **GENERATORS[name]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemorizationWarning)  # classes collapsed by rounding
        X_res, _ = FlowOverSampler(random_state=seed, **params).fit_resample(X, y)
    return X_res[len(X) :]


@functools.lru_cache(maxsize=32)
def reference(name: str, data_seed: int, seed: int) -> np.ndarray:
    return new_rows(name, *imbalanced(data_seed), seed)


@pytest.mark.parametrize("name", list(GENERATORS))
@settings(max_examples=6, deadline=None)
@example(a=1e-12, b=0.0, data_seed=0, seed=0)
@example(a=1e6, b=-1e8, data_seed=0, seed=0)
@example(a=1e-12, b=1e8, data_seed=0, seed=0)
@example(a=1e-3, b=1e8, data_seed=0, seed=0)
@given(
    a=st.floats(-12.0, 6.0).map(lambda e: 10.0**e),
    b=st.one_of(
        st.just(0.0),
        st.tuples(st.sampled_from([-1.0, 1.0]), st.floats(0.0, 8.0)).map(
            lambda p: p[0] * 10 ** p[1]
        ),
    ),
    data_seed=st.integers(0, 1),
    seed=st.integers(0, 2**16),
)
def test_new_rows_are_scale_and_offset_equivariant(name, a, b, data_seed, seed):
    X, y = imbalanced(data_seed)
    scale = a * class_scale(X[y == 1])
    r = abs(b) / scale
    try:
        got = new_rows(name, a * X + b, y, seed)
    except ValueError as error:
        assert r > MAX_OFFSET_RATIO, f"{name} refused a={a:g}, b={b:g} (r={r:.3g}): {error}"
        assert "centre the data first" in str(error)
        return
    err = np.max(np.abs(got - (a * reference(name, data_seed, seed) + b))) / scale
    assert err <= BASE32 + GROWTH * EPS * r, f"{name}: a={a:g}, b={b:g}, r={r:.3g}, {err:.3g}"


@pytest.mark.exactness
@pytest.mark.parametrize("generator", ["nw", "pretrained"])
@pytest.mark.parametrize("rows", [1, 5])
def test_a_class_of_one_repeated_row_gets_copies_of_it(generator, rows):
    """A minority class of one repeated row spread its new rows 0.37 along two of four columns
    (a fallback scale of 1 in the flow's frame, along arbitrary principal axes); a single row
    was refused. With no spread there is no scale: copies, with the warning naming the fix."""
    X, y = imbalanced(0)
    X = np.vstack([X[y == 0], np.repeat([[1.0, 2.0, 3.0, 4.0]], rows, axis=0)])
    y = np.r_[np.zeros(40, int), np.ones(rows, int)]
    with pytest.warns(MemorizationWarning, match="no spread.*class 1"):
        X_res, y_res = FlowOverSampler(generator=generator, random_state=0).fit_resample(X, y)
    new = X_res[len(X) :]
    assert len(new) == 40 - rows and np.all(y_res[len(X) :] == 1)
    np.testing.assert_array_equal(new, np.repeat([[1.0, 2.0, 3.0, 4.0]], len(new), axis=0))


def test_a_class_spread_below_resolution_is_refused_naming_the_fix():
    X, y = imbalanced(0)
    X = X.copy()
    X[y == 1] = 1e8 + 1e-4 * X[y == 1]
    with pytest.raises(ValueError, match="below float64 resolution.*centre the data first"):
        FlowOverSampler(random_state=0).fit_resample(X, y)
