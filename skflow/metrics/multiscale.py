"""Multi-scale MMD²: the Gaussian-kernel MMD² at multiples of the median distance."""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

from .._validation import InvalidParameterError
from ._inputs import as_2d, prepare_pair
from ._kernel import exact_scale, median_heuristic
from .mmd import mmd2

__all__ = ["multiscale_mmd2"]

#: Default multiples of the median distance: a fine, the median and a coarse scale.
DEFAULT_SCALES = (0.25, 1.0, 4.0)


def multiscale_mmd2(
    X: Any,
    Y: Any,
    *,
    scales: Sequence[float] = DEFAULT_SCALES,
    unbiased: bool = True,
    reference: Any = None,
    return_bandwidth: bool = False,
) -> float | tuple[float, tuple[float, ...]]:
    """MMD² with the sum of Gaussian kernels at ``scales`` times the median distance.

    The median-heuristic bandwidth ``h`` alone mostly compares the first two moments: a
    kernel as wide as the data sees little of their local structure (clusters, copies, thin
    shells). Adding a narrow kernel (``h / 4``) and a wide one (``4 h``) makes one number that
    responds to all three scales. This is :func:`mmd2` with
    ``bandwidth=[s * h for s in scales]`` (the multi-scale kernel of :func:`mmd2`: the sum of
    the Gaussian kernels, not their mean).

    Parameters
    ----------
    X : array-like or torch.Tensor of shape (n, n_features)
        First sample.
    Y : array-like or torch.Tensor of shape (m, n_features)
        Second sample.
    scales : sequence of float, default=(0.25, 1.0, 4.0)
        Positive multiples of the median distance, one kernel each.
    unbiased : bool, default=True
        The U-statistic (can be negative) or the V-statistic, as in :func:`mmd2`.
    reference : array-like or torch.Tensor of shape (r, n_features), optional
        If given, the median distance ``h`` is that of the rows of ``reference`` alone (so
        that several comparisons share one kernel); by default that of the pooled ``[X; Y]``.
        Both follow :func:`mmd2`'s median rule (at most 1000 evenly spaced rows).
    return_bandwidth : bool, default=False
        Also return the bandwidths used, ``tuple(s * h for s in scales)``.

    Returns
    -------
    mmd2 : float
    bandwidth : tuple of float
        Only if ``return_bandwidth=True``.

    Raises
    ------
    ValueError
        If a sample is invalid (see :func:`mmd2`), ``scales`` is empty or holds a value that
        is not a positive finite number, or the median distance is 0.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import mmd2, multiscale_mmd2
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 1.0
    >>> value, h = multiscale_mmd2(X, Y, scales=[1.0], return_bandwidth=True)
    >>> value == mmd2(X, Y, bandwidth=h)
    True
    >>> multiscale_mmd2(X, Y) > multiscale_mmd2(X, rng.normal(size=(200, 2)))
    True
    """
    factors = _check_scales(scales)
    xp, Xv, Yv = prepare_pair(X, Y)
    if reference is not None:
        parts = [as_2d("reference", reference, xp, xp.first_owned(X, Y))]
        if parts[0].shape[1] != Xv.shape[1]:
            raise ValueError(
                f"reference has {parts[0].shape[1]} features but X has {Xv.shape[1]}; pass "
                "a reference of the same features"
            )
    else:
        parts = [Xv, Yv]
    c = exact_scale(xp, *parts)  # a power of two: the median of huge data stays finite
    h = median_heuristic([p / c for p in parts], xp) * c
    bandwidths = tuple(s * h for s in factors)
    value = mmd2(Xv, Yv, bandwidth=bandwidths, unbiased=unbiased)
    return (value, bandwidths) if return_bandwidth else value


def _check_scales(scales: Any) -> tuple[float, ...]:
    """``scales`` as a non-empty tuple of positive finite floats."""
    if isinstance(scales, str) or not isinstance(scales, Sequence):
        raise InvalidParameterError(
            f"scales must be a sequence of positive floats (e.g. (0.25, 1.0, 4.0)), got {scales!r}"
        )
    if len(scales) == 0:
        raise InvalidParameterError("scales is empty; give at least one positive float")
    for s in scales:
        if isinstance(s, bool) or not isinstance(s, Real) or not (math.isfinite(s) and s > 0):
            raise InvalidParameterError(f"scales must be positive finite floats, got {s!r}")
    return tuple(float(s) for s in scales)
