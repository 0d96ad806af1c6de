"""Task draws in Torch on a device, and a prefetching producer for the draws that stay in NumPy.

Private module of :mod:`skflow.tasks`. Every task source of the package draws its batches in
NumPy by default (``device=None``, bit for bit what it always drew); given a ``device`` it
draws the same laws in Torch on that device, from a local :class:`torch.Generator` seeded by
``random_state`` (never Torch's global seed). The helpers here are the Torch twins of the
vectorized NumPy draws of :mod:`skflow.tasks._base`; :class:`PrefetchedDraws` instead prepares
the next NumPy batch in a background thread while the device computes (for task sources
without device draws, e.g. a user's own).

Torch is imported on first use, as everywhere in the package.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, as_generator

__all__ = [
    "PrefetchedDraws",
    "as_device",
    "sample_on_device",
    "supports_device_draws",
    "t_categorical",
    "t_haar_rotations",
    "t_masked_dirichlet",
    "t_standard_gamma",
    "t_uniform",
    "torch_dtype",
    "torch_generator",
]


def as_device(device: Any):
    """``device`` (a str or :class:`torch.device`) as a :class:`torch.device`."""
    import torch

    try:
        return torch.device(device)
    except (TypeError, RuntimeError) as exc:
        raise InvalidParameterError(f"device must be a torch device, got {device!r}.") from exc


def torch_dtype(dtype: Any = None):
    """The floating dtype of a Torch draw: ``float32`` by default."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InvalidParameterError(f"dtype must be a floating torch dtype, got {dtype!r}.")
    return dtype


def torch_generator(random_state: Any, device: Any):
    """A local :class:`torch.Generator` on ``device`` seeded from ``random_state``.

    Parameters
    ----------
    random_state : None, int, RandomState, numpy Generator or torch.Generator
        An int seeds the generator directly; a NumPy source gives one 63-bit seed (so a
        NumPy ``Generator`` passed batch after batch advances by one draw per batch, and
        ``None`` follows NumPy's global seed as the NumPy draws do); a ``torch.Generator``
        on the device's type is returned as is.
    device : str or torch.device

    Returns
    -------
    torch.Generator

    Examples
    --------
    >>> import torch
    >>> a = torch.rand(2, generator=torch_generator(0, "cpu"))
    >>> bool((a == torch.rand(2, generator=torch_generator(0, "cpu"))).all())
    True
    """
    import torch

    device = as_device(device)
    if isinstance(random_state, torch.Generator):
        if random_state.device.type != device.type:
            raise ValueError(f"a torch.Generator on {random_state.device} cannot draw on {device}.")
        return random_state
    rng = as_generator(random_state)  # validates (negative ints are refused)
    integral = isinstance(random_state, int | np.integer) and not isinstance(random_state, bool)
    seed = int(random_state) if integral and random_state < 2**63 else int(rng.integers(2**63))
    return torch.Generator(device=device).manual_seed(seed)


def supports_device_draws(source: Any) -> bool:
    """Whether ``source.sample_tasks`` can draw on a device natively (``device_draws``)."""
    return bool(getattr(source, "device_draws", False))


def sample_on_device(source, n_tasks, n_support, n_query, gen, device, dtype=None, **kwargs):
    """``source``'s tasks as tensors on ``device``, drawn there when it can, else in NumPy.

    A source without device draws gets a NumPy ``Generator`` seeded by one draw of ``gen``
    (so the stream stays one stream) and its arrays are copied to the device.

    Returns
    -------
    supports : tensor of shape (n_tasks, n_support, n_features)
    queries : tensor of shape (n_tasks, n_query', n_features)
    """
    import torch

    dtype = torch_dtype(dtype)
    if supports_device_draws(source):
        return source.sample_tasks(
            n_tasks, n_support, n_query, random_state=gen, device=device, dtype=dtype, **kwargs
        )
    seed = int(torch.randint(0, 2**62, (1,), generator=gen, device=gen.device))
    drawn = source.sample_tasks(n_tasks, n_support, n_query, random_state=seed, **kwargs)
    return tuple(torch.as_tensor(np.asarray(a), dtype=dtype, device=device) for a in drawn[:2])


def t_uniform(gen, low, high, shape, device, dtype):
    """Uniform draws on ``[low, high)`` (``low``, ``high`` floats or broadcastable tensors)."""
    import torch

    return low + (high - low) * torch.rand(shape, generator=gen, device=device, dtype=dtype)


def t_masked_dirichlet(gen, n_active, k_max, dtype):
    """Torch twin of :func:`~skflow.tasks._base.masked_dirichlet`: Dirichlet(1) weights (B, K)
    over the first ``n_active[b]`` slots, and the mask of those slots."""
    import torch

    device = n_active.device
    active = torch.arange(k_max, device=device)[None, :] < n_active[:, None]
    w = torch.empty((n_active.shape[0], k_max), device=device, dtype=dtype)
    w = w.exponential_(generator=gen) * active
    return w / w.sum(dim=1, keepdim=True), active


