"""Kernel coefficients of the field's logits ``a(t) <x, s> - b(t) ||s||^2`` and ``sigma_t``.

A path ``X_t = alpha_t X_1 + sigma_t X_0`` (:class:`skflow.paths.GaussianPath`; the OT path
``alpha_t = t`` by default) gives the Gaussian weights
``softmax_i(-||x - alpha_t s_i||^2 / (2 tau^2))`` with ``tau = alpha_t h(t)`` the kernel width
in x-space; expanding the square, ``a = alpha_t / tau^2`` and ``b = alpha_t^2 / (2 tau^2)``.
This module computes them on the host (:func:`kernel_coefficients`) or on the device of a
per-row time tensor (:func:`coefficient_columns`), including the ``t -> 0+`` limit of every
bandwidth, together with the path's ``alpha_t`` and the coefficients of its affine map
``u = (gain_t m - decay_t x) / sigma_t`` (asked of the path, never re-derived here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._array import as_array, get_backend, to_numpy
from .._validation import TIME_TOLERANCE, check_bandwidth, clamp_times
from ..paths import GaussianPath, as_path

__all__ = [
    "LIMIT_PROBE_TIME",
    "Bandwidth",
    "Coefficients",
    "callable_bandwidth",
    "coefficient_columns",
    "host_coefficients",
    "kernel_coefficients",
    "times",
    "torch_coefficients",
]

Bandwidth = str | float | Callable[[np.ndarray], np.ndarray]


#: A callable bandwidth's value at ``t = 0`` is checked against its value at this time.
LIMIT_PROBE_TIME = 1e-12


def _check_limit(bandwidth: Callable, h0: float) -> None:
    """``h0 = bandwidth(0)`` must be ``lim_{t -> 0+} h(t)`` in a regime whose weights converge.

    ``h0 = inf``: uniform weights at ``t = 0``, the limit when ``t h(t)^2 -> inf`` (then
    ``a = 1 / (t h^2) -> 0`` and ``b = 1 / (2 h^2) -> 0``). Finite ``h0 > 0``: the width in
    x-space ``t h(t)`` vanishes and the weights tend to the hard argmax of ``<x, s_i>``.
    Both are checked at :data:`LIMIT_PROBE_TIME`; anything else is refused.
    """
    probe = np.array([LIMIT_PROBE_TIME])
    with np.errstate(all="ignore"):
        hp = float(np.broadcast_to(np.asarray(bandwidth(probe), dtype=np.float64), (1,))[0])
    rule = (
        "A callable bandwidth is called at t = 0 too and must return there its limit as "
        "t -> 0+: a positive float (h continuous at 0; the weights at t = 0 are then the hard "
        "argmax of <x, s_i>) or inf with t * h(t)**2 -> inf (e.g. c * sigma_t / t; uniform "
        "weights at t = 0)."
    )
    if not (h0 > 0):  # also NaN
        raise ValueError(f"bandwidth(0) returned {h0!r}. {rule}")
    if np.isinf(h0):
        width2 = LIMIT_PROBE_TIME * hp * hp
        if not width2 >= 1e6:
            raise ValueError(
                f"bandwidth(0) is inf but t * h(t)**2 = {width2:.3g} at t = {LIMIT_PROBE_TIME}: "
                "h grows too slowly as t -> 0 for the weights to become uniform (their limit "
                f"is not computed for h ~ t**(-1/2) or slower). {rule}"
            )
    elif not abs(hp - h0) <= 1e-6 * h0:
        raise ValueError(
            f"bandwidth(0) = {h0!r} but bandwidth({LIMIT_PROBE_TIME}) = {hp!r}: h is not "
            f"continuous at t = 0. {rule}"
        )


def callable_bandwidth(bandwidth: Callable, t: np.ndarray) -> np.ndarray:
    """Values ``h(t)`` of a callable bandwidth on float64 times ``t``, ``t = 0`` included.

    ``h`` is positive at ``t > 0``; at ``t = 0`` it is the limit ``h(0+)`` in ``(0, inf]``,
    validated by :func:`_check_limit` (``ValueError`` otherwise).
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        h = np.asarray(bandwidth(t), dtype=np.float64)
    if h.shape != t.shape:
        h = np.broadcast_to(h, t.shape)
    zero = t == 0
    if not np.all(h[~zero] > 0):
        raise ValueError("bandwidth(t) must return positive values.")
    if zero.any():
        h0 = h[zero]
        first = float(h0.flat[0])
        if first == first and not np.all(h0 == first):  # (NaN is refused below)
            raise ValueError("bandwidth(t) returned different values for the same t = 0.")
        _check_limit(bandwidth, first)
    return h


