"""Shared plumbing of the support-conditioned samplers: validation, sampling, trajectories, score.

A concrete sampler provides ``_field(support)`` returning ``func(t, x)`` (the velocity field
conditioned on ``support``, on the sampler's backend) and the helpers that move arrays to and
from that backend. Everything a user calls (``sample``, ``sample_trajectories``, ``score``)
lives here so every sampler behaves the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._array import to_numpy
from .._threads import parallel_map
from .._validation import (
    check_choice,
    check_data,
    check_finite_output,
    check_int,
    check_random_state,
    check_real,
)
from ..solvers import FIXED_STEP_METHODS, METHODS, integrate
from ._batch import (
    check_batch_times,
    check_noise,
    check_query_batch,
    check_support_batch,
    group_by_size,
    is_support_list,
    work_items,
)

__all__ = [
    "ADAPTIVE_MAX_STEPS",
    "SAMPLING_BATCH_SIZE",
    "SCORE_RANDOM_STATE",
    "BaseFlowSampler",
    "check_support_names",
]

# Step budget of the adaptive solver (dopri5) per integration. Well-posed problems take a few
# hundred steps even at tight tolerances; far more means the field is too stiff to resolve
# (e.g. supports of magnitude ~1e30, where the kernel switches between support points across
# distances below the floating-point resolution), and the estimator then raises instead of
# running for minutes.
ADAPTIVE_MAX_STEPS = 10_000

# Rows integrated together. Sampling always splits into batches of this size, whatever
# ``n_jobs`` is, so serial and parallel runs do exactly the same arithmetic.
SAMPLING_BATCH_SIZE = 4096

#: Seed of the samples drawn by ``score`` when the estimator's ``random_state`` is None, so
#: that ``score`` (and a ``GridSearchCV`` over it) is deterministic by default.
SCORE_RANDOM_STATE = 0


class BaseFlowSampler(BaseEstimator):
    """Base class of skflow samplers (not for direct use).

    Subclasses define ``_field(support)`` and may override ``_to_backend`` / ``_to_numpy``.
    Parameters used here: ``solver``, ``n_steps``, ``rtol``, ``atol``, ``support_size``,
    ``random_state``.
    """

    # -- validation -------------------------------------------------------------------------
    def _validate_params(self) -> None:
        """Check every parameter (subclasses check theirs too); run by each public call."""
        self._validate_solver_params()

    def _validate_solver_params(self) -> None:
        check_choice(self.solver, "solver", METHODS)
        check_int(self.n_steps, "n_steps")
        for name in ("rtol", "atol"):
            check_real(getattr(self, name), name, low=0.0, low_open=True)

    def _check_support(self, support: Any) -> np.ndarray:
        """The fitted support, or a validated in-context support with the fitted n_features."""
        check_is_fitted(self)
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
        check_is_fitted(self)
        X = check_data(validate_data, self, X, reset=False, dtype=[np.float64, np.float32])
        return X if X.flags.writeable else X.copy()  # Torch warns on read-only arrays

    # -- backend hooks (NumPy by default) ----------------------------------------------------
    def _to_backend(self, a: np.ndarray) -> Any:
        return a

    def _to_numpy(self, a: Any) -> np.ndarray:
        return to_numpy(a)

    def _field(self, support: Any):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- sampling --------------------------------------------------------------------------
    def _time_grid(self, n_points: int | None = None) -> np.ndarray:
        if self.solver in FIXED_STEP_METHODS:
            return np.linspace(0.0, 1.0, self.n_steps + 1)
        return np.linspace(0.0, 1.0, n_points or 2)

    def _noise(self, n_samples: Any, n_features: int, dtype: Any, random_state: Any) -> np.ndarray:
        n_samples = check_int(n_samples, "n_samples")
        seed = self.random_state if random_state is None else random_state
        rng = check_random_state(seed)
        # Noise is drawn on the host with NumPy so every backend and device sees the same
        # starting points for a given seed.
        return rng.standard_normal((n_samples, n_features)).astype(dtype, copy=False)

    def _integrate_batch(self, support, x0, grid, trajectory, field=None):
        """Integrate one batch of rows on this sampler's backend with ``field`` (built from
        ``support`` when None); returns NumPy and the field's error bound (or None)."""
        if field is None:
            field = self._field(self._to_backend(support))
        sol = self._solve(field, self._to_backend(x0), grid, return_trajectory=trajectory)
        return self._to_numpy(sol.y), getattr(self, "sampling_error_bound_", None)

    def _solve(self, field, y0, grid, **kwargs):
        """``integrate`` with this sampler's solver; a non-finite velocity, or an adaptive
        solve that exhausts :data:`ADAPTIVE_MAX_STEPS`, is a ValueError."""
        return self._solve_adaptive(
            field, y0, grid, method=self.solver, rtol=self.rtol, atol=self.atol, **kwargs
        )

    def _solve_adaptive(self, field, y0, grid, *, rtol, atol, method="dopri5", **kwargs):
        """``integrate`` with the given method and tolerances, errors as in :meth:`_solve`."""
        try:
            return integrate(
                field,
                y0,
                grid,
                method=method,
                rtol=rtol,
                atol=atol,
                max_steps=ADAPTIVE_MAX_STEPS,
                **kwargs,
            )
        except FloatingPointError as exc:  # the adaptive solver met a non-finite velocity
            raise ValueError(
                f"{exc} The inputs' magnitude is too large for floating-point arithmetic "
                "(squared distances overflow); rescale them, e.g. with StandardScaler."
            ) from exc
        except RuntimeError as exc:
            if "max_steps" not in str(exc):
                raise
            raise ValueError(
                f"{exc} The velocity field is too stiff for the adaptive solver at this data "
                "scale; rescale the data (e.g. StandardScaler), raise rtol/atol or use a "
                "fixed-step solver."
            ) from exc

    def _integrate(self, support, x0, grid, trajectory):
        """Integrate ``x0`` (n, d) with the field of ``support`` (m, d), or a batch: ``x0``
        (G, n, d) with ``support`` (G, m, d); returns (n, d) / (G, n, d), or (T, ...)."""
        self._validate_params()  # set_params may have changed any of them since fit
        items = work_items(x0, support.shape[-2], SAMPLING_BATCH_SIZE)
        n_jobs = getattr(self, "n_jobs", None)
        # a bound of an earlier call (another engine) must not survive this one
        self.__dict__.pop("sampling_error_bound_", None)
        if len(items) == 1 or n_jobs in (None, 1):
            results, key, field = [], None, None
            for task, rows in items:
                if field is None or task != key:  # prepared once for all its row batches
                    key, field = task, self._field(self._to_backend(_pick(support, task)))
                start = _pick(x0, task)[..., rows, :]
                results.append(self._integrate_batch(None, start, grid, trajectory, field))
        else:
            # The estimator itself is shipped to the workers (it pickles), so this also runs
            # under joblib's dask backend on a cluster; each worker gets its share of cores.
            jobs = [
                (self, _pick(support, task), _pick(x0, task)[..., rows, :], grid, trajectory)
                for task, rows in items
            ]
            results = parallel_map(_integrate_batch, jobs, n_jobs)
        bounds = [bound for _, bound in results if bound is not None]
        if bounds:  # the workers' fields (copies of the sampler) each kept their own
            self.sampling_error_bound_ = max(bounds)
        out = np.empty(((len(grid),) if trajectory else ()) + x0.shape, results[0][0].dtype)
        for (task, rows), (y, _) in zip(items, results, strict=True):
            out[
                (Ellipsis, rows, slice(None)) if task is None else (..., task, rows, slice(None))
            ] = y
        return check_finite_output(out, "the sampled trajectory" if trajectory else "the sample")

    # -- one support or a batch ------------------------------------------------------------
    def _batchable(self, support: np.ndarray) -> bool:
        """Whether a batch ``(G, m, d)`` of supports can share one solver run (else the
        tasks are integrated one by one). The adaptive solver keeps one clock per row of an
        ``(n, d)`` state, so it runs task by task."""
        return self.solver in FIXED_STEP_METHODS

    def _supports(self, support: Any) -> tuple[Any, Any, int | None]:
        """``(support (m, d), dtype, None)``, or for a batch ``(groups, dtype, B)`` with
        ``groups = [(task indices, supports (G, m, d)), ...]`` (see :mod:`._batch`)."""
        check_is_fitted(self)
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
        S = check_support_batch(support, self._n_features_fitted(), name)
        X = check_query_batch(X, S.shape[0], S.shape[2])
        t = check_batch_times(t, X.shape[:2])
        dtype = np.result_type(X.dtype, S.dtype)
        return X.astype(dtype, copy=False), S.astype(dtype, copy=False), t

    def _n_features_fitted(self) -> int:
        check_is_fitted(self)
        return self.n_features_in_

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

    def _run(self, supports, x0, grid, trajectory):
        """Integrate one support, or every group of a batch (one run per batchable group)."""
        if not isinstance(supports, list):
            return self._integrate(supports, x0, grid, trajectory)
        out, bounds = None, []
        for idx, S in supports:
            runs = (
                [(idx, S)]
                if self._batchable(S)
                else [(idx[g : g + 1], S[g]) for g in range(len(idx))]
            )
            for rows, S_run in runs:
                start = x0[rows] if S_run.ndim == 3 else x0[rows[0]]
                y = self._integrate(S_run, start, grid, trajectory)
                bounds.append(getattr(self, "sampling_error_bound_", None))
                if out is None:
                    out = np.empty(((len(grid),) if trajectory else ()) + x0.shape, y.dtype)
                out[..., rows, :, :] = y if S_run.ndim == 3 else y[..., None, :, :]
        bounds = [b for b in bounds if b is not None]
        if bounds:
            self.sampling_error_bound_ = max(bounds)
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
        >>> from skflow import NWFlowSampler
        >>> S = np.random.RandomState(0).normal(size=(3, 10, 2))
        >>> s = NWFlowSampler(n_steps=10).fit(S[0])
        >>> X = s.sample(4, support=S, random_state=0)
        >>> X.shape
        (3, 4, 2)
        >>> X0 = np.random.RandomState(0).standard_normal((3, 4, 2))
        >>> bool(np.allclose(X[1], s.sample(4, support=S[1], noise=X0[1])))
        True
        """
        supports, x0 = self._sampling_start(n_samples, support, random_state, noise)
        return self._run(supports, x0, self._time_grid(), trajectory=False)

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
        """
        supports, x0 = self._sampling_start(n_samples, support, random_state, noise)
        if n_points is not None:
            n_points = check_int(n_points, "n_points", minimum=2)
        grid = self._time_grid(n_points or 101)
        return grid, self._run(supports, x0, grid, trajectory=True)

    # -- scoring ---------------------------------------------------------------------------
    def _score_one(self, reference: np.ndarray, support: Any) -> float:
        return sampling_score(self, reference, support, self.random_state)

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
        X = self._check_queries(X)
        if y is None:
            return self._score_one(X, None)
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be a 1-D array of task labels, got shape {y.shape}.")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows.")
        scores = []
        for label in np.unique(y):
            rows = X[y == label]
            k = self._task_support_size(rows.shape[0], label)
            scores.append(self._score_one(rows[k:], rows[:k]))
        return float(np.mean(scores))

    def _task_support_size(self, n_rows: int, label: Any) -> int:
        return few_shot_support_size(getattr(self, "support_size", None), n_rows, label)


def sampling_score(
    sampler: Any, reference: np.ndarray, support: Any, random_state: Any = None
) -> float:
    """``-MMD^2`` between ``len(reference)`` samples of ``sampler`` and ``reference``.

    Samples are drawn with ``sampler.sample(n, support=support, random_state=...)`` (so a
    pipeline scores in input space), seeded by ``random_state`` (the estimator's), or by
    :data:`SCORE_RANDOM_STATE` when it is None so that the score is deterministic; the
    Gaussian kernel's bandwidth is the median heuristic of ``reference`` alone, so scores of
    different models are comparable.
    """
    from ..metrics import mmd2

    if reference.shape[0] < 2:
        raise ValueError("score needs at least 2 reference rows to estimate MMD^2.")
    seed = SCORE_RANDOM_STATE if random_state is None else random_state
    generated = sampler.sample(reference.shape[0], support=support, random_state=seed)
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


def _integrate_batch(sampler, support, x0, grid, trajectory):
    """Module-level wrapper so joblib can pickle the task."""
    return sampler._integrate_batch(support, x0, grid, trajectory)


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
