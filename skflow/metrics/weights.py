"""Effective sample size of probability vectors (e.g. Nadaraya–Watson weights)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._array import is_torch
from ._inputs import refuse_sparse

__all__ = ["effective_sample_size"]

#: Tolerance on the row sums of probability vectors in :func:`effective_sample_size`.
_PROB_ATOL = 1e-6


def effective_sample_size(weights: Any) -> Any:
    """Kish effective sample size ``n_eff = 1 / sum_i w_i**2`` of probability vectors.

    For Nadaraya–Watson weights it is ``m`` for uniform weights (``t = 0``) and 1 when all the
    mass sits on one support point.

    Parameters
    ----------
    weights : array-like or torch.Tensor of shape (..., m)
        Probability vectors along the last axis: nonnegative, finite, each summing to 1 within
        1e-6. Any leading batch dimensions, e.g. (n, m) or (m,).

    Returns
    -------
    n_eff : ndarray or torch.Tensor of shape (...)
        One value per vector, in ``[1, m]``; shape ``()`` (a 0-d array) for a single vector.
        A Torch tensor (same device) for Torch input. Floating inputs keep their dtype
        (float32 stays float32); integer inputs give float64.

    Raises
    ------
    ValueError
        If ``weights`` is 0-d, has an empty last axis, contains NaN/inf, negative entries, or
        vectors that do not sum to 1.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import effective_sample_size
    >>> effective_sample_size(np.full(4, 0.25))
    array(4.)
    >>> effective_sample_size(np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]))
    array([1., 2.])
    """
    if is_torch(weights):
        import torch

        w = weights
        if not (w.is_floating_point()):
            w = w.to(torch.float64)
        if w.ndim == 0:
            raise ValueError("weights must have at least 1 dimension (..., m), got a 0-d tensor")
        if w.shape[-1] == 0:
            raise ValueError(f"weights has an empty last axis (shape {tuple(w.shape)})")
        if not bool(torch.isfinite(w).all()):
            raise ValueError("weights contains NaN or infinity")
        if bool((w < 0).any()):
            raise ValueError("weights must be probability vectors: found negative entries")
        sums = w.to(torch.float64).sum(-1)
        if sums.numel() and float((sums - 1.0).abs().max()) > _PROB_ATOL:
            raise ValueError(
                "weights must be probability vectors (rows summing to 1 within 1e-6); "
                f"found a row summing to {float(sums.flatten()[(sums - 1.0).abs().argmax()])}"
            )
        return 1.0 / (w * w).sum(-1)

    refuse_sparse("weights", weights)
    w = np.asarray(weights)
    if w.dtype.kind not in "biuf":
        raise ValueError(f"weights must be a real numeric array, got dtype {w.dtype}")
    if w.dtype.kind != "f":
        w = w.astype(np.float64)
    if w.ndim == 0:
        raise ValueError("weights must have at least 1 dimension (..., m), got a scalar")
    if w.shape[-1] == 0:
        raise ValueError(f"weights has an empty last axis (shape {w.shape})")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights contains NaN or infinity")
    if np.any(w < 0):
        raise ValueError("weights must be probability vectors: found negative entries")
    sums = w.sum(axis=-1, dtype=np.float64)
    if sums.size:
        dev = np.abs(sums - 1.0)
        if dev.max() > _PROB_ATOL:
            raise ValueError(
                "weights must be probability vectors (rows summing to 1 within 1e-6); "
                f"found a row summing to {sums.ravel()[np.argmax(dev.ravel())]!r}"
            )
    return np.asarray(1.0 / np.sum(w * w, axis=-1))
