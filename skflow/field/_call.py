"""One evaluation of a prepared field: the queries, their coefficients and the block plan.

A :class:`FieldCall` joins the queries ``x`` (..., n, d) and times of one call to the
geometry the prepared field built once (:mod:`skflow.field._geometry`); the engines
(:mod:`skflow.field._dense`, :mod:`skflow.field._stream`, :mod:`skflow.field._sdpa`) read it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._coefficients import Coefficients
from ._plan import block_budget, default_chunk_size

__all__ = ["FieldCall", "row_slice"]


def row_slice(c: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` (axis -2) of a column or matrix; floats pass through."""
    return c if isinstance(c, float) else c[..., start:stop, :]


class FieldCall:
    """Queries, coefficients and geometry of one field evaluation.

    Parameters
    ----------
    xp : namespace
        The array backend of the call (:func:`skflow._array.get_backend`).
    x : array of shape (..., n, d)
        Queries in the working dtype.
    coef : Coefficients
        Of :func:`skflow.field._coefficients.coefficient_columns`, in the working dtype.
    geom : DenseGeometry or StreamGeometry
        Support geometry in the working dtype.
    chunk_size : int or None
        Queries per explicit logits block (None: from the budget).
    """

    def __init__(self, xp, x, coef: Coefficients, geom, chunk_size):
        self.xp, self.x, self.geom = xp, x, geom
        self.t, self.a, self.b, self.sigma_t = coef.t, coef.a, coef.b, coef.sigma_t
        # the path's affine map u = (gain m - decay x) / sigma_t (gain = 1 on the OT path)
        self.gain, self.decay = coef.gain, coef.decay
        self.hard = coef.hard
        self.user_chunk = chunk_size
        # (float32 queries, float32 geometry) of a promoted call whose local mean is
        # screened (skflow.field._screened); None otherwise
        self.screen = None

    @property
    def n(self) -> int:
        return int(self.x.shape[-2])

    def _budget(self) -> int:
        x = self.x
        if self.xp.device_type(x) == "cuda":
            return block_budget(x.device, x.element_size())
        return block_budget()

    @property
    def step(self) -> int:
        """Queries per explicit ``(chunk, m)`` logits block (``(chunk, rows)`` if streaming)."""
        if self.user_chunk:
            return int(self.user_chunk)
        # planned once per geometry (one support, dtype and device): a solver's stages
        # would otherwise query the budget (on CUDA, the free memory) at every evaluation
        rows = getattr(self.geom, "block_rows", None)
        if rows is None:
            if self.geom.streaming:
                rows = max(1, self._budget() // self.geom.rows)
            else:
                rows = default_chunk_size(self.geom.n_support, self._budget())
            self.geom.block_rows = rows
        return rows

    def ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` of the query blocks; one empty block when there are no queries."""
        n, step = self.n, self.step
        return [(start, min(n, start + step)) for start in range(0, max(n, 1), step)]

    def queries(self, start: int, stop: int) -> Any:
        """Centred, projected queries of rows ``start:stop``."""
        rows = self.x[..., start:stop, :]
        return self.geom.queries(rows, row_slice(self.t, start, stop))

    def logits(self, q, keys, sq, start, stop, top=None):
        """Logits ``a <q, k_i> - b ||k_i||^2`` of query rows ``start:stop`` against ``keys``.

        Rows in the hard-argmax limit get the limit ``a -> inf``: ``-inf`` off
        ``argmax_i <q, k_i>`` (``top``, the row maximum over the whole support; over
        ``keys`` when None) and ``-b (||k_i||^2 + 2 <P mu, k_i>) = -b ||P s_i||^2 + const``
        on it, so ties are broken as the limit breaks them.
        """
        xp = self.xp
        lin = q @ xp.mT(keys)
        b = row_slice(self.b, start, stop)
        out = row_slice(self.a, start, stop) * lin - b * sq
        if self.hard is None:
            return out
        if top is None:
            top = xp.amax(lin, axis=-1, keepdims=True)
        tie = -b * (sq + 2.0 * (self.geom.mean_key() @ xp.mT(keys)))
        limit = xp.where(lin >= top, tie, -np.inf)
        return xp.where(self.hard[..., start:stop, :], limit, out)

    def attention_rows(self) -> int:
        """Queries per ``scaled_dot_product_attention`` call."""
        if self.user_chunk:
            return int(self.user_chunk)
        torch = self.xp.torch
        dev = self.x.device
        fused = dev.type == "cpu" or (
            dev.type == "cuda" and self.x.dtype in (torch.float16, torch.bfloat16, torch.float32)
        )
        if fused:  # flash / memory-efficient kernels: memory linear in n + m
            return max(1, self.n)
        return self.step

    def velocity(self, mean: Any) -> Any:
        """``(gain_t m(x, t) - decay_t x) / sigma_t`` from the (uncentred) local mean."""
        if not (isinstance(self.gain, float) and isinstance(self.decay, float)):
            return (self.gain * mean - self.decay * self.x) / self.sigma_t  # (..., n, 1) columns
        if self.gain != 1.0:
            mean = mean * self.gain
        # in place: every engine returns a fresh local mean, of the queries' full shape
        # (not under autograd, whose backward of SDPA needs its output)
        return self.xp.velocity_(mean, self.x, self.decay, self.sigma_t)
