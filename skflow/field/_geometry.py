"""Support geometry of a prepared field: centred support, keys, squared norms and radius.

The weights see the centred, projected queries ``P(x - t mu)`` and keys ``P(s_i - mu)``
(Mahalanobis metric ``P^T P``); the values are ``s_i - mu`` in input space. Centring on the
support mean ``mu`` leaves the weights unchanged and keeps the cancellation between the two
terms of the logits small. Every array may carry leading batch dimensions: a support
``(..., m, d)``, a projection ``(..., k, d)``, queries ``(..., n, d)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DenseGeometry", "StreamGeometry", "projection_like"]


def projection_like(xp: Any, projection: Any, like: Any, d: int) -> Any:
    """The projection as an array of the dtype/device of ``like``, shape-checked (..., k, d)."""
    # a tensor of a Torch backend is checked on its device; anything else on the host
    proj = xp.check_real(projection, "projection")
    proj = xp.asarray(proj, like)
    if proj.ndim < 2 or proj.shape[-1] != d:
        raise ValueError(f"projection must have shape (k, {d}), got {tuple(proj.shape)}.")
    return proj


class DenseGeometry:
    """Whole-support geometry in one dtype: ``values = s - mu``, ``keys = P values`` and
    ``sq_norms = ||keys||^2`` (..., 1, m), computed once and reused at every evaluation."""

    streaming = False

    def __init__(self, xp: Any, support: Any, projection: Any):
        self.xp = xp
        self.support = support
        self.mean = xp.mean(support, axis=-2, keepdims=True)
        self.values = support - self.mean
        if projection is None:
            self.proj = None
            self.keys = self.values
        else:
            self.proj = projection_like(xp, projection, self.values, support.shape[-1])
            self.keys = self.values @ xp.mT(self.proj)
        self.sq_norms = xp.sum(self.keys * self.keys, axis=-1)[..., None, :]
        self._radius2 = None

    @property
    def n_support(self) -> int:
        return int(self.support.shape[-2])

    def queries(self, x_rows: Any, t_rows: Any) -> Any:
        """Centred, projected queries ``P(x - t mu)`` of a block of rows."""
        if isinstance(t_rows, float):
            xc = self.xp.sub_scaled(x_rows, self.mean, t_rows)  # one pass on Torch
        else:
            xc = x_rows - t_rows * self.mean
        return xc if self.proj is None else xc @ self.xp.mT(self.proj)

    def radius2(self) -> float:
        """``max_i ||P (s_i - mu)||^2`` over every support (host float, computed once)."""
        if self._radius2 is None:
            sq = self.sq_norms.detach() if hasattr(self.sq_norms, "detach") else self.sq_norms
            with np.errstate(over="ignore", invalid="ignore"):  # float32 overflow is reported
                self._radius2 = float(sq.max()) if self.n_support else 0.0
        return self._radius2

    def mean_key(self) -> Any:
        """``P mu`` (..., 1, k): the projected support mean."""
        return self.mean if self.proj is None else self.mean @ self.xp.mT(self.proj)


class StreamGeometry:
    """Geometry for streaming a single support ``(m, d)``: the mean is computed once (float64
    accumulation over chunks); chunks of rows are cast, centred and projected one at a time
    by :meth:`blocks`, so the support is never copied whole (it is kept as given)."""

    streaming = True

    def __init__(self, xp: Any, support: Any, projection: Any, like: Any, rows: int):
        self.xp = xp
        self.support = support
        self.rows = int(rows)
        self.like = like
        self.mean = _support_mean(xp, support, self.rows, like)
        d = support.shape[1]
        self.proj = None if projection is None else projection_like(xp, projection, like, d)
        self.n_keys = d if self.proj is None else self.proj.shape[0]
        self._radius2 = None

    @property
    def n_support(self) -> int:
        return int(self.support.shape[0])

    def blocks(self):
        """Yield ``(values, keys, sq_norms)`` per support chunk: ``values = s - mu`` (c, d),
        ``keys = P values`` (c, k) and ``||keys||^2`` (1, c)."""
        xp = self.xp
        for start in range(0, self.n_support, self.rows):
            values = xp.asarray(self.support[start : start + self.rows], self.like) - self.mean
            keys = values if self.proj is None else values @ self.proj.T
            yield values, keys, xp.sum(keys * keys, axis=1)[None, :]

    def queries(self, x_rows: Any, t_rows: Any) -> Any:
        xc = x_rows - t_rows * self.mean
        return xc if self.proj is None else xc @ self.proj.T

    def radius2(self) -> float:
        if self._radius2 is None:
            with np.errstate(over="ignore", invalid="ignore"):  # float32 overflow is reported
                self._radius2 = max(float(sq.max()) for _, _, sq in self.blocks())
        return self._radius2

    def mean_key(self) -> Any:
        """``P mu`` (1, k): the projected support mean."""
        return self.mean if self.proj is None else self.mean @ self.proj.T


def _support_mean(xp: Any, support: Any, rows: int, like: Any) -> Any:
    """Mean of the support rows (1, d), accumulated in float64 over chunks of ``rows`` rows
    (no full-size copy of the support), returned in the dtype/device of ``like``."""
    m = support.shape[0]
    mps = xp.device_type(like) == "mps"  # no float64 there
    total = None
    for start in range(0, m, rows):
        part = support[start : start + rows]
        if mps:
            part = xp.asarray(part, like)
        else:
            part = xp.to_float64(part, like)
        s = xp.sum(part, axis=0, keepdims=True)
        total = s if total is None else total + s
    return xp.asarray(total / m, like)
