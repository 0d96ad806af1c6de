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

from .._validation import check_bandwidth

__all__ = [
    "LIMIT_PROBE_TIME",
    "AttentionKeys",
    "attention_mean",
    "bias_attention_mean",
    "callable_bandwidth",
    "centre",
    "hard_limit_logits",
    "lifted_attention_mean",
    "lifted_logits",
    "torch_coefficients",
]


#: A callable bandwidth's value at ``t = 0`` is checked against its value at this time.
LIMIT_PROBE_TIME = 1e-12


def _check_limit(bandwidth: Callable, h0: float) -> None:
    """``h0 = bandwidth(0)`` must be ``lim_{t -> 0+} h(t)`` in a regime whose weights converge.

    ``h0 = inf``: uniform weights at ``t = 0``, the limit when ``t h(t)^2 -> inf`` (then
    ``a = 1 / (t h^2) -> 0`` and ``b = 1 / (2 h^2) -> 0``). Finite ``h0 > 0``: the width in
    x-space ``t h(t)`` vanishes and the weights tend to the hard argmax of ``<x, s_i>``.
    Both are checked at :data:`LIMIT_PROBE_TIME`; anything else is refused.
    """
    probe = np.array([LIMIT_PROBE_TIME])
    with np.errstate(all="ignore"):
        hp = float(np.broadcast_to(np.asarray(bandwidth(probe), dtype=np.float64), (1,))[0])
    rule = (
        "A callable bandwidth is called at t = 0 too and must return there its limit as "
        "t -> 0+: a positive float (h continuous at 0; the weights at t = 0 are then the hard "
        "argmax of <x, s_i>) or inf with t * h(t)**2 -> inf (e.g. c * sigma_t / t; uniform "
        "weights at t = 0)."
    )
    if not (h0 > 0):  # also NaN
        raise ValueError(f"bandwidth(0) returned {h0!r}. {rule}")
    if np.isinf(h0):
        width2 = LIMIT_PROBE_TIME * hp * hp
        if not width2 >= 1e6:
            raise ValueError(
                f"bandwidth(0) is inf but t * h(t)**2 = {width2:.3g} at t = {LIMIT_PROBE_TIME}: "
                "h grows too slowly as t -> 0 for the weights to become uniform (their limit "
                f"is not computed for h ~ t**(-1/2) or slower). {rule}"
            )
    elif not abs(hp - h0) <= 1e-6 * h0:
        raise ValueError(
            f"bandwidth(0) = {h0!r} but bandwidth({LIMIT_PROBE_TIME}) = {hp!r}: h is not "
            f"continuous at t = 0. {rule}"
        )


