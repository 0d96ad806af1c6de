"""The Gaussian optimal-transport (OT) path of Lipman et al.

``alpha_t = t`` and ``sigma_t = 1 - (1 - sigma_min) t``: straight conditional paths, a target
``x_1 - (1 - sigma_min) x_0`` independent of ``t``, and the closed forms of the bandwidth's
inverse and of the field's affine map (``gain_t = 1``, ``decay_t = 1 - sigma_min``), which
this class writes directly rather than through the generic formulae of
:class:`~skflow.paths.GaussianPath` (they would round differently).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._validation import check_sigma_min
from .base import GaussianPath

__all__ = ["OTPath"]


@dataclass(frozen=True)
class OTPath(GaussianPath):
    """Gaussian optimal-transport path ``X_t = t X_1 + sigma_t X_0``.

    Parameters
    ----------
    sigma_min : float, default=0.01
        Noise level left at ``t = 1``; must lie in (0, 1). It is also the bandwidth of the
        Gaussian KDE that the exact flow of a support set samples at ``t = 1``.

    Examples
    --------
    >>> from skflow.paths import OTPath
    >>> path = OTPath(sigma_min=0.01)
    >>> float(path.sigma(0.0)), round(float(path.sigma(1.0)), 12)
    (1.0, 0.01)
    >>> round(float(path.bandwidth(0.5)), 4)  # h(t) = sigma_t / t
    1.01
    """

    sigma_min: float = 0.01

    def __post_init__(self) -> None:
        check_sigma_min(self.sigma_min)

    @property
    def decay(self) -> float:
        """Slope ``1 - sigma_min`` of ``sigma_t``; the velocity contracts ``x`` at this rate."""
        return 1.0 - float(self.sigma_min)

    def alpha(self, t: Any) -> Any:
        """Signal coefficient ``alpha_t = t``."""
        return t

    def sigma(self, t: Any) -> Any:
        """Noise coefficient ``sigma_t = 1 - (1 - sigma_min) t``."""
        return 1.0 - self.decay * t

    def d_alpha(self, t: Any) -> Any:
        """``d alpha_t / dt = 1``."""
        return 1.0

    def d_sigma(self, t: Any) -> Any:
        """``d sigma_t / dt = -(1 - sigma_min)``."""
        return -self.decay

    def velocity_coefficients(self, t: Any) -> tuple[float, float]:
        """``(gain_t, decay_t) = (1, 1 - sigma_min)``: constant (exactly 1, not rounded)."""
        return 1.0, self.decay

    def time_of_bandwidth(self, h: Any) -> Any:
        """Inverse of :meth:`bandwidth`: the time ``t = 1 / (h + 1 - sigma_min)`` of ``h(t) = h``.

        Examples
        --------
        >>> path = OTPath(sigma_min=0.5)
        >>> float(path.time_of_bandwidth(path.bandwidth(0.25)))
        0.25
        """
        return 1.0 / (h + self.decay)

    def conditional_velocity(self, x0: Any, x1: Any, t: Any = None) -> Any:
        """Regression target of flow matching ``x_1 - (1 - sigma_min) x_0``.

        It equals :meth:`target_velocity` at ``x_t = sample_conditional(x0, x1, t)`` for
        every ``t``, without the division by ``sigma_t`` (exact in floating point at late
        times).

        Parameters
        ----------
        x0, x1 : array or tensor of shape (..., d)
            Noise and data end points.
        t : ignored
            The OT target is the same at every time.

        Returns
        -------
        target : array or tensor of shape (..., d)

        Examples
        --------
        >>> import numpy as np
        >>> path = OTPath(sigma_min=0.5)
        >>> path.conditional_velocity(np.array([2.0]), np.array([3.0])).tolist()
        [2.0]
        """
        return x1 - self.decay * x0
