"""Streaming engine: the support read in chunks of rows, one pass with an online log-sum-exp.

For supports too large for the dense path (``m * max(d, 64)`` above the block budget, e.g.
``m = 10^6`` in ``d = 64``) or when ``support_chunk_size`` is given. Per query a running
maximum ``M`` of the logits, a running normaliser ``Z = sum_i exp(l_i - M)`` and running
weighted sums ``sum_i exp(l_i - M) v_i`` (and ``... ||k_i||^2`` for the divergence,
``exp(2 (l_i - M))`` for ``n_eff``) are rescaled by ``exp(M_old - M_new)`` when the maximum
grows. Memory is ``O(n d + chunk * (d + k) + block)``; the result equals the dense one to
rounding (~1e-15 relative in float64). A single support ``(m, d)`` only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._call import FieldCall

__all__ = ["logits", "stats", "weights"]


def stats(call: FieldCall, *, divergence: bool = False, neff: bool = False) -> dict:
    """One pass over the support chunks with an online log-sum-exp.

    Returns (each over all rows): ``max`` (n, 1) and ``z = sum exp(l - M)`` (n, 1), so
    ``lse = max + log z``; ``mean`` (n, d) ``= sum exp(l - M) (s - mu)``; with
    ``divergence`` also ``sq`` (n, 1) ``= sum exp(l - M) ||P(s - mu)||^2`` and, with a
    projection, ``keys`` (n, k) ``= sum exp(l - M) P(s - mu)``; with ``neff`` ``z2 =
    sum exp(2 (l - M))`` (n, 1). The support chunks are the outer loop (each is cast,
    centred and projected once); the per-block states are replaced, never updated in place,
    so autograd works.
    """
    xp, g = call.xp, call.geom
    ranges = call.ranges()
    queries = [call.queries(a, b) for a, b in ranges]
    tops = _tops(call, queries)
    states = [None] * len(ranges)
    for values, keys, sq in g.blocks():
        for i, (start, stop) in enumerate(ranges):
            lg = call.logits(queries[i], keys, sq, start, stop, top=tops[i])
            states[i] = _update(call, states[i], lg, values, keys, sq, divergence, neff)
    out = {name: xp.concat([st[name] for st in states], axis=0) for name in states[0]}
    out["max"] = out.pop("shift")  # the sums are relative to exp(shift): lse = shift + log z
    return out


def _update(call, old, lg, values, keys, sq, divergence, neff) -> dict:
    """Fold one chunk's logits into a query block's running state."""
    xp = call.xp
    top = xp.amax(lg, axis=1, keepdims=True)
    top = top if old is None else xp.maximum(old["max"], top)
    # Hard-limit rows have -inf logits off their argmax: a chunk (or all chunks so far) may
    # hold no finite logit, whose exponentials are 0 under any finite shift.
    shift = top if call.hard is None else xp.where(top > -np.inf, top, 0.0)
    p = xp.exp(lg - shift)
    block = {"z": xp.sum(p, axis=1, keepdims=True), "mean": p @ values}
    if divergence:
        block["sq"] = p @ sq.reshape(-1, 1)
        if call.geom.proj is not None:
            block["keys"] = p @ keys
    if neff:
        block["z2"] = xp.sum(p * p, axis=1, keepdims=True)
    if old is not None:
        scale = xp.exp(old["shift"] - shift)
        if call.hard is not None:  # nothing accumulated yet: any finite scale
            scale = xp.where(old["max"] > -np.inf, scale, 0.0)
        for name in block:
            factor = scale * scale if name == "z2" else scale
            block[name] = old[name] * factor + block[name]
    block["max"], block["shift"] = top, shift
    return block


def _tops(call: FieldCall, queries: list) -> list:
    """Per query block, ``max_i <q, k_i>`` over the whole support (n_b, 1), for the rows in
    the hard-argmax limit: one extra pass over the support, only when there are such rows."""
    if call.hard is None:
        return [None] * len(queries)
    xp, tops = call.xp, [None] * len(queries)
    for _, keys, _ in call.geom.blocks():
        for i, q in enumerate(queries):
            top = xp.amax(q @ keys.T, axis=1, keepdims=True)
            tops[i] = top if tops[i] is None else xp.maximum(tops[i], top)
    return tops


def _logit_blocks(call: FieldCall):
    """Yield ``(i, logits)`` for query block ``i`` and each support chunk, chunk-major."""
    ranges = call.ranges()
    queries = [call.queries(a, b) for a, b in ranges]
    tops = _tops(call, queries)
    for _, keys, sq in call.geom.blocks():
        for i, (start, stop) in enumerate(ranges):
            yield i, call.logits(queries[i], keys, sq, start, stop, top=tops[i])


def _matrix(call: FieldCall, transform=None) -> Any:
    """The (n, m) logits (or ``transform(i, logits)`` of them), assembled from streamed blocks."""
    xp = call.xp
    columns = [[] for _ in call.ranges()]
    for i, lg in _logit_blocks(call):
        columns[i].append(lg if transform is None else transform(i, lg))
    return xp.concat([xp.concat(cols, axis=1) for cols in columns], axis=0)


def logits(call: FieldCall) -> Any:
    """The (n, m) logits, streamed."""
    return _matrix(call)


def weights(call: FieldCall) -> Any:
    """The (n, m) weights: two passes, the log-normalisers, then the normalised blocks."""
    xp = call.xp
    st = stats(call)
    lse = st["max"] + xp.log(st["z"])
    ranges = call.ranges()
    return _matrix(call, lambda i, lg: xp.exp(lg - lse[slice(*ranges[i])]))
