"""Float32-screened float64 local mean: the precise form of a float32 field late in the flow.

Where ``a(t) R^2`` is large (``R`` the radius of the centred keys), float32 logits are off by
up to ``Delta`` (rounding of the GEMM and of the centring), too much for the weights but
enough to *find* the keys that carry weight. A key whose float32 logit is more than
``2 Delta + W`` below its row's float32 maximum is more than ``W`` below the row's true
maximum, so its weight is below ``e^-W`` of the largest one. With ``W = 40 + log m`` the keys
left out weigh less than ``e^-40 = 4e-18`` together: the mean over the remaining
(query, key) candidates, recomputed exactly in float64, is the float64 local mean to float64
rounding. Late in the flow each query has a handful of candidates, so the cost is one float32
GEMM and a gather, instead of the float64 evaluation of every pair.

``Delta`` is a worst-case bound of the standard rounding model (``gamma_k |q| |k|`` for the
dot product, the roundings of the centred queries and keys), taken four times over. Blocks
whose queries have many candidates (the support has near-duplicates at this bandwidth) or
whose float32 logits are not finite are computed densely in float64.

Private to :mod:`skflow.field` (:class:`~skflow.field.NWField` ``float32_fallback``).
"""

from __future__ import annotations

import math
from typing import Any

from ._call import FieldCall, row_slice

__all__ = ["screened_local_mean", "screening_applies"]

#: Logit window of the screen beyond ``2 Delta + log m``: ``e^-40 = 4.2e-18``.
WINDOW = 40.0
#: float32 logits per screening block on the CPU (``rows * m``: 4 MiB, in cache).
CPU_BLOCK = 2**20
#: Screening pays where the GEMM dominates: key width and support size at least these
#: (``benchmarks/bench_field.py``: below them the gather and the block overheads cost more
#: than the float64 pass they save).
MIN_WIDTH, MIN_SUPPORT = 8, 256
#: A block with more than this many candidates per query is computed densely in float64.
MAX_CANDIDATES = 32
_EPS32 = 2.0**-24


def screening_applies(call: FieldCall) -> bool:
    """Whether a (float64) call may be screened: one dense support of at least
    :data:`MIN_SUPPORT` points and keys of width at least :data:`MIN_WIDTH`, no
    hard-argmax rows."""
    g = call.geom
    if g.streaming or call.x.ndim != 2 or call.hard is not None:
        return False
    return g.n_support >= MIN_SUPPORT and g.keys.shape[-1] >= MIN_WIDTH


