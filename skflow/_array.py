"""The array backend (NumPy or Torch), host conversion, and the backend/device choice.

The functional core accepts NumPy arrays and Torch tensors; only the handful of operations it
needs are wrapped (everything else is operator arithmetic, which both libraries share). Torch
is imported lazily so that importing skflow stays cheap when only NumPy is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import InvalidParameterError, check_real_array

__all__ = [
    "AUTO_NUMPY_SUPPORT_CPU",
    "AUTO_TORCH_MIN_SUPPORT_ADAPTIVE",
    "BACKENDS",
    "DEVICES",
    "NUMPY_BACKEND",
    "array_module",
    "as_array",
    "as_time",
    "check_tensors",
    "dispatch",
    "get_backend",
    "get_namespace",
    "host_to_like",
    "is_torch",
    "resolve_device",
    "to_numpy",
    "torch_backend",
    "use_torch_backend",
]

BACKENDS = ("auto", "numpy", "torch")
DEVICES = ("auto", "cpu", "cuda")

#: Calibration of ``backend="auto"`` on the CPU: half-open ranges ``[lo, hi)`` of support
#: sizes ``m`` where NumPy measured faster than Torch (everywhere else: Torch). Produced by
#: ``python benchmarks/bench_small_support.py --write-docs`` (its calibration grid, m in
#: {10, 50, 200, 1000, 4000} x n in {256, 8192}, Heun 100 steps, float32; the table and the
#: literal to paste here are in docs/performance.md, "Backend calibration") through
#: its ``numpy_support_ranges``. Empty, i.e. Torch at every size, until that run is made on a
#: quiet machine: issue 24 measured Torch faster than NumPy at every size it tried (m = 50
#: on a quiet machine, m = 50 and 1000 on a loaded one).
AUTO_NUMPY_SUPPORT_CPU: tuple[tuple[int, int], ...] = ()
#: ``backend="auto"`` on the CPU for adaptive solves (``dopri5`` sampling, the density's
#: change of variables): NumPy below this many support points. Their late steps evaluate few
#: rows per call, where NumPy's lower per-call overhead counts most; the calibration above
#: covers fixed-step sampling only, so these keep the rule measured by
#: ``benchmarks/bench_field.py`` (Torch 2-5x faster from m ~ 1000 on).
AUTO_TORCH_MIN_SUPPORT_ADAPTIVE = 1024
_MIX = "Inputs mix NumPy arrays and Torch tensors; pass one kind only."


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


def as_array(a: Any, dtype: Any = None) -> Any:
    """``a`` itself if it is a tensor, else ``np.asarray(a, dtype=dtype)``: an input that
    may be either kind, made an array without moving a tensor to the host.

    Parameters
    ----------
    a : array-like or torch.Tensor of any shape
    dtype : NumPy dtype, optional
        The dtype of host values (tensors keep theirs).

    Returns
    -------
    ndarray or torch.Tensor of the shape of ``a``

    Examples
    --------
    >>> as_array([0, 1], np.float64)
    array([0., 1.])
    """
    return a if is_torch(a) else np.asarray(a, dtype=dtype)


def as_time(t: Any, like: Any, dtype: Any = None) -> Any:
    """The time of a Torch computation on queries ``like``: a Python float for a scalar on
    the host (the cheap case: no tensor, no device), a tensor on ``like``'s device otherwise.

    Parameters
    ----------
    t : float, array-like or torch.Tensor of shape () or (...)
        A scalar time, or per-row times.
    like : torch.Tensor
        The queries: the device of a tensor time.
    dtype : NumPy dtype, optional
        The dtype host times are read as before becoming a tensor (tensors keep theirs).

    Returns
    -------
    float or torch.Tensor of the shape of ``t``

    Examples
    --------
    >>> import torch
    >>> as_time(np.float32(0.5), torch.zeros(2, 3))
    0.5
    >>> as_time([0.25, 0.5], torch.zeros(2, 3), np.float64)
    tensor([0.2500, 0.5000], dtype=torch.float64)
    """
    if not is_torch(t) and np.ndim(t) == 0:
        return float(t)
    import torch

    return torch.as_tensor(as_array(t, dtype), device=like.device)


def check_tensors(**arrays: Any) -> None:
    """Refuse anything but Torch tensors for a Torch-only routine (the ``nn`` modules).

    Parameters
    ----------
    **arrays : object
        The inputs by the names the message gives them.

    Raises
    ------
    TypeError
        If any of them is not a tensor (``"x and support must be torch tensors."``).

    Examples
    --------
    >>> check_tensors(x=np.zeros(2))
    Traceback (most recent call last):
    ...
    TypeError: x must be torch tensors.
    """
    if not all(is_torch(a) for a in arrays.values()):
        raise TypeError(f"{' and '.join(arrays)} must be torch tensors.")


def host_to_like(a: np.ndarray, like: Any) -> Any:
    """A result computed on the host, returned where the input ``like`` lives: ``a``
    unchanged for a host ``like``, a tensor of ``like``'s dtype on its device otherwise.

    Parameters
    ----------
    a : ndarray of any shape
    like : array-like or torch.Tensor
        The input the result belongs to.

    Returns
    -------
    ndarray or torch.Tensor of the shape of ``a``

    Examples
    --------
    >>> host_to_like(np.ones(2), np.zeros(3, dtype=np.float32)).dtype
    dtype('float64')
    """
    if not is_torch(like):
        return a
    import torch

    return torch.as_tensor(a, dtype=like.dtype, device=like.device)


def dispatch(*arrays: Any, numpy: Any, torch: Any) -> Any:
    """The implementation of a computation for its inputs: ``torch`` when every array is a
    tensor (computed on their device), ``numpy`` otherwise (which converts what it is given,
    tensors on the host included).

    Parameters
    ----------
    *arrays : array-like or torch.Tensor
        The inputs that decide.
    numpy, torch : callable
        The two implementations.

    Returns
    -------
    callable
        ``torch`` or ``numpy``.

    Examples
    --------
    >>> dispatch(np.zeros(2), numpy=np.sum, torch=None) is np.sum
    True
    """
    return torch if all(is_torch(a) for a in arrays) else numpy


def array_module(a: Any) -> Any:
    """The library module of an array: ``torch`` for a tensor, ``numpy`` for anything else
    (where elementwise functions such as ``sin``, ``cos``, ``exp`` are found by name).

    Parameters
    ----------
    a : array-like or torch.Tensor

    Returns
    -------
    module

    Examples
    --------
    >>> array_module([0.5]).__name__
    'numpy'
    """
    if is_torch(a):
        import torch

        return torch
    return np


class _NumpyNamespace:
    """The NumPy backend: host arrays, no device (see :func:`get_backend`)."""

    name = "numpy"
    is_torch = False
    #: whether the backend has a fused attention kernel (Torch's SDPA)
    fused_attention = False
    float32, float64 = np.float32, np.float64
    to_numpy = staticmethod(to_numpy)

    def __reduce__(self):  # one instance: a pickled field or index gets it back
        return (_numpy_backend, ())

    # -- what the backend is asked about an array ----------------------------------------
    @staticmethod
    def owns(a):
        return not is_torch(a)

    @staticmethod
    def on_device(a):
        return False

    @staticmethod
    def device(a):
        return None

    @staticmethod
    def device_type(a):
        return "cpu"

    @staticmethod
    def layout_key(x):
        if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
            return (False, tuple(x.shape), x.dtype, None)
        return None

    @staticmethod
    def check_real(a, name):
        return check_real_array(to_numpy(a), name)

    @staticmethod
    def check_device(a, like, name, like_name):
        """Nothing to check: host arrays."""

    @staticmethod
    def as_array(a):
        return np.asarray(a)

    @staticmethod
    def first_owned(*arrays):
        return arrays[0]

    @staticmethod
    def check_kind(a):
        if is_torch(a):
            raise TypeError(_MIX)

    # -- conversions ---------------------------------------------------------------------
    @staticmethod
    def cast(a, dtype):
        return a.astype(dtype, copy=False)

    @staticmethod
    def empty(dtype, like):
        return np.empty(0, dtype=dtype)

    @staticmethod
    def to_device(values, like, dtype=None):
        return values if dtype is None else values.astype(dtype, copy=False)

    @staticmethod
    def from_numpy(a, device):
        return a

    # -- fused and in-place updates ------------------------------------------------------
    @staticmethod
    def sub_scaled(a, b, c):
        return a - c * b

    @staticmethod
    def velocity_(mean, x, decay, sigma):
        mean -= decay * x
        mean /= sigma
        return mean

    @staticmethod
    def clamp_min_(a, low):
        return np.maximum(a, low, out=a)

    @staticmethod
    def exp_(a):
        return np.exp(a, out=a)

    @staticmethod
    def fill_diagonal_(a, value):
        np.fill_diagonal(a, value)
        return a

    @staticmethod
    def abs_max(a):
        return float(np.max(np.abs(a)))

    # -- sparse row bookkeeping ----------------------------------------------------------
    @staticmethod
    def nonzero_pairs(mask):
        return np.nonzero(mask)

    @staticmethod
    def segment_sum(rows, values, n_rows):
        starts = np.searchsorted(rows, np.arange(n_rows))
        return np.add.reduceat(values, starts, axis=0)

    @staticmethod
    def segment_max(rows, values, n_rows):
        starts = np.searchsorted(rows, np.arange(n_rows))
        return np.maximum.reduceat(values, starts)

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
    def stack(arrays, axis=0):
        return np.stack(arrays, axis=axis)

    @staticmethod
    def broadcast_to(a, shape):
        return np.broadcast_to(a, shape)

    @staticmethod
    def full(shape, value, like, dtype=None):
        return np.full(shape, value, dtype=like.dtype if dtype is None else dtype)

    @staticmethod
    def asarray(a, like):
        return np.asarray(a, dtype=like.dtype)

    @staticmethod
    def from_host(a, like, dtype):
        return np.asarray(a, dtype=dtype)

    @staticmethod
    def index(idx, like):
        return idx

    @staticmethod
    def to_float64(a, like=None):
        return np.asarray(a, dtype=np.float64)

    @staticmethod
    def astype(a, dtype):
        return np.asarray(a, dtype=dtype)

    @staticmethod
    def astype_like(a, like):
        return a.astype(like.dtype, copy=False)

    @staticmethod
    def as_floating(a):
        return a if a.dtype.kind == "f" else a.astype(np.float64)

    @staticmethod
    def copy(a):
        return np.array(a, copy=True)

    @staticmethod
    def sqrt(a):
        return np.sqrt(a)

    @staticmethod
    def exp(a):
        return np.exp(a)

    @staticmethod
    def clip(a, lo, hi=None):
        return np.clip(a, lo, hi)

    @staticmethod
    def maximum(a, b):
        return np.maximum(a, b)

    @staticmethod
    def minimum(a, b):
        return np.minimum(a, b)

    @staticmethod
    def isfinite(a):
        return np.isfinite(a)

    @staticmethod
    def all(a, axis=None):
        return np.all(a, axis=axis)

    @staticmethod
    def argmax(a, axis):
        return np.argmax(a, axis=axis)

    @staticmethod
    def amax(a, axis, keepdims=False):
        return np.max(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def kth_smallest(a, k):
        # the k-th smallest of each row (k from 1): a partial sort, not a full one
        return np.partition(a, k - 1, axis=-1)[..., k - 1]

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
    def nonzero(mask, size=None):
        return np.flatnonzero(mask)

    @staticmethod
    def put_rows(target, idx, values):
        target[idx] = values

    @staticmethod
    def add_scaled_(acc, c, a):
        acc += c * a
        return acc

    @staticmethod
    def shifted_exp_(a, shift, low):
        return np.exp(np.maximum(np.subtract(a, shift, out=a), low, out=a), out=a)

    @staticmethod
    def mT(a):  # noqa: N802 - the array-API name of the matrix transpose
        return np.swapaxes(a, -1, -2)


class _TorchNamespace:
    """The Torch backend: tensors on their device (see :func:`get_backend`)."""

    name = "torch"
    is_torch = True
    fused_attention = True
    to_numpy = staticmethod(to_numpy)

    def __init__(self):
        import torch

        self.torch = torch
        self.float32, self.float64 = torch.float32, torch.float64

    def __reduce__(self):  # the torch module does not pickle; the instance is rebuilt
        return (torch_backend, ())

    # -- what the backend is asked about an array ----------------------------------------
    def owns(self, a):
        return is_torch(a)

    def on_device(self, a):
        return is_torch(a)

    def device(self, a):
        return a.device

    def device_type(self, a):
        return a.device.type

    def layout_key(self, x):
        return (True, tuple(x.shape), x.dtype, x.device) if is_torch(x) else None

    def check_kind(self, a):
        if not (a is None or np.isscalar(a) or is_torch(a)):
            raise TypeError(_MIX)

    def check_real(self, a, name):
        if not is_torch(a):  # host data: checked on the host (the caller moves it)
            return check_real_array(to_numpy(a), name)
        if a.is_complex():
            raise TypeError(f"{name} must be real-valued, got complex dtype {a.dtype}.")
        return a

    def check_device(self, a, like, name, like_name):
        # moving data silently would hide a user's mistake (and a sync)
        if is_torch(a) and a.device != like.device:
            raise ValueError(
                f"{name} is on device {a.device} but {like_name} is on device {like.device}; "
                "put both on the same device."
            )

    def as_array(self, a):
        return a

    def first_owned(self, *arrays):
        return next(a for a in arrays if is_torch(a))

    # -- conversions ---------------------------------------------------------------------
    def cast(self, a, dtype):
        return a if a.dtype == dtype else a.to(dtype)  # (a no-op .to still costs a call)

    def empty(self, dtype, like):
        return self.torch.empty(0, dtype=dtype, device=like.device)

    def to_device(self, values, like, dtype=None):
        out = self.torch.as_tensor(np.array(values), device=like.device)  # a writable copy
        return out if dtype is None else out.to(dtype)

    def from_numpy(self, a, device):
        return self.torch.as_tensor(a, device=device)  # shares the host memory on the CPU

    # -- fused and in-place updates ------------------------------------------------------
    def sub_scaled(self, a, b, c):
        return self.torch.sub(a, b, alpha=c)  # one pass

    def velocity_(self, mean, x, decay, sigma):
        # not in place under autograd, whose backward of SDPA needs its output
        if mean.requires_grad:
            return self.torch.sub(mean, x, alpha=decay).div_(sigma)
        return mean.sub_(x, alpha=decay).div_(sigma)

    def clamp_min_(self, a, low):
        return a.clamp_(min=low)

    def exp_(self, a):
        return a.exp_()

    def fill_diagonal_(self, a, value):
        return a.fill_diagonal_(value)

    def abs_max(self, a):
        return float(a.abs().max())

    # -- sparse row bookkeeping ----------------------------------------------------------
    def nonzero_pairs(self, mask):
        return mask.nonzero(as_tuple=True)

    def segment_sum(self, rows, values, n_rows):
        out = values.new_zeros((n_rows, values.shape[1]))
        return out.index_add_(0, rows, values)

    def segment_max(self, rows, values, n_rows):
        out = values.new_full((n_rows,), float("-inf"))
        return out.scatter_reduce(0, rows, values, reduce="amax", include_self=True)

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

    def stack(self, arrays, axis=0):
        return self.torch.stack(list(arrays), dim=axis)

    def broadcast_to(self, a, shape):
        return a.expand(*shape)  # a view, as NumPy's

    def full(self, shape, value, like, dtype=None):
        dtype = like.dtype if dtype is None else getattr(self.torch, dtype)
        return self.torch.full(shape, value, dtype=dtype, device=like.device)

    def asarray(self, a, like):
        return self.torch.as_tensor(a, dtype=like.dtype, device=like.device)

    def from_host(self, a, like, dtype):
        a = np.ascontiguousarray(a)
        return self.torch.as_tensor(a, dtype=getattr(self.torch, dtype), device=like.device)

    def index(self, idx, like):
        return self.torch.as_tensor(idx, dtype=self.torch.int64, device=like.device)

    def to_float64(self, a, like=None):
        if like is None:
            return a.to(self.torch.float64)
        return a.to(device=like.device, dtype=self.torch.float64)

    def astype(self, a, dtype):
        return a.to(getattr(self.torch, dtype))

    def astype_like(self, a, like):
        return a.to(like.dtype)

    def as_floating(self, a):
        return a if a.is_floating_point() else a.to(self.torch.float64)

    def copy(self, a):
        return a.clone()

    def sqrt(self, a):
        return self.torch.sqrt(a)

    def exp(self, a):
        return self.torch.exp(a)

    def clip(self, a, lo, hi=None):
        return a.clamp(min=lo, max=hi)

    def maximum(self, a, b):
        return self.torch.maximum(a, b)

    def minimum(self, a, b):
        return self.torch.minimum(a, b)

    def isfinite(self, a):
        return self.torch.isfinite(a)

    def all(self, a, axis=None):
        return a.all() if axis is None else a.all(dim=axis)

    def argmax(self, a, axis):
        return a.argmax(axis)

    def amax(self, a, axis, keepdims=False):
        return self.torch.amax(a, dim=axis, keepdim=keepdims)

    def kth_smallest(self, a, k):
        return self.torch.kthvalue(a, k, dim=-1).values

    def log(self, a):
        return self.torch.log(a)

    def logaddexp(self, a, b):
        return self.torch.logaddexp(a, b)

    def where(self, cond, a, b):
        return self.torch.where(cond, a, b)

    def nonzero(self, mask, size=None):
        # a known ``size`` spares the host synchronisation of a data-dependent shape
        if size is None:
            return mask.nonzero().squeeze(1)
        return self.torch.nonzero_static(mask, size=size).squeeze(1)

    def put_rows(self, target, idx, values):
        target.index_copy_(0, idx, values)

    def add_scaled_(self, acc, c, a):
        return acc.add_(a, alpha=c)

    def shifted_exp_(self, a, shift, low):
        return a.sub_(shift).clamp_(min=low).exp_()

    def mT(self, a):  # noqa: N802 - the array-API name of the matrix transpose
        return a.transpose(-1, -2)


#: The NumPy backend (host arrays): what a computation that always runs on the host asks.
NUMPY_BACKEND = _NumpyNamespace()
_TORCH = None


def _numpy_backend():
    return NUMPY_BACKEND


def torch_backend():
    """The Torch backend (imports torch on first use).

    Examples
    --------
    >>> torch_backend().name
    'torch'
    """
    global _TORCH
    if _TORCH is None:
        _TORCH = _TorchNamespace()
    return _TORCH


def get_backend(*arrays: Any, promote: bool = False):
    """The array backend of the inputs: Torch if any is a tensor, NumPy otherwise.

    The one NumPy/Torch decision of skflow, taken once per public call (a prepared field, a
    solve, a metric, a pruned index) and passed down: the field, the solvers, the metrics and
    the pruned engine ask the returned object -- the library-specific operations they need
    (``where``, ``clip``, ``concat``, ``nonzero``, ``put_rows``, in-place updates, dtype
    casts, ``to_numpy``, ...), and what it knows of an array (``owns``, ``on_device``,
    ``device``, ``device_type``, ``layout_key``) -- never the array's type, and write
    everything else as operator arithmetic, which both libraries share. Mixing the two is
    refused rather than silently copied across devices.

    Parameters
    ----------
    *arrays : array-like or None
        The inputs of the call; None and scalars are skipped.
    promote : bool, default=False
        Whether a mix of NumPy arrays and tensors gives Torch (the caller copies the host
        inputs to the tensors' device) instead of a ``TypeError``.

    Returns
    -------
    backend : object
        ``NUMPY_BACKEND`` or the Torch backend (``backend.name``, ``backend.is_torch``).

    Examples
    --------
    >>> xp = get_backend(np.array([1.0, -2.0]))
    >>> xp.name, xp.is_torch, xp.clip(np.array([1.0, -2.0]), 0.0).tolist()
    ('numpy', False, [1.0, 0.0])
    """
    flags = [is_torch(a) for a in arrays if a is not None and not np.isscalar(a)]
    if any(flags) and not all(flags) and not promote:
        raise TypeError(_MIX)
    return torch_backend() if any(flags) else NUMPY_BACKEND


def get_namespace(*arrays: Any):
    """:func:`get_backend` under its earlier name (the array namespace of the inputs).

    Examples
    --------
    >>> get_namespace(np.zeros(2)).name
    'numpy'
    """
    return get_backend(*arrays)


def resolve_device(device: str) -> str:
    """Map ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``; validate the rest."""
    if device not in DEVICES and not str(device).startswith("cuda:"):
        raise InvalidParameterError(f"device must be one of {DEVICES} or 'cuda:N', got {device!r}.")
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def use_torch_backend(
    backend: str,
    device: str,
    *,
    n_support: int | None = None,
    numpy_ranges: tuple[tuple[int, int], ...] = AUTO_NUMPY_SUPPORT_CPU,
    adaptive: bool = False,
) -> bool:
    """Whether an estimator with these parameters computes with Torch.

    Rule for ``backend="auto"`` (calibrated by ``benchmarks/bench_small_support.py``, see
    ``docs/performance.md``):

    * the device resolves to CUDA: Torch;
    * CPU: NumPy where ``n_support`` lies in a range of ``numpy_ranges`` (the measured
      :data:`AUTO_NUMPY_SUPPORT_CPU`, sizes where NumPy's chunked GEMMs beat Torch's fused
      ``scaled_dot_product_attention``), Torch everywhere else and when ``n_support`` is not
      given. Both compute the same field; Torch's float64 results equal the float64 brute
      force to ~1e-12 just like NumPy's;
    * CPU and ``adaptive`` (a ``dopri5`` solve): NumPy below
      :data:`AUTO_TORCH_MIN_SUPPORT_ADAPTIVE` support points (or when ``n_support`` is not
      given), Torch from there on.

    ``"numpy"`` and ``"torch"`` are always honoured.

    Parameters
    ----------
    backend : {"auto", "numpy", "torch"}
    device : {"auto", "cpu", "cuda"} or "cuda:N"
    n_support : int, optional
        Size of the support the field will be evaluated with.
    numpy_ranges : tuple of (int, int), default=AUTO_NUMPY_SUPPORT_CPU
        Half-open ranges of support sizes that use NumPy on the CPU.
    adaptive : bool, default=False
        Whether the field serves an adaptive (``dopri5``) solve.

    Returns
    -------
    bool

    Examples
    --------
    >>> use_torch_backend("auto", "cpu", n_support=50, numpy_ranges=((1, 100),))
    False
    >>> use_torch_backend("auto", "cpu", n_support=4096, numpy_ranges=((1, 100),))
    True
    >>> use_torch_backend("numpy", "cpu", n_support=4096)
    False
    """
    if backend not in BACKENDS:
        raise InvalidParameterError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    device = resolve_device(device)  # a misspelt device is an error whatever the backend
    if backend == "torch":
        return True
    if backend == "numpy":
        return False
    if device.startswith("cuda"):
        return True
    if adaptive:
        return n_support is not None and n_support >= AUTO_TORCH_MIN_SUPPORT_ADAPTIVE
    if n_support is None:
        return True
    return not any(lo <= n_support < hi for lo, hi in numpy_ranges)
