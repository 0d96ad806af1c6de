"""Array helpers: NumPy/Torch namespaces, host conversion, and the backend/device choice.

The functional core accepts NumPy arrays and Torch tensors; only the handful of operations it
needs are wrapped (everything else is operator arithmetic, which both libraries share). Torch
is imported lazily so that importing skflow stays cheap when only NumPy is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import InvalidParameterError

__all__ = [
    "AUTO_TORCH_MIN_SUPPORT",
    "BACKENDS",
    "DEVICES",
    "get_namespace",
    "is_torch",
    "resolve_device",
    "to_numpy",
    "use_torch_backend",
]

BACKENDS = ("auto", "numpy", "torch")
DEVICES = ("auto", "cpu", "cuda")

#: With ``backend="auto"`` on the CPU, supports of at least this many points use Torch.
AUTO_TORCH_MIN_SUPPORT = 1024


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a ``torch.Tensor`` (without importing torch if it is not loaded)."""
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "detach")


def to_numpy(a: Any) -> Any:
    """``a`` as a NumPy array: tensors are detached and copied to the host (half precision
    and bfloat16 as float32, which NumPy can hold); anything else goes through
    ``np.asarray``.

    Examples
    --------
    >>> to_numpy([1.0, 2.0])
    array([1., 2.])
    """
    if is_torch(a):
        import torch

        a = a.detach()
        if a.dtype in (torch.float16, torch.bfloat16):
            a = a.to(torch.float32)
        return a.cpu().numpy()
    return np.asarray(a)


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

    @staticmethod
    def mT(a):  # noqa: N802 - the array-API name of the matrix transpose
        return np.swapaxes(a, -1, -2)


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

    def mT(self, a):  # noqa: N802 - the array-API name of the matrix transpose
        return a.transpose(-1, -2)


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


def resolve_device(device: str) -> str:
    """Map ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``; validate the rest."""
    if device not in DEVICES and not str(device).startswith("cuda:"):
        raise InvalidParameterError(
            f"device must be one of {DEVICES} or 'cuda:N', got {device!r}."
        )
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def use_torch_backend(backend: str, device: str, *, n_support: int | None = None) -> bool:
    """Whether an estimator with these parameters computes with Torch.

    Rule for ``backend="auto"`` (from ``benchmarks/bench_field.py``, see
    ``docs/performance.md``):

    * the device resolves to CUDA: Torch;
    * CPU and ``n_support >= AUTO_TORCH_MIN_SUPPORT`` (1024): Torch. Its attention engine (one
      fused ``scaled_dot_product_attention`` per block, memory linear in ``n + m``) was 2-5x
      faster than NumPy's chunked GEMMs from ``m ~ 1000`` on, in float32 and in float64
      alike, and its float64 results equal the float64 brute force to ~1e-12 just like
      NumPy's;
    * otherwise (small supports, or ``n_support`` not given): NumPy, whose per-call overhead
      is lower, so it wins on small problems such as the paper's ``m = 50``.

    ``"numpy"`` and ``"torch"`` are always honoured.

    Parameters
    ----------
    backend : {"auto", "numpy", "torch"}
    device : {"auto", "cpu", "cuda"} or "cuda:N"
    n_support : int, optional
        Size of the support the field will be evaluated with.

    Returns
    -------
    bool

    Examples
    --------
    >>> use_torch_backend("auto", "cpu")
    False
    >>> use_torch_backend("auto", "cpu", n_support=4096)
    True
    >>> use_torch_backend("numpy", "cpu", n_support=4096)
    False
    """
    if backend not in BACKENDS:
        raise InvalidParameterError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    if backend == "torch":
        return True
    if backend == "numpy":
        return False
    if resolve_device(device).startswith("cuda"):
        return True
    return n_support is not None and n_support >= AUTO_TORCH_MIN_SUPPORT
