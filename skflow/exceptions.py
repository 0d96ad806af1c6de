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

__all__ = ["AccuracyWarning", "InvalidParameterError", "MemorizationWarning"]


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
