"""k-nearest-neighbour precision and recall of generated samples (Kynkäänniemi et al., 2019)."""

from __future__ import annotations

from typing import Any

from ._distances import fraction_in_balls, kth_neighbour_distance
from ._inputs import check_positive_int, prepare_samples
from ._kernel import exact_scale

__all__ = ["precision_recall"]


def precision_recall(
    generated: Any, reference: Any, *, n_neighbors: int = 3
) -> tuple[float, float]:
    """k-NN precision (fidelity) and recall (coverage) of generated samples.

    Each sample's manifold is estimated as the union of closed balls around its rows, each
    ball reaching the row's ``n_neighbors``-th nearest other row of the same sample
    (Kynkäänniemi et al., "Improved precision and recall metric for assessing generative
    models", NeurIPS 2019):

    * **precision**: the fraction of generated rows inside the reference manifold (are the
      samples realistic?);
    * **recall**: the fraction of reference rows inside the generated manifold (is all of
      the target law produced? Mode dropping and collapse onto a few points lower it).

    Neither is 1 for two samples of one law (a finite sample's balls miss part of the law):
    compare with the value of two real samples of the same sizes, the noise floor of
    :func:`metric_panel`.

    Parameters
    ----------
    generated : array-like or torch.Tensor of shape (n_generated, n_features)
        Samples of the generator.
    reference : array-like or torch.Tensor of shape (n_reference, n_features)
        Real samples of the target law.
    n_neighbors : int, default=3
        ``k`` of the k-NN radius (the paper's default); smaller than both sample sizes.

    Returns
    -------
    precision : float
        In [0, 1].
    recall : float
        In [0, 1].

    Raises
    ------
    ValueError
        If a sample is not 2-D, is empty or not finite, the features differ, or a sample has
        no more than ``n_neighbors`` rows.

    Notes
    -----
    A row is never its own neighbour; an exact duplicate is another row (at distance 0), so a
    sample of repeated copies has radii near 0 and a small recall. Exact distances in float64
    blocks, on the device of the tensors, ``O((n_generated + n_reference)**2 d)`` work.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import precision_recall
    >>> rng = np.random.default_rng(0)
    >>> real = rng.normal(size=(300, 2))
    >>> p, r = precision_recall(rng.normal(size=(300, 2)), real)
    >>> bool(p > 0.8 and r > 0.8)
    True
    >>> p, r = precision_recall(0.1 * rng.normal(size=(300, 2)), real)  # collapsed
    >>> bool(p > 0.9 and r < 0.5)
    True
    """
    k = check_positive_int(n_neighbors, "n_neighbors")
    xp, (G, R) = prepare_samples(("generated", generated), ("reference", reference))
    for name, size in (("generated", G.shape[0]), ("reference", R.shape[0])):
        if size <= k:
            raise ValueError(
                f"{name} has {size} rows; the k-NN radius needs more than n_neighbors={k} "
                "rows: pass a smaller n_neighbors or more rows"
            )
    c = exact_scale(xp, G, R)  # a power of two: the same balls, distances stay finite
    G, R = G / c, R / c
    precision = fraction_in_balls(xp, G, R, kth_neighbour_distance(xp, R, k))
    recall = fraction_in_balls(xp, R, G, kth_neighbour_distance(xp, G, k))
    return precision, recall
