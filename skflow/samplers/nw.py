"""NWFlowSampler: the exact, zero-parameter flow of a support set as a scikit-learn estimator.

The estimator only declares its parameters and prepares the field of a support; validation,
sampling and scoring are :class:`~skflow.samplers._base.BaseFlowSampler`'s, the kernel
geometry is :mod:`._kernel_geometry` and the log-density :mod:`._density`.
"""

from __future__ import annotations

import copy
import math
import warnings
import weakref
from typing import Any

import numpy as np
from sklearn.utils.validation import validate_data

from .. import field as F
from .._array import BACKENDS, resolve_device, to_numpy, use_torch_backend
from .._validation import (
    InvalidParameterError,
    check_bandwidth,
    check_choice,
    check_data,
    check_finite_output,
    check_sigma_min,
    choice,
    integer,
    optional,
    satisfies,
)
from ..exceptions import AccuracyWarning, MemorizationWarning
from ..paths import GaussianPath, as_path
from ..threads import limit_threads, map_on_threads
from ._atomic import atomic_fit
from ._bandwidth import BANDWIDTH_RULES, support_frames
from ._base import (
    SAMPLER_CONSTRAINTS,
    Backend,
    BaseFlowSampler,
    PreparedFlow,
    call_threads,
    check_path,
    row_items,
)
from ._batch import DENSE_SUPPORT_ELEMENTS
from ._density import closed_form_log_density, density_t_floor, log_density_and_error
from ._frame import spread_mask, warn_no_spread
from ._kernel_geometry import check_projection, fit_projection, median_nn_distance
from ._selection import DEFAULT_SIGMA_MIN_GRID, select_sigma_min
from .options import (
    DEPRECATED_KEYWORDS,
    GROUPS,
    DensityOptions,
    EngineOptions,
    KernelOptions,
    SolverOptions,
    density_options,
    engine_options,
    fold_deprecated,
    hide_deprecated_keywords,
    kernel_options,
    sigma_min_search_options,
    solver_options,
)

__all__ = ["NWFlowSampler"]

#: ``fit`` warns (:class:`~skflow.exceptions.MemorizationWarning`) when the terminal KDE's
#: typical displacement ``h * sqrt(d)`` (``h`` its bandwidth in data units) is below this
#: fraction of the support's median nearest-neighbour distance ``nn``. In that regime the
#: memorisation ratio (:func:`skflow.metrics.memorization_ratio`) of the samples is
#: ``h sqrt(d) / nn`` to within 12 % (measured on digits, raw pixels, iris, wine, breast
#: cancer and the Gaussian-mixture and shell task families: ``python
#: benchmarks/bench_auto_bandwidth.py --calibrate-warning``), so the warning fires when
#: samples lie about 5 times closer to the support than fresh points of the same law do.
COPY_FRACTION = 0.2


def _inward(scale: Any) -> Any:
    """The frame's scale for the map into it, ``x -> (x - c) / s``: a frame without spread
    (``s = 0``) collapses onto its row, and any finite map into it gives the same (zero)
    velocity in data units, so it divides by 1 (NumPy arrays and Torch tensors alike)."""
    return scale + (scale == 0)


def _frame_key(sigma_min: Any) -> Any:
    """What a support's frame depends on besides its rows: the ``sigma_min`` in use."""
    return sigma_min if isinstance(sigma_min, str) else float(sigma_min)


def _frame_of_rows(prepared: np.ndarray, frame: tuple, rows: np.ndarray) -> tuple | None:
    """The frame of ``rows`` read off the ``frame`` prepared for the rows ``prepared``: the
    same rows (any dtype: the frame is computed in float64), or consecutive tasks of that
    batch (a work item's share; each task's frame is its own); None for other rows."""
    if rows.shape == prepared.shape:
        return frame if np.array_equal(rows, prepared) else None
    if rows.ndim != 3 or prepared.ndim != 3 or rows.shape[1:] != prepared.shape[1:]:
        return None
    k = rows.shape[0]
    centre, scale, sigma = frame
    # tasks whose first row matches, then the whole share compared
    starts = np.flatnonzero((prepared[: len(prepared) - k + 1, 0] == rows[0, 0]).all(axis=-1))
    for g in starts:
        if np.array_equal(prepared[g : g + k], rows):
            return centre[g : g + k], scale[g : g + k], sigma
    return None


def _check_sigma_min(value: Any, name: str) -> None:
    if isinstance(value, str):
        check_choice(value, name, BANDWIDTH_RULES)
    else:
        check_sigma_min(value)


