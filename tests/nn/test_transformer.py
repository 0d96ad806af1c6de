"""``CrossAttentionVelocity``: what the untrained network is (its base field)."""

import torch

from skflow.nn.transformer import CrossAttentionVelocity


def test_gaussian_base_is_the_closed_form_field():
    """Untrained, a ``base="gaussian"`` network is the path's field toward N(0, I) whatever the
    support: ``v = (alpha alpha' + sigma sigma') / (alpha^2 + sigma^2) x`` (the scale of
    ``x_t = sqrt(alpha^2 + sigma^2) eps`` moving in time)."""
    net = CrossAttentionVelocity(3, d_model=16, n_heads=2, n_layers=1, base="gaussian").double()
    path = net.path
    x = torch.randn(2, 9, 3, dtype=torch.float64)
    for t in (0.0, 0.3, 0.9, 1.0):
        a, s, da, ds = path.alpha(t), path.sigma(t), path.d_alpha(t), path.d_sigma(t)
        expected = (a * da + s * ds) / (a * a + s * s) * x
        for scale in (1.0, 50.0):  # any support, near or far
            support = scale * torch.randn(2, 5, 3, dtype=torch.float64)
            with torch.no_grad():
                torch.testing.assert_close(net(x, support, t), expected)
    assert net.config["base"] == "gaussian"
    assert "base" not in CrossAttentionVelocity(3, d_model=16, n_heads=2).config


def _trained_like(net: CrossAttentionVelocity, seed: int = 0) -> CrossAttentionVelocity:
    """``net`` with random output layers (initialised at zero, they hide every other layer)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in (net.out, net.gate):
            layer.weight.copy_(0.3 * torch.randn(layer.weight.shape, generator=g))
            layer.bias.copy_(0.3 * torch.randn(layer.bias.shape, generator=g))
    return net


def test_only_the_size_embedding_lets_the_network_count_the_support():
    """Every row repeated twice is the same support to attention, to the support summary and
    to the exact head (all average over rows), so without the size embedding the output
    cannot change; with it, the network sees 2 m rows instead of m."""
    x, S = torch.randn(2, 6, 3, dtype=torch.float64), torch.randn(2, 5, 3, dtype=torch.float64)
    twice = torch.cat([S, S], dim=1)
    t = torch.rand(2, 6, dtype=torch.float64)
    blind = _trained_like(CrossAttentionVelocity(3, d_model=16, n_heads=2)).double()
    sized = _trained_like(CrossAttentionVelocity(3, d_model=16, n_heads=2, size_embedding=True))
    sized = sized.double()
    with torch.no_grad():
        torch.testing.assert_close(blind(x, twice, t), blind(x, S, t))
        gap = (sized(x, twice, t) - sized(x, S, t)).abs().max().item()
    assert gap > 1e-3


def test_size_embedding_is_stored_only_when_set_and_kept_by_restriction():
    assert "size_embedding" not in CrossAttentionVelocity(3, d_model=16, n_heads=2).config
    net = _trained_like(CrossAttentionVelocity(4, d_model=16, n_heads=2, size_embedding=True))
    assert net.config["size_embedding"] is True
    small = net.restrict_features(2)
    assert small.size_embedding
    x, S = torch.randn(1, 3, 2), torch.randn(1, 7, 2)
    with torch.no_grad():  # the zero-padded network is the restricted one
        torch.testing.assert_close(small(x, S, 0.4), net(x, S, 0.4), atol=1e-5, rtol=1e-5)


def test_untrained_size_embedded_network_is_the_exact_field():
    from skflow.field import nw_velocity

    net = CrossAttentionVelocity(3, d_model=16, n_heads=2, size_embedding=True).double()
    x, S = torch.randn(1, 4, 3, dtype=torch.float64), torch.randn(1, 6, 3, dtype=torch.float64)
    with torch.no_grad():
        v = net(x, S, 0.7)[0].numpy()
    expected = nw_velocity(x[0].numpy(), S[0].numpy(), 0.7, sigma_min=0.01)
    torch.testing.assert_close(torch.as_tensor(v), torch.as_tensor(expected))


def test_size_features_follow_the_support_size():
    assert CrossAttentionVelocity.size_features(1) == [0.0, 1.0]
    assert CrossAttentionVelocity.size_features(100) == [1.0, 0.1]
