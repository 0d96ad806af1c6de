"""Classical few-shot generators a user could fit instead of a flow, and a selector among them.

Each estimator here is fitted on labelled rows ``fit(X, y)`` (every label a *training class*,
as :meth:`skflow.LearnedFlowSampler.fit`) and then generates new rows of an unseen class from
its support, in context: ``sample(n, support=S)``. They are the comparison arms of the
learned sampler, and strong ones where the classes share structure:

* :class:`LedoitWolfSampler`: a Gaussian with the support's mean and Ledoit-Wolf covariance
  (uses nothing of the training classes);
* :class:`PooledGaussianSampler`: the support's mean and the within-class covariance pooled
  over the training classes;
* :class:`EmpiricalBayesGaussianSampler`: the Bayes predictive of a hierarchical Gaussian model
  whose hyperparameters (the law of the class means, the within-class covariance) are
  estimated from the training classes: the support mean shrunk toward the training classes'
  means;
* :class:`BICGaussianMixtureSampler`: a :class:`~sklearn.mixture.GaussianMixture` fitted on the
  support, its number of components and covariance type chosen by BIC among those with fewer
  parameters than the support has numbers;
* :class:`BestClassicalSampler`: the candidate with the best few-shot MMD² on held-out
  *training* classes (class-grouped folds), refitted on all of them; never sees test classes.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.covariance import LedoitWolf
from sklearn.exceptions import FitFailedWarning
from sklearn.mixture import GaussianMixture
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from .._validation import (
    InvalidParameterError,
    ParameterCheck,
    check_data,
    check_int,
    check_random_state,
    choice,
    integer,
    optional,
    random_seed,
    real,
    satisfies,
    validate_parameters,
)
from ..metrics import mmd2
from ._atomic import atomic_fit
from ._base import few_shot_support_size, sampling_score
from ._copy_aware import MEMORIZATION_FLOOR, choose_copy_aware, task_scores
from ._frame import spread_mask, task_frame, warn_no_spread
from ._selection import DEFAULT_SIGMA_MIN_GRID

__all__ = [
    "BICGaussianMixtureSampler",
    "BestClassicalSampler",
    "EmpiricalBayesGaussianSampler",
    "LedoitWolfSampler",
    "PooledGaussianSampler",
]


def _psd_sqrt(cov: np.ndarray) -> np.ndarray:
    """``L`` with ``L L^T = cov`` for a symmetric PSD matrix (eigenvalues below 0 set to 0)."""
    vals, vecs = np.linalg.eigh(0.5 * (cov + cov.T))
    return vecs * np.sqrt(np.clip(vals, 0.0, None))


def _class_statistics(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Class means ``(K, d)``, class sizes ``(K,)`` and the pooled within-class covariance.

    The pooled covariance is the sum of the classes' scatter matrices over ``n - K`` (classes
    of one row add nothing to the scatter and take no degree of freedom).
    """
    labels, inverse = np.unique(y, return_inverse=True)
    counts = np.bincount(inverse)
    means = np.zeros((len(labels), X.shape[1]))
    np.add.at(means, inverse, X)
    means /= counts[:, None]
    resid = X - means[inverse]
    dof = max(1, int(np.sum(counts[counts > 1])) - int(np.sum(counts > 1)))
    return means, counts, resid.T @ resid / dof


def _overflow_error(name: str, what: str, X: np.ndarray) -> ValueError:
    """The error of values whose covariance overflows float64, naming the fix (rescale)."""
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    return ValueError(
        f"{name}: the values of {what} overflow float64 in the covariance (largest magnitude "
        f"{largest:.3g}; sums of their squares exceed {np.finfo(np.float64).max:.3g}). Rescale "
        f"the features first: divide them by a constant, or use make_sampling_pipeline("
        f"MaxAbsScaler(), {name}()), which samples in the scaled space and maps the rows back "
        "(StandardScaler's variance overflows at this magnitude too)."
    )


