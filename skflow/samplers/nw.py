"""NWFlowSampler: the exact, zero-parameter flow of a support set as a scikit-learn estimator."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import field as F
from .._array import BACKENDS, get_namespace, is_torch, resolve_device, use_torch_backend
from .._validation import (
    check_bandwidth,
    check_choice,
    check_data,
    check_finite_output,
    check_int,
    check_real,
    check_real_array,
    check_times,
)
from ..exceptions import AccuracyWarning, MemorizationWarning
from ..paths import OTPath
from ._base import SAMPLING_BATCH_SIZE, BaseFlowSampler
from ._batch import DENSE_SUPPORT_ELEMENTS

__all__ = ["NWFlowSampler"]

KERNELS = ("isotropic", "diagonal", "mahalanobis")
#: ``fit`` warns (:class:`~skflow.exceptions.MemorizationWarning`) when the terminal KDE's
#: typical displacement ``sigma_min * sqrt(d)`` is below this fraction of the support's median
#: nearest-neighbour distance: samples are then the support points up to a perturbation 100
#: times smaller than the spacing of the data (e.g. raw 0-16 digit pixels at the default
#: ``sigma_min``: 0.08 in d = 64, against pixel values 0-16).
COPY_FRACTION = 0.01
#: A callable bandwidth bounded at ``t = 0`` (finite ``h(0)``) starts the flow from a hard
#: argmax, so the change of variables of ``score_samples`` is integrated down to this time only
#: (see :meth:`NWFlowSampler.log_density_with_error`) ...
DENSITY_T_FLOOR = 1e-8
#: ... and a row whose log-determinant still grows faster than this many nats per e-fold of
#: ``t`` there has density 0 (``log_density = -inf``).
DENSITY_ZERO_RATE = 1e-3
#: Near ``t = 0`` the rows between two argmax cells relax at a rate of about
#: ``|s_i - s_j|^2 / (2 h(0)^2)`` per e-fold of ``t``, which an explicit solver needs about as
#: many steps for: beyond this bound (estimated from the support's radius) ``score_samples``
#: refuses a bounded callable bandwidth up front instead of exhausting its step budget.
DENSITY_MAX_STIFFNESS = 1000.0
#: Cost cap (query rows x support rows x features) of the nearest-neighbour check in ``fit``.
_COPY_CHECK_BUDGET = 2**28
#: Velocity engines of :class:`NWFlowSampler` (its ``engine`` parameter).
SAMPLER_ENGINES = ("auto", "dense", "pruned")


def _kernel_shape(cov: np.ndarray, kernel: str, reg: float) -> np.ndarray | None:
    """Shape matrix ``G`` (k, k) of a kernel geometry for data with covariance ``cov`` (k, k).

    ``"diagonal"``: ``G = diag(1 / sqrt(var_j + r))``; ``"mahalanobis"``:
    ``G = (cov + r I)^(-1/2)`` (symmetric inverse square root), with the ridge
    ``r = reg * tr(cov) / k`` relative to the mean variance. ``G`` is then rescaled so that
    ``tr(G^T G cov) = tr(cov)``: the mean squared distance between support points is the same
    as under the isotropic kernel, only the shape changes. Returns None (isotropic) when the
    covariance is zero, where no shape can be estimated.
    """
    k = cov.shape[0]
    total = float(np.trace(cov))
    if kernel == "isotropic" or not total > 0:
        return None
    ridge = reg * total / k
    if kernel == "diagonal":
        G = np.diag(1.0 / np.sqrt(np.diag(cov) + ridge))
    else:
        evals, evecs = np.linalg.eigh(cov + ridge * np.eye(k))
        evals = np.maximum(evals, ridge)  # guard rounding; cov + ridge I is PD
        G = (evecs / np.sqrt(evals)) @ evecs.T
    scale2 = total / float(np.trace(G.T @ G @ cov))
    return np.sqrt(scale2) * G


def _median_nn_distance(X: np.ndarray) -> float:
    """Median distance from evenly spaced rows of ``X`` (m, d) to their nearest other row.

    At most 256 query rows (fewer on large supports, so the brute-force cost stays under
    ``_COPY_CHECK_BUDGET``); the support is centred and scanned in blocks. Duplicates count
    (distance 0). NaN when ``m < 2``.
    """
    m, d = X.shape
    if m < 2:
        return float("nan")
    n_q = int(np.clip(_COPY_CHECK_BUDGET // (m * d), 16, 256))
    rows = np.unique(np.linspace(0, m - 1, min(m, n_q)).astype(np.intp))
    Xc = X.astype(np.float64) - X.mean(axis=0, dtype=np.float64)
    Q = Xc[rows]
    q2 = np.einsum("ij,ij->i", Q, Q)[:, None]
    best = np.full(rows.shape[0], np.inf)
    for start in range(0, m, 8192):
        B = Xc[start : start + 8192]
        d2 = q2 - 2.0 * (Q @ B.T) + np.einsum("ij,ij->i", B, B)[None, :]
        own = np.flatnonzero((rows >= start) & (rows < start + B.shape[0]))
        d2[own, rows[own] - start] = np.inf  # a row is not its own neighbour
        best = np.minimum(best, d2.min(axis=1))
    return float(np.sqrt(max(float(np.median(best)), 0.0)))


def _is_transformer(obj: Any) -> bool:
    return hasattr(obj, "fit") and hasattr(obj, "transform")


def _linear_part(transformer: Any, X: np.ndarray) -> np.ndarray:
    """Matrix ``P`` (k, d) of a fitted affine transformer ``T(x) = P x + b``.

    ``b = T(0)`` and ``P[:, j] = T(e_j) - b``; affinity is then verified on the rows of ``X``.
    """
    name = type(transformer).__name__
    d = X.shape[1]

    def apply(A):
        out = transformer.transform(A)
        if hasattr(out, "toarray"):
            out = out.toarray()
        out = np.asarray(out, dtype=np.float64)
        if out.ndim != 2 or out.shape[0] != A.shape[0]:
            raise ValueError(
                f"projection {name} returned an array of shape {out.shape}; expected "
                f"({A.shape[0]}, k)."
            )
        return out

    offset = apply(np.zeros((1, d)))[0]
    P = (apply(np.eye(d)) - offset).T
    got = apply(np.asarray(X, dtype=np.float64))
    pred = X.astype(np.float64) @ P.T + offset
    tol = 1e-6 * (1.0 + np.max(np.abs(got))) if got.size else 0.0
    if got.shape != pred.shape or np.max(np.abs(got - pred), initial=0.0) > tol:
        raise ValueError(
            f"projection {name} is not affine on the support (transform(x) != P x + b): "
            "only linear/affine transformers (PCA, TruncatedSVD, random projections, "
            "FlowProjection, ...) can define a kernel geometry. Use a SamplingPipeline for "
            "nonlinear transformers."
        )
    if not np.all(np.isfinite(P)):
        raise ValueError(f"projection {name} has a non-finite linear part.")
    return P


class NWFlowSampler(BaseFlowSampler):
    """Exact support-conditioned flow: the Nadaraya-Watson velocity field of a support set.

    ``fit(S)`` stores the support; sampling integrates
    ``u_t(x) = (sum_i w_i(x, t) s_i - (1 - sigma_min) x) / sigma_t`` from Gaussian noise at
    ``t = 0`` to ``t = 1``, where ``w(x, t)`` are Gaussian-kernel weights with the OT bandwidth
    ``h(t) = sigma_t / t``. With the exact bandwidth the flow transports ``N(0, I)`` to the
    Gaussian KDE of the support with bandwidth ``sigma_min``; ``score_samples`` returns that
    density in closed form. Nothing is learned: conditioning on a new support is free
    (``sample(n, support=S_new)``).

    **Kernel geometry.** The weights can use an anisotropic metric,
    ``w_i ∝ exp(-||P (x - t s_i)||^2 / (2 sigma_t^2))``, while the values stay the support
    points ``s_i`` in input space, so samples always live in input space. The matrix
    ``P = projection_`` (k, d) combines a linear map ``L`` (the ``projection``; the identity
    when None) and a shape ``G`` (k, k) estimated, at ``fit``, from the covariance ``C`` of the
    projected support ``L S`` (the ``kernel``): ``P = G L``.

    - ``kernel="isotropic"``: ``G = I``.
    - ``kernel="diagonal"``: ``G = diag(1 / sqrt(C_jj + r))`` (per-feature scale).
    - ``kernel="mahalanobis"``: ``G = (C + r I)^(-1/2)``, the symmetric inverse square root.

    The ridge is relative, ``r = kernel_reg * tr(C) / k``. ``G`` is normalized so that
    ``tr(G^T G C) = tr(C)``: the mean squared distance between support points, hence the
    overall kernel width relative to the data, equals that of the isotropic kernel, and only
    the *shape* changes. (Normalizing the singular values of ``G`` instead would let directions
    with no support variance, e.g. when ``m < d``, dominate the normalization; those directions
    cancel from the weights anyway.) The result is invariant to a global rescaling of the data.
    The ``projection`` itself is used as given (not rescaled); an orthonormal one such as
    ``PCA(whiten=False)`` keeps input-space distances inside the retained subspace. Only the
    linear part of an affine transformer matters: the kernel sees differences
    ``x - t s_i``. An in-context ``support=`` reuses the fitted ``projection_``.

    Parameters
    ----------
    bandwidth : {"ot"} or float or callable, default="ot"
        ``"ot"``: the exact ``h(t) = sigma_t / t``. A positive float scales it; a callable maps
        an array of times in [0, 1] to bandwidths (rescaled coordinates ``x / t``). Only the
        weights change; the affine map of the path stays the same. The field at ``t = 0`` is
        the limit ``t -> 0+``, so a callable must return at 0 its limit ``h(0+)``: ``inf``
        (growing faster than ``t^(-1/2)``, e.g. ``c sigma_t / t``: uniform weights at 0) or a
        positive float (bounded ``h``: one-hot weights on ``argmax_i <x, s_i>`` at 0); other
        callables raise ``ValueError`` when ``t = 0`` is evaluated (see
        :func:`skflow.field.kernel_coefficients`).
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` (in (0, 1)); the terminal KDE's bandwidth.
    kernel : {"isotropic", "diagonal", "mahalanobis"}, default="isotropic"
        Shape of the kernel of the weights, estimated from the (projected) support at ``fit``
        and normalized as described above.
    projection : None, array-like of shape (k, n_features) or transformer, default=None
        Linear map applied before the kernel. An array is used as is. A scikit-learn
        transformer (PCA, TruncatedSVD, GaussianRandomProjection,
        :class:`~skflow.projection.FlowProjection`, ...) is cloned and fitted on the support in
        ``fit``; it must be affine: its linear part is read off by transforming the identity
        matrix and the zero vector, and checked on the support rows (``ValueError``
        otherwise). Its parameters are searchable (``projection__n_components``).
    kernel_reg : float, default=0.1
        Relative ridge of the ``"diagonal"`` and ``"mahalanobis"`` kernels:
        ``kernel_reg * mean variance`` is added to the diagonal of the (projected) support
        covariance, which keeps few-shot supports (``m`` close to or below ``d``) from
        amplifying directions they barely sample.
    solver : {"euler", "midpoint", "heun", "rk4", "dopri5"}, default="heun"
        ODE solver (see :mod:`skflow.solvers`).
    n_steps : int, default=100
        Steps of the fixed-step solvers.
    rtol, atol : float, default=1e-5
        Tolerances of ``"dopri5"`` when it is the sampling ``solver``.
    density_rtol, density_atol : float, default=1e-8
        Relative and absolute tolerances of the adaptive change-of-variables solve of
        :meth:`score_samples` where there is no closed form (on the state ``x e^(-s)`` and
        the log-determinant, see :meth:`log_density_with_error`); independent of ``solver``.
        The defaults keep the log-density within about ``1e-3`` nats of the exact value at
        ``sigma_min = 0.01`` (measured in ``docs/user_guide.rst``); the error scales about
        linearly with them.
    density_max_error : float, default=0.1
        :meth:`score_samples` issues an :class:`~skflow.exceptions.AccuracyWarning` when
        the error estimate of a row (see :meth:`log_density_with_error`) exceeds this many
        nats.
    backend : {"auto", "numpy", "torch"}, default="auto"
        Array library of the field and the solver. ``"auto"`` picks Torch on a CUDA device;
        on the CPU it picks NumPy only for fitted supports whose size lies where NumPy
        measured faster (``skflow._array.AUTO_NUMPY_SUPPORT_CPU``, calibrated by
        ``benchmarks/bench_small_support.py``), Torch (fused attention) otherwise (see
        :func:`skflow._array.use_torch_backend`). Inputs and outputs are NumPy arrays
        whatever the backend.
    device : {"cpu", "cuda", "auto"} or "cuda:N", default="cpu"
        Torch device (Torch backend only).
    chunk_size : int, optional
        Queries per block of the ``(chunk, m)`` kernel matrix; default keeps it near 64 MiB.
    support_chunk_size : int, optional
        Support rows per chunk when the support is streamed (online log-sum-exp over support
        chunks, memory independent of ``m``). By default supports too large for a dense
        block (``m * max(d, 64) > 2**23``, e.g. ``m > 131072`` in ``d = 64``) are streamed
        automatically; see :func:`skflow.field.nw_logits`. Results do not depend on it
        beyond rounding.
    engine : {"auto", "dense", "pruned"}, default="auto"
        How the velocity is computed. ``"dense"``: every support point at every evaluation
        (:class:`skflow.field.NWField`'s dense and attention engines). ``"pruned"``: the
        certified pruned engine (:mod:`skflow.field.pruned`): the support is clustered once
        and, per block of queries, clusters whose total weight is provably below
        ``pruned_rtol`` are skipped; the proven bound on the velocity error of every
        evaluation is kept (``sampling_error_bound_``). ``"auto"``: dense, for now: over a
        whole sampling run the pruned engine has not measured faster than dense on any
        support tried (m = 1e5, d = 16 and 64; ``benchmarks/bench_large_support.py``,
        docs/large_support.md), because early in the flow nothing is prunable. Weights, ``n_eff``,
        divergences and densities are always dense.
    pruned_rtol : float, default=1e-10
        Target of the neglected weight per query for ``engine="pruned"``.
    support_size : int, optional
        Support rows per task in the few-shot :meth:`score` (half of each task when None).
    n_jobs : int, optional
        Workers for sampling: rows are split into batches of 4096 that are integrated
        independently with joblib (``None`` or 1: serially). Results do not depend on
        ``n_jobs``; under ``joblib.parallel_config(backend="dask")`` the batches run on a Dask
        cluster.
    random_state : int, RandomState instance or None, default=None
        Seed of the starting noise when a method is not given one.

    Attributes
    ----------
    support_ : ndarray of shape (m, n_features)
        The support set (float32 if given in float32, float64 otherwise).
    n_features_in_ : int
        Number of features.
    path_ : OTPath
        The probability path.
    projection_ : ndarray of shape (k, n_features) or None
        The matrix ``P = G L`` of the weights (float64); None for the isotropic kernel
        without projection.
    projection_transformer_ : transformer or None
        The fitted clone of ``projection`` when it is a transformer.
    sampling_error_bound_ : float
        Set by :meth:`sample` and :meth:`sample_trajectories` when the pruned engine ran: the
        largest proven bound on ``||u_pruned - u||`` over every field evaluation of the call
        (absolute, in the units of the velocity).

    See Also
    --------
    sklearn.neighbors.KernelDensity : the terminal law of the exact flow.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import NWFlowSampler
    >>> S = np.random.RandomState(0).normal(size=(20, 2))
    >>> sampler = NWFlowSampler(sigma_min=0.05, random_state=0).fit(S)
    >>> sampler.sample(5).shape
    (5, 2)
    >>> sampler.weights(np.zeros((3, 2)), 0.0).sum(axis=1)
    array([1., 1., 1.])

    An anisotropic kernel, and a PCA projection of the weights (samples stay 2-D):

    >>> NWFlowSampler(kernel="mahalanobis").fit(S).projection_.shape
    (2, 2)
    >>> from sklearn.decomposition import PCA
    >>> proj = NWFlowSampler(projection=PCA(n_components=1), random_state=0).fit(S)
    >>> proj.projection_.shape, proj.sample(3).shape
    ((1, 2), (3, 2))
    """

    def __init__(
        self,
        bandwidth: Any = "ot",
        sigma_min: float = 0.01,
        *,
        kernel: str = "isotropic",
        projection: Any = None,
        kernel_reg: float = 0.1,
        solver: str = "heun",
        n_steps: int = 100,
        rtol: float = 1e-5,
        atol: float = 1e-5,
        density_rtol: float = 1e-8,
        density_atol: float = 1e-8,
        density_max_error: float = 0.1,
        backend: str = "auto",
        device: str = "cpu",
        chunk_size: int | None = None,
        support_chunk_size: int | None = None,
        engine: str = "auto",
        pruned_rtol: float = 1e-10,
        support_size: int | None = None,
        n_jobs: int | None = None,
        random_state: Any = None,
    ):
        self.bandwidth = bandwidth
        self.sigma_min = sigma_min
        self.kernel = kernel
        self.projection = projection
        self.kernel_reg = kernel_reg
        self.solver = solver
        self.n_steps = n_steps
        self.rtol = rtol
        self.atol = atol
        self.density_rtol = density_rtol
        self.density_atol = density_atol
        self.density_max_error = density_max_error
        self.backend = backend
        self.device = device
        self.chunk_size = chunk_size
        self.support_chunk_size = support_chunk_size
        self.engine = engine
        self.pruned_rtol = pruned_rtol
        self.support_size = support_size
        self.n_jobs = n_jobs
        self.random_state = random_state

    # -- fitting ---------------------------------------------------------------------------
    def _validate_params(self) -> None:
        self.path_ = OTPath(self.sigma_min)
        check_bandwidth(self.bandwidth)
        self._validate_solver_params()
        for name in ("density_rtol", "density_atol", "density_max_error"):
            check_real(getattr(self, name), name, low=0.0, low_open=True)
        check_choice(self.engine, "engine", SAMPLER_ENGINES)
        check_real(self.pruned_rtol, "pruned_rtol", low=0.0, high=1.0, low_open=True)
        check_choice(self.backend, "backend", BACKENDS)
        use_torch_backend(self.backend, self.device)
        for name in ("chunk_size", "support_chunk_size"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name)
        check_choice(self.kernel, "kernel", KERNELS)
        check_real(self.kernel_reg, "kernel_reg", low=0.0, low_open=True)
        proj = self.projection
        if proj is not None and not _is_transformer(proj):
            if isinstance(proj, str) or hasattr(proj, "fit"):
                raise TypeError(
                    "projection must be None, an array of shape (k, n_features) or a "
                    f"transformer with fit and transform, got {proj!r}."
                )

    def _fit_geometry(self, X: np.ndarray) -> None:
        """Set ``projection_`` (and ``projection_transformer_``) from the support ``X``."""
        d = X.shape[1]
        proj = self.projection
        self.projection_transformer_ = None
        if proj is None:
            L = None
        elif _is_transformer(proj):
            self.projection_transformer_ = clone(proj).fit(X)
            L = _linear_part(self.projection_transformer_, X)
        else:
            try:
                L = check_real_array(proj, "projection").astype(np.float64)
            except (TypeError, ValueError):
                raise TypeError(
                    f"projection must be a numeric array of shape (k, {d}), got {proj!r}."
                ) from None
            if L.ndim != 2 or L.shape[0] < 1 or L.shape[1] != d:
                raise ValueError(f"projection must have shape (k, {d}) with k >= 1, got {L.shape}.")
            if not np.all(np.isfinite(L)):
                raise ValueError("projection contains NaN or infinite values.")
        # The normalized shape G does not change when the covariance is scaled, so the data
        # are divided by a power of two first (exact): huge or tiny supports stay finite.
        X64 = X.astype(np.float64)
        top = float(np.max(np.abs(X64)))
        X64 = X64 / (math.ldexp(1.0, math.frexp(top)[1] - 1) if top > 0 else 1.0)
        Xc = X64 - X64.mean(axis=0)
        Z = Xc if L is None else Xc @ L.T
        cov = Z.T @ Z / X.shape[0]
        G = _kernel_shape(cov, self.kernel, float(self.kernel_reg))
        if G is not None and not np.all(np.isfinite(G)):
            raise ValueError(
                f"the {self.kernel} kernel's shape is not finite for this support (its "
                "covariance overflows or underflows after the projection); rescale the data."
            )
        if G is None:
            self.projection_ = None if L is None else L
        else:
            self.projection_ = G if L is None else G @ L

    def fit(self, X: Any, y: Any = None) -> NWFlowSampler:
        """Condition on the support set ``X``.

        Parameters
        ----------
        X : array-like of shape (m, n_features)
            Support set (at least one row).
        y : None
            Ignored.

        Returns
        -------
        self : NWFlowSampler
        """
        self._validate_params()
        X = check_data(
            validate_data, self, X, dtype=[np.float64, np.float32], ensure_min_samples=1
        )
        self._fit_geometry(X)
        self.support_ = X.copy()
        self._warn_if_copier(X)
        return self

    def _warn_if_copier(self, X: np.ndarray) -> None:
        """One :class:`MemorizationWarning` when ``sigma_min`` makes the terminal law copy ``X``.

        With the OT bandwidth (or a float scale of it) the terminal law is the Gaussian KDE of
        the support with bandwidth ``sigma_min``: a sample is a support point plus noise of
        norm about ``sigma_min * sqrt(d)``. Below ``COPY_FRACTION`` of the median
        nearest-neighbour distance of the support, samples are copies (a callable bandwidth
        keeps the weights wide at ``t = 1`` and is not checked).
        """
        if callable(self.bandwidth):
            return
        spacing = _median_nn_distance(X)
        spread = float(self.sigma_min) * math.sqrt(X.shape[1])
        if spacing > 0 and spread < COPY_FRACTION * spacing:
            warnings.warn(
                f"sigma_min={self.sigma_min:g} is tiny against the scale of the data: samples "
                f"lie about sigma_min*sqrt(d)={spread:.3g} from a support point, while support "
                f"points lie {spacing:.3g} apart (median nearest-neighbour distance), so the "
                "samples are near-copies of the support. sigma_min is in the units of the "
                "data: standardise it (sklearn.preprocessing.StandardScaler, e.g. in a "
                "SamplingPipeline) or raise sigma_min (a fraction of that distance).",
                MemorizationWarning,
                stacklevel=3,
            )

    # -- backend ---------------------------------------------------------------------------
    def _use_torch(self, adaptive: bool | None = None) -> bool:
        # "auto" decides from the fitted support's size, so one estimator keeps one backend
        # even when it is conditioned in context on supports of other sizes; adaptive solves
        # (the dopri5 solver, the density's change of variables) have their own rule
        m = self.support_.shape[0] if hasattr(self, "support_") else None
        if adaptive is None:
            adaptive = self.solver == "dopri5"
        return use_torch_backend(self.backend, self.device, n_support=m, adaptive=adaptive)

    def _to_backend(self, a: np.ndarray, adaptive: bool | None = None) -> Any:
        if not self._use_torch(adaptive):
            return a
        import torch

        device = resolve_device(self.device)
        if device.startswith("cuda") and not torch.cuda.is_available():
            # e.g. a model fitted on a GPU machine and unpickled on a CPU-only one: the
            # fitted state is NumPy, so switching the device is all that is needed.
            raise ValueError(
                f"device={self.device!r} but CUDA is not available here; use "
                "set_params(device='cpu') (the fitted state is device independent)."
            )
        return torch.as_tensor(a, device=device)

    def _projection(self, like: Any) -> Any:
        """``projection_`` on the backend (and device) of the support ``like``."""
        P = getattr(self, "projection_", None)
        if P is None or not is_torch(like):
            return P
        import torch

        return torch.as_tensor(P, device=like.device)

    def _kwargs(self, support: Any) -> dict:
        return {
            "sigma_min": self.sigma_min,
            "bandwidth": self.bandwidth,
            "projection": self._projection(support),
            "chunk_size": self.chunk_size,
            "support_chunk_size": self.support_chunk_size,
        }

    def _batchable(self, support: np.ndarray) -> bool:
        # the pruned engine indexes one support, and streaming (support_chunk_size, or a
        # support too large for a dense block) reads one support in chunks: those batches
        # run task by task
        m, d = support.shape[-2:]
        return (
            super()._batchable(support)
            and self.engine != "pruned"
            and self.support_chunk_size is None
            and m * max(d, 64) <= DENSE_SUPPORT_ELEMENTS
        )

    def _pruned(self, support: Any) -> bool:
        return self.engine == "pruned" and support.ndim == 2  # batches run dense

    def _prepared(self, support: Any) -> F.NWField:
        """The field of a (backend) support, prepared once for all its evaluations."""
        if self._pruned(support):
            return F.NWField(
                support, **self._kwargs(support), engine="pruned", pruned_rtol=self.pruned_rtol
            )
        return F.NWField(support, **self._kwargs(support))

    def _field(self, support: Any):
        field = self._prepared(support)
        if field.engine != "pruned":
            return lambda t, x: field.velocity(x, t)
        self.sampling_error_bound_ = 0.0

        def velocity(t, x):
            out = field.velocity(x, t)
            self.sampling_error_bound_ = field.max_velocity_error_
            return out

        return velocity

    def _call(self, method: str, X, t, support):
        check_is_fitted(self)
        self._validate_params()
        batch = self._batch_inputs(X, t, support)
        if batch is not None:  # (B, n, d) queries against (B, m, d) supports
            X, support, t = batch
        else:
            support = self._check_support(support)
            X = self._check_queries(X)
            t = check_times(t)
        # Mixed float32/float64 inputs are computed in float64 by the field, which casts the
        # support chunk by chunk when it streams it (no full-size copy here).
        field = self._prepared(self._to_backend(support))
        out = self._to_numpy(getattr(field, method)(self._to_backend(X), t))
        if method == "divergence" and callable(self.bandwidth):
            # at t = 0 a bandwidth bounded there gives weights shared between support points
            # only on cell boundaries, where the divergence is truly +inf (it grows like 1/t)
            check_finite_output(np.where(np.isposinf(out), 0.0, out), f"nw_{method}'s result")
            return out
        return check_finite_output(out, f"nw_{method}'s result")

    # -- the field -------------------------------------------------------------------------
    def velocity(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Exact velocity ``u_t(X)`` of the flow conditioned on the support.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
            States at time ``t``.
        t : float or array-like of shape (n,)
            Times in [0, 1] (both ends included).
        support : array-like of shape (m, n_features), optional
            In-context support; the fitted one when None.

        Returns
        -------
        V : ndarray of shape (n, n_features)
        """
        return self._call("velocity", X, t, support)

    def weights(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Nadaraya-Watson weights ``w_i(X, t)``.

        Returns
        -------
        W : ndarray of shape (n, m)
            Rows are probability vectors.
        """
        return self._call("weights", X, t, support)

    def effective_sample_size(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Kish effective sample size ``1 / sum_i w_i^2`` of the weights at ``(X, t)``.

        Returns
        -------
        n_eff : ndarray of shape (n,)
            ``m`` at ``t = 0``; tends to 1 as the kernel collapses on the nearest neighbour.
        """
        return self._call("effective_sample_size", X, t, support)

    def divergence(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Exact divergence of the velocity field at ``(X, t)``.

        With a callable bandwidth bounded at ``t = 0`` the divergence at ``t = 0`` is ``+inf``
        on the boundaries between the support points' cells (where the weights stay shared; it
        grows like ``1/t`` there) and finite elsewhere.

        Returns
        -------
        div : ndarray of shape (n,)
        """
        return self._call("divergence", X, t, support)

    # -- densities -------------------------------------------------------------------------
    def _closed_form_density(self) -> bool:
        return self.bandwidth == "ot" and getattr(self, "projection_", None) is None

    def score_samples(self, X: Any, *, support: Any = None) -> np.ndarray:
        """Log-density of the flow's terminal law at ``X``.

        With ``bandwidth="ot"`` and the isotropic kernel the exactly integrated flow samples
        the Gaussian KDE of the support with bandwidth ``sigma_min``, whose log-density is
        returned in closed form (identical to
        ``KernelDensity(bandwidth=sigma_min).score_samples``). For any other bandwidth (a
        float, even ``1.0``, or a callable) and for any non-isotropic geometry (``kernel`` or
        ``projection``) there is no closed form: the log-density is obtained by the
        instantaneous change of variables along the exact flow, integrated backwards from
        ``t = 1`` to ``t = 0`` with an adaptive Dormand-Prince solver of its own (tolerances
        ``density_rtol``, ``density_atol``; independent of ``solver`` and ``n_steps``) in the
        variable ``tau = -log(sigma_t)``, where the field is smooth, see
        :meth:`log_density_with_error`. An :class:`~skflow.exceptions.AccuracyWarning` is
        issued when the error estimate of a row exceeds ``density_max_error`` nats.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        support : array-like of shape (m, n_features), optional

        Returns
        -------
        log_density : ndarray of shape (n,)
            float32 when ``X`` and the support are float32, float64 otherwise.
        """
        log_p, err = self.log_density_with_error(X, support=support)
        worst = float(np.max(err, initial=0.0))
        if worst > self.density_max_error:
            warnings.warn(
                f"score_samples: the estimated error of the log-density reaches {worst:.3g} "
                f"nats (> density_max_error={self.density_max_error}) for "
                f"{int(np.sum(err > self.density_max_error))} of {err.size} rows; lower "
                "density_rtol/density_atol or rescale the data.",
                AccuracyWarning,
                stacklevel=2,
            )
        return log_p

    def log_density_with_error(
        self, X: Any, *, support: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Log-density of the terminal law and an estimate of its absolute error.

        Without a closed form (see :meth:`score_samples`) the log-density is
        ``log N(x_0; 0, I) - int_0^1 div u_t(x_t) dt`` along the flow line through ``x``.
        It is integrated in ``s = -log(sigma_min) - tau``, ``tau = -log(sigma_t)``
        (``dt / dtau = sigma_t / (1 - sigma_min)``), on the state
        ``(w, l) = (x e^(-s), int div u dt)``:

        ``dw/ds = -e^(-s) m_w(x) / (1 - sigma_min)``,
        ``dl/ds = div u_t(x) sigma_t / (1 - sigma_min)``,

        with ``m_w`` the NW local mean and the exact divergence (including the metric
        ``P^T P`` of a projection). Both right-hand sides are bounded where ``sigma_t -> 0``
        (``w`` stays within the support's convex hull plus ``sigma_min |x_0|``), whereas in
        ``t`` the velocity grows like ``1 / sigma_t``. The solve is adaptive (``"dopri5"``,
        per-row steps, tolerances ``density_rtol``/``density_atol``) and runs in float64.

        The error estimate is the difference to a second solve with 10x looser tolerances.
        The global error scales about linearly with the tolerance, so this is about the
        error of the looser solve and typically exceeds that of the returned one (about 10x);
        it is an estimate, not a bound: over the rows of ``benchmarks/bench_likelihood.py``
        the smallest ratio estimate / actual error at the default tolerances is about 0.9
        (see ``docs/user_guide.rst``).

        Parameters
        ----------
        X : array-like of shape (n, n_features)
            Points at which the density is evaluated.
        support : array-like of shape (m, n_features), optional
            In-context support; the fitted one when None.

        Returns
        -------
        log_density : ndarray of shape (n,)
            float32 when ``X`` and the support are float32, float64 otherwise.
        error : ndarray of shape (n,)
            Estimated absolute error in nats (float64); zeros for the closed form, which is
            exact up to rounding.

        Examples
        --------
        >>> import numpy as np
        >>> from skflow import NWFlowSampler
        >>> S = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
        >>> s = NWFlowSampler(bandwidth=1.0, sigma_min=0.1).fit(S)
        >>> log_p, err = s.log_density_with_error(S)
        >>> ref = NWFlowSampler(sigma_min=0.1).fit(S).score_samples(S)
        >>> bool(np.max(np.abs(log_p - ref)) < 1e-4), bool(np.max(err) < 1e-3)
        (True, True)
        """
        check_is_fitted(self)
        self._validate_params()
        support = self._check_support(support)
        X = self._check_queries(X)
        out32 = X.dtype == np.float32 and support.dtype == np.float32
        if self._closed_form_density():
            # float64 throughout: float32 distances lose ~1e-3 nats at sigma_min = 0.01.
            field = F.NWField(
                self._to_backend(support.astype(np.float64)),
                sigma_min=self.sigma_min,
                chunk_size=self.chunk_size,
                support_chunk_size=self.support_chunk_size,
            )
            log_p = field.log_density(self._to_backend(X.astype(np.float64)), 1.0)
            log_p = check_finite_output(self._to_numpy(log_p), "nw_log_density's result")
            err = np.zeros(log_p.shape)
        else:
            X64, S64 = X.astype(np.float64), support.astype(np.float64)
            rtol, atol = float(self.density_rtol), float(self.density_atol)
            log_p = self._flow_log_density(X64, S64, rtol, atol)
            loose = self._flow_log_density(X64, S64, 10.0 * rtol, 10.0 * atol)
            both_zero = np.isneginf(log_p) & np.isneginf(loose)  # density 0 in both solves
            with np.errstate(invalid="ignore"):
                err = np.where(both_zero, 0.0, np.abs(log_p - loose))
        if out32:  # float64 values beyond float32's range would silently become -inf
            with np.errstate(over="ignore"):
                log_p = check_finite_output(log_p.astype(np.float32), "score_samples (float32)")
        return log_p, err

    def _ode_log_density(self, X: Any, support: Any) -> np.ndarray:
        """Change-of-variables log-density (float64), also where a closed form exists."""
        check_is_fitted(self)
        self._validate_params()
        S = self._check_support(support).astype(np.float64)
        X = self._check_queries(X).astype(np.float64)
        return self._flow_log_density(X, S, float(self.density_rtol), float(self.density_atol))

    def _flow_log_density(
        self, X: np.ndarray, support: np.ndarray, rtol: float, atol: float
    ) -> np.ndarray:
        """One adaptive solve of the change of variables in ``s`` (float64 in, float64 out)."""
        S, d = self._to_backend(support, adaptive=True), X.shape[1]
        decay = self.path_.decay
        t_floor = DENSITY_T_FLOOR if self._bounded_bandwidth(support) else 0.0
        # sigma_t = sigma_min e^s = 1 - decay t: the end of the solve is t = t_floor
        s_end = -math.log(float(self.sigma_min)) + math.log1p(-decay * t_floor)
        field = self._prepared(S)

        def rhs(s, state):
            xp, n = get_namespace(state), state.shape[0]
            s = np.broadcast_to(np.asarray(s, dtype=np.float64), (n,))
            growth = np.exp(s)  # x = w e^s, sigma_t = sigma_min e^s
            sigma = np.minimum(float(self.sigma_min) * growth, 1.0)
            t = np.clip((1.0 - sigma) / decay, 0.0, 1.0)
            g = xp.asarray(growth.reshape(-1, 1), state)
            x = state[:, :d] * g
            v, div = field.velocity_and_divergence(x, t)
            sig = xp.asarray(sigma.reshape(-1, 1), state)
            mean = v * sig + decay * x  # m_w(x), from u = (m_w - decay x) / sigma_t
            dl = div[:, None] * sig / decay
            return xp.concat([-mean / (g * decay), dl], axis=1)

        parts = []
        for start in range(0, X.shape[0], SAMPLING_BATCH_SIZE):
            xb = self._to_backend(X[start : start + SAMPLING_BATCH_SIZE], adaptive=True)
            xp = get_namespace(xb)
            state0 = xp.concat([xb, xp.full((xb.shape[0], 1), 0.0, xb)], axis=1)
            try:
                sol = self._solve_adaptive(rhs, state0, (0.0, s_end), rtol=rtol, atol=atol)
            except ValueError as exc:  # the sampling advice (solver, rtol) does not apply here
                raise ValueError(
                    f"score_samples: the change-of-variables solve failed ({exc}) Lower "
                    "density_rtol/density_atol, or rescale the data (e.g. StandardScaler)."
                ) from exc
            parts.append(self._to_numpy(sol.y).astype(np.float64))
        end = np.concatenate(parts, axis=0) if parts else np.zeros((0, d + 1))
        x0, log_det = end[:, :d] * math.exp(s_end), end[:, d]
        zero = np.zeros(X.shape[0], dtype=bool)
        if t_floor > 0:
            x0, log_det, zero = self._density_floor(field, x0, log_det, t_floor)
        log_p0 = -0.5 * np.sum(x0**2, axis=1) - 0.5 * d * np.log(2 * np.pi)
        log_p = check_finite_output(np.where(zero, 0.0, log_p0 - log_det), "score_samples")
        return np.where(zero, -np.inf, log_p)

    def _bounded_bandwidth(self, support: np.ndarray) -> bool:
        """Whether the bandwidth is a callable with a finite ``h(0)`` (hard argmax at 0);
        ``ValueError`` when the support is too spread out against ``h(0)`` to integrate."""
        if not callable(self.bandwidth):
            return False
        a0, b0, _ = F.kernel_coefficients(0.0, sigma_min=self.sigma_min, bandwidth=self.bandwidth)
        if not np.isinf(a0):
            return False
        h0 = math.sqrt(0.5 / float(b0))  # b(0) = 1 / (2 h(0)^2)
        Z = support - support.mean(axis=0)
        P = getattr(self, "projection_", None)
        with np.errstate(over="ignore", invalid="ignore"):
            radius = float(np.max(np.linalg.norm(Z if P is None else Z @ P.T, axis=1)))
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
        return True

    def _density_floor(self, field, x, log_det, t):
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
        d, decay = x.shape[1], self.path_.decay
        xb = self._to_backend(x, adaptive=True)  # the backend the density solve runs on
        times = self._to_backend(np.full(x.shape[0], t), adaptive=True)
        v, div = field.velocity_and_divergence(xb, times)
        v, div = self._to_numpy(v).astype(np.float64), self._to_numpy(div).astype(np.float64)
        sigma = 1.0 - decay * t
        rate = t * (div + d * decay / sigma)  # t a tr(Cov_w P^T P) / sigma_t
        zero = rate > DENSITY_ZERO_RATE
        # the rest of int_0^t div dt for one-hot weights: div = -d decay / sigma_t
        return x - t * v, log_det - d * decay * t, zero

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
