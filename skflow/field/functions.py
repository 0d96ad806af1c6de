"""The exact field as functions: one :class:`~skflow.field.NWField` per call.

Each ``nw_*`` function prepares the support (validation, centring, norms, engine choice) and
evaluates once, so it sees in-place changes of the support. To evaluate the field of one
support many times (an ODE solve), build an :class:`~skflow.field.NWField` once and call its
methods instead: besides the repeated preparation, a float32 call of a function reads the
support's radius back to the host (the float32 precision check), a device synchronisation on
CUDA at every call, where a prepared field reads it once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._validation import TIME_TOLERANCE
from ._coefficients import Bandwidth
from .prepared import NWField

__all__ = [
    "nw_logits",
    "nw_weights",
    "nw_local_mean",
    "nw_velocity",
    "nw_velocity_and_divergence",
    "nw_divergence",
    "nw_effective_sample_size",
    "nw_log_density",
]


def _field_function(name: str, method: str, doc: str) -> Callable[..., Any]:
    """The public function ``name``: one :class:`NWField` of ``support``, then ``method``."""

    def function(
        x: Any,
        support: Any,
        t: Any,
        *,
        sigma_min: float = 0.01,
        bandwidth: Bandwidth = "ot",
        projection: Any = None,
        chunk_size: int | None = None,
        support_chunk_size: int | None = None,
    ) -> Any:
        field = NWField(
            support,
            sigma_min=sigma_min,
            bandwidth=bandwidth,
            projection=projection,
            chunk_size=chunk_size,
            support_chunk_size=support_chunk_size,
            time_tolerance=TIME_TOLERANCE,  # functions: [0, 1] up to rounding
        )
        return getattr(field, method)(x, t)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    return function


nw_logits = _field_function(
    "nw_logits",
    "logits",
    """Logits of the NW weights, up to a per-row constant.

    Parameters
    ----------
    x : array of shape (n, d)
        Query points (states of the flow at time ``t``).
    support : array of shape (m, d)
        Support set.
    t : float or array of shape (n,)
        Times in [0, 1].
    sigma_min : float, default=0.01
        Noise level of the path at ``t = 1``.
    bandwidth : {"ot"} or float or callable, default="ot"
        See :func:`kernel_coefficients`.
    projection : array of shape (k, d), optional
        Weights computed from ``P x`` and ``P s_i`` (anisotropic kernel ``M = P^T P``).
    chunk_size : int, optional
        Queries per block; default keeps a block of logits near 64 MiB.
    support_chunk_size : int, optional
        Support rows per chunk: the support is streamed in chunks of this many rows (online
        log-sum-exp, no full-size copy of the support). Default: streaming is chosen
        automatically when ``m * max(d, k, 64)`` exceeds the block budget (``2**23``
        elements on the host, e.g. ``m > 131072`` in ``d = 64``), with chunks sized for the
        budget; the dense path otherwise. Both give the same result up to rounding.

    Returns
    -------
    logits : array of shape (n, m)
        ``-||P(x - t s_i)||^2 / (2 tau^2)`` plus a constant per row.

    Examples
    --------
    >>> import numpy as np
    >>> nw_logits(np.zeros((1, 2)), np.eye(2), 0.0)
    array([[0., 0.]])
    """,
)

nw_weights = _field_function(
    "nw_weights",
    "weights",
    """Nadaraya-Watson weights ``w_i(x, t)`` of the exact field.

    Parameters are those of :func:`nw_logits`.

    Returns
    -------
    weights : array of shape (n, m)
        Rows are probability vectors; uniform at ``t = 0``.

    Examples
    --------
    >>> import numpy as np
    >>> S = np.array([[0.0], [1.0]])
    >>> nw_weights(np.array([[0.9]]), S, 1.0, sigma_min=0.5).round(3)
    array([[0.168, 0.832]])
    """,
)

nw_local_mean = _field_function(
    "nw_local_mean",
    "local_mean",
    """Nadaraya-Watson local mean ``m(x, t) = sum_i w_i(x, t) s_i``.

    Parameters
    ----------
    x, support, t, sigma_min, bandwidth, projection, chunk_size, support_chunk_size
        See :func:`nw_logits`.

    Returns
    -------
    mean : array of shape (n, d)

    Examples
    --------
    >>> import numpy as np
    >>> nw_local_mean(np.zeros((1, 2)), np.array([[0.0, 0.0], [2.0, 4.0]]), 0.0)
    array([[1., 2.]])
    """,
)

nw_velocity = _field_function(
    "nw_velocity",
    "velocity",
    """Exact marginal velocity ``u_t(x) = (m(x, t) - (1 - sigma_min) x) / sigma_t``.

    Parameters
    ----------
    x : array of shape (n, d)
        States at time ``t``.
    support : array of shape (m, d)
        Support set.
    t : float or array of shape (n,)
        Times in [0, 1]; the field is finite at both ends.
    sigma_min, bandwidth, projection, chunk_size, support_chunk_size
        See :func:`nw_logits`.

    Returns
    -------
    velocity : array of shape (n, d)
        Same kind (NumPy/Torch), device and floating dtype as the inputs (float32 only when
        both are float32).

    Examples
    --------
    >>> import numpy as np
    >>> S = np.array([[1.0, 1.0]])
    >>> nw_velocity(np.zeros((1, 2)), S, 0.0)   # one point: straight line to it
    array([[1., 1.]])
    """,
)

nw_velocity_and_divergence = _field_function(
    "nw_velocity_and_divergence",
    "velocity_and_divergence",
    """Velocity and its exact divergence in one pass.

    ``div u_t(x) = (a(t) tr(P Cov_w(S) P^T ... ) - (1 - sigma_min) d) / sigma_t``; for the
    isotropic kernel ``a(t) tr Cov_w(S)`` with ``a = t / tau(t)^2``, ``Cov_w`` the
    ``w``-weighted covariance of the support. With a projection the trace becomes
    ``tr(P^T P Cov_w(S))``.

    Returns
    -------
    velocity : array of shape (n, d)
    divergence : array of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> v, div = nw_velocity_and_divergence(np.zeros((1, 3)), np.ones((1, 3)), 0.5)
    >>> round(float(div[0]), 4)   # one support point: -(1 - sigma_min) d / sigma_t
    -5.8812
    """,
)

nw_divergence = _field_function(
    "nw_divergence",
    "divergence",
    """Exact divergence of the NW velocity field (no Hutchinson estimator).

    Returns
    -------
    divergence : array of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> float(nw_divergence(np.zeros((1, 2)), np.ones((1, 2)), 0.0)[0])
    -1.98
    """,
)

nw_effective_sample_size = _field_function(
    "nw_effective_sample_size",
    "effective_sample_size",
    """Kish effective sample size ``1 / sum_i w_i^2`` of the NW weights at ``(x, t)``.

    Computed from log-sum-exps, ``exp(2 lse(l) - lse(2 l))``, so it is stable when the weights
    collapse onto one support point.

    Returns
    -------
    n_eff : array of shape (n,)
        Equal to ``m`` at ``t = 0``, tending to 1 as the kernel collapses.

    Examples
    --------
    >>> import numpy as np
    >>> float(nw_effective_sample_size(np.zeros((1, 2)), np.eye(2), 0.0)[0])
    2.0
    """,
)


def nw_log_density(
    x: Any,
    support: Any,
    t: float,
    *,
    sigma_min: float = 0.01,
    chunk_size: int | None = None,
    support_chunk_size: int | None = None,
) -> Any:
    """Log-density of the path marginal ``p_t = (1/m) sum_i N(t s_i, sigma_t^2 I)`` at ``x``.

    At ``t = 1`` this is the log-density of the Gaussian KDE of the support with bandwidth
    ``sigma_min``: the terminal law of the exactly integrated flow.

    Parameters
    ----------
    x : array of shape (n, d)
    support : array of shape (m, d)
    t : float
        One time in [0, 1].
    sigma_min : float, default=0.01
    chunk_size : int, optional
        Queries per block.
    support_chunk_size : int, optional
        Support rows per block; default: the whole support when an ``(m, d)`` block fits
        the budget (``2**23`` elements), else chunks of ``2**23 // d`` rows combined with
        ``logaddexp``.

    Returns
    -------
    log_density : array of shape (n,)
        Computed in float64; returned in float32 when ``x`` and ``support`` are float32,
        float64 otherwise (the dtype rule of every function here).

    Examples
    --------
    >>> import numpy as np
    >>> round(float(nw_log_density(np.zeros((1, 1)), np.zeros((1, 1)), 0.0)[0]), 6)
    -0.918939
    """
    field = NWField(
        support,
        sigma_min=sigma_min,
        chunk_size=chunk_size,
        support_chunk_size=support_chunk_size,
        time_tolerance=TIME_TOLERANCE,
    )
    return field.log_density(x, t)
