"""The NW sampler's log-density: the closed form, and the change of variables along the flow.

With the exact OT bandwidth and no kernel geometry the flow's terminal law is the Gaussian KDE
of the support (closed form, :func:`closed_form_log_density`). Otherwise the log-density is
``log N(x_0; 0, I) - int_0^1 div u_t(x_t) dt`` along the flow line through ``x``, integrated
backwards by an adaptive solve (the variables and their
right-hand side are described on :meth:`skflow.NWFlowSampler.log_density_with_error`).
:func:`log_density_and_error` runs it twice, at the requested tolerances and ten times
looser, with one prepared field.

Every function takes the field already prepared on the backend of the call (``backend``: an
object with ``asarray`` and ``to_numpy``, see :class:`skflow.samplers._base.Backend`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import field as F
from .._validation import check_finite_output
from ..paths import GaussianPath, OTPath
from ._base import SAMPLING_BATCH_SIZE
from ._solve import FlowSolveError, solve_adaptive

__all__ = [
    "DENSITY_MAX_STIFFNESS",
    "DENSITY_T_FLOOR",
    "DENSITY_ZERO_RATE",
    "closed_form_log_density",
    "density_t_floor",
    "log_density_and_error",
]

#: A callable bandwidth bounded at ``t = 0`` (finite ``h(0)``) starts the flow from a hard
#: argmax, so the change of variables is integrated down to this time only ...
DENSITY_T_FLOOR = 1e-8
#: ... and a row whose log-determinant still grows faster than this many nats per e-fold of
#: ``t`` there has density 0 (``log_density = -inf``).
DENSITY_ZERO_RATE = 1e-3
#: Near ``t = 0`` the rows between two argmax cells relax at a rate of about
#: ``|s_i - s_j|^2 / (2 h(0)^2)`` per e-fold of ``t``, which an explicit solver needs about as
#: many steps for: beyond this bound (estimated from the support's radius) the density refuses
#: a bounded callable bandwidth up front instead of exhausting its step budget.
DENSITY_MAX_STIFFNESS = 1000.0
_ADVICE = "lower density_rtol/density_atol, or rescale the data (e.g. StandardScaler)."


def density_t_floor(
    bandwidth: Any, path: GaussianPath, support: np.ndarray, projection: Any
) -> float:
    """Lowest time of the change of variables: :data:`DENSITY_T_FLOOR` for a callable
    bandwidth with a finite ``h(0)`` (hard argmax at 0), else 0.

    ``ValueError`` when the support (m, d) is too spread out against ``h(0)`` to integrate.
    ``path`` is the flow's (a callable bandwidth's ``h(0)`` does not depend on it).

    Examples
    --------
    >>> import numpy as np
    >>> density_t_floor("ot", OTPath(0.01), np.zeros((2, 1)), None)
    0.0
    """
    if not callable(bandwidth):
        return 0.0
    a0, b0, _ = F.kernel_coefficients(0.0, path=path, bandwidth=bandwidth)
    if not np.isinf(a0):
        return 0.0
    h0 = math.sqrt(0.5 / float(b0))  # b(0) = 1 / (2 h(0)^2)
    Z = support - support.mean(axis=0)
    Z = Z if projection is None else Z @ projection.T
    with np.errstate(over="ignore", invalid="ignore"):
        radius = float(np.max(np.linalg.norm(Z, axis=1)))
        stiffness = 2.0 * radius * radius / (h0 * h0)  # (2 radius)^2 / (2 h(0)^2)
    if not stiffness <= DENSITY_MAX_STIFFNESS:
        raise ValueError(
            f"score_samples: the bandwidth is bounded at t = 0 (h(0) = {h0:.3g}), so the "
            "flow starts from the hard argmax of <x, s_i>, and support points up to "
            f"{2 * radius:.3g} apart make the change of variables near t = 0 too stiff "
            f"to integrate (rate about {stiffness:.3g} per e-fold of t, limit "
            f"{DENSITY_MAX_STIFFNESS:g}). Rescale the data (e.g. StandardScaler), use a "
            "larger h(0), or a bandwidth growing like 1/t at 0 (e.g. c * sigma_t / t)."
        )
    return DENSITY_T_FLOOR


def closed_form_log_density(field: F.NWField, X: np.ndarray, backend: Any) -> np.ndarray:
    """Log-density of the Gaussian KDE of ``field``'s support at ``X`` (n, d), float64.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.samplers._base import Backend
    >>> field = F.NWField(np.zeros((1, 1)), sigma_min=0.5)  # the KDE N(0, 0.5^2)
    >>> round(float(closed_form_log_density(field, np.zeros((1, 1)), Backend())[0]), 4)
    -0.2258
    """
    log_p = field.log_density(backend.asarray(X.astype(np.float64)), 1.0)
    return check_finite_output(backend.to_numpy(log_p), "nw_log_density's result")


def _rhs(field: F.NWField, d: int, path: OTPath):
    """Right-hand side in ``s`` of the state ``(x e^(-s), int div u dt)`` (n, d + 1)."""
    sigma_min, decay = float(path.sigma_min), path.decay

    def rhs(s, state):
        xp, n = field.xp, state.shape[0]
        s = np.broadcast_to(np.asarray(s, dtype=np.float64), (n,))
        growth = np.exp(s)  # x = w e^s, sigma_t = sigma_min e^s
        sigma = np.minimum(sigma_min * growth, 1.0)
        t = np.clip((1.0 - sigma) / decay, 0.0, 1.0)
        g = xp.asarray(growth.reshape(-1, 1), state)
        x = state[:, :d] * g
        v, div = field.velocity_and_divergence(x, t)
        sig = xp.asarray(sigma.reshape(-1, 1), state)
        mean = v * sig + decay * x  # m_w(x), from u = (m_w - decay x) / sigma_t
        dl = div[:, None] * sig / decay
        return xp.concat([-mean / (g * decay), dl], axis=1)

    return rhs


def _flow_log_density(field, X, backend, path, t_floor, rtol, atol) -> np.ndarray:
    """One adaptive solve of the change of variables (float64 ``X`` (n, d) in, (n,) out);
    the arguments as in :func:`log_density_and_error`. Rows of density 0 get ``-inf``."""
    d, sigma_min = X.shape[1], float(path.sigma_min)
    # sigma_t = sigma_min e^s = 1 - decay t: the end of the solve is t = t_floor
    s_end = -math.log(sigma_min) + math.log1p(-(1.0 - sigma_min) * t_floor)
    rhs = _rhs(field, d, path)
    parts = []
    for start in range(0, X.shape[0], SAMPLING_BATCH_SIZE):
        xb = backend.asarray(X[start : start + SAMPLING_BATCH_SIZE])
        xp = backend.xp
        state0 = xp.concat([xb, xp.full((xb.shape[0], 1), 0.0, xb)], axis=1)
        try:
            sol = solve_adaptive(rhs, state0, (0.0, s_end), rtol=rtol, atol=atol, advice=_ADVICE)
        except FlowSolveError as exc:
            raise FlowSolveError(
                f"score_samples: the change-of-variables solve failed: {exc}"
            ) from exc
        parts.append(backend.to_numpy(sol.y).astype(np.float64))
    end = np.concatenate(parts, axis=0) if parts else np.zeros((0, d + 1))
    x0, log_det = end[:, :d] * math.exp(s_end), end[:, d]
    zero = np.zeros(X.shape[0], dtype=bool)
    if t_floor > 0:
        x0, log_det, zero = _density_floor(field, x0, log_det, t_floor, backend, path)
    log_p0 = -0.5 * np.sum(x0**2, axis=1) - 0.5 * d * np.log(2 * np.pi)
    log_p = check_finite_output(np.where(zero, 0.0, log_p0 - log_det), "score_samples")
    return np.where(zero, -np.inf, log_p)


def _path_rhs(field: F.NWField, d: int):
    """Right-hand side in ``tau = 1 - t`` of the state ``(x, int_t^1 div u dt)`` (n, d + 1):
    the change of variables of any path, in its own time."""

    def rhs(tau, state):
        xp, n = field.xp, state.shape[0]
        tau = np.broadcast_to(np.asarray(tau, dtype=np.float64), (n,))
        v, div = field.velocity_and_divergence(state[:, :d], np.clip(1.0 - tau, 0.0, 1.0))
        return xp.concat([-v, div[:, None]], axis=1)

    return rhs


def _path_log_density(field, X, backend, rtol, atol) -> np.ndarray:
    """One adaptive solve of the change of variables in the path's time ``t`` from 1 to 0
    (float64 ``X`` (n, d) in, (n,) out), for paths other than the OT path."""
    d = X.shape[1]
    rhs, parts = _path_rhs(field, d), []
    for start in range(0, X.shape[0], SAMPLING_BATCH_SIZE):
        xb = backend.asarray(X[start : start + SAMPLING_BATCH_SIZE])
        xp = backend.xp
        state0 = xp.concat([xb, xp.full((xb.shape[0], 1), 0.0, xb)], axis=1)
        try:
            sol = solve_adaptive(rhs, state0, (0.0, 1.0), rtol=rtol, atol=atol, advice=_ADVICE)
        except FlowSolveError as exc:
            raise FlowSolveError(
                f"score_samples: the change-of-variables solve failed: {exc}"
            ) from exc
        parts.append(backend.to_numpy(sol.y).astype(np.float64))
    end = np.concatenate(parts, axis=0) if parts else np.zeros((0, d + 1))
    x0, log_det = end[:, :d], end[:, d]
    log_p0 = -0.5 * np.sum(x0**2, axis=1) - 0.5 * d * np.log(2 * np.pi)
    return check_finite_output(log_p0 - log_det, "score_samples")


def log_density_and_error(
    field: F.NWField,
    X: np.ndarray,
    backend: Any,
    *,
    path: GaussianPath,
    t_floor: float,
    rtol: float,
    atol: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Log-density by the change of variables at ``rtol``/``atol``, and its error estimate.

    The estimate is the difference to a second solve with 10x looser tolerances; both solves
    use the one prepared ``field``.

    Parameters
    ----------
    field : NWField
        The prepared field of the support, on ``backend``.
    X : ndarray of shape (n, d)
        float64 points.
    backend : Backend
        Where the solve runs (``asarray``, ``to_numpy``).
    path : GaussianPath
        The flow's path. The OT path is integrated in ``s = log(sigma_t / sigma_min)`` (where
        its field is smooth); any other path in ``tau = 1 - t``, with ``t_floor = 0`` only
        (``ValueError`` otherwise: the hard-argmax limit at ``t = 0`` is the OT path's).
    t_floor : float
        Lowest time of the solve (:func:`density_t_floor`).
    rtol, atol : float
        Tolerances of the adaptive solve.

    Returns
    -------
    log_density : ndarray of shape (n,)
        float64; ``-inf`` where the density is 0.
    error : ndarray of shape (n,)
        Estimated absolute error (float64).
    """
    if isinstance(path, OTPath):
        args = (field, X, backend, path, t_floor)
        solve = _flow_log_density
    elif t_floor == 0:
        args, solve = (field, X, backend), _path_log_density
    else:
        raise ValueError(
            f"score_samples: a bandwidth bounded at t = 0 on {path!r} is not supported (the "
            "change of variables through the hard-argmax limit is written for the OT path)."
        )
    log_p = solve(*args, rtol, atol)
    loose = solve(*args, 10.0 * rtol, 10.0 * atol)
    both_zero = np.isneginf(log_p) & np.isneginf(loose)  # density 0 in both solves
    with np.errstate(invalid="ignore"):
        err = np.where(both_zero, 0.0, np.abs(log_p - loose))
    return log_p, err


