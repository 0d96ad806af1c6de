"""Kernel geometry of the NW sampler: the matrix ``P`` of its weights, estimated at ``fit``.

The weights of :class:`~skflow.NWFlowSampler` can use an anisotropic metric
``||P (x - t s_i)||``: ``P = G L`` combines a linear map ``L`` (the ``projection``: an array,
or the linear part of a fitted affine transformer) and a shape ``G`` estimated from the
covariance of the projected support (the ``kernel``). This module computes both, plus the
support's median nearest-neighbour distance that ``fit`` compares ``sigma_min`` with.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import clone

from .._validation import check_real_array

__all__ = [
    "COPY_CHECK_BUDGET",
    "KERNELS",
    "check_projection",
    "fit_projection",
    "is_transformer",
    "kernel_shape",
    "linear_part",
    "median_nn_distance",
]

KERNELS = ("isotropic", "diagonal", "mahalanobis")
#: Cost cap (query rows x support rows x features) of the nearest-neighbour scan of
#: :func:`median_nn_distance`.
COPY_CHECK_BUDGET = 2**28


def kernel_shape(cov: np.ndarray, kernel: str, reg: float) -> np.ndarray | None:
    """Shape matrix ``G`` (k, k) of a kernel geometry for data with covariance ``cov`` (k, k).

    ``"diagonal"``: ``G = diag(1 / sqrt(var_j + r))``; ``"mahalanobis"``:
    ``G = (cov + r I)^(-1/2)`` (symmetric inverse square root), with the ridge
    ``r = reg * tr(cov) / k`` relative to the mean variance. ``G`` is then rescaled so that
    ``tr(G^T G cov) = tr(cov)``: the mean squared distance between support points is the same
    as under the isotropic kernel, only the shape changes. Returns None (isotropic) when the
    covariance is zero, where no shape can be estimated.
    """
    k = cov.shape[0]
    total = float(np.trace(cov))
    if kernel == "isotropic" or not total > 0:
        return None
    ridge = reg * total / k
    if kernel == "diagonal":
        G = np.diag(1.0 / np.sqrt(np.diag(cov) + ridge))
    else:
        evals, evecs = np.linalg.eigh(cov + ridge * np.eye(k))
        evals = np.maximum(evals, ridge)  # guard rounding; cov + ridge I is PD
        G = (evecs / np.sqrt(evals)) @ evecs.T
    scale2 = total / float(np.trace(G.T @ G @ cov))
    return np.sqrt(scale2) * G


def median_nn_distance(X: np.ndarray) -> float:
    """Median distance from evenly spaced rows of ``X`` (m, d) to their nearest other row.

    At most 256 query rows (fewer on large supports, so the brute-force cost stays under
    ``COPY_CHECK_BUDGET``); the support is centred and scanned in blocks. Duplicates count
    (distance 0). NaN when ``m < 2``.
    """
    m, d = X.shape
    if m < 2:
        return float("nan")
    n_q = int(np.clip(COPY_CHECK_BUDGET // (m * d), 16, 256))
    rows = np.unique(np.linspace(0, m - 1, min(m, n_q)).astype(np.intp))
    Xc = X.astype(np.float64) - X.mean(axis=0, dtype=np.float64)
    Q = Xc[rows]
    q2 = np.einsum("ij,ij->i", Q, Q)[:, None]
    best = np.full(rows.shape[0], np.inf)
    for start in range(0, m, 8192):
        B = Xc[start : start + 8192]
        d2 = q2 - 2.0 * (Q @ B.T) + np.einsum("ij,ij->i", B, B)[None, :]
        own = np.flatnonzero((rows >= start) & (rows < start + B.shape[0]))
        d2[own, rows[own] - start] = np.inf  # a row is not its own neighbour
        best = np.minimum(best, d2.min(axis=1))
    return float(np.sqrt(max(float(np.median(best)), 0.0)))


def is_transformer(obj: Any) -> bool:
    """Whether ``obj`` has ``fit`` and ``transform`` (a scikit-learn transformer)."""
    return hasattr(obj, "fit") and hasattr(obj, "transform")


def check_projection(projection: Any, name: str = "projection") -> None:
    """A ``projection`` parameter: None, an array-like or a transformer (its shape and values
    are checked against the data at ``fit``, by :func:`fit_projection`).

    Examples
    --------
    >>> check_projection(None)
    >>> try:
    ...     check_projection("pca")
    ... except TypeError as exc:
    ...     print(str(exc)[:31])
    projection must be None, an arr
    """
    if projection is None or is_transformer(projection):
        return
    if isinstance(projection, str) or hasattr(projection, "fit"):
        raise TypeError(
            f"{name} must be None, an array of shape (k, n_features) or a "
            f"transformer with fit and transform, got {projection!r}."
        )


def linear_part(transformer: Any, X: np.ndarray) -> np.ndarray:
    """Matrix ``P`` (k, d) of a fitted affine transformer ``T(x) = P x + b``.

    ``b = T(0)`` and ``P[:, j] = T(e_j) - b``; affinity is then verified on the rows of ``X``.
    """
    name = type(transformer).__name__
    d = X.shape[1]

    def apply(A):
        out = transformer.transform(A)
        if hasattr(out, "toarray"):
            out = out.toarray()
        out = np.asarray(out, dtype=np.float64)
        if out.ndim != 2 or out.shape[0] != A.shape[0]:
            raise ValueError(
                f"projection {name} returned an array of shape {out.shape}; expected "
                f"({A.shape[0]}, k)."
            )
        return out

    offset = apply(np.zeros((1, d)))[0]
    P = (apply(np.eye(d)) - offset).T
    got = apply(np.asarray(X, dtype=np.float64))
    pred = X.astype(np.float64) @ P.T + offset
    tol = 1e-6 * (1.0 + np.max(np.abs(got))) if got.size else 0.0
    if got.shape != pred.shape or np.max(np.abs(got - pred), initial=0.0) > tol:
        raise ValueError(
            f"projection {name} is not affine on the support (transform(x) != P x + b): "
            "only linear/affine transformers (PCA, TruncatedSVD, random projections, "
            "FlowProjection, ...) can define a kernel geometry. Use a SamplingPipeline for "
            "nonlinear transformers."
        )
    if not np.all(np.isfinite(P)):
        raise ValueError(f"projection {name} has a non-finite linear part.")
    return P


def _linear_map(projection: Any, X: np.ndarray) -> tuple[np.ndarray | None, Any]:
    """``(L (k, d) or None, fitted transformer or None)`` of the ``projection`` parameter."""
    d = X.shape[1]
    if projection is None:
        return None, None
    if is_transformer(projection):
        transformer = clone(projection).fit(X)
        return linear_part(transformer, X), transformer
    try:
        L = check_real_array(projection, "projection").astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"projection must be a numeric array of shape (k, {d}), got {projection!r}."
        ) from None
    if L.ndim != 2 or L.shape[0] < 1 or L.shape[1] != d:
        raise ValueError(f"projection must have shape (k, {d}) with k >= 1, got {L.shape}.")
    if not np.all(np.isfinite(L)):
        raise ValueError("projection contains NaN or infinite values.")
    return L, None


def fit_projection(
    X: np.ndarray, projection: Any, kernel: str, kernel_reg: float
) -> tuple[np.ndarray | None, Any]:
    """The weights' matrix ``P = G L`` of the support ``X`` (m, d), and the fitted transformer.

    Parameters
    ----------
    X : ndarray of shape (m, d)
        The support.
    projection : None, array-like of shape (k, d) or transformer
        ``L``: an array is used as is, a transformer is cloned, fitted on ``X`` and must be
        affine (:func:`linear_part`).
    kernel : {"isotropic", "diagonal", "mahalanobis"}
        Shape ``G`` (k, k), from the covariance of ``X L^T`` (:func:`kernel_shape`).
    kernel_reg : float
        Relative ridge of the covariance.

    Returns
    -------
    P : ndarray of shape (k, d) or None
        float64; None for the isotropic kernel without projection.
    transformer : transformer or None
        The fitted clone of ``projection`` when it is a transformer.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.RandomState(0).normal(size=(50, 2)) * [1.0, 10.0]
    >>> P, _ = fit_projection(X, None, "diagonal", 0.1)
    >>> bool(P[0, 0] > P[1, 1])
    True
    """
    L, transformer = _linear_map(projection, X)
    # The normalized shape G does not change when the covariance is scaled, so the data
    # are divided by a power of two first (exact): huge or tiny supports stay finite.
    X64 = X.astype(np.float64)
    top = float(np.max(np.abs(X64)))
    X64 = X64 / (math.ldexp(1.0, math.frexp(top)[1] - 1) if top > 0 else 1.0)
    Xc = X64 - X64.mean(axis=0)
    Z = Xc if L is None else Xc @ L.T
    G = kernel_shape(Z.T @ Z / X.shape[0], kernel, float(kernel_reg))
    if G is not None and not np.all(np.isfinite(G)):
        raise ValueError(
            f"the {kernel} kernel's shape is not finite for this support (its "
            "covariance overflows or underflows after the projection); rescale the data."
        )
    if G is None:
        return L, transformer
    return (G if L is None else G @ L), transformer
