"""The exact velocity field of a support set: a Nadaraya-Watson smoother.

For the OT path ``X_t = t X_1 + sigma_t X_0`` and the empirical target measure of a support
``S = {s_1, ..., s_m}``, the marginal velocity is

.. math::

    w_i(x, t) = \\operatorname{softmax}_i\\Big(-\\frac{\\|x - t s_i\\|^2}{2 \\sigma_t^2}\\Big),
    \\qquad u_t(x) = \\frac{\\sum_i w_i s_i - (1 - \\sigma_{\\min}) x}{\\sigma_t}.

The weights are Gaussian-kernel weights at ``x / t`` with bandwidth ``h(t) = sigma_t / t``; the
sum is the Nadaraya-Watson local mean. This module computes the form above, which is finite at
``t = 0`` (uniform weights there), through two matrix products per query chunk:

    logits_i = a(t) <x, s_i> - b(t) ||s_i||^2,   a = t / tau^2,  b = t^2 / (2 tau^2),

where ``tau(t) = t h(t)`` is the kernel width in x-space (``tau = sigma_t`` for the OT
bandwidth); the term ``||x||^2`` is constant over ``i`` and cancels in the softmax. Support
and queries are centred on the support mean first (``x - t mu``, ``s - mu``), which leaves the
weights unchanged and keeps the cancellation between the two terms small. Memory is
``O(chunk_size * m + m * d)``, never ``O(n * m * d)``.

Every function accepts NumPy arrays or Torch tensors (on any device) and returns the same kind.
``t`` is a scalar or an array of shape ``(n,)`` (one time per query).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._backend import get_namespace, is_torch
from .paths import OTPath

__all__ = [
    "kernel_coefficients",
    "nw_logits",
    "nw_weights",
    "nw_local_mean",
    "nw_velocity",
    "nw_divergence",
    "nw_velocity_and_divergence",
    "nw_effective_sample_size",
    "nw_log_density",
    "default_chunk_size",
]

Bandwidth = str | float | Callable[[np.ndarray], np.ndarray]

# Budget for one (chunk, m) block of logits, in elements: 2**23 float64 values = 64 MiB.
_BLOCK_ELEMENTS = 2**23


def default_chunk_size(n_support: int, budget: int = _BLOCK_ELEMENTS) -> int:
    """Number of queries per block so that a ``(chunk, m)`` logits block fits ``budget``."""
    return int(max(1, budget // max(1, n_support)))


def _check_bandwidth(bandwidth: Any) -> None:
    if callable(bandwidth) or bandwidth == "ot":
        return
    if isinstance(bandwidth, str) or isinstance(bandwidth, bool):
        raise ValueError(
            f"bandwidth must be 'ot', a positive float or a callable t -> h(t), got {bandwidth!r}."
        )
    try:
        value = float(bandwidth)
    except (TypeError, ValueError):
        raise TypeError(
            f"bandwidth must be 'ot', a positive float or a callable t -> h(t), got {bandwidth!r}."
        ) from None
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"bandwidth must be a positive finite float, got {bandwidth!r}.")


def _times_to_numpy(t: Any) -> np.ndarray:
    """Times as a float64 NumPy array (scalar or (n,)), validated to lie in [0, 1]."""
    if is_torch(t):
        t = t.detach().cpu().numpy()
    t_arr = np.asarray(t, dtype=np.float64)
    if t_arr.ndim > 1:
        raise ValueError(
            f"t must be a scalar or a 1-D array of per-query times, got {t_arr.shape}."
        )
    if not np.all(np.isfinite(t_arr)) or np.any(t_arr < 0.0) or np.any(t_arr > 1.0):
        raise ValueError("t must lie in [0, 1] (finite); got values outside that interval.")
    return t_arr


def kernel_coefficients(
    t: Any, *, sigma_min: float = 0.01, bandwidth: Bandwidth = "ot"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients of the logits ``a <x, s> - b ||s||^2`` and the path's ``sigma_t``.

    Parameters
    ----------
    t : float or array-like of shape (n,)
        Times in [0, 1].
    sigma_min : float, default=0.01
        Noise level of the OT path at ``t = 1``.
    bandwidth : {"ot"} or float or callable, default="ot"
        ``"ot"`` uses the exact ``h(t) = sigma_t / t``; a positive float ``c`` uses ``c h(t)``;
        a callable maps times (float64 array) to bandwidths ``h(t)`` (in the rescaled ``x / t``
        coordinates). At ``t = 0`` the weights are uniform for every bandwidth, since
        ``x - 0 * s_i`` does not depend on ``i``.

    Returns
    -------
    a, b, sigma_t : ndarray of the shape of ``t``
        Query scale, key-bias scale and noise level, in float64.

    Examples
    --------
    >>> a, b, s = kernel_coefficients(0.5, sigma_min=0.01)
    >>> round(float(a), 4), round(float(b), 4), round(float(s), 3)
    (1.9604, 0.4901, 0.505)
    """
    _check_bandwidth(bandwidth)
    t_arr = _times_to_numpy(t)
    path = OTPath(sigma_min)
    sigma_t = path.sigma(t_arr)
    if callable(bandwidth):
        safe_t = np.where(t_arr > 0, t_arr, 1.0)
        h = np.asarray(bandwidth(safe_t), dtype=np.float64)
        if h.shape != safe_t.shape:
            h = np.broadcast_to(h, safe_t.shape)
        if not np.all(h > 0):
            raise ValueError("bandwidth(t) must return positive values.")
        with np.errstate(over="ignore", divide="ignore"):
            a = np.where(t_arr > 0, 1.0 / (safe_t * h**2), 0.0)
            b = np.where(t_arr > 0, 0.5 / h**2, 0.0)
    else:
        scale = 1.0 if bandwidth == "ot" else float(bandwidth)
        tau2 = (scale * sigma_t) ** 2
        a = t_arr / tau2
        b = 0.5 * t_arr**2 / tau2
    return a, b, sigma_t


