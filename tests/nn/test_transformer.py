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
