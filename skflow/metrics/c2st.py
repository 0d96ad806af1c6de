"""Classifier two-sample test: how well a classifier tells generated rows from real ones."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_choice, check_random_state
from ._distances import neighbour_vote
from ._inputs import check_positive_int, prepare_samples
from ._kernel import exact_scale

__all__ = ["classifier_two_sample_test"]

_METRICS = ("accuracy", "auc")


def classifier_two_sample_test(
    generated: Any,
    reference: Any,
    *,
    classifier: Any = None,
    cv: int = 5,
    metric: str = "accuracy",
    random_state: Any = None,
) -> float:
    """Accuracy (or ROC AUC) of a classifier that tells ``generated`` rows from ``reference``.

    The larger sample is first subsampled at random, without replacement, to the size of the
    smaller, so that both classes weigh the same and chance is 0.5. About 0.5 means the
    classifier cannot tell the two apart; towards 1 it can (a generator that repeats copies
    or collapses to clusters reaches 1 even when MMD² is small). Slightly below 0.5 is
    sampling noise; far below it, the generated rows duplicate rows of ``reference`` itself
    (each row's nearest neighbour is then its twin of the other sample).

    With ``classifier=None`` (the default) the classifier is the 1-nearest-neighbour rule,
    evaluated leave-one-out on the pooled, balanced sample (Lopez-Paz & Oquab, 2017): each
    row is classified by its nearest *other* row (a row is never its own neighbour; an exact
    duplicate is another row). Rows tied at the smallest distance share the vote, so the
    result does not depend on the order of the rows. It needs no training and no ``cv``.

    Parameters
    ----------
    generated : array-like or torch.Tensor of shape (n_generated, n_features)
        Samples of the generator.
    reference : array-like or torch.Tensor of shape (n_reference, n_features)
        Real samples of the target law (for a fair test: not the support the generator saw).
    classifier : scikit-learn classifier, optional
        Any classifier (``predict``; ``predict_proba`` or ``decision_function`` for
        ``metric="auc"``), cloned and evaluated by stratified ``cv``-fold cross-validation on
        the host (tensors are copied to NumPy). None: the leave-one-out 1-NN rule above.
    cv : int, default=5
        Number of stratified folds (shuffled) of ``classifier``; at least 2 and at most the
        size of the smaller sample. Unused by the default rule.
    metric : {"accuracy", "auc"}, default="accuracy"
        Accuracy, or ROC AUC with the generated rows as the positive class (for the default
        rule, the score of a row is its nearest neighbours' vote for "generated", so the AUC
        equals the accuracy up to ties). With ``classifier``: the mean over the folds.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Seeds the subsampling of the larger sample (no draw when the sizes are equal) and
        the folds.

    Returns
    -------
    score : float
        In [0, 1]; 0.5 is chance.

    Raises
    ------
    ValueError
        If a sample is not 2-D, is empty or not finite, the features differ, the smaller
        sample has fewer than 2 rows (or fewer than ``cv`` rows with ``classifier``), or
        ``metric`` is not one of the choices.

    Notes
    -----
    The default rule computes exact distances of the pooled ``2 n`` rows (``n`` the smaller
    size) in float64 blocks on the device of the tensors, ``O(n**2 d)`` work.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import classifier_two_sample_test
    >>> rng = np.random.default_rng(0)
    >>> real, support = rng.normal(size=(200, 2)), rng.normal(size=(20, 2))
    >>> 0.4 < classifier_two_sample_test(rng.normal(size=(200, 2)), real, random_state=0) < 0.6
    True
    >>> copies = support[rng.integers(0, 20, 200)]       # 200 copies of 20 support rows
    >>> classifier_two_sample_test(copies, real, random_state=0) > 0.9
    True
    """
    check_choice(metric, "metric", _METRICS)
    xp, (G, R) = prepare_samples(("generated", generated), ("reference", reference))
    n = min(G.shape[0], R.shape[0])
    if n < 2:
        raise ValueError(
            f"the smaller sample has {n} row(s); the classifier two-sample test needs at "
            "least 2 rows in generated and in reference"
        )
    rng = check_random_state(random_state)
    G, R = (_subsample(xp, A, n, rng) for A in (G, R))
    labels = np.repeat([1.0, 0.0], n)  # generated first
    if classifier is not None:
        return _cross_validated(classifier, G, R, labels, xp, cv, metric, rng)
    c = exact_scale(xp, G, R)  # a power of two: the same neighbours, distances stay finite
    Z = xp.concat([G / c, R / c], axis=0)
    vote = xp.to_numpy(neighbour_vote(xp, Z, xp.from_host(labels, Z, "float64")))
    if metric == "auc":
        from sklearn.metrics import roc_auc_score

        return float(roc_auc_score(labels, vote))
    return float(np.mean(np.where(labels == 1.0, vote, 1.0 - vote)))


def _subsample(xp: Any, A: Any, n: int, rng: np.random.RandomState) -> Any:
    """``n`` rows of ``A`` drawn without replacement (in their order), or ``A`` itself."""
    if A.shape[0] == n:
        return A
    idx = np.sort(rng.choice(A.shape[0], n, replace=False))
    return A[xp.index(idx, A)]


def _cross_validated(
    classifier: Any,
    G: Any,
    R: Any,
    labels: np.ndarray,
    xp: Any,
    cv: int,
    metric: str,
    rng: np.random.RandomState,
) -> float:
    """Mean stratified ``cv``-fold score of a clone of ``classifier`` on the host."""
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    n_folds = check_positive_int(cv, "cv")
    n = G.shape[0]
    if not 2 <= n_folds <= n:
        raise ValueError(
            f"cv={cv} folds need 2 <= cv <= {n} (the rows of each balanced sample); pass a "
            "smaller cv or more rows"
        )
    Z = np.concatenate([xp.to_numpy(G), xp.to_numpy(R)], axis=0)
    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=rng)
    scoring = "roc_auc" if metric == "auc" else "accuracy"
    scores = cross_val_score(clone(classifier), Z, labels.astype(int), cv=folds, scoring=scoring)
    return float(np.mean(scores))
