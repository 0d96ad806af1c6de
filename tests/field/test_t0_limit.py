"""The exact field at t = 0 is its limit t -> 0+ for every accepted bandwidth.

For ``"ot"``, a float and a callable growing like ``c sigma_t / t`` the weights tend to uniform;
for a callable bounded at 0 the x-space width ``t h(t)`` vanishes and the weights tend to one-hot
on ``argmax_i <x, s_i>``. Values at t = 0 are compared with values at t = 1e-12 (within 1e-8),
for the nw_* functions (NumPy, Torch, scalar and per-row times, dense and streamed support,
with a projection) and for NWFlowSampler on both backends.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skflow import NWFlowSampler
from skflow import field as F

SIGMA_MIN = 0.01
TINY = 1e-12


def _bounded(t):
    return 0.3 + 0.0 * t


def _ot_like(t):
    return 0.5 * (1.0 - (1.0 - SIGMA_MIN) * t) / t


KINDS = {"ot": "ot", "float": 0.5, "bounded callable": _bounded, "c*sigma_t/t": _ot_like}
FUNCTIONS = {
    "weights": F.nw_weights,
    "local_mean": F.nw_local_mean,
    "velocity": F.nw_velocity,
    "n_eff": F.nw_effective_sample_size,
    "divergence": F.nw_divergence,
}


# tiny tensors: one Torch thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    return rng.normal(size=(7, 3)), rng.normal(size=(6, 3))


def _np(a):
    return a.detach().cpu().numpy() if torch.is_tensor(a) else np.asarray(a)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("fn", list(FUNCTIONS))
@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("variant", ["scalar", "per-row", "streamed", "projected"])
def test_field_at_zero_equals_limit(data, kind, fn, lib, variant):
    support, x = data
    conv = torch.from_numpy if lib == "torch" else np.asarray
    kwargs = {"sigma_min": SIGMA_MIN, "bandwidth": KINDS[kind]}
    if variant == "streamed":
        kwargs["support_chunk_size"] = 2
    if variant == "projected":
        kwargs["projection"] = conv(np.array([[1.0, 0.5, 0.0], [0.0, 1.0, -2.0]]))
    t0, t1 = 0.0, TINY
    if variant == "per-row":  # zero and tiny times mixed with ordinary ones in one call
        t0 = conv(np.array([0.0, 0.4, 0.0, 1.0, 0.0, 0.7]))
        t1 = conv(np.array([TINY, 0.4, TINY, 1.0, TINY, 0.7]))
    at0 = _np(FUNCTIONS[fn](conv(x), conv(support), t0, **kwargs))
    at1 = _np(FUNCTIONS[fn](conv(x), conv(support), t1, **kwargs))
    assert np.all(np.isfinite(at0))
    np.testing.assert_allclose(at0, at1, rtol=0, atol=1e-8)


@pytest.mark.exactness
def test_bounded_callable_is_one_hot_on_the_argmax(data):
    """The limit is the hard argmax of <x, s_i>, not the uniform vector of the old rule."""
    support, x = data
    w = F.nw_weights(x, support, 0.0, bandwidth=_bounded)
    expected = np.eye(support.shape[0])[np.argmax(x @ support.T, axis=1)]
    np.testing.assert_array_equal(w, expected)
    assert np.all(F.nw_effective_sample_size(x, support, 0.0, bandwidth=_bounded) == 1.0)


@pytest.mark.exactness
@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("streamed", [False, True])
def test_bounded_callable_ties_follow_the_next_order_term(lib, streamed):
    """x = 0 ties every <x, s_i>: the limit is softmax(-||s_i||^2 / (2 h(0)^2)) (uncentred
    norms, whatever the centring inside), and exact ties share the weight equally."""
    conv = torch.from_numpy if lib == "torch" else np.asarray
    support = np.array([[1.0, 0.0], [0.0, 0.5], [0.5, 0.0], [-0.5, 0.0], [3.0, 3.0]])
    x = np.zeros((1, 2))
    kwargs = {"bandwidth": _bounded, "support_chunk_size": 2 if streamed else None}
    logits = -np.sum(support**2, axis=1) / (2 * 0.3**2)
    expected = np.exp(logits - logits.max())
    expected /= expected.sum()
    w0 = _np(F.nw_weights(conv(x), conv(support), 0.0, **kwargs))
    np.testing.assert_allclose(w0, expected[None], rtol=1e-12, atol=1e-15)
    assert w0[0, 1] == w0[0, 2] == w0[0, 3]  # equal norms: exactly equal weights
    w1 = _np(F.nw_weights(conv(x), conv(support), TINY, **kwargs))
    np.testing.assert_allclose(w0, w1, atol=1e-8)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_sampler_at_zero_equals_limit(data, kind, backend):
    support, x = data
    s = NWFlowSampler(bandwidth=KINDS[kind], sigma_min=SIGMA_MIN, backend=backend).fit(support)
    for method in ("weights", "velocity", "effective_sample_size", "divergence"):
        at0 = getattr(s, method)(x, 0.0)
        at1 = getattr(s, method)(x, TINY)
        np.testing.assert_allclose(at0, at1, rtol=0, atol=1e-8, err_msg=method)
    # Sampling starts at t = 0 with the limit field: both backends agree.
    other = "torch" if backend == "numpy" else "numpy"
    twin = NWFlowSampler(bandwidth=KINDS[kind], sigma_min=SIGMA_MIN, backend=other)
    np.testing.assert_allclose(
        s.sample(5, random_state=0), twin.fit(support).sample(5, random_state=0), atol=1e-8
    )


REJECTED = {
    "h(0) = 0": (lambda t: t, r"bandwidth\(0\) returned 0"),
    "h(0) = nan": (lambda t: 0.1 + np.sin(t) / t, r"bandwidth\(0\) returned nan"),
    "h ~ t^(-1/2)": (lambda t: 1.0 / np.sqrt(t), "grows too slowly"),
    "discontinuous at 0": (lambda t: 0.3 + t**0.1, "not continuous at t = 0"),
}


@pytest.mark.parametrize("name", list(REJECTED))
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_rejected_bandwidths_say_why(data, name, lib):
    support, x = data
    conv = torch.from_numpy if lib == "torch" else np.asarray
    bandwidth, match = REJECTED[name]
    with pytest.raises(ValueError, match=match):
        F.nw_velocity(conv(x), conv(support), 0.0, bandwidth=bandwidth)
    with pytest.raises(ValueError, match=match):  # per-row times take the on-device path
        F.nw_weights(conv(x), conv(support), conv(np.zeros(len(x))), bandwidth=bandwidth)
    s = NWFlowSampler(bandwidth=bandwidth, backend=lib).fit(support)
    with pytest.raises(ValueError, match=match):
        s.sample(2, random_state=0)
    # Away from t = 0 the same callables are used as given.
    assert np.all(np.isfinite(s.velocity(x, 0.5)))


def test_kernel_coefficients_mark_the_hard_limit():
    a, b, _ = F.kernel_coefficients(np.array([0.0, 0.5]), bandwidth=_bounded)
    assert np.isinf(a[0]) and a[1] == pytest.approx(1.0 / (0.5 * 0.09))
    np.testing.assert_allclose(b, 0.5 / 0.09)
    a, b, _ = F.kernel_coefficients(0.0, bandwidth=_ot_like)
    assert a == 0.0 and b == 0.0


@pytest.mark.exactness
@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("bandwidth", ["ot", 0.5])
def test_times_past_an_end_are_held_at_that_end(lib, bandwidth):
    """With ``time_tolerance=inf`` the field is frozen outside [0, 1]: ``u_t = u_1`` for
    ``t > 1`` and ``u_0`` for ``t < 0``, on either library, scalar or per-row times."""
    rng = np.random.default_rng(5)
    S, X = rng.normal(size=(30, 3)), rng.normal(size=(8, 3))
    if lib == "torch":
        S, X = torch.from_numpy(S), torch.from_numpy(X)
    field = F.NWField(S, sigma_min=0.1, bandwidth=bandwidth, time_tolerance=float("inf"))

    def v(t):
        out = field.velocity(X, t)
        return out.numpy() if lib == "torch" else out

    at_one, at_zero = v(1.0), v(0.0)
    assert not np.allclose(at_one, at_zero)  # the two ends differ: the check can fail
    for late in (1.0 + 1e-9, 1.2, 7.0):
        np.testing.assert_array_equal(v(late), at_one)
    for early in (-1e-9, -0.4):
        np.testing.assert_array_equal(v(early), at_zero)
    per_row = np.array([1.3, -0.2, 0.5, 1.0, 0.0, 2.0, -3.0, 0.5])
    expected = v(np.clip(per_row, 0.0, 1.0))
    np.testing.assert_array_equal(v(per_row), expected)