def _density_floor(field, x, log_det, t, backend, path):
    """Close the change of variables from ``t = DENSITY_T_FLOOR`` down to 0.

    With a finite ``h(0)`` the weights at ``t -> 0`` tend to the hard argmax of
    ``<x, s_i>``, and ``t div u -> tr Cov_w / h(0)^2`` (the metric included): the
    log-determinant grows by that rate per e-fold of ``t``. A row whose weights are
    one-hot at ``t`` (inside an argmax cell) has a rate that vanishes like ``e^(-c/t)``:
    the rest of the integral is below it, and one Euler step from ``t`` to 0 closes the
    state. A row still shared between support points (on a boundary layer between cells,
    which the flow from ``t = 0`` leaves empty when the support points are farther apart
    than about ``2 h(0)``) never stops growing: its density is 0.
    """
    d, decay = x.shape[1], path.decay
    times = backend.asarray(np.full(x.shape[0], t))
    v, div = field.velocity_and_divergence(backend.asarray(x), times)
    v, div = backend.to_numpy(v).astype(np.float64), backend.to_numpy(div).astype(np.float64)
    sigma = path.sigma(t)
    rate = t * (div + d * decay / sigma)  # t a tr(Cov_w P^T P) / sigma_t
    zero = rate > DENSITY_ZERO_RATE
    # the rest of int_0^t div dt for one-hot weights: div = -d decay / sigma_t
    return x - t * v, log_det - d * decay * t, zero
