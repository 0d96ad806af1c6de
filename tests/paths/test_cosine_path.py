"""CosinePath end to end: schedule, exact field, density, sampler, heads and objective.

Every number is compared with the float64 brute-force oracle of ``tests/nw_reference.py``
fed this file's own writing of the schedule (``sigma_min + (1 - sigma_min) cos``, not the
half-angle form of :class:`skflow.paths.CosinePath`), or with the terminal KDE.
"""

import numpy as np
import pytest
import torch
from nw_reference import brute_force_field, brute_force_log_density

from skflow import NWFlowSampler, SolverOptions
from skflow.field import NWField
from skflow.nn.heads import MultiHeadNW, NWAttentionHead
from skflow.nn.objective import H_MAX, flow_matching_loss, sample_times
from skflow.paths import CosinePath

SIGMA_MIN = 0.05
PATH = CosinePath(SIGMA_MIN)
HALF_PI = np.pi / 2


def _schedule(sigma_min=SIGMA_MIN):
    return (
        lambda t: np.sin(HALF_PI * t),
        lambda t: sigma_min + (1.0 - sigma_min) * np.cos(HALF_PI * t),
        lambda t: HALF_PI * np.cos(HALF_PI * t),
        lambda t: -(1.0 - sigma_min) * HALF_PI * np.sin(HALF_PI * t),
    )


def _data(n=9, m=14, d=3, seed=0):
    rng = np.random.default_rng(seed)
    t = np.concatenate([[0.0, 1.0], rng.random(n - 2)])
    return rng.standard_normal((n, d)), rng.standard_normal((m, d)), t


def _oracle(x, S, t):
    return brute_force_field(x, S, t, schedule=_schedule())