def torch_coefficients(
    t: Any,
    *,
    path: GaussianPath,
    bandwidth: str | float | Callable,
    dtype: Any,
    device: Any,
    validate: bool = True,
    limit: bool = False,
    tolerance: float = TIME_TOLERANCE,
) -> tuple[Any, Any, Any]:
    """Coefficients ``a(t), b(t), sigma_t`` as tensors of the shape of ``t`` (on ``device``).

    ``path`` is the probability path, already built by the caller (the field's).

    Computed in float64 (where the device has it) and cast to ``dtype``, with Torch operations
    only, so a per-row time tensor on a GPU never leaves it. A callable bandwidth is evaluated
    on the host (it is documented to take a NumPy array).

    ``validate`` checks ``0 <= t <= 1`` up to ``tolerance`` (default
    :data:`skflow._validation.TIME_TOLERANCE`; times outside [0, 1] are clamped, always);
    that check synchronizes with the device, so hot loops pass ``validate=False`` when the
    times are known to be valid.

    With ``limit=True`` a callable bandwidth is also evaluated at ``t = 0`` (see
    :func:`callable_bandwidth`): rows with ``t = 0`` and a finite ``h(0)`` get ``a = inf`` and
    ``b = 1 / (2 h(0)^2)``, the marker of the hard-argmax limit that
    :mod:`skflow.field` computes; with ``limit=False`` (the heads of :mod:`skflow.nn`) every
    row with ``t = 0`` gets ``a = b = 0`` (uniform weights).
    """
    import torch

    check_bandwidth(bandwidth)
    work = torch.float64 if torch.device(device).type != "mps" else torch.float32
    # Python/NumPy values read as float64: no float32 detour
    t = torch.as_tensor(as_array(t, np.float64), device=device).to(work)
    if validate and t.numel():
        inside = (t >= -tolerance) & (t <= 1.0 + tolerance)
        if not bool(inside.all()):  # the host check names the value and the fix
            clamp_times(t.detach().cpu().numpy(), "t", tolerance)
    t = t.clamp(0.0, 1.0)  # NaN stays NaN (refused above where validated)
    alpha, sigma_t = path.alpha(t), path.sigma(t)
    if callable(bandwidth):
        t_np = t.detach().cpu().numpy().astype(np.float64)
        if limit:
            h_np = callable_bandwidth(bandwidth, t_np)
        else:
            safe_np = np.where(t_np > 0, t_np, 1.0)
            h_np = callable_bandwidth(bandwidth, safe_np)
        h = torch.as_tensor(np.array(h_np), device=device).to(work)
        pos = t > 0
        safe = torch.where(pos, alpha, torch.ones_like(t))
        zero_a = torch.zeros_like(t)
        if limit:  # t = 0: a = inf (hard argmax) for finite h(0), 0 for h(0) = inf
            zero_a = torch.where(torch.isinf(h), zero_a, torch.full_like(t, float("inf")))
        a = torch.where(pos, 1.0 / (safe * h * h), zero_a)
        b = torch.where(pos | torch.isfinite(h), 0.5 / (h * h), torch.zeros_like(t))
        if not limit:
            b = torch.where(pos, b, torch.zeros_like(t))
    else:
        scale = 1.0 if bandwidth == "ot" else float(bandwidth)
        tau2 = (scale * sigma_t) ** 2
        a = alpha / tau2
        b = 0.5 * alpha * alpha / tau2
    return a.to(dtype), b.to(dtype), sigma_t.to(dtype)


def times(t: Any, *, max_ndim: int = 1, tolerance: float = TIME_TOLERANCE) -> np.ndarray:
    """Times as a float64 NumPy array (at most ``max_ndim``-D), validated to lie in [0, 1];
    times within ``tolerance`` (default :data:`skflow._validation.TIME_TOLERANCE`) outside
    are clamped to it."""
    # a complex tensor is refused with its Torch dtype named, before the host copy
    t_arr = to_numpy(get_backend(t).check_real(t, "t")).astype(np.float64, copy=False)
    if t_arr.ndim > max_ndim:
        raise ValueError(
            f"t must be a scalar or a 1-D array of per-query times, got {t_arr.shape}."
        )
    return clamp_times(t_arr, "t", tolerance)


