"""What transfers: the network sees its support's frame (frame_context) and task recentring."""

import numpy as np
import pytest
import torch

from skflow import (
    LearnedFlowSampler,
    NetworkOptions,
    NWFlowSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow._validation import InvalidParameterError
from skflow.nn.transformer import CrossAttentionVelocity
from skflow.samplers._frame import task_frame
from skflow.samplers._meta_training import _with_frame
from skflow.tasks import ClassTasks, RecentredTasks, recentre_tasks


def tiny(max_iter, **network):
    """The parameters of a tiny sampler trained for ``max_iter`` iterations (``network``: more
    fields of its NetworkOptions)."""
    return dict(
        network=NetworkOptions(d_model=8, n_heads=2, n_layers=1, **network),
        training=TrainingOptions(max_iter=max_iter, batch_tasks=8, n_targets=8),
        solver=SolverOptions(n_steps=4),
    )


def _classes(seed=0, n_classes=12, rows=20, d=3):
    rng = np.random.default_rng(seed)
    means = 3.0 * rng.normal(size=(n_classes, d)) + 5.0
    X = np.concatenate([rng.normal(mu, 1.0, (rows, d)) for mu in means])
    return X, np.repeat(np.arange(n_classes), rows)


def _framed(S):
    """A (B, m, d) support as a frame_context network reads it, and its (centre, scale)."""
    centre, scale = task_frame(S, 1.0)
    return CrossAttentionVelocity.with_frame((S - centre) / scale, centre, scale), centre, scale


def test_untrained_frame_context_network_is_the_exact_field():
    torch.manual_seed(0)
    net = CrossAttentionVelocity(3, d_model=8, n_heads=2, n_layers=1, frame_context=True)
    S, x = torch.randn(2, 6, 3, dtype=torch.float64), torch.randn(2, 4, 3, dtype=torch.float64)
    plain = CrossAttentionVelocity(3, d_model=8, n_heads=2, n_layers=1)
    framed = CrossAttentionVelocity.with_frame(S, S.mean(1, keepdim=True), torch.ones(2, 1, 1))
    assert framed.shape == (2, 6, 7)
    torch.testing.assert_close(net(x, framed, 0.4), plain(x, S, 0.4))


def test_the_frame_columns_reach_the_output():
    """Two supports with the same coordinates in their frame but different frames: a
    network with trained (here random) output layers answers differently."""
    torch.manual_seed(0)
    net = CrossAttentionVelocity(3, d_model=8, n_heads=2, n_layers=1, frame_context=True)
    torch.nn.init.normal_(net.out.weight)
    S, x = torch.randn(1, 6, 3), torch.randn(1, 4, 3)
    near = CrossAttentionVelocity.with_frame(S, torch.zeros(1, 1, 3), torch.ones(1, 1, 1))
    far = CrossAttentionVelocity.with_frame(S, torch.full((1, 1, 3), 5.0), torch.ones(1, 1, 1))
    wide = CrossAttentionVelocity.with_frame(S, torch.zeros(1, 1, 3), torch.full((1, 1, 1), 4.0))
    v = net(x, near, 0.5)
    assert (v - net(x, far, 0.5)).abs().max() > 1e-3
    assert (v - net(x, wide, 0.5)).abs().max() > 1e-3
    # and the support size m is part of the context: the same rows twice change it
    twice = torch.cat([near, near], dim=1)
    assert (v - net(x, twice, 0.5)).abs().max() > 1e-3


def test_frame_context_network_refuses_plain_supports_and_restriction():
    net = CrossAttentionVelocity(3, d_model=8, n_heads=2, n_layers=1, frame_context=True)
    with pytest.raises(ValueError, match="frame_context"):
        net(torch.randn(1, 4, 3), torch.randn(1, 6, 3), 0.5)
    with pytest.raises(InvalidParameterError, match="frame_context"):
        net.restrict_features(2)


def test_training_and_inference_append_the_same_frame():
    S = np.random.default_rng(0).normal(2.0, 3.0, size=(3, 5, 4))
    centre, scale = task_frame(S, 1.0)
    ours = _with_frame((S - centre) / scale, centre, scale)
    theirs, _, _ = _framed(torch.as_tensor(S))
    np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-12)


