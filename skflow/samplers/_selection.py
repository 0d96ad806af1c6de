"""``NWFlowSampler.fit(X, y)``: ``sigma_min`` chosen by the few-shot score on held-out classes.

The selection is exactly what :class:`sklearn.model_selection.GridSearchCV` does with
``param_grid={"sigma_min": grid}``, ``cv=GroupKFold(n_splits)`` and ``groups=y`` on a sampler
whose ``sigma_min_search`` is None (its ``fit(X, y)`` then ignores ``y``): for every candidate and
every split of the classes, fit on the training classes' rows and score with the few-shot
``score(X_test, y_test)``; the candidate with the best mean score wins, the first one on ties.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import clone

from ..exceptions import MemorizationWarning

__all__ = ["DEFAULT_SIGMA_MIN_GRID", "check_sigma_min_grid", "select_sigma_min"]

#: Candidates of ``NWFlowSampler(sigma_min_grid="default")``: the automatic bandwidth and the
#: grid of the paper's tuned plug-in (``skflow_experiments.fewshot``), in data units.
DEFAULT_SIGMA_MIN_GRID = ("auto", 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)


def check_sigma_min_grid(value: Any, name: str) -> None:
    """None, ``"default"`` or a non-empty sequence of valid ``sigma_min`` values.

    Examples
    --------
    >>> check_sigma_min_grid(("auto", 0.1), "sigma_min_grid")
    """
    from .._validation import InvalidParameterError, check_sigma_min

    if value is None or (isinstance(value, str) and value == "default"):
        return
    if isinstance(value, str) or not hasattr(value, "__len__") or len(value) == 0:
        raise InvalidParameterError(
            f"{name} must be None, 'default' or a non-empty sequence, got {value!r}."
        )
    for v in value:
        if not (isinstance(v, str) and v == "auto"):
            check_sigma_min(v)


def select_sigma_min(sampler: Any, X: np.ndarray, y: Any, grid: Any, cv: int) -> tuple:
    """The best ``sigma_min`` of ``grid`` by the few-shot score on class-grouped splits.

    Parameters
    ----------
    sampler : NWFlowSampler
        Cloned for every candidate (with ``sigma_min_search=None``).
    X : ndarray of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        Task (class) labels; the groups of the splits.
    grid : sequence of float or "auto"
    cv : int
        Number of folds of :class:`~sklearn.model_selection.GroupKFold` (at most the number
        of classes).

    Returns
    -------
    best : float or "auto"
    scores : ndarray of shape (len(grid), n_splits)
        ``score(X_test, y_test)`` of every candidate on every split.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import NWFlowSampler, SolverOptions
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(40, 2)), np.repeat(np.arange(4), 10)
    >>> sampler = NWFlowSampler(solver=SolverOptions(n_steps=5))
    >>> best, scores = select_sigma_min(sampler, X, y, (0.1, 0.5), 2)
    >>> scores.shape
    (2, 2)
    """
    from sklearn.model_selection import GroupKFold

    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must be 1-D with {X.shape[0]} labels, got shape {y.shape}.")
    n_classes = np.unique(y).size
    if n_classes < 2:
        raise ValueError(
            "fit(X, y) chooses sigma_min on held-out classes and needs at least 2 classes "
            f"in y, got {n_classes} class; use fit(X) or set sigma_min_search=None."
        )
    splits = list(GroupKFold(n_splits=min(cv, n_classes)).split(X, y, groups=y))
    scores = np.empty((len(grid), len(splits)))
    with warnings.catch_warnings():
        # a candidate that copies is a legitimate (losing or winning) point of the grid
        warnings.simplefilter("ignore", MemorizationWarning)
        for i, value in enumerate(grid):
            candidate = clone(sampler).set_params(sigma_min=value, sigma_min_search=None)
            for k, (train, test) in enumerate(splits):
                candidate.fit(X[train])
                scores[i, k] = candidate.score(X[test], y[test])
    return grid[int(np.argmax(scores.mean(axis=1)))], scores