def callable_bandwidth(bandwidth: Callable, t: np.ndarray) -> np.ndarray:
    """Values ``h(t)`` of a callable bandwidth on float64 times ``t``, ``t = 0`` included.

    ``h`` is positive at ``t > 0``; at ``t = 0`` it is the limit ``h(0+)`` in ``(0, inf]``,
    validated by :func:`_check_limit` (``ValueError`` otherwise).
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        h = np.asarray(bandwidth(t), dtype=np.float64)
    if h.shape != t.shape:
        h = np.broadcast_to(h, t.shape)
    zero = t == 0
    if not np.all(h[~zero] > 0):
        raise ValueError("bandwidth(t) must return positive values.")
    if zero.any():
        h0 = h[zero]
        first = float(h0.flat[0])
        if first == first and not np.all(h0 == first):  # (NaN is refused below)
            raise ValueError("bandwidth(t) returned different values for the same t = 0.")
        _check_limit(bandwidth, first)
    return h


def torch_coefficients(
    t: Any,
    *,
    sigma_min: float,
    bandwidth: str | float | Callable,
    dtype: Any,
    device: Any,
    validate: bool = True,
    limit: bool = False,
) -> tuple[Any, Any, Any]:
    """Coefficients ``a(t), b(t), sigma_t`` as tensors of the shape of ``t`` (on ``device``).

    Computed in float64 (where the device has it) and cast to ``dtype``, with Torch operations
    only, so a per-row time tensor on a GPU never leaves it. A callable bandwidth is evaluated
    on the host (it is documented to take a NumPy array).

    ``validate`` checks ``0 <= t <= 1``; that check synchronizes with the device, so hot loops
    pass ``validate=False`` when the times are known to be valid.

    With ``limit=True`` a callable bandwidth is also evaluated at ``t = 0`` (see
    :func:`callable_bandwidth`): rows with ``t = 0`` and a finite ``h(0)`` get ``a = inf`` and
    ``b = 1 / (2 h(0)^2)``, the marker of the hard-argmax limit that
    :mod:`skflow.field` computes; with ``limit=False`` (the heads of :mod:`skflow.nn`) every
    row with ``t = 0`` gets ``a = b = 0`` (uniform weights).
    """
    import torch

    check_bandwidth(bandwidth)
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
        t_np = t.detach().cpu().numpy().astype(np.float64)
        if limit:
            h_np = callable_bandwidth(bandwidth, t_np)
        else:
            safe_np = np.where(t_np > 0, t_np, 1.0)
            h_np = callable_bandwidth(bandwidth, safe_np)
        h = torch.as_tensor(np.array(h_np), device=device).to(work)
        pos = t > 0
        safe = torch.where(pos, t, torch.ones_like(t))
        zero_a = torch.zeros_like(t)
        if limit:  # t = 0: a = inf (hard argmax) for finite h(0), 0 for h(0) = inf
            zero_a = torch.where(torch.isinf(h), zero_a, torch.full_like(t, float("inf")))
        a = torch.where(pos, 1.0 / (safe * h * h), zero_a)
        b = torch.where(pos | torch.isfinite(h), 0.5 / (h * h), torch.zeros_like(t))
        if not limit:
            b = torch.where(pos, b, torch.zeros_like(t))
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


def lifted_logits(xc: Any, keys: Any, a_col: Any, b_col: Any, mean_key: Any = None) -> Any:
    """Explicit logits ``a <x, k_i> - b ||k_i||^2`` of shape (..., n, m).

    Rows with ``a = inf`` (``torch_coefficients(..., limit=True)`` at ``t = 0`` for a bounded
    callable bandwidth) get the limit: ``-inf`` off ``argmax_i <x, k_i>`` and
    ``-b (||k_i||^2 + 2 <P mu, k_i>)`` on it, which needs ``mean_key = P mu`` (..., 1, k),
    the projected support mean that the keys were centred on.
    """
    import torch

    if torch.is_tensor(a_col) and bool(torch.isinf(a_col).any()):
        if mean_key is None:
            raise ValueError("rows in the t -> 0 hard-argmax limit need mean_key (P mu).")
        return hard_limit_logits(xc, keys, a_col, b_col, mean_key)
    q, k = _lift(xc, keys, a_col, b_col)
    return q @ k.transpose(-1, -2)


def hard_limit_logits(xc: Any, keys: Any, a_col: Any, b_col: Any, mean_key: Any) -> Any:
    """Logits where rows with ``a = inf`` take their limit (see :func:`lifted_logits`)."""
    import torch

    hard = torch.isinf(a_col)
    a_safe = torch.where(hard, torch.zeros_like(a_col), a_col)
    lin = xc @ keys.transpose(-1, -2)
    sq = (keys * keys).sum(dim=-1).unsqueeze(-2)
    out = a_safe * lin - b_col * sq
    top = lin.amax(dim=-1, keepdim=True)
    tie = -b_col * (sq + 2.0 * (mean_key @ keys.transpose(-1, -2)))
    limit = torch.where(lin >= top, tie, torch.full_like(tie, float("-inf")))
    return torch.where(hard, limit, out)


def lifted_attention_mean(
    xc: Any, keys: Any, values: Any, a_col: Any, b_col: Any, mean_key: Any = None
) -> Any:
    """``softmax(a <x, k_i> - b ||k_i||^2) @ values`` through one SDPA call.

    Parameters
    ----------
    xc : tensor (..., n, k)
        Centred (and projected) queries.
    keys : tensor (..., m, k)
        Centred (and projected) keys.
    values : tensor (..., m, dv)
    a_col, b_col : tensor broadcastable to (..., n, 1)
    mean_key : tensor (..., 1, k), optional
        ``P mu``; needed only for rows with ``a = inf`` (the ``t -> 0`` hard-argmax limit,
        computed with explicit logits, see :func:`lifted_logits`).

    Returns
    -------
    tensor (..., n, dv)
    """
    import torch

    if torch.is_tensor(a_col) and bool(torch.isinf(a_col).any()):  # t = 0 hard limit
        if mean_key is None:
            raise ValueError("rows in the t -> 0 hard-argmax limit need mean_key (P mu).")
        logits = hard_limit_logits(xc, keys, a_col, b_col, mean_key)
        return torch.softmax(logits, dim=-1) @ values
    return AttentionKeys(keys, values).lifted_mean(xc, a_col, b_col)


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
    return AttentionKeys(keys, values, key_sq_norms).bias_mean(xc, a, b)


class AttentionKeys:
    """Keys and values of one support laid out for SDPA once, reused by every call.

    Fused kernels want one head size for queries, keys and values (a multiple of 8 on CUDA)
    and 4-D ``(batch, heads, length, width)`` inputs; the lifted form also needs the key
    coordinate ``||k_i||^2``. Both layouts are built on first use and kept.

    Parameters
    ----------
    keys : tensor (..., m, k)
        Centred (and projected) keys.
    values : tensor (..., m, dv)
    key_sq_norms : tensor broadcastable to (..., 1, m), optional
        ``||k_i||^2`` if already computed.
    """

    def __init__(self, keys: Any, values: Any, key_sq_norms: Any = None):
        self.keys, self.values, self.sq = keys, values, key_sq_norms
        self._lifted = None
        self._plain = None

    def _width(self, width: int) -> int:
        return -(-width // 8) * 8 if self.keys.device.type == "cuda" else width

    def lifted_mean(self, xc: Any, a_col: Any, b_col: Any) -> Any:
        """Local mean (..., n, dv) for per-row (or scalar) coefficients: lifted query
        ``[a x, -b]`` against lifted keys ``[k_i, ||k_i||^2]``, scale 1."""
        import torch
        import torch.nn.functional as tnf

        if self._lifted is None:
            k = torch.cat([self.keys, (self.keys * self.keys).sum(dim=-1, keepdim=True)], -1)
            width = self._width(max(k.shape[-1], self.values.shape[-1]))
            self._lifted = (width, _pad(k, width), _pad(self.values, width))
        width, k, v = self._lifted
        if torch.is_tensor(b_col):
            bias = (-b_col).to(xc.dtype).expand(*xc.shape[:-1], 1)
        else:  # a Python float: one time for every query
            bias = xc.new_full((*xc.shape[:-1], 1), -float(b_col))
        q = _pad(torch.cat([a_col * xc, bias], dim=-1), width)
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        q, k, v = (z.expand(*batch, *z.shape[-2:]).reshape(-1, 1, *z.shape[-2:]) for z in (q, k, v))
        out = tnf.scaled_dot_product_attention(q, k, v, scale=1.0)
        out = out.reshape(*batch, *out.shape[-2:])
        dv = self.values.shape[-1]
        return out if out.shape[-1] == dv else out[..., :dv]

    def bias_mean(self, xc: Any, a: float, b: float) -> Any:
        """Local mean (n, dv) for one time shared by all queries of a single support: the
        per-key bias as a broadcast additive mask, ``a`` as SDPA's scale."""
        import torch.nn.functional as tnf

        if self._plain is None:
            width = self._width(max(self.keys.shape[-1], self.values.shape[-1]))
            sq = self.sq if self.sq is not None else (self.keys * self.keys).sum(dim=-1)
            m = self.keys.shape[-2]
            k, v = _pad(self.keys, width)[None, None], _pad(self.values, width)[None, None]
            self._plain = (width, k, v, sq.reshape(1, 1, 1, m))
        width, k, v, sq = self._plain
        n, m, dv = xc.shape[0], k.shape[-2], self.values.shape[-1]
        mask = (sq * (-float(b))).to(xc.dtype).expand(1, 1, n, m)
        out = tnf.scaled_dot_product_attention(
            _pad(xc, width)[None, None], k, v, mask, scale=float(a)
        )[0, 0]
        return out if out.shape[-1] == dv else out[:, :dv]


