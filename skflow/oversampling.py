"""Few-shot oversampling for imbalanced-learn: new rows of a class from that class's rows.

:class:`FlowOverSampler` is an :mod:`imblearn` over-sampler (``fit_resample(X, y)``,
``sampling_strategy``, ``random_state``; usable in :class:`imblearn.pipeline.Pipeline` and
``GridSearchCV``). Each class that needs new rows is the *support* of a support-conditioned
sampler, and its new rows are that sampler's samples: the plug-in Nadaraya-Watson flow
(:class:`~skflow.NWFlowSampler`, the terminal Gaussian KDE of the class), the shipped
in-context prior (``LearnedFlowSampler.from_pretrained("general-16-sized")``) or any sampler you
give (a fitted :class:`~skflow.LearnedFlowSampler` conditioned in context, or an unfitted sampler or
:class:`~skflow.SamplingPipeline` fitted on each class). The class is first projected on its own
leading principal components (``n_components``), where the kernel noise stays near the class's
manifold (isotropic noise in all ``d`` input dimensions leaves it), and the samples are mapped
back to input space.

SMOTE places a new row on the segment between a minority row and one of its neighbours; the
plug-in flow places it at a Gaussian displacement from a minority row, of a size set relative
to the class's own nearest-neighbour spacing (``spread``). :func:`oversampling_memorization`
reports how close the new rows lie to the rows they were generated from, against held-out rows
of the same class (:func:`skflow.metrics.memorization_ratio`): near 1, new rows are as novel as
fresh data; near 0, copies.

This module needs imbalanced-learn (``pip install 'skflow-matching[imbalanced]'``, or
``pip install -e '.[imbalanced]'`` from a clone); the rest of skflow does not import it.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ._install import install_hint

try:
    from imblearn.over_sampling.base import BaseOverSampler
    from imblearn.utils import check_target_type
except ImportError as exc:  # the optional extra: say how to get it, not just the missing name
    raise ImportError(
        f"skflow.oversampling needs imbalanced-learn: {install_hint('imbalanced')}"
    ) from exc

from .metrics import memorization_ratio
from .samplers import LearnedFlowSampler, NWFlowSampler, SolverOptions
from .samplers._atomic import atomic_fit
from .samplers._frame import spread_mask, warn_no_spread
from .samplers._kernel_geometry import median_nn_distance

__all__ = ["FlowOverSampler", "oversampling_memorization"]

#: Name of the shipped prior used by ``generator="pretrained"`` and its width (features).
PRIOR, PRIOR_WIDTH = "general-16-sized", 16
#: Share of the class's variance the ``n_components="auto"`` projection keeps (rule fixed in
#: advance of the benchmark; see docs/oversampling.md).
AUTO_VARIANCE = 0.9
#: At most this many components for ``n_components="auto"`` (the nw generator).
AUTO_MAX_COMPONENTS = 16


class FlowOverSampler(BaseOverSampler):
    """Over-sample each class with a support-conditioned flow sampler conditioned on its rows.

    For every class ``c`` that ``sampling_strategy`` asks ``n_c`` new rows of, the rows of ``c``
    (the support, ``m`` rows) are projected on their own ``k`` leading principal components,
    ``n_c`` samples are drawn in that space by the generator, conditioned on the projected
    rows, and mapped back to input space (``PCA.inverse_transform``). The original rows come
    first in the output, unchanged, followed by the new rows, class by class.

    Generators:

    - ``"nw"``: :class:`~skflow.NWFlowSampler`, whose samples follow the Gaussian KDE of the
      projected class. Its bandwidth is, by default (``spread="auto"``), the automatic
      per-support bandwidth ``NWFlowSampler(sigma_min="auto")``, chosen from the class's rows
      alone. With a float ``spread``, the class is measured in units of its median
      nearest-neighbour distance ``r`` (in the projected space) and the terminal bandwidth is
      ``sigma_min = spread / sqrt(k)`` in those units: a new row lies about ``spread * r``
      from the support row it comes from.
    - ``"pretrained"``: the shipped prior
      ``LearnedFlowSampler.from_pretrained("general-16-sized")`` (whose network sees the
      support size) in context (no training), on ``k <= 16`` components.
    - an estimator with ``sample(n, ...)``: fitted (e.g. a :class:`~skflow.LearnedFlowSampler`
      trained on other classes), it is conditioned in context through
      ``sample(n, support=Z, random_state=...)``; unfitted (e.g. ``NWFlowSampler(...)`` or a
      :class:`~skflow.SamplingPipeline`), a clone is fitted on each class's projected rows.

    Parameters
    ----------
    sampling_strategy : float, str, dict or callable, default="auto"
        Which classes get how many new rows, as in :class:`imblearn.over_sampling.SMOTE`.
    generator : {"nw", "pretrained"} or estimator, default="nw"
        The sampler of the new rows (see above).
    n_components : "auto", int or None, default="auto"
        Principal components of each class that the generator sees (at most ``m - 1`` and
        ``d``). ``"auto"``: the fewest keeping 90 % of the class's variance, at most 16
        (``"nw"``, ``"pretrained"``), or the fitted generator's ``n_features_in_`` when
        smaller than ``d`` (an estimator; None otherwise). None: no projection (the class is
        only centred), which the ``"pretrained"`` generator allows for ``d <= 16``.
    spread : "auto" or float, default="auto"
        ``"nw"`` only. ``"auto"``: ``NWFlowSampler(sigma_min="auto")`` chooses the bandwidth
        from each class (``h = max(1.27 m^-0.37 s, 0.67 nn / sqrt(k))`` with ``s`` the class's
        spread and ``nn`` its nearest-neighbour distance; see :class:`~skflow.NWFlowSampler`). A
        float: typical distance of a new row from its support row, in units of the class's
        median nearest-neighbour distance (0 copies; SMOTE's segments reach 0.5 of a
        neighbour's distance on average). Either way the new rows scale with the class: a
        class ``a X + b`` gets ``a`` times the new rows of ``X`` plus ``b``. A class without
        spread (one row, or identical rows) has no scale: its new rows are copies of its row,
        with a :class:`~skflow.exceptions.MemorizationWarning`.
    n_steps : int, default=20
        Heun steps of the ``"nw"`` and ``"pretrained"`` generators. New rows need the flow's
        law, not each exact trajectory: the MMD² between the rows of 20 and of 100 steps is at
        the level of two 100-step draws (``benchmarks/bench_oversampling_speed.py``), at a
        fifth of the cost.
    random_state : int, RandomState instance or None, default=None
        Seed of the generators' noise.

    Attributes
    ----------
    sampling_strategy_ : dict
        New rows per class (imbalanced-learn's convention).
    n_components_ : dict
        Components used per resampled class (None: no projection).
    sigma_min_ : dict
        ``"nw"`` only: the terminal (KDE) bandwidth per resampled class, in input units (the
        projection is orthonormal).
    n_features_in_ : int
        Number of features.

    See Also
    --------
    oversampling_memorization : the memorisation ratio of the new rows per class.
    imblearn.over_sampling.SMOTE : interpolation between neighbouring minority rows.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.oversampling import FlowOverSampler
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(size=(90, 4)), rng.normal(3.0, 1.0, size=(10, 4))])
    >>> y = np.array([0] * 90 + [1] * 10)
    >>> X_res, y_res = FlowOverSampler(random_state=0).fit_resample(X, y)
    >>> np.bincount(y_res).tolist()
    [90, 90]
    >>> bool(np.array_equal(X_res[:100], X))
    True
    """

    _parameter_constraints: dict = {**BaseOverSampler._parameter_constraints}

    def __init__(
        self,
        *,
        sampling_strategy: Any = "auto",
        generator: Any = "nw",
        n_components: Any = "auto",
        spread: float | str = "auto",
        n_steps: int = 20,
        random_state: Any = None,
    ):
        super().__init__(sampling_strategy=sampling_strategy)
        self.generator = generator
        self.n_components = n_components
        self.spread = spread
        self.n_steps = n_steps
        self.random_state = random_state

    def __sklearn_tags__(self):
        # dense real features only (a SciPy sparse X raises a TypeError naming the fix); the
        # imbalanced-learn default claims sparse input, so its sparse checks would run
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def _check_X_y(self, X, y, accept_sparse=None):
        # dense real features only: the generators work in a Euclidean space (no categories)
        y, binarize_y = check_target_type(y, indicate_one_vs_all=True)
        sparse_frame = getattr(X, "sparse", None)  # pandas' accessor: every column sparse
        if sparse_frame is not None and getattr(X, "ndim", 0) == 2:
            # a DataFrame of sparse columns is densified (a SciPy sparse X is refused);
            # imbalanced-learn gives the result the input's column dtypes back
            X = sparse_frame.to_dense()
        X, y = validate_data(self, X=X, y=y, reset=True, dtype=[np.float64, np.float32])
        return X, y, binarize_y

    def _check_params(self) -> None:
        gen = self.generator
        if isinstance(gen, str):
            if gen not in ("nw", "pretrained"):
                raise ValueError(
                    f"generator must be 'nw', 'pretrained' or an estimator, got {gen!r}"
                )
        elif not hasattr(gen, "sample"):
            raise TypeError(f"generator must have a sample method, got {type(gen).__name__}")
        k = self.n_components
        if not (k is None or k == "auto" or (isinstance(k, Integral) and k >= 1)):
            raise ValueError(f"n_components must be 'auto', a positive int or None, got {k!r}")
        if self.spread != "auto" and (
            not isinstance(self.spread, Real) or not 0 < self.spread < 10
        ):
            raise ValueError(f"spread must be 'auto' or a float in (0, 10), got {self.spread!r}")
        if not isinstance(self.n_steps, Integral) or self.n_steps < 1:
            raise ValueError(f"n_steps must be a positive int, got {self.n_steps!r}")

    @atomic_fit
    def fit(self, X: Any, y: Any, **params: Any) -> FlowOverSampler:
        """Check the inputs and the sampling strategy (imbalanced-learn's ``fit``; use
        :meth:`fit_resample`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **params : dict
            As in imbalanced-learn.

        Returns
        -------
        self : FlowOverSampler

        Notes
        -----
        A fit that raises or is interrupted (``KeyboardInterrupt`` too) leaves the
        over-sampler as it was.
        """
        return super().fit(X, y, **params)

    @atomic_fit
    def fit_resample(self, X: Any, y: Any, **params: Any) -> tuple[np.ndarray, np.ndarray]:
        """Resample: the rows of ``X`` unchanged, then the new rows, class by class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense real features. A pandas DataFrame of sparse columns is densified (the
            result has its column dtypes); a SciPy sparse matrix raises a ``TypeError``
            (densify it with ``X.toarray()``).
        y : array-like of shape (n_samples,)
        **params : dict
            As in imbalanced-learn.

        Returns
        -------
        X_resampled : ndarray of shape (n_samples_new, n_features)
        y_resampled : ndarray of shape (n_samples_new,)

        Notes
        -----
        A call that raises or is interrupted (``KeyboardInterrupt`` too) leaves the
        over-sampler as it was: its fitted attributes (``sampling_strategy_``,
        ``n_components_``, ``sigma_min_``) are set only when every class was generated.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(30, 2))
        >>> y = np.array([0] * 25 + [1] * 5)
        >>> X_res, y_res = FlowOverSampler(random_state=0).fit_resample(X, y)
        >>> X_res.shape
        (50, 2)
        """
        return super().fit_resample(X, y, **params)

    def _fit_resample(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._check_params()
        rng = check_random_state(self.random_state)
        X_parts, y_parts = [X.copy()], [y.copy()]
        fitted: dict[str, dict] = {"n_components_": {}, "sigma_min_": {}}  # set at the end
        priors: dict[int, LearnedFlowSampler] = {}  # one prior per width, loaded once per call
        for klass, n_new in self.sampling_strategy_.items():
            if n_new == 0:
                continue
            support = X[y == klass].astype(np.float64)
            seed = int(rng.randint(np.iinfo(np.int32).max))
            if spread_mask(support[None], type(self).__name__)[0]:
                new = self._generate(klass, support, n_new, seed, priors, fitted)
            else:  # one row, or identical rows: no scale to spread new rows by (issue 63)
                warn_no_spread(f"{type(self).__name__} (class {klass})")
                new = np.repeat(support[:1], n_new, axis=0)
                fitted["n_components_"][klass] = None
                if self.generator == "nw":  # the bandwidth of copies
                    fitted["sigma_min_"][klass] = 0.0
            X_parts.append(new.astype(X.dtype, copy=False))
            y_parts.append(np.full(n_new, klass, dtype=y.dtype))
        X_res, y_res = np.vstack(X_parts), np.hstack(y_parts)
        self.__dict__.update(fitted)
        return X_res, y_res

    def _components(self, support: np.ndarray) -> int | None:
        """Projection size for one class (None: no projection), per ``n_components``."""
        m, d = support.shape
        cap = min(m - 1, d)
        if isinstance(self.n_components, Integral):
            return max(1, min(int(self.n_components), cap))
        if self.n_components is None:
            if self.generator == "pretrained" and d > PRIOR_WIDTH:
                raise ValueError(
                    f"generator='pretrained' serves at most {PRIOR_WIDTH} features, got {d}: "
                    "set n_components (e.g. 'auto')"
                )
            return None
        if not isinstance(self.generator, str):  # "auto" for an estimator: its width, if smaller
            width = getattr(self.generator, "n_features_in_", None)
            return min(int(width), cap) if width is not None and width < d else None
        ratios = PCA().fit(support).explained_variance_ratio_
        k = int(np.searchsorted(np.cumsum(ratios), AUTO_VARIANCE) + 1)
        return max(1, min(k, cap, AUTO_MAX_COMPONENTS))

    def _generate(self, klass, support, n_new, seed, priors, fitted) -> np.ndarray:
        """``n_new`` rows conditioned on ``support`` (m, d), in input space; what the class
        used goes into ``fitted`` (``n_components_``, ``sigma_min_``)."""
        k = self._components(support)
        fitted["n_components_"][klass] = k
        if k is None:  # centring only: the generators see the class around the origin
            mean = support.mean(axis=0)
            Z = self._sample(klass, support - mean, n_new, seed, priors, fitted)
            return Z + mean
        pca = PCA(n_components=k, random_state=seed).fit(support)
        Z = self._sample(klass, pca.transform(support), n_new, seed, priors, fitted)
        return pca.inverse_transform(Z)

    def _sample(self, klass, Z, n_new, seed, priors, fitted) -> np.ndarray:
        """``n_new`` samples of the generator conditioned on the projected class ``Z`` (m, k)."""
        if self.generator == "nw":
            return self._sample_nw(klass, Z, n_new, seed, fitted["sigma_min_"])
        if self.generator == "pretrained":
            k = Z.shape[1]
            if k not in priors:
                priors[k] = LearnedFlowSampler.from_pretrained(PRIOR, n_features=k)
                priors[k].set_params(solver__n_steps=self.n_steps)
            return priors[k].sample(n_new, support=Z, random_state=seed)
        try:
            check_is_fitted(self.generator)
        except NotFittedError:  # an unfitted sampler: fit a clone on this class
            fitted = clone(self.generator)
            if "random_state" in fitted.get_params():
                fitted.set_params(random_state=seed)
            return np.asarray(fitted.fit(Z).sample(n_new, random_state=seed))
        return np.asarray(self.generator.sample(n_new, support=Z, random_state=seed))

    def _sample_nw(self, klass, Z, n_new, seed, sigmas) -> np.ndarray:
        # float32: skflow's fast path (fused attention); new rows need no float64 accuracy
        if self.spread == "auto":  # the flow's own per-support bandwidth and frame (issue 33)
            sampler = NWFlowSampler(
                sigma_min="auto", solver=SolverOptions(n_steps=self.n_steps), random_state=seed
            )
            sampler.fit(Z.astype(np.float32))
            sigmas[klass] = float(sampler.kde_bandwidth_)
            return sampler.sample(n_new).astype(np.float64)
        # work in units of the class's nearest-neighbour spacing, where the bandwidth rule is
        # stated; the flow's noise is N(0, I) whatever the data's scale, so sigma_min must be
        # relative to the data (and below 1)
        scale = median_nn_distance(Z)
        if not scale > 0.0:  # duplicated rows: fall back on the overall spread
            scale = float(np.sqrt(np.mean(np.var(Z, axis=0)))) or 1.0
        sigma = min(self.spread / math.sqrt(Z.shape[1]), 0.99)
        sigmas[klass] = sigma * scale
        sampler = NWFlowSampler(
            sigma_min=sigma, solver=SolverOptions(n_steps=self.n_steps), random_state=seed
        )
        Z32 = (Z / scale).astype(np.float32)
        return sampler.fit(Z32).sample(n_new).astype(np.float64) * scale


def oversampling_memorization(
    X: Any, y: Any, X_resampled: Any, y_resampled: Any, X_held_out: Any, y_held_out: Any
) -> dict[Any, float]:
    """Memorisation ratio of the new rows of each class, against held-out rows of the class.

    An over-sampler that keeps the original rows first (imbalanced-learn's over-samplers do)
    returns ``X_resampled[len(X):]`` as its new rows. For each class with new rows and held-out
    rows, :func:`skflow.metrics.memorization_ratio` compares how close the new rows lie to the
    class's original rows (the support) with how close its held-out rows lie to them: about 1
    for rows as novel as fresh data, near 0 for copies.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The rows given to ``fit_resample``.
    y : array-like of shape (n_samples,)
        Their labels.
    X_resampled : array-like of shape (n_resampled, n_features)
        ``fit_resample``'s output: ``X`` unchanged, then the new rows.
    y_resampled : array-like of shape (n_resampled,)
        Its labels.
    X_held_out : array-like of shape (n_held_out, n_features)
        Rows not given to ``fit_resample`` (e.g. the test fold).
    y_held_out : array-like of shape (n_held_out,)
        Their labels.

    Returns
    -------
    ratios : dict
        Class -> memorisation ratio, for the classes with new rows and held-out rows.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.oversampling import FlowOverSampler, oversampling_memorization
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(size=(200, 3)), rng.normal(2.0, 1.0, size=(40, 3))])
    >>> y = np.array([0] * 200 + [1] * 40)
    >>> train = np.r_[0:180, 200:220]
    >>> test = np.setdiff1d(np.arange(240), train)
    >>> X_res, y_res = FlowOverSampler(random_state=0).fit_resample(X[train], y[train])
    >>> ratios = oversampling_memorization(X[train], y[train], X_res, y_res, X[test], y[test])
    >>> list(ratios), bool(ratios[1] > 0.3)
    ([np.int64(1)], True)
    """
    X = check_array(X, dtype=np.float64)
    X_resampled = check_array(X_resampled, dtype=np.float64)
    X_held_out = check_array(X_held_out, dtype=np.float64)
    y, y_resampled, y_held_out = (np.asarray(v) for v in (y, y_resampled, y_held_out))
    n = X.shape[0]
    if X_resampled.shape[0] < n or not np.array_equal(X_resampled[:n], X):
        raise ValueError("X_resampled must start with the rows of X, unchanged")
    X_new, y_new = X_resampled[n:], y_resampled[n:]
    ratios = {}
    for klass in np.unique(y_new):
        held = X_held_out[y_held_out == klass]
        if held.shape[0]:
            ratios[klass] = memorization_ratio(X_new[y_new == klass], X[y == klass], held)
    return ratios