def _prepare(x: Any, support: Any) -> tuple[Any, Any, Any]:
    """Check shapes and bring ``x`` and ``support`` to a common floating dtype."""
    xp = get_namespace(x, support)
    if xp.name == "numpy":
        x = np.asarray(x)
        support = np.asarray(support)
    if x.ndim != 2 or support.ndim != 2:
        raise ValueError(
            f"x and support must be 2-D arrays (n, d) and (m, d); got {tuple(x.shape)} and "
            f"{tuple(support.shape)}."
        )
    if support.shape[0] == 0:
        raise ValueError("support is empty: at least one support point is required.")
    if x.shape[1] != support.shape[1]:
        raise ValueError(
            f"x has {x.shape[1]} features but support has {support.shape[1]} features."
        )
    if xp.name == "numpy":
        dtype = (
            np.float32 if (x.dtype == np.float32 and support.dtype == np.float32) else np.float64
        )
        x = x.astype(dtype, copy=False)
        support = support.astype(dtype, copy=False)
    else:
        torch = xp.torch
        both32 = x.dtype == torch.float32 and support.dtype == torch.float32
        dtype = torch.float32 if both32 else torch.float64
        x = x.to(dtype)
        support = support.to(device=x.device, dtype=dtype)
    return xp, x, support


def _as_column(values: np.ndarray, xp: Any, like: Any, n: int) -> Any:
    """Coefficient(s) as a scalar float or an (n, 1) array of the namespace of ``like``."""
    if values.ndim == 0:
        return float(values)
    if values.shape[0] != n:
        raise ValueError(f"t has {values.shape[0]} entries but x has {n} rows.")
    return xp.asarray(values.reshape(-1, 1), like)


def _slice(c: Any, start: int, stop: int) -> Any:
    return c if isinstance(c, float) else c[start:stop]


