"""The fast field engine: attention realization, float32 precision, on-device coefficients,
chunk sizes and backend selection."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nw_reference import brute_force_field
from torch.overrides import TorchFunctionMode

from skflow import field
from skflow._array import AUTO_NUMPY_SUPPORT_CPU, use_torch_backend
from skflow.field import (
    default_chunk_size,
    nw_effective_sample_size,
    nw_local_mean,
    nw_velocity,
    nw_velocity_and_divergence,
    nw_weights,
)
from skflow.solvers import integrate

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
DEVICES = ["cpu", pytest.param("cuda", marks=[CUDA, pytest.mark.cuda])]
TIMES = [0.0, 1e-8, 1e-6, 0.3, 0.5, 0.9, 0.99, 0.999999, 1.0]


def _close(actual, expected, tol):
    actual = actual.detach().cpu().numpy() if torch.is_tensor(actual) else actual
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale)


def _standardized(m, d, seed):
    s = np.random.default_rng(seed).normal(size=(m, d))
    return (s - s.mean(0)) / s.std(0)


def _path_points(support, t, n, seed, sigma_min=0.01):
    """States of the flow at time t: x = t s_j + sigma_t z (what the ODE evaluates)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, support.shape[0], size=n)
    return t * support[idx] + (1 - (1 - sigma_min) * t) * rng.normal(size=(n, support.shape[1]))


def _normwise(actual, expected):
    actual = actual.detach().cpu().double().numpy() if torch.is_tensor(actual) else actual
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


# -- exactness of the attention engine -------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("t", TIMES)
@pytest.mark.parametrize("m, d", [(1, 3), (9, 1), (64, 2), (300, 16), (200, 64)])
def test_attention_engine_equals_brute_force_float64(device, m, d, t):
    rng = np.random.default_rng(m + d)
    support = rng.normal(size=(m, d)) + 3.0  # off-centre: exercises the centring
    x = _path_points(support, t, 37, seed=d) + 0.3 * rng.normal(size=(37, d))
    w_ref, v_ref = brute_force_field(x, support, t)
    xt, st = torch.from_numpy(x).to(device), torch.from_numpy(support).to(device)
    v = nw_velocity(xt, st, t)
    assert v.dtype == torch.float64 and v.device.type == device
    _close(v, v_ref, 1e-10)
    _close(nw_local_mean(xt, st, t), w_ref @ support, 1e-10)
    _close(nw_velocity(xt, st, t, chunk_size=5), v_ref, 1e-10)
    _close(nw_weights(xt, st, t), w_ref, 1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_engine_with_projection_and_per_row_tensor_times(device):
    rng = np.random.default_rng(11)
    support, x = rng.normal(size=(80, 6)), rng.normal(size=(50, 6))
    proj = rng.normal(size=(3, 6))
    t = np.linspace(0.0, 1.0, 50)
    t[1] = 1e-7
    _, v_ref = brute_force_field(x, support, t, 0.05, projection=proj)
    args = [torch.from_numpy(a).to(device) for a in (x, support, t, proj)]
    v = nw_velocity(args[0], args[1], args[2], sigma_min=0.05, projection=args[3])
    _close(v, v_ref, 1e-10)
    _, v_iso = brute_force_field(x, support, t, 0.05)
    _close(nw_velocity(*args[:3], sigma_min=0.05, bandwidth=1.0), v_iso, 1e-10)


@pytest.mark.exactness
def test_attention_and_gemm_engines_agree():
    rng = np.random.default_rng(12)
    support = torch.from_numpy(rng.normal(size=(120, 5)))
    x = torch.from_numpy(rng.normal(size=(70, 5)))
    gemm = field.NWField(support, engine="gemm")
    attention = field.NWField(support, engine="attention")
    for t in (0.0, 0.5, 0.97, 1.0):
        fast = nw_velocity(x, support, t)
        torch.testing.assert_close(attention.velocity(x, t), fast, rtol=0, atol=0)
        torch.testing.assert_close(fast, gemm.velocity(x, t), rtol=1e-11, atol=1e-11)
    with pytest.raises(ValueError, match="needs Torch"):
        field.NWField(support.numpy(), engine="attention")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["mask", "lift"])
