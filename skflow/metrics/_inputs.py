"""Input checks shared by the metrics: 2-D samples (NumPy or Torch) and positive counts.

Private module: its names are public so that the metric modules can share them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._array import is_torch
from .._validation import InvalidParameterError, check_int

__all__ = ["as_numpy_2d", "as_torch_2d", "check_positive_int", "prepare_pair"]


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


def as_numpy_2d(name: str, X: Any) -> np.ndarray:
    """Validate ``X`` as a finite, non-empty 2-D numeric array and return it as float64."""
    try:
        arr = np.asarray(X)
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


def as_torch_2d(name: str, X: Any, device: Any) -> Any:
    """Validate ``X`` as a finite non-empty 2-D tensor; return it as float64 on ``device``."""
    import torch

    if not isinstance(X, torch.Tensor):
        X = torch.as_tensor(as_numpy_2d(name, X), device=device)
    if X.is_complex():
        raise TypeError(f"{name} must be real-valued, got complex dtype {X.dtype}")
    _check_matrix_shape(name, X.ndim, tuple(X.shape), "tensor")
    if X.device != device:
        raise ValueError(f"{name} is on device {X.device} but the other inputs are on {device}")
    X = X.detach().to(torch.float64)
    if not bool(torch.isfinite(X).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return X


def check_positive_int(value: Any, name: str, *, allow_none: bool = False) -> int | None:
    """:func:`~skflow._validation.check_int` (``>= 1``), worded "a positive integer"."""
    try:
        return check_int(value, name, allow_none=allow_none)
    except InvalidParameterError:
        extra = " or None" if allow_none else ""
        raise InvalidParameterError(
            f"{name} must be a positive integer{extra}, got {value!r}."
        ) from None


def prepare_pair(X: Any, Y: Any) -> tuple[Any, Any]:
    """Validate X and Y (NumPy or Torch) and return float64 copies of the same kind."""
    if is_torch(X) or is_torch(Y):
        device = X.device if is_torch(X) else Y.device
        Xv, Yv = as_torch_2d("X", X, device), as_torch_2d("Y", Y, device)
    else:
        Xv, Yv = as_numpy_2d("X", X), as_numpy_2d("Y", Y)
    if Xv.shape[1] != Yv.shape[1]:
        raise ValueError(f"X has {Xv.shape[1]} features but Y has {Yv.shape[1]} features")
    return Xv, Yv
