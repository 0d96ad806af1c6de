"""Tiny array-namespace shim so the functional core accepts NumPy arrays and Torch tensors.

Only the handful of operations the core needs are wrapped; everything else is plain operator
arithmetic, which both libraries share. Torch is imported lazily so that importing skflow
stays cheap when only NumPy is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["get_namespace", "is_torch"]


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a ``torch.Tensor`` (without importing torch if it is not loaded)."""
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "detach")


class _NumpyNamespace:
    name = "numpy"

    @staticmethod
    def logsumexp(a, axis):
        amax = np.max(a, axis=axis, keepdims=True)
        amax = np.where(np.isfinite(amax), amax, 0.0)
        return np.log(np.sum(np.exp(a - amax), axis=axis)) + np.squeeze(amax, axis=axis)

    @staticmethod
    def softmax(a, axis):
        a = a - np.max(a, axis=axis, keepdims=True)
        e = np.exp(a)
        return e / np.sum(e, axis=axis, keepdims=True)

    @staticmethod
    def sum(a, axis=None, keepdims=False):
        return np.sum(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def mean(a, axis=None, keepdims=False):
        return np.mean(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def concat(arrays, axis=0):
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def empty(shape, like):
        return np.empty(shape, dtype=like.dtype)

    @staticmethod
    def full(shape, value, like):
        return np.full(shape, value, dtype=like.dtype)

    @staticmethod
    def asarray(a, like):
        return np.asarray(a, dtype=like.dtype)

    @staticmethod
    def to_float64(a):
        return np.asarray(a, dtype=np.float64)

    @staticmethod
    def astype_like(a, like):
        return a.astype(like.dtype, copy=False)

    @staticmethod
    def sqrt(a):
        return np.sqrt(a)

    @staticmethod
    def exp(a):
        return np.exp(a)

    @staticmethod
    def clip_min(a, lo):
        return np.maximum(a, lo)

    @staticmethod
    def maximum(a, b):
        return np.maximum(a, b)

    @staticmethod
    def amax(a, axis, keepdims=False):
        return np.max(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def log(a):
        return np.log(a)

    @staticmethod
    def logaddexp(a, b):
        return np.logaddexp(a, b)

    @staticmethod
    def where(cond, a, b):
        return np.where(cond, a, b)


class _TorchNamespace:
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch

    def logsumexp(self, a, axis):
        return self.torch.logsumexp(a, dim=axis)

    def softmax(self, a, axis):
        return self.torch.softmax(a, dim=axis)

    def sum(self, a, axis=None, keepdims=False):
        if axis is None:
            return a.sum()
        return a.sum(dim=axis, keepdim=keepdims)

    def mean(self, a, axis=None, keepdims=False):
        if axis is None:
            return a.mean()
        return a.mean(dim=axis, keepdim=keepdims)

    def concat(self, arrays, axis=0):
        return self.torch.cat(list(arrays), dim=axis)

    def empty(self, shape, like):
        return self.torch.empty(shape, dtype=like.dtype, device=like.device)

    def full(self, shape, value, like):
        return self.torch.full(shape, value, dtype=like.dtype, device=like.device)

    def asarray(self, a, like):
        return self.torch.as_tensor(a, dtype=like.dtype, device=like.device)

    def to_float64(self, a):
        return a.to(self.torch.float64)

    def astype_like(self, a, like):
        return a.to(like.dtype)

    def sqrt(self, a):
        return self.torch.sqrt(a)

    def exp(self, a):
        return self.torch.exp(a)

    def clip_min(self, a, lo):
        return self.torch.clamp(a, min=lo)

    def maximum(self, a, b):
        return self.torch.maximum(a, b)

    def amax(self, a, axis, keepdims=False):
        return self.torch.amax(a, dim=axis, keepdim=keepdims)

    def log(self, a):
        return self.torch.log(a)

    def logaddexp(self, a, b):
        return self.torch.logaddexp(a, b)

    def where(self, cond, a, b):
        return self.torch.where(cond, a, b)


_NUMPY = _NumpyNamespace()
_TORCH = None


def get_namespace(*arrays: Any):
    """Return the namespace of the inputs: Torch if any is a tensor, NumPy otherwise.

    Mixing the two is refused rather than silently copied across devices.
    """
    flags = [is_torch(a) for a in arrays if a is not None and not np.isscalar(a)]
    if any(flags) and not all(flags):
        raise TypeError("Inputs mix NumPy arrays and Torch tensors; pass one kind only.")
    if any(flags):
        global _TORCH
        if _TORCH is None:
            _TORCH = _TorchNamespace()
        return _TORCH
    return _NUMPY