# -- the schedule -----------------------------------------------------------------------------
def test_schedule_ends_derivatives_and_backends():
    t = np.linspace(0.0, 1.0, 11)
    alpha, sigma, d_alpha, d_sigma = _schedule()
    np.testing.assert_allclose(PATH.alpha(t), alpha(t), rtol=1e-15, atol=1e-16)
    np.testing.assert_allclose(PATH.sigma(t), sigma(t), rtol=1e-14)
    np.testing.assert_allclose(PATH.d_alpha(t), d_alpha(t), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(PATH.d_sigma(t), d_sigma(t), rtol=1e-14, atol=1e-15)
    assert (PATH.alpha(0.0), PATH.sigma(0.0), PATH.alpha(1.0)) == (0.0, 1.0, 1.0)
    assert abs(PATH.sigma(1.0) - SIGMA_MIN) < 1e-15
    # derivatives are the derivatives (central differences)
    eps, tm = 1e-6, np.linspace(0.05, 0.95, 7)
    for f, df in ((PATH.alpha, PATH.d_alpha), (PATH.sigma, PATH.d_sigma)):
        np.testing.assert_allclose((f(tm + eps) - f(tm - eps)) / (2 * eps), df(tm), atol=1e-8)
    got = PATH.sigma(torch.from_numpy(t))
    assert torch.is_tensor(got)
    # two backends (Torch's cos vs NumPy's): rtol 1e-14
    np.testing.assert_allclose(got.numpy(), PATH.sigma(t), rtol=1e-14, atol=0)
    assert isinstance(PATH.alpha(0.5), float)


def test_target_bandwidth_inverse_and_conditional_velocity():
    rng = np.random.default_rng(1)
    x0, x1, t = rng.standard_normal((6, 2)), rng.standard_normal((6, 2)), rng.random(6)
    np.testing.assert_allclose(PATH.time_of_bandwidth(PATH.bandwidth(t)), t, rtol=1e-12)
    xt = PATH.sample_conditional(x0, x1, t)
    target = PATH.conditional_velocity(x0, x1, t)
    _, _, d_alpha, d_sigma = _schedule()
    np.testing.assert_allclose(
        target, d_alpha(t)[:, None] * x1 + d_sigma(t)[:, None] * x0, rtol=1e-13
    )
    # along the conditional path the target is the velocity of a one-point local mean
    np.testing.assert_allclose(PATH.target_velocity(xt, x1, t), target, rtol=1e-10, atol=1e-12)
    u = PATH.velocity_from_mean(x1, x0, t)
    np.testing.assert_allclose(PATH.mean_from_velocity(u, x0, t), x1, rtol=1e-12, atol=1e-12)


# -- the exact field --------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["auto", "gemm", "pruned"])
def test_field_matches_the_oracle(engine):
    x, S, t = _data()
    field = NWField(S, path=PATH, engine=engine)
    for times in (t, 0.0, 0.37, 1.0):
        w, u = _oracle(x, S, times)
        np.testing.assert_allclose(field.velocity(x, times), u, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(field.weights(x, times), w, rtol=1e-9, atol=1e-12)


def test_field_on_torch_float32_and_streamed_supports():
    x, S, t = _data(seed=2)
    _, u = _oracle(x, S, t)
    for support, queries, times, tol in [
        (torch.from_numpy(S), torch.from_numpy(x), torch.from_numpy(t), 1e-9),  # per-row, device
        (torch.from_numpy(S), torch.from_numpy(x), t, 1e-9),
        (S.astype(np.float32), x.astype(np.float32), t, 2e-4),
    ]:
        got = NWField(support, path=PATH).velocity(queries, times)
        got = got.numpy() if torch.is_tensor(got) else got
        np.testing.assert_allclose(got, u, rtol=tol, atol=tol)
    streamed = NWField(S, path=PATH, support_chunk_size=4).velocity(x, t)
    np.testing.assert_allclose(streamed, u, rtol=1e-9, atol=1e-10)


def test_divergence_is_the_trace_of_the_oracle_jacobian():
    x, S, _ = _data(n=4, seed=3)
    t, eps = 0.8, 1e-5
    trace = np.zeros(len(x))
    for j in range(x.shape[1]):
        step = np.zeros_like(x)
        step[:, j] = eps
        du = _oracle(x + step, S, t)[1] - _oracle(x - step, S, t)[1]
        trace += du[:, j] / (2 * eps)
    v, div = NWField(S, path=PATH).velocity_and_divergence(x, t)
    np.testing.assert_allclose(div, trace, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(v, _oracle(x, S, t)[1], rtol=1e-9, atol=1e-10)


def test_log_density_is_the_marginal_of_the_path():
    x, S, _ = _data(seed=4)
    for t in (0.0, 0.5, 1.0):
        np.testing.assert_allclose(
            NWField(S, path=PATH).log_density(x, t),
            brute_force_log_density(x, S, t, schedule=_schedule()),
            rtol=1e-12,
        )


# -- the sampler ------------------------------------------------------------------------------
def test_sampler_velocity_and_closed_form_terminal_law():
    x, S, t = _data(seed=5)
    sampler = NWFlowSampler(path=PATH).fit(S)
    assert sampler.path_ is PATH and sampler.kde_bandwidth_ == SIGMA_MIN
    np.testing.assert_allclose(sampler.velocity(x, t), _oracle(x, S, t)[1], rtol=1e-9, atol=1e-10)
    kde = brute_force_log_density(x, S, 1.0, schedule=_schedule())  # N(s_i, sigma_min^2 I)
    np.testing.assert_allclose(sampler.score_samples(x), kde, rtol=1e-12)


def test_change_of_variables_along_the_path_reaches_the_closed_form():
    # bandwidth=1.0 is the path's own kernel, integrated by the change of variables in t
    x, S, _ = _data(n=6, m=10, d=2, seed=8)
    path = CosinePath(0.1)
    closed = NWFlowSampler(path=path).fit(S).score_samples(x)
    log_p, err = NWFlowSampler(1.0, path=path).fit(S).log_density_with_error(x)
    np.testing.assert_allclose(log_p, closed, rtol=0, atol=1e-5)
    assert np.max(err) < 1e-4
    other = NWFlowSampler(1.0, path=path, kernel="diagonal").fit(S).score_samples(x)
    assert np.all(np.isfinite(other)) and np.max(np.abs(other - closed)) > 1e-3
    with pytest.raises(ValueError, match="bounded at t = 0"):
        NWFlowSampler(lambda t: 0.5 + 0 * t, path=path).fit(S).score_samples(x)


def test_one_point_flow_carries_noise_to_the_terminal_gaussian():
    # one support point s: x_t = alpha_t s + sigma_t x_0 exactly, so x_1 = s + sigma_min x_0
    s = np.array([[2.0, -1.0]])
    noise = np.random.default_rng(6).standard_normal((50, 2))
    out = NWFlowSampler(path=PATH, solver=SolverOptions(n_steps=200)).fit(s).sample(50, noise=noise)
    np.testing.assert_allclose(out, s + SIGMA_MIN * noise, atol=1e-4)


def test_samples_follow_the_terminal_kde():
    S = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    n = 3000
    X = NWFlowSampler(path=PATH, solver=SolverOptions(n_steps=100), random_state=0).fit(S).sample(n)
    nearest = np.argmin(((X[:, None] - S[None]) ** 2).sum(-1), axis=1)
    counts = np.bincount(nearest, minlength=3)
    assert np.all(np.abs(counts - n / 3) < 5 * np.sqrt(n * (1 / 3) * (2 / 3)))  # multinomial
    resid = X - S[nearest]
    assert abs(resid.std() / SIGMA_MIN - 1.0) < 0.05 and np.abs(resid.mean(0)).max() < 0.01


# -- the Torch heads and the training objective -----------------------------------------------
def test_heads_match_the_oracle():
    x, S, t = _data(seed=7)
    _, u = _oracle(x, S, t)
    X, St, T = (torch.from_numpy(a) for a in (x, S, t))
    np.testing.assert_allclose(NWAttentionHead(path=PATH)(X, St, T).numpy(), u, rtol=1e-9)
    mh = MultiHeadNW(3, 2, path=PATH, dtype=torch.float64)  # at init: the exact field
    np.testing.assert_allclose(mh(X[None], St[None], T[None])[0].detach().numpy(), u, rtol=1e-9)
    _, u5 = _oracle(x, S, 0.5)
    np.testing.assert_allclose(mh(X[None], St[None], 0.5)[0].detach().numpy(), u5, rtol=1e-9)


def test_objective_uses_the_path():
    g = torch.Generator().manual_seed(0)
    # a one-point support: its exact field is the conditional velocity, the loss is 0
    S = torch.randn(2, 1, 3, generator=g, dtype=torch.float64)
    targets = S.expand(2, 5, 3)
    x0 = torch.randn(2, 5, 3, generator=g, dtype=torch.float64)
    t = torch.rand(2, 5, generator=g, dtype=torch.float64) * 0.98
    head = NWAttentionHead(path=PATH)
    loss = flow_matching_loss(head, S, targets, x0, t, path=PATH)
    assert float(loss) < 1e-18
    other = CosinePath(0.2)  # the loss sees the path: another schedule does not fit
    assert float(flow_matching_loss(head, S, targets, x0, t, path=other)) > 1e-3
    times = sample_times((2000,), method="log-bandwidth", generator=g, path=PATH)
    h = PATH.bandwidth(times.double())
    assert float(h.min()) >= SIGMA_MIN * (1 - 1e-9) and float(h.max()) <= H_MAX * (1 + 1e-9)
    # log-uniform bandwidths: the median is the geometric mean of the ends
    assert abs(float(torch.log(h).median()) - 0.5 * np.log(SIGMA_MIN * H_MAX)) < 0.1


def test_task_population_velocity_is_the_limit_of_the_nw_field():
    from skflow.tasks import GaussianMixtureTasks

    tasks = GaussianMixtureTasks(n_features=2)
    S, Q, params = tasks.sample_tasks(1, 20000, 6, random_state=0, return_params=True)
    t = 0.4
    exact = tasks.velocity(Q, t, params, path=PATH)[0]
    _, nw = _oracle(Q[0], S[0], t)  # the NW field of a large sample of the same task
    assert np.max(np.abs(exact - nw)) < 0.05 * np.max(np.abs(exact))
