"""``NWFlowSampler.fit(X, y)``: ``sigma_min`` chosen on held-out classes, copy-aware.

For every candidate and every split of the classes (``GroupKFold(cv)`` with ``groups=y``) the
sampler is fitted on the training classes' rows and each held-out class becomes a few-shot
task (its first ``support_size`` rows the support, the rest the reference, as in ``score``).
A candidate is scored by the rule of :mod:`._copy_aware`: the mean multi-scale MMD² and the
mean memorisation ratio over the tasks; the choice is the candidate of lowest MMD² among those
whose memorisation ratio is at least 0.5 (the first one on ties), so a ``sigma_min`` that wins
by copying the support is not chosen. This is ``GridSearchCV`` with a grouped splitter, two
scorers and a ``refit`` rule (``tests/samplers/test_auto_bandwidth.py`` checks it so).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import clone

from ..exceptions import MemorizationWarning
from ._copy_aware import choose_copy_aware, task_scores

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


def few_shot_task_scores(sampler: Any, X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean multi-scale MMD² and memorisation ratio of a fitted ``sampler`` on the few-shot
    tasks of ``(X, y)`` (per label: the first ``support_size`` rows the support, the rest the
    reference; ``len(reference)`` samples seeded as in ``score``).

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import NWFlowSampler, SolverOptions
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(40, 2)), np.repeat(np.arange(4), 10)
    >>> s = NWFlowSampler(solver=SolverOptions(n_steps=5)).fit(X)
    >>> d, memo = few_shot_task_scores(s, X, y)
    >>> bool(memo > 0.5)
    True
    """
    from ._base import SCORE_RANDOM_STATE

    seed = SCORE_RANDOM_STATE if sampler.random_state is None else sampler.random_state
    scores = []
    for label in np.unique(y):
        rows = X[y == label]
        k = sampler._task_support_size(rows.shape[0], label)
        support, reference = rows[:k], rows[k:]
        generated = sampler.sample(reference.shape[0], support=support, random_state=seed)
        scores.append(task_scores(generated, support, reference))
    d, memo = np.asarray(scores).T
    return float(np.mean(d)), float(np.nanmean(memo)) if np.isfinite(memo).any() else np.nan


def select_sigma_min(sampler: Any, X: np.ndarray, y: Any, grid: Any, cv: int) -> tuple:
    """The best ``sigma_min`` of ``grid`` on class-grouped splits, by the copy-aware rule.

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
        Minus the mean multi-scale MMD² of every candidate on every split (higher is better).
    memorization : ndarray of shape (len(grid), n_splits)
        Mean memorisation ratio of every candidate on every split.
    reasons : list of str
        Why each candidate was or was not chosen.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import NWFlowSampler, SolverOptions
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(40, 2)), np.repeat(np.arange(4), 10)
    >>> sampler = NWFlowSampler(solver=SolverOptions(n_steps=5))
    >>> best, scores, memo, reasons = select_sigma_min(sampler, X, y, (0.01, 0.5), 2)
    >>> scores.shape, best
    ((2, 2), 0.5)
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
    scores = np.empty((len(grid), len(splits), 2))
    with warnings.catch_warnings():
        # a candidate that copies is a legitimate point of the grid: the rule below rejects it
        warnings.simplefilter("ignore", MemorizationWarning)
        for i, value in enumerate(grid):
            candidate = clone(sampler).set_params(sigma_min=value, sigma_min_search=None)
            for k, (train, test) in enumerate(splits):
                candidate.fit(X[train])
                scores[i, k] = few_shot_task_scores(candidate, X[test], y[test])
    with warnings.catch_warnings():  # a split without a finite memorisation ratio
        warnings.simplefilter("ignore", RuntimeWarning)
        memo = np.nanmean(scores[..., 1], axis=1)
    names = [f"sigma_min={value!r}" for value in grid]
    best, reasons = choose_copy_aware(scores[..., 0].mean(axis=1), memo, names=names)
    return grid[best], -scores[..., 0], scores[..., 1], reasons
