"""Sampling pipelines: transform, sample in the transformed space, map back.

``make_sampling_pipeline(PCA(n_components=16), NWFlowSampler())`` conditions the sampler on the
PCA coordinates of the support and returns samples in input space through
``PCA.inverse_transform``. Unlike :class:`sklearn.pipeline.Pipeline`, whose ``score`` would
compare samples with data in the *transformed* space (so that every projection dimension is
scored in its own units), :meth:`SamplingPipeline.score` compares in *input* space with a kernel
bandwidth from the data alone, so a ``GridSearchCV`` over ``pca__n_components`` compares like
with like.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.utils.validation import check_array, check_is_fitted

from ._validation import check_data
from .samplers._atomic import atomic_fit
from .samplers._base import (
    BaseFlowSampler,
    check_support_names,
    few_shot_support_size,
    sampling_score,
)

__all__ = ["SamplingPipeline", "make_sampling_pipeline"]


class SamplingPipeline(Pipeline):
    """A :class:`~sklearn.pipeline.Pipeline` whose last step is a sampler.

    ``fit`` fits the transformers and then the sampler on the transformed data (the support in
    the transformed space). :meth:`sample` draws in the transformed space and maps the samples
    back to input space through the ``inverse_transform`` of the earlier steps, in reverse
    order; an in-context ``support`` is given in input space and is transformed by the fitted
    earlier steps first (they are not refitted). :meth:`score` is computed in input space.

    Parameters
    ----------
    steps : list of (str, estimator) tuples
        Transformers (each with ``inverse_transform``; ``"passthrough"`` and None are skipped)
        followed by a sampler (an estimator with ``sample``).
    transform_input, memory, verbose
        As in :class:`sklearn.pipeline.Pipeline`.

    See Also
    --------
    make_sampling_pipeline : build one with step names derived from the classes.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.decomposition import PCA
    >>> from skflow import NWFlowSampler, SolverOptions
    >>> from skflow.pipeline import SamplingPipeline
    >>> X = np.random.RandomState(0).normal(size=(40, 5))
    >>> fast = SolverOptions(n_steps=10)
    >>> pipe = SamplingPipeline(
    ...     [("pca", PCA(n_components=2)), ("nw", NWFlowSampler(solver=fast, random_state=0))]
    ... ).fit(X)
    >>> pipe.sample(3).shape
    (3, 5)
    >>> t, paths = pipe.sample_trajectories(3)
    >>> paths.shape
    (11, 3, 5)
    """

    # -- fitting ---------------------------------------------------------------------------
    @atomic_fit
    def fit(self, X: Any, y: Any = None, **params: Any) -> SamplingPipeline:
        """Fit the transformers, then the sampler on the transformed data, as
        :meth:`sklearn.pipeline.Pipeline.fit` does (the steps are fitted in place).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows, in input space.
        y : array-like of shape (n_samples,), optional
            Task labels, passed to every step as ``Pipeline.fit`` does.
        **params : dict
            As in :meth:`sklearn.pipeline.Pipeline.fit` (``stepname__param`` fit parameters,
            or routed metadata).

        Returns
        -------
        self : SamplingPipeline

        Notes
        -----
        A fit that raises or is interrupted (``KeyboardInterrupt`` too) leaves the pipeline
        and every step as they were: a step fitted before the failing one gets its former
        state back, so the pipeline samples as before (unfitted: ``NotFittedError``).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.decomposition import PCA
        >>> from skflow import NWFlowSampler, make_sampling_pipeline
        >>> X = np.random.RandomState(0).normal(size=(40, 5))
        >>> pipe = make_sampling_pipeline(PCA(n_components=2), NWFlowSampler()).fit(X)
        >>> bad = pipe.set_params(nwflowsampler__sigma_min=-1.0)  # fails after the PCA
        >>> try:
        ...     bad.fit(np.random.RandomState(1).normal(size=(40, 7)))
        ... except ValueError:
        ...     pass
        >>> pipe.named_steps["pca"].n_features_in_  # still the fit on X
        5
        """
        return super().fit(X, y, **params)

    # -- checks ----------------------------------------------------------------------------
    def _check_sampling_steps(self) -> list[tuple[str, Any]]:
        """The fitted transformers (name, step), after checking they can be inverted."""
        final_name, final = self.steps[-1]
        if not hasattr(final, "sample"):
            raise TypeError(
                f"The last step of a SamplingPipeline must be a sampler with a sample method; "
                f"step {final_name!r} ({type(final).__name__}) has none."
            )
        transformers = [(name, step) for _, name, step in self._iter(with_final=False)]
        for name, step in transformers:
            if not hasattr(step, "inverse_transform"):
                raise TypeError(
                    f"Step {name!r} ({type(step).__name__}) has no inverse_transform: "
                    "SamplingPipeline maps samples back to input space through the "
                    "inverse_transform of every step before the sampler."
                )
        check_is_fitted(self)
        return transformers

    def _transform_support(self, support: Any, transformers) -> Any:
        if support is None:
            return None
        check_support_names(self, support)
        Xt = check_data(check_array, support, dtype=[np.float64, np.float32], input_name="support")
        self._check_n_features(Xt, "support")
        if hasattr(support, "columns") and getattr(self, "feature_names_in_", None) is not None:
            # the first step was fitted on these named columns (checked above): give it the
            # frame, not the bare array, or it warns that X has no valid feature names
            Xt = support
        for _, step in transformers:
            Xt = step.transform(Xt)
        return Xt

    @staticmethod
    def _inverse(Z: np.ndarray, transformers) -> np.ndarray:
        for _, step in reversed(transformers):
            Z = step.inverse_transform(Z)
        return np.asarray(Z)

    # -- sampling --------------------------------------------------------------------------
    def sample(
        self, n_samples: int = 1, *, support: Any = None, random_state: Any = None
    ) -> np.ndarray:
        """Sample in the transformed space and map back to input space.

        Parameters
        ----------
        n_samples : int, default=1
            Number of samples.
        support : array-like of shape (m, n_features), optional
            In-context support in *input* space; transformed by the fitted earlier steps.
        random_state : int, RandomState instance or None, default=None
            Passed to the sampler's ``sample``.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
            Samples in input space.

        Raises
        ------
        TypeError
            If a step before the sampler has no ``inverse_transform`` (the message names it).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.decomposition import PCA
        >>> from skflow import NWFlowSampler, SolverOptions, make_sampling_pipeline
        >>> X = np.random.RandomState(0).normal(size=(40, 5))
        >>> sampler = NWFlowSampler(solver=SolverOptions(n_steps=10))
        >>> pipe = make_sampling_pipeline(PCA(2), sampler).fit(X)
        >>> pipe.sample(4, support=X[:10], random_state=0).shape
        (4, 5)
        """
        transformers = self._check_sampling_steps()
        Zs = self._transform_support(support, transformers)
        Z = self._final_estimator.sample(n_samples, support=Zs, random_state=random_state)
        return self._inverse(Z, transformers)

    def sample_trajectories(
        self,
        n_samples: int = 1,
        *,
        support: Any = None,
        random_state: Any = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Whole sampling paths, each time slice mapped back to input space.

        Parameters
        ----------
        n_samples, support, random_state
            As in :meth:`sample`.
        **kwargs
            Passed to the sampler's ``sample_trajectories`` (e.g. ``n_points``).

        Returns
        -------
        t : ndarray of shape (T,)
            Output times.
        X : ndarray of shape (T, n_samples, n_features)
            States mapped back to input space; ``X[-1]`` equals :meth:`sample` for the same
            seed.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.decomposition import PCA
        >>> from skflow import NWFlowSampler, SolverOptions, make_sampling_pipeline
        >>> sampler = NWFlowSampler(solver=SolverOptions(n_steps=10))
        >>> pipe = make_sampling_pipeline(PCA(2), sampler)
        >>> X = np.random.RandomState(0).normal(size=(40, 5))
        >>> t, paths = pipe.fit(X).sample_trajectories(2, random_state=0)
        >>> t.shape, paths.shape
        ((11,), (11, 2, 5))
        """
        transformers = self._check_sampling_steps()
        Zs = self._transform_support(support, transformers)
        t, Z = self._final_estimator.sample_trajectories(
            n_samples, support=Zs, random_state=random_state, **kwargs
        )
        T, n, k = Z.shape
        X = self._inverse(Z.reshape(T * n, k), transformers)
        return t, X.reshape(T, n, X.shape[1])

    # -- scoring (input space; the protocol of BaseFlowSampler.score) -----------------------
    def _check_queries(self, X: Any) -> np.ndarray:
        self._check_sampling_steps()
        X = check_data(check_array, X, dtype=[np.float64, np.float32])
        self._check_n_features(X, "X")
        return X

    def _check_n_features(self, X: np.ndarray, name: str) -> None:
        """Rows in input space must have the features the pipeline was fitted on."""
        n_in = getattr(self, "n_features_in_", None)
        if n_in is not None and X.shape[1] != n_in:
            raise ValueError(
                f"{name} has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{n_in} features as input."
            )

    # The protocol of BaseFlowSampler.score, with samples drawn by ``self.sample`` (input
    # space) and the few-shot split set by the final sampler's ``support_size``.
    def _score_one(self, reference: np.ndarray, support: Any) -> float:
        seed = getattr(self._final_estimator, "random_state", None)
        return sampling_score(self, reference, support, seed)

    def _task_support_size(self, n_rows: int, label: Any) -> int:
        size = getattr(self._final_estimator, "support_size", None)
        return few_shot_support_size(size, n_rows, label)

    def score(self, X: Any, y: Any = None, **params: Any) -> float:
        """Negative MMD^2 in *input* space between generated samples and ``X``.

        The same protocol as :meth:`skflow.samplers._base.BaseFlowSampler.score` (shared
        code): without ``y``, ``len(X)`` samples conditioned on the fitted support against
        ``X``; with task labels ``y``, per task the first ``support_size`` rows (the sampler's
        parameter; half when None) are the in-context support, passed in input space through
        the fitted transformers, and the remaining rows the reference; the mean over tasks.
        Samples are mapped back to input space and the Gaussian kernel's bandwidth is the median
        heuristic of ``X`` alone, so scores of pipelines with different transformers (e.g.
        different ``pca__n_components``) are comparable. Deterministic: sampling uses the
        sampler's ``random_state``, or the fixed seed 0 when it is None.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Reference rows in input space.
        y : array-like of shape (n_samples,), optional
            Task labels.
        **params
            Not used; accepted for compatibility with :meth:`Pipeline.score`.

        Returns
        -------
        score : float
            Higher is better.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.decomposition import PCA
        >>> from skflow import NWFlowSampler, SolverOptions, make_sampling_pipeline
        >>> X_train, X_test = np.random.RandomState(0).normal(size=(2, 30, 5))
        >>> fast = SolverOptions(n_steps=10)
        >>> pipe = make_sampling_pipeline(PCA(3), NWFlowSampler(solver=fast, random_state=0))
        >>> s = pipe.fit(X_train).score(X_test)
        >>> s <= 0.05 and s == pipe.score(X_test)
        True
        """
        return BaseFlowSampler.score(self, X, y)


def make_sampling_pipeline(
    *steps: Any, memory: Any = None, verbose: bool = False
) -> SamplingPipeline:
    """Build a :class:`SamplingPipeline`, naming the steps after their classes (lowercase).

    Parameters
    ----------
    *steps : estimators
        Transformers with ``inverse_transform``, then a sampler.
    memory : str or object with the joblib.Memory interface, default=None
        Caching of the fitted transformers, as in :func:`sklearn.pipeline.make_pipeline`.
    verbose : bool, default=False
        Print the time of each step's fit.

    Returns
    -------
    pipeline : SamplingPipeline

    Examples
    --------
    >>> from sklearn.decomposition import PCA
    >>> from skflow import NWFlowSampler, SolverOptions
    >>> from skflow.pipeline import make_sampling_pipeline
    >>> pipe = make_sampling_pipeline(PCA(), NWFlowSampler())
    >>> [name for name, _ in pipe.steps]
    ['pca', 'nwflowsampler']
    >>> pipe.set_params(pca__n_components=4).get_params()["pca__n_components"]
    4
    """
    steps_named = make_pipeline(*steps, memory=memory, verbose=verbose).steps
    return SamplingPipeline(steps_named, memory=memory, verbose=verbose)
