"""Tests of the Torch attention heads (skflow.nn): the exact NW head and multi-head NW."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skflow.field import nw_local_mean, nw_velocity, nw_weights
from skflow.nn import MultiHeadNW, NWAttentionHead

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
DEVICES = ["cpu", pytest.param("cuda", marks=[CUDA, pytest.mark.cuda])]
TIMES = [0.0, 1e-6, 0.5, 0.99, 1.0]


def _batched_reference(fn, x, support, t, **kw):
    """Apply a 2-D field function of skflow.field over the leading batch dims (NumPy)."""
    x_np, s_np = x.detach().cpu().numpy(), support.detach().cpu().numpy()
    t_np = np.broadcast_to(np.asarray(t.cpu() if torch.is_tensor(t) else t), x_np.shape[:-1])
    batch = x_np.shape[:-2]
    rows = [fn(x_np[i], s_np[i], np.ascontiguousarray(t_np[i]), **kw) for i in np.ndindex(*batch)]
    return np.stack(rows).reshape(*batch, *rows[0].shape)


def _data(device, batch=(3, 2), n=7, m=11, d=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, n, d, generator=gen, dtype=torch.float64)
    s = torch.randn(*batch, m, d, generator=gen, dtype=torch.float64) + 2.0
    return x.to(device), s.to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("t", TIMES)
def test_head_equals_exact_field(device, t):
    x, s = _data(device)
    head = NWAttentionHead(sigma_min=0.01)
    v = head(x, s, t)
    assert v.shape == x.shape and v.dtype == torch.float64 and v.device.type == device
    ref = _batched_reference(nw_velocity, x, s, t, sigma_min=0.01)
    np.testing.assert_allclose(v.cpu().numpy(), ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


@pytest.mark.parametrize("device", DEVICES)
def test_head_per_row_times(device):
    x, s = _data(device, seed=1)
    gen = torch.Generator().manual_seed(2)
    t = torch.rand(*x.shape[:-1], generator=gen, dtype=torch.float64)
    t[0, 0, :3] = torch.tensor([0.0, 1e-6, 1.0], dtype=torch.float64)
    t[1, 1, 0] = 0.99
    head = NWAttentionHead(sigma_min=0.05)
    v = head(x, s, t.to(device))
    ref = _batched_reference(nw_velocity, x, s, t, sigma_min=0.05)
    np.testing.assert_allclose(v.cpu().numpy(), ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    # t broadcastable to (..., n): one time per batch element
    tb = torch.tensor([[0.2], [0.7], [0.9]], dtype=torch.float64)[:, :, None].expand(3, 2, 1)
    v2 = head(x, s, tb.to(device))
    ref2 = _batched_reference(nw_velocity, x, s, tb.expand(3, 2, x.shape[-2]), sigma_min=0.05)
    np.testing.assert_allclose(v2.cpu().numpy(), ref2, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bandwidth", ["ot", 0.5, lambda t: 0.3 + 0 * t])
def test_head_mean_and_weights(device, bandwidth):
    x, s = _data(device, seed=3)
    head = NWAttentionHead(sigma_min=0.01, bandwidth=bandwidth)
    for t in (0.0, 0.3, 0.95):
        kw = {"sigma_min": 0.01, "bandwidth": bandwidth}
        m = head.local_mean(x, s, t)
        np.testing.assert_allclose(
            m.cpu().numpy(),
            _batched_reference(nw_local_mean, x, s, t, **kw),
            rtol=1e-10,
            atol=1e-10,
        )
        w = head.weights(x, s, t)
        assert w.shape == (*x.shape[:-1], s.shape[-2])
        np.testing.assert_allclose(
            w.cpu().numpy(), _batched_reference(nw_weights, x, s, t, **kw), atol=1e-12
        )
        np.testing.assert_allclose(
            head(x, s, t).cpu().numpy(),
            _batched_reference(nw_velocity, x, s, t, **kw),
            rtol=1e-10,
            atol=1e-10,
        )


def test_head_has_no_parameters_and_broadcasts():
    head = NWAttentionHead()
    assert sum(p.numel() for p in head.parameters()) == 0
    assert len(list(head.buffers())) == 0
    x, s = _data("cpu", batch=(4,))
    # one support shared over a batch of query sets; unbatched inputs
    v = head(x, s[0], 0.4)
    ref = torch.stack([head(x[i], s[0], 0.4) for i in range(4)])
    torch.testing.assert_close(v, ref, rtol=1e-12, atol=1e-12)
    assert head(x[0], s[0], 0.4).shape == x[0].shape


def test_head_float32_dtype_and_mixed_promotion():
    head = NWAttentionHead()
    x, s = _data("cpu")
    assert head(x.float(), s.float(), 0.5).dtype == torch.float32
    assert head(x.float(), s, 0.5).dtype == torch.float64


def test_head_gradients_flow():
    x, s = _data("cpu", batch=(2,), n=5, m=6, d=3)
    x.requires_grad_(True)
    s.requires_grad_(True)
    head = NWAttentionHead(sigma_min=0.1)
    head(x, s, 0.6).square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert s.grad is not None and torch.isfinite(s.grad).all()
    # gradient w.r.t. x equals that of an explicit (broadcast) implementation
    x2 = x.detach().clone().requires_grad_(True)
    s2 = s.detach().clone().requires_grad_(True)
    st = 1 - 0.9 * 0.6
    d2 = ((x2[..., :, None, :] - 0.6 * s2[..., None, :, :]) ** 2).sum(-1)
    w = torch.softmax(-d2 / (2 * st**2), -1)
    ((w @ s2 - 0.9 * x2) / st).square().sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(s.grad, s2.grad, rtol=1e-9, atol=1e-9)
    assert torch.autograd.gradcheck(lambda a, b: head(a, b, 0.6), (x[:1, :2], s[:1, :3]))


@pytest.mark.exactness
def test_head_validation():
    with pytest.raises(ValueError, match=r"sigma_min must be a finite real number in \(0, 1\)"):
        NWAttentionHead(sigma_min=1.5)
    with pytest.raises(ValueError, match="bandwidth must be 'ot'"):
        NWAttentionHead(bandwidth="silverman")
    head = NWAttentionHead()
    x, s = _data("cpu")
    with pytest.raises(ValueError, match="x has 4 features but support has 3"):
        head(x, s[..., :3], 0.5)
    # the head evaluates NWField, whose times outside [0, 1] are frozen at the nearest end
    # (``time_tolerance=inf``, so adaptive solvers may probe past t = 1)
    torch.testing.assert_close(head(x, s, 1.5), head(x, s, 1.0), rtol=0, atol=0)
    with pytest.raises(ValueError, match="finite"):
        head(x, s, float("nan"))
    with pytest.raises(ValueError, match="does not broadcast"):
        head(x, s, torch.zeros(5))
    with pytest.raises(TypeError, match="must be torch tensors"):
        head(x.numpy(), s, 0.5)


# -- MultiHeadNW ------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("t", TIMES)
def test_multihead_single_identity_head_is_exact_field(device, t):
    x, s = _data(device, seed=4)
    mh = MultiHeadNW(x.shape[-1], n_heads=1, sigma_min=0.01).double().to(device)
    torch.testing.assert_close(mh.output_map, torch.eye(4, dtype=torch.float64, device=device))
    ref = _batched_reference(nw_velocity, x, s, t, sigma_min=0.01)
    got = mh(x, s, t).detach().cpu().numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


@pytest.mark.parametrize("device", DEVICES)
def test_multihead_at_init_reproduces_exact_field(device):
    x, s = _data(device, seed=5)
    mh = MultiHeadNW(4, n_heads=3, value_map=True, dtype=torch.float64, device=device)
    for t in (0.0, 0.4, 0.99, 1.0):
        ref = _batched_reference(nw_velocity, x, s, t, sigma_min=0.01)
        got = mh(x, s, t).detach().cpu().numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_multihead_projection_equals_projected_field(device, k):
    x, s = _data(device, seed=6)
    proj = torch.from_numpy(np.random.default_rng(k).normal(size=(k, 4)))
    mh = MultiHeadNW(4, n_heads=1, head_dim=k, sigma_min=0.05).double().to(device)
    with torch.no_grad():
        mh.projections.copy_(proj[None])
    for t in (0.0, 1e-6, 0.5, 0.99, 1.0):
        ref = _batched_reference(nw_velocity, x, s, t, sigma_min=0.05, projection=proj.numpy())
        got = mh(x, s, t).detach().cpu().numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
        w = mh.weights(x, s, t)[..., 0, :, :].detach().cpu().numpy()
        w_ref = _batched_reference(nw_weights, x, s, t, sigma_min=0.05, projection=proj.numpy())
        np.testing.assert_allclose(w, w_ref, atol=1e-12)


def test_multihead_heads_and_mixing():
    """Two heads with different projections, custom mixing: the combination of the per-head
    projected NW local means, then the path's affine map."""
    x, s = _data("cpu", seed=7)
    rng = np.random.default_rng(0)
    p1, p2 = rng.normal(size=(2, 4)), rng.normal(size=(2, 4))
    mix = rng.normal(size=(4, 8))
    mh = MultiHeadNW(4, n_heads=2, head_dim=2, sigma_min=0.01).double()
    with torch.no_grad():
        mh.projections.copy_(torch.from_numpy(np.stack([p1, p2])))
        mh.output_map.copy_(torch.from_numpy(mix))
    t = 0.8
    v, w = mh(x, s, t, return_weights=True)
    assert v.shape == x.shape and w.shape == (3, 2, 2, 7, 11)
    m1 = _batched_reference(nw_local_mean, x, s, t, sigma_min=0.01, projection=p1)
    m2 = _batched_reference(nw_local_mean, x, s, t, sigma_min=0.01, projection=p2)
    expected = (np.concatenate([m1, m2], axis=-1) @ mix.T - 0.99 * x.numpy()) / (1 - 0.99 * t)
    np.testing.assert_allclose(v.detach().numpy(), expected, rtol=1e-10, atol=1e-10)
    for h, p in enumerate((p1, p2)):
        w_ref = _batched_reference(nw_weights, x, s, t, sigma_min=0.01, projection=p)
        np.testing.assert_allclose(w[..., h, :, :].detach().numpy(), w_ref, atol=1e-12)
    np.testing.assert_allclose(mh.head_means(x, s, t)[..., 1, :, :].detach().numpy(), m2)


