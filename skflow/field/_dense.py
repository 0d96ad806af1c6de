"""Dense engine: explicit ``(chunk, m)`` logits blocks reduced by GEMMs (NumPy and Torch).

The only O(n m) work is one block of logits per query chunk; every reduction (local mean,
second moment, weights, ``n_eff``) is a softmax and a matrix product of that block.
"""

from __future__ import annotations

from typing import Any

from ._call import FieldCall

__all__ = ["effective_sample_size", "logit_blocks", "logits", "reduce", "weights"]


def logit_blocks(call: FieldCall):
    """Yield ``(start, stop, logits)`` over query blocks, logits of shape (..., rows, m)."""
    g = call.geom
    for start, stop in call.ranges():
        q = call.queries(start, stop)
        yield start, stop, call.logits(q, g.keys, g.sq_norms, start, stop)


def logits(call: FieldCall) -> Any:
    """The (..., n, m) logits."""
    return call.xp.concat([lg for _, _, lg in logit_blocks(call)], axis=-2)


def weights(call: FieldCall) -> Any:
    """The (..., n, m) NW weights."""
    xp = call.xp
    return xp.concat([xp.softmax(lg, axis=-1) for _, _, lg in logit_blocks(call)], axis=-2)


def reduce(call: FieldCall, *, want_second: bool, values: Any = None):
    """Local mean (..., n, dv) of ``values`` (the centred support by default) and,
    optionally, ``E_w ||values||^2`` (..., n), in one pass over the query blocks."""
    xp = call.xp
    values = call.geom.values if values is None else values
    v2 = xp.sum(values * values, axis=-1)[..., None] if want_second else None
    means, seconds = [], []
    for _, _, lg in logit_blocks(call):
        w = xp.softmax(lg, axis=-1)
        means.append(w @ values)
        if want_second:
            seconds.append((w @ v2)[..., 0])
    mean = xp.concat(means, axis=-2)
    return mean, (xp.concat(seconds, axis=-1) if want_second else None)


def effective_sample_size(call: FieldCall) -> Any:
    """Kish ``n_eff = exp(2 lse(l) - lse(2 l))`` per query (..., n)."""
    xp = call.xp
    out = [
        xp.exp(2.0 * xp.logsumexp(lg, axis=-1) - xp.logsumexp(2.0 * lg, axis=-1))
        for _, _, lg in logit_blocks(call)
    ]
    return xp.concat(out, axis=-1)
