"""Gaussian-kernel MMD² (chunked U- or V-statistic) and its permutation two-sample test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._array import to_numpy
from .._validation import check_random_state
from ._inputs import as_2d, check_positive_int, prepare_pair, refuse_sparse
from ._kernel import (
    DEFAULT_CHUNK,
    bandwidth_out,
    check_mmd_bandwidth,
    exact_scale,
    kernel_sum,
    scaled_bandwidth,
)

__all__ = ["MMDTestResult", "mmd2", "mmd2_test"]


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
    bw, is_seq = check_mmd_bandwidth(bandwidth)
    chunk = check_positive_int(chunk_size, "chunk_size", allow_none=True) or DEFAULT_CHUNK
    xp, Xv, Yv = prepare_pair(X, Y)
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
        reference = as_2d("reference", reference, xp, Xv)
    # Exact rescaling (power of two): squared distances of huge or tiny inputs stay finite.
    c = exact_scale(xp, Xv, Yv, reference if bw == "median" else None)
    Xv, Yv = Xv / c, Yv / c
    if reference is not None and bw == "median":
        reference = reference / c
    inv, h = scaled_bandwidth(xp, bw, c, Xv, Yv, reference)

    center = Xv.sum(0) / (n + m) + Yv.sum(0) / (n + m)
    Xc, Yc = Xv - center, Yv - center
    x_sq, y_sq = (Xc * Xc).sum(1), (Yc * Yc).sum(1)
    kxx = kernel_sum(xp, Xc, None, x_sq, None, inv, chunk, unbiased)
    kyy = kernel_sum(xp, Yc, None, y_sq, None, inv, chunk, unbiased)
    kxy = kernel_sum(xp, Xc, Yc, x_sq, y_sq, inv, chunk, False)
    if unbiased:
        value = kxx / (n * (n - 1)) + kyy / (m * (m - 1)) - 2.0 * kxy / (n * m)
    else:
        value = max(kxx / (n * n) + kyy / (m * m) - 2.0 * kxy / (n * m), 0.0)
    value = float(value)
    if return_bandwidth:
        return value, bandwidth_out(h, is_seq)
    return value


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
    check_positive_int(n_permutations, "n_permutations")
    bw, is_seq = check_mmd_bandwidth(bandwidth)
    refuse_sparse("X", X), refuse_sparse("Y", Y)  # before to_numpy wraps them as objects
    xp, Xv, Yv = prepare_pair(to_numpy(X), to_numpy(Y))
    n, m = Xv.shape[0], Yv.shape[0]
    for name, size in (("X", n), ("Y", m)):
        if size < 2:
            raise ValueError(f"{name} must have at least 2 rows for the unbiased MMD² (got {size})")
    c = exact_scale(xp, Xv, Yv)  # see mmd2: exact rescaling against overflow
    Xv, Yv = Xv / c, Yv / c
    inv, h = scaled_bandwidth(xp, bw, c, Xv, Yv, None)
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
        bandwidth=bandwidth_out(h, is_seq),
    )
