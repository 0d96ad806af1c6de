"""One dtype rule for skflow.field and NWFlowSampler: float32 in, float32 out (computed
accurately), anything else float64; the same on the NumPy and Torch backends."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from sklearn.neighbors import KernelDensity

from skflow import DensityOptions, NWFlowSampler
from skflow import field as F

SIGMA_MIN = 0.01
FIELD_FUNCTIONS = [name for name in F.__all__ if name.startswith("nw_")]


# tiny tensors: one Torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    return rng.normal(size=(12, 2)), rng.normal(size=(5, 2))


def _dtypes(out):
    outs = out if isinstance(out, tuple) else (out,)
    return {str(o.dtype).replace("torch.", "") for o in outs}


#: The prepared field's methods, each the twin of one ``nw_*`` function.
FIELD_METHODS = {name: name.removeprefix("nw_") for name in FIELD_FUNCTIONS}


def test_every_public_field_function_is_covered():
    """The tables below must cover all of skflow.field's public functions and NWField."""
    functions = {name for name in F.__all__ if inspect.isfunction(getattr(F, name))}
    assert functions == {*FIELD_FUNCTIONS, "kernel_coefficients", "default_chunk_size"}
    assert set(F.__all__) - functions == {"NWField", "ENGINES", "ATTENTION_BIASES", "FALLBACKS"}
    assert all(callable(getattr(F.NWField, m)) for m in FIELD_METHODS.values())


CASES = [  # (library, x dtype, support dtype, expected output dtype)
    ("numpy", "float32", "float32", "float32"),
    ("numpy", "float64", "float64", "float64"),
    ("numpy", "float32", "float64", "float64"),
    ("numpy", "int64", "int64", "float64"),
    ("torch", "float32", "float32", "float32"),
    ("torch", "float64", "float64", "float64"),
    ("torch", "float64", "float32", "float64"),
    ("torch", "float16", "float16", "float64"),
    ("torch", "bfloat16", "bfloat16", "float64"),
]


def _convert(lib, a, dtype):
    if lib == "numpy":
        return np.asarray(a).astype(dtype)
    return torch.from_numpy(np.asarray(a, dtype=np.float64)).to(getattr(torch, dtype))


@pytest.mark.parametrize("name", FIELD_FUNCTIONS)
@pytest.mark.parametrize(("lib", "xdt", "sdt", "expected"), CASES)
@pytest.mark.parametrize("t", [0.0, 0.5, 1.0])
def test_field_output_dtype(data, name, lib, xdt, sdt, expected, t):
    support, x = data
    out = getattr(F, name)(
        _convert(lib, x * 3, xdt), _convert(lib, support * 3, sdt), t, sigma_min=SIGMA_MIN
    )
    assert _dtypes(out) == {expected}
    kind = torch.Tensor if lib == "torch" else np.ndarray
    assert all(isinstance(o, kind) for o in (out if isinstance(out, tuple) else (out,)))


@pytest.mark.parametrize("name", FIELD_FUNCTIONS)
@pytest.mark.parametrize(("lib", "xdt", "sdt", "expected"), CASES)
def test_prepared_field_output_dtype(data, name, lib, xdt, sdt, expected):
    """NWField follows the same rule, for every query dtype against one prepared support."""
    support, x = data
    field = F.NWField(_convert(lib, support * 3, sdt), sigma_min=SIGMA_MIN)
    for t in (0.0, 0.5, 1.0):
        out = getattr(field, FIELD_METHODS[name])(_convert(lib, x * 3, xdt), t)
        assert _dtypes(out) == {expected}


def test_coefficients_and_chunk_size_types():
    a, b, s = F.kernel_coefficients(np.float32(0.5))
    assert a.dtype == b.dtype == s.dtype == np.float64
    assert isinstance(F.default_chunk_size(100), int)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize(("t", "offset"), [(0.5, 0.0), (0.99, 0.0), (1.0, 0.0), (0.99, 100.0)])
