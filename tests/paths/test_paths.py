"""Paths: the one home of sigma_t, conditional samples, targets and the local-mean velocity.

OTPath's numbers, and the generic formulae of GaussianPath checked against them.
"""

import numpy as np
import pytest
import torch

from skflow._validation import InvalidParameterError
from skflow.paths import GaussianPath, OTPath, as_path

SIGMA_MIN = 0.05


def _data(n=6, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((n, d)), rng.random(n)


@pytest.mark.exactness
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


class _GenericOT(GaussianPath):
    """The OT schedule through GaussianPath's generic formulae only (no OT overrides)."""

    def __init__(self, sigma_min):
        self.sigma_min = sigma_min

    def alpha(self, t):
        return t

    def sigma(self, t):
        return 1.0 - (1.0 - self.sigma_min) * t

    def d_alpha(self, t):
        return 1.0 + 0.0 * t

    def d_sigma(self, t):
        return -(1.0 - self.sigma_min) + 0.0 * t


def test_generic_formulae_agree_with_the_ot_closed_forms():
    ot, generic = OTPath(SIGMA_MIN), _GenericOT(SIGMA_MIN)
    x0, x1, t = _data(seed=3)
    xt = ot.sample_conditional(x0, x1, t)
    for name, args in [
        ("sample_conditional", (x0, x1, t)),
        ("conditional_velocity", (x0, x1, t)),
        ("target_velocity", (xt, x1, t)),
        ("velocity_from_mean", (x1, xt, t)),
        ("mean_from_velocity", (x1, xt, t)),
        ("bandwidth", (t,)),
    ]:
        np.testing.assert_allclose(
            getattr(generic, name)(*args), getattr(ot, name)(*args), rtol=1e-12, err_msg=name
        )
    gain, decay = generic.velocity_coefficients(t)
    np.testing.assert_allclose(gain, 1.0, rtol=1e-15)
    np.testing.assert_allclose(decay, 1.0 - SIGMA_MIN, rtol=1e-15)


def test_generic_bandwidth_inverse_by_bisection():
    generic, ot = _GenericOT(SIGMA_MIN), OTPath(SIGMA_MIN)
    h = np.array([0.06, 0.5, 1.0, 3.0, 50.0])  # from h(1) = sigma_min up
    np.testing.assert_allclose(generic.time_of_bandwidth(h), ot.time_of_bandwidth(h), rtol=1e-13)
    got = generic.time_of_bandwidth(torch.from_numpy(h))
    assert torch.is_tensor(got)
    np.testing.assert_allclose(got.numpy(), ot.time_of_bandwidth(h), rtol=1e-13)
    assert abs(generic.time_of_bandwidth(2.0) - ot.time_of_bandwidth(2.0)) < 1e-13
    assert generic.time_of_bandwidth(np.inf) < 1e-15
    assert generic.time_of_bandwidth(1e-3) == 1.0  # below h(1): the end of the path


def test_generic_conditional_velocity_needs_a_time():
    with pytest.raises(ValueError, match="depends on t"):
        _GenericOT(SIGMA_MIN).conditional_velocity(np.zeros(2), np.ones(2))


def test_as_path_resolves_the_default_and_refuses_non_paths():
    assert as_path(None, 0.2) == OTPath(0.2)
    path = _GenericOT(0.2)
    assert as_path(path, 0.7) is path
    with pytest.raises(TypeError, match="GaussianPath"):
        as_path(0.2)


def test_the_oracle_schedule_form_is_the_ot_closed_form():
    # tests/nw_reference.py: the generic (schedule) formula reproduces its OT closed form
    from nw_reference import brute_force_field, brute_force_log_density, ot_schedule

    rng = np.random.default_rng(4)
    x, S, t = rng.standard_normal((5, 2)), rng.standard_normal((6, 2)), rng.random(5)
    w, u = brute_force_field(x, S, t, SIGMA_MIN)
    w_s, u_s = brute_force_field(x, S, t, schedule=ot_schedule(SIGMA_MIN))
    np.testing.assert_allclose(w_s, w, rtol=1e-13)
    np.testing.assert_allclose(u_s, u, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        brute_force_log_density(x, S, 0.6, schedule=ot_schedule(SIGMA_MIN)),
        brute_force_log_density(x, S, 0.6, SIGMA_MIN),
        rtol=1e-13,
    )
