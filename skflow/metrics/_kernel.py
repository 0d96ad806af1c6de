"""The Gaussian kernel of the MMD: bandwidths (given or the median heuristic), exact rescaling
and chunked kernel sums, for NumPy arrays and Torch tensors alike.

Private module: its names are public so that :mod:`skflow.metrics.mmd` can use them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

import numpy as np
from scipy.spatial.distance import pdist

from .._array import NUMPY_BACKEND, is_torch
from .._validation import InvalidParameterError
from ._inputs import as_2d

__all__ = [
    "DEFAULT_CHUNK",
    "bandwidth_out",
    "check_mmd_bandwidth",
    "exact_scale",
    "kernel_sum",
    "median_heuristic",
    "scaled_bandwidth",
]

#: Maximum number of pooled rows used by the median heuristic (evenly spaced subsample).
_MEDIAN_MAX_ROWS = 1000
#: Default row-block size of the chunked kernel sums: a 2048 x 2048 float64 block is 32 MiB,
#: so a block together with its squared-distance temporary stays within about 64 MiB.
DEFAULT_CHUNK = 2048


def check_mmd_bandwidth(bandwidth: Any) -> tuple[str | tuple[float, ...], bool]:
    """Return (``"median"`` or a tuple of positive finite floats, whether a sequence was given)."""
    if isinstance(bandwidth, str):
        if bandwidth != "median":
            raise InvalidParameterError(
                f"bandwidth must be 'median', a positive float or a sequence of positive "
                f"floats, got {bandwidth!r}"
            )
        return "median", False
    if is_torch(bandwidth):
        bandwidth = bandwidth.detach().cpu().numpy()
    if isinstance(bandwidth, np.ndarray) and bandwidth.ndim == 0:
        bandwidth = bandwidth.item()
    is_seq = False
    if isinstance(bandwidth, Real) and not isinstance(bandwidth, bool):
        values: list[Any] = [bandwidth]
    elif isinstance(bandwidth, Sequence | np.ndarray):
        values = list(np.asarray(bandwidth, dtype=object).ravel())
        is_seq = True
        if len(values) == 0:
            raise InvalidParameterError(
                "bandwidth sequence is empty; give at least one positive float"
            )
    else:
        raise InvalidParameterError(
            f"bandwidth must be 'median', a positive float or a sequence of positive floats, "
            f"got {bandwidth!r}"
        )
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Real):
            raise InvalidParameterError(f"bandwidth values must be positive floats, got {v!r}")
        fv = float(v)
        if not (math.isfinite(fv) and fv > 0):
            raise InvalidParameterError(f"bandwidth must be positive and finite, got {v!r}")
        out.append(fv)
    return tuple(out), is_seq


def median_heuristic(parts: Sequence[Any], xp: Any = NUMPY_BACKEND) -> float:
    """Median pairwise Euclidean distance of the rows of the concatenation of ``parts``.

    At most ``_MEDIAN_MAX_ROWS`` rows are used: with ``N`` pooled rows and ``N > 1000`` the
    rows ``floor(k * N / 1000)`` for ``k = 0..999`` are taken. Parts are arrays of the backend
    ``xp`` (NumPy or Torch); only the subsample is moved to the CPU.
    """
    sizes = [int(p.shape[0]) for p in parts]
    N = sum(sizes)
    if N < 2:
        raise ValueError("the median heuristic needs at least 2 samples in total")
    if N > _MEDIAN_MAX_ROWS:
        idx = (np.arange(_MEDIAN_MAX_ROWS, dtype=np.int64) * N) // _MEDIAN_MAX_ROWS
    else:
        idx = np.arange(N, dtype=np.int64)
    rows = []
    start = 0
    for p, size in zip(parts, sizes, strict=True):
        local = idx[(idx >= start) & (idx < start + size)] - start
        if local.size:
            sub = xp.to_numpy(p[xp.index(local, p)])
            rows.append(np.asarray(sub, dtype=np.float64))
        start += size
    Z = np.concatenate(rows, axis=0)
    h = float(np.median(pdist(Z)))
    if not h > 0:
        raise ValueError(
            "the median heuristic gave bandwidth 0 (at least half of the pairwise distances "
            "are 0, e.g. many duplicate rows); pass a positive float bandwidth instead"
        )
    return h


def kernel_sum(
    xp: Any,
    A: Any,
    B: Any | None,
    a_sq: Any,
    b_sq: Any | None,
    inv_two_h2: tuple[float, ...],
    chunk: int,
    exclude_diagonal: bool,
) -> float:
    """Sum of the (multi-scale) Gaussian kernel over all pairs of rows of ``A`` and ``B``.

    ``B is None`` means ``B = A`` (a self term): only blocks on or above the block diagonal are
    evaluated and off-diagonal blocks count twice. For a self term the diagonal's squared
    distances are set to exactly 0 (kernel value 1 per scale), or the diagonal is excluded.
    ``A`` and ``B`` are arrays of the backend ``xp`` (NumPy or Torch).
    """
    self_term = B is None
    if self_term:
        B, b_sq = A, a_sq
    n_a, n_b = A.shape[0], B.shape[0]
    total = 0.0
    for i0 in range(0, n_a, chunk):
        i1 = min(i0 + chunk, n_a)
        Ai, ai = A[i0:i1], a_sq[i0:i1, None]
        for j0 in range(i0 if self_term else 0, n_b, chunk):
            j1 = min(j0 + chunk, n_b)
            D = Ai @ B[j0:j1].T
            D *= -2.0
            D += ai
            D += b_sq[None, j0:j1]
            xp.clamp_min_(D, 0.0)
            diag = self_term and i0 == j0
            if diag:
                xp.fill_diagonal_(D, 0.0)
            if len(inv_two_h2) == 1:
                K = D
                K *= -inv_two_h2[0]
                K = xp.exp_(K)
            else:
                K = sum(xp.exp(D * -c) for c in inv_two_h2)
            if diag and exclude_diagonal:
                xp.fill_diagonal_(K, 0.0)
            s = float(K.sum())
            total += s if (not self_term or diag) else 2.0 * s
    return total


def _resolve_bandwidth(
    xp: Any, bw: str | tuple[float, ...], Xv: Any, Yv: Any, reference: Any
) -> tuple[float, ...]:
    if reference is not None:
        if bw != "median":
            raise ValueError(
                "reference is only used by the median heuristic; pass bandwidth='median' "
                "or drop reference"
            )
        R = as_2d("reference", reference, xp, Xv)
        if R.shape[1] != Xv.shape[1]:
            raise ValueError(
                f"reference has {R.shape[1]} features but X has {Xv.shape[1]} features"
            )
        return (median_heuristic([R], xp),)
    if bw == "median":
        return (median_heuristic([Xv, Yv], xp),)
    return bw  # type: ignore[return-value]


def exact_scale(xp: Any, *arrays: Any) -> float:
    """Power of two ``c`` with ``max |a| / c`` in ``[1, 2)`` over the given arrays.

    The Gaussian-kernel MMD is invariant under scaling the data and the bandwidth together,
    and dividing by a power of two is exact in binary floating point, so computing on
    ``X / c`` with bandwidth ``h / c`` changes no result (beyond values below the subnormal
    range) while keeping squared distances of huge (~1e300) or tiny (~1e-300) inputs from
    overflowing to inf or underflowing to 0. Returns 1.0 for all-zero input. The arrays are
    of the backend ``xp``.
    """
    top = 0.0
    for a in arrays:
        if a is not None and a.shape[0]:
            top = max(top, xp.abs_max(a))
    if not (top > 0.0 and math.isfinite(top)):
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 1)


def scaled_bandwidth(
    xp: Any, bw: str | tuple[float, ...], c: float, Xs: Any, Ys: Any, reference: Any
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(1 / (2 h^2)`` in the units of the data divided by ``c``, ``h`` in input units``)``.

    Given bandwidths are returned as given; the median heuristic is computed on the rescaled
    data and scaled back (``ValueError`` if the median distance overflows float64).
    """
    if bw == "median":
        h_scaled = _resolve_bandwidth(xp, bw, Xs, Ys, reference)
        h = tuple(hh * c for hh in h_scaled)
        if not all(math.isfinite(hh) for hh in h):
            raise ValueError(
                "the median heuristic bandwidth overflows float64 (pairwise distances above "
                "1.8e308); rescale the data"
            )
        return _inverse_two_h2(h_scaled), h
    h_scaled = _resolve_bandwidth(xp, tuple(hh / c for hh in bw), Xs, Ys, reference)
    return _inverse_two_h2(h_scaled), tuple(bw)


def _inverse_two_h2(h: tuple[float, ...]) -> tuple[float, ...]:
    """``1 / (2 h^2)`` per bandwidth, capped at 1e300 so that a bandwidth so small that this
    overflows still gives the limit kernel (1 at distance 0, 0 elsewhere), not NaN."""
    dens = (2.0 * hh * hh for hh in h)
    return tuple(min(1e300, 1.0 / den) if den > 0.0 else 1e300 for den in dens)


def bandwidth_out(h: tuple[float, ...], is_sequence: bool) -> float | tuple[float, ...]:
    """What ``return_bandwidth`` reports: a tuple if a sequence was given, else a float."""
    return tuple(h) if is_sequence else h[0]
