"""Warnings and exceptions of skflow.

Examples
--------
>>> import warnings
>>> from skflow.exceptions import AccuracyWarning
>>> issubclass(AccuracyWarning, UserWarning)
True
"""

from __future__ import annotations

__all__ = ["AccuracyWarning"]


class AccuracyWarning(UserWarning):
    """A numerical result did not reach the accuracy that was requested.

    Raised, for example, by :meth:`skflow.NWFlowSampler.score_samples` when the error
    estimate of the adaptive change-of-variables integration exceeds ``density_max_error``.
    The result is still returned; tighten the tolerances (``density_rtol``, ``density_atol``)
    or rescale the data.
    """
