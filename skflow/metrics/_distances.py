"""Exact Euclidean distances in row blocks, for NumPy arrays and Torch tensors alike: the
sums, k-th neighbour radii, ball memberships and nearest-neighbour votes of the sample metrics.

Distances are computed from the differences ``a - b``, not from the expansion
``|a|² + |b|² - 2 a·b`` that :mod:`skflow.metrics.mmd` uses: the expansion loses about half the
digits of a distance near 0 (``sqrt`` of a cancellation), and these metrics look at near
copies and nearest neighbours, where that matters. The cost is ``O(n m d)`` work, in blocks of
at most about ``2**22`` difference entries (32 MiB of float64).

Private module: its names are public so that the metric modules can share them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "distance_blocks",
    "distance_sum",
    "fraction_in_balls",
    "kth_neighbour_distance",
    "neighbour_vote",
]

#: Entries (rows x columns x features) of one block's difference array: 32 MiB of float64.
_BLOCK_ENTRIES = 1 << 22


def distance_blocks(xp: Any, A: Any, B: Any) -> Iterator[tuple[int, int, Any]]:
    """Yield ``(i0, i1, D)``: ``D[i, j] = ||A[i0 + i] - B[j]||`` for consecutive row blocks.

    ``A`` (n, d) and ``B`` (m, d) are float arrays of the backend ``xp``; each ``D`` is a
    ``(i1 - i0, m)`` array of it. A row's distances are computed the same way in every block
    (the differences of its own rows, summed over the features), so they do not depend on the
    order of the rows.
    """
    n, m, d = A.shape[0], B.shape[0], A.shape[1]
    rows = max(1, _BLOCK_ENTRIES // max(1, m * d))
    for i0 in range(0, n, rows):
        i1 = min(i0 + rows, n)
        diff = A[i0:i1, None, :] - B[None, :, :]
        yield i0, i1, xp.sqrt(xp.sum(diff * diff, axis=-1))


def distance_sum(xp: Any, A: Any, B: Any) -> float:
    """``sum_ij ||A[i] - B[j]||`` as a Python float (the diagonal of ``A`` against itself is
    exactly 0)."""
    return sum(float(xp.sum(D)) for _, _, D in distance_blocks(xp, A, B))


def _self_excluded(xp: Any, D: Any, i0: int, i1: int) -> Any:
    """``D`` (rows ``i0:i1`` of a set against the whole set) with each row's own distance set
    to ``inf``: a point is never its own neighbour (an identical other row still is)."""
    xp.fill_diagonal_(D[:, i0:i1], float("inf"))
    return D


def kth_neighbour_distance(xp: Any, A: Any, k: int) -> Any:
    """Distance of each row of ``A`` to its ``k``-th nearest *other* row, shape (n,).

    Needs ``k < len(A)``. Duplicates of a row are other rows (at distance 0).
    """
    radii = [
        xp.kth_smallest(_self_excluded(xp, D, i0, i1), k) for i0, i1, D in distance_blocks(xp, A, A)
    ]
    return xp.concat(radii, axis=0)


def fraction_in_balls(xp: Any, Q: Any, centres: Any, radii: Any) -> float:
    """Fraction of the rows of ``Q`` inside at least one closed ball ``B(centres[j], radii[j])``."""
    inside = 0.0
    for _, _, D in distance_blocks(xp, Q, centres):
        hits = xp.astype(D <= radii[None, :], "float64")
        inside += float(xp.sum(xp.amax(hits, axis=1)))
    return inside / Q.shape[0]


def neighbour_vote(xp: Any, Z: Any, labels: Any) -> Any:
    """For each row of ``Z``: the fraction of its nearest other rows that carry label 1.

    The nearest other rows are all those at the smallest distance (ties share the vote, so
    the result does not depend on the order of the rows); ``labels`` is a float 0/1 array of
    shape (N,). Returns an array of shape (N,) with values in [0, 1].
    """
    votes = []
    for i0, i1, D in distance_blocks(xp, Z, Z):
        D = _self_excluded(xp, D, i0, i1)
        nearest = xp.astype(D <= xp.kth_smallest(D, 1)[:, None], "float64")
        votes.append(xp.sum(nearest * labels[None, :], axis=1) / xp.sum(nearest, axis=1))
    return xp.concat(votes, axis=0)
