"""Atomic fits: a ``fit`` that raises or is interrupted leaves the estimator as it was.

:func:`atomic_fit` wraps every public ``fit`` (and ``fit_resample``) of skflow. Before the
call it takes a shallow snapshot of the instance dictionary (``vars``) of the estimator and of
every estimator among its parameters (``get_params(deep=True)``, e.g. the steps of a
pipeline), and of the contents of any list or dict those dictionaries hold (a pipeline's
``steps``, which scikit-learn fits in place); on any ``BaseException`` (a ``ValueError`` of
bad input, a ``KeyboardInterrupt``) it puts them back and re-raises. A failed first fit
thus leaves an unfitted estimator (``check_is_fitted`` raises ``NotFittedError``), a failed
refit the previous fitted state, attribute for attribute.

The snapshot is shallow: it holds the same objects, so a fit must never change in place an
object the estimator already references (a warm start trains a copy of the fitted network and
swaps it in on success). The fits build their results in locals and set the fitted attributes
at their end; this guard is the second line, for what slips through (``validate_data`` sets
``n_features_in_`` before the fit has succeeded).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["atomic_fit", "fit_transaction"]

F = TypeVar("F", bound=Callable[..., Any])


def _estimators(estimator: Any) -> list:
    """``estimator`` and the estimators among its (deep) parameters, each once."""
    found, seen = [estimator], {id(estimator)}
    get_params = getattr(estimator, "get_params", None)
    params = get_params(deep=True) if callable(get_params) else {}
    for value in params.values():
        if hasattr(value, "get_params") and hasattr(value, "__dict__") and id(value) not in seen:
            seen.add(id(value))
            found.append(value)
    return found


def _snapshot(objects: list) -> list[tuple[Any, dict, dict]]:
    """``(object, copy of its vars, copies of the lists and dicts in them)`` per object."""
    taken = []
    for obj in objects:
        state = dict(vars(obj))
        inner = {k: type(v)(v) for k, v in state.items() if type(v) in (list, dict)}
        taken.append((obj, state, inner))
    return taken


def _put_back(taken: list[tuple[Any, dict, dict]]) -> None:
    for obj, state, inner in taken:
        for name, items in inner.items():
            # the same container object (others may hold it), with its former contents
            container = state[name]
            container.clear()
            if isinstance(container, dict):
                container.update(items)
            else:
                container.extend(items)
        vars(obj).clear()
        vars(obj).update(state)


@contextlib.contextmanager
def fit_transaction(estimator: Any) -> Iterator[Any]:
    """Within the block, a raised exception (any ``BaseException``) restores ``estimator``
    (and the estimators among its parameters) to their state at entry, then propagates.

    Parameters
    ----------
    estimator : object
        A scikit-learn style estimator (an object with ``vars``).

    Yields
    ------
    estimator : object

    Examples
    --------
    >>> from sklearn.decomposition import PCA
    >>> pca = PCA()
    >>> try:
    ...     with fit_transaction(pca):
    ...         pca.n_features_in_ = 3
    ...         raise KeyboardInterrupt
    ... except KeyboardInterrupt:
    ...     pass
    >>> hasattr(pca, "n_features_in_")
    False
    """
    taken = _snapshot(_estimators(estimator))
    try:
        yield estimator
    except BaseException:
        _put_back(taken)
        raise


def atomic_fit(method: F) -> F:
    """Decorate a ``fit``-like method: a call that raises or is interrupted leaves the
    estimator exactly as it was (see :func:`fit_transaction`).

    Parameters
    ----------
    method : callable
        ``method(self, *args, **kwargs)``.

    Returns
    -------
    callable
        The same method (same name, docstring and signature), run inside
        :func:`fit_transaction` of ``self``.

    Examples
    --------
    >>> class Est:
    ...     @atomic_fit
    ...     def fit(self, X):
    ...         self.n_features_in_ = len(X[0])
    ...         raise ValueError("bad X")
    >>> est = Est()
    >>> try:
    ...     est.fit([[1.0, 2.0]])
    ... except ValueError:
    ...     pass
    >>> vars(est)
    {}
    """

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        with fit_transaction(self):
            return method(self, *args, **kwargs)

    return guarded  # type: ignore[return-value]