def screened_local_mean(call: FieldCall, x32: Any, geom32: Any) -> Any:
    """The float64 local mean (n, dv) of ``call`` (float64 queries, coefficients and
    geometry), screened by float32 logits of the same queries ``x32`` against ``geom32``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.field import NWField
    >>> S = np.random.default_rng(0).normal(size=(500, 8)).astype(np.float32)
    >>> x = 0.99 * S[:4] + 0.02
    >>> f32 = NWField(S, float32_fallback="screened").local_mean(x, 0.99)
    >>> f64 = NWField(S.astype(np.float64)).local_mean(x.astype(np.float64), 0.99)
    >>> bool(np.abs(f32 - f64).max() < 1e-6)
    True
    """
    xp, g = call.xp, call.geom
    n, m = call.n, g.n_support
    cpu = xp.device_type(call.x) == "cpu"
    rows = max(64, CPU_BLOCK // max(m, 1)) if cpu else call.step
    scale = _rounding_scale(xp, geom32, call.x.shape[-1])
    cap = min(MAX_CANDIDATES, m // 8)
    means = []
    for start in range(0, max(n, 1), rows):
        stop = min(n, start + rows)
        means.append(_block_mean(call, x32, geom32, start, stop, scale, cap))
    return (means[0] if len(means) == 1 else xp.concat(means, axis=-2)) + g.mean


def _rounding_scale(xp: Any, geom32: Any, d: int) -> dict:
    """Host constants of the float32 rounding bound and the lifted keys ``[k_i, ||k_i||^2]``
    (k + 1, m), computed once per geometry."""
    cached = getattr(geom32, "screen_scale", None)
    if cached is None:
        k = geom32.keys.shape[-1]
        gamma = (k + d + 8) * _EPS32 / (1.0 - (k + d + 8) * _EPS32)
        proj = 1.0 if geom32.proj is None else float(xp.sqrt(xp.sum(geom32.proj**2)))
        mu = float(xp.sqrt(xp.sum(geom32.mean * geom32.mean)))
        lifted = xp.concat([geom32.keys, xp.mT(geom32.sq_norms)], axis=-1)
        cached = {"gamma": 4.0 * gamma, "radius": math.sqrt(geom32.radius2()), "proj": proj,
                  "mu": mu, "log_m": math.log(max(geom32.n_support, 1)),
                  "lifted_keys": xp.mT(lifted)}  # fmt: skip
        geom32.screen_scale = cached
    return cached


def _block_mean(call, x32, geom32, start, stop, scale, cap) -> Any:
    """Centred float64 local mean of query rows ``start:stop``."""
    xp, g = call.xp, call.geom
    a, b = row_slice(call.a, start, stop), row_slice(call.b, start, stop)
    t = row_slice(call.t, start, stop)
    xr = x32[start:stop]
    q32 = geom32.queries(xr, t if isinstance(t, float) else xp.astype_like(t, xr))
    a32, b32 = (c if isinstance(c, float) else xp.astype_like(c, xr) for c in (a, b))
    # one GEMM of the lifted query [a q, -b] with the lifted keys [k_i, ||k_i||^2]
    lifted = xp.concat([a32 * q32, xp.full((stop - start, 1), 1.0, q32) * -b32], axis=-1)
    logits = lifted @ scale["lifted_keys"]
    top = xp.amax(logits, axis=-1, keepdims=True)
    if stop == start or cap == 0 or not bool(xp.all(xp.isfinite(top))):
        return _dense_block(call, start, stop)
    radius = scale["radius"]
    norm_q = xp.sqrt(xp.sum(q32 * q32, axis=-1, keepdims=True))
    norm_x = xp.sqrt(xp.sum(xr * xr, axis=-1, keepdims=True))
    spread = norm_q + scale["proj"] * (norm_x + scale["mu"])
    delta = scale["gamma"] * (a32 * spread * radius + b32 * radius * radius)
    rows, cols = _nonzero(xp, logits > top - (2.0 * delta + (WINDOW + scale["log_m"])))
    if rows.shape[0] > cap * (stop - start):
        return _dense_block(call, start, stop)
    q64 = call.queries(start, stop)
    a_r = a if isinstance(a, float) else a[rows, 0]
    b_r = b if isinstance(b, float) else b[rows, 0]
    exact = a_r * xp.sum(q64[rows] * g.keys[cols], axis=-1) - b_r * g.sq_norms[0, cols]
    # shift by each row's float64 maximum: the float32 ``top`` can sit hundreds of nats away
    # from it at large a(t) R^2, where exp(exact - top) overflows
    w = xp.exp(exact - _segment_max(xp, rows, exact, stop - start)[rows])
    return _segment_sum(xp, rows, w[:, None] * g.values[cols], stop - start) / _segment_sum(
        xp, rows, w[:, None], stop - start
    )


def _dense_block(call: FieldCall, start: int, stop: int) -> Any:
    """Centred float64 local mean of rows ``start:stop`` over every key."""
    g = call.geom
    logits = call.logits(call.queries(start, stop), g.keys, g.sq_norms, start, stop)
    return call.xp.softmax(logits, axis=-1) @ g.values


def _nonzero(xp: Any, mask: Any) -> tuple[Any, Any]:
    """Row and column indices of a 2-D mask, in row-major order."""
    return xp.nonzero_pairs(mask)


def _segment_sum(xp: Any, rows: Any, values: Any, n_rows: int) -> Any:
    """Per-row sums (n_rows, c) of ``values`` (nnz, c) grouped by ``rows`` (sorted)."""
    return xp.segment_sum(rows, values, n_rows)


def _segment_max(xp: Any, rows: Any, values: Any, n_rows: int) -> Any:
    """Per-row maxima (n_rows,) of ``values`` (nnz,) grouped by ``rows`` (sorted; every row
    has at least one entry: its own top pair)."""
    return xp.segment_max(rows, values, n_rows)
