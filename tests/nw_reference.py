"""The one float64 brute-force Nadaraya-Watson reference every test compares the field with.

Written from the formulas of SPEC section 2 by explicit differences and a direct softmax: no
expansion of the square, no centring, no fused kernel, nothing shared with ``skflow.field``.
Import it from a test module as ``from nw_reference import brute_force_field`` (pytest puts
``tests/`` on the path).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _sigma_t(t: np.ndarray, sigma_min: float) -> np.ndarray:
    return 1.0 - (1.0 - sigma_min) * t


def ot_schedule(sigma_min: float) -> tuple[Callable, Callable, Callable, Callable]:
    """``(alpha, sigma, d_alpha, d_sigma)`` of the OT path, written out here (not skflow's)."""
    return (
        lambda t: t,
        lambda t: _sigma_t(t, sigma_min),
        lambda t: np.ones_like(t),
        lambda t: np.full_like(t, -(1.0 - sigma_min)),
    )


def brute_force_field(
    x,
    support,
    t,
    sigma_min: float = 0.01,
    *,
    projection=None,
    width: Callable | None = None,
    schedule: tuple[Callable, Callable, Callable, Callable] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """NW weights (n, m) and velocity (n, d) in float64.

    With ``schedule = (alpha, sigma, d_alpha, d_sigma)`` (functions of float64 times) the path
    is ``x_t = alpha_t x_1 + sigma_t x_0``: weights from ``||x - alpha_t s_i||^2 / sigma_t^2``
    and ``u = (d_sigma / sigma) x + (d_alpha - alpha d_sigma / sigma) E_w[s]``. Without it,
    the OT path of ``sigma_min`` in its own closed form.

    Parameters
    ----------
    x : array-like of shape (n, d)
    support : array-like of shape (m, d)
    t : float or array-like of shape (n,)
        Scalar time or one time per row.
    sigma_min : float
    projection : array-like of shape (k, d), optional
        Weights from ``||P (x - t s_i)||^2`` (values stay the support).
    width : callable ``(t, sigma_t) -> width``, optional
        Kernel width in x-space; the OT field's is ``sigma_t``.
    schedule : tuple of 4 callables, optional
        ``(alpha, sigma, d_alpha, d_sigma)`` of another path (``sigma_min`` is then unused).
    """
    x = np.asarray(x, dtype=np.float64)
    support = np.asarray(support, dtype=np.float64)
    t = np.broadcast_to(np.asarray(t, dtype=np.float64), (x.shape[0],))[:, None]
    alpha_t = t if schedule is None else schedule[0](t)
    sigma_t = _sigma_t(t, sigma_min) if schedule is None else schedule[1](t)
    diff = x[:, None, :] - alpha_t[:, :, None] * support[None, :, :]
    if projection is not None:
        diff = diff @ np.asarray(projection, dtype=np.float64).T
    kernel_width = sigma_t if width is None else width(t, sigma_t)
    logits = -np.sum(diff**2, axis=2) / (2.0 * kernel_width**2)
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    if schedule is None:
        return w, (w @ support - (1.0 - sigma_min) * x) / sigma_t
    d_alpha, d_sigma = schedule[2](t), schedule[3](t)
    return w, (d_sigma / sigma_t) * x + (d_alpha - alpha_t * d_sigma / sigma_t) * (w @ support)


def brute_force_log_density(
    x, support, t: float, sigma_min: float = 0.01, *, schedule=None
) -> np.ndarray:
    """``log (1/m) sum_i N(x; alpha_t s_i, sigma_t^2 I)``, summed term by term in float64; (n,).

    ``alpha_t = t`` and the OT ``sigma_t`` of ``sigma_min`` unless ``schedule`` (as in
    :func:`brute_force_field`) is given.
    """
    x = np.asarray(x, dtype=np.float64)
    support = np.asarray(support, dtype=np.float64)
    d = x.shape[1]
    tt = np.float64(t)
    alpha_t = tt if schedule is None else float(schedule[0](tt))
    sigma_t = float(_sigma_t(tt, sigma_min) if schedule is None else schedule[1](tt))
    dist2 = np.sum((x[:, None, :] - alpha_t * support[None, :, :]) ** 2, axis=2)
    log_terms = -dist2 / (2.0 * sigma_t**2) - 0.5 * d * np.log(2.0 * np.pi * sigma_t**2)
    top = log_terms.max(axis=1)
    return top + np.log(np.mean(np.exp(log_terms - top[:, None]), axis=1))