class _Geometry:
    """Centred support, its squared norms and the (optional) projection used for the weights.

    The weights see ``P x`` and ``P s_i`` (Mahalanobis metric ``P^T P``); the values stay
    ``s_i`` in input space.
    """

    def __init__(self, xp, support, projection):
        self.xp = xp
        self.mean = xp.mean(support, axis=0, keepdims=True)
        self.values = support - self.mean
        if projection is None:
            self.proj = None
            self.keys = self.values
        else:
            proj = projection if xp.name == "torch" else np.asarray(projection)
            proj = xp.asarray(proj, self.values)
            if proj.ndim != 2 or proj.shape[1] != support.shape[1]:
                raise ValueError(
                    f"projection must have shape (k, {support.shape[1]}), got {tuple(proj.shape)}."
                )
            self.proj = proj
            self.keys = self.values @ proj.T
        self.sq_norms = xp.sum(self.keys * self.keys, axis=1)[None, :]

    def queries(self, x_chunk, t_chunk):
        xc = x_chunk - t_chunk * self.mean
        return xc if self.proj is None else xc @ self.proj.T


class _Problem:
    """Validated inputs of one field evaluation: queries, support geometry and coefficients."""

    def __init__(self, x, support, t, *, sigma_min, bandwidth, projection, chunk_size):
        self.xp, self.x, support = _prepare(x, support)
        a, b, sigma_t = kernel_coefficients(t, sigma_min=sigma_min, bandwidth=bandwidth)
        n = self.x.shape[0]
        self.geom = _Geometry(self.xp, support, projection)
        self.t = _as_column(_times_to_numpy(t), self.xp, self.x, n)
        self.a = _as_column(a, self.xp, self.x, n)
        self.b = _as_column(b, self.xp, self.x, n)
        self.sigma_t = _as_column(sigma_t, self.xp, self.x, n)
        self.decay = 1.0 - float(sigma_min)
        self.step = chunk_size or default_chunk_size(support.shape[0])

    def chunks(self):
        """Yield ``(start, stop, logits)`` over query blocks: the only O(n m) work."""
        g = self.geom
        for start in range(0, self.x.shape[0], self.step):
            stop = min(self.x.shape[0], start + self.step)
            q = g.queries(self.x[start:stop], _slice(self.t, start, stop))
            logits = _slice(self.a, start, stop) * (q @ g.keys.T)
            yield start, stop, logits - _slice(self.b, start, stop) * g.sq_norms

    def velocity(self, centred_mean):
        return (centred_mean + self.geom.mean - self.decay * self.x) / self.sigma_t


def nw_logits(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
) -> Any:
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

    Returns
    -------
    logits : array of shape (n, m)
        ``-||P(x - t s_i)||^2 / (2 tau^2)`` plus a constant per row.

    Examples
    --------
    >>> import numpy as np
    >>> nw_logits(np.zeros((1, 2)), np.eye(2), 0.0)
    array([[0., 0.]])
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=None,
    )
    return prob.xp.concat([logits for _, _, logits in prob.chunks()], axis=0)


def nw_weights(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
) -> Any:
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
    array([[0.105, 0.895]])
    """
    logits = nw_logits(
        x, support, t, sigma_min=sigma_min, bandwidth=bandwidth, projection=projection
    )
    return get_namespace(logits).softmax(logits, axis=1)


def _reduce(prob, *, want_second, values=None):
    """Local mean (n, d) of ``values`` (centred support by default) and, optionally,
    ``E_w ||values||^2`` (n,), in one pass over query chunks."""
    xp = prob.xp
    values = prob.geom.values if values is None else values
    v2 = xp.sum(values * values, axis=1) if want_second else None
    means, seconds = [], []
    for _, _, logits in prob.chunks():
        w = xp.softmax(logits, axis=1)
        means.append(w @ values)
        if want_second:
            seconds.append(w @ v2)
    mean = xp.concat(means, axis=0)
    return mean, (xp.concat(seconds, axis=0) if want_second else None)


def nw_local_mean(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
    chunk_size: int | None = None,
) -> Any:
    """Nadaraya-Watson local mean ``m(x, t) = sum_i w_i(x, t) s_i``.

    Parameters
    ----------
    x, support, t, sigma_min, bandwidth, projection
        See :func:`nw_logits`.
    chunk_size : int, optional
        Queries per block; default keeps a block of logits near 64 MiB.

    Returns
    -------
    mean : array of shape (n, d)

    Examples
    --------
    >>> import numpy as np
    >>> nw_local_mean(np.zeros((1, 2)), np.array([[0.0, 0.0], [2.0, 4.0]]), 0.0)
    array([[1., 2.]])
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
    )
    centred, _ = _reduce(prob, want_second=False)
    return centred + prob.geom.mean


