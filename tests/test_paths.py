"""OTPath: the one home of sigma_t, conditional samples, targets and the local-mean velocity."""

import numpy as np
import pytest
import torch

from skflow._validation import InvalidParameterError
from skflow.paths import OTPath

SIGMA_MIN = 0.05


def _data(n=6, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((n, d)), rng.random(n)


def test_sigma_and_ends_of_the_conditional_path():
    path = OTPath(SIGMA_MIN)
    x0, x1, _ = _data()
    np.testing.assert_allclose(path.sigma(np.array([0.0, 1.0])), [1.0, SIGMA_MIN], rtol=1e-14)
    np.testing.assert_array_equal(path.sample_conditional(x0, x1, 0.0), x0)
    np.testing.assert_allclose(path.sample_conditional(x0, x1, 1.0), x1 + SIGMA_MIN * x0)


def test_per_row_times_broadcast_like_a_column():
    path = OTPath(SIGMA_MIN)
    x0, x1, t = _data()
    rows = np.stack([path.sample_conditional(x0[i], x1[i], t[i]) for i in range(len(t))])
    np.testing.assert_allclose(path.sample_conditional(x0, x1, t), rows, rtol=1e-15)
    mean = x1
    u_rows = np.stack([path.velocity_from_mean(mean[i], x0[i], t[i]) for i in range(len(t))])
    np.testing.assert_allclose(path.velocity_from_mean(mean, x0, t), u_rows, rtol=1e-15)


def test_target_is_the_conditional_velocity_along_the_path():
    # u_t(x_t | x_1) = x_1 - (1 - sigma_min) x_0 for every t: SPEC section 2.
    path = OTPath(SIGMA_MIN)
    x0, x1, t = _data()
    xt = path.sample_conditional(x0, x1, t)
    expected = x1 - (1.0 - SIGMA_MIN) * x0
    np.testing.assert_allclose(path.conditional_velocity(x0, x1), expected, rtol=1e-15)
    np.testing.assert_allclose(path.target_velocity(xt, x1, t), expected, rtol=1e-12)
    # the local mean of a one-point support is that point: same velocity
    np.testing.assert_allclose(path.velocity_from_mean(x1, xt, t), expected, rtol=1e-12)


def test_mean_and_velocity_are_inverse_maps():
    path = OTPath(SIGMA_MIN)
    x, mean, t = _data(seed=1)
    u = path.velocity_from_mean(mean, x, t)
    np.testing.assert_allclose(path.mean_from_velocity(u, x, t), mean, rtol=1e-12, atol=1e-12)
    h = path.bandwidth(t)
    np.testing.assert_allclose(path.time_of_bandwidth(h), t, rtol=1e-12)


def test_torch_tensors_give_the_numpy_numbers():
    path = OTPath(SIGMA_MIN)
    x0, x1, t = _data(seed=2)
    T = [torch.from_numpy(a) for a in (x0, x1, t)]
    pairs = [
        (path.sample_conditional(*T), path.sample_conditional(x0, x1, t)),
        (path.conditional_velocity(T[0], T[1]), path.conditional_velocity(x0, x1)),
        (path.velocity_from_mean(T[1], T[0], T[2]), path.velocity_from_mean(x1, x0, t)),
        (path.mean_from_velocity(T[1], T[0], T[2]), path.mean_from_velocity(x1, x0, t)),
    ]
    for got, expected in pairs:
        assert torch.is_tensor(got)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-15)
    # batched times (B, n) broadcast as t[..., None] against (B, n, d)
    xb = torch.from_numpy(np.stack([x0, x1]))
    tb = torch.from_numpy(np.stack([t, t]))
    out = path.sample_conditional(xb, xb, tb[..., None])
    np.testing.assert_allclose(out[0].numpy(), path.sample_conditional(x0, x0, t), rtol=1e-15)


@pytest.mark.parametrize("bad", [0, 0.0, 1.0, -0.1, True, "0.01", float("nan")])
def test_bad_sigma_min_is_an_invalid_parameter(bad):
    with pytest.raises(InvalidParameterError, match="sigma_min must be"):
        OTPath(bad)
