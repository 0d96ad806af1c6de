"""Shared internals of the task sources: parameter checks, vectorized draws, the base classes.

Private module (its names are public so that the family modules of :mod:`skflow.tasks` can
share them); users import the task sources from :mod:`skflow.tasks`.
"""

import numbers

import numpy as np

from .._validation import InvalidParameterError, as_generator, check_int, check_real
from ._device import (
    as_device,
    sample_on_device,
    supports_device_draws,
    torch_dtype,
    torch_generator,
)

__all__ = [
    "SyntheticTasks",
    "TaskDistribution",
    "categorical",
    "check_int_range",
    "check_positive_range",
    "check_sizes",
    "haar_rotations",
    "masked_dirichlet",
    "shape_text",
]


def check_int_range(value, name, min_value):
    """An int ``k`` (fixed) or a pair ``(lo, hi)`` of ints with ``min_value <= lo <= hi``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        lo = hi = check_int(value, name, minimum=min_value)
        return lo, hi
    message = (
        f"{name} must be an integer >= {min_value} or a pair (low, high) of them, got {value!r}."
    )
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise InvalidParameterError(message) from None
    for v in (lo, hi):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < min_value:
            raise InvalidParameterError(message)
    if lo > hi:
        raise InvalidParameterError(f"{name}=(low, high) needs low <= high, got {value!r}.")
    return int(lo), int(hi)


def check_positive_range(value, name):
    """A positive float (fixed) or a pair ``(lo, hi)`` with ``0 < lo <= hi``."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = check_real(value, name, low=0.0, low_open=True)
        return v, v
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name} must be a positive number or a pair (low, high) of them, got {value!r}."
        ) from None
    lo = check_real(lo, name, low=0.0, low_open=True)
    hi = check_real(hi, name, low=0.0, low_open=True)
    if lo > hi:
        raise InvalidParameterError(f"{name}=(low, high) needs low <= high, got {value!r}.")
    return lo, hi


def check_sizes(n_tasks, n_support, n_query):
    n_tasks = check_int(n_tasks, "n_tasks")
    n_support = check_int(n_support, "n_support")
    n_query = check_int(n_query, "n_query", minimum=0)
    return n_tasks, n_support, n_query


def masked_dirichlet(rng, n_active, k_max):
    """Dirichlet(1) weights over the first ``n_active[b]`` of ``k_max`` slots, 0 elsewhere."""
    active = np.arange(k_max)[None, :] < n_active[:, None]  # (B, k_max)
    w = rng.standard_exponential((len(n_active), k_max)) * active
    w /= w.sum(axis=1, keepdims=True)
    return w, active


def categorical(rng, weights, n_draws, n_active):
    """Vectorized categorical draws: ``weights`` (B, K) -> indices (B, n_draws)."""
    cum = np.cumsum(weights, axis=1)  # (B, K)
    u = rng.random((weights.shape[0], n_draws))  # (B, n)
    idx = (u[:, :, None] >= cum[:, None, :]).sum(axis=2)
    # guard against cum[-1] < 1 by rounding: never pick an inactive slot
    return np.minimum(idx, n_active[:, None] - 1)


def haar_rotations(rng, batch_shape, d):
    """Uniformly random (Haar) orthogonal matrices of shape ``(*batch_shape, d, d)``.

    QR of a Gaussian matrix with the sign fix (columns scaled by the signs of diag(R)).
    """
    G = rng.standard_normal((*batch_shape, d, d))
    Qm, Rm = np.linalg.qr(G)
    signs = np.sign(np.diagonal(Rm, axis1=-2, axis2=-1))
    signs[signs == 0] = 1.0
    return Qm * signs[..., None, :]


class TaskDistribution:
    """Shared interface: ``sample_task`` is task 0 of ``sample_tasks(1, ...)``."""

    _param_names = ()

    def sample_task(self, n_support, n_query, random_state=None, **kwargs):
        """Draw one task.

        Parameters
        ----------
        n_support : int >= 1
            Number of support points.
        n_query : int >= 0
            Number of query points.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.
        **kwargs
            Passed on to ``sample_tasks`` (e.g. ``split`` of a wrapped :class:`ClassTasks`).

        Returns
        -------
        support : ndarray of shape (n_support, n_features), float64
        query : ndarray of shape (n_query, n_features), float64
        """
        supports, queries = self.sample_tasks(
            1, n_support, n_query, random_state=random_state, **kwargs
        )
        return supports[0], queries[0]

    def __repr__(self):
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._param_names)
        return f"{type(self).__name__}({args})"


