"""The functional NW field against independent oracles: brute force, autograd, invariances."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from nw_reference import brute_force_field, brute_force_log_density

from skflow.field import (
    kernel_coefficients,
    nw_divergence,
    nw_effective_sample_size,
    nw_local_mean,
    nw_log_density,
    nw_logits,
    nw_velocity,
    nw_velocity_and_divergence,
    nw_weights,
)

TIMES = [0.0, 1e-8, 0.3, 0.999999, 1.0]


def _assert_close(actual, expected, tol=1e-10):
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("t", TIMES)
@pytest.mark.parametrize("m, d", [(1, 1), (1, 64), (7, 3), (50, 16), (500, 2), (500, 64)])
def test_velocity_equals_brute_force(m, d, t):
    rng = np.random.default_rng(m * 100 + d)
    support = rng.normal(size=(m, d))
    x = rng.normal(size=(40, d)) * (0.5 + t)
    w_ref, v_ref = brute_force_field(x, support, t, 0.01)
    _assert_close(nw_weights(x, support, t), w_ref)
    _assert_close(nw_velocity(x, support, t, chunk_size=17), v_ref)
    _assert_close(nw_local_mean(x, support, t), w_ref @ support)


def test_per_row_times_equal_brute_force(gaussian_support):
    support, x = gaussian_support(30, 25, 5, seed=1)
    t = np.linspace(0.0, 1.0, 25)
    _, v_ref = brute_force_field(x, support, t, 0.05)
    _assert_close(nw_velocity(x, support, t, sigma_min=0.05), v_ref)


def test_torch_matches_numpy_in_float64(gaussian_support):
    support, x = gaussian_support(60, 33, 8, seed=2)
    for t in TIMES:
        v_np = nw_velocity(x, support, t)
        v_t = nw_velocity(torch.from_numpy(x), torch.from_numpy(support), t)
        assert isinstance(v_t, torch.Tensor) and v_t.dtype == torch.float64
        _assert_close(v_t.numpy(), v_np)


def test_scaled_bandwidth_changes_only_the_weights(gaussian_support):
    support, x = gaussian_support(20, 10, 3, seed=3)
    t, c, smin = 0.6, 2.0, 0.01
    # brute force with kernel width c * sigma_t in x-space
    _, expected = brute_force_field(x, support, t, smin, width=lambda t, sigma_t: c * sigma_t)
    _assert_close(nw_velocity(x, support, t, bandwidth=c), expected)
    # a callable returning c * sigma_t / t is the same kernel
    same = nw_velocity(x, support, t, bandwidth=lambda s: c * (1 - (1 - smin) * s) / s)
    _assert_close(same, expected)


def test_coefficients_reduce_to_the_ot_form():
    t = np.array([0.0, 0.25, 1.0])
    a, b, sigma_t = kernel_coefficients(t, sigma_min=0.1)
    np.testing.assert_allclose(sigma_t, 1 - 0.9 * t)
    np.testing.assert_allclose(a, t / sigma_t**2)
    np.testing.assert_allclose(b, t**2 / (2 * sigma_t**2))


@pytest.mark.parametrize("t", [0.05, 0.3, 0.7, 0.97])
def test_score_identity_with_autograd(t):
    """u_t(x) = x/t + (sigma_t/t) grad log p_t(x), p_t the path marginal of the support."""
    rng = np.random.default_rng(4)
    support = torch.from_numpy(rng.normal(size=(40, 6)))
    x = torch.from_numpy(rng.normal(size=(15, 6)) * 0.7).requires_grad_(True)
    smin = 0.05
    log_p = nw_log_density(x, support, t, sigma_min=smin)
    (grad,) = torch.autograd.grad(log_p.sum(), x)
    sigma_t = 1 - (1 - smin) * t
    expected = x.detach() / t + (sigma_t / t) * grad
    velocity = nw_velocity(x.detach(), support, t, sigma_min=smin)
    _assert_close(velocity.numpy(), expected.numpy(), tol=1e-9)


@pytest.mark.parametrize("t", [0.0, 0.2, 0.6, 0.99, 1.0])
@pytest.mark.parametrize("projection", [None, "random"])
def test_divergence_equals_autograd_trace(t, projection):
    rng = np.random.default_rng(5)
    support = torch.from_numpy(rng.normal(size=(25, 4)))
    x = torch.from_numpy(rng.normal(size=(6, 4)))
    proj = None if projection is None else torch.from_numpy(rng.normal(size=(2, 4)))

    def field(z):
        return nw_velocity(z, support, t, sigma_min=0.1, projection=proj)

    jac = torch.autograd.functional.jacobian(field, x)  # (n, d, n, d)
    trace = torch.stack([torch.trace(jac[i, :, i, :]) for i in range(x.shape[0])])
    div = nw_divergence(x, support, t, sigma_min=0.1, projection=proj)
    _assert_close(div.numpy(), trace.numpy(), tol=1e-9)
    v, div2 = nw_velocity_and_divergence(x, support, t, sigma_min=0.1, projection=proj)
    _assert_close(v.numpy(), field(x).numpy())
    _assert_close(div2.numpy(), div.numpy())


def test_log_density_at_one_is_the_kde(gaussian_support):
    from sklearn.neighbors import KernelDensity

    support, x = gaussian_support(40, 20, 3, seed=6)
    kde = KernelDensity(bandwidth=0.2).fit(support)
    np.testing.assert_allclose(
        nw_log_density(x, support, 1.0, sigma_min=0.2), kde.score_samples(x), rtol=1e-12
    )


# -- hypothesis properties ------------------------------------------------------------------
finite = st.floats(-5, 5, allow_nan=False, allow_infinity=False)


@st.composite
def problems(draw):
    m = draw(st.integers(1, 12))
    d = draw(st.integers(1, 5))
    n = draw(st.integers(1, 6))
    support = draw(arrays(np.float64, (m, d), elements=finite))
    x = draw(arrays(np.float64, (n, d), elements=finite))
    t = draw(st.floats(0.0, 1.0))
    smin = draw(st.floats(0.01, 0.9))
    return x, support, t, smin


@settings(max_examples=60, deadline=None)
@given(problems())
def test_weights_are_probability_vectors(problem):
    x, support, t, smin = problem
    w = nw_weights(x, support, t, sigma_min=smin)
    assert w.shape == (x.shape[0], support.shape[0])
    assert np.all(w >= 0) and np.all(np.isfinite(w))
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_support_permutation_permutes_weights(problem, rnd):
    x, support, t, smin = problem
    perm = np.array(rnd.sample(range(support.shape[0]), support.shape[0]))
    w = nw_weights(x, support, t, sigma_min=smin)
    w_perm = nw_weights(x, support[perm], t, sigma_min=smin)
    np.testing.assert_allclose(w_perm, w[:, perm], atol=1e-12)
    np.testing.assert_allclose(
        nw_velocity(x, support[perm], t, sigma_min=smin),
        nw_velocity(x, support, t, sigma_min=smin),
        rtol=1e-9,
        atol=1e-9 / (1 - (1 - smin) * t),
    )


@settings(max_examples=60, deadline=None)
@given(problems(), arrays(np.float64, (5,), elements=finite), st.integers(0, 2**31 - 1))
def test_translation_and_rotation_equivariance(problem, shift, seed):
    """u_t(R x + t c; S R^T + c) = R u_t(x; S) + c."""
    x, support, t, smin = problem
    d = x.shape[1]
    c = shift[:d]
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    rot = q * np.sign(np.diag(r))
    moved = nw_velocity(x @ rot.T + t * c, support @ rot.T + c, t, sigma_min=smin)
    expected = nw_velocity(x, support, t, sigma_min=smin) @ rot.T + c
    scale = 1.0 + np.abs(expected).max() + np.abs(x).max() / (1 - (1 - smin) * t)
    np.testing.assert_allclose(moved, expected, atol=1e-8 * scale)


@settings(max_examples=40, deadline=None)
@given(problems())
def test_effective_sample_size_is_m_at_time_zero(problem):
    x, support, _, smin = problem
    n_eff = nw_effective_sample_size(x, support, 0.0, sigma_min=smin)
    np.testing.assert_allclose(n_eff, support.shape[0], rtol=1e-12)
    n_eff_late = nw_effective_sample_size(x, support, 0.9, sigma_min=smin)
    assert np.all(n_eff_late >= 1 - 1e-12) and np.all(n_eff_late <= support.shape[0] + 1e-9)


def test_limits_at_both_ends(gaussian_support):
    support, x = gaussian_support(10, 5, 2, seed=7)
    # t = 0: global average, velocity = mean(S) - (1 - sigma_min) x
    np.testing.assert_allclose(nw_velocity(x, support, 0.0), support.mean(0) - 0.99 * x)
    # t = 1: weights concentrate on the nearest support point
    w = nw_weights(support + 1e-3, support, 1.0, sigma_min=0.01)
    np.testing.assert_allclose(w, np.eye(10), atol=1e-10)


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"t": 1.5}, "t must lie in"),
        ({"t": -0.1}, "t must lie in"),
        ({"t": np.nan}, "t must lie in"),
        ({"sigma_min": 0.0}, "sigma_min"),
        ({"sigma_min": 1.0}, "sigma_min"),
        ({"bandwidth": "silverman"}, "bandwidth"),
        ({"bandwidth": -1.0}, "bandwidth"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = {"t": 0.5, "sigma_min": 0.01, "bandwidth": "ot"} | kwargs
    with pytest.raises(ValueError, match=match):
        nw_velocity(np.zeros((2, 2)), np.ones((3, 2)), args.pop("t"), **args)


def test_bad_shapes():
    with pytest.raises(ValueError, match="features"):
        nw_velocity(np.zeros((2, 3)), np.ones((3, 2)), 0.5)
    with pytest.raises(ValueError, match="empty"):
        nw_velocity(np.zeros((2, 2)), np.ones((0, 2)), 0.5)
    with pytest.raises(ValueError, match="2-D"):
        nw_velocity(np.zeros(2), np.ones((3, 2)), 0.5)
    with pytest.raises(ValueError, match="entries"):
        nw_velocity(np.zeros((2, 2)), np.ones((3, 2)), np.array([0.1, 0.2, 0.3]))
    with pytest.raises(TypeError, match="mix"):
        nw_velocity(torch.zeros(2, 2), np.ones((3, 2)), 0.5)


# -- log-density and logits against brute force ------------------------------------------------


@pytest.mark.parametrize("t", [0.0, 0.3, 0.7, 0.95, 1.0])
@pytest.mark.parametrize("d", [1, 3])
def test_log_density_equals_brute_force_mixture(t, d):
    rng = np.random.default_rng(8 + d)
    support = rng.normal(size=(12, d))
    x = t * support[rng.integers(0, 12, 30)] + rng.normal(size=(30, d))
    expected = brute_force_log_density(x, support, t, 0.05)
    np.testing.assert_allclose(nw_log_density(x, support, t, sigma_min=0.05), expected, rtol=1e-12)
    streamed = nw_log_density(x, support, t, sigma_min=0.05, support_chunk_size=5)
    np.testing.assert_allclose(streamed, expected, rtol=1e-12)


@pytest.mark.parametrize("t", [0.2, 0.5, 0.8])
def test_log_density_integrates_to_one(t):
    """The path marginal is a probability density: a 1-D and a 2-D grid sum to 1."""
    support = np.array([[-1.0, 0.5], [0.8, -0.3], [0.2, 1.1]])
    sigma_t = 1 - 0.99 * t
    # 1-D: first coordinate only; the grid spans 8 sigma_t beyond the outermost means
    g = np.linspace(-t - 8 * sigma_t, t + 8 * sigma_t, 4001)
    p1 = np.exp(nw_log_density(g[:, None], support[:, :1], t))
    assert abs(np.trapezoid(p1, g) - 1.0) < 1e-6
    a = np.linspace(-1.2 * t - 8 * sigma_t, 1.2 * t + 8 * sigma_t, 401)
    xx, yy = np.meshgrid(a, a, indexing="ij")
    p2 = np.exp(nw_log_density(np.column_stack([xx.ravel(), yy.ravel()]), support, t))
    mass = np.trapezoid(np.trapezoid(p2.reshape(xx.shape), a, axis=1), a)
    assert abs(mass - 1.0) < 1e-4


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"bandwidth": 0.5}, {"bandwidth": lambda s: 0.3 + 0.0 * s}, {"projection": "random"}],
)
@pytest.mark.parametrize("t", [0.3, 0.9])
def test_logits_equal_brute_force_up_to_a_row_constant(kwargs, t):
    """Differences between columns are free of the per-row constant the docstring allows."""
    rng = np.random.default_rng(9)
    support, x = rng.normal(size=(9, 3)), rng.normal(size=(7, 3))
    smin = 0.01
    sigma_t = 1 - (1 - smin) * t
    tau = sigma_t  # kernel width in x-space: t * h(t), h = c * sigma_t / t or a callable h(t)
    if "bandwidth" in kwargs:
        bw = kwargs["bandwidth"]
        tau = t * bw(t) if callable(bw) else bw * sigma_t
    P = np.eye(3)
    if kwargs.get("projection") == "random":
        P = rng.normal(size=(2, 3))
        kwargs = {"projection": P}
    diff = (x[:, None, :] - t * support[None, :, :]) @ P.T
    expected = -np.sum(diff**2, axis=2) / (2 * tau**2)
    for rows in (None, 4):  # dense, then the support streamed in chunks of 4 rows
        logits = nw_logits(x, support, t, sigma_min=smin, support_chunk_size=rows, **kwargs)
        got = logits - logits[:, :1]
        np.testing.assert_allclose(got, expected - expected[:, :1], rtol=1e-9, atol=1e-9)
