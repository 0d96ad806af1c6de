"""Warnings and exceptions of skflow.

Every parameter mistake raises :class:`InvalidParameterError` (a subclass of both
``ValueError`` and ``TypeError``, like scikit-learn's own parameter errors).

Examples
--------
>>> import warnings
>>> from skflow.exceptions import AccuracyWarning, InvalidParameterError
>>> issubclass(AccuracyWarning, UserWarning)
True
>>> issubclass(InvalidParameterError, ValueError) and issubclass(InvalidParameterError, TypeError)
True
"""

from __future__ import annotations

from ._validation import InvalidParameterError

__all__ = [
    "AccuracyWarning",
    "InvalidParameterError",
    "MemorizationWarning",
    "PriorCardError",
    "SupportSizeWarning",
]


class AccuracyWarning(UserWarning):
    """A numerical result did not reach the accuracy that was requested.

    Raised, for example, by :meth:`skflow.NWFlowSampler.score_samples` when the error
    estimate of the adaptive change-of-variables integration exceeds ``density_max_error``.
    The result is still returned; tighten the tolerances (``density_rtol``, ``density_atol``)
    or rescale the data.
    """


class MemorizationWarning(UserWarning):
    """A sampler's samples will be near-copies of its support.

    Issued by :meth:`skflow.NWFlowSampler.fit` when ``sigma_min`` (the bandwidth of the
    terminal KDE, in the units of the data) is tiny against the spacing of the support: a
    sample then sits within ``sigma_min * sqrt(d)`` of one support point, far closer than any
    real new point would. Standardise the data (``StandardScaler``) or raise ``sigma_min``.
    """


class PriorCardError(ValueError):
    """A prior's model card (or the file named as one) that cannot be used.

    Raised by :meth:`skflow.LearnedFlowSampler.from_pretrained` when the ``NAME.json`` it is
    asked for is not valid JSON, is not a model card, or breaks the card's format (a missing
    field, a wrong type, a non-finite number, a value outside its allowed set): the message
    names the file, the field and the fix. A ``ValueError``, so code catching that keeps
    working.
    """


class SupportSizeWarning(UserWarning):
    """A support has a number of rows outside the range a prior was trained on.

    Issued when a sampler loaded by :meth:`skflow.LearnedFlowSampler.from_pretrained` is
    given a support of fewer or more rows than its card's ``support_range_`` (e.g. 500 rows
    for a prior trained on 2 to 100): its samples there were never trained for. Fine-tune the
    prior on your data (``prior.fit(X, y)``) or train a sampler for it
    (``LearnedFlowSampler().fit(X, y)``).
    """
