"""Mixtures of task families: each task comes from one family."""

import numpy as np

from .._validation import as_generator
from ._base import TaskDistribution, check_sizes
from ._device import (
    as_device,
    sample_on_device,
    supports_device_draws,
    torch_dtype,
    torch_generator,
)

__all__ = ["MixedTasks"]


class MixedTasks(TaskDistribution):
    """A meta-distribution that mixes task families: each task comes from one family.

    Every task picks family ``j`` with probability ``weights[j]`` (independently), then is
    drawn from it. This is the paper's "mixed" meta-distribution (Gaussian mixtures, rings,
    moons and spirals); leaving one family out of ``families`` gives its leave-one-family-out
    training distribution.

    Parameters
    ----------
    families : sequence of task sources
        Objects with ``sample_tasks(n_tasks, n_support, n_query, random_state)`` and
        ``n_features`` (all equal), e.g. the classes of this module.
    weights : sequence of float or None, default=None
        Non-negative family probabilities (normalized); uniform when None.

    Attributes
    ----------
    n_features : int
        Dimension of the points (shared by the families).

    Examples
    --------
    >>> from skflow.tasks import (GaussianMixtureTasks, MixedTasks, MoonsTasks, RingTasks,
    ...                           SpiralTasks)
    >>> mixed = MixedTasks([GaussianMixtureTasks(4), RingTasks(4), MoonsTasks(4),
    ...                     SpiralTasks(4)], weights=[2, 1, 1, 1])
    >>> Ss, Qs = mixed.sample_tasks(6, 10, 3, random_state=0)
    >>> Ss.shape, Qs.shape
    ((6, 10, 4), (6, 3, 4))
    """

    def __init__(self, families, weights=None):
        self.families = families
        self.weights = weights

    def __repr__(self):
        return f"MixedTasks(families={list(self.families)!r}, weights={self.weights!r})"

    def _validate(self):
        families = list(self.families)
        if not families or not all(callable(getattr(f, "sample_tasks", None)) for f in families):
            raise ValueError("families must be a non-empty sequence of task sources.")
        dims = {int(f.n_features) for f in families}
        if len(dims) != 1:
            raise ValueError(f"all families must have the same n_features, got {sorted(dims)}.")
        if self.weights is None:
            w = np.full(len(families), 1.0 / len(families))
        else:
            w = np.asarray(self.weights, dtype=np.float64)
            if w.shape != (len(families),) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(
                    f"weights must be {len(families)} non-negative finite numbers, got "
                    f"{self.weights!r}."
                )
            if w.sum() <= 0:
                raise ValueError("weights must not all be zero.")
            w = w / w.sum()
        return families, w, dims.pop()

    @property
    def n_features(self):
        return self._validate()[2]

    @property
    def device_draws(self):
        """Whether every family draws on a device natively."""
        return all(supports_device_draws(f) for f in self._validate()[0])

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None, *, device=None,
                     dtype=None):  # fmt: skip
        """Draw a batch of tasks, each from a randomly chosen family.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support points per task.
        n_query : int >= 0
            Number of query points per task.
        random_state : None, int, RandomState, Generator or torch.Generator, default=None
            Source of randomness (shared, in order, by the family draws).
        device : None, str or torch.device, default=None
            None: NumPy arrays (float64). A device: the same law drawn in Torch there, every
            family from one local :class:`torch.Generator` seeded by ``random_state`` (a
            family without device draws draws in NumPy, seeded from it, and is copied there).
        dtype : torch.dtype, default=None
            Floating dtype of the tensors (``torch.float32`` when None).

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, n_support, n_features)
        queries : ndarray or tensor of shape (n_tasks, n_query, n_features)
        """
        families, w, d = self._validate()
        B, m, q = check_sizes(n_tasks, n_support, n_query)
        if device is not None:
            gen = torch_generator(random_state, device)
            return self._sample_torch(families, w, d, B, m, q, gen, device, dtype)
        rng = as_generator(random_state)
        family = np.minimum(np.searchsorted(np.cumsum(w), rng.random(B), side="right"), len(w) - 1)
        supports, queries = np.empty((B, m, d)), None
        for j in np.unique(family):
            idx = np.flatnonzero(family == j)
            S, Q = families[j].sample_tasks(idx.size, m, q, random_state=rng)
            if queries is None:
                queries = np.empty((B, Q.shape[1], d))
            if S.shape[1:] != (m, d) or Q.shape[1:] != queries.shape[1:]:
                raise ValueError(
                    f"family {j} returned supports {S.shape} and queries {Q.shape}; every "
                    f"family must return ({idx.size}, {m}, {d}) and ({idx.size}, "
                    f"{queries.shape[1]}, {d})."
                )
            supports[idx], queries[idx] = S, Q
        return supports, queries

    @staticmethod
    def _sample_torch(families, w, d, B, m, q, gen, device, dtype):
        """The device draw of :meth:`sample_tasks`: the family of every task, then each
        family's tasks, in the order of the families (one host sync for their counts)."""
        import torch

        device, dtype = as_device(device), torch_dtype(dtype)
        cum = torch.as_tensor(np.cumsum(w), device=device, dtype=torch.float64)
        u = torch.rand(B, generator=gen, device=device, dtype=torch.float64)
        family = torch.searchsorted(cum, u, right=True).clamp_max(len(w) - 1)
        counts = torch.bincount(family, minlength=len(w)).tolist()
        supports = torch.empty((B, m, d), device=device, dtype=dtype)
        queries = None
        for j, count in enumerate(counts):
            if count == 0:
                continue
            idx = torch.nonzero(family == j)[:, 0]
            S, Q = sample_on_device(families[j], count, m, q, gen, device, dtype)
            if queries is None:
                queries = torch.empty((B, Q.shape[1], d), device=device, dtype=dtype)
            if S.shape[1:] != (m, d) or Q.shape[1:] != queries.shape[1:]:
                raise ValueError(
                    f"family {j} returned supports {tuple(S.shape)} and queries "
                    f"{tuple(Q.shape)}; every family must return ({count}, {m}, {d}) and "
                    f"({count}, {queries.shape[1]}, {d})."
                )
            supports[idx], queries[idx] = S.to(dtype), Q.to(dtype)
        return supports, queries
