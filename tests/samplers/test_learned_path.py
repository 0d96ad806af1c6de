"""The learned network and its meta-training on another path (CosinePath)."""

import numpy as np
import pytest
import torch
from nw_reference import brute_force_field

from skflow import LearnedFlowSampler, NetworkOptions, TrainingOptions
from skflow._validation import InvalidParameterError
from skflow.nn.transformer import CrossAttentionVelocity
from skflow.paths import CosinePath, OTPath

SIGMA_MIN = 0.05
PATH = CosinePath(SIGMA_MIN)
HALF_PI = np.pi / 2
SCHEDULE = (
    lambda t: np.sin(HALF_PI * t),
    lambda t: SIGMA_MIN + (1.0 - SIGMA_MIN) * np.cos(HALF_PI * t),
    lambda t: HALF_PI * np.cos(HALF_PI * t),
    lambda t: -(1.0 - SIGMA_MIN) * HALF_PI * np.sin(HALF_PI * t),
)


def _net(path, **kw):
    net = CrossAttentionVelocity(3, d_model=16, n_heads=2, n_layers=1, path=path, **kw)
    return net.double()


def test_untrained_network_is_the_exact_field_of_its_path():
    rng = np.random.default_rng(0)
    x, S, t = rng.standard_normal((6, 3)), rng.standard_normal((9, 3)), rng.random(6)
    net = _net(PATH)
    assert net.path is PATH and net.time.path is PATH and net.head.path is PATH
    assert net.config["path"] is PATH and net.sigma_min == SIGMA_MIN
    with torch.no_grad():
        v = net(*(torch.from_numpy(a)[None] for a in (x, S, t)))[0].numpy()
    np.testing.assert_allclose(v, brute_force_field(x, S, t, schedule=SCHEDULE)[1], rtol=1e-8)
    assert "path" not in CrossAttentionVelocity(3).config  # the OT default: configs unchanged


@pytest.mark.parametrize("path", [PATH, OTPath(SIGMA_MIN)])
def test_network_is_translation_equivariant_along_its_path(path):
    # x_t moves by alpha_t c when the data move by c, and the velocity by d_alpha_t c:
    # the centring of the queries must use the path's alpha_t (not t)
    g = torch.Generator().manual_seed(1)
    net = _net(path, support_summary=False)
    net.reset_parameters(g)
    for layer in (net.out, net.gate):  # a non-trivial learned branch
        torch.nn.init.normal_(layer.weight, generator=g)
    x, S = torch.randn(1, 5, 3, generator=g).double(), torch.randn(1, 8, 3, generator=g).double()
    t = torch.rand(1, 5, generator=g).double()
    c = torch.tensor([3.0, -2.0, 1.0], dtype=torch.float64)
    with torch.no_grad():
        v = net(x, S, t)
        shifted = net(x + path.alpha(t[..., None]) * c, S + c, t)
    expected = v + path.d_alpha(t[..., None]) * c  # (a float on the OT path)
    torch.testing.assert_close(shifted, expected, rtol=1e-9, atol=1e-9)


class _PointTasks:
    """Tasks of one point: support and targets all equal, so the exact field of the support is
    the conditional velocity of every target and the loss of the untrained network is 0."""

    n_features = 2

    def sample_tasks(self, n_tasks, m, n, random_state=None):
        c = np.random.default_rng(random_state).standard_normal((n_tasks, 1, 2))
        return np.repeat(c, m, axis=1), np.repeat(c, n, axis=1)


def test_meta_training_regresses_the_field_of_the_path():
    network = NetworkOptions(d_model=16, n_heads=2, n_layers=1)
    training = TrainingOptions(max_iter=1, batch_tasks=4, n_targets=8, support_size=3)
    lf = LearnedFlowSampler(network, training=training, path=PATH, random_state=0)
    lf.fit(_PointTasks())
    assert lf.model_.path == PATH
    assert lf.loss_curve_[0] < 1e-6  # the loss and the network share the cosine path
    S = np.zeros((3, 2))
    assert lf.sample(4, support=S, random_state=0).shape == (4, 2)
    with pytest.raises(InvalidParameterError, match="GaussianPath"):
        LearnedFlowSampler(path="cosine").fit(_PointTasks())


def test_exact_target_is_the_population_velocity_of_the_path(monkeypatch):
    from skflow.tasks import GaussianMixtureTasks

    seen, velocity = [], GaussianMixtureTasks.velocity

    def spy(self, x, t, params, **kw):
        seen.append(kw.get("path"))
        return velocity(self, x, t, params, **kw)

    monkeypatch.setattr(GaussianMixtureTasks, "velocity", spy)
    network = NetworkOptions(d_model=16, n_heads=2, n_layers=1)
    training = TrainingOptions(max_iter=2, batch_tasks=4, n_targets=8, target="exact")
    LearnedFlowSampler(network, training=training, path=PATH, random_state=0).fit(
        GaussianMixtureTasks(n_features=2)
    )
    assert seen and all(p is PATH for p in seen)