def test_float32_log_density_within_1e4_nats(data, lib, t, offset):
    """float32 input is computed in float64: within 1e-4 nats of the float64 result (and of
    KernelDensity at t = 1). At points typical of p_t of data far from the origin (offset 100,
    t = 0.99) float32 arithmetic alone would be ~3e-4 nats off: ``t s`` rounds by ~6e-6 and
    the distances are divided by ``sigma_t^2 = 4e-4``."""
    support, _ = data
    support = support + offset
    rng = np.random.RandomState(1)
    sigma_t = 1.0 - (1.0 - SIGMA_MIN) * t
    x = t * support[rng.randint(len(support), size=300)] + sigma_t * rng.normal(size=(300, 2))
    x32, s32 = x.astype(np.float32), support.astype(np.float32)
    ref = F.nw_log_density(x32.astype(np.float64), s32.astype(np.float64), t)
    got = F.nw_log_density(_convert(lib, x32, "float32"), _convert(lib, s32, "float32"), t)
    got = got.numpy() if lib == "torch" else got
    assert got.dtype == np.float32
    assert np.abs(ref).max() < 1e3  # float32 resolves 1e-4 nats at these magnitudes
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)
    if t == 1.0:
        kde = KernelDensity(bandwidth=SIGMA_MIN).fit(s32.astype(np.float64))
        np.testing.assert_allclose(got, kde.score_samples(x32.astype(np.float64)), atol=1e-4)


METHODS = ["velocity", "weights", "effective_sample_size", "divergence"]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("bandwidth", ["ot", 0.5])
@pytest.mark.parametrize(
    ("xdt", "sdt", "expected"),
    [
        ("float32", "float32", np.float32),
        ("float64", "float64", np.float64),
        ("float32", "float64", np.float64),
        ("float64", "float32", np.float64),
    ],
)
def test_sampler_output_dtypes(data, backend, bandwidth, xdt, sdt, expected):
    support, _ = data
    s = NWFlowSampler(
        bandwidth=bandwidth, sigma_min=SIGMA_MIN, backend=backend, random_state=0
    ).fit(support.astype(sdt))
    X = s.sample(8).astype(xdt)
    for method in METHODS:
        assert getattr(s, method)(X, 0.7).dtype == expected, method
    assert s.score_samples(X).dtype == expected
    log_p, err = s.log_density_with_error(X)
    assert log_p.dtype == expected and err.dtype == np.float64
    # sample / sample_trajectories follow the support's dtype (they take no X)
    assert s.sample(3).dtype == np.dtype(sdt)
    times, paths = s.sample_trajectories(3, n_points=5)
    assert paths.dtype == np.dtype(sdt) and times.dtype == np.float64


@pytest.mark.parametrize("bandwidth", ["ot", 0.5])
def test_sampler_float32_log_density_within_1e4_nats(data, bandwidth):
    """score_samples of float32 data equals the float64 value within 1e-4 nats, on both
    backends (closed form and change of variables)."""
    support, _ = data
    s32 = support.astype(np.float32)
    X32 = NWFlowSampler(sigma_min=SIGMA_MIN, random_state=1).fit(s32).sample(50)
    ref = (
        NWFlowSampler(bandwidth=bandwidth, sigma_min=SIGMA_MIN, backend="numpy")
        .fit(s32.astype(np.float64))
        .score_samples(X32.astype(np.float64))
    )
    for backend in ("numpy", "torch"):
        s = NWFlowSampler(bandwidth=bandwidth, sigma_min=SIGMA_MIN, backend=backend).fit(s32)
        got = s.score_samples(X32)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("bandwidth", ["ot", 0.5])
def test_float32_log_density_out_of_range_raises(bandwidth):
    """A float64 log-density below float32's range is an error, not a silent -inf."""
    S = np.array([[0.0, 0.0], [1e18, 1.0]], dtype=np.float32)
    s = NWFlowSampler(
        bandwidth=bandwidth, sigma_min=0.01, density=DensityOptions(max_error=1e300)
    ).fit(S)
    with pytest.raises(ValueError, match="not finite"):
        s.score_samples(np.array([[3e18, 0.0]], dtype=np.float32))