class TransformedTasks(TaskDistribution):
    """Tasks of a ``source`` distribution, each mapped by :meth:`transform` (an augmentation:
    :class:`~skflow.tasks.RotatedTasks`, :class:`~skflow.tasks.RecentredTasks`)."""

    _param_names = ("source",)

    def __init__(self, source):
        self.source = source

    @property
    def n_features(self):
        return self.source.n_features

    def transform(self, supports, queries, rng):
        """The augmented ``(supports, queries)`` of a batch of tasks (subclasses define it)."""
        raise NotImplementedError

    @property
    def device_draws(self):
        """Whether the source draws on a device natively (then so does the augmentation)."""
        return supports_device_draws(self.source)

    def sample_tasks(
        self, n_tasks, n_support, n_query, random_state=None, *, device=None, dtype=None, **kwargs
    ):
        """Draw ``n_tasks`` tasks of the source and transform them, from one random stream.

        With a ``device``, the source draws there (or in NumPy, copied there, if it cannot)
        and the transform runs in Torch, all from one :class:`torch.Generator`.

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, n_support, n_features)
        queries : ndarray or tensor of shape (n_tasks, n_query, n_features)
        """
        if device is not None:
            gen = torch_generator(random_state, device)
            S, Q = sample_on_device(
                self.source, n_tasks, n_support, n_query, gen, device, dtype, **kwargs
            )
            return self.transform(S, Q, gen)
        rng = as_generator(random_state)
        S, Q = self.source.sample_tasks(n_tasks, n_support, n_query, random_state=rng, **kwargs)
        return self.transform(S, Q, rng)


class SyntheticTasks(TaskDistribution):
    """Families whose tasks are iid points of a random distribution, drawn together.

    A subclass supplies ``_validate()``, its checked parameters as a tuple, and
    ``_draw(rng, B, n, *params)``, which returns ``(X, extra)``: the ``n`` points of each of
    the ``B`` tasks, ``X`` of shape ``(B, n, n_features)``, and anything else it drew (or
    None). The first ``n_support`` points of a task are its support, the rest its queries.
    ``_draw_torch(gen, B, n, *params, device=, dtype=)`` is the same law in Torch (a
    :class:`torch.Generator` ``gen``), returning ``(X, extra)`` as tensors.
    """

    device_draws = True

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None, *, device=None,
                     dtype=None):  # fmt: skip
        """Draw a batch of independent tasks.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support points per task.
        n_query : int >= 0
            Number of query points per task.
        random_state : None, int, RandomState, Generator or torch.Generator, default=None
            Source of randomness (with a ``device``: seeds a local :class:`torch.Generator`,
            see :func:`~skflow.tasks._device.torch_generator`).
        device : None, str or torch.device, default=None
            None: NumPy arrays (float64). A device: the same law drawn in Torch there, as
            tensors of ``dtype``.
        dtype : torch.dtype, default=None
            Floating dtype of the tensors (``torch.float32`` when None; device draws only).

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, n_support, n_features)
        queries : ndarray or tensor of shape (n_tasks, n_query, n_features)
        """
        drawn = self._sample(n_tasks, n_support, n_query, random_state, device, dtype)
        return drawn[0], drawn[1]

    def _sample(self, n_tasks, n_support, n_query, random_state, device=None, dtype=None):
        """``(supports, queries, extra)``: parameters checked before sizes, then the draw
        (NumPy, or Torch on ``device``)."""
        params = self._validate()
        B, m, q = check_sizes(n_tasks, n_support, n_query)
        if device is not None:
            gen, dev = torch_generator(random_state, device), as_device(device)
            dtype = torch_dtype(dtype)
            X, extra = self._draw_torch(gen, B, m + q, *params, device=dev, dtype=dtype)
            return X[:, :m].contiguous(), X[:, m:].contiguous(), extra
        X, extra = self._draw(as_generator(random_state), B, m + q, *params)
        return np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:]), extra


def shape_text(X, fallback):
    """``"20x3"`` for an array-like with a shape, else ``fallback`` (for the reprs)."""
    shape = getattr(X, "shape", None)
    return "x".join(map(str, shape)) if shape else fallback