def test_both_scalar_time_bias_engines_are_exact(device, engine):
    rng = np.random.default_rng(17)
    support, x, proj = (
        rng.normal(size=(90, 7)) - 2.0,
        rng.normal(size=(33, 7)),
        rng.normal(size=(3, 7)),
    )
    xt, st, pt = (torch.from_numpy(a).to(device) for a in (x, support, proj))
    plain = field.NWField(st, attention_bias=engine)
    projected = field.NWField(st, projection=pt, attention_bias=engine)
    single = field.NWField(st.float(), attention_bias=engine)
    for t in (0.0, 1e-7, 0.4, 0.99, 1.0):
        _close(plain.velocity(xt, t), brute_force_field(x, support, t)[1], 1e-10)
        _close(
            projected.velocity(xt, t),
            brute_force_field(x, support, t, projection=proj)[1],
            1e-10,
        )
        v32 = single.velocity(xt.float(), t)
        assert v32.dtype == torch.float32
        assert _normwise(v32, brute_force_field(x, support, t)[1]) < 1e-4


def test_attention_engine_is_differentiable():
    rng = np.random.default_rng(13)
    support = torch.from_numpy(rng.normal(size=(15, 3))).requires_grad_(True)
    x = torch.from_numpy(rng.normal(size=(4, 3))).requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, b: nw_velocity(a, b, 0.7, sigma_min=0.1), (x, support)
    )


def test_bandwidth_callable_with_per_row_tensor_times(gaussian_support):
    support, x = gaussian_support(30, 20, 4, seed=14)
    t = np.linspace(0.0, 1.0, 20)

    def bw(s):
        return 0.5 * (1 - 0.99 * s) / s

    ref = nw_velocity(x, support, t, bandwidth=bw)
    got = nw_velocity(
        torch.from_numpy(x), torch.from_numpy(support), torch.from_numpy(t), bandwidth=bw
    )
    _close(got, ref, 1e-10)


# -- float32 precision ------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("d", [2, 16, 64])
@pytest.mark.parametrize("t", [0.0, 0.3, 0.7, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0])
def test_float32_velocity_within_1e4_of_float64(device, d, t):
    """Unit-scale (standardized) data, states on the path: normwise relative error <= 1e-4 at
    every t in [0, 1] (float64 fallback near t = 1, see FLOAT32_LOGIT_LIMIT)."""
    support = _standardized(1000, d, seed=d)
    x = _path_points(support, t, 400, seed=int(t * 1000) + d)
    _, v_ref = brute_force_field(x, support, t)
    xt, st = (torch.from_numpy(a).float().to(device) for a in (x, support))
    v = nw_velocity(xt, st, t)
    assert v.dtype == torch.float32 and v.device.type == device
    assert _normwise(v, v_ref) <= 1e-4
    if device != "cpu":
        return
    # NumPy float32 takes the same fallback rule
    v_np = nw_velocity(x.astype(np.float32), support.astype(np.float32), t)
    assert v_np.dtype == np.float32 and _normwise(v_np, v_ref) <= 1e-4


@pytest.mark.parametrize("t", [0.0, 0.5, 0.9, 0.95])
def test_float32_without_fallback_below_0_95(t):
    for d in (2, 64):
        support = _standardized(1000, d, seed=d)
        x = _path_points(support, t, 400, seed=d)
        _, v_ref = brute_force_field(x, support, t)
        pure = field.NWField(torch.from_numpy(support).float(), float32_logit_limit=float("inf"))
        v = pure.velocity(torch.from_numpy(x).float(), t)
        assert _normwise(v, v_ref) <= 1e-4


def test_float32_fallback_is_what_keeps_t_near_one_accurate():
    """d = 2, dense support, t = 1: pure float32 logits lose ~1e-4..1e-3; the fallback not."""
    support = _standardized(1000, 2, seed=0)
    x = _path_points(support, 1.0, 500, seed=1)
    _, v_ref = brute_force_field(x, support, 1.0)
    xt, st = torch.from_numpy(x).float(), torch.from_numpy(support).float()
    with_fallback = _normwise(nw_velocity(xt, st, 1.0), v_ref)
    no_fallback = field.NWField(st, float32_logit_limit=float("inf"))
    pure = _normwise(no_fallback.velocity(xt, 1.0), v_ref)
    assert with_fallback <= 2e-5 < pure


def test_float32_outputs_of_all_functions_keep_dtype_after_fallback():
    support = torch.from_numpy(_standardized(200, 3, seed=2)).float()
    x = torch.from_numpy(_path_points(support.double().numpy(), 1.0, 30, seed=3)).float()
    for fn in (nw_velocity, nw_local_mean, nw_weights, nw_effective_sample_size):
        assert fn(x, support, 1.0).dtype == torch.float32
    v, div = nw_velocity_and_divergence(x, support, 1.0)
    assert v.dtype == div.dtype == torch.float32
    w_ref, _ = brute_force_field(x.double().numpy(), support.double().numpy(), 1.0)
    assert np.abs(nw_weights(x, support, 1.0).double().numpy() - w_ref).max() < 1e-5


