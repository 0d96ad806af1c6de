"""Row-wise correlation of attention weights with Nadaraya–Watson weights."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import ConstantInputWarning, rankdata

from .._array import to_numpy
from .._validation import check_choice, check_real
from ._inputs import refuse_sparse

__all__ = ["WeightCorrelation", "nw_weight_correlation"]


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
    refuse_sparse(name, a)
    arr = to_numpy(a)
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
    keep = to_numpy(mask)
    if keep.dtype != bool:
        raise ValueError(
            f"mask must be a boolean array (True: the key takes part), got dtype {keep.dtype}"
        )
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


def _warn_undefined_rows(per_row: np.ndarray, keep: np.ndarray | None) -> None:
    """One :class:`scipy.stats.ConstantInputWarning` naming the constant rows (as
    ``scipy.stats.pearsonr`` warns on a constant input): they are NaN, not an error. Rows the
    mask leaves fewer than 2 entries are NaN by the caller's choice (padding): no warning."""
    undefined = np.isnan(per_row)
    if keep is not None:
        undefined &= keep.sum(axis=-1) >= 2
    n_constant = int(undefined.sum())
    if n_constant == 0:
        return
    warnings.warn(
        f"{n_constant} of {per_row.size} rows of attention or nw_weights are constant (zero "
        "variance): a constant row has no correlation, so those rows are NaN and the "
        "summaries leave them out. Uniform weights (t = 0, or equal logits) are constant; "
        "compare at t > 0, or mask out the keys that do not take part.",
        ConstantInputWarning,
        stacklevel=3,
    )


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
        weights at ``t = 0``) have correlation NaN with a
        :class:`scipy.stats.ConstantInputWarning`, as ``scipy.stats.pearsonr`` does; rows
        that ``mask`` leaves fewer than 2 entries are NaN without a warning. Summaries ignore
        NaN rows (NaN if every row is NaN).

    Raises
    ------
    ValueError
        On shape mismatch, fewer than 2 columns, NaN/inf, or an unknown ``method``.

    Warns
    -----
    scipy.stats.ConstantInputWarning
        When some row is constant (its number is named): it has no correlation.

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
    _warn_undefined_rows(per_row, keep)

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