def test_fit_X_y_sees_the_frame_in_the_training_data_global_frame():
    X, y = _classes()
    lf = LearnedFlowSampler(**tiny(30, frame_context=True), random_state=0).fit(X, y)
    assert lf.frame_context_ and lf.model_.frame_context
    # the global frame: the training rows' mean and RMS spread (from a batch of tasks)
    np.testing.assert_allclose(lf.model_.frame_mean.numpy(), X.mean(axis=0), atol=1.0)
    spread = np.sqrt(np.mean((X - X.mean(axis=0)) ** 2))
    assert 0.6 * spread < float(lf.model_.frame_scale) < 1.4 * spread
    # what sample uses is the network on the support's frame, mapped back
    S, x = X[:6], X[40:43]
    framed, centre, scale = _framed(torch.as_tensor(S[None]))
    xf = (torch.as_tensor(x[None]) - centre) / scale
    with torch.no_grad():
        expected = (lf.model_(xf, framed, 0.3) * scale)[0].numpy()
    np.testing.assert_allclose(lf.velocity(x, 0.3, support=S), expected, rtol=1e-5, atol=1e-6)


def test_frame_context_options():
    X, y = _classes()
    assert not LearnedFlowSampler(**tiny(2)).fit(X).frame_context_
    off = LearnedFlowSampler(**tiny(2)).fit(X, y)  # off by default
    assert not off.frame_context_ and not off.model_.frame_context
    with pytest.raises(InvalidParameterError, match="frame_context"):
        LearnedFlowSampler(**tiny(2, frame_context="yes")).fit(X, y)
    # a warm start keeps the fitted network's architecture
    warm = off.set_params(warm_start=True, network__frame_context=True).fit(X, y)
    assert not warm.frame_context_ and warm.n_iter_ == 4


def test_untrained_frame_context_model_is_the_plugin():
    X, y = _classes()
    lf = LearnedFlowSampler(**tiny(0, frame_context=True), normalize=False, random_state=0).fit(
        X, y
    )
    S = X[:7]
    np.testing.assert_allclose(
        lf.velocity(X[30:35], 0.6, support=S),
        NWFlowSampler(sigma_min=0.01).fit(S).velocity(X[30:35], 0.6),
        rtol=1e-4,
        atol=1e-4,
    )


def test_recentre_keeps_shapes_and_moves_centres_like_the_batch():
    rng = np.random.default_rng(0)
    B, d = 4000, 2
    centres = rng.normal(size=(B, d)) @ np.array([[3.0, 0.0], [1.0, 0.5]]) + 7.0
    S = centres[:, None] + rng.normal(size=(B, 3, d))
    Q = centres[:, None] + rng.normal(size=(B, 5, d))
    S2, Q2 = recentre_tasks(S, Q, random_state=1)
    shift = S2[:, :1] - S[:, :1]
    np.testing.assert_allclose(S2 - S, np.broadcast_to(shift, S.shape), atol=1e-12)
    np.testing.assert_allclose(Q2 - Q, np.broadcast_to(shift, Q.shape), atol=1e-12)
    old = np.concatenate([S, Q], axis=1).mean(axis=1)
    new = np.concatenate([S2, Q2], axis=1).mean(axis=1)
    assert np.abs(new - old).mean() > 1.0  # moved, not kept
    np.testing.assert_allclose(new.mean(axis=0), old.mean(axis=0), atol=0.15)
    np.testing.assert_allclose(np.cov(new.T), np.cov(old.T), rtol=0.1, atol=0.1)


def test_recentre_pairs_distinct_tasks():
    S = np.array([[[0.0]], [[2.0]]])
    S2, _ = recentre_tasks(S, S.copy(), random_state=0)
    # c_bar = 1, (c_i - c_j) / sqrt(2) = +-sqrt(2): never the batch mean itself
    np.testing.assert_allclose(np.sort(np.abs(S2.ravel() - 1.0)), [np.sqrt(2.0)] * 2)


def test_recentred_tasks_source_and_fit_option():
    X, y = _classes()
    base = ClassTasks(X, y, random_state=0)
    S, Q = RecentredTasks(base).sample_tasks(5, 4, 6, random_state=np.random.default_rng(3))
    assert S.shape == (5, 4, 3) and Q.shape == (5, 6, 3)
    assert RecentredTasks(base).n_features == 3
    lf = LearnedFlowSampler(**tiny(2), augment="recentre").fit(X, y)
    assert lf.augment_ == "recentre"