def attention_mean(call: Any, bias: str) -> Any:
    """Local mean ``sum_i w_i s_i`` (..., n, d) of a field call through SDPA (Torch).

    ``bias`` is how the per-key bias reaches SDPA when one time is shared by all queries
    (``"mask"`` or ``"lift"``); per-row times always lift. The weights see the centred
    queries and keys; the values are the centred support (the mean is added back). The
    SDPA layout of the keys is kept in the call's geometry (``geom.attention``) and reused
    by later calls.
    """
    g = call.geom
    if getattr(g, "attention", None) is None:
        g.attention = AttentionKeys(g.keys, g.values, g.sq_norms)
    n = call.n
    if n == 0:
        return call.x[..., :0] @ g.values[..., :0, :] + g.mean
    rows = call.attention_rows()
    out = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        q = call.queries(start, stop)
        a = call.a if isinstance(call.a, float) else call.a[..., start:stop, :]
        b = call.b if isinstance(call.b, float) else call.b[..., start:stop, :]
        if isinstance(a, float) and bias == "mask" and q.ndim == 2:
            out.append(g.attention.bias_mean(q, a, b))
        else:
            out.append(g.attention.lifted_mean(q, a, b))
    return (out[0] if len(out) == 1 else call.xp.concat(out, axis=-2)) + g.mean


def _pad(z: Any, width: int) -> Any:
    import torch.nn.functional as tnf

    extra = width - z.shape[-1]
    return z if extra == 0 else tnf.pad(z, (0, extra))
