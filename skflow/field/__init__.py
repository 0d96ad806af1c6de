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

**dtypes** (one rule for every function): when ``x`` and ``support`` are both float32 the
result is float32, computed accurately (in float64 where float32 would lose precision, see
*Precision*; :func:`nw_log_density` always accumulates in float64); every other input dtype
(float64, integers, bool, and also float16/bfloat16 tensors) is computed and returned in
float64. Half precision is therefore never used by this module, on the CPU or on CUDA;
:func:`kernel_coefficients` returns float64 coefficients.

Engines
-------
*NumPy*: chunked GEMMs (``(chunk, m)`` logits blocks of about 64 MiB).

*Torch*: :func:`nw_local_mean` and :func:`nw_velocity` run the attention realization: one
``scaled_dot_product_attention`` call per query block with query ``a x``, keys ``s_i``, values
``s_i``, scale 1 and the per-key bias ``-b ||s_i||^2`` either as a broadcast additive mask (one
time for all queries, on CPU) or as a lifted coordinate (query ``[a x, -b]``, key
``[s_i, ||s_i||^2]``; per-row times, and CUDA), see :mod:`skflow._attention`. On CPU (float32
and float64) and on CUDA (float32; half precision inputs are promoted to float64, see the dtype
rule above) it runs fused kernels in memory linear in ``n + m``; where only the reference
(math) kernel applies (float64 on CUDA) queries are processed in blocks sized from the free
memory. The weights, ``n_eff`` and the divergence need
explicit logits and keep the GEMM path. Per-row time tensors stay on the device.

*Streaming over the support* (both libraries, every function): for supports too large for the
dense path (``m * max(d, 64)`` above the block budget, e.g. ``m = 10^6`` in ``d = 64``) or when
``support_chunk_size`` is given, the support is read in chunks of rows and the softmax is
accumulated in one pass with an online log-sum-exp: per query a running maximum ``M`` of the
logits, a running normaliser ``Z = sum_i exp(l_i - M)`` and running weighted sums
``sum_i exp(l_i - M) v_i`` (and ``... ||k_i||^2`` for the divergence, ``exp(2 (l_i - M))`` for
``n_eff``), all rescaled by ``exp(M_old - M_new)`` when the maximum grows. The support mean is
computed once (chunked, float64 accumulation) and each chunk is centred (and cast, and
projected) on its own, so no full-size copy of the support is made: memory is
``O(n d + chunk * (d + k) + block)``. The result equals the dense one to rounding (~1e-15
relative in float64).

Precision
---------
float64 results equal a float64 brute force to about ``1e-12`` relative. In float32 the
expansion costs about ``eps_32 * a(t) * R^2`` in the logits, ``R = max_i ||s_i - mu||`` (after
the projection, if any), which grows like ``1 / sigma_t^2`` as ``t -> 1``. When
``a(t) R^2 > FLOAT32_LOGIT_LIMIT`` (``1e4``; for standardized data that is ``t`` above about
0.92 in d = 64 and 0.975 in d = 2) float32 inputs are computed in float64 and the result is
cast back to float32, so the float32 velocity stays within ``1e-4`` (normwise relative:
``max |v_32 - v_64| / max |v_64|``) of the float64 field at every ``t`` in ``[0, 1]`` on
standardized data; without the fallback it reaches ~2e-4 in d = 2 at ``t >= 0.99``. Set
``skflow.field.FLOAT32_LOGIT_LIMIT = float("inf")`` to stay in float32 throughout. See
``docs/performance.md`` for the measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import get_namespace, is_torch
from .._attention import (
    bias_attention_mean,
    callable_bandwidth,
    lifted_attention_mean,
    torch_coefficients,
)
from .._validation import check_bandwidth, check_real_array
from ..paths import OTPath

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
# The dense path keeps whole-support temporaries (the centred support, its keys: m * max(d, k)
# elements) and blocks of at least _STREAM_MIN_ROWS full rows of logits; above the block
# budget the support is streamed in chunks instead.
_STREAM_MIN_ROWS = 64
# Streaming: support chunks are sized for blocks of (up to) this many queries.
_STREAM_QUERY_ROWS = 1024
# On CUDA a block may use this fraction of the free device memory (a few temporaries of the
# block's size are alive at once: logits, exponentials, weights).
_CUDA_MEMORY_FRACTION = 0.0625
_CUDA_MAX_ELEMENTS = 2**31 - 1

#: float32 inputs are computed in float64 where ``a(t) * max_i ||s_i - mu||^2`` exceeds this:
#: the logits' float32 rounding error is about ``eps_32`` times that product.
FLOAT32_LOGIT_LIMIT = 1e4


