"""Memorisation (copy) check: distances of generated points to the support, against those of
real held-out points."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from ._inputs import as_2d

__all__ = ["distance_to_closest_record", "memorization_ratio"]


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
    X, support = as_2d("X", X), as_2d("support", support)  # on the host: a k-d tree
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