def _check_covariance_range(X: np.ndarray, name: str, what: str) -> None:
    """Refuse rows whose centred sums of squares overflow float64 (every covariance entry is
    bounded by them, so below it the covariances of the arms stay finite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        centred = X - X.mean(axis=0)
        squares = np.einsum("ij,ij->j", centred, centred)
    if not np.all(np.isfinite(squares)):
        raise _overflow_error(name, what, X)


def _ledoit_wolf_covariance(S: np.ndarray) -> np.ndarray:
    """``LedoitWolf().fit(S).covariance_``, computed on ``S`` scaled by a power of 2 to unit
    magnitude: bit for bit the same (scaling by ``2**k`` is exact) where sklearn's shrinkage
    would overflow its fourth powers (rows beyond about 1e77) or underflow them."""
    largest = float(np.max(np.abs(S))) if S.size else 0.0
    k = int(np.frexp(largest)[1]) if np.isfinite(largest) and largest > 0 else 0
    with np.errstate(over="ignore"):  # a covariance beyond float64 is refused by the caller
        return np.ldexp(LedoitWolf().fit(np.ldexp(S, -k)).covariance_, 2 * k)


def _check_labels(labels: np.ndarray, name: str) -> None:
    """Refuse missing labels: NaN (or None) would silently become a class of its own."""
    if labels.dtype.kind == "f":
        missing = np.isnan(labels)
    elif labels.dtype.kind == "O":
        missing = np.array([v is None or v != v for v in labels], dtype=bool)
    else:
        return
    if missing.any():
        raise ValueError(
            f"{name}: y contains {int(missing.sum())} missing label(s) (NaN or None); every "
            "label is a class and a missing one is none. Drop those rows first, e.g. "
            "keep = ~pd.isna(y); fit(X[keep], y[keep])."
        )


class _ClassicalSampler(BaseEstimator):
    """Shared plumbing: ``fit(X, y)``, in-context ``sample`` of one or many supports, ``score``.

    A subclass implements ``_fit_classes(X, y)`` (float64 rows, labels) and either
    ``_moments(S)`` (a Gaussian's mean and covariance for the support ``S``) or ``_draw``.
    """

    _parameter_constraints: ClassVar[dict[str, ParameterCheck]] = {"random_state": random_seed()}
    #: Fewest support rows the arm can use.
    _min_support = 1
    #: Whether the arm's scale is the support's own (no training classes' covariance), so a
    #: support without spread has none: copies of its row, with a warning.
    _scale_from_support = False

    def __init__(self, *, random_state: Any = None):
        self.random_state = random_state

    @atomic_fit
    def fit(self, X: Any, y: Any = None) -> _ClassicalSampler:
        """Learn what the training classes share (or, without ``y``, use ``X`` as the support).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows (at least 2 without ``y``). Rows whose covariance overflows float64
            (magnitudes beyond about 1e153) raise a ``ValueError`` naming the rescaling.
        y : array-like of shape (n_samples,), optional
            Class labels: every label is one training class (a missing label, NaN or None,
            raises). Without labels ``X`` is one class and also the default support of
            :meth:`sample`.

        Returns
        -------
        self : object

        Notes
        -----
        A fit that raises or is interrupted (``KeyboardInterrupt`` too) leaves the estimator
        as it was: fitted, the same samples for the same seed; unfitted, ``NotFittedError``.
        """
        validate_parameters(self.get_params(deep=False), self._parameter_constraints)
        X = check_data(validate_data, self, X, dtype=[np.float64, np.float32])
        labels = self._fit_labels(X, y)
        spread_mask(X[None], type(self).__name__)  # refuses a spread float64 cannot resolve
        fitted = self._fit_classes(X.astype(np.float64), labels)
        self.__dict__.update(fitted)  # set together, once everything is computed
        self.support_ = X.copy() if y is None else None
        return self

    def _fit_labels(self, X: np.ndarray, y: Any) -> np.ndarray:
        """The labels of the rows of ``X`` (one class without ``y``), after the checks every
        arm needs: no missing label, 2 rows at least without labels, no overflow."""
        name = type(self).__name__
        if y is None:
            if X.shape[0] < 2:
                raise ValueError(
                    f"{name} needs at least 2 rows to fit without labels (one row has no "
                    f"covariance); got n_samples = {X.shape[0]}. Pass 2 rows or more, or fit "
                    "on labelled classes and pass the row as support= to sample."
                )
            labels = np.zeros(X.shape[0], dtype=np.int64)
        else:
            labels = column_or_1d(y, warn=True)
            if labels.shape[0] != X.shape[0]:
                raise ValueError(f"y has {labels.shape[0]} entries but X has {X.shape[0]} rows.")
            _check_labels(labels, name)
        _check_covariance_range(X.astype(np.float64), name, "X")
        return labels

    def _fit_classes(self, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        """The fitted attributes the arm keeps of the training classes (none by default);
        computed without touching the estimator, set by :meth:`fit` when all succeeded."""
        return {}

    def _supports(self, support: Any) -> tuple[list[np.ndarray], bool, Any]:
        """Validated supports as a list of float64 ``(m, d)`` arrays, batched?, output dtype."""
        if support is None:
            if self.support_ is None:
                raise ValueError(
                    f"{type(self).__name__} was fitted on labelled classes and has no default "
                    "support; pass support=array of shape (m, n_features)."
                )
            support = self.support_
        batched = np.ndim(support) == 3
        arrays = list(support) if batched else [support]
        checked = [
            check_data(check_array, s, dtype=[np.float64, np.float32], input_name="support")
            for s in arrays
        ]
        for s in checked:
            if s.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"support has {s.shape[1]} features, but {type(self).__name__} is "
                    f"expecting {self.n_features_in_} features as input."
                )
            if s.shape[0] < self._min_support:
                raise ValueError(
                    f"{type(self).__name__} needs a support of at least {self._min_support} "
                    f"rows, got {s.shape[0]}."
                )
            if self._scale_from_support:  # the arm computes the support's own covariance
                _check_covariance_range(s.astype(np.float64), type(self).__name__, "the support")
        dtype = np.float32 if all(s.dtype == np.float32 for s in checked) else np.float64
        return [s.astype(np.float64) for s in checked], batched, dtype

    def predictive_moments(self, support: Any) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the Gaussian this arm generates given ``support``.

        Only for the Gaussian arms (those with ``_moments``: :class:`LedoitWolfSampler`,
        :class:`PooledGaussianSampler`, :class:`EmpiricalBayesGaussianSampler`).

        Parameters
        ----------
        support : array-like of shape (m, n_features) or (B, m, n_features)

        Returns
        -------
        mean : ndarray of shape (n_features,) or (B, n_features)
        cov : ndarray of shape (n_features, n_features) or (B, n_features, n_features)

        Examples
        --------
        >>> import numpy as np
        >>> from skflow.samplers import PooledGaussianSampler
        >>> X, y = np.random.default_rng(0).normal(size=(40, 2)), np.repeat(np.arange(4), 10)
        >>> mean, cov = PooledGaussianSampler().fit(X, y).predictive_moments(X[:5])
        >>> mean.shape, cov.shape
        ((2,), (2, 2))
        """
        check_is_fitted(self)
        if not hasattr(self, "_moments"):
            raise TypeError(f"{type(self).__name__} generates no single Gaussian: no moments.")
        supports, batched, _ = self._supports(support)
        pairs = [self._moments(S) for S in supports]
        means, covs = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
        return (means, covs) if batched else (means[0], covs[0])

    def _draw(self, S: np.ndarray, n: int, rng: np.random.RandomState) -> np.ndarray:
        """``n`` rows for the support ``S``: the Gaussian of :meth:`_moments` by default."""
        mean, cov = self._moments(S)
        return mean + rng.standard_normal((n, S.shape[1])) @ _psd_sqrt(cov).T

    def sample(self, n_samples: int = 1, *, support: Any = None, random_state: Any = None):
        """Generate rows of the class the support comes from (in context, no refit).

        Parameters
        ----------
        n_samples : int, default=1
            Rows per support.
        support : array-like of shape (m, n_features) or (B, m, n_features), optional
            Rows of a new class (or of ``B`` classes); the fitted ``X`` when fitted without
            labels.
        random_state : int, RandomState instance or None, default=None
            Seed of this draw; ``None`` uses the estimator's ``random_state``.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features) or (B, n_samples, n_features)
            float32 when the support is float32, float64 otherwise.
        """
        check_is_fitted(self)
        validate_parameters(self.get_params(deep=False), self._parameter_constraints)
        n = check_int(n_samples, "n_samples")
        supports, batched, dtype = self._supports(support)
        rng = check_random_state(self.random_state if random_state is None else random_state)
        rows = [
            self._draw_or_copy(S, n, rng, b if batched else None) for b, S in enumerate(supports)
        ]
        out = np.stack(rows).astype(dtype, copy=False)
        return out if batched else out[0]

    def _draw_or_copy(self, S: np.ndarray, n: int, rng: Any, index: int | None) -> np.ndarray:
        """:meth:`_draw`, except that an arm whose scale is the support's own
        (``_scale_from_support``) returns copies of a support without spread, with a warning,
        and refuses one whose spread float64 cannot resolve (issue 63)."""
        if self._scale_from_support and not spread_mask(S[None], type(self).__name__)[0]:
            warn_no_spread(type(self).__name__, index)
            return np.repeat(S[:1], n, axis=0)
        return self._draw(S, n, rng)

    def score(self, X: Any, y: Any = None) -> float:
        """Negative MMD² of generated rows against ``X`` (higher is better).

        Without ``y``: ``len(X)`` rows conditioned on the fitted support, against ``X``. With
        ``y`` (class labels): per class the first half of its rows is the support and the rest
        the reference; the mean over classes. Bandwidth: median heuristic of the reference.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), optional

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        X = check_data(validate_data, self, X, reset=False, dtype=[np.float64, np.float32])
        if y is None:
            return sampling_score(self, X, None, self.random_state)
        y = column_or_1d(y)
        scores = []
        for label in np.unique(y):
            rows = X[y == label]
            k = few_shot_support_size(None, rows.shape[0], label)
            scores.append(sampling_score(self, rows[k:], rows[:k], self.random_state))
        return float(np.mean(scores))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


class LedoitWolfSampler(_ClassicalSampler):
    """Gaussian with the support's mean and its Ledoit-Wolf shrunk covariance.

    Uses nothing of the training classes (``fit`` only records the number of features). A
    support without spread (one row, or identical rows) has no scale: :meth:`sample` returns
    copies of its row, with a :class:`~skflow.exceptions.MemorizationWarning`.

    Parameters
    ----------
    random_state : int, RandomState instance or None, default=None
        Seed of :meth:`sample` when it gets none.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit``.
    support_ : ndarray of shape (n_samples, n_features) or None
        The fitted rows when fitted without labels (the default support), else None.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.samplers import LedoitWolfSampler
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(60, 3)), np.repeat(np.arange(6), 10)
    >>> s = LedoitWolfSampler(random_state=0).fit(X, y)
    >>> s.sample(4, support=X[:5]).shape
    (4, 3)
    """

    _scale_from_support = True

    def _moments(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if S.shape[0] < 2:  # sample returns copies of it (no spread): only the moments refuse
            raise ValueError(
                "LedoitWolfSampler needs a support of at least 2 rows for its moments, got 1 "
                "(a row has no covariance; sample returns copies of it)."
            )
        cov = _ledoit_wolf_covariance(S)
        if not np.all(np.isfinite(cov)):
            raise _overflow_error(type(self).__name__, "the support", S)
        return S.mean(axis=0), cov


class PooledGaussianSampler(_ClassicalSampler):
    """Gaussian with the support's mean and the within-class covariance of the training classes.

    ``fit(X, y)`` pools the classes' scatter matrices (over ``n - K`` degrees of freedom); a
    support then only has to locate its class.

    Parameters
    ----------
    random_state : int, RandomState instance or None, default=None
        Seed of :meth:`sample` when it gets none.

    Attributes
    ----------
    within_covariance_ : ndarray of shape (n_features, n_features)
        The pooled within-class covariance.
    n_features_in_ : int
        Number of features seen in ``fit``.
    support_ : ndarray of shape (n_samples, n_features) or None
        The fitted rows when fitted without labels (the default support), else None.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.samplers import PooledGaussianSampler
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(60, 3)), np.repeat(np.arange(6), 10)
    >>> s = PooledGaussianSampler(random_state=0).fit(X, y)
    >>> s.within_covariance_.shape, s.sample(4, support=X[:5]).shape
    ((3, 3), (4, 3))
    """

    def _fit_classes(self, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        _, counts, within = _class_statistics(X, y)
        if counts.max() < 2:  # no scatter: every sample would be a copy of the support mean
            raise ValueError(
                "PooledGaussianSampler needs a class of at least 2 rows in y to estimate the "
                f"within-class covariance; all {len(counts)} classes have 1 row. Pass classes "
                "of 2 rows or more."
            )
        return {"within_covariance_": within}

    def _moments(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return S.mean(axis=0), self.within_covariance_


class EmpiricalBayesGaussianSampler(_ClassicalSampler):
    """Bayes predictive of a hierarchical Gaussian model with hyperparameters from the classes.

    The model: class means ``mu ~ N(mu_0, T)``, rows ``x | mu ~ N(mu, W)``. ``fit(X, y)``
    estimates ``W`` by the pooled within-class covariance, ``mu_0`` by the mean of the class
    means and ``T`` by the method of moments, ``Cov(class means) - W mean(1 / n_c)``, its
    negative part (in the basis where ``W`` is the identity) set to 0; with the default
    ``shrinkage="ledoit-wolf"`` ``Cov(class means)`` is the Ledoit-Wolf estimate (few classes
    spread its eigenvalues: the small ones, pushed below ``W mean(1 / n_c)`` and cut to 0,
    would shrink a support all the way to ``mu_0`` there). For a support of ``m``
    rows with mean ``s`` the predictive is ``N(mu_m, W + Sigma_m)`` with
    ``K = T (T + W / m)^{-1}``, ``mu_m = mu_0 + K (s - mu_0)`` (the support mean shrunk toward
    the training classes) and ``Sigma_m = K W / m``; with the true ``mu_0, T, W`` this is the
    exact Bayes predictive of :class:`skflow.tasks.HierarchicalTasks`.

    Parameters
    ----------
    shrinkage : {"ledoit-wolf"} or None, default="ledoit-wolf"
        Estimate of the class means' covariance: Ledoit-Wolf shrinkage toward a multiple of
        the identity, or (None) the sample covariance (the two compared in
        ``docs/transfer.md``, arms ``emp_bayes`` and ``emp_bayes_mom``).
    random_state : int, RandomState instance or None, default=None
        Seed of :meth:`sample` when it gets none.

    Attributes
    ----------
    prior_mean_ : ndarray of shape (n_features,)
    prior_covariance_ : ndarray of shape (n_features, n_features)
        ``T``, positive semi-definite (singular with fewer classes than features).
    within_covariance_ : ndarray of shape (n_features, n_features)
    n_features_in_ : int
        Number of features seen in ``fit``.
    support_ : None
        Always None: the model needs at least 2 labelled classes.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.samplers import EmpiricalBayesGaussianSampler
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(20), 10)
    >>> X = 3.0 * rng.normal(size=(20, 2))[y] + rng.normal(size=(200, 2))
    >>> s = EmpiricalBayesGaussianSampler(random_state=0).fit(X, y)
    >>> mean, cov = s.predictive_moments(X[:5])
    >>> s.sample(4, support=X[:5]).shape, cov.shape
    ((4, 2), (2, 2))
    """

    _parameter_constraints: ClassVar[dict[str, ParameterCheck]] = {
        "shrinkage": optional(choice(("ledoit-wolf",))),
        "random_state": random_seed(),
    }

    def __init__(self, shrinkage: str | None = "ledoit-wolf", *, random_state: Any = None):
        self.shrinkage = shrinkage
        self.random_state = random_state

    def _fit_classes(self, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        means, counts, W = _class_statistics(X, y)
        if len(counts) < 2:
            raise ValueError(
                "EmpiricalBayesGaussianSampler needs at least 2 classes in y to estimate the "
                f"law of the class means, got {len(counts)} class(es)."
            )
        between = np.atleast_2d(np.cov(means.T))
        if self.shrinkage == "ledoit-wolf":  # rescaled to the unbiased normalisation of np.cov
            k = len(counts)
            between = _ledoit_wolf_covariance(means) * k / (k - 1)
        if not np.any(W):  # the floor below is relative to W: there is no scale to keep
            raise ValueError(
                "EmpiricalBayesGaussianSampler: the training classes have no spread (the rows "
                "of every class are identical), so there is no within-class covariance; pass "
                "classes of distinct rows, or PooledGaussianSampler (copies of the mean)."
            )
        # T = between - W mean(1/n_c), kept PSD in the frame where W is the identity
        vals, vecs = np.linalg.eigh(W)
        root = vecs * np.sqrt(np.clip(vals, 1e-12 * vals.max(), None))  # W = root root^T
        inv_root = np.linalg.inv(root)
        lam, U = np.linalg.eigh(inv_root @ between @ inv_root.T)
        lam = np.clip(lam - np.mean(1.0 / counts), 0.0, None)
        return {
            "prior_mean_": means.mean(axis=0),
            "prior_covariance_": (root @ U) * lam @ (root @ U).T,
            "within_covariance_": W,
        }

    def _moments(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        T, W, mu0 = self.prior_covariance_, self.within_covariance_, self.prior_mean_
        Wm = W / S.shape[0]
        K = np.linalg.solve(T + Wm, T).T  # T (T + W/m)^{-1}, all symmetric
        post = K @ Wm
        return mu0 + K @ (S.mean(axis=0) - mu0), W + 0.5 * (post + post.T)


def _n_gmm_parameters(k: int, covariance_type: str, d: int) -> int:
    """Free parameters of a ``k``-component mixture in ``d`` dimensions."""
    cov = {"spherical": k, "diag": k * d, "full": k * d * (d + 1) // 2, "tied": d * (d + 1) // 2}
    return k * d + (k - 1) + cov[covariance_type]


def _check_covariance_types(value: Any) -> None:
    allowed = ("spherical", "diag", "full", "tied")
    if (
        isinstance(value, str)
        or not isinstance(value, tuple | list)
        or not value
        or any(v not in allowed for v in value)
    ):
        raise InvalidParameterError(
            f"covariance_types must be a non-empty tuple of {allowed}, got {value!r}."
        )


class BICGaussianMixtureSampler(_ClassicalSampler):
    """A :class:`~sklearn.mixture.GaussianMixture` fitted on the support, chosen by BIC.

    The candidates are every number of components ``1 .. max_components`` and covariance type
    of ``covariance_types`` whose mixture has fewer free parameters than the support has
    numbers (``m * d``) and at least 2 rows per component: where ``m`` allows, a full
    covariance; with few rows, a diagonal or spherical one. The lowest BIC wins. Uses nothing of
    the training classes. The mixtures are fitted in the support's frame (centred, unit
    spread), so ``a S + b`` gives ``a`` times the samples of ``S`` plus ``b``; a support without
    spread (one row, or identical rows) has no scale: :meth:`sample` returns copies of its
    row, with a :class:`~skflow.exceptions.MemorizationWarning`.

    Parameters
    ----------
    max_components : int >= 1, default=3
        Largest number of mixture components tried.
    covariance_types : tuple of str, default=("spherical", "diag", "full")
        Covariance types tried (:class:`~sklearn.mixture.GaussianMixture`'s names).
    reg_covar : float >= 0, default=1e-3
        Added to the covariances' diagonal, as a fraction of the support's mean variance (so
        it is relative to the data's scale).
    random_state : int, RandomState instance or None, default=None
        Seed of :meth:`sample` (and of the mixtures' initialisation) when it gets none.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit``.
    support_ : ndarray of shape (n_samples, n_features) or None
        The fitted rows when fitted without labels (the default support), else None.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.samplers import BICGaussianMixtureSampler
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(size=(20, 2)), 8.0 + rng.normal(size=(20, 2))])
    >>> s = BICGaussianMixtureSampler(random_state=0).fit(X)
    >>> s.select(X).n_components, s.sample(3).shape
    (2, (3, 2))
    """

    _parameter_constraints: ClassVar[dict[str, ParameterCheck]] = {
        "max_components": integer(),
        "covariance_types": satisfies(_check_covariance_types),
        "reg_covar": real(low=0.0),
        "random_state": random_seed(),
    }
    _scale_from_support = True

    def __init__(
        self,
        max_components: int = 3,
        covariance_types: tuple = ("spherical", "diag", "full"),
        reg_covar: float = 1e-3,
        *,
        random_state: Any = None,
    ):
        self.max_components = max_components
        self.covariance_types = covariance_types
        self.reg_covar = reg_covar
        self.random_state = random_state

    def select(self, support: Any, random_state: Any = 0) -> GaussianMixture:
        """The mixture of lowest BIC among the candidates the support allows.

        Parameters
        ----------
        support : array-like of shape (m, n_features)
        random_state : int, RandomState instance or None, default=0
            Initialisation of the mixtures.

        Returns
        -------
        mixture : GaussianMixture
            Fitted on the support.
        """
        check_is_fitted(self)
        (S,), _, _ = self._supports(support)
        if not spread_mask(S[None], type(self).__name__)[0]:
            raise ValueError(
                "the support has no spread (a single row, or identical rows): no mixture can "
                "be fitted to it (sample returns copies of the row); pass more distinct rows."
            )
        centre, scale = _support_frame(S)
        gm = self._select((S - centre) / scale, random_state)
        return _mixture_in_data_units(gm, centre, scale)

    def _select(self, S: np.ndarray, random_state: Any) -> GaussianMixture:
        """The mixture of lowest BIC on the rows ``S`` of a support in its frame."""
        m, d = S.shape
        # relative to the frame's unit spread, no absolute floor (issue 63: a floor of 1e-12
        # made supports of scale 1e-9 sample ~1000x too wide)
        reg = self.reg_covar * float(np.mean(S.var(axis=0)))
        best, best_bic = None, np.inf
        for cov_type in self.covariance_types:
            # k > 1 needs 2 rows per component on average: fewer would place atoms on rows
            for k in range(1, min(self.max_components, max(1, m // 2)) + 1):
                if k > 1 and _n_gmm_parameters(k, cov_type, d) >= m * d:
                    break
                if k == 1 and _n_gmm_parameters(k, cov_type, d) >= m * d and best is not None:
                    continue  # a single Gaussian of this type has too many parameters
                gm = GaussianMixture(k, covariance_type=cov_type, reg_covar=reg)
                with warnings.catch_warnings():  # tiny supports: convergence is not the point
                    warnings.simplefilter("ignore")
                    gm.set_params(random_state=random_state).fit(S)
                bic = gm.bic(S)
                if bic < best_bic:
                    best, best_bic = gm, bic
        return best

    def _draw(self, S: np.ndarray, n: int, rng: np.random.RandomState) -> np.ndarray:
        # in the support's frame, so that a support far from the origin (S + 1e8: sklearn's
        # covariances became ill-defined) or of any scale is fitted like S itself
        centre, scale = _support_frame(S)
        gm = self._select((S - centre) / scale, rng.randint(2**31 - 1))
        Z = _sample_mixture(gm, n, np.random.RandomState(rng.randint(2**31 - 1)))
        return centre + scale * Z[rng.permutation(n)]  # the rows come grouped by component


def _sample_mixture(gm: GaussianMixture, n: int, rng: np.random.RandomState) -> np.ndarray:
    """``n`` rows of a fitted mixture, grouped by component, through the Cholesky factors of
    its covariances: continuous in them, unlike ``GaussianMixture.sample`` (an SVD, whose
    basis of a repeated eigenvalue, as ``reg_covar`` gives a component of 2 rows, turns with
    rounding), so that nearby supports (``a S + b`` against ``S``) give nearby samples."""
    d = gm.means_.shape[1]
    counts = rng.multinomial(n, gm.weights_)
    covs = {
        "full": lambda k: gm.covariances_[k],
        "tied": lambda k: gm.covariances_,
        "diag": lambda k: np.diag(gm.covariances_[k]),
        "spherical": lambda k: gm.covariances_[k] * np.eye(d),
    }[gm.covariance_type]
    rows = [
        gm.means_[k] + rng.standard_normal((c, d)) @ np.linalg.cholesky(covs(k)).T
        for k, c in enumerate(counts)
    ]
    return np.concatenate(rows)


def _support_frame(S: np.ndarray) -> tuple[np.ndarray, float]:
    """Centre ``(d,)`` and spread of a support with spread (:func:`._frame.task_frame`)."""
    centre, scale = task_frame(S[None], 0.0)
    return centre[0, 0], float(scale.ravel()[0])


def _mixture_in_data_units(gm: GaussianMixture, centre: np.ndarray, scale: float):
    """A mixture fitted on ``(S - centre) / scale``, mapped to ``S``'s units (in place)."""
    gm.means_ = centre + scale * gm.means_
    gm.covariances_ = gm.covariances_ * scale**2
    gm.precisions_ = gm.precisions_ / scale**2
    gm.precisions_cholesky_ = gm.precisions_cholesky_ / scale
    return gm


def default_candidates() -> list:
    """The arms :class:`BestClassicalSampler` chooses among by default.

    The four Gaussian-family arms of this module and the plug-in field
    :class:`skflow.NWFlowSampler` at ``sigma_min`` in (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
    (in the data's units: standardise the features first; the numeric grid of the plug-in's
    own ``fit(X, y)`` search less its copying end 0.01), each with ``sigma_min_search=None``
    so that ``fit(X, y)`` keeps its ``sigma_min``.

    Returns
    -------
    candidates : list of estimators
        Unfitted, each with ``fit(X, y)`` and ``sample(n, support=S, random_state=...)``.

    Examples
    --------
    >>> from skflow.samplers.classical import default_candidates
    >>> len(default_candidates())
    11
    """
    from .nw import NWFlowSampler

    arms = [*gaussian_candidates(), BICGaussianMixtureSampler()]
    # sigma_min_search=None: each candidate keeps its sigma_min when fitted with labels
    # (NWFlowSampler.fit(X, y) would otherwise choose its own, making the seven one arm);
    # its own grid less "auto" and the copying end 0.01: the wide end matters (on mixtures the
    # plug-in tuned on the training classes picks 0.7-0.9)
    grid = [s for s in DEFAULT_SIGMA_MIN_GRID if not isinstance(s, str) and s > 0.01]
    return arms + [NWFlowSampler(sigma_min=s, sigma_min_search=None) for s in grid]


def gaussian_candidates() -> list:
    """The Gaussian arms (those with :meth:`~_ClassicalSampler.predictive_moments`).

    What :class:`~skflow.LearnedFlowSampler` chooses its predictive frame among
    (``normalize="predictive"``).

    Returns
    -------
    candidates : list of estimators
        Unfitted :class:`LedoitWolfSampler`, :class:`PooledGaussianSampler` and
        :class:`EmpiricalBayesGaussianSampler`.

    Examples
    --------
    >>> from skflow.samplers.classical import gaussian_candidates
    >>> [type(c).__name__ for c in gaussian_candidates()]
    ['LedoitWolfSampler', 'PooledGaussianSampler', 'EmpiricalBayesGaussianSampler']
    """
    return [LedoitWolfSampler(), PooledGaussianSampler(), EmpiricalBayesGaussianSampler()]


def _check_candidates(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, list | tuple) or not value:
        raise InvalidParameterError(
            f"candidates must be None or a non-empty list of estimators, got {value!r}."
        )
    for c in value:
        if not (hasattr(c, "fit") and hasattr(c, "sample")):
            raise InvalidParameterError(f"candidate {c!r} has no fit and sample methods.")


def check_support_sizes(value: Any) -> None:
    """Refuse a ``support_size`` that is not an int >= 1 or a non-empty sequence of them.

    Examples
    --------
    >>> check_support_sizes([5, 10])
    """
    sizes = [value] if np.ndim(value) == 0 else list(value) if np.ndim(value) == 1 else []
    ok = bool(sizes) and all(
        isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1 for k in sizes
    )
    if not ok:
        raise InvalidParameterError(
            f"support_size must be an int >= 1 or a non-empty sequence of them, got {value!r}."
        )


def _nearest_size(sizes: np.ndarray, m: int) -> int:
    """Index of the size in ``sizes`` nearest to ``m`` on a log scale (ties: the smaller)."""
    return int(np.argmin(np.abs(np.log(sizes) - np.log(max(m, 1)))))


#: Fewest held rows of a class for a validation task: one support row, two reference rows.
_MIN_TASK_ROWS = 3


def validation_folds(y: np.ndarray, n_splits: int, validation: str, rng: Any) -> list[tuple]:
    """The validation folds of a selection, each ``(held, classes)``: a boolean mask of the
    rows held out (the candidates are fitted on the others) and the classes whose held rows
    make the fold's tasks.

    ``validation="classes"`` (new classes): ``min(n_splits, n_classes)`` class-grouped folds,
    the held rows all the rows of the fold's classes. ``"rows"`` (new rows of known classes):
    each class's rows are split at random into ``n_splits`` parts; fold ``f`` holds part ``f``
    of every class, so every candidate is fitted on rows of every class and scored on other
    rows of the same classes. A class with fewer than 3 held rows in a fold gives that fold no
    task.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
    n_splits : int >= 2
    validation : {"classes", "rows"}
    rng : RandomState

    Returns
    -------
    folds : list of (ndarray of shape (n_samples,) of bool, ndarray of labels)

    Examples
    --------
    >>> import numpy as np
    >>> y = np.repeat([0, 1], 6)
    >>> [int(h.sum()) for h, _ in validation_folds(y, 2, "rows", np.random.RandomState(0))]
    [6, 6]
    >>> [c.tolist() for _, c in validation_folds(y, 2, "rows", np.random.RandomState(0))]
    [[0, 1], [0, 1]]
    """
    classes = np.unique(y)
    if validation == "classes":
        groups = np.array_split(rng.permutation(classes), min(n_splits, len(classes)))
        return [(np.isin(y, g), g) for g in groups]
    part = np.empty(len(y), dtype=np.int64)
    for c in classes:
        rows = np.flatnonzero(y == c)
        part[rng.permutation(rows)] = np.arange(len(rows)) % n_splits
    folds = []
    for f in range(n_splits):
        held = part == f
        counts = np.array([np.sum(held & (y == c)) for c in classes])
        folds.append((held, classes[counts >= _MIN_TASK_ROWS]))
    if any(len(c) == 0 for _, c in folds):
        raise ValueError(
            f"validation='rows' needs some class with at least {_MIN_TASK_ROWS * n_splits} rows "
            f"({_MIN_TASK_ROWS} held rows per fold, {n_splits} folds); the largest class has "
            f"{int(max(np.sum(y == c) for c in classes))}. Lower n_splits or use "
            "validation='classes'."
        )
    return folds


def _fewshot_scores(model, X, y, classes, support_size, n_repeats, n_generated, seed, criterion):
    """``(mean MMD², mean memorisation ratio)`` of ``model`` on tasks of ``classes``: the
    multi-scale MMD² of the copy-aware rule, or (``criterion="mmd2"``) MMD² at the reference's
    median bandwidth."""
    rng = np.random.default_rng(seed)
    scores = []
    for r in range(n_repeats):
        for j, c in enumerate(classes):
            rows = X[y == c]
            rows = rows[rng.permutation(len(rows))]
            k = min(support_size, len(rows) - 2)
            S, R = rows[:k], rows[k:]
            gen = model.sample(n_generated, support=S, random_state=seed + 1000 * r + j)
            d, memo = task_scores(gen, S, R)
            scores.append((float(mmd2(gen, R, reference=R)) if criterion == "mmd2" else d, memo))
    d, memo = np.asarray(scores).T
    return float(np.mean(d)), float(np.nanmean(memo)) if np.isfinite(memo).any() else np.nan


def _warn_failed_candidates(
    candidates: list, failures: dict, n_folds: int, validation: str
) -> None:
    """One :class:`~sklearn.exceptions.FitFailedWarning` per candidate that could not be
    fitted on some fold (it is then never chosen), with its first error."""
    kind = "class-grouped" if validation == "classes" else "row"
    for i, errors in failures.items():
        warnings.warn(
            f"candidate {i} ({type(candidates[i]).__name__}) could not be fitted on "
            f"{len(errors)} of {n_folds} {kind} folds and is not chosen: {errors[0]}",
            FitFailedWarning,
            stacklevel=5,  # the user's fit line (fit's atomic guard is one frame)
        )


class BestClassicalSampler(_ClassicalSampler):
    """The candidate generator with the best few-shot score on held-out *training* classes.

    ``fit(X, y)`` splits the training classes into ``n_splits`` class-grouped folds (or, with
    ``validation="rows"``, the rows of every class into ``n_splits`` parts); for each
    fold every candidate is fitted on the other folds' classes and scored on the fold's
    classes by the few-shot protocol (per class and repeat: a random support of
    ``support_size`` rows, the other rows the reference, ``n_generated`` generated rows). By
    default the choice is copy-aware (``criterion="copy-aware"``, the rule of
    the selection module): the candidate of lowest mean multi-scale MMD² (kernels at
    0.25, 1 and 4 times the reference's median distance) among those whose mean validation
    memorisation ratio is at least 0.5, so that a plug-in that wins by copying its support is
    not chosen; ``criterion="mmd2"`` is the former rule (lowest MMD² at the median bandwidth,
    blind to copies). The choice is refitted on all the classes. Test classes are never seen:
    the choice is what a user can make from the training data alone. A candidate that cannot
    be fitted on some fold (a ``ValueError``, e.g. empirical Bayes on the one class left by a
    fold of binary data) is scored ``inf`` there, never chosen, and named in a
    :class:`~sklearn.exceptions.FitFailedWarning`; if no candidate fits, ``fit`` raises.

    Parameters
    ----------
    candidates : list of estimators or None, default=None
        Each with ``fit(X, y)`` and ``sample(n, support=S, random_state=...)``; None is
        :func:`default_candidates`.
    support_size : int >= 1 or sequence of int, default=10
        Support rows of a validation task (use the ``m`` of the task at hand). A sequence
        chooses once per size (every candidate is fitted once per fold and scored at each
        size); a support of ``m`` rows is then generated by the choice for the size nearest
        to ``m`` on a log scale.
    n_splits : int >= 2, default=5
        Validation folds (class-grouped: at most the number of classes).
    n_repeats : int >= 1, default=2
        Random supports per validation class.
    n_generated : int >= 2, default=100
        Generated rows per validation task.
    criterion : {"copy-aware", "mmd2"}, default="copy-aware"
        How candidates are compared (see above).
    validation : {"classes", "rows"}, default="classes"
        What the supports of use will be. ``"classes"``: rows of classes never seen in
        ``fit`` (class-grouped folds, as above). ``"rows"``: new rows of the training classes
        (each class's rows split into ``n_splits`` parts; every candidate is fitted on the
        other parts of every class and scored on supports and references drawn from the held
        part only; a class needs at least ``3 * n_splits`` rows to give every fold a task).
    random_state : int, RandomState instance or None, default=None
        Folds, supports and sampling seeds.

    Attributes
    ----------
    best_estimator_ : estimator
        The chosen candidate, refitted on all the training classes (only with an int
        ``support_size``).
    best_estimators_ : list of estimators
        The choice per size of ``support_sizes_`` (a candidate chosen at several sizes is
        refitted once and shared).
    best_index_ : int or ndarray of shape (n_sizes,)
        Position of the choice in the candidates (per size with a sequence).
    support_sizes_ : ndarray of shape (n_sizes,)
        The validation support sizes, sorted.
    validation_mmd2_ : ndarray of shape (n_candidates,) or (n_sizes, n_candidates)
        Mean validation MMD² of every candidate (multi-scale, or at the median bandwidth with
        ``criterion="mmd2"``; lower is better), per size with a sequence.
    validation_memorization_ : ndarray, same shape as ``validation_mmd2_``
        Mean validation memorisation ratio of every candidate (near 0: it copies).
    selection_reasons_ : list of str, or list of lists of str per size
        Why each candidate was or was not chosen.
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.samplers import (BestClassicalSampler, PooledGaussianSampler,
    ...                              LedoitWolfSampler)
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(8), 30)
    >>> X = 3.0 * rng.normal(size=(8, 4))[y] + rng.normal(size=(240, 4)) * [1, 1, 0.1, 0.1]
    >>> best = BestClassicalSampler([LedoitWolfSampler(), PooledGaussianSampler()],
    ...                             support_size=3, n_splits=4, random_state=0).fit(X, y)
    >>> type(best.best_estimator_).__name__, best.sample(5, support=X[:3]).shape
    ('PooledGaussianSampler', (5, 4))
    >>> per_size = BestClassicalSampler([LedoitWolfSampler(), PooledGaussianSampler()],
    ...                                 support_size=[3, 20], n_splits=4, random_state=0)
    >>> per_size.fit(X, y).validation_mmd2_.shape, per_size.support_sizes_.tolist()
    ((2, 2), [3, 20])
    """

    _parameter_constraints: ClassVar[dict[str, ParameterCheck]] = {
        "candidates": satisfies(_check_candidates),
        "support_size": satisfies(check_support_sizes),
        "n_splits": integer(minimum=2),
        "n_repeats": integer(),
        "n_generated": integer(minimum=2),
        "criterion": choice(("copy-aware", "mmd2")),
        "validation": choice(("classes", "rows")),
        "random_state": random_seed(),
    }

    def __init__(
        self,
        candidates: list | None = None,
        support_size: int | Sequence[int] = 10,
        *,
        n_splits: int = 5,
        n_repeats: int = 2,
        n_generated: int = 100,
        criterion: str = "copy-aware",
        validation: str = "classes",
        random_state: Any = None,
    ):
        self.candidates = candidates
        self.support_size = support_size
        self.n_splits = n_splits
        self.n_repeats = n_repeats
        self.n_generated = n_generated
        self.criterion = criterion
        self.validation = validation
        self.random_state = random_state

    def _candidates(self, y: np.ndarray) -> list:
        """The candidates to choose among (unfitted) for the training labels ``y``."""
        return default_candidates() if self.candidates is None else list(self.candidates)

    def _fit_classes(self, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        name = type(self).__name__
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"{name} needs at least 2 classes in y, got {len(classes)} class(es).")
        if not spread_mask(X[None], name)[0]:
            raise ValueError(
                f"{name}: the training rows have no spread (they are identical), "
                "so no candidate can be scored on them; pass rows that vary."
            )
        rng = check_random_state(self.random_state)
        folds = validation_folds(y, self.n_splits, self.validation, rng)  # (held mask, classes)
        candidates = self._candidates(y)
        sizes = np.unique(np.atleast_1d(np.asarray(self.support_size, dtype=np.int64)))
        scores = np.zeros((len(folds), len(sizes), len(candidates), 2))  # (MMD², memorisation)
        failures: dict[int, list] = {}
        for f, held in enumerate(folds):
            seed = int(rng.randint(2**31 - 1))
            for i, cand in enumerate(candidates):
                try:
                    scores[f, :, i] = self._fold_scores(cand, X, y, held, sizes, seed)
                except ValueError as error:  # e.g. empirical Bayes on a fold of one class
                    scores[f, :, i] = (np.inf, np.nan)
                    failures.setdefault(i, []).append(error)
        _warn_failed_candidates(candidates, failures, len(folds), self.validation)
        if len(failures) == len(candidates):  # each failed on some fold: inf at every size
            first = next(iter(failures.values()))[0]
            raise ValueError(f"no candidate could be fitted on every fold: {first}") from first
        with warnings.catch_warnings():  # a fold without a finite memorisation ratio
            warnings.simplefilter("ignore", RuntimeWarning)
            memo = np.nanmean(scores[..., 1], axis=0)
        return self._choice(candidates, sizes, scores[..., 0].mean(axis=0), memo, X, y)

    def _refit(self, cand: Any, X: np.ndarray, y: np.ndarray) -> Any:
        """A chosen candidate fitted on all the rows (a subclass may refit it otherwise)."""
        return clone(cand).fit(X, y)

    def _fold_scores(self, cand, X, y, fold, sizes, seed) -> np.ndarray:
        """``cand`` fitted on the rows outside the fold, scored at every size on tasks drawn
        from the fold's held rows only (``fold``: the held mask and the classes to score)."""
        held, classes = fold
        with warnings.catch_warnings():  # e.g. the plug-in's copy warning on all rows
            warnings.simplefilter("ignore")
            model = clone(cand).fit(X[~held], y[~held])  # once for every size
            Xh, yh = X[held], y[held]
            args = (self.n_repeats, self.n_generated, seed, self.criterion)
            return np.array([_fewshot_scores(model, Xh, yh, classes, int(m), *args) for m in sizes])

    def _choice(self, candidates, sizes, mean_mmd2, memo, X, y) -> dict[str, Any]:
        """Choose per size (copy-aware unless ``criterion="mmd2"``), refit each chosen
        candidate once on all classes; the fitted attributes per size or, with an int
        ``support_size``, in the single-size form."""
        aware = self.criterion == "copy-aware"
        rule = {
            "floor": MEMORIZATION_FLOOR if aware else -np.inf,
            "names": [type(c).__name__ for c in candidates],
            "statistic": "multi-scale MMD²" if aware else "MMD² (median bandwidth)",
        }
        picks = [choose_copy_aware(d, r, **rule) for d, r in zip(mean_mmd2, memo, strict=True)]
        best = np.array([b for b, _ in picks], dtype=np.int64)
        reasons = [why for _, why in picks]
        refitted = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in np.unique(best):
                refitted[int(i)] = self._refit(candidates[int(i)], X, y)
        chosen = [refitted[int(i)] for i in best]
        fitted = {"support_sizes_": sizes, "best_estimators_": chosen}
        if np.ndim(self.support_size) == 0:
            single = {"validation_mmd2_": mean_mmd2[0], "best_index_": int(best[0])}
            single.update(validation_memorization_=memo[0], selection_reasons_=reasons[0])
            return {**fitted, **single, "best_estimator_": chosen[0]}
        per_size = {"validation_memorization_": memo, "selection_reasons_": reasons}
        return {**fitted, **per_size, "validation_mmd2_": mean_mmd2, "best_index_": best}

    def chosen_estimator(self, m: int) -> Any:
        """The fitted candidate that generates from a support of ``m`` rows.

        Parameters
        ----------
        m : int
            Support rows.

        Returns
        -------
        estimator
            The choice for the size of ``support_sizes_`` nearest to ``m`` (log scale).

        Examples
        --------
        >>> import numpy as np
        >>> from skflow.samplers import (BestClassicalSampler, LedoitWolfSampler,
        ...                              PooledGaussianSampler)
        >>> X, y = np.random.default_rng(0).normal(size=(80, 2)), np.repeat(np.arange(8), 10)
        >>> best = BestClassicalSampler([LedoitWolfSampler(), PooledGaussianSampler()],
        ...                             support_size=[2, 8], random_state=0).fit(X, y)
        >>> best.chosen_estimator(3) is best.best_estimators_[0]
        True
        """
        check_is_fitted(self)
        return self.best_estimators_[_nearest_size(self.support_sizes_, int(m))]

    def predictive_moments(self, support: Any) -> tuple[np.ndarray, np.ndarray]:
        """Moments of the chosen Gaussian for supports of this size (Gaussian choices only).

        One dispatch for a whole batch (its supports share ``m``); the chosen arm validates
        the support. See :meth:`LedoitWolfSampler.predictive_moments` for shapes.
        """
        check_is_fitted(self)
        m = np.shape(support)[-2] if np.ndim(support) >= 2 else 1
        est = self.chosen_estimator(m)
        if not hasattr(est, "_moments"):
            raise TypeError(
                f"the candidate chosen for supports of {m} rows, {type(est).__name__}, "
                "generates no single Gaussian: no moments."
            )
        return est.predictive_moments(support)

    def _draw(self, S: np.ndarray, n: int, rng: np.random.RandomState) -> np.ndarray:
        est = self.chosen_estimator(S.shape[0])
        return est.sample(n, support=S, random_state=rng.randint(2**31 - 1))