def default_chunk_size(
    n_support: int, budget: int | None = None, *, device: Any = None, itemsize: int = 8
) -> int:
    """Number of queries per block so that a ``(chunk, m)`` logits block fits ``budget``.

    Parameters
    ----------
    n_support : int
        Number of support points ``m`` (columns of the block).
    budget : int, optional
        Elements per block. By default ``2**23`` (64 MiB of float64) on the host and, for a
        CUDA ``device``, ``1/16`` of the free device memory (``torch.cuda.mem_get_info``)
        divided by ``itemsize``.
    device : str or torch.device, optional
        Where the block lives; only a CUDA device changes the default budget.
    itemsize : int, default=8
        Bytes per element of the block (CUDA budget only).

    Returns
    -------
    chunk : int
        At least 1.

    Examples
    --------
    >>> default_chunk_size(1000)
    8388
    """
    if budget is None:
        budget = _BLOCK_ELEMENTS
        if device is not None and str(device).startswith("cuda"):
            import torch

            free, _ = torch.cuda.mem_get_info(torch.device(device))
            budget = int(
                min(_CUDA_MAX_ELEMENTS, max(budget, free * _CUDA_MEMORY_FRACTION // itemsize))
            )
    return int(max(1, budget // max(1, n_support)))


def _check_real_torch(a: Any, name: str) -> None:
    if a.is_complex():
        raise TypeError(f"{name} must be real-valued, got complex dtype {a.dtype}.")


def _check_chunk(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}.")
    return int(value)


def _times_to_numpy(t: Any) -> np.ndarray:
    """Times as a float64 NumPy array (scalar or (n,)), validated to lie in [0, 1]."""
    if is_torch(t):
        _check_real_torch(t, "t")
        t = t.detach().cpu().numpy()
    t_arr = check_real_array(t, "t").astype(np.float64, copy=False)
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
        a callable maps times (float64 array, ``t = 0`` included) to bandwidths ``h(t)`` (in
        the rescaled ``x / t`` coordinates).

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
    t_arr = _times_to_numpy(t)
    path = OTPath(sigma_min)
    sigma_t = path.sigma(t_arr)
    if callable(bandwidth):
        h = callable_bandwidth(bandwidth, t_arr)
        pos = t_arr > 0
        safe_t = np.where(pos, t_arr, 1.0)
        with np.errstate(over="ignore", divide="ignore"):
            # t = 0: a = inf marks the hard-argmax limit (finite h(0)); a = 0 for h(0) = inf.
            a_zero = np.where(np.isinf(h), 0.0, np.inf)
            a = np.where(pos, 1.0 / (safe_t * h**2), a_zero)
            b = 0.5 / h**2
    else:
        scale = 1.0 if bandwidth == "ot" else float(bandwidth)
        tau2 = (scale * sigma_t) ** 2
        a = t_arr / tau2
        b = 0.5 * t_arr**2 / tau2
    return a, b, sigma_t


def _prepare(x: Any, support: Any, *, cast_support: bool = True) -> tuple[Any, Any, Any]:
    """Check shapes and dtypes and bring ``x`` (and ``support``) to the common floating dtype.

    With ``cast_support=False`` the support is returned as given (its chunks are cast when
    they are streamed), so a huge support is never copied whole.
    """
    xp = get_namespace(x, support)
    if xp.name == "numpy":
        x = check_real_array(x, "x")
        support = check_real_array(support, "support")
    else:
        _check_real_torch(x, "x")
        _check_real_torch(support, "support")
        if is_torch(x) and is_torch(support) and x.device != support.device:
            # moving data between devices silently would hide a user's mistake (and a sync)
            raise ValueError(
                f"x is on device {x.device} but support is on device {support.device}; "
                "put both on the same device."
            )
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
        if cast_support:
            support = support.astype(dtype, copy=False)
    else:
        torch = xp.torch
        both32 = x.dtype == torch.float32 and support.dtype == torch.float32
        dtype = torch.float32 if both32 else torch.float64
        x = x.to(dtype)
        if cast_support:
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
        self.support = support
        self.mean = xp.mean(support, axis=0, keepdims=True)
        self.values = support - self.mean
        if projection is None:
            self.proj = None
            self.keys = self.values
        else:
            self.proj = _projection_like(xp, projection, self.values, support.shape[1])
            self.keys = self.values @ self.proj.T
        self.sq_norms = xp.sum(self.keys * self.keys, axis=1)[None, :]

    def queries(self, x_chunk, t_chunk):
        xc = x_chunk - t_chunk * self.mean
        return xc if self.proj is None else xc @ self.proj.T

    def radius2(self) -> float:
        """``max_i ||P (s_i - mu)||^2`` (host float)."""
        return float(self.sq_norms.max())

    def mean_key(self):
        """``P mu`` (1, k): the projected support mean."""
        return self.mean if self.proj is None else self.mean @ self.proj.T


def _projection_like(xp, projection, like, d):
    """The projection as an array of the dtype/device of ``like``, shape-checked."""
    if xp.name == "torch" and is_torch(projection):
        _check_real_torch(projection, "projection")
        proj = projection
    else:
        proj = check_real_array(
            projection.detach().cpu().numpy() if is_torch(projection) else projection,
            "projection",
        )
    proj = xp.asarray(proj, like)
    if proj.ndim != 2 or proj.shape[1] != d:
        raise ValueError(f"projection must have shape (k, {d}), got {tuple(proj.shape)}.")
    return proj


def _support_mean(xp, support, rows, like):
    """Mean of the support rows (1, d), accumulated in float64 over chunks of ``rows`` rows
    (no full-size copy of the support), returned in the dtype/device of ``like``."""
    m = support.shape[0]
    acc = like if (xp.name == "torch" and like.device.type == "mps") else None
    total = None
    for start in range(0, m, rows):
        part = support[start : start + rows]
        part = xp.asarray(part, like) if acc is not None else _to_float64(xp, part)
        if xp.name == "torch":
            part = part.to(like.device)
        s = xp.sum(part, axis=0, keepdims=True)
        total = s if total is None else total + s
    return xp.asarray(total / m, like)


class _StreamGeometry:
    """Support geometry for streaming: the mean is computed once; chunks of ``rows`` support
    rows are cast, centred and projected one at a time by :meth:`blocks`.

    Never copies the whole support (the support itself is kept as given, in its own dtype).
    """

    def __init__(self, xp, support, projection, like, rows):
        self.xp = xp
        self.support = support
        self.rows = int(rows)
        self.like = like
        self.mean = _support_mean(xp, support, self.rows, like)
        d = support.shape[1]
        self.proj = None if projection is None else _projection_like(xp, projection, like, d)
        self.n_keys = d if self.proj is None else self.proj.shape[0]
        self.n_support = support.shape[0]

    def blocks(self):
        """Yield ``(values, keys, sq_norms)`` per support chunk: ``values = s - mu`` (c, d),
        ``keys = P values`` (c, k) and ``||keys||^2`` (1, c)."""
        xp = self.xp
        for start in range(0, self.n_support, self.rows):
            values = xp.asarray(self.support[start : start + self.rows], self.like) - self.mean
            keys = values if self.proj is None else values @ self.proj.T
            yield values, keys, xp.sum(keys * keys, axis=1)[None, :]

    def queries(self, x_chunk, t_chunk):
        xc = x_chunk - t_chunk * self.mean
        return xc if self.proj is None else xc @ self.proj.T

    def radius2(self) -> float:
        return max(float(sq.max()) for _, _, sq in self.blocks())

    def mean_key(self):
        """``P mu`` (1, k): the projected support mean."""
        return self.mean if self.proj is None else self.mean @ self.proj.T


class _RadiusCache:
    """One-entry cache of ``max_i ||P(s_i - mu)||^2`` for a Torch support.

    The float32 precision check needs this number on the host; an ODE solver evaluates the
    field many times with the same support tensor, so caching it avoids a device sync at every
    step. Keyed on the tensors' identity, version counter, dtype and device; tensors that
    require grad are not cached. Only the radius is cached (it only steers the float32
    fallback), never the centred support itself, so a stale entry (a tensor sharing memory
    with a NumPy array that was modified in place) cannot change a result beyond that choice.
    """

    def __init__(self):
        self._entry = None

    @staticmethod
    def _key(support, projection):
        import weakref

        items = [support] if projection is None else [support, projection]
        if not all(is_torch(z) and not z.requires_grad for z in items):
            return None
        return tuple((weakref.ref(z), z._version, z.dtype, z.device) for z in items)

    def radius2(self, geom, support, projection) -> float:
        key = self._key(support, projection)
        entry = self._entry
        if key is not None and entry is not None and len(key) == len(entry[0]):
            if all(
                a[0]() is not None and a[0]() is b[0]() and a[1:] == b[1:]
                for a, b in zip(key, entry[0], strict=True)
            ):
                return entry[1]
        value = geom.radius2()
        if key is not None:
            self._entry = (key, value)
        return value


_TORCH_RADIUS = _RadiusCache()


def _is_float32(xp, a) -> bool:
    return a.dtype == (xp.torch.float32 if xp.name == "torch" else np.float32)


def _to_float64(xp, a):
    if a is None or isinstance(a, float):
        return a
    if xp.name == "torch":
        return a.to(xp.torch.float64)
    return np.asarray(a, dtype=np.float64)


class _Problem:
    """Validated inputs of one field evaluation: queries, support geometry and coefficients.

    Float32 inputs whose logits would lose too much precision (``a R^2`` above
    :data:`FLOAT32_LOGIT_LIMIT`) are promoted to float64 here; :meth:`finish` casts results
    back to the caller's dtype.
    """

    def __init__(
        self,
        x,
        support,
        t,
        *,
        sigma_min,
        bandwidth,
        projection,
        chunk_size,
        support_chunk_size=None,
    ):
        self.xp, self.x, support = _prepare(x, support, cast_support=False)
        n = self.x.shape[0]
        self.out_dtype = self.x.dtype
        self.decay = 1.0 - float(sigma_min)
        self.user_chunk = _check_chunk(chunk_size, "chunk_size")
        #: (n, 1) boolean column of the rows in the hard-argmax limit (t = 0 with a finite
        #: callable h(0), see kernel_coefficients), or None when there are none.
        self.hard = None
        self.a_max = self._coefficients(t, n, sigma_min, bandwidth)
        #: Support rows per streamed chunk, or None for the dense path.
        self.support_rows = self._support_rows(support, projection, support_chunk_size)
        # float32 norms may overflow here; that is detected below and computed in float64.
        with np.errstate(over="ignore", invalid="ignore"):
            if self.support_rows is None:
                self.geom = _Geometry(self.xp, self._cast_support(support), projection)
            else:
                self.geom = _StreamGeometry(self.xp, support, projection, self.x, self.support_rows)
            check32 = _is_float32(self.xp, self.x) and not (
                self.xp.name == "torch" and self.x.device.type == "mps"
            )
            radius2 = self._radius2(support, projection) if check32 else 0.0
        # Promote when the logits would lose precision, or when ||P(s - mu)||^2 overflows
        # float32 (even at t = 0, where 0 * inf would give NaN weights).
        if check32 and (not np.isfinite(radius2) or self.a_max * radius2 > FLOAT32_LOGIT_LIMIT):
            self._promote(support, projection)

    @property
    def streaming(self) -> bool:
        return self.support_rows is not None

    def _cast_support(self, support):
        if self.xp.name == "torch":
            return support.to(device=self.x.device, dtype=self.x.dtype)
        return support.astype(self.x.dtype, copy=False)

    def _budget(self) -> int:
        """Elements of one explicit logits block (64 MiB of float64 on the host)."""
        if self.xp.name == "torch" and self.x.device.type == "cuda":
            return default_chunk_size(1, device=self.x.device, itemsize=self.x.element_size())
        return _BLOCK_ELEMENTS

    def _support_rows(self, support, projection, support_chunk_size) -> int | None:
        """Rows per support chunk when streaming, None for the dense path.

        Streaming is chosen when ``support_chunk_size`` (< m) is given, or automatically when
        the dense path's whole-support temporaries or a block of ``_STREAM_MIN_ROWS`` rows of
        logits (``m * max(d, k, 64)`` elements) would exceed the block budget.
        """
        m, d = support.shape
        rows = _check_chunk(support_chunk_size, "support_chunk_size")
        if rows is not None:
            return rows if rows < m else None
        shape = getattr(projection, "shape", None)
        k = int(shape[0]) if shape is not None and len(shape) == 2 else d
        width = max(d, k, _STREAM_MIN_ROWS)
        if m * width <= _BLOCK_ELEMENTS or m * width <= self._budget():
            return None
        n = self.x.shape[0]
        rows = self._budget() // max(min(max(n, 1), _STREAM_QUERY_ROWS), d, k, 1)
        return max(1, rows) if rows < m else None

    def _radius2(self, support, projection) -> float:
        if self.xp.name == "torch":
            return _TORCH_RADIUS.radius2(self.geom, support, projection)
        return self.geom.radius2()

    def _coefficients(self, t, n, sigma_min, bandwidth) -> float:
        """Set ``t, a, b, sigma_t`` (floats or (n, 1) columns); return ``max a`` (host float)."""
        xp = self.xp
        if xp.name == "torch" and is_torch(t) and t.ndim == 1:
            # Per-row times on the device: coefficients with Torch ops, no host round trip
            # (range check and max only; the check is skipped for tensors on accelerators).
            if t.shape[0] != n:
                raise ValueError(f"t has {t.shape[0]} entries but x has {n} rows.")
            check_bandwidth(bandwidth)
            dev = self.x.device
            a, b, sig = torch_coefficients(
                t,
                sigma_min=sigma_min,
                bandwidth=bandwidth,
                dtype=self.x.dtype,
                device=dev,
                validate=t.device.type == "cpu",
                limit=True,
            )
            if callable(bandwidth):  # only callables have rows in the hard-argmax limit
                hard = xp.torch.isinf(a)
                if bool(hard.any()):
                    self.hard = hard[:, None]
                    a = xp.torch.where(hard, xp.torch.zeros_like(a), a)
            self.t = t.to(device=dev, dtype=self.x.dtype)[:, None]
            self.a, self.b, self.sigma_t = a[:, None], b[:, None], sig[:, None]
            if not _is_float32(xp, self.x) or n == 0:
                return 0.0
            return float(a.max())
        t_arr = _times_to_numpy(t)
        a, b, sigma_t = kernel_coefficients(t_arr, sigma_min=sigma_min, bandwidth=bandwidth)
        hard = np.isinf(a)
        if hard.any():  # rows in the hard-argmax limit (t = 0, finite callable h(0))
            if hard.ndim and hard.shape[0] != n:
                raise ValueError(f"t has {hard.shape[0]} entries but x has {n} rows.")
            column = np.broadcast_to(hard.reshape(-1, 1), (n, 1))
            self.hard = (
                column
                if xp.name == "numpy"
                else xp.torch.as_tensor(column.copy(), device=self.x.device)
            )
            a = np.where(hard, 0.0, a)
        self.t = _as_column(t_arr, xp, self.x, n)
        self.a = _as_column(a, xp, self.x, n)
        self.b = _as_column(b, xp, self.x, n)
        self.sigma_t = _as_column(sigma_t, xp, self.x, n)
        return float(np.max(a)) if a.size else 0.0

    def _promote(self, support, projection):
        xp = self.xp
        self.x = _to_float64(xp, self.x)
        self.t, self.a, self.b, self.sigma_t = (
            _to_float64(xp, c) for c in (self.t, self.a, self.b, self.sigma_t)
        )
        if self.streaming:  # chunks are cast as they are read: no copy of the support
            self.geom = _StreamGeometry(xp, support, projection, self.x, self.support_rows)
            return
        self.geom = _Geometry(xp, _to_float64(xp, self._cast_support(support)), projection)

    def finish(self, result):
        """Cast a result back to the caller's dtype (after a float64 promotion)."""
        if result.dtype == self.out_dtype:
            return result
        if self.xp.name == "torch":
            return result.to(self.out_dtype)
        return result.astype(self.out_dtype)

    @property
    def step(self) -> int:
        """Queries per explicit ``(chunk, m)`` logits block (``(chunk, rows)`` if streaming)."""
        if self.user_chunk:
            return int(self.user_chunk)
        if self.streaming:
            return max(1, self._budget() // self.support_rows)
        m = self.geom.keys.shape[0]
        if self.xp.name == "torch" and self.x.device.type == "cuda":
            return default_chunk_size(m, device=self.x.device, itemsize=self.x.element_size())
        return default_chunk_size(m)

    def chunks(self):
        """Yield ``(start, stop, logits)`` over query blocks: the only O(n m) work."""
        g = self.geom
        step = self.step
        for start in range(0, max(self.x.shape[0], 1), step):  # one empty block if n = 0
            stop = min(self.x.shape[0], start + step)
            q = g.queries(self.x[start:stop], _slice(self.t, start, stop))
            yield start, stop, self.logits(q, g.keys, g.sq_norms, start, stop)

    def logits(self, q, keys, sq, start, stop, top=None):
        """Logits ``a <q, k_i> - b ||k_i||^2`` of query rows ``start:stop`` against ``keys``.

        Rows in the hard-argmax limit get the limit ``a -> inf``: ``-inf`` off
        ``argmax_i <q, k_i>`` (``top``, the row maximum over the whole support; over
        ``keys`` when None) and ``-b (||k_i||^2 + 2 <P mu, k_i>) = -b ||P s_i||^2 + const``
        on it, so ties are broken as the limit breaks them.
        """
        lin = q @ keys.T
        out = _slice(self.a, start, stop) * lin - _slice(self.b, start, stop) * sq
        if self.hard is None:
            return out
        xp = self.xp
        if top is None:
            top = xp.amax(lin, axis=1, keepdims=True)
        tie = -_slice(self.b, start, stop) * (sq + 2.0 * (self.geom.mean_key() @ keys.T))
        limit = xp.where(lin >= top, tie, -np.inf)
        return xp.where(self.hard[start:stop], limit, out)

    def attention_rows(self) -> int:
        """Queries per ``scaled_dot_product_attention`` call."""
        if self.user_chunk:
            return int(self.user_chunk)
        torch = self.xp.torch
        dev = self.x.device
        fused = dev.type == "cpu" or (
            dev.type == "cuda" and self.x.dtype in (torch.float16, torch.bfloat16, torch.float32)
        )
        if fused:  # flash / memory-efficient kernels: memory linear in n + m
            return max(1, self.x.shape[0])
        return self.step

    def velocity(self, mean):
        """``(m(x, t) - (1 - sigma_min) x) / sigma_t`` from the (uncentred) local mean."""
        if self.xp.name == "torch":  # two passes instead of three
            return self.xp.torch.sub(mean, self.x, alpha=self.decay).div_(self.sigma_t)
        return (mean - self.decay * self.x) / self.sigma_t


def _query_ranges(prob):
    """``(start, stop)`` of the query blocks; one empty block when there are no queries."""
    n, step = prob.x.shape[0], prob.step
    return [(start, min(n, start + step)) for start in range(0, max(n, 1), step)]


def _stream_stats(prob, *, divergence=False, neff=False):
    """One pass over the support chunks with an online log-sum-exp (streaming path).

    Per query ``i`` and support chunk ``c`` with logits ``l``: ``M <- max(M, max_c l)``, and
    every running sum ``A`` (of ``exp(l - M)`` times a per-key quantity) becomes
    ``A exp(M_old - M_new) + sum_c exp(l - M_new) * quantity``. Returned (each over all rows):

    * ``max`` (n, 1) and ``z = sum exp(l - M)`` (n, 1): ``lse = max + log z``;
    * ``mean`` (n, d): ``sum exp(l - M) (s - mu)``;
    * with ``divergence``: ``sq`` (n, 1), ``sum exp(l - M) ||P(s - mu)||^2``, and, with a
      projection, ``keys`` (n, k), ``sum exp(l - M) P(s - mu)``;
    * with ``neff``: ``z2 = sum exp(2 (l - M))`` (n, 1).

    The support chunks are the outer loop (each is cast, centred and projected once); the
    per-query-block states are replaced, never updated in place, so autograd works.
    """
    xp, g = prob.xp, prob.geom
    ranges = _query_ranges(prob)
    queries = [g.queries(prob.x[a:b], _slice(prob.t, a, b)) for a, b in ranges]
    tops = _stream_tops(prob, queries)
    states = [None] * len(ranges)
    for values, keys, sq in g.blocks():
        sq_col = sq.reshape(-1, 1)
        for i, (start, stop) in enumerate(ranges):
            logits = prob.logits(queries[i], keys, sq, start, stop, top=tops[i])
            old = states[i]
            top = xp.amax(logits, axis=1, keepdims=True)
            top = top if old is None else xp.maximum(old["max"], top)
            # Hard-limit rows have -inf logits off their argmax: a chunk (or all chunks so
            # far) may hold no finite logit, whose exponentials are 0 under any finite shift.
            shift = top if prob.hard is None else xp.where(top > -np.inf, top, 0.0)
            p = xp.exp(logits - shift)
            block = {"z": xp.sum(p, axis=1, keepdims=True), "mean": p @ values}
            if divergence:
                block["sq"] = p @ sq_col
                if g.proj is not None:
                    block["keys"] = p @ keys
            if neff:
                block["z2"] = xp.sum(p * p, axis=1, keepdims=True)
            if old is not None:
                scale = xp.exp(old["shift"] - shift)
                if prob.hard is not None:  # nothing accumulated yet: any finite scale
                    scale = xp.where(old["max"] > -np.inf, scale, 0.0)
                for name in block:
                    factor = scale * scale if name == "z2" else scale
                    block[name] = old[name] * factor + block[name]
            block["max"], block["shift"] = top, shift
            states[i] = block
    out = {name: xp.concat([st[name] for st in states], axis=0) for name in states[0]}
    out["max"] = out.pop("shift")  # the sums are relative to exp(shift): lse = shift + log z
    return out


def _stream_logit_blocks(prob):
    """Yield ``(i, logits)`` for query block ``i`` and each support chunk, chunk-major."""
    g = prob.geom
    ranges = _query_ranges(prob)
    queries = [g.queries(prob.x[a:b], _slice(prob.t, a, b)) for a, b in ranges]
    tops = _stream_tops(prob, queries)
    for _, keys, sq in g.blocks():
        for i, (start, stop) in enumerate(ranges):
            yield i, prob.logits(queries[i], keys, sq, start, stop, top=tops[i])


def _stream_tops(prob, queries):
    """Per query block, ``max_i <q, k_i>`` over the whole support (n_b, 1), for the rows in
    the hard-argmax limit: one extra pass over the support, only when there are such rows."""
    if prob.hard is None:
        return [None] * len(queries)
    xp, tops = prob.xp, [None] * len(queries)
    for _, keys, _ in prob.geom.blocks():
        for i, q in enumerate(queries):
            top = xp.amax(q @ keys.T, axis=1, keepdims=True)
            tops[i] = top if tops[i] is None else xp.maximum(tops[i], top)
    return tops


def _stream_matrix(prob, transform=None):
    """The (n, m) logits (or ``transform(i, logits)`` of them), assembled from streamed blocks."""
    xp = prob.xp
    n_blocks = len(_query_ranges(prob))
    columns = [[] for _ in range(n_blocks)]
    for i, logits in _stream_logit_blocks(prob):
        columns[i].append(logits if transform is None else transform(i, logits))
    return xp.concat([xp.concat(cols, axis=1) for cols in columns], axis=0)


def _attention_mean(prob):
    """Local mean ``sum_i w_i s_i`` (n, d) through the attention realization (Torch only).

    The weights see the centred queries and keys; the values are the support itself."""
    g = prob.geom
    n = prob.x.shape[0]
    if n == 0:
        return prob.x[:, :0] @ g.support[:0]
    rows = prob.attention_rows()
    out = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        q = g.queries(prob.x[start:stop], _slice(prob.t, start, stop))
        a = _slice(prob.a, start, stop)
        b = _slice(prob.b, start, stop)
        if isinstance(a, float) and _SCALAR_TIME_ENGINE.get(q.device.type) == "mask":
            out.append(bias_attention_mean(q, g.keys, g.support, a, b, g.sq_norms))
        else:
            out.append(lifted_attention_mean(q, g.keys, g.support, a, b))
    return out[0] if len(out) == 1 else prob.xp.concat(out, axis=0)


def _local_mean(prob):
    """Local mean ``sum_i w_i s_i``: attention engine on Torch, chunked GEMMs on NumPy, the
    online log-sum-exp over support chunks for large supports (both)."""
    if prob.streaming:
        stats = _stream_stats(prob)
        return stats["mean"] / stats["z"] + prob.geom.mean
    # Rows in the hard-argmax limit need explicit logits: the GEMM path (t = 0 only).
    if prob.xp.name == "torch" and _USE_ATTENTION and prob.hard is None:
        return _attention_mean(prob)
    return _reduce(prob, want_second=False)[0] + prob.geom.mean


# The Torch engine of the local mean / velocity ("attention" or the explicit GEMM blocks);
# a module switch for benchmarks and cross-checks, not public API.
_USE_ATTENTION = True
# How the per-key bias reaches SDPA when one time is shared by all queries, per device type:
# "mask" (broadcast additive mask, width d) or "lift" (extra key coordinate, width d + 1).
# Per-row times always lift. CPU: "mask", the faster of the two in benchmarks/bench_field.py
# (column "lift/SDPA, mask/SDPA" of docs/performance.md). CUDA: "lift" until measured there
# (`bench_field.py --device cuda` reports both).
_SCALAR_TIME_ENGINE = {"cpu": "mask", "cuda": "lift"}


def nw_logits(
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
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
        support_chunk_size=support_chunk_size,
    )
    if prob.streaming:
        return prob.finish(_stream_matrix(prob))
    return prob.finish(prob.xp.concat([logits for _, _, logits in prob.chunks()], axis=0))


def nw_weights(
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
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
        support_chunk_size=support_chunk_size,
    )
    xp = prob.xp
    if prob.streaming:  # two passes: the log-normalisers, then the normalised blocks
        stats = _stream_stats(prob)
        lse = stats["max"] + xp.log(stats["z"])
        ranges = _query_ranges(prob)
        return prob.finish(
            _stream_matrix(prob, lambda i, logits: xp.exp(logits - lse[slice(*ranges[i])]))
        )
    blocks = [xp.softmax(logits, axis=1) for _, _, logits in prob.chunks()]
    return prob.finish(xp.concat(blocks, axis=0))


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
    support_chunk_size: int | None = None,
) -> Any:
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
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
        support_chunk_size=support_chunk_size,
    )
    return prob.finish(_local_mean(prob))


def nw_velocity(
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
    """
    prob = _Problem(
        x,
        support,
        t,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        projection=projection,
        chunk_size=chunk_size,
        support_chunk_size=support_chunk_size,
    )
    return prob.finish(prob.velocity(_local_mean(prob)))


def nw_velocity_and_divergence(
    x: Any,
    support: Any,
    t: Any,
    *,
    sigma_min: float = 0.01,
    bandwidth: Bandwidth = "ot",
    projection: Any = None,
    chunk_size: int | None = None,
    support_chunk_size: int | None = None,
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
        support_chunk_size=support_chunk_size,
    )
    xp, g = prob.xp, prob.geom
    if prob.streaming:
        stats = _stream_stats(prob, divergence=True)
        centred = stats["mean"] / stats["z"]
        mean_p = centred if g.proj is None else stats["keys"] / stats["z"]
        trace = (stats["sq"] / stats["z"])[:, 0] - xp.sum(mean_p * mean_p, axis=1)
    elif g.proj is None:
        centred, second = _reduce(prob, want_second=True)
        trace = second - xp.sum(centred * centred, axis=1)
    else:
        centred, _ = _reduce(prob, want_second=False)
        # tr(P^T P Cov_w) = E_w ||P(s - mu)||^2 - ||P m_c||^2: the same reduction on P-values.
        mean_p, second_p = _reduce(prob, want_second=True, values=g.keys)
        trace = second_p - xp.sum(mean_p * mean_p, axis=1)
    a = prob.a if isinstance(prob.a, float) else prob.a[:, 0]
    sig = prob.sigma_t if isinstance(prob.sigma_t, float) else prob.sigma_t[:, 0]
    spread = a * trace
    if prob.hard is not None:  # a -> inf: the limit is 0 on one point, +inf over a tie
        spread = xp.where(prob.hard[:, 0] & (trace > 0), np.inf, spread)
    divergence = (spread - prob.decay * prob.x.shape[1]) / sig
    return prob.finish(prob.velocity(centred + g.mean)), prob.finish(divergence)


def nw_divergence(
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
        support_chunk_size=support_chunk_size,
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
    support_chunk_size: int | None = None,
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
        support_chunk_size=support_chunk_size,
    )
    xp = prob.xp
    if prob.streaming:  # (sum e^(l - M))^2 / sum e^(2 (l - M)): the same two log-sum-exps
        stats = _stream_stats(prob, neff=True)
        return prob.finish((stats["z"] * stats["z"] / stats["z2"])[:, 0])
    out = [
        xp.exp(2.0 * xp.logsumexp(logits, axis=1) - xp.logsumexp(2.0 * logits, axis=1))
        for _, _, logits in prob.chunks()
    ]
    return prob.finish(xp.concat(out, axis=0))


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
    xp, xq, supp = _prepare(x, support, cast_support=False)
    out_dtype = xq.dtype
    # float64 throughout (float32 inputs included): at t = 1 the distances are divided by
    # sigma_min^2, and float32 distances would cost ~1e-3 nats at sigma_min = 0.01.
    if not (xp.name == "torch" and xq.device.type == "mps"):
        xq = _to_float64(xp, xq)
    t_arr = _times_to_numpy(t)
    if t_arr.ndim != 0:
        raise ValueError("nw_log_density takes a scalar t.")
    t_f = float(t_arr)
    sigma_t = OTPath(sigma_min).sigma(t_f)
    m, d = supp.shape
    chunk_size = _check_chunk(chunk_size, "chunk_size")
    rows = _check_chunk(support_chunk_size, "support_chunk_size")
    if rows is None:
        rows = m if m * d <= _BLOCK_ELEMENTS else max(1, _BLOCK_ELEMENTS // max(d, 1))
    rows = min(rows, m)
    # Exact differences rather than the norm expansion: near t = 1 the distances are divided
    # by sigma_min^2, so the expansion's cancellation error would be amplified ~1e4 times.
    step = chunk_size or default_chunk_size(rows * d)
    chunks = [(j, min(m, j + rows)) for j in range(0, m, rows)]
    out = []
    for start in range(0, max(xq.shape[0], 1), step):
        lse = None
        for j0, j1 in chunks:
            diff = xq[start : start + step, None, :] - t_f * xp.asarray(supp[j0:j1], xq)[None, :, :]
            dist2 = xp.sum(diff * diff, axis=2)
            part = xp.logsumexp(-dist2 / (2.0 * sigma_t**2), axis=1)
            lse = part if lse is None else xp.logaddexp(lse, part)
        out.append(lse)
    log_p = xp.concat(out, axis=0) - float(np.log(m) + 0.5 * d * np.log(2.0 * np.pi * sigma_t**2))
    if xp.name == "torch":
        return log_p.to(out_dtype)
    return log_p.astype(out_dtype, copy=False)
