"""The attention realization of the exact field (Torch): the NW local mean as one SDPA call.

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
:meth:`AttentionKeys.bias_mean`. On CPU that variant is the faster one (the fused kernels are
slower for the odd width ``d + 1``); ``benchmarks/bench_field.py`` times both (column
"lift/SDPA, mask/SDPA" of ``docs/performance.md``).

This module is private to :mod:`skflow.field` (:class:`~skflow.field.NWField` keeps one
:class:`AttentionKeys` per prepared geometry). Torch is imported lazily.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AttentionKeys", "attention_mean"]


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
        if isinstance(b_col, float):  # one time for every query
            bias = xc.new_full((*xc.shape[:-1], 1), -float(b_col))
        else:  # a column of per-row coefficients
            bias = (-b_col).to(xc.dtype).expand(*xc.shape[:-1], 1)
        q = _pad(torch.cat([a_col * xc, bias], dim=-1), width)
        batch = _broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        q, k, v = (z.expand(*batch, *z.shape[-2:]).reshape(-1, 1, *z.shape[-2:]) for z in (q, k, v))
        out = tnf.scaled_dot_product_attention(q, k, v, scale=1.0)
        out = out.reshape(*batch, *out.shape[-2:])
        dv = self.values.shape[-1]
        return out if out.shape[-1] == dv else out[..., :dv]

    def bias_mean(self, xc: Any, a: float, b: float) -> Any:
        """Local mean (..., n, dv) for one time shared by all queries: the per-key bias as a
        broadcast additive mask, ``a`` as SDPA's scale. ``xc`` (..., n, k) has the leading
        dimensions of the keys (one support, or one query block per support of a batch)."""
        import torch.nn.functional as tnf

        if self._plain is None:
            width = self._width(max(self.keys.shape[-1], self.values.shape[-1]))
            sq = self.sq if self.sq is not None else (self.keys * self.keys).sum(dim=-1)
            lead, m = self.keys.shape[:-2], self.keys.shape[-2]
            g = 1
            for size in lead:
                g *= int(size)
            k = _pad(self.keys, width).reshape(g, 1, m, width)
            v = _pad(self.values, width).reshape(g, 1, m, width)
            self._plain = (width, k, v, (-sq).reshape(g, 1, 1, m).to(self.keys.dtype))
        width, k, v, neg_sq = self._plain
        n = xc.shape[-2]
        mask = (neg_sq * b).expand(k.shape[0], 1, n, k.shape[-2])
        q = _pad(xc, width).reshape(k.shape[0], 1, n, width)
        out = tnf.scaled_dot_product_attention(q, k, v, mask, scale=a)
        out = out.reshape(*xc.shape[:-1], width)
        dv = self.values.shape[-1]
        return out if width == dv else out[..., :dv]


def attention_mean(call: Any, bias: str) -> Any:
    """Local mean ``sum_i w_i s_i`` (..., n, d) of a field call through SDPA (Torch).

    ``bias`` is how the per-key bias reaches SDPA when one time is shared by all queries
    (``"mask"`` or ``"lift"``); per-row times always lift. The weights see the centred
    queries and keys; the values are the support. The SDPA layout of the keys is kept in
    the call's geometry (``geom.attention``) and reused by later calls.
    """
    g = call.geom
    if getattr(g, "attention", None) is None:
        # the values are the support (its centred copy plus the mean, once): the softmax
        # average then needs no per-call shift back
        g.attention = AttentionKeys(g.keys, g.values + g.mean, g.sq_norms)
    n = call.n
    if n == 0:
        return call.x[..., :0] @ g.values[..., :0, :] + g.mean
    same_batch = tuple(call.x.shape[:-2]) == tuple(g.keys.shape[:-2])
    if bias == "mask" and isinstance(call.a, float) and same_batch and not call.user_chunk:
        # one time for all queries of one support, or of each support of a batch (a
        # fixed-step solver's stage): one call
        fused = call.x.device.type == "cpu" or call.x.dtype != call.xp.torch.float64
        if fused:
            return g.attention.bias_mean(call.queries(0, n), call.a, call.b)
    rows = call.attention_rows()
    out = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        q = call.queries(start, stop)
        a = call.a if isinstance(call.a, float) else call.a[..., start:stop, :]
        b = call.b if isinstance(call.b, float) else call.b[..., start:stop, :]
        if isinstance(a, float) and bias == "mask" and same_batch:
            out.append(g.attention.bias_mean(q, a, b))
        else:
            out.append(g.attention.lifted_mean(q, a, b))
    return out[0] if len(out) == 1 else call.xp.concat(out, axis=-2)


def _broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` of plain shapes (that one imports ``torch._refs``, seconds
    at its first call)."""
    import numpy as np

    return tuple(np.broadcast_shapes(*(tuple(int(i) for i in s) for s in shapes)))


def _pad(z: Any, width: int) -> Any:
    import torch.nn.functional as tnf

    extra = width - z.shape[-1]
    return z if extra == 0 else tnf.pad(z, (0, extra))
