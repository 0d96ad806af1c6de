"""Metrics for support-conditioned samplers: MMD², effective sample size, weight correlation.

This module depends only on NumPy and SciPy. Torch is optional: functions documented to accept
``torch.Tensor`` inputs detect them without importing torch (a tensor can only exist if torch is
already loaded), so ``import skflow.metrics`` never imports torch.

Functions
---------
mmd2
    Gaussian-kernel squared maximum mean discrepancy (U- or V-statistic), chunked so that very
    large samples run in bounded memory.
mmd2_test
    Permutation two-sample test of the unbiased MMD².
effective_sample_size
    Kish effective sample size ``1 / sum_i w_i**2`` of probability vectors (e.g. NW weights).
nw_weight_correlation
    Row-wise Spearman / Pearson correlation of attention weights with Nadaraya–Watson weights.
distance_to_closest_record, memorization_ratio
    Memorisation (copy) check: how close generated points lie to the support, measured against
    how close real held-out points lie to it. MMD² alone rewards copies of the support.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.distance import pdist
from scipy.stats import rankdata

from ._array import is_torch, to_numpy
from ._validation import (
    InvalidParameterError,
    check_choice,
    check_int,
    check_random_state,
    check_real,
)

__all__ = [
    "MMDTestResult",
    "WeightCorrelation",
    "distance_to_closest_record",
    "effective_sample_size",
    "memorization_ratio",
    "mmd2",
    "mmd2_test",
    "nw_weight_correlation",
]

#: Maximum number of pooled rows used by the median heuristic (evenly spaced subsample).
_MEDIAN_MAX_ROWS = 1000
#: Default row-block size of the chunked kernel sums: a 2048 x 2048 float64 block is 32 MiB,
#: so a block together with its squared-distance temporary stays within about 64 MiB.
_DEFAULT_CHUNK = 2048
#: Tolerance on the row sums of probability vectors in :func:`effective_sample_size`.
_PROB_ATOL = 1e-6


# --------------------------------------------------------------------------------------------
# input helpers
# --------------------------------------------------------------------------------------------


def _numpy_2d(name: str, X: Any) -> np.ndarray:
    """Validate ``X`` as a finite, non-empty 2-D numeric array and return it as float64."""
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - exotic array-likes
        raise TypeError(f"{name} must be a numeric array-like, got {type(X).__name__}") from exc
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} must be real-valued, got complex dtype {arr.dtype}")
    if arr.dtype.kind in "USV":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}") from exc
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_features), got {arr.ndim}-D "
            f"array of shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty: it has 0 samples (shape {arr.shape})")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: it has 0 features (shape {arr.shape})")
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity")
    return arr


def _torch_2d(name: str, X: Any, device: Any) -> Any:
    """Validate ``X`` as a finite non-empty 2-D tensor; return it as float64 on ``device``."""
    import torch

    if not isinstance(X, torch.Tensor):
        X = torch.as_tensor(_numpy_2d(name, X), device=device)
    if X.is_complex():
        raise TypeError(f"{name} must be real-valued, got complex dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_features), got {X.ndim}-D "
            f"tensor of shape {tuple(X.shape)}"
        )
    if X.shape[0] == 0:
        raise ValueError(f"{name} is empty: it has 0 samples (shape {tuple(X.shape)})")
    if X.shape[1] == 0:
        raise ValueError(f"{name} is empty: it has 0 features (shape {tuple(X.shape)})")
    if X.device != device:
        raise ValueError(f"{name} is on device {X.device} but the other inputs are on {device}")
    X = X.detach().to(torch.float64)
    if not bool(torch.isfinite(X).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return X


def _positive_int(value: Any, name: str, *, allow_none: bool = False) -> int | None:
    """:func:`~skflow._validation.check_int` (``>= 1``), worded "a positive integer"."""
    try:
        return check_int(value, name, allow_none=allow_none)
    except InvalidParameterError:
        extra = " or None" if allow_none else ""
        raise InvalidParameterError(
            f"{name} must be a positive integer{extra}, got {value!r}."
        ) from None


def _validate_bandwidth(bandwidth: Any) -> tuple[str | tuple[float, ...], bool]:
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


def _median_heuristic(parts: Sequence[Any]) -> float:
    """Median pairwise Euclidean distance of the rows of the concatenation of ``parts``.

    At most ``_MEDIAN_MAX_ROWS`` rows are used: with ``N`` pooled rows and ``N > 1000`` the
    rows ``floor(k * N / 1000)`` for ``k = 0..999`` are taken. Parts may be NumPy arrays or
    Torch tensors; only the subsample is moved to the CPU.
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
            sub = p[local] if not is_torch(p) else p[_torch_index(local, p)].cpu().numpy()
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


