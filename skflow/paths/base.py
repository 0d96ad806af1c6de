"""The Gaussian probability path ``X_t = alpha_t X_1 + sigma_t X_0``, whatever its schedule.

A path fixes how noise ``X_0 ~ N(0, I)`` and data ``X_1`` are interpolated, and therefore the
conditional velocity a flow-matching model regresses on and the exact marginal field of a
support set. :class:`GaussianPath` writes every formula once in terms of the schedule
``alpha_t, sigma_t`` and its derivatives; a subclass only gives those four functions (and may
override a formula whose generic form rounds differently, as :class:`~skflow.paths.OTPath`
does).

For the empirical measure of a support ``S = {s_i}`` the marginal field is

    u_t(x) = (gain_t E_w[s] - decay_t x) / sigma_t,
    gain_t = d_alpha_t sigma_t - alpha_t d_sigma_t,   decay_t = -d_sigma_t,

with Nadaraya-Watson weights ``w = softmax_i(-||x - alpha_t s_i||^2 / (2 sigma_t^2))``: a
Gaussian kernel at ``x / alpha_t`` with bandwidth ``h(t) = sigma_t / alpha_t``.

All methods work on NumPy arrays and Torch tensors alike and accept ``t`` as a Python scalar
or an array: a 1-D ``t`` of shape (n,) against a 2-D ``x`` of shape (n, d) is one time per
row; any other ``t`` broadcasts against ``x`` as it is (batched times of shape (B, n) against
``x`` of shape (B, n, d) are passed as ``t[..., None]``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._array import array_module

__all__ = ["GaussianPath", "column", "namespace_of"]

#: Halvings of [0, 1] in the generic :meth:`GaussianPath.time_of_bandwidth` (below float64's
#: resolution of a time).
_BISECTIONS = 60


def column(t: Any, x: Any) -> Any:
    """Reshape per-row times ``t`` of shape (n,) to (n, 1) so they broadcast against ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> column(np.zeros(3), np.zeros((3, 2))).shape
    (3, 1)
    """
    if hasattr(t, "ndim") and t.ndim == 1 and hasattr(x, "ndim") and x.ndim == 2:
        return t[:, None]
    return t


def namespace_of(t: Any) -> Any:
    """``math`` for Python scalars, ``torch`` for tensors, ``numpy`` otherwise: where a
    schedule finds its ``sin``, ``cos``, ``exp`` (so a float time stays a float).

    Examples
    --------
    >>> namespace_of(0.5).__name__, namespace_of([0.5]).__name__
    ('math', 'numpy')
    """
    if isinstance(t, (int, float)) and not isinstance(t, np.generic):
        return math
    return array_module(t)


class GaussianPath:
    """Base class of the paths ``X_t = alpha_t X_1 + sigma_t X_0`` (noise at ``t = 0``).

    A subclass defines :meth:`alpha`, :meth:`sigma`, :meth:`d_alpha`, :meth:`d_sigma` and a
    ``sigma_min`` attribute, the terminal noise ``sigma_1 > 0`` (the bandwidth of the KDE
    that the exact flow of a support samples at ``t = 1``, around ``alpha_1 s_i``). The
    schedule must satisfy ``alpha_0 = 0``, ``sigma_0 = 1`` (the flow starts from
    ``N(0, I)``), ``sigma_t > 0`` on [0, 1] and ``h(t) = sigma_t / alpha_t`` decreasing
    (so :meth:`time_of_bandwidth` is its inverse). Everything else (conditional samples,
    regression targets, the field's coefficients, the marginal density) is derived here.

    Subclasses should be immutable and hashable (e.g. frozen dataclasses): fields cache
    coefficients per path and estimators store paths as parameters.

    Examples
    --------
    >>> from skflow.paths import OTPath
    >>> isinstance(OTPath(0.01), GaussianPath)
    True
    """

    sigma_min: float

    # -- the schedule (a subclass defines these) --------------------------------------------
    def alpha(self, t: Any) -> Any:
        """Signal coefficient ``alpha_t``."""
        raise NotImplementedError

    def sigma(self, t: Any) -> Any:
        """Noise coefficient ``sigma_t``."""
        raise NotImplementedError

    def d_alpha(self, t: Any) -> Any:
        """Time derivative of ``alpha_t``."""
        raise NotImplementedError

    def d_sigma(self, t: Any) -> Any:
        """Time derivative of ``sigma_t``."""
        raise NotImplementedError

    # -- derived quantities -----------------------------------------------------------------
    def velocity_coefficients(self, t: Any) -> tuple[Any, Any]:
        """``(gain_t, decay_t)`` of the field ``u = (gain_t m - decay_t x) / sigma_t``.

        ``gain_t = d_alpha_t sigma_t - alpha_t d_sigma_t`` and ``decay_t = -d_sigma_t``, for
        ``m`` the local mean ``E[x_1 | x_t = x]``. A path whose coefficients are constant
        returns Python floats (the field then skips a multiplication).
        """
        d_sigma = self.d_sigma(t)
        return self.d_alpha(t) * self.sigma(t) - self.alpha(t) * d_sigma, -d_sigma

    def bandwidth(self, t: Any) -> Any:
        """NW bandwidth ``h(t) = sigma_t / alpha_t`` at ``x / alpha_t`` (inf at ``t = 0``)."""
        return self.sigma(t) / self.alpha(t)

    def time_of_bandwidth(self, h: Any) -> Any:
        """Inverse of :meth:`bandwidth`: the time with ``h(t) = h`` (by bisection on [0, 1]).

        Bandwidths below ``h(1)`` give ``t = 1`` and ``h = inf`` gives ``t = 0`` (to float64
        resolution). NumPy arrays, Torch tensors and floats alike.
        """
        if namespace_of(h) is math:  # (a Python bool's ~ is not its negation)
            return float(self.time_of_bandwidth(np.float64(h)))
        xp = namespace_of(h)
        h = h if xp is not np else np.asarray(h, dtype=np.float64)
        lo, hi = xp.zeros_like(h), xp.ones_like(h)
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            above = self.bandwidth(mid) > h  # h decreases: the time sought is later
            lo, hi = mid * above + lo * ~above, hi * above + mid * ~above
        return 0.5 * (lo + hi)

    def sample_conditional(self, x0: Any, x1: Any, t: Any) -> Any:
        """Conditional path sample ``x_t = alpha_t x_1 + sigma_t x_0``.

        Parameters
        ----------
        x0, x1 : array or tensor of shape (n, d) or (..., d)
            Noise and data end points.
        t : float or array of shape (n,) or broadcastable to ``x0``
            Times in [0, 1]. A 1-D ``t`` against 2-D ``x0`` is one time per row; otherwise
            ``t`` broadcasts as is (give batched times as ``t[..., None]``).

        Returns
        -------
        xt : array or tensor of the shape of ``x0``

        Examples
        --------
        >>> import numpy as np
        >>> from skflow.paths import OTPath
        >>> path = OTPath(sigma_min=0.5)
        >>> path.sample_conditional(np.ones((2, 1)), np.full((2, 1), 4.0),
        ...                         np.array([0.0, 1.0])).ravel().tolist()
        [1.0, 4.5]
        """
        tc = column(t, x0)
        return self.alpha(tc) * x1 + self.sigma(tc) * x0

    def conditional_velocity(self, x0: Any, x1: Any, t: Any = None) -> Any:
        """Regression target of flow matching ``d_alpha_t x_1 + d_sigma_t x_0``.

        It equals :meth:`target_velocity` at ``x_t = sample_conditional(x0, x1, t)``
        without the division by ``sigma_t``. ``t`` broadcasts as in
        :meth:`sample_conditional`; a path whose target does not depend on ``t`` (the OT
        path) accepts ``t=None``.
        """
        if t is None:
            raise ValueError(f"{type(self).__name__}'s conditional velocity depends on t.")
        tc = column(t, x0)
        return self.d_alpha(tc) * x1 + self.d_sigma(tc) * x0

    def target_velocity(self, xt: Any, x1: Any, t: Any) -> Any:
        """Conditional velocity ``u_t(x | x_1)``: :meth:`velocity_from_mean` with mean ``x_1``."""
        return self.velocity_from_mean(x1, xt, t)

    def velocity_from_mean(self, mean: Any, x: Any, t: Any) -> Any:
        """Marginal velocity ``u_t(x) = (gain_t m_t(x) - decay_t x) / sigma_t`` of a local mean.

        ``m_t(x) = E[x_1 | x_t = x]`` (for a support set: the Nadaraya-Watson local mean)
        determines the velocity of the path; this is the affine map that turns one into the
        other.

        Parameters
        ----------
        mean, x : array or tensor of shape (n, d) or (..., d)
            Local means and the points they belong to.
        t : float or array of shape (n,) or broadcastable to ``x``
            Times in [0, 1]; broadcast as in :meth:`sample_conditional`.

        Returns
        -------
        u : array or tensor of the shape of ``x``

        Examples
        --------
        >>> import numpy as np
        >>> from skflow.paths import OTPath
        >>> path = OTPath(sigma_min=0.5)  # gain 1, decay 1 - sigma_min
        >>> path.velocity_from_mean(np.array([[3.0]]), np.array([[2.0]]), 0.0).tolist()
        [[2.0]]
        """
        tc = column(t, x)
        gain, decay = self.velocity_coefficients(tc)
        return (gain * mean - decay * x) / self.sigma(tc)

    def mean_from_velocity(self, velocity: Any, x: Any, t: Any) -> Any:
        """Inverse of :meth:`velocity_from_mean`: ``m = (sigma_t u + decay_t x) / gain_t``.

        Bounded where the velocity is not (it stays in the hull of the data as ``t -> 1``).

        Examples
        --------
        >>> import numpy as np
        >>> from skflow.paths import OTPath
        >>> path = OTPath(sigma_min=0.5)
        >>> path.mean_from_velocity(np.array([[2.0]]), np.array([[2.0]]), 0.0).tolist()
        [[3.0]]
        """
        tc = column(t, x)
        gain, decay = self.velocity_coefficients(tc)
        return (self.sigma(tc) * velocity + decay * x) / gain

    #: Former names, kept so code written against them keeps working.
    def sample_xt(self, x0: Any, x1: Any, t: Any) -> Any:
        """Former name of :meth:`sample_conditional`."""
        return self.sample_conditional(x0, x1, t)

    def conditional_target(self, x0: Any, x1: Any, t: Any = None) -> Any:
        """Former name of :meth:`conditional_velocity`."""
        return self.conditional_velocity(x0, x1, t)
