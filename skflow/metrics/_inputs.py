"""Input checks shared by the metrics: 2-D samples (NumPy or Torch) and positive counts.

Private module: its names are public so that the metric modules can share them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._array import NUMPY_BACKEND, get_backend, to_numpy
from .._validation import InvalidParameterError, check_int

__all__ = ["as_2d", "check_positive_int", "prepare_pair", "prepare_samples", "refuse_sparse"]


def _check_matrix_shape(name: str, ndim: int, shape: tuple, kind: str) -> None:
    """``ValueError`` unless ``shape`` is 2-D with at least one row and one column."""
    if ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_features), got {ndim}-D "
            f"{kind} of shape {shape}"
        )
    if shape[0] == 0:
        raise ValueError(f"{name} is empty: it has 0 samples (shape {shape})")
    if shape[1] == 0:
        raise ValueError(f"{name} is empty: it has 0 features (shape {shape})")


def as_2d(name: str, X: Any, xp: Any = NUMPY_BACKEND, like: Any = None) -> Any:
    """Validate ``X`` as a finite, non-empty 2-D numeric array; return it as float64 on the
    backend ``xp`` (of :func:`skflow._array.get_backend`), on the device of ``like``.

    The one validator of the metrics' samples: an array the backend keeps on a device (a
    tensor under Torch) is checked there; anything else is checked on the host and then
    moved to the device of ``like`` (NumPy: stays on the host).

    Parameters
    ----------
    name : str
        Name of the argument in messages.
    X : array-like of shape (n_samples, n_features)
    xp : backend, default=NUMPY_BACKEND
    like : array, optional
        An array of ``xp`` on the device the result must live on (Torch only).

    Returns
    -------
    X : array of shape (n_samples, n_features), float64

    Examples
    --------
    >>> as_2d("X", [[1, 2]]).dtype.name
    'float64'
    """
    if not xp.on_device(X):
        return xp.from_host(_host_2d(name, X), like, "float64")
    X = xp.check_real(X, name)
    _check_matrix_shape(name, X.ndim, tuple(X.shape), "tensor")
    if xp.device(X) != xp.device(like):
        where = f"{name} is on device {X.device} but the other inputs are on {like.device}"
        raise ValueError(where)
    X = xp.to_float64(X.detach())
    if not bool(xp.all(xp.isfinite(X))):
        raise ValueError(f"{name} contains NaN or infinity")
    return X


def refuse_sparse(name: str, X: Any) -> None:
    """``TypeError`` for a SciPy sparse matrix or array: the metrics compute on dense samples
    (without this, NumPy would wrap it in a 0-d object array and name only its dtype).

    Examples
    --------
    >>> from scipy import sparse
    >>> try:
    ...     refuse_sparse("X", sparse.eye(2, format="csr"))
    ... except TypeError as exc:
    ...     print(str(exc)[:36])
    X is a SciPy sparse matrix (csr_matr
    """
    from scipy import sparse

    if sparse.issparse(X):
        raise TypeError(
            f"{name} is a SciPy sparse matrix ({type(X).__name__}); the metrics need dense "
            f"samples. Densify it first: {name}.toarray()."
        )


def _host_2d(name: str, X: Any) -> np.ndarray:
    refuse_sparse(name, X)
    try:
        arr = to_numpy(X)
    except Exception as exc:  # pragma: no cover - exotic array-likes
        raise TypeError(f"{name} must be a numeric array-like, got {type(X).__name__}") from exc
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} must be real-valued, got complex dtype {arr.dtype}")
    if arr.dtype.kind in "USV":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}") from exc
    _check_matrix_shape(name, arr.ndim, arr.shape, "array")
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity")
    return arr


def check_positive_int(value: Any, name: str, *, allow_none: bool = False) -> int | None:
    """:func:`~skflow._validation.check_int` (``>= 1``), worded "a positive integer"."""
    try:
        return check_int(value, name, allow_none=allow_none)
    except InvalidParameterError:
        extra = " or None" if allow_none else ""
        raise InvalidParameterError(
            f"{name} must be a positive integer{extra}, got {value!r}."
        ) from None


def prepare_pair(X: Any, Y: Any) -> tuple[Any, Any, Any]:
    """The backend of the call and float64 copies of X and Y on it (NumPy or Torch).

    A NumPy input next to a tensor is copied to the tensor's device.
    """
    xp = get_backend(X, Y, promote=True)
    like = xp.first_owned(X, Y)  # the device of the call (Torch: the first tensor)
    Xv, Yv = as_2d("X", X, xp, like), as_2d("Y", Y, xp, like)
    if Xv.shape[1] != Yv.shape[1]:
        raise ValueError(f"X has {Xv.shape[1]} features but Y has {Yv.shape[1]} features")
    return xp, Xv, Yv


def prepare_samples(*named: tuple[str, Any]) -> tuple[Any, list[Any]]:
    """The backend of the call and float64 copies of the named samples on it (NumPy or Torch).

    ``named`` is ``(name, array)`` pairs; the names are those of the messages. A NumPy input
    next to a tensor is copied to the tensor's device; every sample must have the features of
    the first.
    """
    xp = get_backend(*(a for _, a in named), promote=True)
    like = xp.first_owned(*(a for _, a in named))
    out = [as_2d(name, a, xp, like) for name, a in named]
    first, d = named[0][0], out[0].shape[1]
    for (name, _), a in zip(named[1:], out[1:], strict=True):
        if a.shape[1] != d:
            raise ValueError(
                f"{name} has {a.shape[1]} features but {first} has {d}; pass samples of the "
                "same features"
            )
    return xp, out