def _torch_index(idx: np.ndarray, like: Any) -> Any:
    import torch

    return torch.as_tensor(idx, device=like.device)


def _kernel_sum(
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
    Works for NumPy arrays and Torch tensors alike.
    """
    torch_mode = is_torch(A)
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
            if torch_mode:
                D.clamp_(min=0.0)
            else:
                np.maximum(D, 0.0, out=D)
            diag = self_term and i0 == j0
            if diag:
                if torch_mode:
                    D.fill_diagonal_(0.0)
                else:
                    np.fill_diagonal(D, 0.0)
            if len(inv_two_h2) == 1:
                K = D
                K *= -inv_two_h2[0]
                K = K.exp_() if torch_mode else np.exp(K, out=K)
            else:
                K = sum((D * -c).exp() if torch_mode else np.exp(D * -c) for c in inv_two_h2)
            if diag and exclude_diagonal:
                if torch_mode:
                    K.fill_diagonal_(0.0)
                else:
                    np.fill_diagonal(K, 0.0)
            s = float(K.sum())
            total += s if (not self_term or diag) else 2.0 * s
    return total


def _prepare_pair(X: Any, Y: Any) -> tuple[Any, Any]:
    """Validate X and Y (NumPy or Torch) and return float64 copies of the same kind."""
    if is_torch(X) or is_torch(Y):
        device = X.device if is_torch(X) else Y.device
        Xv, Yv = _torch_2d("X", X, device), _torch_2d("Y", Y, device)
    else:
        Xv, Yv = _numpy_2d("X", X), _numpy_2d("Y", Y)
    if Xv.shape[1] != Yv.shape[1]:
        raise ValueError(f"X has {Xv.shape[1]} features but Y has {Yv.shape[1]} features")
    return Xv, Yv


def _resolve_bandwidth(
    bw: str | tuple[float, ...], Xv: Any, Yv: Any, reference: Any
) -> tuple[float, ...]:
    if reference is not None:
        if bw != "median":
            raise ValueError(
                "reference is only used by the median heuristic; pass bandwidth='median' "
                "or drop reference"
            )
        if is_torch(Xv):
            R = _torch_2d("reference", reference, Xv.device)
        else:
            R = _numpy_2d("reference", to_numpy(reference))
        if R.shape[1] != Xv.shape[1]:
            raise ValueError(
                f"reference has {R.shape[1]} features but X has {Xv.shape[1]} features"
            )
        return (_median_heuristic([R]),)
    if bw == "median":
        return (_median_heuristic([Xv, Yv]),)
    return bw  # type: ignore[return-value]


def _exact_scale(*arrays: Any) -> float:
    """Power of two ``c`` with ``max |a| / c`` in ``[1, 2)`` over the given arrays.

    The Gaussian-kernel MMD is invariant under scaling the data and the bandwidth together,
    and dividing by a power of two is exact in binary floating point, so computing on
    ``X / c`` with bandwidth ``h / c`` changes no result (beyond values below the subnormal
    range) while keeping squared distances of huge (~1e300) or tiny (~1e-300) inputs from
    overflowing to inf or underflowing to 0. Returns 1.0 for all-zero input.
    """
    top = 0.0
    for a in arrays:
        if a is not None and a.shape[0]:
            top = max(top, float(a.abs().max()) if is_torch(a) else float(np.max(np.abs(a))))
    if not (top > 0.0 and math.isfinite(top)):
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 1)


def _scaled_bandwidth(
    bw: str | tuple[float, ...], c: float, Xs: Any, Ys: Any, reference: Any
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(1 / (2 h^2)`` in the units of the data divided by ``c``, ``h`` in input units``)``.

    Given bandwidths are returned as given; the median heuristic is computed on the rescaled
    data and scaled back (``ValueError`` if the median distance overflows float64).
    """
    if bw == "median":
        h_scaled = _resolve_bandwidth(bw, Xs, Ys, reference)
        h = tuple(hh * c for hh in h_scaled)
        if not all(math.isfinite(hh) for hh in h):
            raise ValueError(
                "the median heuristic bandwidth overflows float64 (pairwise distances above "
                "1.8e308); rescale the data"
            )
        return _inverse_two_h2(h_scaled), h
    h_scaled = _resolve_bandwidth(tuple(hh / c for hh in bw), Xs, Ys, reference)
    return _inverse_two_h2(h_scaled), tuple(bw)


def _inverse_two_h2(h: tuple[float, ...]) -> tuple[float, ...]:
    """``1 / (2 h^2)`` per bandwidth, capped at 1e300 so that a bandwidth so small that this
    overflows still gives the limit kernel (1 at distance 0, 0 elsewhere), not NaN."""
    dens = (2.0 * hh * hh for hh in h)
    return tuple(min(1e300, 1.0 / den) if den > 0.0 else 1e300 for den in dens)


def _bandwidth_out(h: tuple[float, ...], is_sequence: bool) -> float | tuple[float, ...]:
    """What ``return_bandwidth`` reports: a tuple if a sequence was given, else a float."""
    return tuple(h) if is_sequence else h[0]


# --------------------------------------------------------------------------------------------
# MMD²
# --------------------------------------------------------------------------------------------


def mmd2(
    X: Any,
    Y: Any,
    *,
    bandwidth: str | float | Sequence[float] = "median",
    unbiased: bool = True,
    chunk_size: int | None = None,
    reference: Any = None,
    return_bandwidth: bool = False,
) -> float | tuple[float, float | tuple[float, ...]]:
    r"""Squared maximum mean discrepancy with a Gaussian kernel.

    The kernel is :math:`k(x, y) = \sum_h \exp(-\lVert x - y\rVert^2 / (2 h^2))`, the sum running
    over the given bandwidth(s) (one term for a single bandwidth). With ``n = len(X)`` and
    ``m = len(Y)`` the unbiased U-statistic is

    .. math::

        \frac{1}{n(n-1)}\sum_{i \ne j} k(x_i, x_j) + \frac{1}{m(m-1)}\sum_{i \ne j} k(y_i, y_j)
        - \frac{2}{nm}\sum_{i, j} k(x_i, y_j),

    and the biased V-statistic keeps the diagonal terms and divides by ``n**2`` and ``m**2``.

    Parameters
    ----------
    X : array-like or torch.Tensor of shape (n, n_features)
        First sample.
    Y : array-like or torch.Tensor of shape (m, n_features)
        Second sample.
    bandwidth : "median", float or sequence of float, default="median"
        Kernel bandwidth ``h``. ``"median"`` is the median heuristic: ``h`` is the median of
        the Euclidean distances ``||z_i - z_j||`` over the distinct pairs ``i < j`` of the
        pooled sample ``Z = [X; Y]`` (X's rows first), i.e. ``np.median(pdist(Z))``. When Z
        has ``N > 1000`` rows, the median is taken over the deterministic, evenly spaced
        subsample of rows ``floor(k * N / 1000)``, ``k = 0, ..., 999``. A positive float is used
        as is; a sequence of positive floats gives the multi-scale kernel (sum of the Gaussian
        kernels, not their mean).
    unbiased : bool, default=True
        If True, the U-statistic (diagonal of the within-sample kernel matrices excluded; can be
        negative, needs at least 2 rows in X and in Y). If False, the V-statistic, which is
        nonnegative (rounding below 0 is reported as 0.0).
    chunk_size : int or None, default=None
        Row-block size of the kernel sums: kernel matrices are never formed whole, only blocks
        of ``chunk_size x chunk_size``. ``None`` uses 2048 (a 32 MiB float64 block, about
        64 MiB with its temporary; two more blocks per multi-scale term), so 50,000 x 50,000
        runs in bounded memory. The result does not depend on it beyond rounding.
    reference : array-like or torch.Tensor of shape (r, n_features), default=None
        If given (with ``bandwidth="median"``), the median heuristic is computed from the rows
        of ``reference`` alone, with the same subsampling rule, instead of the pooled sample.
        Estimators' ``score`` uses ``reference=X_true`` ("bandwidth from the data alone").
    return_bandwidth : bool, default=False
        If True, also return the bandwidth used (a float, or a tuple of floats when a sequence
        was given).

    Returns
    -------
    mmd2 : float
        The MMD² estimate, a Python float also for Torch inputs.
    bandwidth : float or tuple of float
        Only if ``return_bandwidth=True``.

    Raises
    ------
    ValueError
        If X or Y is not 2-D, is empty, contains NaN/inf, the numbers of features differ, a
        bandwidth is not positive, or the unbiased estimate gets fewer than 2 rows in X or Y.

    Notes
    -----
    Everything is computed in float64, whatever the input dtype (float32 included). Squared
    distances use the expansion ``||x||² + ||y||² − 2 x·y`` after centering both samples at the
    pooled mean (distances are shift invariant; centering limits cancellation) and are clipped
    at 0; within-sample diagonal distances are set to exactly 0. Torch tensors (if either input
    is one, the other is moved to its device) are computed with torch on their device; the
    median heuristic's subsample (at most 1000 rows) is moved to the CPU.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import mmd2
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2))
    >>> abs(mmd2(X, rng.normal(size=(200, 2)))) < 0.02
    True
    >>> mmd2(X, rng.normal(size=(200, 2)) + 2.0) > 0.5
    True
    >>> value, h = mmd2(X, X + 1.0, bandwidth=[0.5, 1.0], unbiased=False, return_bandwidth=True)
    >>> h
    (0.5, 1.0)
    """
    bw, is_seq = _validate_bandwidth(bandwidth)
    chunk = _positive_int(chunk_size, "chunk_size", allow_none=True) or _DEFAULT_CHUNK
    Xv, Yv = _prepare_pair(X, Y)
    n, m = Xv.shape[0], Yv.shape[0]
    if unbiased and n < 2:
        raise ValueError(
            f"X must have at least 2 rows for the unbiased MMD² (got {n}); use unbiased=False"
        )
    if unbiased and m < 2:
        raise ValueError(
            f"Y must have at least 2 rows for the unbiased MMD² (got {m}); use unbiased=False"
        )
    if reference is not None and bw == "median":
        reference = (
            _torch_2d("reference", reference, Xv.device)
            if is_torch(Xv)
            else _numpy_2d("reference", to_numpy(reference))
        )
    # Exact rescaling (power of two): squared distances of huge or tiny inputs stay finite.
    c = _exact_scale(Xv, Yv, reference if bw == "median" else None)
    Xv, Yv = Xv / c, Yv / c
    if reference is not None and bw == "median":
        reference = reference / c
    inv, h = _scaled_bandwidth(bw, c, Xv, Yv, reference)

    center = Xv.sum(0) / (n + m) + Yv.sum(0) / (n + m)
    Xc, Yc = Xv - center, Yv - center
    x_sq, y_sq = (Xc * Xc).sum(1), (Yc * Yc).sum(1)
    kxx = _kernel_sum(Xc, None, x_sq, None, inv, chunk, unbiased)
    kyy = _kernel_sum(Yc, None, y_sq, None, inv, chunk, unbiased)
    kxy = _kernel_sum(Xc, Yc, x_sq, y_sq, inv, chunk, False)
    if unbiased:
        value = kxx / (n * (n - 1)) + kyy / (m * (m - 1)) - 2.0 * kxy / (n * m)
    else:
        value = max(kxx / (n * n) + kyy / (m * m) - 2.0 * kxy / (n * m), 0.0)
    value = float(value)
    if return_bandwidth:
        return value, _bandwidth_out(h, is_seq)
    return value


# --------------------------------------------------------------------------------------------
# permutation test
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MMDTestResult:
    """Result of :func:`mmd2_test`.

    Attributes
    ----------
    statistic : float
        Unbiased MMD² of the observed split.
    pvalue : float
        Permutation p-value ``(1 + #{null >= statistic}) / (1 + n_permutations)``.
    null_distribution : ndarray of shape (n_permutations,)
        Unbiased MMD² of the permuted splits.
    bandwidth : float or tuple of float
        Bandwidth(s) used for every statistic.
    """

    statistic: float
    pvalue: float
    null_distribution: np.ndarray
    bandwidth: float | tuple[float, ...] = float("nan")


def mmd2_test(
    X: Any,
    Y: Any,
    *,
    n_permutations: int = 200,
    bandwidth: str | float | Sequence[float] = "median",
    random_state: Any = None,
) -> MMDTestResult:
    """Permutation two-sample test based on the unbiased Gaussian-kernel MMD².

    The bandwidth is fixed once from the pooled sample (see :func:`mmd2`) before permuting.
    The pooled kernel matrix (``(n + m)**2`` float64 values, so meant for ``n + m`` up to about
    10,000) is computed once; each permutation relabels its rows, and all permutation
    statistics come from one matrix product ``K @ A`` with the 0/1 label matrix ``A``.

    Parameters
    ----------
    X : array-like or torch.Tensor of shape (n, n_features)
        First sample, ``n >= 2``. Tensors are converted to NumPy.
    Y : array-like or torch.Tensor of shape (m, n_features)
        Second sample, ``m >= 2``.
    n_permutations : int, default=200
        Number of random relabelings (the identity is not added).
    bandwidth : "median", float or sequence of float, default="median"
        As in :func:`mmd2`.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Seed of the permutations.

    Returns
    -------
    result : MMDTestResult
        ``statistic`` (float), ``pvalue`` (float in ``(0, 1]``), ``null_distribution``
        (ndarray of shape (n_permutations,)) and ``bandwidth``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import mmd2_test
    >>> rng = np.random.default_rng(0)
    >>> res = mmd2_test(rng.normal(size=(100, 2)), rng.normal(size=(100, 2)) + 1.0,
    ...                 n_permutations=99, random_state=0)
    >>> res.pvalue
    0.01
    >>> res.null_distribution.shape
    (99,)
    """
    _positive_int(n_permutations, "n_permutations")
    bw, is_seq = _validate_bandwidth(bandwidth)
    Xv, Yv = _prepare_pair(to_numpy(X), to_numpy(Y))
    n, m = Xv.shape[0], Yv.shape[0]
    for name, size in (("X", n), ("Y", m)):
        if size < 2:
            raise ValueError(f"{name} must have at least 2 rows for the unbiased MMD² (got {size})")
    c = _exact_scale(Xv, Yv)  # see mmd2: exact rescaling against overflow
    Xv, Yv = Xv / c, Yv / c
    inv, h = _scaled_bandwidth(bw, c, Xv, Yv, None)
    rng = check_random_state(random_state)

    Z = np.concatenate([Xv, Yv], axis=0)
    Z -= Z.mean(axis=0)
    z_sq = np.einsum("ij,ij->i", Z, Z)
    D = Z @ Z.T
    D *= -2.0
    D += z_sq[:, None]
    D += z_sq[None, :]
    np.maximum(D, 0.0, out=D)
    np.fill_diagonal(D, 0.0)
    if len(inv) == 1:  # in place: one N x N array
        K = D
        K *= -inv[0]
        np.exp(K, out=K)
    else:
        K = np.zeros_like(D)
        for c_inv in inv:
            K += np.exp(D * -c_inv)
        del D
    np.fill_diagonal(K, 0.0)
    r = K.sum(axis=1)
    total = r.sum()
    N = n + m

    def stats(A: np.ndarray) -> np.ndarray:
        # A: (N, P) 0/1 indicators of membership in the "X" group.
        sxx = np.einsum("ij,ij->j", A, K @ A)
        ar = A.T @ r
        sxy = ar - sxx
        syy = total - 2.0 * ar + sxx
        return sxx / (n * (n - 1)) + syy / (m * (m - 1)) - 2.0 * sxy / (n * m)

    a0 = np.zeros((N, 1))
    a0[:n] = 1.0
    statistic = float(stats(a0)[0])
    null = np.empty(n_permutations)
    block = max(1, min(n_permutations, (1 << 24) // N))
    for p0 in range(0, n_permutations, block):
        p1 = min(p0 + block, n_permutations)
        A = np.zeros((N, p1 - p0))
        for k in range(p1 - p0):
            A[rng.permutation(N)[:n], k] = 1.0
        null[p0:p1] = stats(A)
    pvalue = (1.0 + np.count_nonzero(null >= statistic)) / (1.0 + n_permutations)
    return MMDTestResult(
        statistic=statistic,
        pvalue=float(pvalue),
        null_distribution=null,
        bandwidth=_bandwidth_out(h, is_seq),
    )


# --------------------------------------------------------------------------------------------
# effective sample size
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# attention vs NW weight correlation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeightCorrelation:
    """Result of :func:`nw_weight_correlation`.

    Attributes
    ----------
    per_row : ndarray of shape (n,) or (heads, n)
        Correlation of each row (query) of the attention with the NW weights; NaN where a row
        of either array is constant.
    mean : float
        ``nanmean`` of ``per_row`` (all heads and rows).
    median : float
        ``nanmedian`` of ``per_row``.
    per_head_median : ndarray of shape (heads,) or None
        ``nanmedian`` over rows, per head; None for 2-D attention.
    fraction_above : float
        Fraction of the non-NaN rows whose correlation exceeds ``threshold``.
    pooled_pearson : float
        Pearson correlation of all entries (attention raveled against the NW weights broadcast
        to its shape).
    """

    per_row: np.ndarray
    mean: float
    median: float
    per_head_median: np.ndarray | None
    fraction_above: float
    pooled_pearson: float


def _corr_numpy(name: str, a: Any, keep: np.ndarray | None = None) -> np.ndarray:
    """``a`` as float64, checked real, and finite at the entries ``keep`` (all if None)."""
    if is_torch(a):
        a = a.detach().cpu().numpy()
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    bad = ~np.isfinite(arr)
    if keep is not None:
        bad = bad & keep
    if bad.any():
        where = "" if keep is None else " at an entry that mask keeps"
        raise ValueError(f"{name} contains NaN or infinity{where}")
    return arr


def _corr_mask(mask: Any, shape: tuple) -> np.ndarray | None:
    """The boolean ``mask`` of :func:`nw_weight_correlation`, broadcast to ``shape``."""
    if mask is None:
        return None
    if is_torch(mask):
        mask = mask.detach().cpu().numpy()
    keep = np.asarray(mask)
    if keep.dtype != bool:
        raise ValueError(f"mask must be a boolean array (True: the key takes part), got dtype "
                         f"{keep.dtype}")
    if keep.shape != shape and keep.shape != shape[-2:]:
        raise ValueError(f"mask has shape {keep.shape}; expected {shape[-2:]} or {shape}")
    return np.broadcast_to(keep, shape)


def _rowwise_pearson(a: np.ndarray, b: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Pearson correlation along the last axis over the entries ``keep`` (all if None); NaN
    where a row of ``a`` or ``b`` is constant there (or keeps fewer than 2 entries)."""
    if keep is None:
        keep = np.ones(a.shape, dtype=bool)
    w = keep.astype(np.float64)
    count = w.sum(axis=-1, keepdims=True)
    a, b = np.where(keep, a, 0.0), np.where(keep, b, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ac = (a - a.sum(axis=-1, keepdims=True) / count) * w
        bc = (b - b.sum(axis=-1, keepdims=True) / count) * w
    const = np.zeros(a.shape[:-1], dtype=bool)
    for x in (a, b):
        top = np.where(keep, x, -np.inf).max(axis=-1)
        const |= top == np.where(keep, x, np.inf).min(axis=-1)
    num = np.sum(ac * bc, axis=-1)
    den = np.sqrt(np.sum(ac * ac, axis=-1) * np.sum(bc * bc, axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = num / den
    r = np.clip(r, -1.0, 1.0)
    r[const | ~(den > 0) | (count[..., 0] < 2)] = np.nan
    return r


def nw_weight_correlation(
    attention: Any,
    nw_weights: Any,
    *,
    method: str = "spearman",
    threshold: float = 0.5,
    mask: Any = None,
) -> WeightCorrelation:
    """Row-wise correlation of attention weights with Nadaraya–Watson weights.

    For every query row the correlation over the ``m`` support points is computed between the
    attention weights and the NW weights (the paper's diagnostic for whether a learned or
    pretrained attention implements kernel smoothing).

    Parameters
    ----------
    attention : array-like or torch.Tensor of shape (n, m) or (heads, n, m)
        Attention weights. Tensors are converted with ``.detach().cpu()``.
    nw_weights : array-like or torch.Tensor of shape (n, m) or (heads, n, m)
        NW weights; an (n, m) array is broadcast over the heads of 3-D attention.
    method : {"spearman", "pearson"}, default="spearman"
        Spearman: Pearson correlation of the ranks (``scipy.stats.rankdata``, ties get their
        average rank), computed vectorized along the last axis. Pearson: of the raw values.
    threshold : float, default=0.5
        Threshold of ``fraction_above``.
    mask : array-like of bool of shape (n, m) or (heads, n, m), optional
        True where a key takes part (e.g. the unpadded keys of a padded batch). Each row is
        correlated over its True entries only, so masked keys do not count as agreeing ties;
        the False entries may hold anything (``-inf`` logits, zero weights). Rows with fewer
        than 2 True entries are NaN. ``pooled_pearson`` pools the True entries. None keeps
        every entry.

    Returns
    -------
    result : WeightCorrelation
        ``per_row`` of shape (n,) or (heads, n), and the summaries ``mean``, ``median``,
        ``per_head_median`` ((heads,) or None), ``fraction_above`` and ``pooled_pearson``.
        Rows where the attention or the NW weights are constant (zero variance, e.g. uniform
        weights at ``t = 0``) have correlation NaN, as in ``scipy.stats``; summaries ignore
        them (NaN if every row is NaN).

    Raises
    ------
    ValueError
        On shape mismatch, fewer than 2 columns, NaN/inf, or an unknown ``method``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import nw_weight_correlation
    >>> nw = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    >>> att = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    >>> res = nw_weight_correlation(att, nw)
    >>> res.per_row
    array([1.       , 0.8660254])
    >>> res.fraction_above
    1.0
    """
    check_choice(method, "method", ("spearman", "pearson"))
    check_real(threshold, "threshold")
    # with a mask, finiteness is checked at the kept entries once the shapes are known
    unchecked = None if mask is None else np.zeros((), dtype=bool)
    att = _corr_numpy("attention", attention, unchecked)
    nw = _corr_numpy("nw_weights", nw_weights, unchecked)
    if att.ndim not in (2, 3):
        raise ValueError(
            f"attention must have shape (n, m) or (heads, n, m), got shape {att.shape}"
        )
    if nw.ndim == 2 and nw.shape == att.shape[-2:]:
        nw_b = np.broadcast_to(nw, att.shape)
    elif nw.shape == att.shape:
        nw_b = nw
    else:
        raise ValueError(
            f"nw_weights has shape {nw.shape}, which does not match attention's shape "
            f"{att.shape}; expected {att.shape[-2:]} or {att.shape}"
        )
    if att.shape[-1] < 2:
        raise ValueError(
            f"need at least 2 columns (support points) to correlate, got shape {att.shape}"
        )
    if att.shape[-2] == 0 or (att.ndim == 3 and att.shape[0] == 0):
        raise ValueError(f"attention is empty (shape {att.shape})")

    keep = _corr_mask(mask, att.shape)
    if keep is not None:
        _corr_numpy("attention", att, keep)
        _corr_numpy("nw_weights", nw_b, keep)
    if method == "spearman":
        # masked entries are NaN, which rankdata leaves out of the ranking of their row
        a_in = att if keep is None else np.where(keep, att, np.nan)
        b_in = nw_b if keep is None else np.where(keep, nw_b, np.nan)
        a_in = rankdata(a_in, method="average", axis=-1, nan_policy="omit")
        b_in = rankdata(b_in, method="average", axis=-1, nan_policy="omit")
        # constant rows have constant ranks, so _rowwise_pearson marks them NaN as well
    else:
        a_in, b_in = att, nw_b
    per_row = _rowwise_pearson(a_in, b_in, keep)

    finite = per_row[~np.isnan(per_row)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = float(np.nanmean(per_row)) if finite.size else float("nan")
        median = float(np.nanmedian(per_row)) if finite.size else float("nan")
        per_head = np.nanmedian(per_row, axis=-1) if att.ndim == 3 else None
    frac = float(np.mean(finite > threshold)) if finite.size else float("nan")
    pooled_keep = None if keep is None else keep.ravel()[None, :]
    pooled = float(
        _rowwise_pearson(
            att.ravel()[None, :], np.ascontiguousarray(nw_b).ravel()[None, :], pooled_keep
        )[0]
    )
    return WeightCorrelation(
        per_row=per_row,
        mean=mean,
        median=median,
        per_head_median=per_head,
        fraction_above=frac,
        pooled_pearson=pooled,
    )


# --------------------------------------------------------------------------------------------
# memorisation
# --------------------------------------------------------------------------------------------


def distance_to_closest_record(X: Any, support: Any) -> np.ndarray:
    """Euclidean distance from each row of ``X`` to its nearest row of ``support``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Points to check, e.g. generated samples.
    support : array-like of shape (m, n_features)
        The records a generator was conditioned on.

    Returns
    -------
    dcr : ndarray of shape (n_samples,)
        Distance to the closest record (float64); 0 for an exact copy.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import distance_to_closest_record
    >>> distance_to_closest_record([[0.0, 0.0], [3.0, 4.0]], [[0.0, 0.0]])
    array([0., 5.])
    """
    X = _numpy_2d("X", to_numpy(X) if is_torch(X) else X)
    support = _numpy_2d("support", to_numpy(support) if is_torch(support) else support)
    if X.shape[1] != support.shape[1]:
        raise ValueError(
            f"X has {X.shape[1]} features but support has {support.shape[1]}; they must match"
        )
    # exact nearest neighbours (a k-d tree is exact in any dimension; fast for small supports)
    dist, _ = cKDTree(support).query(X, k=1)
    return np.asarray(dist, dtype=np.float64)


def memorization_ratio(generated: Any, support: Any, reference: Any) -> float:
    """Median distance-to-closest-record of generated points over that of real held-out points.

    A generator that produces new points from the support's distribution places them about as
    far from the support as fresh real points are, so the ratio is near 1; a generator that
    copies the support (e.g. a kernel flow whose terminal bandwidth is tiny against the data's
    scale) places them much closer, so the ratio falls towards 0. This is the DCR comparison
    used to audit synthetic data; report it next to MMD², which rewards copies.

    Parameters
    ----------
    generated : array-like of shape (n_generated, n_features)
        Samples of the generator conditioned on ``support``.
    support : array-like of shape (m, n_features)
        The support (context) the samples were conditioned on.
    reference : array-like of shape (n_reference, n_features)
        Real points of the same distribution that are **not** in ``support`` (held out).

    Returns
    -------
    ratio : float
        ``median(DCR(generated)) / median(DCR(reference))``; well below 1 flags memorisation.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import memorization_ratio
    >>> rng = np.random.default_rng(0)
    >>> support, held_out = rng.normal(size=(50, 2)), rng.normal(size=(200, 2))
    >>> copies = support[rng.integers(0, 50, 200)] + 1e-3
    >>> memorization_ratio(copies, support, held_out) < 0.05
    True
    >>> 0.5 < memorization_ratio(rng.normal(size=(200, 2)), support, held_out) < 2.0
    True
    """
    d_generated = distance_to_closest_record(generated, support)
    d_reference = distance_to_closest_record(reference, support)
    scale = float(np.median(d_reference))
    if scale <= 0.0:
        raise ValueError(
            "reference points lie on the support (median distance 0): the reference must be "
            "held-out points, not the support itself"
        )
    return float(np.median(d_generated)) / scale
