"""Accuracy of NWFlowSampler.score_samples where there is no closed form.

Oracles: the total mass of exp(score_samples) on a grid (it must be a density), the KDE closed
form for ``bandwidth=1.0`` (the same field as ``"ot"``, but computed by the change of
variables), and an independent forward Torch integration with an autograd Jacobian for
``bandwidth=0.5``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA

from skflow import DensityOptions, NWFlowSampler, SolverOptions
from skflow.exceptions import AccuracyWarning

SIGMA_MIN = 0.01
# Three points, well separated compared with the terminal blobs (width ~ sigma_min).
TRIANGLE = np.array([[0.0, 0.0], [1.0, 0.2], [0.3, 0.9]])
# Nearly collinear: the first principal axis separates every point (PCA(n_components=1)
# weights see only that axis).
LINE = np.array([[0.0, 0.0], [1.0, 0.1], [2.0, -0.05]])
HALF_WIDTH = 0.15  # half side of the square window around each support point


def _callable_bandwidth(t):
    return 0.8 * (1.0 - 0.99 * t) / t + 0.003


CASES = {
    "bandwidth=1.0": (dict(bandwidth=1.0), TRIANGLE, 0.0075),
    "bandwidth=0.5": (dict(bandwidth=0.5), TRIANGLE, 0.0075),
    "bandwidth=2.0": (dict(bandwidth=2.0), TRIANGLE, 0.0075),
    "callable": (dict(bandwidth=_callable_bandwidth), TRIANGLE, 0.0075),
    "diagonal": (dict(kernel="diagonal"), TRIANGLE, 0.0075),
    "mahalanobis": (dict(kernel="mahalanobis"), TRIANGLE, 0.0075),
    "pca": (dict(projection=PCA(n_components=1)), LINE, 0.0075),
}


def _windows(support, step):
    """Midpoint grids of side 2 * HALF_WIDTH around each support point, shape (m, g, g, 2)."""
    g = np.arange(-HALF_WIDTH + step / 2, HALF_WIDTH, step)
    local = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1)
    return support[:, None, None, :] + local[None]


@pytest.mark.parametrize("name", list(CASES))
def test_density_integrates_to_one(name):
    """exp(score_samples) integrates to 1 within 1e-3.

    Mass outside the windows is negligible: (1) x_1 = sigma_min x_0 + c with c in the convex
    hull of S for every bandwidth and metric (d(x/sigma_t)/dt = m_w / sigma_t^2 and
    int_0^1 sigma_min / sigma_t^2 dt = 1), so beyond a margin r of the hull the mass is at
    most P(|x_0| > r / sigma_min) = exp(-r^2 / (2 sigma_min^2)) = exp(-112) for r = 0.15;
    (2) inside the hull, 5000 of the model's own samples all fall in the windows (outside mass
    below 6e-4 at 95 %), and the density on the window edges is below 1e-6.
    """
    params, support, step = CASES[name]
    sampler = NWFlowSampler(sigma_min=SIGMA_MIN, random_state=0, **params).fit(support)
    grid = _windows(support, step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        log_p = sampler.score_samples(grid.reshape(-1, 2)).reshape(grid.shape[:-1])
    mass = float(np.exp(log_p).sum() * step * step)
    assert abs(mass - 1.0) < 1e-3, mass
    edges = np.concatenate([log_p[:, [0, -1], :].ravel(), log_p[:, :, [0, -1]].ravel()])
    assert np.exp(edges).max() < 1e-6
    Y = sampler.sample(5000)
    inside = np.all(np.abs(Y[:, None, :] - support[None]) < HALF_WIDTH, axis=2).any(axis=1)
    assert inside.all()


def test_unit_bandwidth_matches_closed_form():
    """bandwidth=1.0 has the field of "ot": the change of variables equals the KDE closed
    form within 1e-2 nats at held-out points and at the model's own samples."""
    rng = np.random.RandomState(0)
    support = rng.normal(size=(20, 2))
    held_out = rng.normal(size=(200, 2))
    exact = NWFlowSampler(sigma_min=SIGMA_MIN, random_state=1).fit(support)
    flow = NWFlowSampler(bandwidth=1.0, sigma_min=SIGMA_MIN).fit(support)
    own = exact.sample(200)
    for X in (held_out, own):
        ref = exact.score_samples(X)
        log_p, err = flow.log_density_with_error(X)
        assert np.max(np.abs(log_p - ref)) < 1e-2
        # The error estimate is of the size of the actual error, or larger.
        actual = np.abs(log_p - ref)
        assert np.all(err >= 0.5 * actual - 1e-6)
    # The held-out points reach log p ~ -1e3: the comparison has a large dynamic range.
    assert exact.score_samples(held_out).min() < -500


