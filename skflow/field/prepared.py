"""The prepared field :class:`NWField`: a support validated, centred and planned once.

An ODE solver evaluates the field of one support 100-200 times. :class:`NWField` does the
per-support work once -- validation, the support mean, the centred keys and values, their
squared norms, the radius that steers the float32 precision check, the engine choice and the
SDPA layout of the keys -- and every method then only does the per-query work.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._array import get_backend, to_numpy
from .._validation import (
    check_bandwidth,
    check_choice,
    check_int,
    check_real,
    check_time_tolerance,
)
from ..paths import GaussianPath, as_path
from . import _dense, _stream
from ._call import FieldCall
from ._coefficients import Bandwidth, coefficient_columns, times
from ._density import path_log_density
from ._geometry import DenseGeometry, StreamGeometry
from ._plan import FLOAT32_LOGIT_LIMIT, block_budget, check_chunk, stream_rows
from ._screened import screened_local_mean, screening_applies
from ._sdpa import attention_mean
from .pruned import ClusteredSupport, evaluated_share, pruned_local_mean

__all__ = ["ATTENTION_BIASES", "ENGINES", "FALLBACKS", "NWField"]

#: Engines of :class:`NWField`: ``"auto"`` (SDPA for the Torch local mean and velocity,
#: explicit GEMM blocks otherwise), ``"attention"`` (SDPA, Torch only), ``"gemm"`` and
#: ``"pruned"`` (the certified pruned local mean of :mod:`skflow.field.pruned` for the
#: velocity and local mean of one large support; the other methods stay dense).
ENGINES = ("auto", "attention", "gemm", "pruned")
#: How the per-key bias reaches SDPA when one time is shared by all queries: ``"mask"`` (a
#: broadcast additive mask, width d), ``"lift"`` (an extra key coordinate, width d + 1) or
#: ``"auto"``: ``"mask"`` on CPU, the faster of the two in ``benchmarks/bench_field.py``, and
#: ``"lift"`` on CUDA until measured there. Per-row times always lift.
ATTENTION_BIASES = ("auto", "mask", "lift")
#: How a float32 velocity or local mean is computed where float32 logits lose precision
#: (``a(t) R^2 > float32_logit_limit``): ``"screened"``, the pairs found by float32 logits
#: recomputed in float64 (:mod:`skflow.field._screened`; one dense single support, else as
#: ``"float64"``), or ``"float64"``, every pair in float64.
FALLBACKS = ("screened", "float64")
#: ``engine="pruned"``: queries of the probe that decides whether an evaluation prunes.
PRUNE_PROBE_ROWS = 64
# Scalar times whose coefficients a field keeps (and validated query layouts).
_MAX_CACHED_TIMES = 1024
#: ``engine="pruned"``, ``pruned_max_share="auto"``: the evaluated share of pairs above which
#: an evaluation runs dense, per working dtype; about where single evaluations of the two
#: engines cost the same (m = 1e5, d = 16, 256 queries, one Torch thread, gmm-like supports;
#: ``benchmarks/bench_large_support.py --per-t`` shows the float64 side at 4096 queries).
#: float32 is lower: its dense engine is the fused float32 kernel, while late pruned pairs run
#: in float64 for the certificate.
PRUNED_MAX_SHARE = {"float64": 0.2, "float32": 0.04}


class NWField:
    """Exact Nadaraya-Watson velocity field of a support, prepared once for many evaluations.

    For the OT path ``X_t = t X_1 + sigma_t X_0`` and the empirical measure of the support
    ``S``, ``u_t(x) = (sum_i w_i(x, t) s_i - (1 - sigma_min) x) / sigma_t`` with
    ``w = softmax_i(-||P(x - t s_i)||^2 / (2 tau^2))`` (see :mod:`skflow.field`). The
    functions ``skflow.field.nw_*`` build one of these per call; estimators and solvers build
    one per support and reuse it at every stage.

    Parameters
    ----------
    support : array of shape (m, d) or (..., m, d)
        NumPy array or Torch tensor (any device). Leading dimensions are a batch of supports
        (then queries are ``(..., n, d)`` with broadcastable batch dimensions).
    sigma_min : float, default=0.01
        Noise level of the path at ``t = 1`` (of the default ``OTPath(sigma_min)``; ignored
        when ``path`` is given).
    path : GaussianPath, optional
        The probability path (:mod:`skflow.paths`); default ``OTPath(sigma_min)``. The
        weights are ``softmax_i(-||P(x - alpha_t s_i)||^2 / (2 tau^2))`` and the velocity
        ``(gain_t m - decay_t x) / sigma_t`` with the path's coefficients.
    bandwidth : {"ot"} or float or callable, default="ot"
        See :func:`skflow.field.kernel_coefficients`.
    projection : array of shape (k, d) or (..., k, d), optional
        Weights from ``P x`` and ``P s_i`` (anisotropic kernel ``M = P^T P``); leading
        dimensions broadcast against the support's (e.g. one projection per head).
    chunk_size : int, optional
        Queries per explicit logits block; default keeps a block near 64 MiB.
    support_chunk_size : int, optional
        Stream a single support in chunks of this many rows (online log-sum-exp); default:
        streaming when ``m * max(d, k, 64)`` exceeds the block budget.
    engine : {"auto", "attention", "gemm"}, default="auto"
        See :data:`ENGINES`.
    attention_bias : {"auto", "mask", "lift"}, default="auto"
        See :data:`ATTENTION_BIASES`.
    float32_logit_limit : float, default=1e4
        float32 evaluations are computed in float64 where ``a(t) max_i ||P(s_i - mu)||^2``
        exceeds this (their logits' rounding error is about ``eps_32`` times it); ``inf``
        stays in float32 throughout. (The pruned engine has its own per-block rule.)
    float32_fallback : {"screened", "float64"}, default="screened"
        How those evaluations of the velocity and local mean are made precise (see
        :data:`FALLBACKS`): ``"screened"`` computes float32 logits, keeps the (query, key)
        pairs within a proven window of each query's largest logit and recomputes only those
        in float64 (the result equals the float64 field to float64 rounding; the keys left
        out weigh below ``4e-18`` together); ``"float64"`` recomputes every pair. Weights,
        logits, ``n_eff`` and divergences always use ``"float64"``.
    pruned_rtol : float, default=1e-10
        ``engine="pruned"``: a cluster of support points is skipped for a query only when all
        skipped clusters together provably weigh at most about this.
    pruned_max_share : float in [0, 1], "auto" or None, default="auto"
        ``engine="pruned"``: an evaluation of at least ``2 * PRUNE_PROBE_ROWS`` queries
        first estimates, on ``PRUNE_PROBE_ROWS`` evenly spaced queries
        (:func:`skflow.field.pruned.evaluated_share`: bounds and best clusters only), the
        share of (query, support point) pairs the pruned engine would evaluate; above this
        share the whole evaluation runs on the dense engine (nothing skipped, bound 0; a
        float32 evaluation only where the dense float32 rule ``a(t) R^2 <=
        float32_logit_limit`` holds). ``"auto"``: ``PRUNED_MAX_SHARE`` of the evaluation's
        dtype (0.2 float64, 0.04 float32). None: always prune.
    n_clusters : int, optional
        ``engine="pruned"``: clusters of the support index (default ``ceil(2 sqrt(m))``).
    time_tolerance : float, default=inf
        Times up to this far outside [0, 1] are evaluated at the nearest end: the field is
        frozen, ``u_t = u_1`` for ``t > 1`` and ``u_0`` for ``t < 0`` (a continuous
        extension, so the flow on [0, 1] is unchanged). The default accepts every finite time,
        so third-party adaptive solvers that probe stages a whole step past ``t = 1`` and
        interpolate back (torchdiffeq's ``dopri5``, ``flow_matching``'s ``ODESolver``) work on
        :meth:`velocity` with no wrapper. A finite value (e.g. ``1e-6``, rounding only) makes
        farther times raise a ``ValueError`` that names the value.
    backend : array backend, optional
        The NumPy/Torch backend of the call (of :func:`skflow._array.get_backend`), decided
        once by the caller: an estimator passes the one of its public call. None: decided
        from ``support``, which must be an array of it.

    Attributes
    ----------
    last_velocity_error_ : ndarray of shape (n,) or None
        ``engine="pruned"``: the proven bound on ``||u_pruned - u||`` of each row of the last
        velocity or local-mean evaluation (for the local mean: times ``sigma_t``), rounding
        included; None before the first one.
    max_velocity_error_ : float
        ``engine="pruned"``: the largest of those bounds over every evaluation so far.
    last_evaluated_fraction_ : float or None
        ``engine="pruned"``: the share of (query, support point) pairs computed in the last
        velocity or local-mean evaluation (1.0 when it ran dense); None before the first one.

    Notes
    -----
    The support is prepared (a centred copy in its own floating dtype) when the field is
    built: modifying the support in place afterwards does not change the field's evaluations
    in that dtype; build a new field instead. The float64 copy of a float32 support (for
    float64 queries and the precision fallback) is made at its first use, and a streamed
    support (see ``support_chunk_size``) is not copied at all: its chunks are read at every
    evaluation.

    Examples
    --------
    >>> import numpy as np
    >>> field = NWField(np.array([[1.0, 1.0]]), sigma_min=0.01)
    >>> field.velocity(np.zeros((1, 2)), 0.0)   # one point: straight line to it
    array([[1., 1.]])
    >>> field.effective_sample_size(np.zeros((3, 2)), 0.5).shape
    (3,)
    """

    def __init__(
        self,
        support: Any,
        *,
        sigma_min: float = 0.01,
        path: GaussianPath | None = None,
        bandwidth: Bandwidth = "ot",
        projection: Any = None,
        chunk_size: int | None = None,
        support_chunk_size: int | None = None,
        engine: str = "auto",
        attention_bias: str = "auto",
        float32_logit_limit: float = FLOAT32_LOGIT_LIMIT,
        float32_fallback: str = "screened",
        pruned_rtol: float = 1e-10,
        n_clusters: int | None = None,
        pruned_max_share: float | str | None = "auto",
        time_tolerance: float = math.inf,
        backend: Any = None,
    ):
        self.path = as_path(path, sigma_min)
        self.sigma_min = self.path.sigma_min
        check_bandwidth(bandwidth)
        self.bandwidth = bandwidth
        self.chunk_size = check_chunk(chunk_size, "chunk_size")
        self.engine = check_choice(engine, "engine", ENGINES)
        self.attention_bias = check_choice(attention_bias, "attention_bias", ATTENTION_BIASES)
        self.float32_logit_limit = float(float32_logit_limit)
        self.float32_fallback = check_choice(float32_fallback, "float32_fallback", FALLBACKS)
        # the one NumPy/Torch decision of the field, unless its caller made it
        self.xp = get_backend(support) if backend is None else backend
        self.xp.check_kind(support)
        if self.engine == "attention" and not self.xp.fused_attention:
            raise ValueError("engine='attention' needs Torch tensors (SDPA); got NumPy arrays.")
        self.support = _check_support(self.xp, support)
        self.projection = projection
        self.pruned_rtol = check_real(pruned_rtol, "pruned_rtol", low=0.0, high=1.0, low_open=True)
        self.n_clusters = check_int(n_clusters, "n_clusters", allow_none=True)
        self.pruned_max_share = (
            pruned_max_share
            if pruned_max_share is None
            or (isinstance(pruned_max_share, str) and pruned_max_share == "auto")
            else check_real(pruned_max_share, "pruned_max_share", low=0.0, high=1.0)
        )
        self.time_tolerance = check_time_tolerance(time_tolerance)
        self.last_velocity_error_, self.max_velocity_error_ = None, 0.0
        self.last_evaluated_fraction_: float | None = None
        rows = check_chunk(support_chunk_size, "support_chunk_size")
        if self.engine == "pruned" and (self.batched or rows is not None):
            raise ValueError(
                "engine='pruned' indexes one whole support (m, d): no batch of supports and "
                "no support_chunk_size."
            )
        self._stream_rows = None if self.engine == "pruned" else self._plan_streaming(rows)
        self._geometries: dict[Any, Any] = {}
        # Per-call work a solver repeats at every stage, done once: query layouts already
        # validated (type, shape, dtype, device) and the coefficients of each scalar time.
        self._checked: set = set()
        self._coefficients: dict[float, Any] = {}
        # Prepared now, so the field is a snapshot of the support (a streamed support is read
        # at every call instead: no copy of it is made).
        xp = self.xp
        self._geometry(xp.float32 if self.support.dtype == xp.float32 else xp.float64)

    # -- preparation -----------------------------------------------------------------------
    @property
    def batched(self) -> bool:
        """Whether the support carries leading batch dimensions."""
        return self.support.ndim > 2

    @property
    def streaming(self) -> bool:
        """Whether the support is read in chunks (online log-sum-exp)."""
        return self._stream_rows is not None

    @property
    def support_chunk_rows(self) -> int | None:
        """Rows of the support read per chunk when :attr:`streaming`, else None."""
        return self._stream_rows

    def _plan_streaming(self, support_chunk_size: int | None) -> int | None:
        m, d = self.support.shape[-2:]
        if self.batched:
            if support_chunk_size is not None and support_chunk_size < m:
                raise ValueError("support_chunk_size (streaming) needs a single support (m, d).")
            return None
        shape = getattr(self.projection, "shape", None)
        k = int(shape[-2]) if shape is not None and len(shape) >= 2 else d
        device = self.xp.device(self.support)
        itemsize = 4 if self.support.dtype == self.xp.float32 else 8
        budget = block_budget(device, itemsize)
        return stream_rows(m, d, k, 1024, support_chunk_size, budget)

    def _geometry(self, dtype: Any) -> Any:
        """Support geometry in ``dtype``, built on first use and kept."""
        geom = self._geometries.get(dtype)
        if geom is None:
            xp, support = self.xp, self.support
            # float32 norms may overflow here; that is detected by the precision check.
            with np.errstate(over="ignore", invalid="ignore"):
                if self.streaming:
                    like = xp.empty(dtype, support)
                    geom = StreamGeometry(xp, support, self.projection, like, self._stream_rows)
                else:
                    cast = xp.cast(support, dtype)
                    geom = DenseGeometry(xp, cast, self.projection)
            self._geometries[dtype] = geom
        return geom

    # -- one evaluation --------------------------------------------------------------------
    def _call(self, x: Any, t: Any, screen: bool = False) -> tuple[FieldCall, Any]:
        """The evaluation at queries ``x`` and times ``t`` and the caller's dtype.

        ``screen``: a float32 call promoted to float64 keeps its float32 queries and
        geometry for the screened local mean (``float32_fallback="screened"``)."""
        xp = self.xp
        x = self._check_queries(x)
        both32 = x.dtype == xp.float32 and self.support.dtype == xp.float32
        dtype = xp.float32 if both32 else xp.float64
        x = xp.cast(x, dtype)
        out_dtype = x.dtype
        check32 = both32 and xp.device_type(x) != "mps"  # MPS has no float64 to promote to
        check32 = check32 and self.engine != "pruned"  # which checks its blocks itself
        coef = self._coefficients.get(t) if type(t) is float else None
        if coef is None:
            coef = self._coefficient_columns(x, t, need_max=check32)
            self._remember(t, coef)
        geom = self._geometry(dtype)
        if check32:
            radius2 = geom.radius2()
            # Promote when the logits would lose precision, or when ||P(s - mu)||^2
            # overflows float32 (even at t = 0, where 0 * inf would give NaN weights).
            if not np.isfinite(radius2) or coef.a_max * radius2 > self.float32_logit_limit:
                f64 = xp.float64
                x32, geom32 = x, geom
                x = xp.cast(x, f64)
                # recomputed, not cast: float32 coefficients would carry their rounding
                # (relative 6e-8 of a(t), i.e. a(t) R^2 6e-8 in the logits) into float64
                coef = self._coefficient_columns(x, t, need_max=False)
                geom = self._geometry(f64)
                call = FieldCall(xp, x, coef, geom, self.chunk_size)
                screen = screen and self.float32_fallback == "screened"
                if screen and np.isfinite(radius2) and screening_applies(call):
                    call.screen = (x32, geom32)
                return call, out_dtype
        return FieldCall(xp, x, coef, geom, self.chunk_size), out_dtype

    def _coefficient_columns(self, x: Any, t: Any, need_max: bool) -> Any:
        """The path coefficients at ``t`` for the rows of ``x``, in ``x``'s dtype."""
        return coefficient_columns(
            self.xp,
            x,
            t,
            path=self.path,
            bandwidth=self.bandwidth,
            need_max=need_max,
            tolerance=self.time_tolerance,
        )

    def _remember(self, t: Any, coef: Any) -> None:
        """Keep the coefficients of a scalar time (a solver meets each stage time twice, and
        every time again for the next batch of rows); bounded, for long adaptive runs."""
        if type(t) is float and coef.hard is None and isinstance(coef.sigma_t, float):
            if len(self._coefficients) >= _MAX_CACHED_TIMES:
                self._coefficients.clear()
            self._coefficients[t] = coef

    def _check_queries(self, x: Any) -> Any:
        # A solver passes its own state at every stage: a layout validated once is trusted.
        key = self.xp.layout_key(x)
        if key is not None:
            if key in self._checked:
                return x
            x = self._validate_queries(x)
            if len(self._checked) < _MAX_CACHED_TIMES:
                self._checked.add(key)
            return x
        return self._validate_queries(x)

    def _validate_queries(self, x: Any) -> Any:
        xp, support = self.xp, self.support
        xp.check_kind(x)  # refuses a mix of NumPy and Torch
        x = xp.check_real(x, "x")
        xp.check_device(x, support, "x", "support")
        if x.ndim < 2 or (x.ndim != 2 and self.streaming):
            raise ValueError(
                f"x and support must be 2-D arrays (n, d) and (m, d); got {tuple(x.shape)} and "
                f"{tuple(support.shape)}."
            )
        if x.shape[-1] != support.shape[-1]:
            raise ValueError(
                f"x has {x.shape[-1]} features but support has {support.shape[-1]} features."
            )
        return x

    def _finish(self, result: Any, out_dtype: Any) -> Any:
        """Cast a result back to the caller's dtype (after a float64 promotion)."""
        if result.dtype == out_dtype:
            return result
        return self.xp.cast(result, out_dtype)

    def _local_mean(self, call: FieldCall) -> Any:
        if self.engine == "pruned" and call.hard is None:
            mean = self._pruned_mean(call)
            if mean is not None:
                return mean
        if call.screen is not None:
            return screened_local_mean(call, *call.screen)
        if call.geom.streaming:
            st = _stream.stats(call)
            return st["mean"] / st["z"] + call.geom.mean
        # Rows in the hard-argmax limit need explicit logits: the GEMM path (t = 0 only).
        if self.xp.fused_attention and self.engine != "gemm" and call.hard is None:
            return attention_mean(call, self._bias(call))
        return _dense.reduce(call, want_second=False)[0] + call.geom.mean

    def _pruned_mean(self, call: FieldCall) -> Any:
        """Local mean by the certified pruned engine; records the velocity error bounds.

        Returns None when the probe finds that this evaluation prunes too little to pay (the
        caller then runs the dense engine, which skips nothing: the recorded bound is 0).
        """
        g = call.geom
        if getattr(g, "pruned_index", None) is None:  # clustered once per geometry
            values = None if g.proj is None else g.values
            g.pruned_index = ClusteredSupport(g.keys, values, n_clusters=self.n_clusters)
        queries = call.queries(0, call.n)
        if not self._pruning_pays(g.pruned_index, queries, call):
            self.last_velocity_error_, self.last_evaluated_fraction_ = np.zeros(call.n), 1.0
            return None
        res = pruned_local_mean(g.pruned_index, queries, call.a, call.b, rtol=self.pruned_rtol)
        sigma = call.sigma_t
        sigma = np.asarray(sigma if isinstance(sigma, float) else to_numpy(sigma)[..., 0])
        bound = to_numpy(res.mean_error).astype(np.float64) / sigma.astype(np.float64)
        if not (isinstance(call.gain, float) and call.gain == 1.0):  # u scales m by gain_t
            gain = call.gain if isinstance(call.gain, float) else to_numpy(call.gain)[..., 0]
            bound = bound * np.abs(np.asarray(gain, dtype=np.float64))
        self.last_velocity_error_ = np.broadcast_to(bound, (call.n,)).copy()
        self.last_evaluated_fraction_ = float(res.evaluated_fraction)
        if call.n:
            self.max_velocity_error_ = max(self.max_velocity_error_, float(bound.max()))
        return res.mean + g.mean

    def _pruning_pays(self, index: ClusteredSupport, queries: Any, call: FieldCall) -> bool:
        """Whether the pruned engine should run: its evaluated share on a probe of the rows.

        Early in the flow every cluster carries weight and the pruned engine evaluates every
        pair at a higher cost per pair than the dense engine's fused kernel. A probe of
        ``PRUNE_PROBE_ROWS`` evenly spaced queries (about 1/64 of a 4096-query call) estimates
        the share of pairs that must be evaluated (``evaluated_share``: the cluster bounds and
        each probe query's best cluster, not the whole evaluation); above
        ``pruned_max_share`` the whole call runs dense. A float32 call runs dense only where
        the dense engine's float32 rule holds (``a(t) R^2 <= float32_logit_limit``, true
        early in the flow, where nothing prunes); elsewhere it prunes, under the pruned
        engine's per-block precision rule.
        """
        share, n, f32 = self.pruned_max_share, call.n, call.x.dtype != self.xp.float64
        if share is None or n < 2 * PRUNE_PROBE_ROWS:
            return True
        if share == "auto":
            share = PRUNED_MAX_SHARE["float32" if f32 else "float64"]
        if f32:
            a_max = call.a if isinstance(call.a, float) else float(to_numpy(call.a).max())
            radius2 = call.geom.radius2()
            if not (np.isfinite(radius2) and a_max * radius2 <= self.float32_logit_limit):
                return True
        rows = np.linspace(0, n - 1, PRUNE_PROBE_ROWS).round().astype(np.int64)
        idx = self.xp.index(rows, queries)

        def pick(c: Any) -> Any:
            return c if isinstance(c, float) else c[idx]

        probe = evaluated_share(
            index, queries[idx], pick(call.a), pick(call.b), rtol=self.pruned_rtol
        )
        return probe <= share

    def _bias(self, call: FieldCall) -> str:
        if self.attention_bias != "auto":
            return self.attention_bias
        return "mask" if call.x.device.type == "cpu" else "lift"

    # -- public evaluations ----------------------------------------------------------------
    def logits(self, x: Any, t: Any) -> Any:
        """Logits of the NW weights up to a per-row constant, shape (..., n, m).

        Parameters
        ----------
        x : array of shape (..., n, d)
            Queries (states of the flow at time ``t``).
        t : float or array broadcastable to (..., n)
            Times in [0, 1].

        Returns
        -------
        logits : array of shape (..., n, m)
        """
        call, out = self._call(x, t)
        engine = _stream if call.geom.streaming else _dense
        return self._finish(engine.logits(call), out)

    def weights(self, x: Any, t: Any) -> Any:
        """NW weights ``w_i(x, t)``, shape (..., n, m); rows sum to one."""
        call, out = self._call(x, t)
        engine = _stream if call.geom.streaming else _dense
        return self._finish(engine.weights(call), out)

    def local_mean(self, x: Any, t: Any) -> Any:
        """NW local mean ``sum_i w_i(x, t) s_i``, shape (..., n, d)."""
        call, out = self._call(x, t, screen=True)
        return self._finish(self._local_mean(call), out)

    def velocity(self, x: Any, t: Any) -> Any:
        """Exact velocity ``u_t(x) = (m(x, t) - (1 - sigma_min) x) / sigma_t``, (..., n, d)."""
        call, out = self._call(x, t, screen=True)
        return self._finish(call.velocity(self._local_mean(call)), out)

    def velocity_and_divergence(self, x: Any, t: Any) -> tuple[Any, Any]:
        """Velocity (..., n, d) and its exact divergence (..., n) in one pass.

        ``div u_t(x) = (a(t) tr(P^T P Cov_w(S)) - (1 - sigma_min) d) / sigma_t``, ``Cov_w``
        the ``w``-weighted covariance of the support.
        """
        call, out = self._call(x, t)
        centred, trace = _centred_mean_and_trace(call)
        xp = call.xp
        a = call.a if isinstance(call.a, float) else call.a[..., 0]
        sig = call.sigma_t if isinstance(call.sigma_t, float) else call.sigma_t[..., 0]
        spread = a * trace
        if call.hard is not None:  # a -> inf: the limit is 0 on one point, +inf over a tie
            spread = xp.where(call.hard[..., 0] & (trace > 0), np.inf, spread)
        gain, decay = (c if isinstance(c, float) else c[..., 0] for c in (call.gain, call.decay))
        divergence = (gain * spread - decay * call.x.shape[-1]) / sig
        velocity = call.velocity(centred + call.geom.mean)
        return self._finish(velocity, out), self._finish(divergence, out)

    def divergence(self, x: Any, t: Any) -> Any:
        """Exact divergence of the velocity (no Hutchinson estimator), shape (..., n)."""
        return self.velocity_and_divergence(x, t)[1]

    def effective_sample_size(self, x: Any, t: Any) -> Any:
        """Kish ``1 / sum_i w_i^2`` (..., n), from log-sum-exps (stable when weights collapse)."""
        call, out = self._call(x, t)
        if call.geom.streaming:  # (sum e^(l - M))^2 / sum e^(2 (l - M))
            st = _stream.stats(call, neff=True)
            return self._finish((st["z"] * st["z"] / st["z2"])[:, 0], out)
        return self._finish(_dense.effective_sample_size(call), out)

    def log_density(self, x: Any, t: float) -> Any:
        """Log-density (n,) of the path marginal ``(1/m) sum_i N(t s_i, sigma_t^2 I)``.

        Only for the OT bandwidth without projection and a single support (the path's own
        marginal); computed in float64 (see :func:`skflow.field.nw_log_density`).
        """
        if self.bandwidth != "ot" or self.projection is not None or self.batched:
            raise ValueError(
                "log_density is the OT path's marginal: it needs bandwidth='ot', no "
                "projection and a single support (m, d)."
            )
        t_arr = times(t, tolerance=self.time_tolerance)
        if t_arr.ndim != 0:
            raise ValueError("nw_log_density takes a scalar t.")
        x = self._check_queries(x)
        xp = self.xp
        both32 = x.dtype == xp.float32 and self.support.dtype == xp.float32
        x = xp.cast(x, xp.float32 if both32 else xp.float64)
        return path_log_density(
            self.xp,
            x,
            self.support,
            float(t_arr),
            path=self.path,
            chunk_size=self.chunk_size,
            support_chunk_size=self._stream_rows,
        )


def _centred_mean_and_trace(call: FieldCall) -> tuple[Any, Any]:
    """Centred local mean (..., n, d) and ``tr(P^T P Cov_w(S))`` (..., n)."""
    xp, g = call.xp, call.geom
    if g.streaming:
        st = _stream.stats(call, divergence=True)
        centred = st["mean"] / st["z"]
        mean_p = centred if g.proj is None else st["keys"] / st["z"]
        return centred, (st["sq"] / st["z"])[:, 0] - xp.sum(mean_p * mean_p, axis=1)
    if g.proj is None:
        centred, second = _dense.reduce(call, want_second=True)
        return centred, second - xp.sum(centred * centred, axis=-1)
    centred, _ = _dense.reduce(call, want_second=False)
    # tr(P^T P Cov_w) = E_w ||P(s - mu)||^2 - ||P m_c||^2: the same reduction on P-values.
    mean_p, second_p = _dense.reduce(call, want_second=True, values=g.keys)
    return centred, second_p - xp.sum(mean_p * mean_p, axis=-1)


def _check_support(xp: Any, support: Any) -> Any:
    support = xp.check_real(support, "support")
    if support.ndim < 2:
        raise ValueError(
            f"support must be a 2-D array (m, d) (or batched (..., m, d)); got shape "
            f"{tuple(support.shape)}."
        )
    if support.shape[-2] == 0:
        raise ValueError("support is empty: at least one support point is required.")
    return support