def nw_velocity(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
    chunk_size: int | None = None,
) -> Any:
    """Exact marginal velocity ``u_t(x) = (m(x, t) - (1 - sigma_min) x) / sigma_t``.

    Parameters
    ----------
    x : array of shape (n, d)
        States at time ``t``.
    support : array of shape (m, d)
        Support set.
    t : float or array of shape (n,)
        Times in [0, 1]; the field is finite at both ends.
    sigma_min, bandwidth, projection, chunk_size
        See :func:`nw_local_mean`.

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
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
    )
    centred, _ = _reduce(prob, want_second=False)
    return prob.velocity(centred)


def nw_velocity_and_divergence(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
    chunk_size: int | None = None,
) -> tuple[Any, Any]:
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
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
    )
    xp, g = prob.xp, prob.geom
    centred, second = _reduce(prob, want_second=True)
    if g.proj is None:
        trace = second - xp.sum(centred * centred, axis=1)
    else:
        # tr(P^T P Cov_w) = E_w ||P(s - mu)||^2 - ||P m_c||^2: the same reduction on P-values.
        mean_p, second_p = _reduce(prob, want_second=True, values=g.keys)
        trace = second_p - xp.sum(mean_p * mean_p, axis=1)
    a = prob.a if isinstance(prob.a, float) else prob.a[:, 0]
    sig = prob.sigma_t if isinstance(prob.sigma_t, float) else prob.sigma_t[:, 0]
    divergence = (a * trace - prob.decay * prob.x.shape[1]) / sig
    return prob.velocity(centred), divergence


def nw_divergence(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
    chunk_size: int | None = None,
) -> Any:
    """Exact divergence of the NW velocity field (no Hutchinson estimator).

    Returns
    -------
    divergence : array of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> float(nw_divergence(np.zeros((1, 2)), np.ones((1, 2)), 0.0)[0])
    -1.98
    """
    return nw_velocity_and_divergence(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
    )[1]


def nw_effective_sample_size(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
    chunk_size: int | None = None,
) -> Any:
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
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
    )
    xp = prob.xp
    out = [
        xp.exp(2.0 * xp.logsumexp(logits, axis=1) - xp.logsumexp(2.0 * logits, axis=1))
        for _, _, logits in prob.chunks()
    ]
    return xp.concat(out, axis=0)


def nw_log_density(
    x: Any,
    support: Any,
    t: float,
    *,
    sigma_min: float = 0.01,
    chunk_size: int | None = None,
) -> Any:
    """Log-density of the path marginal ``p_t = (1/m) sum_i N(t s_i, sigma_t^2 I)`` at ``x``.

    At ``t = 1`` this is the log-density of the Gaussian KDE of the support with bandwidth
    ``sigma_min``: the terminal law of the exactly integrated flow.

    Returns
    -------
    log_density : array of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> round(float(nw_log_density(np.zeros((1, 1)), np.zeros((1, 1)), 0.0)[0]), 6)
    -0.918939
    """
    xp, xq, supp = _prepare(x, support)
    t_arr = _times_to_numpy(t)
    if t_arr.ndim != 0:
        raise ValueError("nw_log_density takes a scalar t.")
    t_f = float(t_arr)
    sigma_t = OTPath(sigma_min).sigma(t_f)
    m, d = supp.shape
    # Exact differences rather than the norm expansion: near t = 1 the distances are divided
    # by sigma_min^2, so the expansion's cancellation error would be amplified ~1e4 times.
    step = chunk_size or default_chunk_size(m * d)
    out = []
    for start in range(0, xq.shape[0], step):
        diff = xq[start : start + step, None, :] - t_f * supp[None, :, :]
        dist2 = xp.sum(diff * diff, axis=2)
        out.append(xp.logsumexp(-dist2 / (2.0 * sigma_t**2), axis=1))
    lse = xp.concat(out, axis=0)
    return lse - np.log(m) - 0.5 * d * np.log(2.0 * np.pi * sigma_t**2)