def kernel_coefficients(
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    path: GaussianPath | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients of the logits ``a <x, s> - b ||s||^2`` and the path's ``sigma_t``.

    Parameters
    ----------
    t : float or array-like of shape (n,)
        Times in [0, 1].
    sigma_min : float, default=0.01
        Noise level of the OT path at ``t = 1`` (ignored when ``path`` is given).
    bandwidth : {"ot"} or float or callable, default="ot"
        ``"ot"`` uses the path's exact ``h(t) = sigma_t / alpha_t`` (``sigma_t / t`` on the OT
        path); a positive float ``c`` uses ``c h(t)``; a callable maps times (float64 array,
        ``t = 0`` included) to bandwidths ``h(t)`` (in the rescaled ``x / alpha_t``
        coordinates).

        **The value at t = 0 is the limit t -> 0+.** For ``"ot"`` and a float the x-space
        width ``t h(t)`` tends to 1 (resp. ``c``) times ``sigma_0 = 1`` while ``a, b -> 0``:
        uniform weights. A callable must return at ``t = 0`` its limit ``h(0+)``:

        * ``inf`` with ``t h(t)^2 -> inf`` (e.g. ``c sigma_t / t``): ``a, b -> 0``, uniform
          weights;
        * a finite ``h(0) > 0`` (``h`` bounded and continuous at 0, e.g. a constant): the
          x-space width ``t h(t) -> 0`` and ``a -> inf``; the weights tend to one-hot on
          ``argmax_i <P x, P s_i>``, ties broken by ``-||P s_i||^2 / (2 h(0)^2)`` (a softmax
          over the tied points; exact ties share the weight equally). Returned as
          ``a = inf``, ``b = 1 / (2 h(0)^2)``.

        Anything else raises ``ValueError``: ``h(0)`` zero, negative or NaN, ``h(0) = inf``
        growing like ``t^(-1/2)`` or slower (``t h(t)^2 < 1e6`` at ``t = 1e-12``), or a finite
        ``h(0)`` that differs from ``h(1e-12)`` by more than ``1e-6`` relative (not the
        limit).
    path : GaussianPath, optional
        The probability path; default ``OTPath(sigma_min)``.

    Returns
    -------
    a, b, sigma_t : ndarray of the shape of ``t``
        Query scale, key-bias scale and noise level, in float64 (``a = inf`` marks the
        hard-argmax limit at ``t = 0``, see above).

    Examples
    --------
    >>> a, b, s = kernel_coefficients(0.5, sigma_min=0.01)
    >>> round(float(a), 4), round(float(b), 4), round(float(s), 3)
    (1.9606, 0.4901, 0.505)
    """
    check_bandwidth(bandwidth)
    return host_coefficients(times(t), as_path(path, sigma_min), bandwidth)[:3]


def host_coefficients(t_arr: np.ndarray, path: GaussianPath, bandwidth: Bandwidth) -> tuple:
    """``a, b, sigma_t, alpha_t`` at validated float64 times ``t_arr`` (the rules of
    :func:`kernel_coefficients`)."""
    alpha, sigma_t = path.alpha(t_arr), path.sigma(t_arr)
    if callable(bandwidth):
        h = callable_bandwidth(bandwidth, t_arr)
        pos = t_arr > 0
        safe_t = np.where(pos, alpha, 1.0)
        with np.errstate(over="ignore", divide="ignore"):
            # t = 0: a = inf marks the hard-argmax limit (finite h(0)); a = 0 for h(0) = inf.
            a_zero = np.where(np.isinf(h), 0.0, np.inf)
            a = np.where(pos, 1.0 / (safe_t * h**2), a_zero)
            b = 0.5 / h**2
        return a, b, sigma_t, alpha
    scale = 1.0 if bandwidth == "ot" else float(bandwidth)
    tau2 = (scale * sigma_t) ** 2
    return alpha / tau2, 0.5 * alpha**2 / tau2, sigma_t, alpha


@dataclass
class Coefficients:
    """Per-call coefficients: Python floats (one time for all queries) or ``(..., n, 1)``
    columns of the queries' namespace, dtype and device."""

    #: The path's ``alpha_t`` (the time itself on the OT path): queries are centred on
    #: ``alpha_t mu``.
    t: Any
    a: Any
    b: Any
    sigma_t: Any
    #: ``(..., n, 1)`` boolean column of the rows in the hard-argmax limit, or None.
    hard: Any
    #: ``max a`` over the finite rows (host float; 0 when not needed), for the float32 check.
    a_max: float
    #: ``gain_t, decay_t`` of the velocity ``(gain_t m - decay_t x) / sigma_t``.
    gain: Any = 1.0
    decay: Any = 0.0

    def astype(self, convert: Callable[[Any], Any]) -> Coefficients:
        """The same coefficients with every column passed through ``convert``."""
        cols = [self.t, self.a, self.b, self.sigma_t, self.gain, self.decay]
        t, a, b, sig, gain, decay = (c if isinstance(c, float) else convert(c) for c in cols)
        return Coefficients(t, a, b, sig, self.hard, self.a_max, gain, decay)


