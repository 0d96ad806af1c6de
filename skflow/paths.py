"""Probability paths and their schedules.

A path fixes how noise ``X_0 ~ N(0, I)`` and data ``X_1`` are interpolated,
``X_t = alpha_t X_1 + sigma_t X_0``, and therefore the conditional velocity a flow-matching
model regresses on. skflow implements the Gaussian optimal-transport (OT) path of Lipman et al.,
``alpha_t = t`` and ``sigma_t = 1 - (1 - sigma_min) t``; other paths can be added beside it with
the same methods.

All methods work on NumPy arrays and Torch tensors alike (plain arithmetic only) and accept ``t``
as a Python scalar or as an array broadcastable against the leading axis of ``x``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["OTPath"]


def _column(t: Any, x: Any) -> Any:
    """Reshape per-row times ``t`` of shape (n,) to (n, 1) so they broadcast against ``x``."""
    if hasattr(t, "ndim") and t.ndim == 1 and hasattr(x, "ndim") and x.ndim == 2:
        return t[:, None]
    return t


@dataclass(frozen=True)
class OTPath:
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
        s = self.sigma_min
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0.0 < float(s) < 1.0:
            raise ValueError(f"sigma_min must be a float in (0, 1), got {s!r}.")

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

    def bandwidth(self, t: Any) -> Any:
        """OT bandwidth ``h(t) = sigma_t / t`` of the rescaled KDE (infinite at ``t = 0``)."""
        return self.sigma(t) / t

    def sample_xt(self, x0: Any, x1: Any, t: Any) -> Any:
        """Conditional path sample ``x_t = t x_1 + sigma_t x_0``.

        Parameters
        ----------
        x0, x1 : array of shape (n, d)
            Noise and data end points.
        t : float or array of shape (n,)
            Times in [0, 1].

        Returns
        -------
        xt : array of shape (n, d)
        """
        tc = _column(t, x0)
        return tc * x1 + self.sigma(tc) * x0

    def target_velocity(self, xt: Any, x1: Any, t: Any) -> Any:
        """Conditional velocity ``u_t(x | x_1) = (x_1 - (1 - sigma_min) x) / sigma_t``.

        Along the conditional path this equals ``x_1 - (1 - sigma_min) x_0``, the regression
        target of flow matching.
        """
        tc = _column(t, xt)
        return (x1 - self.decay * xt) / self.sigma(tc)

    def conditional_target(self, x0: Any, x1: Any) -> Any:
        """Regression target of flow matching ``x_1 - (1 - sigma_min) x_0``.

        It equals :meth:`target_velocity` at ``x_t = sample_xt(x0, x1, t)`` for every ``t``,
        without the division by ``sigma_t`` (exact in floating point at late times).

        Parameters
        ----------
        x0, x1 : array of shape (..., d)
            Noise and data end points.

        Returns
        -------
        target : array of shape (..., d)

        Examples
        --------
        >>> import numpy as np
        >>> path = OTPath(sigma_min=0.5)
        >>> path.conditional_target(np.array([2.0]), np.array([3.0])).tolist()
        [2.0]
        """
        return x1 - self.decay * x0