def _oracle_flow(x0, support, bandwidth, sigma_min, n_steps):
    """Forward flow x_0 -> x_1 (float64 Torch, RK4 in tau = -log sigma_t) and log|det J|.

    Written from the definition only: softmax(-||x - t s||^2 / (2 (c sigma_t)^2)) weights,
    m = sum_i w_i s_i, dx/dtau = (m - (1 - sigma_min) x) / (1 - sigma_min).
    """
    import torch

    decay = 1.0 - sigma_min
    S = torch.as_tensor(support, dtype=torch.float64)
    x0 = torch.as_tensor(x0, dtype=torch.float64).requires_grad_(True)

    def rhs(tau, x):
        sigma = math.exp(-tau)
        t = (1.0 - sigma) / decay
        d2 = ((x[:, None, :] - t * S[None]) ** 2).sum(-1)
        w = torch.softmax(-d2 / (2.0 * (bandwidth * sigma) ** 2), dim=1)
        return (w @ S - decay * x) / decay

    h = -math.log(sigma_min) / n_steps
    x = x0
    for k in range(n_steps):
        tau = k * h
        k1 = rhs(tau, x)
        k2 = rhs(tau + h / 2, x + h / 2 * k1)
        k3 = rhs(tau + h / 2, x + h / 2 * k2)
        k4 = rhs(tau + h, x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    rows = [torch.autograd.grad(x[:, j].sum(), x0, retain_graph=True)[0] for j in range(2)]
    jac = torch.stack(rows, dim=1)  # (n, 2, 2): rows are independent
    logdet = torch.linalg.slogdet(jac)[1]
    return x.detach().numpy(), logdet.detach().numpy()


def test_half_bandwidth_matches_forward_oracle():
    """bandwidth=0.5: score_samples equals log p0(x0) - log|det dx1/dx0| of an independent
    forward integration; the KDE closed form is far from it (the oracle discriminates)."""
    import torch

    x0 = np.random.RandomState(3).normal(size=(6, 2))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: thread hand-offs would dominate on a busy CPU
    try:
        # 500 and 1000 RK4 steps agree to 1e-7 nats in the log-determinant.
        x1, logdet = _oracle_flow(x0, TRIANGLE, 0.5, SIGMA_MIN, n_steps=500)
    finally:
        torch.set_num_threads(threads)
    ref = -0.5 * np.sum(x0**2, axis=1) - np.log(2 * np.pi) - logdet
    sampler = NWFlowSampler(bandwidth=0.5, sigma_min=SIGMA_MIN).fit(TRIANGLE)
    log_p = sampler.score_samples(x1)
    np.testing.assert_allclose(log_p, ref, atol=1e-3)
    kde = NWFlowSampler(sigma_min=SIGMA_MIN).fit(TRIANGLE).score_samples(x1)
    assert np.max(np.abs(kde - ref)) > 0.1


def test_accuracy_warning_when_tolerance_too_loose():
    """A loose tolerance with a strict error budget warns (and still returns the values)."""
    support = np.random.RandomState(0).normal(size=(10, 2))
    X = np.random.RandomState(1).normal(size=(20, 2))
    loose = NWFlowSampler(
        bandwidth=1.0, density=DensityOptions(rtol=1e-3, atol=1e-3, max_error=1e-3)
    ).fit(support)
    with pytest.warns(AccuracyWarning, match="estimated error"):
        log_p = loose.score_samples(X)
    assert log_p.shape == (20,)
    tight = NWFlowSampler(bandwidth=1.0).fit(support)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        tight.score_samples(X)


@pytest.mark.parametrize("name", ["rtol", "atol", "max_error"])
@pytest.mark.parametrize("value", [0.0, -1e-6, float("nan"), "tight"])
def test_density_tolerances_are_validated(name, value):
    with pytest.raises(ValueError, match=f"{name} of DensityOptions"):
        NWFlowSampler(density=DensityOptions(**{name: value})).fit(TRIANGLE)


@pytest.mark.exactness
def test_solver_does_not_change_the_likelihood():
    """The change of variables has its own solver: the sampling solver is irrelevant."""
    X = np.random.RandomState(2).normal(scale=0.3, size=(10, 2))
    a = (
        NWFlowSampler(bandwidth=0.7, solver=SolverOptions("euler", n_steps=3))
        .fit(TRIANGLE)
        .score_samples(X)
    )
    b = (
        NWFlowSampler(bandwidth=0.7, solver=SolverOptions("rk4", n_steps=500))
        .fit(TRIANGLE)
        .score_samples(X)
    )
    np.testing.assert_array_equal(a, b)


def _constant_bandwidth(t):
    return np.full(np.shape(t), 0.5)


def test_bounded_callable_bandwidth_has_a_density():
    """A callable bounded at t = 0 (here constant, issue 22) starts the flow from the hard
    argmax of <x, s_i>: the change of variables diverges at t = 0 on rows the flow never
    reaches. score_samples runs, returns -inf there (density 0), and still integrates to 1."""
    X = 3 * np.random.default_rng(0).uniform(size=(20, 3))
    log_p, err = NWFlowSampler(bandwidth=_constant_bandwidth).fit(X).log_density_with_error(X)
    assert log_p.shape == (20,) and np.all(np.isfinite(log_p) | np.isneginf(log_p))
    assert np.isfinite(log_p).any() and np.all(err[np.isneginf(log_p)] == 0.0)
    # 1-D: support points 1.3 and 0.9 apart, farther than 2 h(0) = 1, so the flow leaves gaps
    S = np.array([[-1.0], [0.3], [1.2]])
    sampler = NWFlowSampler(bandwidth=_constant_bandwidth, sigma_min=0.2).fit(S)
    grid = np.linspace(-4.0, 4.0, 801)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        log_p = sampler.set_params(density=DensityOptions(rtol=1e-6, atol=1e-6)).score_samples(
            grid[:, None]
        )
    assert np.isneginf(log_p).sum() > 50  # the gaps
    assert np.trapezoid(np.exp(log_p), grid) == pytest.approx(1.0, abs=5e-3)


def test_bounded_callable_bandwidth_on_a_spread_out_support_is_refused_up_front():
    """Support points 1e3 apart against h(0) = 0.5: the solve near t = 0 would exhaust its
    step budget; the refusal says why instead of giving the sampling solver's advice."""
    S = 1e3 * np.random.default_rng(0).uniform(size=(5, 2))
    # the plug-in in data units (no frame rescales the support)
    sampler = NWFlowSampler(bandwidth=_constant_bandwidth, sigma_min=0.01).fit(S)
    with pytest.raises(ValueError, match=r"bounded at t = 0 .* too stiff") as info:
        sampler.score_samples(S[:2])
    assert "fixed-step solver" not in str(info.value)
