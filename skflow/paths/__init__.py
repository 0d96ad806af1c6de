"""Probability paths and their schedules.

A path fixes how noise ``X_0 ~ N(0, I)`` and data ``X_1`` are interpolated,
``X_t = alpha_t X_1 + sigma_t X_0``, and therefore the conditional velocity a flow-matching
model regresses on and the exact marginal field of a support set.
:class:`GaussianPath` (:mod:`skflow.paths.base`) writes every formula once from the schedule
``alpha_t, sigma_t`` and its derivatives; a schedule is one subclass. skflow ships the
Gaussian optimal-transport path :class:`OTPath` (the default everywhere) and the cosine
schedule :class:`CosinePath`.

This is the only place ``sigma_t`` is written: the field, the training loss, the networks,
the task sources and the estimators receive a path object and ask it for ``sigma_t``,
conditional samples, regression targets and the velocity of a local mean.

Examples
--------
>>> from skflow.paths import OTPath, as_path
>>> as_path(None, 0.05) == OTPath(0.05)
True
"""

from __future__ import annotations

from typing import Any

from .._validation import check_sigma_min
from .base import GaussianPath
from .cosine import CosinePath
from .ot import OTPath

__all__ = ["CosinePath", "GaussianPath", "OTPath", "as_path"]


def as_path(path: GaussianPath | None = None, sigma_min: Any = 0.01) -> GaussianPath:
    """The path a component uses: ``path`` itself, or the OT path of ``sigma_min`` when None.

    The one place where a default path is built from a ``sigma_min``: the public entry
    points (estimators, :class:`skflow.field.NWField`, the Torch modules) take an optional
    ``path`` next to their ``sigma_min`` and resolve them here, once.

    Parameters
    ----------
    path : GaussianPath or None, default=None
    sigma_min : float, default=0.01
        Terminal noise of the default :class:`OTPath`; ignored when ``path`` is given.

    Returns
    -------
    path : GaussianPath

    Examples
    --------
    >>> as_path(None, 0.1)
    OTPath(sigma_min=0.1)
    """
    if path is None:
        return OTPath(check_sigma_min(sigma_min))
    if not isinstance(path, GaussianPath):
        raise TypeError(f"path must be a GaussianPath (e.g. OTPath), got {type(path).__name__}.")
    return path
