"""Torch kernels of the exact field: the attention realization and on-device coefficients.

The NW logits of the OT path expand as

    -||x - t s_i||^2 / (2 tau^2) = a <x, s_i> - b ||s_i||^2 + c(x),
    a = t / tau^2,   b = t^2 / (2 tau^2),

so one attention head with the *lifted* query ``q = [a x, -b]`` and key ``k_i = [s_i, ||s_i||^2]``
(scale 1) and values ``s_i`` computes the NW local mean. The lift carries a per-key bias and
per-query coefficients through a plain ``scaled_dot_product_attention`` call, which runs on
fused (flash / memory-efficient) kernels in memory linear in ``n + m``. Support and queries are
centred on the support mean first (``s - mu``, ``x - t mu``): the weights are unchanged and
the two large terms of the expansion cancel less.

For one time shared by all queries (scalar ``a``, ``b``) the per-key bias can instead be a
broadcast additive mask ``-b ||s_i||^2`` of shape ``(1, m)`` expanded (stride 0, never
materialized) to ``(n, m)``, with the query ``a x`` and key ``s_i`` of the plain width ``d``:
:func:`bias_attention_mean`. On CPU that variant is the faster one (the fused kernels are
slower for the odd width ``d + 1``); ``benchmarks/bench_field.py`` times both (column
"lift/SDPA, mask/SDPA" of ``docs/performance.md``).

This module is private; :mod:`skflow.field` and :mod:`skflow.nn` build on it. Only Torch is
used here (imported lazily by the callers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "bias_attention_mean",
    "centre",
    "lifted_attention_mean",
    "lifted_logits",
    "torch_coefficients",
]


def _validate_bandwidth(bandwidth: Any) -> None:
    if callable(bandwidth) or bandwidth == "ot":
        return
    if isinstance(bandwidth, str | bool):
        raise ValueError(
            f"bandwidth must be 'ot', a positive float or a callable t -> h(t), got {bandwidth!r}."
        )
    value = float(bandwidth)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"bandwidth must be a positive finite float, got {bandwidth!r}.")


def torch_coefficients(
    t: Any,
    *,
    sigma_min: float,
    bandwidth: str | float | Callable,
    dtype: Any,
    device: Any,
    validate: bool = True,
) -> tuple[Any, Any, Any]:
    """Coefficients ``a(t), b(t), sigma_t`` as tensors of the shape of ``t`` (on ``device``).

    Computed in float64 (where the device has it) and cast to ``dtype``, with Torch operations
    only, so a per-row time tensor on a GPU never leaves it. A callable bandwidth is evaluated
    on the host (it is documented to take a NumPy array).

    ``validate`` checks ``0 <= t <= 1``; that check synchronizes with the device, so hot loops
    pass ``validate=False`` when the times are known to be valid.
    """
    import torch

    _validate_bandwidth(bandwidth)
    work = torch.float64 if torch.device(device).type != "mps" else torch.float32
    if torch.is_tensor(t):
        t = t.to(device=device, dtype=work)
    else:  # Python/NumPy values: no float32 detour
        t = torch.as_tensor(np.asarray(t, dtype=np.float64), device=device).to(work)
    if validate and t.numel() and not bool(((t >= 0) & (t <= 1)).all()):
        raise ValueError("t must lie in [0, 1] (finite); got values outside that interval.")
    decay = 1.0 - float(sigma_min)
    sigma_t = 1.0 - decay * t
    if callable(bandwidth):
        t_np = t.detach().cpu().numpy()
        safe_np = np.where(t_np > 0, t_np, 1.0)
        h_np = np.broadcast_to(np.asarray(bandwidth(safe_np), dtype=np.float64), safe_np.shape)
        if not np.all(h_np > 0):
            raise ValueError("bandwidth(t) must return positive values.")
        h = torch.as_tensor(np.array(h_np), device=device).to(work)
        pos = t > 0
        safe = torch.where(pos, t, torch.ones_like(t))
        a = torch.where(pos, 1.0 / (safe * h * h), torch.zeros_like(t))
        b = torch.where(pos, 0.5 / (h * h), torch.zeros_like(t))
    else:
        scale = 1.0 if bandwidth == "ot" else float(bandwidth)
        tau2 = (scale * sigma_t) ** 2
        a = t / tau2
        b = 0.5 * t * t / tau2
    return a.to(dtype), b.to(dtype), sigma_t.to(dtype)


def centre(x: Any, support: Any, t_col: Any) -> tuple[Any, Any, Any]:
    """Centred queries ``x - t mu``, centred support ``s - mu`` and ``mu`` (batched)."""
    mu = support.mean(dim=-2, keepdim=True)
    return x - t_col * mu, support - mu, mu


def _lift(xc: Any, sc: Any, a_col: Any, b_col: Any) -> tuple[Any, Any]:
    """Lifted queries ``[a x, -b]`` (..., n, k+1) and keys ``[s, ||s||^2]`` (..., m, k+1)."""
    import torch

    if torch.is_tensor(b_col):
        bias = (-b_col).to(xc.dtype).expand(*xc.shape[:-1], 1)
    else:  # a Python float: one time for every query
        bias = xc.new_full((*xc.shape[:-1], 1), -float(b_col))
    q = torch.cat([a_col * xc, bias], dim=-1)
    k = torch.cat([sc, (sc * sc).sum(dim=-1, keepdim=True)], dim=-1)
    return q, k


def lifted_logits(xc: Any, keys: Any, a_col: Any, b_col: Any) -> Any:
    """Explicit logits ``a <x, k_i> - b ||k_i||^2`` of shape (..., n, m)."""
    q, k = _lift(xc, keys, a_col, b_col)
    return q @ k.transpose(-1, -2)


def lifted_attention_mean(xc: Any, keys: Any, values: Any, a_col: Any, b_col: Any) -> Any:
    """``softmax(a <x, k_i> - b ||k_i||^2) @ values`` through one SDPA call.

    Parameters
    ----------
    xc : tensor (..., n, k)
        Centred (and projected) queries.
    keys : tensor (..., m, k)
        Centred (and projected) keys.
    values : tensor (..., m, dv)
    a_col, b_col : tensor broadcastable to (..., n, 1)

    Returns
    -------
    tensor (..., n, dv)
    """
    import torch
    import torch.nn.functional as tnf

    q, k = _lift(xc, keys, a_col, b_col)
    dv = values.shape[-1]
    # Fused kernels want one head size for q, k and v (and CUDA ones a multiple of 8): pad
    # with zero columns, which change neither the dot products nor the kept outputs.
    width = max(q.shape[-1], dv)
    if q.device.type == "cuda":
        width = -(-width // 8) * 8
    q, k, v = (_pad(z, width) for z in (q, k, values))
    # Fused kernels also want 4-D (batch, heads, length, width) inputs.
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (z.expand(*batch, *z.shape[-2:]).reshape(-1, 1, *z.shape[-2:]) for z in (q, k, v))
    out = tnf.scaled_dot_product_attention(q, k, v, scale=1.0)
    out = out.reshape(*batch, *out.shape[-2:])
    return out if out.shape[-1] == dv else out[..., :dv]


def bias_attention_mean(
    xc: Any, keys: Any, values: Any, a: float, b: float, key_sq_norms: Any = None
) -> Any:
    """``softmax(a <x, k_i> - b ||k_i||^2) @ values`` for scalar ``a, b``, 2-D inputs.

    ``a`` is SDPA's ``scale``; the per-key bias is an additive mask of shape (1, 1, 1, m)
    expanded to (1, 1, n, m) (stride 0: not materialized; fused CPU flash and CUDA
    memory-efficient kernels accept it). Few element-wise passes over ``(n, d)`` data: on a
    busy multi-core CPU each parallel pass can wait for a descheduled thread.

    Parameters
    ----------
    xc : tensor (n, k)
    keys : tensor (m, k)
    values : tensor (m, dv)
    a, b : float
    key_sq_norms : tensor (m,) or (1, m), optional
        ``||k_i||^2`` if already computed.

    Returns
    -------
    tensor (n, dv)
    """
    import torch.nn.functional as tnf

    n, m, dv = xc.shape[0], keys.shape[0], values.shape[-1]
    width = max(xc.shape[-1], dv)
    if xc.device.type == "cuda":
        width = -(-width // 8) * 8
    q, k, v = (_pad(z, width) for z in (xc, keys, values))
    if key_sq_norms is None:
        key_sq_norms = (keys * keys).sum(dim=-1)
    mask = (key_sq_norms.reshape(1, 1, 1, m) * (-float(b))).to(q.dtype).expand(1, 1, n, m)
    out = tnf.scaled_dot_product_attention(
        q[None, None], k[None, None], v[None, None], mask, scale=float(a)
    )
    out = out[0, 0]
    return out if out.shape[-1] == dv else out[:, :dv]


def _pad(z: Any, width: int) -> Any:
    import torch.nn.functional as tnf

    extra = width - z.shape[-1]
    return z if extra == 0 else tnf.pad(z, (0, extra))
