"""The copy-aware rule by which every selection of a sampler in skflow chooses.

Median-bandwidth MMD² mostly compares the first two moments and rewards copies of the
support: a plug-in field with a tiny terminal bandwidth can win it while it returns the
support's own rows. Every selection whose product is a sampler of the law
(:class:`~skflow.BestClassicalSampler`, ``NWFlowSampler().fit(X, y)``) therefore scores a
candidate on validation tasks by two numbers:

- the **multi-scale MMD²** (:func:`skflow.metrics.multiscale_mmd2`, kernels at a quarter, one
  and four times the reference's median distance), lower is better;
- the **memorisation ratio** (:func:`skflow.metrics.memorization_ratio` of the generated rows
  against the task's support and reference), about 1 for new points, near 0 for copies;

and chooses the candidate of lowest MMD² among those whose mean validation memorisation
ratio is at least :data:`MEMORIZATION_FLOOR` (the 0.5 that :func:`skflow.diagnostics.diagnose`
uses). Where every candidate falls below the floor, the one that copies least is chosen and a
:class:`~skflow.exceptions.MemorizationWarning` says so. Each candidate gets a one-line reason.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..exceptions import MemorizationWarning
from ..metrics import memorization_ratio, multiscale_mmd2

__all__ = [
    "MEMORIZATION_FLOOR",
    "SELECTION_SCALES",
    "choose_copy_aware",
    "task_scores",
]

#: Validation memorisation ratio below which a candidate is not chosen.
MEMORIZATION_FLOOR = 0.5
#: Multiples of the reference's median distance of the selection's multi-scale MMD².
SELECTION_SCALES = (0.25, 1.0, 4.0)


def task_scores(generated: Any, support: Any, reference: Any) -> tuple[float, float]:
    """Multi-scale MMD² and memorisation ratio of ``generated`` on one validation task.

    Parameters
    ----------
    generated : ndarray of shape (n, n_features)
        Rows generated from ``support``.
    support : ndarray of shape (k, n_features)
    reference : ndarray of shape (r, n_features)
        Held-out rows of the task (not in ``support``), ``r >= 2``.

    Returns
    -------
    mmd2 : float
        Multi-scale MMD² (kernels at :data:`SELECTION_SCALES` times the reference's median
        distance), lower is better.
    memorization : float
        The memorisation ratio; NaN where the reference lies on the support (no scale to
        compare with), which the selection then ignores.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> S, R = rng.normal(size=(10, 2)), rng.normal(size=(40, 2))
    >>> d, memo = task_scores(S[rng.integers(0, 10, 40)], S, R)  # copies of the support
    >>> memo
    0.0
    """
    d = float(multiscale_mmd2(generated, reference, scales=SELECTION_SCALES, reference=reference))
    try:
        memo = float(memorization_ratio(generated, support, reference))
    except ValueError:  # the reference lies on the support: no distance scale
        memo = float("nan")
    return d, memo


def _reason(i: int, best: int, mmd2: np.ndarray, memo: np.ndarray, floor: float, stat: str) -> str:
    if not np.isfinite(mmd2[i]):
        return "not chosen: could not be fitted or scored on every fold"
    if memo[i] < floor:
        text = f"memorisation ratio {memo[i]:.3g} < {floor:g} (copies the support)"
        return ("chosen although " if i == best else "not chosen: ") + text
    if i == best:
        among = " among non-copying candidates" if np.isfinite(floor) else ""
        return f"chosen: lowest {stat} ({mmd2[i]:.4g}){among}"
    return f"not chosen: {stat} {mmd2[i]:.4g} > {mmd2[best]:.4g} of the choice"


def choose_copy_aware(
    mmd2: Any,
    memorization: Any,
    *,
    floor: float = MEMORIZATION_FLOOR,
    names: Any = None,
    statistic: str = "multi-scale MMD²",
) -> tuple[int, list[str]]:
    """Index of the candidate of lowest ``mmd2`` whose ``memorization`` is at least ``floor``.

    Parameters
    ----------
    mmd2 : array-like of shape (n_candidates,)
        Mean validation multi-scale MMD² (``inf`` for a candidate that failed).
    memorization : array-like of shape (n_candidates,)
        Mean validation memorisation ratio (NaN: unknown, not held against the candidate).
    floor : float, default=MEMORIZATION_FLOOR
    names : list of str, optional
        Candidate names for the warning.
    statistic : str, default="multi-scale MMD²"
        What ``mmd2`` is, for the reasons.

    Returns
    -------
    best : int
        The first of the lowest on ties. Where no scored candidate clears ``floor``, the one of
        highest memorisation ratio, with a :class:`~skflow.exceptions.MemorizationWarning`.
    reasons : list of str
        Why each candidate was or was not chosen.

    Examples
    --------
    >>> best, reasons = choose_copy_aware([0.01, 0.02, 0.05], [0.2, 0.9, 1.0])
    >>> best, reasons[0]
    (1, 'not chosen: memorisation ratio 0.2 < 0.5 (copies the support)')
    """
    mmd2 = np.asarray(mmd2, dtype=np.float64)
    memo = np.asarray(memorization, dtype=np.float64)
    if mmd2.shape != memo.shape or mmd2.ndim != 1 or mmd2.size == 0:
        raise ValueError(f"mmd2 and memorization must be 1-D of one length, got {mmd2.shape}.")
    scored = np.isfinite(mmd2)
    eligible = scored & ~(memo < floor)  # NaN memorisation: not held against it
    if eligible.any():
        best = int(np.flatnonzero(eligible)[np.argmin(mmd2[eligible])])
    else:
        best = int(np.flatnonzero(scored)[np.nanargmax(memo[scored])])
        name = names[best] if names is not None else f"candidate {best}"
        warnings.warn(
            f"every candidate copies the validation supports (memorisation ratio below "
            f"{floor:g}); chose the one that copies least, {name} ({memo[best]:.3g}). Add "
            "candidates with wider bandwidths or more rows per class.",
            MemorizationWarning,
            stacklevel=3,
        )
    return best, [_reason(i, best, mmd2, memo, floor, statistic) for i in range(mmd2.size)]