# -- device residency -------------------------------------------------------------------------
class _NoHostCopies(TorchFunctionMode):
    """Fails on any ``Tensor.numpy()`` / ``Tensor.tolist()`` call inside the block."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.numpy, torch.Tensor.tolist):
            raise AssertionError("a tensor was converted to NumPy")
        return func(*args, **(kwargs or {}))


def test_per_row_tensor_times_do_not_go_through_numpy():
    rng = np.random.default_rng(15)
    support, x, t = rng.normal(size=(40, 3)), rng.normal(size=(25, 3)), rng.uniform(size=25)
    _, v_ref = brute_force_field(x, support, t)
    tensors = [torch.from_numpy(a) for a in (x, support, t)]
    with _NoHostCopies():
        v = nw_velocity(*tensors)
        for_float32 = nw_velocity(*(a.float() for a in tensors))
    _close(v, v_ref, 1e-10)
    _close(for_float32, v_ref, 1e-4)
    with pytest.raises(AssertionError, match="converted to NumPy"), _NoHostCopies():
        field.kernel_coefficients(tensors[2])  # the host path: the mode sees its conversion
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        nw_velocity(torch.from_numpy(x), torch.from_numpy(support), torch.from_numpy(t + 1))
    with pytest.raises(ValueError, match="entries"):
        nw_velocity(torch.from_numpy(x), torch.from_numpy(support), torch.from_numpy(t[:3]))


class _HostReads(TorchFunctionMode):
    """Records every read of a tensor's values by the host inside the block (on CUDA each is
    a device synchronisation): Python scalars and bools of tensors, ``item``, ``tolist``,
    ``numpy`` and the data-dependent shape of ``nonzero``."""

    READS = ("__bool__", "__float__", "__int__", "__index__", "item", "tolist", "numpy")

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.READS or name == "nonzero":
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


def _fixed_step_host_reads(velocity, x0, grid):
    """Host reads of a Heun solve of ``velocity`` on ``grid``, after two calls (t = 0.5 and
    t = 1) that fill the caches of a prepared field."""
    velocity(0.5, x0)
    velocity(1.0, x0)  # in float32, the float64 copy of the support for the fallback
    with _HostReads() as mode:
        sol = integrate(velocity, x0, grid, method="heun")
    assert bool(torch.isfinite(sol.y).all())
    return mode.reads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prepared_field_sampling_reads_nothing_on_the_host(dtype):
    """A prepared field keeps its support geometry, the float32 radius included: a
    fixed-step solve reads nothing back (on CUDA: no synchronisation; GPU run 2). The
    functions prepare the support at every call (they see in-place changes): in float32 each
    call reads the support radius once (the precision check), which is why a solver loop
    should prepare an NWField. The screened float32 fallback reads its candidate pairs
    (``nonzero``) at the late stages where it applies."""
    gen = torch.Generator().manual_seed(3)
    support = torch.randn(512, 8, generator=gen, dtype=dtype)
    x0 = torch.randn(256, 8, generator=gen, dtype=dtype)
    grid = np.linspace(0.0, 1.0, 11)
    prepared = field.NWField(support, float32_fallback="float64")
    assert _fixed_step_host_reads(lambda t, x: prepared.velocity(x, t), x0, grid) == []
    screened = field.NWField(support)  # the default fallback; only t = 1 falls back here
    reads = _fixed_step_host_reads(lambda t, x: screened.velocity(x, t), x0, grid)
    assert reads == ([] if dtype == torch.float64 else ["__bool__", "nonzero"])
    early = grid[:-1]  # up to t = 0.9: no fallback, so only the radius is read
    per_call = _fixed_step_host_reads(lambda t, x: nw_velocity(x, support, t), x0, early)
    n_calls = 2 * (len(early) - 1)  # Heun: two evaluations per step
    assert per_call == (["__float__"] * n_calls if dtype == torch.float32 else [])


@CUDA
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_fixed_step_sampling_never_syncs(dtype):
    """Fixed-step integration on CUDA of a prepared field: scalar times are host floats and
    the support geometry (the float32 radius included) is computed when the field is first
    evaluated, so no step synchronizes with the host. (The nw_* functions prepare the support
    at every call, and in float32 read its radius each time; the screened float32 fallback
    reads its candidate count, so the float32 run uses the float64 fallback.)"""
    support = torch.randn(512, 8, device="cuda", dtype=dtype)
    x0 = torch.randn(256, 8, device="cuda", dtype=dtype)
    prepared = field.NWField(support, float32_fallback="float64")

    def velocity(t, x):
        return prepared.velocity(x, t)

    velocity(0.5, x0)  # first call computes the support radius (one sync)
    velocity(1.0, x0)  # and, in float32, the float64 copy for the fallback near t = 1
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        sol = integrate(velocity, x0, np.linspace(0.0, 1.0, 11), method="heun")
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert sol.y.device.type == "cuda" and bool(torch.isfinite(sol.y).all())
    # per-row times on the device give the same field as host times
    t_rows = torch.full((256,), 0.7, device="cuda", dtype=torch.float64)
    torch.testing.assert_close(nw_velocity(x0, support, t_rows), nw_velocity(x0, support, 0.7))


@pytest.mark.exactness
def test_functions_see_in_place_changes_and_prepared_fields_are_snapshots():
    rng = np.random.default_rng(16)
    support = torch.from_numpy(rng.normal(size=(30, 3)))
    x = torch.from_numpy(rng.normal(size=(10, 3)))
    v1 = nw_velocity(x, support, 0.6)
    _close(v1, brute_force_field(x.numpy(), support.numpy(), 0.6)[1], 1e-10)
    prepared = field.NWField(support)
    support.mul_(2.0).add_(1.0)  # in place: the functions prepare the support at each call
    ref = brute_force_field(x.numpy(), support.numpy(), 0.6)[1]
    _close(nw_velocity(x, support, 0.6), ref, 1e-10)
    torch.testing.assert_close(prepared.velocity(x, 0.6), v1, rtol=0, atol=0)  # a snapshot
    # the float32 fallback decision follows the support's scale: a support of radius ~3e-3
    # stays in float32 at t = 0.99 (bit-identical to the field without fallback); scaled
    # back up in place, the same tensor is computed in float64 (and so differs from it)
    small = (support / 1000.0).float()
    pure = {"float32_logit_limit": float("inf")}
    x32 = x.float() / 1000.0
    same = nw_velocity(x32, small, 0.99)
    torch.testing.assert_close(
        same, field.NWField(small, **pure).velocity(x32, 0.99), rtol=0, atol=0
    )
    small.mul_(1000.0)
    promoted = nw_velocity(x.float(), small, 0.99)
    assert not torch.equal(promoted, field.NWField(small, **pure).velocity(x.float(), 0.99))
    ref = brute_force_field(x.numpy(), small.double().numpy(), 0.99)[1]
    assert _normwise(promoted, ref) < 1e-6
    # a support that requires grad gets gradients
    s = support.clone().requires_grad_(True)
    nw_velocity(x, s, 0.6).sum().backward()
    assert s.grad is not None and torch.isfinite(s.grad).all()


# -- chunk sizes and backend choice -----------------------------------------------------------
def test_default_chunk_size():
    assert default_chunk_size(1000) == 2**23 // 1000
    assert default_chunk_size(10**9) == 1
    assert default_chunk_size(100, budget=1000) == 10
    assert default_chunk_size(1000, device="cpu") == 2**23 // 1000


@CUDA
@pytest.mark.cuda
def test_default_chunk_size_uses_free_cuda_memory():
    free, _ = torch.cuda.mem_get_info()
    chunk = default_chunk_size(4096, device="cuda", itemsize=4)
    assert chunk >= 2**23 // 4096
    assert chunk * 4096 * 4 <= free


def test_use_torch_backend_auto_rule():
    assert use_torch_backend("torch", "cpu") and not use_torch_backend("numpy", "cpu")
    ranges = ((1, 22), (447, 2000))
    for m, torch_ in ((1, False), (21, False), (22, True), (446, True), (447, False), (2000, True)):
        assert use_torch_backend("auto", "cpu", n_support=m, numpy_ranges=ranges) == torch_
    assert use_torch_backend("auto", "cpu", n_support=5, numpy_ranges=())
    assert use_torch_backend("auto", "cpu")  # size unknown: Torch
    # adaptive solves keep NumPy below AUTO_TORCH_MIN_SUPPORT_ADAPTIVE
    assert not use_torch_backend("auto", "cpu", n_support=1023, adaptive=True)
    assert use_torch_backend("auto", "cpu", n_support=1024, adaptive=True)
    assert not use_torch_backend("auto", "cpu", adaptive=True)
    assert use_torch_backend("torch", "cpu", n_support=5, adaptive=True)
    for lo, hi in AUTO_NUMPY_SUPPORT_CPU:  # the calibrated table is well formed
        assert 1 <= lo < hi and not use_torch_backend("auto", "cpu", n_support=lo)
    assert not use_torch_backend("numpy", "cpu", n_support=10**6)
    with pytest.raises(ValueError, match="backend must be one of"):
        use_torch_backend("jax", "cpu")


@CUDA
@pytest.mark.cuda
def test_auto_backend_on_cuda():
    assert use_torch_backend("auto", "cuda") and use_torch_backend("auto", "auto")
