"""Per-row Torch times outside [0, 1] are clamped like NumPy and scalar times (time_tolerance).

The default ``time_tolerance=inf`` freezes the field at the nearest end: ``u_t = u_1`` for
``t > 1`` and ``u_0`` for ``t < 0``. A per-row time tensor takes the Torch path of
:mod:`skflow.field._coefficients` (the coefficients stay on the tensor's device), a NumPy time
array the host path and a Python float the scalar path; the three must agree. Tolerance:
1e-12 relative (the same float64 formulas, in Torch and in NumPy; only rounding differs).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from skflow.field import NWField  # noqa: E402
from skflow.field._coefficients import host_coefficients, torch_coefficients  # noqa: E402
from skflow.paths import CosinePath, OTPath  # noqa: E402

#: Times below 0, at and near both ends, inside, and well past 1 (dopri5 overshoots to 1.5).
TIMES = np.array([-0.4, -1e-9, 0.0, 0.3, 0.9, 1.0, 1.0 + 1e-9, 1.5, 3.0])
RTOL = 1e-12


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(12, 3)), rng.normal(size=(TIMES.size, 3))


@pytest.mark.parametrize("path", [OTPath(0.05), CosinePath(0.05)], ids=["ot", "cosine"])
@pytest.mark.parametrize("bandwidth", ["ot", 0.7])
def test_tensor_coefficients_are_those_at_the_clamped_times(path, bandwidth):
    t = torch.as_tensor(TIMES)
    kwargs = {"dtype": torch.float64, "device": "cpu", "tolerance": np.inf}  # NWField's default
    got = torch_coefficients(t, path=path, bandwidth=bandwidth, **kwargs)
    want = host_coefficients(np.clip(TIMES, 0.0, 1.0), path, bandwidth)[:3]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=RTOL, atol=0)


@pytest.mark.parametrize("method", ["velocity", "weights"])
def test_tensor_times_match_numpy_and_scalar_times(data, method):
    S, X = data
    field = NWField(S, sigma_min=0.05)
    t_field = NWField(torch.as_tensor(S), sigma_min=0.05)
    got = getattr(t_field, method)(torch.as_tensor(X), torch.as_tensor(TIMES)).numpy()
    host = getattr(field, method)(X, TIMES)  # the NumPy path clamps on the host
    np.testing.assert_allclose(got, host, rtol=RTOL, atol=1e-14)
    clamped = np.clip(TIMES, 0.0, 1.0)
    for i, t in enumerate(clamped):  # the scalar path at the clamped time, row by row
        row = getattr(field, method)(X[i : i + 1], float(t))
        np.testing.assert_allclose(got[i : i + 1], row, rtol=RTOL, atol=1e-14)


def test_tensor_times_past_one_are_frozen_at_one(data):
    S, X = data
    t_field = NWField(torch.as_tensor(S), sigma_min=0.05)
    Xt = torch.as_tensor(X)
    past = t_field.velocity(Xt, torch.full((X.shape[0],), 1.5, dtype=torch.float64))
    at_one = t_field.velocity(Xt, torch.ones(X.shape[0], dtype=torch.float64))
    np.testing.assert_allclose(past.numpy(), at_one.numpy(), rtol=RTOL, atol=0)
    before = t_field.velocity(Xt, torch.full((X.shape[0],), -0.5, dtype=torch.float64))
    at_zero = t_field.velocity(Xt, torch.zeros(X.shape[0], dtype=torch.float64))
    np.testing.assert_allclose(before.numpy(), at_zero.numpy(), rtol=RTOL, atol=0)
