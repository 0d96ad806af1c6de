"""Class-grouped few-shot tasks: every task is one class, its rows split into a support pool
and a reference (scarcity, fewshot and pretrained draw their held-out and tuning tasks here)."""

from __future__ import annotations

from typing import Any

import numpy as np


def class_splits(
    y: Any, classes: Any, n_tasks: int, max_m: int, seed: int, X: Any = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_tasks`` (support pool, reference) pairs, task ``j`` drawn from ``classes[j % k]``.

    Each task shuffles its class's rows with one generator seeded by ``seed`` (the tasks draw
    from it in turn, so task ``j`` depends on the tasks before it) and keeps the first
    ``max_m`` shuffled rows as the support pool, the rest as the reference. A support of
    size ``m <= max_m`` is the first ``m`` rows of the pool: the supports of one task are
    nested and share the reference, which is disjoint from them.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.
    classes : sequence
        The classes the tasks take in turn (``k = len(classes)``).
    n_tasks : int
        Number of tasks.
    max_m : int
        Rows of every support pool.
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    X : array-like of shape (n_samples, n_features), optional
        With it, the pairs hold ``X``'s rows; without it, row indices into ``y``.

    Returns
    -------
    splits : list of (ndarray, ndarray)
        Per task: pool of shape ``(max_m,)`` and reference of shape ``(n_class - max_m,)``
        (indices), or of shapes ``(max_m, n_features)`` and ``(n_class - max_m, n_features)``
        (rows of ``X``).

    Examples
    --------
    >>> y = np.array([0, 0, 0, 1, 1, 1, 1])
    >>> [(pool.tolist(), ref.tolist()) for pool, ref in class_splits(y, (0, 1), 3, 2, seed=0)]
    [([2, 0], [1]), ([6, 5], [4, 3]), ([0, 1], [2])]
    >>> X = np.arange(14.0).reshape(7, 2)
    >>> class_splits(y, (1,), 1, 2, seed=0, X=X)[0][0]
    array([[10., 11.],
           [ 6.,  7.]])
    """
    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    out = []
    for j in range(n_tasks):
        rows = np.flatnonzero(y == classes[j % len(classes)])
        rows = rows[rng.permutation(len(rows))]
        out.append((rows[:max_m], rows[max_m:]))
    if X is None:
        return out
    X = np.asarray(X)
    return [(X[pool], X[ref]) for pool, ref in out]
