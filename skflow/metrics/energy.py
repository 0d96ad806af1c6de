"""Energy distance between two samples (U- or V-statistic), for NumPy arrays and Torch tensors."""

from __future__ import annotations

from typing import Any

from ._distances import distance_sum
from ._inputs import prepare_samples
from ._kernel import exact_scale

__all__ = ["energy_distance"]


def energy_distance(X: Any, Y: Any, *, unbiased: bool = True) -> float:
    r"""Energy distance :math:`2E\lVert X - Y\rVert - E\lVert X - X'\rVert - E\lVert Y - Y'\rVert`.

    It is 0 exactly when the two laws are equal (for laws with a finite first moment) and
    sees every moment, not only the first two; in one dimension it is twice the integrated
    squared difference of the two distribution functions. With ``n = len(X)``, ``m = len(Y)``
    the unbiased U-statistic (the default) is

    .. math::

        \frac{2}{nm}\sum_{i, j}\lVert x_i - y_j\rVert
        - \frac{1}{n(n-1)}\sum_{i \ne j}\lVert x_i - x_j\rVert
        - \frac{1}{m(m-1)}\sum_{i \ne j}\lVert y_i - y_j\rVert,

    whose expectation is the energy distance of the two laws (0 for one law; a single value
    can be negative). The V-statistic divides the within-sample sums by ``n**2`` and ``m**2``
    instead: the energy distance of the two empirical laws, nonnegative, biased upwards by
    ``E||X - X'|| / n + E||Y - Y'|| / m``. It is the square of
    :func:`scipy.stats.energy_distance` in one dimension.

    Parameters
    ----------
    X : array-like or torch.Tensor of shape (n, n_features)
        First sample.
    Y : array-like or torch.Tensor of shape (m, n_features)
        Second sample.
    unbiased : bool, default=True
        The U-statistic (needs at least 2 rows in X and in Y); False: the V-statistic.

    Returns
    -------
    energy : float
        A Python float also for Torch inputs, in the units of the data.

    Raises
    ------
    ValueError
        If X or Y is not 2-D, is empty, contains NaN/inf, the numbers of features differ, or
        the unbiased estimate gets fewer than 2 rows in X or Y.

    Notes
    -----
    Computed in float64 from exact distances (the differences of the rows, not the expansion
    of their squares), ``O((n + m)**2 d)`` work in bounded memory, on the
    device of the tensors. The data are first divided by a power of two (exact), so huge or
    tiny inputs do not overflow or underflow.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import energy_distance
    >>> energy_distance([[0.0], [1.0]], [[0.0], [1.0]], unbiased=False)
    0.0
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2))
    >>> abs(energy_distance(X, rng.normal(size=(300, 2)))) < 0.05
    True
    >>> energy_distance(X, rng.normal(size=(300, 2)) + 1.0) > 0.5
    True
    """
    xp, (Xv, Yv) = prepare_samples(("X", X), ("Y", Y))
    n, m = Xv.shape[0], Yv.shape[0]
    for name, size in (("X", n), ("Y", m)):
        if unbiased and size < 2:
            raise ValueError(
                f"{name} must have at least 2 rows for the unbiased energy distance (got "
                f"{size}); use unbiased=False"
            )
    c = exact_scale(xp, Xv, Yv)  # a power of two: exact, and distances stay finite
    Xv, Yv = Xv / c, Yv / c
    n_xx, n_yy = (n * (n - 1), m * (m - 1)) if unbiased else (n * n, m * m)
    value = (
        2.0 * distance_sum(xp, Xv, Yv) / (n * m)
        - distance_sum(xp, Xv, Xv) / n_xx
        - distance_sum(xp, Yv, Yv) / n_yy
    )
    if not unbiased:
        value = max(value, 0.0)  # nonnegative; rounding below 0 is reported as 0.0
    return float(c * value)