def coefficient_columns(
    xp: Any,
    x: Any,
    t: Any,
    *,
    path: GaussianPath,
    bandwidth: Bandwidth,
    need_max: bool,
    tolerance: float = TIME_TOLERANCE,
) -> Coefficients:
    """Coefficients of one evaluation at queries ``x`` (..., n, d) and times ``t``.

    ``t`` is a scalar or broadcastable to ``x.shape[:-1]``. A Torch tensor of per-row times
    stays on its device (the range check is skipped for tensors on accelerators); other
    times are validated and computed on the host in float64. Times within ``tolerance``
    outside [0, 1] are clamped to it.
    """
    shape = tuple(x.shape[:-1])
    if xp.on_device(t) and t.ndim >= 1:
        return _device_columns(xp, x, t, shape, path, bandwidth, need_max, tolerance)
    if type(t) is float and 0.0 <= t <= 1.0 and not callable(bandwidth):
        return _scalar_columns(t, path, bandwidth)  # a solver's stage: no array work
    t_arr = times(t, max_ndim=len(shape), tolerance=tolerance)
    a, b, sigma_t, alpha = host_coefficients(t_arr, path, bandwidth)
    gain, decay = path.velocity_coefficients(t_arr)
    if t_arr.ndim == 0:
        hard = None
        if np.isinf(a):
            hard = _as_device(xp, np.ones(shape + (1,), dtype=bool), x)
            a = np.zeros_like(a)
        scalars = (float(c) for c in (alpha, a, b, sigma_t))
        return Coefficients(*scalars, hard, float(a), float(gain), float(decay))
    hard_rows = np.isinf(a)
    hard = None
    if hard_rows.any():  # rows in the hard-argmax limit (t = 0, finite callable h(0))
        hard = _as_device(xp, _broadcast(hard_rows, shape, "t")[..., None].copy(), x)
        a = np.where(hard_rows, 0.0, a)
    cols = [
        c
        if isinstance(c, float)
        else _as_device(xp, _broadcast(c, shape, "t")[..., None], x, x.dtype)
        for c in (alpha, a, b, sigma_t, gain, decay)
    ]
    a_max = float(np.max(a)) if a.size else 0.0
    return Coefficients(*cols[:4], hard, a_max, *cols[4:])


def _scalar_columns(t: float, path: GaussianPath, bandwidth: Bandwidth) -> Coefficients:
    """``host_coefficients`` for one Python float time and a non-callable bandwidth, in
    Python floats (the same float64 arithmetic, without 0-d array overhead)."""
    alpha, sigma_t = float(path.alpha(t)), float(path.sigma(t))
    gain, decay = (float(c) for c in path.velocity_coefficients(t))
    scale = 1.0 if bandwidth == "ot" else float(bandwidth)
    tau2 = (scale * sigma_t) ** 2
    a = alpha / tau2
    return Coefficients(alpha, a, 0.5 * alpha**2 / tau2, sigma_t, None, a, gain, decay)


def _device_columns(xp, x, t, shape, path, bandwidth, need_max, tolerance) -> Coefficients:
    torch = xp.torch
    if t.is_complex():
        raise TypeError(f"t must be real-valued, got complex dtype {t.dtype}.")
    try:
        t = torch.broadcast_to(t, shape)
    except RuntimeError:
        raise ValueError(_shape_message(tuple(t.shape), shape)) from None
    check_bandwidth(bandwidth)
    a, b, sig = torch_coefficients(
        t,
        path=path,
        bandwidth=bandwidth,
        dtype=x.dtype,
        device=x.device,
        validate=t.device.type == "cpu",
        limit=True,
        tolerance=tolerance,
    )
    hard = None
    if callable(bandwidth):  # only callables have rows in the hard-argmax limit
        rows = torch.isinf(a)
        if bool(rows.any()):
            hard = rows[..., None]
            a = torch.where(rows, torch.zeros_like(a), a)
    a_max = float(a.max()) if (need_max and a.numel()) else 0.0
    work = torch.float64 if x.device.type != "mps" else torch.float32
    tc = t.to(device=x.device, dtype=work).clamp(0.0, 1.0)
    cols = [path.alpha(tc), *path.velocity_coefficients(tc)]
    alpha, gain, decay = (c if isinstance(c, float) else c.to(x.dtype)[..., None] for c in cols)
    return Coefficients(alpha, a[..., None], b[..., None], sig[..., None], hard, a_max, gain, decay)


def _shape_message(got: tuple, shape: tuple) -> str:
    if len(got) == 1 and len(shape) == 1:
        return f"t has {got[0]} entries but x has {shape[0]} rows."
    return f"t of shape {got} does not broadcast to the query rows {shape}."


def _broadcast(values: np.ndarray, shape: tuple, name: str) -> np.ndarray:
    if len(shape) == 1 and values.shape != shape:  # one support: one time per row, exactly
        raise ValueError(_shape_message(values.shape, shape))
    try:
        return np.broadcast_to(values, shape)
    except ValueError:
        raise ValueError(_shape_message(values.shape, shape)) from None


def _as_device(xp, values: np.ndarray, like: Any, dtype: Any = None) -> Any:
    return xp.to_device(values, like, dtype)
