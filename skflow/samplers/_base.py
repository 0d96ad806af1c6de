"""Shared plumbing of the support-conditioned samplers: one path from each public call to the field.

Every public method runs its checks once, here, in this order:

1. :meth:`BaseFlowSampler._begin`: the parameters against the estimator's declared
   ``_parameter_constraints`` (:func:`skflow._validation.validate_parameters`; ``set_params``
   may have changed them since ``fit``) and the fitted state (``check_is_fitted``);
2. the inputs (support(s), queries, times, noise);
3. :meth:`BaseFlowSampler._backend`, the subclass's choice of array library and device for
   the whole call;
4. the solve (:func:`._solve.solve_flow`), with the velocity the subclass prepares once per
   support (:meth:`BaseFlowSampler._prepare_flow`).

Results, including the proven error bound of an approximate field, come back as return
values; the only attribute a call writes is the documented ``sampling_error_bound_``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._array import NUMPY_BACKEND, resolve_device, to_numpy, torch_backend
from .._validation import (
    InvalidParameterError,
    ParameterCheck,
    check_data,
    check_finite_output,
    check_int,
    check_random_state,
    check_sigma_min,
    check_time_tolerance,
    check_times,
    choice,
    integer,
    random_seed,
    real,
    satisfies,
    validate_parameters,
)
from ..paths import GaussianPath
from ..solvers import FIXED_STEP_METHODS, METHODS
from ..threads import (
    SPLIT_WORK,
    limit_threads,
    map_on_threads,
    parallel_map,
    rows_per_item,
    thread_budget,
)
from ._batch import (
    check_batch_times,
    check_noise,
    check_query_batch,
    check_support_batch,
    group_by_size,
    is_support_list,
    work_items,
)
from ._solve import solve_flow
from .options import SolverOptions, solver_options

__all__ = [
    "SAMPLER_CONSTRAINTS",
    "check_path",
    "SAMPLING_BATCH_SIZE",
    "SCORE_RANDOM_STATE",
    "Backend",
    "BaseFlowSampler",
    "PreparedFlow",
    "available_memory",
    "call_threads",
    "check_support_names",
    "check_trajectory_memory",
    "row_items",
    "sampling_score",
]

# Most rows integrated together. Sampling always splits into items of at most this size, by
# the problem's size alone (skflow.threads.rows_per_item), whatever ``n_jobs`` and the thread
# count are, so serial and parallel runs do exactly the same arithmetic.
SAMPLING_BATCH_SIZE = 4096

#: Seed of the samples drawn by ``score`` when the estimator's ``random_state`` is None, so
#: that ``score`` (and a ``GridSearchCV`` over it) is deterministic by default.
SCORE_RANDOM_STATE = 0


def check_path(value: Any, name: str) -> None:
    """A sampler's ``path`` parameter: None or a :class:`skflow.paths.GaussianPath`.

    Examples
    --------
    >>> check_path(None, "path")
    """
    if value is not None and not isinstance(value, GaussianPath):
        raise InvalidParameterError(
            f"{name} must be None or a skflow.paths.GaussianPath (e.g. OTPath(0.01)), got "
            f"{value!r}."
        )


#: Constraints of the parameters every sampler has (the path, the sampling solver, the
#: device and the seed); a sampler's ``_parameter_constraints`` adds its own.
SAMPLER_CONSTRAINTS: dict[str, ParameterCheck] = {
    "sigma_min": satisfies(check_sigma_min),
    "solver": choice(METHODS),
    "n_steps": integer(),
    "rtol": real(low=0.0, low_open=True),
    "atol": real(low=0.0, low_open=True),
    "time_tolerance": satisfies(check_time_tolerance),
    "device": satisfies(resolve_device),
    "random_state": random_seed(),
}


@dataclass(frozen=True)
class Backend:
    """Where one public call computes, decided once per call: NumPy (``device`` None) or
    Torch on ``device``. Inputs and outputs of the estimators are NumPy whatever it is.

    Examples
    --------
    >>> import numpy as np
    >>> Backend().asarray(np.zeros(2)).dtype.name
    'float64'
    """

    device: str | None = None

    def asarray(self, a: np.ndarray) -> Any:
        """``a`` on this backend (no copy for NumPy)."""
        return self.xp.from_numpy(a, self.device)

    def to_numpy(self, a: Any) -> np.ndarray:
        """``a`` back on the host as a NumPy array."""
        return to_numpy(a)

    @property
    def xp(self) -> Any:
        """The array backend of this call (of :func:`skflow._array.get_backend`), passed
        down to the field so that it does not decide again from the array types."""
        return NUMPY_BACKEND if self.device is None else torch_backend()


@dataclass(frozen=True)
class PreparedFlow:
    """The velocity of one support, prepared once for a whole solve.

    Attributes
    ----------
    velocity : callable
        ``velocity(t, x)`` on the call's backend, as :func:`skflow.solvers.integrate` calls it.
    error_bound : callable or None
        For an approximate field (the pruned engine): the proven bound on the velocity
        error over every evaluation so far, read after the solve.
    fork : callable or None
        A copy for one work item that shares the prepared support but keeps its own error
        bound, so that items can run side by side; None: the flow keeps no state per call.
    """

    velocity: Callable[[Any, Any], Any]
    error_bound: Callable[[], float] | None = None
    fork: Callable[[], PreparedFlow] | None = None

    def for_item(self) -> PreparedFlow:
        """This flow for one work item (a fork, or the flow itself when it keeps no state)."""
        return self if self.fork is None else self.fork()


class BaseFlowSampler(BaseEstimator):
    """Base class of skflow samplers (not for direct use).

    A subclass declares ``_parameter_constraints`` (one check per constructor parameter) and
    implements :meth:`_prepare_flow`; it may override :meth:`_backend`,
    :meth:`_check_params` (checks that involve several parameters), :meth:`_start_points`
    and :meth:`_batchable`. Parameters used here: the solve's (through
    :meth:`_solver_options`), ``support_size``, the workers (:meth:`_n_jobs`),
    ``random_state``.
    """

    #: One check per constructor parameter, ``check(value, name)`` (skflow's
    #: :data:`~skflow._validation.ParameterCheck`, not scikit-learn's constraint lists),
    #: run by :meth:`_validate_params`.
    _parameter_constraints: ClassVar[dict[str, ParameterCheck]] = {}
    #: How the error of a time past [0, 1] spells the setting that accepts it.
    _time_tolerance_spelling: ClassVar[str] = "time_tolerance=inf (the default)"

    # -- validation (once per public call) ---------------------------------------------------
    def _validate_params(self) -> None:
        """Check every parameter against its declared constraint, then their combinations."""
        validate_parameters(self.get_params(deep=False), self._parameter_constraints)
        self._check_params()

    def _check_params(self) -> None:
        """Checks that involve several parameters (none by default)."""

    def _begin(self) -> None:
        """The checks of a public call after ``fit``: parameters, then the fitted state."""
        self._validate_params()
        check_is_fitted(self)

    def _check_support(self, support: Any) -> np.ndarray:
        """The fitted support, or a validated in-context support with the fitted n_features."""
        if support is None:
            return self.support_
        check_support_names(self, support)
        support = check_data(
            check_array,
            support,
            dtype=[np.float64, np.float32],
            input_name="support",
            ensure_min_samples=1,
        )
        if not support.flags.writeable:  # a read-only view of a DataFrame: Torch warns on it
            support = support.copy()
        if support.shape[1] != self.n_features_in_:
            raise ValueError(
                f"support has {support.shape[1]} features, but {type(self).__name__} is "
                f"expecting {self.n_features_in_} features as input."
            )
        return support

    def _check_queries(self, X: Any) -> np.ndarray:
        X = check_data(validate_data, self, X, reset=False, dtype=[np.float64, np.float32])
        return X if X.flags.writeable else X.copy()  # Torch warns on read-only arrays

    # -- hooks of the subclasses -----------------------------------------------------------
    def _backend(self) -> Backend:
        """Array library and device of this call (NumPy by default)."""
        return Backend()

    def _prepare_flow(self, support: Any, backend: Backend) -> PreparedFlow:
        """The velocity of ``support`` (on ``backend``; (m, d) or a batch (G, m, d))."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _start_points(self, x0: np.ndarray, support: np.ndarray) -> np.ndarray:
        """Starting points of the flow from the noise ``x0`` (the noise itself by default)."""
        return x0

    def _n_jobs(self) -> int | None:
        """Workers of the sampling (the ``n_jobs`` parameter, where there is one)."""
        return getattr(self, "n_jobs", None)

    def _solver_options(self) -> SolverOptions:
        """The sampling solve's settings: the ``solver`` parameter (a method name or a
        :class:`~skflow.SolverOptions`), as both estimators take it."""
        return solver_options(self.solver)

    # -- sampling --------------------------------------------------------------------------
    def _time_grid(self, n_points: int | None = None) -> np.ndarray:
        options = self._solver_options()
        if options.method in FIXED_STEP_METHODS:
            return np.linspace(0.0, 1.0, options.n_steps + 1)
        return np.linspace(0.0, 1.0, n_points or 2)

    def _noise(self, n_samples: Any, n_features: int, dtype: Any, random_state: Any) -> np.ndarray:
        n_samples = check_int(n_samples, "n_samples")
        seed = self.random_state if random_state is None else random_state
        rng = check_random_state(seed)
        # Noise is drawn on the host with NumPy so every backend and device sees the same
        # starting points for a given seed.
        return rng.standard_normal((n_samples, n_features)).astype(dtype, copy=False)

    def _solve_rows(self, backend: Backend, flow: PreparedFlow, x0, grid, trajectory):
        """Integrate one batch of rows ``x0`` with ``flow``; ``(NumPy result, error bound or
        None)``."""
        options = self._solver_options()
        sol = solve_flow(
            flow.velocity,
            backend.asarray(x0),
            grid,
            method=options.method,
            rtol=options.rtol,
            atol=options.atol,
            return_trajectory=trajectory,
        )
        bound = None if flow.error_bound is None else flow.error_bound()
        return backend.to_numpy(sol.y), bound

    def _solve_items(self, backend: Backend, support, x0, items, grid, trajectory) -> list:
        """Solve the work ``items`` in this process under the thread policy of
        :func:`skflow.threads.map_on_threads`: each task's flow prepared once, every item on
        one thread, the items side by side on the threads the call may use (one at a time on
        an accelerator, which runs them in order anyway)."""
        budget = call_threads(backend)
        with limit_threads(1):
            flows, jobs = {}, []
            for task, rows in items:
                key = None if task is None else (task.start, task.stop)
                if key not in flows:  # prepared once for all its row batches
                    flows[key] = self._prepare_flow(backend.asarray(_pick(support, task)), backend)
                start = _pick(x0, task)[..., rows, :]
                jobs.append((backend, flows[key].for_item(), start, grid, trajectory))
            return map_on_threads(self._solve_rows, jobs, budget)

    def _integrate(self, backend: Backend, support, x0, grid, trajectory):
        """Integrate ``x0`` (n, d) with the field of ``support`` (m, d), or a batch: ``x0``
        (G, n, d) with ``support`` (G, m, d); ``(result, error bound or None)`` with the
        result of shape (n, d) / (G, n, d), or (T, ...) for a trajectory.

        The rows are cut into work items by the problem's size alone
        (:func:`skflow.threads.rows_per_item`; on an accelerator, batches of
        :data:`SAMPLING_BATCH_SIZE`), so the samples do not depend on the thread count."""
        x0 = self._start_points(x0, support)
        m, d = support.shape[-2], x0.shape[-1]
        on_cpu = backend.device in (None, "cpu")
        n = x0.shape[-2]
        rows = rows_per_item(m, d, SAMPLING_BATCH_SIZE, n) if on_cpu else SAMPLING_BATCH_SIZE
        items = work_items(x0, m, rows, split=on_cpu and x0.size * m > SPLIT_WORK)
        n_jobs = self._n_jobs()
        if len(items) == 1 or n_jobs in (None, 1):
            results = self._solve_items(backend, support, x0, items, grid, trajectory)
        else:
            # The estimator itself is shipped to the workers (it pickles), so this also runs
            # under joblib's dask backend on a cluster; each worker gets its share of cores.
            parts = [(_pick(support, task), _pick(x0, task)[..., rows, :]) for task, rows in items]
            jobs = [(self, backend, S, x, grid, trajectory) for S, x in parts]
            results = parallel_map(_solve_task, jobs, n_jobs)
        out = np.empty(((len(grid),) if trajectory else ()) + x0.shape, results[0][0].dtype)
        for (task, rows), (y, _) in zip(items, results, strict=True):
            out[
                (Ellipsis, rows, slice(None)) if task is None else (..., task, rows, slice(None))
            ] = y
        out = check_finite_output(out, "the sampled trajectory" if trajectory else "the sample")
        return out, _largest([bound for _, bound in results])

    # -- one support or a batch ------------------------------------------------------------
    def _batchable(self, support: np.ndarray) -> bool:
        """Whether a batch ``(G, m, d)`` of supports can share one solver run (else the
        tasks are integrated one by one). The adaptive solver keeps one clock per row of an
        ``(n, d)`` state, so it runs task by task."""
        return self._solver_options().method in FIXED_STEP_METHODS

    def _supports(self, support: Any) -> tuple[Any, Any, int | None]:
        """``(support (m, d), dtype, None)``, or for a batch ``(groups, dtype, B)`` with
        ``groups = [(task indices, supports (G, m, d)), ...]`` (see :mod:`._batch`)."""
        if is_support_list(support):
            groups, dtype = group_by_size([self._check_support(s) for s in support])
            return groups, dtype, len(support)
        if support is not None and getattr(support, "ndim", None) == 3:
            arr = check_support_batch(support, self.n_features_in_, type(self).__name__)
            return [(np.arange(arr.shape[0]), arr)], arr.dtype, arr.shape[0]
        support = self._check_support(support)
        return support, support.dtype, None

    def _batch_inputs(self, X: Any, t: Any, support: Any) -> tuple | None:
        """``(X (B, n, d), support (B, m, d), t)`` of a batched field evaluation, validated,
        in one dtype; None when ``support`` is not a 3-D batch. ``t`` is a scalar or
        ``(B, n)``."""
        ndim = len(support.shape) if hasattr(support, "shape") else _safe_ndim(support)
        if ndim != 3:
            return None
        name = type(self).__name__
        S = check_support_batch(support, self.n_features_in_, name)
        X = check_query_batch(X, S.shape[0], S.shape[2])
        t = check_batch_times(t, X.shape[:2], **self._time_clamp())
        dtype = np.result_type(X.dtype, S.dtype)
        return X.astype(dtype, copy=False), S.astype(dtype, copy=False), t

    def _field_inputs(self, X: Any, t: Any, support: Any) -> tuple:
        """``(X, support, t)`` of a field evaluation, validated (after :meth:`_begin`): a batch
        as in :meth:`_batch_inputs`, else ``X`` (n, d), the support (m, d) and ``t`` (a
        scalar or (n,)) as float64 times in [0, 1]."""
        batch = self._batch_inputs(X, t, support)
        if batch is not None:  # (B, n, d) queries against (B, m, d) supports
            return batch
        support = self._check_support(support)
        return self._check_queries(X), support, check_times(t, **self._time_clamp())

    def _time_clamp(self) -> dict[str, Any]:
        """How a field call treats times outside [0, 1]: the solver's ``time_tolerance``."""
        tolerance = self._solver_options().time_tolerance
        hint = (
            f"a solver steps past t = 1, construct {type(self).__name__} with "
            f"{self._time_tolerance_spelling}, which holds the field at the nearest end"
        )
        return {"tolerance": tolerance, "hint": hint}

    def _sampling_start(self, n_samples, support, random_state, noise):
        """The validated support(s) and the starting points ``(n, d)`` or ``(B, n, d)``."""
        supports, dtype, n_tasks = self._supports(support)
        d = self.n_features_in_
        if noise is not None:
            if random_state is not None:
                raise ValueError("pass either noise or random_state, not both.")
            return supports, check_noise(noise, n_samples, d, dtype, n_tasks)
        if n_tasks is None:
            return supports, self._noise(n_samples, d, dtype, random_state)
        n = check_int(n_samples, "n_samples")
        # one draw for the batch: task b is rows b*n .. (b+1)*n - 1 of a single-task draw
        return supports, self._noise(n_tasks * n, d, dtype, random_state).reshape(n_tasks, n, d)

    def _run(self, backend, supports, x0, grid, trajectory):
        """Integrate one support, or every group of a batch (one run per batchable group), on
        the backend of this call; ``(result, largest error bound or None)``."""
        if not isinstance(supports, list):
            return self._integrate(backend, supports, x0, grid, trajectory)
        out, bounds = None, []
        for idx, S in supports:
            runs = (
                [(idx, S)]
                if self._batchable(S)
                else [(idx[g : g + 1], S[g]) for g in range(len(idx))]
            )
            for rows, S_run in runs:
                start = x0[rows] if S_run.ndim == 3 else x0[rows[0]]
                y, bound = self._integrate(backend, S_run, start, grid, trajectory)
                bounds.append(bound)
                if out is None:
                    out = np.empty(((len(grid),) if trajectory else ()) + x0.shape, y.dtype)
                out[..., rows, :, :] = y if S_run.ndim == 3 else y[..., None, :, :]
        return out, _largest(bounds)

    def _keep_error_bound(self, bound: float | None) -> None:
        """``sampling_error_bound_`` of this call; removed when this call had none, so that a
        bound of an earlier call (another engine) does not survive it."""
        if bound is not None:
            self.sampling_error_bound_ = bound
        elif hasattr(self, "sampling_error_bound_"):
            del self.sampling_error_bound_

    def _sample(self, n_samples, *, support=None, random_state=None, noise=None, backend=None):
        """:meth:`sample` after :meth:`_begin`; on ``backend`` when given (``score`` decides
        it once for all its draws), else on the backend :meth:`_backend` decides."""
        supports, x0 = self._sampling_start(n_samples, support, random_state, noise)
        backend = self._backend() if backend is None else backend
        out, bound = self._run(backend, supports, x0, self._time_grid(), trajectory=False)
        self._keep_error_bound(bound)
        return out

    def sample(
        self,
        n_samples: int = 1,
        *,
        support: Any = None,
        random_state: Any = None,
        noise: Any = None,
    ) -> np.ndarray:
        """Generate samples by integrating the flow from Gaussian noise at t = 0 to t = 1.

        Parameters
        ----------
        n_samples : int, default=1
            Number of samples (per support, for a batch of supports).
        support : array-like of shape (m, n_features) or (B, m, n_features), or list, optional
            Condition on this support set instead of the fitted one (in context, no refit).
            A 3-D array is a batch of ``B`` supports, a list of ``(m_b, n_features)`` arrays
            a batch of supports of different sizes: all tasks are integrated together (one
            solver run per support size; the adaptive solver runs task by task).
        random_state : int, RandomState instance or None, default=None
            Seed of the starting noise; ``None`` uses the estimator's ``random_state``. For a
            batch the noise is one draw of shape ``(B, n_samples, n_features)``, so task ``b``
            equals ``sample(n_samples, support=S[b], noise=X0[b])`` with that draw ``X0``.
        noise : array-like of shape (n_samples, n_features) or (B, n_samples, n_features)
            Start from these points instead of drawing noise (pairs samplers and solvers on
            the same noise); an ``(n_samples, n_features)`` array starts every task of a batch
            from the same points. Not together with ``random_state``.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features) or (B, n_samples, n_features)
            float32 when the support is float32, float64 otherwise.

        Examples
        --------
        >>> import numpy as np
        >>> from skflow import NWFlowSampler, SolverOptions
        >>> S = np.random.RandomState(0).normal(size=(3, 10, 2))
        >>> s = NWFlowSampler(solver=SolverOptions(n_steps=10)).fit(S[0])
        >>> X = s.sample(4, support=S, random_state=0)
        >>> X.shape
        (3, 4, 2)
        >>> X0 = np.random.RandomState(0).standard_normal((3, 4, 2))
        >>> bool(np.allclose(X[1], s.sample(4, support=S[1], noise=X0[1])))
        True
        """
        self._begin()
        return self._sample(n_samples, support=support, random_state=random_state, noise=noise)

    def sample_trajectories(
        self,
        n_samples: int = 1,
        *,
        support: Any = None,
        random_state: Any = None,
        n_points: int | None = None,
        noise: Any = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Generate samples and return their whole paths from t = 0 to t = 1.

        Parameters
        ----------
        n_samples, support, random_state, noise
            As in :meth:`sample`; the same seed gives the same end points as :meth:`sample`.
        n_points : int, optional
            Number of output times for the adaptive solver (default 101). Fixed-step solvers
            return every step (``n_steps + 1`` times).

        Returns
        -------
        t : ndarray of shape (T,)
            Output times, from 0 to 1.
        X : ndarray of shape (T, n_samples, n_features) or (T, B, n_samples, n_features)
            States at those times; ``X[-1]`` equals ``sample(...)`` for the same seed up to
            the adaptive solver's tolerance.

        Raises
        ------
        ValueError
            Before integrating, when ``X`` would not fit in the memory available (it names
            the size and the fix: fewer samples, fewer saved times, or :meth:`sample`).
        """
        self._begin()
        supports, x0 = self._sampling_start(n_samples, support, random_state, noise)
        if n_points is not None:
            n_points = check_int(n_points, "n_points", minimum=2)
        grid = self._time_grid(n_points or 101)
        check_trajectory_memory(grid.size, x0)  # before integrating, not after (issue 63)
        out, bound = self._run(self._backend(), supports, x0, grid, trajectory=True)
        self._keep_error_bound(bound)
        return grid, out

    # -- scoring ---------------------------------------------------------------------------
    def score(self, X: Any, y: Any = None) -> float:
        """Negative MMD^2 between generated samples and ``X`` (higher is better).

        Without ``y``: ``len(X)`` samples conditioned on the fitted support against ``X``.
        With ``y`` (task labels): the few-shot protocol. For each label the first
        ``support_size`` rows (half the rows when ``support_size`` is None) are the support and
        the remaining rows the reference; the score is the mean over tasks. The Gaussian
        kernel's bandwidth is the median heuristic of the reference rows alone, so scores are
        comparable across models. Sampling uses ``random_state``, or the fixed seed
        :data:`SCORE_RANDOM_STATE` (0) when it is None, so the score is deterministic: two
        calls with the same data give the same value (a ``RandomState`` instance is advanced
        by each call, as everywhere in scikit-learn).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), optional
            Task labels.

        Returns
        -------
        score : float
        """
        # SamplingPipeline.score is this method with the pipeline as ``self``: its parameters,
        # fitted state and queries are checked the same way, and it draws through its own
        # ``_score_one`` (its ``sample``, in input space)
        BaseFlowSampler._begin(self)
        X = self._check_queries(X)
        score_one = getattr(self, "_score_one", None)
        if isinstance(self, BaseFlowSampler):  # one backend for the draws of every task
            draw = partial(self._sample, backend=self._backend())
            score_one = partial(_score_task, self, draw)
        if y is None:
            return score_one(X, None)
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be a 1-D array of task labels, got shape {y.shape}.")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows.")
        scores = []
        for label in np.unique(y):
            rows = X[y == label]
            k = self._task_support_size(rows.shape[0], label)
            scores.append(score_one(rows[k:], rows[:k]))
        return float(np.mean(scores))

    def _task_support_size(self, n_rows: int, label: Any) -> int:
        return few_shot_support_size(getattr(self, "support_size", None), n_rows, label)


def sampling_score(
    sampler: Any,
    reference: np.ndarray,
    support: Any,
    random_state: Any = None,
    *,
    sample: Callable[..., np.ndarray] | None = None,
) -> float:
    """``-MMD^2`` between ``len(reference)`` samples of ``sampler`` and ``reference``.

    Samples are drawn with ``sampler.sample(n, support=support, random_state=...)`` (so a
    pipeline scores in input space; ``sample`` replaces ``sampler.sample``, e.g. by a sampler's
    own draw that skips the checks its ``score`` already ran), seeded by ``random_state`` (the
    estimator's), or by
    :data:`SCORE_RANDOM_STATE` when it is None so that the score is deterministic; the
    Gaussian kernel's bandwidth is the median heuristic of ``reference`` alone, so scores of
    different models are comparable.
    """
    from ..metrics import mmd2

    if reference.shape[0] < 2:
        raise ValueError("score needs at least 2 reference rows to estimate MMD^2.")
    seed = SCORE_RANDOM_STATE if random_state is None else random_state
    draw = sampler.sample if sample is None else sample
    generated = draw(reference.shape[0], support=support, random_state=seed)
    return -float(mmd2(generated, reference, bandwidth="median", reference=reference))


def check_support_names(estimator: Any, support: Any) -> None:
    """Refuse an in-context ``support`` whose column names differ from those seen in ``fit``.

    Only supports with column names (a DataFrame) are checked, against the estimator's
    ``feature_names_in_`` (when it was fitted with names): like scikit-learn does for ``X``,
    other names or the same names in another order raise ``ValueError``, since the columns
    would otherwise be matched by position.
    """
    columns = getattr(support, "columns", None)
    fitted = getattr(estimator, "feature_names_in_", None)
    if columns is None or fitted is None:
        return
    got = np.asarray([str(c) for c in columns], dtype=object)
    if got.shape != fitted.shape or np.any(got != fitted):
        raise ValueError(
            "support's column names must be the feature names seen in fit, in the same order: "
            f"expected {list(fitted)}, got {list(got)}."
        )


def few_shot_support_size(support_size: Any, n_rows: int, label: Any) -> int:
    """Support rows of a task of ``n_rows`` rows in the few-shot score (half when None)."""
    k = n_rows // 2 if support_size is None else check_int(support_size, "support_size")
    if k < 1 or n_rows - k < 2:
        raise ValueError(
            f"task {label!r} has {n_rows} rows: the few-shot score needs at least 1 support "
            f"row and 2 reference rows (support_size={support_size})."
        )
    return k


def call_threads(backend: Backend) -> int:
    """Threads a public call on ``backend`` may spread its work items over: the caller's
    budget (:func:`skflow.threads.thread_budget`) on the CPU, one on an accelerator."""
    return thread_budget() if backend.device in (None, "cpu") else 1


def row_items(X: np.ndarray, t: Any, n_keys: int, backend: Backend) -> list[tuple]:
    """``[(X rows, their times), ...]``: the work items of a field evaluation at ``X`` (n, d)
    and ``t`` (a scalar or (n,)), cut by the problem's size alone
    (:func:`skflow.threads.rows_per_item`); a batch ``X`` (B, n, d) is one item."""
    if X.ndim != 2 or backend.device not in (None, "cpu"):
        return [(X, t)]
    step = rows_per_item(n_keys, X.shape[1], SAMPLING_BATCH_SIZE, X.shape[0])
    per_row = np.ndim(t) > 0
    return [
        (X[i : i + step], t[i : i + step] if per_row else t)
        for i in range(0, max(X.shape[0], 1), step)
    ]


def _solve_task(sampler, backend, support, x0, grid, trajectory):
    """One batch of rows in a worker (module level so joblib can pickle the task), on one
    thread as in this process, so that the samples do not depend on ``n_jobs``."""
    with limit_threads(1):
        flow = sampler._prepare_flow(backend.asarray(support), backend)
        return sampler._solve_rows(backend, flow, x0, grid, trajectory)


def _score_task(sampler: BaseFlowSampler, draw: Callable, reference, support) -> float:
    """``-MMD^2`` of one task of ``sampler.score``, samples drawn by ``draw``."""
    return sampling_score(sampler, reference, support, sampler.random_state, sample=draw)


def _largest(bounds: list) -> float | None:
    """The largest of the error bounds that are not None; None when there is none."""
    bounds = [bound for bound in bounds if bound is not None]
    return max(bounds) if bounds else None


def _safe_ndim(a: Any) -> int:
    """``np.ndim`` of array-like input; -1 for None or ragged nested lists."""
    if a is None:
        return -1
    try:
        return int(np.ndim(a))
    except ValueError:
        return -1


def _pick(a: np.ndarray, task: slice | None) -> np.ndarray:
    """The tasks ``task`` of a batch (G, ...), or ``a`` itself for one support."""
    return a if task is None else a[task]


def available_memory() -> int | None:
    """Bytes of memory the system can still give this process (Linux ``MemAvailable``, else
    the free physical pages); None where neither is known.

    Examples
    --------
    >>> m = available_memory()
    >>> m is None or m > 0
    True
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_trajectory_memory(n_times: int, x0: np.ndarray, available: int | None = None) -> None:
    """Refuse, before any integration, trajectories ``(n_times, *x0.shape)`` that would not fit
    in ``available`` bytes (default :func:`available_memory`).

    Parameters
    ----------
    n_times : int
        Saved times ``T``.
    x0 : ndarray of shape (n, d) or (B, n, d)
        Starting points (their dtype is the output's).
    available : int, optional
        Bytes available; None reads them from the system (no check where it cannot).

    Examples
    --------
    >>> check_trajectory_memory(101, np.zeros((10, 2)), available=2**20)
    >>> try:
    ...     check_trajectory_memory(101, np.zeros((10**4, 2)), available=2**20)
    ... except ValueError as exc:
    ...     print(str(exc)[:46])
    sample_trajectories would return 101 states of
    """
    available = available_memory() if available is None else available
    needed = int(n_times) * int(x0.size) * x0.dtype.itemsize
    if available is None or needed <= available:
        return
    *tasks, n, d = x0.shape
    what = f"{n} samples x {d} features" + (f" x {tasks[0]} supports" if tasks else "")
    raise ValueError(
        f"sample_trajectories would return {n_times} states of {what} ({needed / 2**30:.3g} "
        f"GiB of {x0.dtype}), more than the {available / 2**30:.3g} GiB of memory available. "
        "Ask for fewer samples (in several calls), save fewer times (n_points, or fewer "
        "n_steps), or call sample(), which keeps only the end points."
    )