def test_multihead_is_trainable():
    x, s = _data("cpu", batch=(2,), n=6, m=9, d=3, seed=8)
    x.requires_grad_(True)
    mh = MultiHeadNW(3, n_heads=2, head_dim=2, value_map=True)
    names = {n for n, _ in mh.named_parameters()}
    assert names == {"projections", "value_maps", "output_map"}
    assert mh.projections.shape == (2, 2, 3) and mh.output_map.shape == (3, 6)
    loss = mh(x.float(), s.float(), torch.rand(2, 6)).square().mean()
    loss.backward()
    for p in mh.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
    assert torch.isfinite(x.grad).all()
    # one optimizer step changes the projections
    before = mh.projections.detach().clone()
    torch.optim.SGD(mh.parameters(), lr=0.1).step()
    assert not torch.equal(before, mh.projections.detach())


def test_multihead_validation():
    with pytest.raises(ValueError, match="n_features must be an integer >= 1"):
        MultiHeadNW(0)
    with pytest.raises(ValueError, match="n_heads must be an integer >= 1"):
        MultiHeadNW(3, n_heads=0)
    with pytest.raises(ValueError, match="head_dim must be an integer >= 1"):
        MultiHeadNW(3, head_dim=0)
    mh = MultiHeadNW(3)
    with pytest.raises(ValueError, match="expected 3 features, got 4"):
        mh(torch.zeros(2, 4), torch.zeros(3, 4), 0.5)