def _check_normalize(value: Any, name: str) -> None:
    if not (value == "auto" or isinstance(value, bool | np.bool_)):
        raise InvalidParameterError(f"{name} must be 'auto', True or False, got {value!r}.")


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

    The ridge is relative, ``r = reg * tr(C) / k`` (``reg`` of a
    :class:`~skflow.KernelOptions` ``kernel``, 0.1 for a kernel name). ``G`` is normalized so that
    ``tr(G^T G C) = tr(C)``: the mean squared distance between support points, hence the
    overall kernel width relative to the data, equals that of the isotropic kernel, and only
    the *shape* changes. (Normalizing the singular values of ``G`` instead would let directions
    with no support variance, e.g. when ``m < d``, dominate the normalization; those directions
    cancel from the weights anyway.) The result is invariant to a global rescaling of the data.
    The ``projection`` itself is used as given (not rescaled); an orthonormal one such as
    ``PCA(whiten=False)`` keeps input-space distances inside the retained subspace. Only the
    linear part of an affine transformer matters: the kernel sees differences
    ``x - t s_i``. An in-context ``support=`` reuses the fitted ``projection_``.

    **Parameter groups.** What is computed: the flow (``bandwidth``, ``sigma_min``, ``path``,
    ``normalize``), its kernel geometry (``kernel``, a name or a :class:`~skflow.KernelOptions`
    with its ridge, and ``projection``), the
    sampling solver and the field's times outside [0, 1] (``solver``, a method name or a
    :class:`~skflow.SolverOptions`), the density solve of :meth:`score_samples`
    (``density``, a :class:`~skflow.DensityOptions`), the few-shot score (``support_size``)
    and the choice of the terminal bandwidth by ``fit(X, y)`` (``sigma_min_search``).
    *Execution* settings, which change where and how it is computed but not the result
    (beyond rounding, and the certified tolerance of the pruned engine), come last:
    ``backend``, ``device``, ``engine`` (an engine name or a :class:`~skflow.EngineOptions`
    with its tolerance, block sizes and sampling workers); then ``random_state``. All but
    the first two are keyword-only.

    *Deprecated keywords.* The former keywords n_steps, rtol, atol, time_tolerance,
    density_rtol, density_atol, density_max_error, chunk_size, support_chunk_size,
    pruned_rtol, n_jobs, kernel_reg, sigma_min_grid and cv are accepted, with a ``FutureWarning``,
    until the next release: each is folded into its group (``NWFlowSampler(n_steps=50)`` is
    ``NWFlowSampler(solver=SolverOptions(n_steps=50))``).

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
    sigma_min : float or "auto", default="auto"
        Path noise at ``t = 1`` (in (0, 1)); the terminal KDE's bandwidth (in data units, or
        in units of each support's spread when ``normalize=True``). A float is the paper's
        plug-in (its experiments use ``sigma_min=0.01``, a bandwidth far below the spacing of
        a small support: the samples are near-copies of it, and ``fit`` then warns with a
        :class:`~skflow.exceptions.MemorizationWarning`). ``"auto"`` (the default): the bandwidth
        is chosen from each support alone, inside every call (``sample(n, support=S)``, a
        batch ``(B, m, d)`` alike, no refit), as
        ``h = max(1.27 m^-0.37 spread, 0.67 nn / sqrt(d))`` in data units, with ``spread``
        the support's root-mean-square per-coordinate standard deviation and ``nn`` its median
        nearest-neighbour distance: the first term tracks the MMD-optimal bandwidth of
        held-out classes, the second keeps the memorisation ratio near 0.5 or above (constants
        and measurements: docs/auto_bandwidth.md). The flow then runs in the support's frame.
        Ignored when ``path`` is given (the path carries its own terminal noise).
    path : GaussianPath or None, default=None
        The probability path (:mod:`skflow.paths`, e.g. ``CosinePath(0.05)``); None is the
        OT path ``OTPath(sigma_min)``. Another path changes the kernel (``x - alpha_t s_i``,
        bandwidth ``sigma_t / alpha_t``) and the affine map of the velocity, and its terminal
        law is the KDE ``(1/m) sum_i N(alpha_1 s_i, sigma_1^2 I)`` (``score_samples`` in
        closed form with ``bandwidth="ot"`` and the isotropic kernel; otherwise by the change
        of variables in the path's time, except for a callable bandwidth bounded at
        ``t = 0``, which is the OT path's only). With a path,
        ``sigma_min`` is ignored and ``fit(X, y)`` chooses nothing (the
        ``sigma_min_grid`` candidates are OT paths).
    normalize : bool or "auto", default="auto"
        Per-support frame, the counterpart of :class:`~skflow.LearnedFlowSampler`'s: the flow
        runs in ``z = (x - c) / s`` from standard noise there (``c`` the support mean) and the
        samples are mapped back. With a float ``sigma_min``, ``s`` is the support's spread and
        the KDE bandwidth ``sigma_min * s``; with ``"auto"``, ``s = h / sigma`` with the frame
        noise ``sigma = min(1.27 m^-0.37, 0.9)`` shared by all supports of a size, so that
        every support of a batch gets its own ``h`` from one field. The terminal law is
        exactly the Gaussian KDE of the support with bandwidth ``h = kde_bandwidth_``
        (``score_samples`` is its density in data units); ``velocity`` is the velocity of the
        frame's flow in data units, ``sample_trajectories`` its states in data units,
        ``noise=`` the standard noise of the frame (starting at ``c + s * noise``), and
        ``weights``/``effective_sample_size``/``divergence`` are unchanged by the map.
        ``"auto"``: True for ``sigma_min="auto"``, False for a float (the paper's plug-in).
        With a frame the sampler is equivariant, ``a S + b`` samples ``a`` times the samples
        of ``S`` plus ``b``; a support without spread (one row, or identical rows) has no
        scale, so its samples are copies of its row, with a
        :class:`~skflow.exceptions.MemorizationWarning` (a float ``sigma_min`` without a
        frame is an absolute bandwidth: the row plus ``sigma_min`` noise). A support whose
        spread is below float64 resolution at its offset (``offset / spread > 1e10``) is a
        ``ValueError``: centre the data first (see docs/robustness.md).
    sigma_min_search : "default", SigmaMinSearch or None, default="default"
        How ``fit(X, y)`` (task labels ``y``) chooses ``sigma_min``: by the few-shot
        :meth:`score` on ``GroupKFold(cv)`` splits of the classes among the candidates
        ``grid`` of a :class:`~skflow.SigmaMinSearch`, exactly as
        ``GridSearchCV(NWFlowSampler(sigma_min_search=None), {"sigma_min": grid},
        cv=GroupKFold(cv)).fit(X, y, groups=y)``. ``"default"``: ``SigmaMinSearch()``, the
        grid ``("auto", 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)`` and 5 folds. None:
        ``fit`` ignores ``y``.
    kernel : {"isotropic", "diagonal", "mahalanobis"} or KernelOptions, default="isotropic"
        Shape of the kernel of the weights, estimated from the (projected) support at ``fit``
        and normalized as described above; a name means ``KernelOptions(name)``, whose
        relative ridge ``reg`` (default 0.1) keeps few-shot supports (``m`` close to or below
        ``d``) from amplifying directions they barely sample.
    projection : None, array-like of shape (k, n_features) or transformer, default=None
        Linear map applied before the kernel. An array is used as is. A scikit-learn
        transformer (PCA, TruncatedSVD, GaussianRandomProjection,
        :class:`~skflow.projection.FlowProjection`, ...) is cloned and fitted on the support in
        ``fit``; it must be affine: its linear part is read off by transforming the identity
        matrix and the zero vector, and checked on the support rows (``ValueError``
        otherwise). Its parameters are searchable (``projection__n_components``).
    solver : {"euler", "midpoint", "heun", "rk4", "dopri5"} or SolverOptions, default="heun"
        ODE solver of the sampling (see :mod:`skflow.solvers`); a name means
        ``SolverOptions(name)``: 100 steps of the fixed-step methods, tolerances ``1e-5`` of
        ``"dopri5"`` and any finite time accepted by :meth:`velocity` (the field frozen
        outside [0, 1], for third-party adaptive solvers that probe stages past ``t = 1``).
        See :class:`~skflow.SolverOptions`.
    density : DensityOptions, optional
        Tolerances of the adaptive change-of-variables solve of :meth:`score_samples` where
        there is no closed form, and the error (nats) above which it warns; None:
        ``DensityOptions()`` (tolerances ``1e-8``, about ``1e-3`` nats at
        ``sigma_min = 0.01``). Independent of ``solver``. See :class:`~skflow.DensityOptions`.
    support_size : int, optional
        Support rows per task in the few-shot :meth:`score` (half of each task when None).
    backend : {"auto", "numpy", "torch"}, default="auto"
        Array library of the field and the solver. ``"auto"`` picks Torch on a CUDA device;
        on the CPU it picks NumPy only for fitted supports whose size lies where NumPy
        measured faster (``skflow._array.AUTO_NUMPY_SUPPORT_CPU``, calibrated by
        ``benchmarks/bench_small_support.py``), Torch (fused attention) otherwise (see
        :func:`skflow._array.use_torch_backend`). Inputs and outputs are NumPy arrays
        whatever the backend.
    device : {"cpu", "cuda", "auto"} or "cuda:N", default="cpu"
        Torch device (Torch backend only).
    engine : {"auto", "dense", "pruned"} or EngineOptions, default="auto"
        How the velocity is computed; a name means ``EngineOptions(name)``, whose
        ``pruned_rtol`` (default ``1e-10``) is the target of the neglected weight per query
        of the pruned engine and whose ``chunk_size``/``support_chunk_size`` override the
        field's own planning of its query blocks and support streaming (supports with
        ``m * max(d, 64) > 2**23`` are streamed by default; results do not depend on them
        beyond rounding), and whose ``n_jobs`` is the number of workers of the sampling
        (rows in batches of 4096 integrated independently with joblib; results do not depend
        on it). ``"dense"``: every support point at every evaluation
        (:class:`skflow.field.NWField`'s dense and attention engines). ``"pruned"``: the
        certified pruned engine (:mod:`skflow.field.pruned`): the support is clustered once
        and, per block of queries, clusters whose total weight is provably below
        ``pruned_rtol`` are skipped; the proven bound on the velocity error of every
        evaluation is kept (``sampling_error_bound_``). ``"auto"``: dense, for now: over a
        whole sampling run the pruned engine has not measured faster than dense on any
        support tried (m = 1e5, d = 16 and 64; ``benchmarks/bench_large_support.py``,
        docs/large_support.md), because early in the flow nothing is prunable. Weights, ``n_eff``,
        divergences and densities are always dense.
    random_state : int, RandomState instance or None, default=None
        Seed of the starting noise when a method is not given one.

    Attributes
    ----------
    support_ : ndarray of shape (m, n_features)
        The support set (float32 if given in float32, float64 otherwise).
    n_features_in_ : int
        Number of features.
    path_ : GaussianPath
        The probability path (``path``, or the OT path of the ``sigma_min`` in use).
    kde_bandwidth_ : float
        Bandwidth, in data units, of the Gaussian KDE that the flow of the fitted support
        samples.
    sigma_min_ : float or "auto"
        Set by ``fit(X, y)`` only: the chosen ``sigma_min``, used in place of the parameter.
    cv_scores_ : ndarray of shape (n_candidates, n_splits)
        Set by ``fit(X, y)`` only: minus the mean multi-scale MMD² (kernels at 0.25, 1 and 4
        times the reference's median distance) of every candidate on every split's tasks.
    cv_memorization_ : ndarray of shape (n_candidates, n_splits)
        Set by ``fit(X, y)`` only: the mean memorisation ratio of every candidate on every
        split; a candidate whose mean over the splits is below 0.5 copies and is not chosen.
    selection_reasons_ : list of str
        Set by ``fit(X, y)`` only: why each candidate was or was not chosen.
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

    The bandwidth chosen per support, for data in any units (here pixels of 0-16):

    >>> from sklearn.datasets import load_digits
    >>> X = load_digits().data[:30]
    >>> auto = NWFlowSampler(sigma_min="auto", random_state=0).fit(X)
    >>> round(auto.kde_bandwidth_, 2), auto.sample(2).shape
    (2.23, (2, 64))

    An anisotropic kernel, and a PCA projection of the weights (samples stay 2-D):

    >>> NWFlowSampler(kernel="mahalanobis").fit(S).projection_.shape
    (2, 2)
    >>> from sklearn.decomposition import PCA
    >>> proj = NWFlowSampler(projection=PCA(n_components=1), random_state=0).fit(S)
    >>> proj.projection_.shape, proj.sample(3).shape
    ((1, 2), (3, 2))
    """

    @hide_deprecated_keywords
    def __init__(
        self,
        bandwidth: Any = "ot",
        sigma_min: float | str = "auto",
        *,
        path: Any = None,
        normalize: Any = "auto",
        sigma_min_search: Any = "default",
        kernel: str | KernelOptions = "isotropic",
        projection: Any = None,
        solver: str | SolverOptions = "heun",
        density: DensityOptions | None = None,
        support_size: int | None = None,
        backend: str = "auto",
        device: str = "cpu",
        engine: str | EngineOptions = "auto",
        random_state: Any = None,
        **deprecated: Any,
    ):
        self.bandwidth = bandwidth
        self.sigma_min = sigma_min
        self.path = path
        self.normalize = normalize
        self.sigma_min_search = sigma_min_search
        self.kernel = kernel
        self.projection = projection
        self.solver = solver
        self.density = density
        self.support_size = support_size
        self.backend = backend
        self.device = device
        self.engine = engine
        self.random_state = random_state
        # the former keywords, for one release: folded into their group, so that
        # get_params and clone keep the user's values under the new spelling
        groups = {name: getattr(self, name) for name in GROUPS}
        for name, value in fold_deprecated(groups, deprecated, type(self).__name__).items():
            setattr(self, name, value)

    _parameter_constraints = {
        **{k: v for k, v in SAMPLER_CONSTRAINTS.items() if k not in DEPRECATED_KEYWORDS},
        "sigma_min": _check_sigma_min,
        "path": check_path,
        "normalize": _check_normalize,
        "sigma_min_search": sigma_min_search_options,
        "bandwidth": satisfies(check_bandwidth),
        "kernel": kernel_options,
        "projection": check_projection,
        "solver": solver_options,
        "density": density_options,
        "support_size": optional(integer()),
        # execution settings
        "backend": choice(BACKENDS),
        "engine": engine_options,
    }
    _time_tolerance_spelling = "solver=SolverOptions(time_tolerance=inf) (the default)"

    def set_params(self, **params: Any) -> NWFlowSampler:
        """Set parameters (scikit-learn's ``set_params``); the former keywords (``n_steps``,
        ``chunk_size``, ...) are folded into their group with a ``FutureWarning``.

        Returns
        -------
        self : NWFlowSampler
        """
        old = {k: params.pop(k) for k in list(params) if k in DEPRECATED_KEYWORDS}
        super().set_params(**params)
        groups = {name: getattr(self, name) for name in GROUPS}
        for name, value in fold_deprecated(groups, old, type(self).__name__).items():
            setattr(self, name, value)
        return self

    def __setstate__(self, state: dict) -> None:
        # a pickle of a former version holds the former keywords as attributes
        old = {k: state.pop(k) for k in list(state) if k in DEPRECATED_KEYWORDS}
        groups = {name: state.get(name) for name in GROUPS}
        state.update(fold_deprecated(groups, old, type(self).__name__, warn=False))
        super().__setstate__(state)

    def _solver_options(self) -> SolverOptions:
        return solver_options(self.solver)

    def _engine_options(self) -> EngineOptions:
        return engine_options(self.engine)

    def _n_jobs(self) -> int | None:
        return self._engine_options().n_jobs

    # -- fitting ---------------------------------------------------------------------------
    @atomic_fit
    def fit(self, X: Any, y: Any = None) -> NWFlowSampler:
        """Condition on the support set ``X``; with task labels ``y``, also choose ``sigma_min``.

        Parameters
        ----------
        X : array-like of shape (m, n_features)
            Support set (at least one row).
        y : array-like of shape (m,), optional
            Task (class) labels. With ``sigma_min_search`` not None, ``sigma_min`` is chosen
            among its ``grid`` on ``GroupKFold(cv)`` splits of the classes by a copy-aware
            rule: the lowest few-shot multi-scale MMD² among the candidates whose
            validation memorisation ratio is at least 0.5
            (:func:`._selection.select_sigma_min`, the same as ``GridSearchCV`` with
            ``groups=y``, two scorers and a ``refit`` rule); the choice is ``sigma_min_``.
            Ignored when ``sigma_min_search`` is None or ``path`` is not None.

        Returns
        -------
        self : NWFlowSampler

        Notes
        -----
        A fit that raises or is interrupted (``KeyboardInterrupt`` too) leaves the estimator
        as it was: fitted, the same samples for the same seed; unfitted, ``NotFittedError``.
        """
        self._validate_params()
        X = check_data(validate_data, self, X, dtype=[np.float64, np.float32], ensure_min_samples=1)
        if y is not None or self._uses_frame():  # a frame (or a choice) needs resolved rows
            spread_mask(X[None], type(self).__name__)
        chosen = {}  # a refit forgets an earlier choice
        search = sigma_min_search_options(self.sigma_min_search)
        if y is not None and search is not None and self.path is None:
            grid = search.grid
            grid = DEFAULT_SIGMA_MIN_GRID if isinstance(grid, str) else tuple(grid)
            best, scores, memo, reasons = select_sigma_min(self, X, y, grid, search.cv)
            chosen = {
                "sigma_min_": best,
                "cv_scores_": scores,
                "cv_memorization_": memo,
                "selection_reasons_": reasons,
            }
        projection = fit_projection(
            X, self.projection, kernel_options(self.kernel).kernel, kernel_options(self.kernel).reg
        )
        for name in ("sigma_min_", "cv_scores_", "cv_memorization_", "selection_reasons_"):
            self.__dict__.pop(name, None)
        self.__dict__.update(chosen)
        self.projection_, self.projection_transformer_ = projection
        self.support_ = X.copy()
        # what derives from the support alone, prepared once (the automatic bandwidth is an
        # O(m^2 d) nearest-neighbour scan): every later call reads it back (_frame)
        self.__dict__.pop("_support_frame_", None)
        self.__dict__.pop("_fitted_field", None)
        if self._uses_frame():
            key = _frame_key(self._sigma_min())
            self._support_frame_ = (key, self._compute_frame(self.support_))
        self._warn_if_copier(X)
        return self

    @property
    def path_(self) -> GaussianPath:
        """The probability path of the fitted support's flow (in its frame, if any)."""
        if not hasattr(self, "support_"):
            raise AttributeError("path_ is set by fit.")
        return self._flow_path(self._frame(self.support_)[2])

    def _flow_path(self, sigma: float) -> GaussianPath:
        """The path of a flow whose frame has terminal noise ``sigma``: ``path``, else the
        OT path of ``sigma`` (decided here only), built once per ``sigma`` and kept on the
        estimator (``sigma`` is the parameter's, or under ``"auto"`` a function of the
        support size: few values)."""
        if self.path is not None:  # validated by every public call (_begin)
            return self.path
        paths = self.__dict__.setdefault("_ot_paths", {})
        if sigma not in paths:
            paths[sigma] = as_path(None, sigma)
        return paths[sigma]

    @property
    def kde_bandwidth_(self) -> float:
        """Bandwidth, in data units, of the Gaussian KDE that the flow of the fitted support
        samples (``sigma_min`` without a frame; the rule's or the frame's with one)."""
        if not hasattr(self, "support_"):
            raise AttributeError("kde_bandwidth_ is set by fit.")
        _, scale, sigma = self._frame(self.support_)
        return float(sigma if scale is None else scale.ravel()[0] * sigma)

    # -- the per-support frame -------------------------------------------------------------
    def _sigma_min(self) -> Any:
        """The ``sigma_min`` in use: the path's, else the one ``fit(X, y)`` chose, else the
        parameter."""
        if self.path is not None:
            return float(self.path.sigma_min)
        return self.__dict__.get("sigma_min_", self.sigma_min)

    def _uses_frame(self) -> bool:
        if self.normalize == "auto":
            return isinstance(self._sigma_min(), str)
        return bool(self.normalize) or isinstance(self._sigma_min(), str)

    def _frame(self, support: Any) -> tuple:
        """``(centre, scale, sigma)`` of a support (m, d) or a batch (B, m, d) on the host
        (see :func:`._bandwidth.support_frames`); ``(None, None, sigma_min)`` without one.

        Computed once per support, never per solver step: the fitted support's at ``fit``
        (``_support_frame_``), an in-context support's at its first use in a call (kept for
        that call, ``_context_frame``); later uses, on any backend and also for a work item's
        share of a batch, are recognised by their rows (an O(m d) comparison) and read back.
        """
        if not self._uses_frame():
            return None, None, float(self._sigma_min())
        key = _frame_key(self._sigma_min())
        S = to_numpy(support)
        fitted = self.__dict__.get("_support_frame_")
        if fitted is not None and fitted[0] == key:
            frame = fitted[1] if S is self.support_ else _frame_of_rows(self.support_, fitted[1], S)
            if frame is not None:
                return frame
        context = self.__dict__.get("_context_frame")
        rows = None if context is None or context[1] != key else context[0]()
        if rows is not None:
            frame = _frame_of_rows(rows, context[2], S)
            if frame is not None:
                return frame
        frame = self._compute_frame(S)
        # a weak reference: the rows live as long as the call that passed them, no longer
        self.__dict__["_context_frame"] = (weakref.ref(S), key, frame)
        return frame

    def _compute_frame(self, S: np.ndarray) -> tuple:
        """The frame of host rows ``S`` (m, d) or (B, m, d), computed (see :meth:`_frame`)."""
        spread_mask(S if S.ndim == 3 else S[None], type(self).__name__)  # refuses unresolved
        return support_frames(S, self._sigma_min(), True)

    def _begin(self) -> None:
        super()._begin()
        # an in-context support's frame is kept for one call: each call prepares its own
        # (the comparison of the rows alone would already make a reuse safe)
        self.__dict__.pop("_context_frame", None)

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())  # a copy: Python's own is the instance's dict
        state.pop("_context_frame", None)  # a weak reference to a call's support
        state.pop("_fitted_field", None)  # backend arrays, remade at the first call
        return state

    def _start_points(self, x0: np.ndarray, support: np.ndarray) -> np.ndarray:
        """The noise, or with a frame the noise mapped into it (``centre + scale * x0``).

        A support without spread has the scale 0 (no scale in data units to take one from,
        issue 63): its flow starts, and stays, on its row, so the samples are copies of it,
        with a :class:`~skflow.exceptions.MemorizationWarning` naming the fix."""
        centre, scale, _ = self._frame(support)
        if centre is None:
            return x0
        for b in np.flatnonzero(np.reshape(scale, -1) == 0):
            warn_no_spread(type(self).__name__, int(b) if np.ndim(support) == 3 else None)
        return (centre + scale * x0).astype(x0.dtype, copy=False)

    def _warn_if_copier(self, X: np.ndarray) -> None:
        """One :class:`MemorizationWarning` when ``sigma_min`` makes the terminal law copy ``X``.

        With the OT bandwidth (or a float scale of it) the terminal law is the Gaussian KDE of
        the support with bandwidth ``h = kde_bandwidth_``: a sample is a support point plus
        noise of norm about ``h * sqrt(d)``. Below ``COPY_FRACTION`` of the median
        nearest-neighbour distance of the support, samples are near-copies (a callable
        bandwidth keeps the weights wide at ``t = 1`` and is not checked; the ``"auto"`` rule
        keeps ``h * sqrt(d)`` at 0.67 of that distance or more).
        """
        if callable(self.bandwidth) or isinstance(self._sigma_min(), str):
            return  # the rule's copy floor keeps samples off the support by construction
        spacing = median_nn_distance(X)
        spread = self.kde_bandwidth_ * math.sqrt(X.shape[1])
        if spacing > 0 and spread < COPY_FRACTION * spacing:
            warnings.warn(
                f"sigma_min={self._sigma_min():g} is small against the scale of the data: samples "
                f"lie about h*sqrt(d)={spread:.3g} from a support point "
                f"(h={self.kde_bandwidth_:.3g}, the terminal KDE's bandwidth in data units), "
                "while support points lie "
                f"{spacing:.3g} apart (median nearest-neighbour distance), so the samples are "
                "near-copies of the support (memorisation ratio about "
                f"{spread / spacing:.2g}). Use sigma_min='auto' (the bandwidth chosen from "
                "each support, in its own frame, which keeps that ratio near 0.5 or above).",
                MemorizationWarning,
                stacklevel=4,  # the user's fit line (fit's atomic guard is one frame)
            )

    # -- backend and field (the hooks of BaseFlowSampler) ------------------------------------
    def _backend(self, adaptive: bool | None = None) -> Backend:
        """NumPy or Torch (on ``device``) for this call, by :func:`use_torch_backend`.

        "auto" decides from the fitted support's size, so one estimator keeps one backend
        even when it is conditioned in context on supports of other sizes; adaptive solves
        (the dopri5 solver, the density's change of variables) have their own rule.
        """
        if adaptive is None:
            adaptive = self._solver_options().method == "dopri5"
        m = self.support_.shape[0]
        if not use_torch_backend(self.backend, self.device, n_support=m, adaptive=adaptive):
            return Backend()
        import torch

        device = resolve_device(self.device)
        if device.startswith("cuda") and not torch.cuda.is_available():
            # e.g. a model fitted on a GPU machine and unpickled on a CPU-only one: the
            # fitted state is NumPy, so switching the device is all that is needed.
            raise ValueError(
                f"device={self.device!r} but CUDA is not available here; use "
                "set_params(device='cpu') (the fitted state is device independent)."
            )
        return Backend(device)

    def _batchable(self, support: np.ndarray) -> bool:
        # the pruned engine indexes one support, and streaming (support_chunk_size, or a
        # support too large for a dense block) reads one support in chunks: those batches
        # run task by task
        m, d = support.shape[-2:]
        engine = self._engine_options()
        return (
            super()._batchable(support)
            and engine.engine != "pruned"
            and engine.support_chunk_size is None
            and m * max(d, 64) <= DENSE_SUPPORT_ELEMENTS
        )

    def _nw_field(
        self, support: Any, sigma: float, backend: Backend, *, dense: bool = False
    ) -> F.NWField:
        """The field of a support already on the call's backend (in its frame, with the
        frame's terminal noise ``sigma``), prepared once for all its evaluations (the pruned
        engine for one support when ``engine="pruned"``, unless ``dense``)."""
        P = None if self.projection_ is None else backend.asarray(self.projection_)
        engine = self._engine_options()
        kwargs = {
            "path": self._flow_path(sigma),
            "bandwidth": self.bandwidth,
            "projection": P,
            "chunk_size": engine.chunk_size,
            "support_chunk_size": engine.support_chunk_size,
            "backend": backend.xp,
        }
        if not dense and engine.engine == "pruned" and support.ndim == 2:  # batches run dense
            return F.NWField(support, **kwargs, engine="pruned", pruned_rtol=engine.pruned_rtol)
        return F.NWField(support, **kwargs)

    def _framed(self, support: Any, backend: Backend) -> tuple:
        """``(support in its frame, centre, scale, sigma)`` on the backend (``centre`` and
        ``scale`` None without a frame)."""
        centre, scale, sigma = self._frame(support)
        if centre is None:
            return support, None, None, sigma
        dtype = to_numpy(support[..., :1, :1]).dtype  # NumPy's name of a tensor's dtype too
        centre = backend.asarray(centre.astype(dtype, copy=False))
        scale = backend.asarray(scale.astype(dtype, copy=False))
        return (support - centre) / _inward(scale), centre, scale, sigma

    def _prepare_flow(self, support: Any, backend: Backend) -> PreparedFlow:
        support, centre, scale, sigma = self._framed(support, backend)
        return self._flow_of(self._nw_field(support, sigma, backend), centre, scale)

    def _flow_of(self, field: F.NWField, centre: Any, scale: Any) -> PreparedFlow:
        """The flow of a prepared field (in data units when there is a frame); its fork is a
        shallow copy of the field, which shares the prepared support and keeps its own
        error bound."""
        fork = lambda: self._flow_of(copy.copy(field), centre, scale)  # noqa: E731
        bound = None
        if field.engine == "pruned":  # proven on the frame's velocity: back in data units
            factor = 1.0 if scale is None else float(scale.max())
            bound = lambda: field.max_velocity_error_ * factor  # noqa: E731
        if centre is None:
            return PreparedFlow(lambda t, x: field.velocity(x, t), error_bound=bound, fork=fork)
        # the frame's velocity in data units (x = centre + scale * z)
        inner = _inward(scale)
        return PreparedFlow(
            lambda t, x: field.velocity((x - centre) / inner, t) * scale,
            error_bound=bound,
            fork=fork,
        )

    def _call_field(self, support: Any, backend: Backend) -> tuple:
        """``(field, centre, scale)`` of a support for a field call: prepared for this call, or
        for the fitted support once and kept (what derives from it alone, the framed support
        and the field's geometry, is not redone by a solver calling ``velocity`` at each
        step). The kept one is made again when the fitted support, a parameter or the backend
        changed; pickles and clones do not carry it."""
        key = (repr(sorted(self.get_params(deep=False).items())), backend.device)
        kept = self.__dict__.get("_fitted_field")
        fitted = support is self.__dict__.get("support_")
        if fitted and kept is not None and kept[0] is support and kept[1] == key:
            return kept[2]
        framed, centre, scale, sigma = self._framed(backend.asarray(support), backend)
        made = (self._nw_field(framed, sigma, backend), centre, scale)
        if fitted:
            self.__dict__["_fitted_field"] = (support, key, made)
        return made

    def _evaluate(self, method: str, X, t, support):
        """``NWField.<method>(X, t)`` for a public call: checks, backend, one prepared field."""
        self._begin()
        X, support, t = self._field_inputs(X, t, support)
        backend = self._backend()
        budget = call_threads(backend)
        with limit_threads(1):  # the thread policy of sample (skflow.threads)
            # Mixed float32/float64 inputs are computed in float64 by the field, which casts
            # the support chunk by chunk when it streams it (no full-size copy here).
            field, centre, scale = self._call_field(support, backend)

            def rows(X, t):  # one work item, on a copy of the field (its own error bound)
                X = backend.asarray(X)
                out = getattr(copy.copy(field), method)(
                    X if centre is None else (X - centre) / _inward(scale), t
                )
                if method == "velocity" and scale is not None:  # back in data units
                    out = out * scale
                return backend.to_numpy(out)

            parts = map_on_threads(rows, row_items(X, t, field.support.shape[-2], backend), budget)
        out = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
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
        return self._evaluate("velocity", X, t, support)

    def weights(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Nadaraya-Watson weights ``w_i(X, t)``.

        Returns
        -------
        W : ndarray of shape (n, m)
            Rows are probability vectors.
        """
        return self._evaluate("weights", X, t, support)

    def effective_sample_size(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Kish effective sample size ``1 / sum_i w_i^2`` of the weights at ``(X, t)``.

        Returns
        -------
        n_eff : ndarray of shape (n,)
            ``m`` at ``t = 0``; tends to 1 as the kernel collapses on the nearest neighbour.
        """
        return self._evaluate("effective_sample_size", X, t, support)

    def divergence(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Exact divergence of the velocity field at ``(X, t)``.

        With a callable bandwidth bounded at ``t = 0`` the divergence at ``t = 0`` is ``+inf``
        on the boundaries between the support points' cells (where the weights stay shared; it
        grows like ``1/t`` there) and finite elsewhere.

        Returns
        -------
        div : ndarray of shape (n,)
        """
        return self._evaluate("divergence", X, t, support)

    # -- densities -------------------------------------------------------------------------
    def _closed_form_density(self) -> bool:
        return self.bandwidth == "ot" and self.projection_ is None

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
        ``density.rtol``, ``density.atol``; independent of ``solver``) in the
        variable ``tau = -log(sigma_t)``, where the field is smooth, see
        :meth:`log_density_with_error`. An :class:`~skflow.exceptions.AccuracyWarning` is
        issued when the error estimate of a row exceeds ``density.max_error`` nats.

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
        limit = density_options(self.density).max_error
        if worst > limit:
            warnings.warn(
                f"score_samples: the estimated error of the log-density reaches {worst:.3g} "
                f"nats (> density.max_error={limit}) for "
                f"{int(np.sum(err > limit))} of {err.size} rows; lower "
                "the tolerances of density=DensityOptions(rtol=..., atol=...) or rescale "
                "the data.",
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
        per-row steps, tolerances ``density.rtol``/``density.atol``) and runs in float64.

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
        self._begin()
        support = self._check_support(support)
        X = self._check_queries(X)
        out32 = X.dtype == np.float32 and support.dtype == np.float32
        X64, S64 = X.astype(np.float64), support.astype(np.float64)
        centre, scale, sigma = self._frame(S64)
        log_jac = 0.0
        if centre is not None and not np.all(scale > 0):
            raise ValueError(
                "score_samples: the support has no spread (a single row, or identical rows), "
                "so the flow's terminal law is a point mass on that row (its samples are "
                "copies of it), which has no density. Pass more distinct rows, or an "
                "absolute bandwidth: NWFlowSampler(sigma_min=0.01, normalize=False)."
            )
        if centre is not None:  # the frame's density, with the Jacobian of z = (x - c) / s
            X64, S64 = (X64 - centre) / scale, (S64 - centre) / scale
            log_jac = X64.shape[1] * math.log(float(scale.ravel()[0]))
        closed = self._closed_form_density()
        backend = self._backend() if closed else self._backend(adaptive=True)
        budget = call_threads(backend)
        with limit_threads(1):  # the thread policy of sample; rows are independent here
            # float64 throughout: float32 distances lose ~1e-3 nats at sigma_min = 0.01.
            # closed form: dense, no index to build; else one field for both solves
            field = self._nw_field(backend.asarray(S64), sigma, backend, dense=closed)
            density = self._density_of_rows(field, closed, sigma, S64, backend)
            parts = map_on_threads(density, row_items(X64, 0.0, S64.shape[0], backend), budget)
        log_p = np.concatenate([p for p, _ in parts])
        err = np.concatenate([e for _, e in parts])
        log_p = log_p - log_jac
        if out32:  # float64 values beyond float32's range would silently become -inf
            with np.errstate(over="ignore"):
                log_p = check_finite_output(log_p.astype(np.float32), "score_samples (float32)")
        return log_p, err

    def _density_of_rows(self, field, closed: bool, sigma: float, S64, backend) -> Any:
        """``rows(X, _) -> (log_p, error)`` of the frame's terminal law at float64 rows ``X``,
        on a copy of the prepared ``field`` (a work item of :meth:`log_density_with_error`)."""
        if closed:

            def closed_form(X, _):
                log_p = closed_form_log_density(copy.copy(field), X, backend)
                return log_p, np.zeros(log_p.shape)

            return closed_form
        options = density_options(self.density)
        path = self._flow_path(sigma)
        kwargs = {
            "path": path,
            "t_floor": density_t_floor(self.bandwidth, path, S64, self.projection_),
            "rtol": float(options.rtol),
            "atol": float(options.atol),
        }
        return lambda X, _: log_density_and_error(copy.copy(field), X, backend, **kwargs)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