def t_categorical(gen, weights, n_draws, n_active):
    """Torch twin of :func:`~skflow.tasks._base.categorical`: indices (B, n_draws) drawn from
    the rows of ``weights`` (B, K), never past slot ``n_active[b] - 1``."""
    import torch

    cum = weights.cumsum(dim=1).contiguous()
    u = torch.rand(
        (weights.shape[0], n_draws), generator=gen, device=weights.device, dtype=weights.dtype
    )
    idx = torch.searchsorted(cum, u, right=True)  # number of cum <= u, as NumPy's sum
    return torch.minimum(idx, n_active[:, None] - 1)


def t_haar_rotations(gen, batch_shape, d, device, dtype):
    """Torch twin of :func:`~skflow.tasks._base.haar_rotations`: Haar orthogonal matrices
    ``(*batch_shape, d, d)`` (QR of a Gaussian matrix with the sign fix)."""
    import torch

    G = torch.randn((*batch_shape, d, d), generator=gen, device=device, dtype=dtype)
    Qm, Rm = torch.linalg.qr(G)
    signs = torch.sign(torch.diagonal(Rm, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return Qm * signs[..., None, :]


def t_standard_gamma(gen, alpha: float, shape, device, dtype):
    """Gamma(``alpha``, rate 1) draws of a given shape, from ``gen`` (Marsaglia-Tsang).

    Torch's own Gamma sampler takes no generator, hence this one: the squeeze acceptance of
    Marsaglia & Tsang (2000) for ``alpha >= 1`` (redrawing the rejected entries until none is
    left, about 2 % of them per round), and ``Gamma(alpha + 1) U^(1 / alpha)`` below 1.

    Examples
    --------
    >>> import torch
    >>> g = t_standard_gamma(torch_generator(0, "cpu"), 2.5, (20000,), "cpu", torch.float64)
    >>> abs(float(g.mean()) - 2.5) < 0.05
    True
    """
    import torch

    a = alpha + 1.0 if alpha < 1.0 else alpha
    dd = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * dd)
    out = torch.empty(math.prod(shape), device=device, dtype=dtype)
    todo = torch.arange(out.numel(), device=device)
    while todo.numel():
        x = torch.randn(todo.numel(), generator=gen, device=device, dtype=dtype)
        u = torch.rand(todo.numel(), generator=gen, device=device, dtype=dtype)
        v = (1.0 + c * x) ** 3
        log_v = torch.log(v.clamp_min(torch.finfo(dtype).tiny))
        ok = (v > 0) & (torch.log(u) < 0.5 * x**2 + dd - dd * v + dd * log_v)
        out[todo[ok]] = (dd * v)[ok]
        todo = todo[~ok]
    if alpha < 1.0:
        out = out * torch.rand(out.numel(), generator=gen, device=device, dtype=dtype) ** (
            1.0 / alpha
        )
    return out.reshape(shape)


class PrefetchedDraws:
    """Draw the next batch in a background thread while the caller computes on this one.

    ``draw()`` is called in one worker thread, one call ahead of the caller, so the batches
    come in the order (and from the random stream) of calling ``draw()`` in a loop: the same
    batches, only ready earlier. With ``pin=True`` (a CUDA device) the worker also turns every
    array of a batch into a page-locked float32 tensor, whose copy to the device can overlap
    the device's work. :meth:`close` (or leaving a ``with`` block) stops the worker; the batch
    it drew ahead is dropped.

    Parameters
    ----------
    draw : callable
        ``draw() -> tuple`` of arrays (anything else in the tuple is passed through).
    pin : bool, default=False
        Convert the arrays to pinned float32 tensors in the worker (CUDA only).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> with PrefetchedDraws(lambda: (rng.random(2),)) as batches:
    ...     first, second = batches()[0], batches()[0]
    >>> bool(np.all(first == np.random.default_rng(0).random(2)))
    True
    """

    def __init__(self, draw: Callable[[], tuple], pin: bool = False):
        from concurrent.futures import ThreadPoolExecutor

        self._draw, self._pin = draw, pin
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="skflow-tasks")
        self._lock = threading.Lock()
        self._next = self._pool.submit(self._produce)

    def _produce(self) -> tuple:
        batch = self._draw()
        if not self._pin:
            return batch
        import torch

        return tuple(
            torch.from_numpy(np.asarray(a, dtype=np.float32)).pin_memory()
            if isinstance(a, np.ndarray)
            else a
            for a in batch
        )

    def __call__(self) -> tuple:
        with self._lock:
            if self._next is None:
                raise RuntimeError("PrefetchedDraws is closed.")
            batch = self._next.result()  # re-raises the worker's exception, if any
            self._next = self._pool.submit(self._produce)
        return batch

    def close(self) -> None:
        """Stop the worker (waits for the batch in progress, then drops it)."""
        with self._lock:
            pending, self._next = self._next, None
        if pending is not None:
            pending.cancel()
            self._pool.shutdown(wait=True)

    def __enter__(self) -> PrefetchedDraws:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
