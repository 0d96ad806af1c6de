"""A trigonometric (cosine) schedule with a noise floor.

``alpha_t = sin(pi t / 2)`` and ``sigma_t = 1 - (1 - sigma_min)(1 - cos(pi t / 2))``: the
variance-preserving interpolant ``(sin, cos)`` of stochastic-interpolant and diffusion models,
its noise lifted so that ``sigma_1 = sigma_min > 0`` (``alpha_1 = 1``). The exact flow of a
support then ends, like the OT flow, at the Gaussian KDE ``(1/m) sum_i N(s_i, sigma_min^2 I)``
but moves along curved conditional paths, slow at both ends (``d_alpha_1 = 0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._validation import check_sigma_min
from .base import GaussianPath, namespace_of

__all__ = ["CosinePath"]

_HALF_PI = 0.5 * math.pi


@dataclass(frozen=True)
class CosinePath(GaussianPath):
    """Cosine path ``X_t = sin(pi t / 2) X_1 + sigma_t X_0`` with a noise floor ``sigma_min``.

    Parameters
    ----------
    sigma_min : float, default=0.01
        Noise level left at ``t = 1``; must lie in (0, 1). The bandwidth of the Gaussian KDE
        that the exact flow of a support set samples at ``t = 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.paths import CosinePath
    >>> path = CosinePath(sigma_min=0.05)
    >>> float(path.alpha(0.0)), float(path.alpha(1.0))
    (0.0, 1.0)
    >>> float(path.sigma(0.0)), round(float(path.sigma(1.0)), 12)
    (1.0, 0.05)
    >>> round(float(path.time_of_bandwidth(path.bandwidth(0.3))), 12)
    0.3
    """

    sigma_min: float = 0.01

    def __post_init__(self) -> None:
        check_sigma_min(self.sigma_min)

    def alpha(self, t: Any) -> Any:
        """Signal coefficient ``alpha_t = sin(pi t / 2)``."""
        return namespace_of(t).sin(_HALF_PI * t)

    def sigma(self, t: Any) -> Any:
        """Noise coefficient ``sigma_t = 1 - 2 (1 - sigma_min) sin^2(pi t / 4)``.

        ``1 - cos`` written as ``2 sin^2`` of the half angle: exact at ``t = 0`` and without
        cancellation at early times.
        """
        half = namespace_of(t).sin(0.5 * _HALF_PI * t)
        return 1.0 - 2.0 * (1.0 - self.sigma_min) * half * half

    def d_alpha(self, t: Any) -> Any:
        """``d alpha_t / dt = (pi / 2) cos(pi t / 2)``."""
        return _HALF_PI * namespace_of(t).cos(_HALF_PI * t)

    def d_sigma(self, t: Any) -> Any:
        """``d sigma_t / dt = -(1 - sigma_min) (pi / 2) sin(pi t / 2)``."""
        return -(1.0 - self.sigma_min) * _HALF_PI * namespace_of(t).sin(_HALF_PI * t)
